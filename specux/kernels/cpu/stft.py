"""STFT and inverse STFT on numpy arrays."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from specux.kernels.cpu import fft
from specux.kernels.cpu.frames import frame_view, overlap_add, pad_signal
from specux.meta.params import StftParams, WindowSpec
from specux.meta.shapes import ola_length
from specux.meta.windows import centered_offset, named_window

# istft divides by the window-sum-square envelope; below this it is not invertible (NOLA).
NOLA_THRESHOLD = 1e-11


def full_window(p: StftParams, window: np.ndarray | None, dtype: np.dtype) -> np.ndarray:
    """The ``n_fft``-sample analysis window: named or given, zero-padded on both sides."""
    if window is None:
        return _named_full_window(p.window, p.win_length, p.n_fft, np.dtype(dtype).name)
    if window.shape[-1] == p.n_fft:
        return window.astype(dtype, copy=False)
    out = np.zeros(p.n_fft, dtype=dtype)
    start = centered_offset(p.win_length, p.n_fft)
    out[start : start + p.win_length] = window
    return out


@functools.lru_cache(maxsize=128)
def _named_full_window(spec: WindowSpec, win_length: int, n_fft: int, dtype: str) -> np.ndarray:
    out = np.zeros(n_fft, dtype=np.float64)
    start = centered_offset(win_length, n_fft)
    out[start : start + win_length] = named_window(spec, win_length)
    out = out.astype(dtype)  # rounded once from float64
    out.flags.writeable = False
    return out


def apply_output(spectrum: np.ndarray, output: str, eps: float) -> np.ndarray:
    """complex -> magnitude / power / dB (``10 log10(max(power, eps))``)."""
    if output == "complex":
        return spectrum
    if output == "magnitude":
        return np.abs(spectrum)
    power = spectrum.real * spectrum.real + spectrum.imag * spectrum.imag
    if output == "power":
        return power
    return 10.0 * np.log10(np.maximum(power, power.dtype.type(eps)))


def stft(
    x: np.ndarray,
    window: np.ndarray | None,
    p: StftParams,
    output: str = "complex",
    eps: float = 1e-10,
) -> np.ndarray:
    """``(..., L)`` real -> ``(..., n_freq, n_frames)``, frame-major in memory (a transposed view).

    ``window`` is the win_length-sample array window, or None for ``p.window``'s named window.
    """
    dtype = fft.complex_dtype(x.dtype) if output == "complex" else x.dtype
    out = framewise(x, window, p, lambda spectrum: apply_output(spectrum, output, eps),
                    p.n_freq, dtype)  # fmt: skip
    return out.swapaxes(-1, -2)


# Frames are processed in chunks of about this many input bytes: small enough that window,
# FFT and epilogue run on data still in cache, large enough to amortize the calls.
_CHUNK_BYTES = 1 << 20
_pool: ThreadPoolExecutor | None = None


@functools.cache
def _blas_controller():
    # OpenBLAS threads spin after each call and steal the cores our chunk threads run on; with
    # threadpoolctl installed, BLAS runs single-threaded inside the chunks (each chunk's GEMM
    # is small). Without it, results are the same, only slower.
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController()


def single_threaded_blas():
    """A context in which BLAS calls run on the calling thread only (a no-op without
    threadpoolctl); specux's CPU kernels make only small GEMMs, which gain nothing from BLAS
    threads and whose spinning workers slow the chunk threads of the next call."""
    controller = _blas_controller()
    return controller.limit(limits=1, user_api="blas") if controller else contextlib.nullcontext()


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=fft.WORKERS, thread_name_prefix="specux")
    return _pool


def framewise(x: np.ndarray, window: np.ndarray | None, p: StftParams,
              epilogue: Callable[[np.ndarray], np.ndarray], width: int,
              dtype: np.dtype) -> np.ndarray:  # fmt: skip
    """``epilogue(FFT(window * frame))`` for every frame: ``(..., n_frames, width)``.

    Chunks of frames run on all cores (numpy and scipy.fft release the GIL); each chunk is
    windowed, transformed and reduced while it is in cache, and written to its own slice of
    the output, so the result does not depend on the number of threads.
    """
    w = full_window(p, window, x.dtype)
    xp = pad_signal(x, p.pad, p.pad_mode) if p.pad else x
    frames = frame_view(xp, p.n_fft, p.hop_length)
    count = frames.shape[-2]
    out = np.empty((*frames.shape[:-2], count, width), dtype=dtype)
    rows = max(1, int(np.prod(frames.shape[:-2])))
    step = max(1, _CHUNK_BYTES // (rows * p.n_fft * x.dtype.itemsize))
    complex_type = fft.complex_dtype(x.dtype)

    def work(start: int) -> None:
        stop = min(count, start + step)
        chunk = frames[..., start:stop, :] * w
        if p.onesided:
            spectrum = fft.r2c(chunk, (-1,), p.fft_norm, workers=1)
        else:
            spectrum = fft.c2c(chunk.astype(complex_type), (-1,), True, p.fft_norm, workers=1)
        out[..., start:stop, :] = epilogue(spectrum)

    starts = range(0, count, step)
    if len(starts) == 1 or fft.WORKERS == 1:
        for start in starts:
            work(start)
        return out
    with single_threaded_blas():
        for _ in _executor().map(work, starts):
            pass
    return out


def envelope(p: StftParams, w: np.ndarray, count: int) -> np.ndarray:
    """Window-sum-square over ``count`` frames: ``sum_t w[n - t hop]**2``, 1-D."""
    return overlap_add(np.broadcast_to(w * w, (count, p.n_fft)), p.hop_length)


def istft_bounds(p: StftParams, count: int, length: int | None) -> tuple[int, int, int]:
    """(start, stop, out_length): samples [start, stop) of the overlap-add are returned."""
    span = ola_length(count, p.n_fft, p.hop_length)
    start = p.pad
    if length is None or length < 0:
        stop = span - p.pad
        return start, stop, stop - start
    return start, min(start + length, span), length


def check_nola(env: np.ndarray, start: int, stop: int) -> None:
    if stop > start:
        lowest = float(np.min(env[start:stop]))
        if not lowest > NOLA_THRESHOLD:
            raise ValueError(
                f"istft: the window-sum-square envelope falls to {lowest:.3g} (< 1e-11) inside "
                "the signal (the NOLA condition fails): use a window and hop_length whose "
                "overlapping squares cover every sample, or center=True"
            )


def istft(
    spectrum: np.ndarray,
    window: np.ndarray | None,
    p: StftParams,
    length: int | None = None,
) -> np.ndarray:
    """``(..., n_freq, n_frames)`` complex -> ``(..., length)`` real."""
    count = spectrum.shape[-1]
    rdtype = fft.real_dtype(spectrum.dtype)
    w = full_window(p, window, rdtype)
    columns = spectrum.swapaxes(-1, -2)
    if p.onesided:
        frames = fft.c2r(columns, (-1,), p.n_fft, p.fft_norm)
    else:
        frames = fft.c2c(columns, (-1,), False, p.fft_norm).real
    summed = overlap_add(frames * w, p.hop_length)
    env = envelope(p, w.astype(np.float64), count)
    start, stop, out_length = istft_bounds(p, count, length)
    check_nola(env, start, stop)
    out = np.zeros((*spectrum.shape[:-2], out_length), dtype=rdtype)
    out[..., : stop - start] = summed[..., start:stop] / env[start:stop].astype(rdtype)
    return out
