"""Linear convolution along the last axis through the FFT (leading axes broadcast)."""

from __future__ import annotations

import numpy as np

from specux.kernels.cpu import fft

try:
    from scipy.fft import next_fast_len as _next_fast_len
except ImportError:  # pragma: no cover - numpy-only installs
    _next_fast_len = None


def fast_length(n: int, real: bool) -> int:
    """A transform length >= n that the FFT library handles fastest (n itself without scipy)."""
    return _next_fast_len(n, real) if _next_fast_len is not None else n


def fftconvolve_full(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(..., Lx) * (..., Ly) -> (..., Lx + Ly - 1)``; real inputs give a real result."""
    length = x.shape[-1] + y.shape[-1] - 1
    real = not (np.iscomplexobj(x) or np.iscomplexobj(y))
    n = fast_length(length, real)
    if real:
        spectrum = _padded(fft.r2c, x, n) * _padded(fft.r2c, y, n)
        out = fft.c2r(spectrum, (-1,), n, "backward")
    else:
        ctype = np.result_type(x.dtype, y.dtype, np.complex64)
        spectrum = _padded(fft.c2c, x.astype(ctype, copy=False), n, True)
        spectrum = spectrum * _padded(fft.c2c, y.astype(ctype, copy=False), n, True)
        out = fft.c2c(spectrum, (-1,), False, "backward")
    return np.ascontiguousarray(out[..., :length])


def _padded(transform, a: np.ndarray, n: int, *forward: bool) -> np.ndarray:
    padded = np.zeros((*a.shape[:-1], n), dtype=a.dtype)
    padded[..., : a.shape[-1]] = a
    return transform(padded, (-1,), *forward, "backward")
