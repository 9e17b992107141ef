"""Backends: the numpy CPU engine (cpu/), and later the generated GPU kernels."""
