"""Source generation: a plan rendered with a dialect gives kernel source text."""
