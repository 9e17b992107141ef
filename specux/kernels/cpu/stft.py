"""STFT and inverse STFT on numpy arrays."""

from __future__ import annotations

import functools

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
    return apply_output(frame_spectra(x, window, p), output, eps).swapaxes(-1, -2)


def frame_spectra(x: np.ndarray, window: np.ndarray | None, p: StftParams) -> np.ndarray:
    """The complex spectra of the windowed frames: ``(..., n_frames, n_freq)``, contiguous."""
    w = full_window(p, window, x.dtype)
    xp = pad_signal(x, p.pad, p.pad_mode) if p.pad else x
    frames = frame_view(xp, p.n_fft, p.hop_length) * w  # the one copy of the framed signal
    if p.onesided:
        return fft.r2c(frames, (-1,), p.fft_norm)
    return fft.c2c(frames.astype(fft.complex_dtype(x.dtype)), (-1,), True, p.fft_norm)


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
