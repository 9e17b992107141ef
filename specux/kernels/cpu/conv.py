"""Linear convolution along the last axis through the FFT (leading axes broadcast)."""

from __future__ import annotations

import math

import numpy as np

from specux.kernels.cpu import fft
from specux.kernels.cpu.stft import scratch

try:
    from scipy.fft import next_fast_len as _next_fast_len
except ImportError:  # pragma: no cover - numpy-only installs
    _next_fast_len = None


def fast_length(n: int, real: bool) -> int:
    """A transform length >= n that the FFT library handles fastest (n itself without scipy)."""
    return _next_fast_len(n, real) if _next_fast_len is not None else n


def fftconvolve_full(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(..., Lx) * (..., Ly) -> (..., Lx + Ly - 1)``; real inputs give a real result.

    Real float32 / float64 operands whose output spans at least OVERLAP_SAVE_BLOCKS frames
    of :func:`overlap_save_block` and OVERLAP_SAVE_LENGTH samples run by overlap-save
    (:func:`_overlap_save`); the rest by whole-length FFTs of both."""
    length = x.shape[-1] + y.shape[-1] - 1
    real = not (np.iscomplexobj(x) or np.iscomplexobj(y))
    if x.dtype in _OVERLAP_SAVE_DTYPES and y.dtype in _OVERLAP_SAVE_DTYPES:
        short = min(x.shape[-1], y.shape[-1])
        block = overlap_save_block(short)
        if short >= 2 and length >= max(OVERLAP_SAVE_BLOCKS * block, OVERLAP_SAVE_LENGTH):
            long_, taps = (x, y) if x.shape[-1] >= y.shape[-1] else (y, x)
            return _overlap_save(long_, taps, block)
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


def _padded(transform, a: np.ndarray, n: int, *forward: bool,
            norm: str = "backward") -> np.ndarray:  # fmt: skip
    padded = np.zeros((*a.shape[:-1], n), dtype=a.dtype)
    padded[..., : a.shape[-1]] = a
    return transform(padded, (-1,), *forward, norm)


# Overlap-save (real float32 / float64 operands, a short kernel of K taps): frames of B =
# max(256, the power of two >= 2K - 1) samples, hop B - K + 1 (at least half of each frame
# kept); a chunk of rows' frames transformed as one batch, multiplied by the kernel's
# spectrum, transformed back. Measured on the 2-core development machine (float32, 64 rows
# of 160000 samples, ms, one run each): whole-length FFTs 113-130 for K = 33 .. 4096;
# overlap-save with K = 33: 30 / 32 / 25 / 32 (B = 128 / 256 / 512 / 1024), K = 257: 32 /
# 32 / 28 (B = 1024 / 2048 / 4096), K = 1031: 36 / 38 / 48 (4096 / 8192 / 16384), K = 4096:
# 61 / 55 / 69 (8192 / 16384 / 32768) -- differences near the runs' noise, so the smallest
# block (its frames and spectra stay in the core's cache). It runs when the output spans at
# least OVERLAP_SAVE_BLOCKS blocks and OVERLAP_SAVE_LENGTH samples: (64, 20000) * 4096 taps
# 9.1 ms against 10.2 whole-length (2.9 blocks); (64, 2000) * 100 taps 0.8 against 0.6, (64,
# 5000) * 100 1.5 against 1.5 (short rows: whole-length FFTs are as fast).
OVERLAP_SAVE_MIN = 256
_OVERLAP_SAVE_DTYPES = (np.float32, np.float64)
OVERLAP_SAVE_BLOCKS = 2
OVERLAP_SAVE_LENGTH = 16384
_ROW_CHUNK_BYTES = 1 << 21  # rows per pool task: about this many bytes of frames
_SERIAL_BYTES = 1 << 22  # less than this in all (frames) runs on the calling thread


def overlap_save_block(short: int) -> int:
    """The CPU overlap-save frame length for a ``short``-tap kernel (see above)."""
    return max(OVERLAP_SAVE_MIN, 1 << max(0, 2 * short - 1).bit_length())


def _overlap_save(x: np.ndarray, taps: np.ndarray, block: int) -> np.ndarray:
    """The full convolution of real ``x`` (..., N) with real ``taps`` (..., K), K <= N, by
    overlap-save in ``block``-point frames: frame f of a row holds samples f * hop - (K - 1)
    .. + block - 1 (zeros outside the signal), hop = block - K + 1, and its circular
    convolution with the taps keeps outputs f * hop .. + hop - 1 at positions K - 1 ..
    block - 1. Chunks of rows (of the leading axes broadcast; fixed by the shapes) are tasks
    on the CPU pool, each transforming its rows' frames as one batch; a row's spectrum is the
    same bits in any batch (docs/design.md), so the result does not depend on the threads."""
    dtype = np.result_type(x.dtype, taps.dtype, np.float32)
    n, k = x.shape[-1], taps.shape[-1]
    length, hop = n + k - 1, block - k + 1
    frames = -(-length // hop)
    batch = np.broadcast_shapes(x.shape[:-1], taps.shape[:-1])
    x_rows = x.reshape(-1, n)
    # each output row's rows of x and of the taps (no copy of a broadcast operand)
    x_of = np.broadcast_to(np.arange(x_rows.shape[0]).reshape(x.shape[:-1]), batch).ravel()
    t_of = np.broadcast_to(np.arange(math.prod(taps.shape[:-1])).reshape(taps.shape[:-1]),
                           batch).ravel()  # fmt: skip
    # the taps' spectra, the 1 / block of the inverse folded in
    spectra = _padded(fft.r2c, taps.reshape(-1, k).astype(dtype, copy=False), block,
                      norm="forward")  # fmt: skip
    out = np.empty((*batch, length), dtype=dtype)
    out_rows = out.reshape(-1, length)
    span = (frames - 1) * hop + block  # the padded row the frames cover

    def work(rows: range) -> None:
        # the chunk's frames, one forward and one inverse batch (mkl_fft keeps one plan a
        # thread: alternating directions row by row made it plan anew every call, 4x slower)
        count = len(rows)
        buf = scratch("overlap-save frames", (count, frames, block), dtype)
        signal = scratch("overlap-save row", (span,), dtype)
        signal[: k - 1] = 0
        signal[k - 1 + n :] = 0
        step = signal.strides[0]
        view = np.lib.stride_tricks.as_strided(signal, (frames, block), (hop * step, step))
        for i, r in enumerate(rows):
            signal[k - 1 : k - 1 + n] = x_rows[x_of[r]]
            buf[i] = view
        spectrum = scratch("overlap-save spectrum", (count * frames, block // 2 + 1),
                           fft.complex_dtype(dtype))  # fmt: skip
        fft.forward_into(buf.reshape(count * frames, block), spectrum, "backward", True)
        spectrum = spectrum.reshape(count, frames, -1)
        spectrum *= spectra[t_of[rows.start : rows.stop], None]
        result = fft.c2r(spectrum, (-1,), block, "forward")
        whole = (frames - 1) * hop
        for i, r in enumerate(rows):
            out_rows[r, :whole].reshape(frames - 1, hop)[...] = result[i, :-1, k - 1 :]
            out_rows[r, whole:] = result[i, -1, k - 1 : k - 1 + length - whole]

    rows = out_rows.shape[0]
    per = max(1, _ROW_CHUNK_BYTES // (frames * block * dtype.itemsize))
    chunks = [range(a, min(rows, a + per)) for a in range(0, rows, per)]
    fft.run_blocks(work, chunks, parallel=rows * frames * block * dtype.itemsize >= _SERIAL_BYTES)
    return out
