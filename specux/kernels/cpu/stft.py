"""STFT and inverse STFT on numpy arrays."""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Callable

import numpy as np

from specux.compat.arrays import numpy_name
from specux.kernels.cpu import fft
from specux.kernels.cpu.frames import (
    frame_view,
    overlap_add,
    overlap_add_padded,
    pad_signal,
    padded_segment,
)
from specux.meta.params import NOLA_RULES, StftParams, WindowSpec, dual_norm
from specux.meta.shapes import n_frames, ola_length
from specux.meta.windows import centered_offset, named_window

# istft divides by the window-sum-square envelope; below this it is not invertible (NOLA).
NOLA_THRESHOLD = 1e-11


def full_window(p: StftParams, window: np.ndarray | None, dtype: np.dtype) -> np.ndarray:
    """The ``n_fft``-sample analysis window: named or given, zero-padded on both sides."""
    if window is None:
        return named_full_window(p.window, p.win_length, p.n_fft, numpy_name(dtype))
    if window.shape[-1] == p.n_fft:
        return window.astype(dtype, copy=False)
    out = np.zeros(p.n_fft, dtype=dtype)
    start = centered_offset(p.win_length, p.n_fft)
    out[start : start + p.win_length] = window
    return out


@functools.lru_cache(maxsize=128)
def named_full_window(spec: WindowSpec, win_length: int, n_fft: int, dtype: str) -> np.ndarray:
    """A named window of ``win_length`` samples centred in ``n_fft`` zeros, in ``dtype``
    (read-only, cached)."""
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
    db_into(power, 10.0, eps, power)
    return power


_LN10 = math.log(10.0)


def db_into(values: np.ndarray, factor: float, eps: float, out: np.ndarray) -> None:
    """``out = factor * log10(max(values, eps))`` (``out`` may be ``values``), computed as
    ``factor / ln(10) * ln(values)`` above ``eps``: an earlier numpy release vectorized the
    float32 natural log and not log10 (400k float32 values on the 2-core development
    machine: 0.79 vs 2.79 ms; numpy 2.4.6 vectorizes both, 0.15 vs 0.11 ms), and both agree
    with float64 to float32's rounding (max abs error 2.35e-7 vs 2.33e-7 for values in
    [1e-6, 100]). Values at or below ``eps`` get the floor ``factor * log10(eps)`` computed
    in float64 and rounded once (-100 for 1e-10 in float32 and float64; the natural log's
    route lands an ulp or two above it, and numpy 2.4.6's float32 log10 gives -10.000001 for
    1e-10), which the dB backward recognizes."""
    dtype = out.dtype.type
    with np.errstate(divide="ignore", invalid="ignore"):  # eps 0: the floor is -inf
        floor = dtype(np.float64(factor) * np.log10(np.float64(dtype(eps))))
    low = values <= eps  # before ``out`` (maybe ``values``) is overwritten
    np.maximum(values, dtype(eps), out=out)
    np.log(out, out=out)
    np.multiply(out, dtype(factor / _LN10), out=out)
    np.copyto(out, floor, where=low)


def power_into(spectrum: np.ndarray, out: np.ndarray) -> None:
    """``out = re * re + im * im`` of a complex spectrum, which is overwritten (squared in place
    through a real view: two passes instead of three, no temporaries)."""
    if not spectrum.flags.c_contiguous:
        np.add(spectrum.real * spectrum.real, spectrum.imag * spectrum.imag, out=out)
        return
    parts = spectrum.view(fft.real_dtype(spectrum.dtype))
    np.multiply(parts, parts, out=parts)
    np.add(parts[..., 0::2], parts[..., 1::2], out=out)


def write_output(spectrum: np.ndarray, output: str, eps: float, out: np.ndarray) -> None:
    """:func:`apply_output` written into ``out`` (``spectrum`` may be overwritten)."""
    if output == "complex":
        out[...] = spectrum
    elif output == "magnitude":
        np.abs(spectrum, out=out)
    else:
        power_into(spectrum, out)
        if output != "power":
            db_into(out, 10.0, eps, out)


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
    if output == "complex":
        return framewise(x, window, p, None, p.n_freq, fft.complex_dtype(x.dtype)).swapaxes(-1, -2)
    out = framewise(x, window, p, lambda spectrum, rows: write_output(spectrum, output, eps, rows),
                    p.n_freq, x.dtype)  # fmt: skip
    return out.swapaxes(-1, -2)


def power_adjoint(x: np.ndarray, window: np.ndarray | None, p: StftParams, power: float,
                  grad: np.ndarray) -> np.ndarray:  # fmt: skip
    """The gradient of ``sum(grad * |stft(x)| ** power)`` with respect to ``x`` (one-sided;
    ``grad`` ``(..., n_freq, n_frames)``): each bin's ``grad e |X| ** (e - 2) X`` (zero where
    X is, for e < 2) weighted for the one-sided spectrum, the inverse real FFT of every
    frame, the window, the overlap-add folded through the padding. A signal a pool task
    (:func:`_power_adjoint_rows` on one row, its spectrum and frames in cache); every step
    works row by row, so the bits are those of the whole batch at once."""
    batch, length = x.shape[:-1], x.shape[-1]
    n_rows = math.prod(batch)
    x2 = x.reshape(n_rows, length)
    # a row's cotangent by its index: reshaping a cotangent broadcast over a leading axis
    # would copy it whole
    grad_b = np.broadcast_to(grad, (*batch, *grad.shape[-2:]))
    out = np.empty((n_rows, length), dtype=x.dtype)

    def work(item: tuple[int, int]) -> None:
        r0, r1 = item
        g = _batch_rows(grad_b, batch, r0, r1)
        out[r0:r1] = _power_adjoint_rows(x2[r0:r1], window, p, power, g)

    row_bytes = grad.shape[-1] * p.n_fft * x.itemsize  # a row's frames, as framewise counts
    fft.run_blocks(work, row_ranges(n_rows, row_bytes),
                   parallel=n_rows * row_bytes >= _SERIAL_BYTES)  # fmt: skip
    return out.reshape(x.shape)


def _batch_row(a: np.ndarray, batch: tuple[int, ...], row: int) -> np.ndarray:
    """Row ``row`` (C order) of ``a``'s leading ``batch`` axes, as a view: reshaping ``a`` to
    rows would copy it whole when an axis is broadcast (stride 0) or strided apart."""
    return a[np.unravel_index(row, batch)] if batch else a


def _batch_rows(a: np.ndarray, batch: tuple[int, ...], r0: int, r1: int) -> np.ndarray:
    """Rows ``r0 .. r1`` (C order) of ``a``'s leading ``batch`` axes as one leading axis: a
    view for one row, else a copy of those rows only (:func:`row_ranges` makes blocks of
    several rows only of short rows)."""
    if r1 - r0 == 1:
        return _batch_row(a, batch, r0)[None]
    return a[np.unravel_index(np.arange(r0, r1), batch)]


def _power_adjoint_rows(x: np.ndarray, window: np.ndarray | None, p: StftParams, power: float,
                        grad: np.ndarray) -> np.ndarray:  # fmt: skip
    """:func:`power_adjoint` of a batch of rows, stage by stage over all of them."""
    spectrum = np.swapaxes(stft(x, window, p, "complex"), -1, -2)  # (..., n_frames, n_freq)
    half = np.full(p.n_freq, 0.5, dtype=x.dtype)  # the one-sided spectrum's weights
    half[[0] + ([p.n_fft // 2] if p.n_fft % 2 == 0 else [])] = 1.0
    scale = np.swapaxes(grad, -1, -2) * half  # a new real array (..., n_frames, n_freq)
    if power == 2.0:
        scale *= 2.0
    else:
        magnitude = np.abs(spectrum)
        nonzero = magnitude > 0
        np.power(magnitude, power - 2.0, out=magnitude, where=nonzero)
        scale *= np.where(nonzero, power * magnitude, 0.0)
    np.multiply(spectrum, scale, out=spectrum)  # the stft's own frame-major array
    frames = fft.c2r(spectrum, [-1], p.n_fft, dual_norm(p.fft_norm), workers=fft.thread_workers())
    frames *= full_window(p, window, x.dtype)
    return overlap_add_padded(frames, x.shape[-1], p.hop_length, p.pad, p.pad_mode)


# Frames are processed in blocks of at most this many bytes of windowed frames: large enough
# to amortize the per-block calls (measured on the 2-core development VM, one process, the
# bench workloads interleaved, two workers: the median over 8 rounds was 4-12% lower with
# 4 MiB blocks than with 1 MiB ones for mel, stft_c and stft_p, the minima mixed; 512 KiB
# blocks were slower still -- though one worker alone did best with them). A row shorter
# than that is still cut into blocks of at least _MIN_BLOCK_BYTES when the batch has fewer
# than _MIN_BLOCKS of them, so a few long rows use every core; and a call with less than
# _SERIAL_BYTES of frames in all runs on the calling thread: handing blocks to the pool
# costs more than it saves there (same VM, medians of 30-100 calls: a (1, 16000) mel 1.6-1.9
# ms in 4 blocks on the pool, 0.45-0.83 ms on the calling thread). The constants do not
# depend on the core count: the blocks (and so the bits of the GEMM epilogues) depend on
# the input's shape only.
_CHUNK_BYTES = 1 << 22
_MIN_BLOCKS = 8
_MIN_BLOCK_BYTES = 1 << 20
_SERIAL_BYTES = 1 << 22
# Signals (all rows, padded) up to this size are framed from one padded copy (one window
# multiply a block instead of one a region, and no padded edge segments); longer ones read
# their inner frames in place.
_PADDED_COPY_BYTES = 1 << 18
# A pool task takes one signal, or neighbouring ones where each is short: a task of less than
# _TASK_BYTES takes its neighbours up to that size, or more while _MIN_TASKS tasks remain, up
# to _CHUNK_BYTES. 10 ** 5 signals of 16 samples had made 10 ** 5 tasks of a few numpy calls
# each: stft 6.2 s, istft 13.4 s and the power spectrogram's backward 35.8 s on the 2-core
# development VM (torch 0.4-0.5 s for the last, forward included); in tasks of rows 0.05,
# 0.09 and 0.24 s (bench/cpu.py's *_short workloads). The tasks depend on the shape only,
# as the blocks do.
_TASK_BYTES = 1 << 18
_MIN_TASKS = 256


def row_ranges(rows: int, row_bytes: int) -> list[tuple[int, int]]:
    """``(r0, r1)``: consecutive rows a pool task, of ``row_bytes`` each (see _TASK_BYTES)."""
    row_bytes = max(row_bytes, 1)
    per = max(1, min(_CHUNK_BYTES // row_bytes, max(rows // _MIN_TASKS, _TASK_BYTES // row_bytes)))
    return [(r, min(rows, r + per)) for r in range(0, rows, per)]


_scratch = threading.local()


def scratch(name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A per-thread reusable buffer (contents undefined): chunk temporaries are not reallocated
    on every chunk and stay in the calling thread's cache."""
    buffers = _scratch.__dict__
    key = (name, dtype)  # a numpy type or dtype: hashable as given
    size = math.prod(shape)
    buf = buffers.get(key)
    if buf is None or buf.size < size:
        buf = buffers[key] = np.empty(max(size, 1), dtype=dtype)
    return buf[:size].reshape(shape)


@functools.cache
def _blas_libraries() -> tuple:
    # OpenBLAS threads spin after each call and steal the cores our chunk threads run on; with
    # threadpoolctl installed, BLAS runs single-threaded inside the chunks (each chunk's GEMM
    # is small). Without it, results are the same, only slower. The BLAS libraries loaded at
    # the first call are the ones limited (threadpoolctl's limit() would look them up again
    # on every call: ~25 us, most of a small call's bookkeeping).
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return ()
    return tuple(ThreadpoolController().select(user_api="blas").lib_controllers)


class _OneBlasThread:
    """Sets every BLAS library to one thread on entry and restores what it changed on exit."""

    __slots__ = ("_changed",)

    def __enter__(self) -> None:
        self._changed = []
        for library in _blas_libraries():
            threads = library.get_num_threads()
            if threads != 1:
                library.set_num_threads(1)
                self._changed.append((library, threads))

    def __exit__(self, *exc) -> None:
        for library, threads in reversed(self._changed):
            library.set_num_threads(threads)


def single_threaded_blas():
    """A context in which BLAS calls run on the calling thread only (a no-op without
    threadpoolctl); specux's CPU kernels make only small GEMMs, which gain nothing from BLAS
    threads and whose spinning workers slow the chunk threads of the next call."""
    return _OneBlasThread() if _blas_libraries() else contextlib.nullcontext()


def _frame_regions(x: np.ndarray, p: StftParams, count: int) -> list[tuple[int, int, np.ndarray]]:
    """``(first, stop, frames)``: frames ``first .. stop`` of the padded 2-D signal as strided
    views ``(rows, stop - first, n_fft)``. Frames entirely inside ``x`` are read from ``x``
    itself; only the few frames that reach into the padding come from small padded copies."""
    n_fft, hop, pad, length = p.n_fft, p.hop_length, p.pad, x.shape[-1]
    if pad == 0:
        return [(0, count, frame_view(x, n_fft, hop)[:, :count])]
    if x.shape[0] * (length + 2 * pad) * x.itemsize <= _PADDED_COPY_BYTES:
        # a short signal: one padded copy, so each block is one FFT call and one epilogue
        return [(0, count, frame_view(pad_signal(x, pad, p.pad_mode), n_fft, hop)[:, :count])]
    lo = -(-pad // hop)
    hi = min(count, (pad + length - n_fft) // hop + 1) if pad + length >= n_fft else lo
    if hi <= lo:
        xp = pad_signal(x, pad, p.pad_mode)
        return [(0, count, frame_view(xp, n_fft, hop)[:, :count])]
    regions = []
    if lo > 0:
        seg = padded_segment(x, pad, p.pad_mode, 0, (lo - 1) * hop + n_fft)
        regions.append((0, lo, frame_view(seg, n_fft, hop)[:, :lo]))
    inner = x[:, lo * hop - pad :]
    regions.append((lo, hi, frame_view(inner, n_fft, hop)[:, : hi - lo]))
    if hi < count:
        seg = padded_segment(x, pad, p.pad_mode, hi * hop, (count - 1) * hop + n_fft)
        regions.append((hi, count, frame_view(seg, n_fft, hop)[:, : count - hi]))
    return regions


def framewise(x: np.ndarray, window: np.ndarray | None, p: StftParams,
              epilogue: Callable[[np.ndarray, np.ndarray], None] | None, width: int,
              dtype: np.dtype) -> np.ndarray:  # fmt: skip
    """``epilogue(FFT(window * frames), out)`` for blocks of frames: ``(..., n_frames, width)``.

    ``epilogue(spectrum, out)`` gets the ``(n, n_freq)`` spectrum of ``n`` consecutive frames
    of one signal (a per-thread buffer: it may be overwritten) and writes their ``(n, width)``
    rows of the result into ``out`` (C-contiguous). Without an epilogue the spectrum itself is
    the result (``width = n_freq``, complex ``dtype``) and is transformed straight into it.
    Blocks run on all cores (numpy and scipy.fft release the GIL); each is windowed into a
    per-thread buffer, transformed and reduced while it is in cache, and written to its own
    slice of the output, so the result does not depend on the number of threads.
    """
    w = full_window(p, window, x.dtype)
    batch, length = x.shape[:-1], x.shape[-1]
    x2 = x.reshape(-1, length)
    rows = x2.shape[0]
    count = n_frames(length, p.n_fft, p.hop_length, p.pad)
    out = np.empty((*batch, max(count, 0), width), dtype=dtype)
    if count <= 0 or rows == 0:
        return out
    out2 = out.reshape(rows, count, width)
    regions = _frame_regions(x2, p, count)
    frame_bytes = p.n_fft * x.dtype.itemsize
    step = max(1, _CHUNK_BYTES // frame_bytes)
    per_row = -(-count // step)
    if rows * per_row < _MIN_BLOCKS:  # a small batch: shorter blocks for the workers
        cuts = count * frame_bytes // _MIN_BLOCK_BYTES  # blocks of >= _MIN_BLOCK_BYTES
        per_row = max(per_row, min(-(-_MIN_BLOCKS // rows), cuts))
    step = -(-count // per_row)  # equal blocks
    complex_type = fft.complex_dtype(x.dtype)
    n_fft = p.n_fft

    def work(item: tuple[int, int, int, int]) -> None:
        # The block's windowed frames are gathered from each region they lie in (the edge
        # regions hold a frame or two), then transformed and reduced together: one FFT call
        # and one epilogue a block, each numpy call there being a GIL hand-off between the
        # pool threads. A block of several rows holds each row's every frame.
        r0, r1, start, stop = item
        buf = scratch("frames", (r1 - r0, stop - start, n_fft),
                      x.dtype if p.onesided else complex_type)  # fmt: skip
        for first, last, frames in regions:
            a, b = max(start, first), min(stop, last)
            if a < b:
                np.multiply(frames[r0:r1, a - first : b - first], w,
                            out=buf[:, a - start : b - start])  # fmt: skip
        buf = buf.reshape(-1, n_fft)
        dst = out2[r0:r1, start:stop].reshape(-1, width)  # whole rows or one row's part: a view
        if epilogue is None:
            fft.forward_into(buf, dst, p.fft_norm, p.onesided)
        else:
            spectrum = scratch("spectrum", (buf.shape[0], p.n_freq), complex_type)
            fft.forward_into(buf, spectrum, p.fft_norm, p.onesided)
            epilogue(spectrum, dst)

    if per_row == 1:  # whole rows a block: short rows share one (row_ranges)
        items = [(r0, r1, 0, count) for r0, r1 in row_ranges(rows, count * frame_bytes)]
    else:
        items = [(r, r + 1, s, min(count, s + step)) for r in range(rows)
                 for s in range(0, count, step)]  # fmt: skip
    fft.run_blocks(work, items, parallel=rows * count * frame_bytes >= _SERIAL_BYTES)
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


def check_nola(env: np.ndarray, start: int, stop: int, p: StftParams | None = None) -> None:
    """Raise where the envelope over [start, stop) falls to NOLA_THRESHOLD or below, with the
    advice that applies to ``p`` (center=True where it is off; a shorter length where only
    the samples past the frames' natural end fail)."""
    if stop > start:
        part = env[start:stop]
        lowest = float(np.min(part))
        if not lowest > NOLA_THRESHOLD:
            advice = "use a window and hop_length whose overlapping squares cover every sample"
            if p is not None and not p.center:
                advice += ", or center=True"
            first = int(np.argmax(~(part > NOLA_THRESHOLD)))  # the first failing output sample
            if p is not None and start + first >= len(env) - p.pad:  # past the natural end
                advice += f", or a length of at most {first}"
            raise ValueError(
                f"istft: the window-sum-square envelope falls to {lowest:.3g} (< 1e-11) inside "
                f"the signal (the NOLA condition fails): {advice}"
            )


def envelope_divisor(env: np.ndarray, start: int, stop: int, p: StftParams, nola: str,
                     dtype: np.dtype) -> np.ndarray:  # fmt: skip
    """The envelope over [start, stop) that the overlap-add is divided by (``env``'s float64).
    ``nola="raise"`` (:func:`check_nola`) raises where it falls to NOLA_THRESHOLD or below;
    ``"keep"`` is librosa's rule: where it is at most ``dtype``'s smallest normal number the
    divisor is 1, leaving the overlap-add as it is (0 where the window vanishes: the
    envelope sums the squares of the very window values that weight the frames)."""
    part = env[start:stop]
    if nola == "raise":
        check_nola(env, start, stop, p)
        return part
    if nola != "keep":
        raise ValueError(f"nola must be one of {NOLA_RULES}, got {nola!r}")
    return np.where(part > np.finfo(dtype).tiny, part, 1.0)


def istft(
    spectrum: np.ndarray,
    window: np.ndarray | None,
    p: StftParams,
    length: int | None = None,
    nola: str = "raise",
) -> np.ndarray:
    """``(..., n_freq, n_frames)`` complex -> ``(..., length)`` real (``nola``:
    :func:`envelope_divisor`)."""
    count = spectrum.shape[-1]
    rdtype = fft.real_dtype(spectrum.dtype)
    w = full_window(p, window, rdtype)
    env = envelope(p, w.astype(np.float64), count)
    start, stop, out_length = istft_bounds(p, count, length)
    inverse = envelope_divisor(env, start, stop, p, nola, rdtype).astype(rdtype)
    batch = spectrum.shape[:-2]
    out = np.empty((*batch, out_length), dtype=rdtype)
    n_rows = math.prod(batch)
    out2 = out.reshape(n_rows, out_length)

    def work(item: tuple[int, int]) -> None:
        # A signal at a time (or a few short ones), its frames in cache from the inverse FFT
        # through the window and the overlap-add to the division (each row's transform does
        # not depend on its batch, so the bits are those of one call over all rows).
        r0, r1 = item
        columns = _batch_rows(spectrum, batch, r0, r1).swapaxes(-1, -2)
        workers = fft.thread_workers()
        if p.onesided:
            frames = fft.c2r(columns, (-1,), p.n_fft, p.fft_norm, workers=workers)
        else:
            frames = fft.c2c(columns, (-1,), False, p.fft_norm, workers=workers).real
        frames *= w  # a fresh array from the inverse FFT
        summed = overlap_add(frames, p.hop_length)
        np.divide(summed[..., start:stop], inverse, out=out2[r0:r1, : stop - start])
        out2[r0:r1, stop - start :] = 0

    if count > 0:
        row_bytes = spectrum.shape[-2] * count * spectrum.itemsize
        fft.run_blocks(work, row_ranges(n_rows, row_bytes),
                       parallel=n_rows * row_bytes >= _SERIAL_BYTES)  # fmt: skip
    else:
        out[...] = 0
    return out
