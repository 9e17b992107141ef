"""FFT primitives on numpy arrays: complex-to-complex, real-to-complex, complex-to-real."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from specux.meta import dtypes

try:  # scipy.fft keeps float32 in float32 and runs batches on several threads.
    import scipy.fft as _scipy_fft
except ImportError:  # pragma: no cover - exercised in the torch-less/scipy-less CI job
    _scipy_fft = None

WORKERS = max(1, os.cpu_count() or 1)

# pocketfft's binding in scipy takes an output array (scipy.fft's public functions do not):
# the framewise kernels transform each block of frames straight into the result or into a
# reused buffer, saving an allocation and a copy per block. It is private, so it is used only
# after checking, once, that it gives scipy.fft's answer; otherwise the copy is made.
_FORWARD_INORM = {"backward": 0, "ortho": 1, "forward": 2}


def _private_pocketfft():
    try:
        from scipy.fft._pocketfft import pypocketfft as binding

        x = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)[::2, 1:] ** 0.5
        out = np.empty((4, 3), dtype=np.complex64)
        binding.r2c(x, (1,), True, 1, out, 1)
        if not np.allclose(out, _scipy_fft.rfft(x, norm="ortho"), rtol=1e-5, atol=1e-5):
            return None
        z = np.ascontiguousarray(out[:, ::-1])
        out2 = np.empty_like(z)
        binding.c2c(z, (1,), True, 0, out2, 1)
        if not np.allclose(out2, _scipy_fft.fft(z), rtol=1e-5, atol=1e-5):
            return None
        return binding
    except Exception:  # pragma: no cover - any other scipy layout: fall back to a copy
        return None


_pocketfft = _private_pocketfft() if _scipy_fft is not None else None


def complex_dtype(real_dtype: np.dtype) -> np.dtype:
    return np.dtype(dtypes.complex_of(np.dtype(real_dtype).name))


def real_dtype(complex_dtype_: np.dtype) -> np.dtype:
    return np.dtype(dtypes.real_of(np.dtype(complex_dtype_).name))


def _fresh(result: np.ndarray, source: np.ndarray, dtype: np.dtype) -> np.ndarray:
    # Older numpy computes float32 FFTs in float64; the result must keep the input's precision
    # and must never alias the input (torch custom ops may not return views of their inputs).
    result = result.astype(dtype, copy=False)
    if np.shares_memory(result, source):
        result = result.copy()
    return result


def c2c(x: np.ndarray, dims: Sequence[int], forward: bool, norm: str, *,
        workers: int = WORKERS) -> np.ndarray:  # fmt: skip
    """Complex FFT (``forward``) or inverse FFT over ``dims`` with numpy's ``norm``."""
    dims = tuple(dims)
    if x.size == 0 or not dims:
        return np.array(x, dtype=x.dtype, copy=True)
    if _scipy_fft is not None:
        f = _scipy_fft.fftn if forward else _scipy_fft.ifftn
        out = f(x, axes=dims, norm=norm, workers=workers)
    else:
        f = np.fft.fftn if forward else np.fft.ifftn
        out = f(x, axes=dims, norm=norm)
    return _fresh(out, x, x.dtype)


def r2c(x: np.ndarray, dims: Sequence[int], norm: str, *, workers: int = WORKERS) -> np.ndarray:
    """Real FFT over ``dims``; the last of them keeps ``n // 2 + 1`` bins."""
    dims = tuple(dims)
    out_dtype = complex_dtype(x.dtype)
    if x.size == 0:
        shape = list(x.shape)
        shape[dims[-1]] = x.shape[dims[-1]] // 2 + 1
        return np.zeros(shape, dtype=out_dtype)
    if _scipy_fft is not None:
        out = _scipy_fft.rfftn(x, axes=dims, norm=norm, workers=workers)
    else:
        out = np.fft.rfftn(x, axes=dims, norm=norm)
    return _fresh(out, x, out_dtype)


def c2r(x: np.ndarray, dims: Sequence[int], last_size: int, norm: str) -> np.ndarray:
    """Inverse real FFT over ``dims`` giving ``last_size`` samples on the last of them.

    The imaginary parts of the DC bin (and of the Nyquist bin for even sizes) are ignored.
    """
    dims = tuple(dims)
    out_dtype = real_dtype(x.dtype)
    sizes = [x.shape[d] for d in dims[:-1]] + [last_size]
    if x.size == 0:
        shape = list(x.shape)
        shape[dims[-1]] = last_size
        return np.zeros(shape, dtype=out_dtype)
    if _scipy_fft is not None:
        out = _scipy_fft.irfftn(x, s=sizes, axes=dims, norm=norm, workers=WORKERS)
    else:
        out = np.fft.irfftn(x, s=sizes, axes=dims, norm=norm)
    return _fresh(out, x, out_dtype)


def forward_into(x: np.ndarray, out: np.ndarray, norm: str, real: bool) -> np.ndarray:
    """Forward FFT of ``x`` over its last axis written into ``out`` (C-contiguous, complex of
    ``x``'s precision, ``n // 2 + 1`` bins when ``real``); one thread. Returns ``out``."""
    kinds = (np.float32, np.float64) if real else (np.complex64, np.complex128)
    if (
        _pocketfft is not None
        and x.dtype in kinds
        and out.dtype == (complex_dtype(x.dtype) if real else x.dtype)
        and out.flags.c_contiguous
        and norm in _FORWARD_INORM
    ):
        f = _pocketfft.r2c if real else _pocketfft.c2c
        f(x, (x.ndim - 1,), True, _FORWARD_INORM[norm], out, 1)
        return out
    out[...] = r2c(x, (-1,), norm, workers=1) if real else c2c(x, (-1,), True, norm, workers=1)
    return out
