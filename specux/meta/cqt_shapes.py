"""CQT / VQT output shapes (fake kernels, the numpy engine and the ops all use these)."""

from __future__ import annotations

Shape = tuple[int, ...]


def cqt_n_frames(length: int, hop_length: int) -> int:
    """Frames centred at ``t * hop_length`` for ``t = 0 .. length // hop_length``."""
    return 1 + length // hop_length


def cqt_shape(shape: Shape, n_bins: int, hop_length: int) -> Shape:
    """``(..., L)`` -> ``(..., n_bins, 1 + L // hop_length)``."""
    return (*shape[:-1], n_bins, cqt_n_frames(shape[-1], hop_length))


def cqt_adjoint_shape(shape: Shape, length: int) -> Shape:
    """``(..., n_bins, n_frames)`` -> ``(..., length)``."""
    return (*shape[:-2], length)
