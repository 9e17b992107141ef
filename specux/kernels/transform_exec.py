"""Run the spectral transforms' kernels on any backend that can allocate, upload and launch
(the CUDA runtime with torch tensors, the host emulation with numpy buffers).

Written once against :class:`fft_exec.Backend` plus ``constant(key, values)``, which uploads
a host array as it is (index tables, real windows and weights) and caches it by key.
Every function takes buffers already allocated by the caller and launches into them.
"""

from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from specux import options
from specux.kernels.codegen.gather import (
    CORRELATE_LANES,
    CORRELATE_SPLIT,
    CORRELATE_TAPS,
    CORRELATE_THREADS,
    FOLD_LANES,
    FOLD_MMA_COLUMNS,
    FOLD_MMA_TERMS,
    FOLD_RESIDUES,
    FOLD_TERMS,
    FOLD_THREADS,
    FRAME_OUTPUTS,
    GATHER_THREADS,
    PROJECT_PEAK_CHUNKS,
    ROWMAX_THREADS,
    GatherSpec,
    correlate_columns,
    correlate_frames,
    correlate_shared_bytes,
    fold_bins,
    fold_shared_bytes,
    fold_tile,
    mma_splits,
    mma_tile,
    project_fits,
    project_option,
    project_rows,
    project_shared_bytes,
    project_threads,
)
from specux.kernels.cpu import cqt as cpu_cqt
from specux.kernels.cpu import frames as cpu_frames
from specux.kernels.fft_exec import (
    BankReduce,
    Framing,
    OverlapAdd,
    Strides,
    _roots,
    adjoint_fusable,
    convolve_1d,
    istft_1d,
    ola_fusable,
    stft_1d,
    stft_fusable,
    transform_1d,
)
from specux.kernels.plan import factorize, ola_frames
from specux.meta import filters, matrices
from specux.meta.cqt_params import ConstantQSpec
from specux.meta.cqt_shapes import cqt_n_frames
from specux.meta.matrices import MatrixSpec
from specux.meta.params import StftParams


@functools.lru_cache(maxsize=128)
def pad_sources(length: int, pad: int, mode: str) -> np.ndarray:
    """int64 source index of every padded sample (``pad`` before the signal, then ``pad``
    after it): the CPU framing's index map, so both devices pad alike. 64 bits: the sources
    of a signal of 2**31 samples or more do not fit in an int (read as ``long long``)."""
    out = np.concatenate(cpu_frames.pad_sources(length, pad, mode))
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=128)
def fold_table(length: int, pad: int, mode: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The padding's adjoint as int64 CSR (targets, offsets, positions): sample ``targets[q]``
    receives the padded positions ``positions[offsets[q]:offsets[q + 1]]`` (positions counted
    in the padded signal)."""
    sources = pad_sources(length, pad, mode)
    positions = np.concatenate([np.arange(pad), pad + length + np.arange(pad)])
    order = np.argsort(sources, kind="stable")
    targets, starts = np.unique(sources[order], return_index=True)
    offsets = np.append(starts, len(order))
    frozen = tuple(np.ascontiguousarray(a, dtype=np.int64) for a in
                   (targets, offsets, positions[order]))  # fmt: skip
    for a in frozen:
        a.flags.writeable = False
    return frozen  # type: ignore[return-value]


def _launch(backend, spec: GatherSpec, total: int, args: tuple) -> None:
    if total > 0:
        backend.launch(spec, -(-total // GATHER_THREADS), GATHER_THREADS, 0, args)


def _args(backend, src, dst, a=None, b=None, c=None, *, rows=0, count=0, size=0, frame_len=0,
          hop=0, pad=0, sig_len=0, start=0, stop=0, eps=0.0, factor=0.0,
          exponent=0.0) -> tuple:  # fmt: skip
    def ptr(buffer):
        return backend.pointer(buffer) if buffer is not None else 0

    return (ptr(src), ptr(dst), ptr(a), ptr(b), ptr(c), rows, count, size, frame_len, hop,
            pad, sig_len, start, stop, float(eps), float(factor), float(exponent))  # fmt: skip


def _padding(backend, length: int, pad: int, mode: str) -> tuple[str, Any]:
    """(pad kind, pad table buffer or None) of a ``mode`` padding by ``pad`` samples."""
    if pad == 0 or mode == "constant":
        return "constant", None
    return "indexed", backend.constant(("pad", length, pad, mode), pad_sources(length, pad, mode))


def frame(backend, src, dst, *, rows: int, sig_len: int, frame_len: int, hop: int, pad: int,
          mode: str, count: int, storage: str, precision: str,
          pairs: bool = False) -> None:  # fmt: skip
    """``dst[r, t, j] = pad(src)[r, t * hop + j]`` for contiguous rows of ``sig_len``;
    ``pairs`` (constant ``mode``): frames ``f = r * count + t`` interleaved two by two,
    ``dst[f // 2, j, f % 2]``, the real and imaginary parts of ``ceil(rows * count / 2)``
    complex rows (a zero frame completes the last pair when ``rows * count`` is odd; with an
    odd ``count`` pairs straddle rows, which :meth:`SpectralCqt.blocks` avoids)."""
    kind, table = _padding(backend, sig_len, pad, mode)
    if pairs:
        if kind != "constant":
            raise ValueError(f"frames in pairs take a constant padding, not mode={mode!r}")
        kind = "pairs"
    spec = GatherSpec("frame", storage, precision, kind)
    args = _args(backend, src, dst, table, rows=rows, count=count, frame_len=frame_len, hop=hop,
                 pad=pad, sig_len=sig_len)  # fmt: skip
    frames = rows * count + (rows * count % 2 if pairs else 0)
    _launch(backend, spec, frames * -(-frame_len // FRAME_OUTPUTS), args)


def folds(pad: int, mode: str) -> bool:
    """Whether :func:`overlap_add` folds padded samples back (a second launch)."""
    return pad > 0 and mode != "constant"


def overlap_add(backend, src, dst, *, rows: int, sig_len: int, frame_len: int, hop: int,
                pad: int, mode: str, count: int, storage: str, precision: str,
                window=None) -> None:  # fmt: skip
    """The adjoint of :func:`frame`: overlap-add, read at the signal's samples, plus the
    padded samples folded back onto their sources (a second launch for the fold). A real
    ``window`` (``frame_len`` values of the precision) weights every frame first; only
    where nothing is folded (:func:`folds` false)."""
    common = dict(rows=rows, count=count, frame_len=frame_len, hop=hop, pad=pad,
                  sig_len=sig_len)  # fmt: skip
    if window is not None and folds(pad, mode):
        raise ValueError("a windowed overlap-add folds no padding: weight the frames first")
    spec = GatherSpec("ola", storage, precision, "" if window is None else "window")
    _launch(backend, spec, rows * sig_len, _args(backend, src, dst, window, **common))
    if not folds(pad, mode) or sig_len == 0:
        return
    size, tables = _fold_tables(backend, sig_len, pad, mode)
    spec = GatherSpec("fold", storage, precision)
    args = _args(backend, src, dst, *tables, size=size, **common)
    _launch(backend, spec, rows * size, args)


def _fold_tables(backend, sig_len: int, pad: int, mode: str) -> tuple[int, tuple]:
    """(targets, the device's (targets, offsets, positions)) of :func:`fold_table`."""
    host = fold_table(sig_len, pad, mode)
    tables = tuple(backend.constant(("fold", part, sig_len, pad, mode), values)
                   for part, values in zip("top", host))  # fmt: skip
    return len(host[0]), tables


def _check_pairs(backend, window, precision: str, what: str) -> None:
    """The overlap-add kernels read the window in aligned pairs of values."""
    if backend.pointer(window) % (16 if precision == "float64" else 8):
        raise ValueError(f"{what} reads the window in aligned pairs of values")


def istft_overlap_add(backend, frames, dst, window, envelope, *, rows: int, count: int,
                      frame_len: int, hop: int, start: int, stop: int, out_len: int,
                      storage: str, precision: str) -> None:  # fmt: skip
    """``dst[r, i] = ola(frames * window)[r, start + i] * envelope[i]`` below ``stop``, else
    0; ``frames`` contiguous ``(rows, count, frame_len)``, ``envelope`` the window envelope's
    ``stop - start`` reciprocals (native.istft_envelope)."""
    spec = GatherSpec("istft", storage, precision)
    args = _args(backend, frames, dst, window, envelope, rows=rows, count=count, size=out_len,
                 frame_len=frame_len, hop=hop, start=start, stop=stop)  # fmt: skip
    _launch(backend, spec, rows * out_len, args)


def istft_fusable(n_fft: int, hop: int, precision: str, onesided: bool, count: int,
                  out_len: int) -> bool:  # fmt: skip
    """Whether :func:`istft` runs (one-sided spectra whose frames' inverse FFT is a c2r
    block kernel that overlap-adds them: fft_exec.ola_fusable) for ``count`` frames and
    outputs of ``out_len`` samples, where the kernel's and the seam gather's 32-bit positions
    stay below 2 ** 31: the kernel's run to the end of its last block, the frames rounded
    up to whole blocks of plan.ola_frames plus a frame's n_fft, whatever ``out_len`` is (a
    short ``length`` once let them pass 2 ** 31, undefined behaviour though no store
    followed)."""
    if not (onesided and ola_fusable(n_fft, hop, precision)):
        return False
    per_block = ola_frames(n_fft, hop, 1, precision)  # the frame count needs no thread count
    return (count + per_block) * hop + n_fft + out_len < 2**31


def istft(backend, spectrum, dst, window, envelope, *, signals: int, strides: tuple[int, int, int],
          count: int, n_fft: int, hop: int, start: int, stop: int, out_len: int, scale: float,
          storage: str, precision: str) -> None:  # fmt: skip
    """The istft of one-sided spectra ``(signals, n_fft // 2 + 1, count)`` (element
    ``strides`` of the three axes: a contiguous array or the stft's transposed view of
    frame-major memory alike) into contiguous rows of ``out_len`` samples in one block
    kernel and a seam gather (fft_exec.istft_1d; :func:`istft_fusable` must hold): each
    frame's inverse real FFT times the ``window``, overlap-added, padded positions [start,
    stop) times ``scale`` and ``envelope`` (the window envelope's ``stop - start``
    reciprocals), 0 after: :func:`istft_overlap_add` of the inverse FFT's frames (scaled by
    ``scale``) up to rounding -- the scale applies to each sum rather than each frame, and
    two blocks' frames are summed apart at the seams."""
    _check_pairs(backend, window, precision, "the istft kernel")
    signal, bin_, frame_ = strides
    ola = OverlapAdd(hop, count, out_len, start, stop)
    istft_1d(backend, spectrum, dst, window, envelope, n=n_fft, ola=ola, signals=signals,
             scale=scale, precision=precision, src_storage=storage, dst_storage=storage,
             src_strides=Strides(count, signal, frame_, bin_))  # fmt: skip


def bank(backend, src, dst, bands, weights, *, rows: int, n_in: int, n_out: int,
         exponent: float, db_factor: float | None, eps: float, storage: str,
         precision: str) -> None:  # fmt: skip
    """``dst[r, m] = sum_k weights[band m] * src[r, k] ** exponent`` over band m's bins
    (``bands`` and ``weights``: :func:`bank_tables`), in dB when ``db_factor``."""
    option = "db" if db_factor is not None else "power"
    if exponent != 1.0:
        option += "pow"
    spec = GatherSpec("bank", storage, precision, option)
    args = _args(backend, src, dst, bands, weights, rows=rows, size=n_out, frame_len=n_in,
                 eps=eps, factor=db_factor or 0.0, exponent=exponent)  # fmt: skip
    _launch(backend, spec, rows * n_out, args)


# Whether project runs dense matrices on the projection kernel (codegen.gather._project)
# rather than the tiled correlation. The two give the same bits; the kernel is faster
# (tools/ab.py on an H100, 2 rounds: mfcc 0.1098 -> 0.1070 ms, mfcc forward + backward
# 0.7223 -> 0.6973; docs/benchmarks.md). A switch, so tools/ab.py and the tests can put
# the two side by side.
_PROJECT_KERNEL = True


def projects_clipped(dense: bool, n_in: int, storage: str, precision: str) -> bool:
    """Whether :func:`project` clips its rows itself (``peaks``): a ``dense`` matrix of at
    most ``CORRELATE_SPLIT`` columns, rows stored in the compute precision (the projection
    kernel's route where ``_PROJECT_KERNEL`` is on and the shape fits it, else the tiled
    correlation's)."""
    return dense and storage == precision and n_in <= CORRELATE_SPLIT


def _projects_on_kernel(dense: bool, n_in: int, n_out: int, storage: str,
                        precision: str) -> bool:  # fmt: skip
    """Whether :func:`project` runs on the projection kernel (:func:`dense_project`)."""
    return (_PROJECT_KERNEL and dense and storage == precision
            and project_fits(n_in, n_out, precision))  # fmt: skip


def clip_peaks(backend, src, *, signals: int, size: int, n_in: int, n_out: int,
               storage: str, precision: str, dense: bool):  # fmt: skip
    """``(peaks, chunks)`` for :func:`project`'s top_db clip of ``signals`` signals of
    ``size`` values each (rows of ``n_in`` values), ``src`` (:func:`projects_clipped` must
    hold): on the projection kernel, where a signal has at most PROJECT_PEAK_CHUNKS chunks
    (:func:`row_max_chunks`), each signal's chunk maxima (row_max's first launch; the
    kernel takes their maximum itself, which saves row_max's second launch, a block a
    signal); else each signal's maximum (``chunks`` 1). In the backend's scratch, the
    precision; any order of a signal's values gives the same maximum."""
    if not projects_clipped(dense, n_in, storage, precision):
        raise ValueError("project clips its rows only where projects_clipped holds")
    chunks = row_max_chunks(size)[0] if size else 1
    if size and chunks > 1 and chunks <= PROJECT_PEAK_CHUNKS and _projects_on_kernel(
            dense, n_in, n_out, storage, precision):  # fmt: skip
        partials = backend.scratch(-(-signals * chunks // 2), precision)
        _row_max_chunks(backend, src, partials, rows=signals, size=size, storage=storage,
                        precision=precision)  # fmt: skip
        return partials, chunks
    peaks = backend.scratch(-(-signals // 2), precision)
    if size:
        row_max(backend, src, peaks, rows=signals, size=size, storage=storage,
                precision=precision)  # fmt: skip
    return peaks, 1


def project(backend, src, dst, bands, weights, *, rows: int, n_in: int, n_out: int,
            storage: str, precision: str, dense: bool, signals: int = 1, clip: bool = False,
            peaks=None, peak_chunks: int = 1, top_db: float = 0.0) -> None:  # fmt: skip
    """``dst[r, m] = sum_k matrix[m, k] * src[r, k]`` for ``rows`` contiguous rows (a DCT, a
    chroma fold, a filterbank's transpose: :func:`bank_tables`' ``bands`` / ``weights``).
    A ``dense`` matrix (every band spans every column: its weights are the matrix
    transposed) on rows stored in the compute precision runs as the dense projection
    (:func:`dense_project`) where its shape fits that kernel (``gather.project_fits``: up
    to 128 outputs) and ``_PROJECT_KERNEL`` is on, else, of at most ``CORRELATE_SPLIT``
    columns, as the tiled correlation (the rows as frames of ``signals`` signals with hop
    ``n_in``); both stage the rows and the matrix in shared memory instead of reading each
    operand once per output. The others run as the bank gather. All three sum each output
    over ascending k in one accumulator: the same bits. With ``clip`` or ``peaks``
    (:func:`projects_clipped` must hold), each signal's rows are read as ``max(x, peak -
    top_db)`` (mfcc's top_db clip): its peak the maximum of its ``peak_chunks`` values of
    ``peaks`` (the precision; more than one on the projection kernel only), or, with
    ``clip`` and no ``peaks``, of ``src`` (:func:`clip_peaks` finds them)."""
    clip = clip or peaks is not None
    if clip and not projects_clipped(dense, n_in, storage, precision):
        raise ValueError("project clips its rows only where projects_clipped holds: a dense "
                         f"matrix of at most {CORRELATE_SPLIT} columns, rows stored in the "
                         "compute precision")  # fmt: skip
    if rows % max(signals, 1):
        raise ValueError(f"project: {rows} rows are not whole signals of {signals}")
    kernel = _projects_on_kernel(dense, n_in, n_out, storage, precision)
    if clip and peaks is None and rows * n_out:
        peaks, peak_chunks = clip_peaks(backend, src, signals=max(signals, 1),
                                        size=rows * n_in // max(signals, 1), n_in=n_in,
                                        n_out=n_out, storage=storage, precision=precision,
                                        dense=dense)  # fmt: skip
    if peak_chunks != 1 and not (clip and kernel and 1 <= peak_chunks <= PROJECT_PEAK_CHUNKS):
        raise ValueError(f"project: peak_chunks={peak_chunks} needs peaks on the projection "
                         f"kernel, at most {PROJECT_PEAK_CHUNKS} (clip_peaks)")  # fmt: skip
    if kernel:
        if rows * n_out:
            dense_project(backend, src, dst, weights, rows=rows, n_in=n_in, n_out=n_out,
                          precision=precision, count=rows // max(signals, 1), peaks=peaks,
                          peak_chunks=peak_chunks, top_db=top_db)  # fmt: skip
        return
    if projects_clipped(dense, n_in, storage, precision) and rows * n_out:
        count = rows // signals
        correlate(backend, src, dst, weights, rows=signals, count=count, columns=n_out,
                  taps=n_in, hop=n_in, row_len=count * n_in, start=0, out_width=n_out,
                  column=0, precision=precision, peaks=peaks, top_db=top_db)  # fmt: skip
        return
    bank(backend, src, dst, bands, weights, rows=rows, n_in=n_in, n_out=n_out, exponent=1.0,
         db_factor=None, eps=0.0, storage=storage, precision=precision)  # fmt: skip


def dense_project(backend, src, dst, matrix_t, *, rows: int, n_in: int, n_out: int,
                  precision: str, count: int = 1, peaks=None, peak_chunks: int = 1,
                  top_db: float = 0.0) -> None:  # fmt: skip
    """``dst[r, c] = sum_k matrix_t[k, c] * src[r, k]`` for ``rows`` contiguous rows of
    ``n_in`` values (the precision) and ``c < n_out`` (``matrix_t``: the matrix transposed,
    ``(n_in, n_out)``; ``gather.project_fits`` must hold): the ``project`` block kernel
    (codegen.gather._project), one block per ``gather.project_rows`` rows. With ``peaks``
    (``peak_chunks`` values for every ``count`` rows, at most PROJECT_PEAK_CHUNKS), row r
    is read as ``max(x, peak - top_db)``, the peak the maximum of its ``peak_chunks``
    values (the kind ``project_clip``)."""
    option = project_option(n_in, n_out, precision)  # raises where the shape does not fit
    if rows * n_out == 0:
        return
    spec = GatherSpec("project_clip" if peaks is not None else "project", precision,
                      precision, option)  # fmt: skip
    args = _args(backend, src, dst, matrix_t, peaks, rows=rows, count=count, size=n_out,
                 frame_len=n_in, hop=peak_chunks, factor=top_db)  # fmt: skip
    backend.launch(spec, -(-rows // project_rows(option, precision)), project_threads(option),
                   project_shared_bytes(option, precision), args)  # fmt: skip


def is_dense(bands: np.ndarray, n_in: int) -> bool:
    """Whether a band table (:func:`bank_tables`) is a dense matrix's: every band starts at 0
    and spans ``n_in`` columns (its weights are then the matrix transposed)."""
    bands = np.asarray(bands)
    return bool(len(bands)) and bool((bands[:, 0] == 0).all() and (bands[:, 1] == n_in).all())


def stft(backend, src, dst, window, *, signals: int, sig_len: int, n_fft: int, hop: int,
         pad: int, mode: str, onesided: bool, value: str, eps: float, scale: float,
         precision: str, src_storage: str, dst_storage: str, bank: BankReduce | None = None,
         bands=None, weights=None, factors=None, exponent: float = 2.0,
         inverse_scale: float = 1.0, expand_width: int = 0, expand_terms: int = 0,
         frames: int | None = None, overlap_add: bool = False) -> None:  # fmt: skip
    """The fused STFT (:func:`fft_exec.stft_1d`) of contiguous rows of ``sig_len`` samples;
    with ``bank``, the filterbank of its ``|X| ** bank.exponent`` in the same kernel; with
    ``value`` "cotangent", the adjoint's input for the real cotangent ``factors`` of
    ``|X| ** exponent``; with "adjoint", that adjoint's windowed frames (rows of ``n_fft``
    samples, for :func:`overlap_add` without a window; ``inverse_scale`` the inverse FFT's
    normalization; ``expand_width``: ``factors`` are a filterbank's cotangent, expanded by
    the bank tables ``bands`` / ``weights`` of its transpose, ``expand_terms`` their padded
    width if known: at most 4 terms a bin run unrolled). ``frames``: how many frames
    per row (default: those the padded signal holds; in "constant" mode, frames past its end
    read zeros). ``overlap_add`` (value "adjoint", :func:`adjoint_ola_fusable`): the
    frames overlap-added in the kernel (and a seam gather) into ``dst``'s rows of ``sig_len``
    samples, the whole adjoint w.r.t. the signal; the padding's positions are dropped
    (constant padding), or where it :func:`folds` kept and folded back onto their sources
    by a third launch, as :func:`overlap_add` folds them."""
    count = 1 + (sig_len + 2 * pad - n_fft) // hop if frames is None else frames
    kind, table = _padding(backend, sig_len, pad, mode)
    framing = Framing(hop, pad, sig_len, count, kind)
    ola, fold_tables = None, (None,) * 3
    if overlap_add:
        if not adjoint_ola_fusable(n_fft, hop, pad, precision, count, sig_len):
            raise ValueError(f"the adjoint of a {n_fft}-point stft with hop {hop} does not "
                             "overlap-add in its kernel")  # fmt: skip
        _check_pairs(backend, window, precision, "the overlap-add")
        fold = 0
        if folds(pad, mode):
            fold, fold_tables = _fold_tables(backend, sig_len, pad, mode)
        ola = OverlapAdd(hop, count, sig_len, pad, pad + sig_len, fold)
    stft_1d(backend, src, dst, window, table, n=n_fft, framing=framing, signals=signals,
            onesided=onesided, value=value, eps=eps, scale=scale, precision=precision,
            src_storage=src_storage, dst_storage=dst_storage,
            src_strides=Strides(1, sig_len, 0, 1), bank=bank, bands=bands,
            weights=weights, factors=factors, exponent=exponent, inverse_scale=inverse_scale,
            expand_width=expand_width, expand_terms=expand_terms, ola=ola,
            fold_tables=fold_tables)  # fmt: skip


def adjoint_ola_fusable(n_fft: int, hop: int, pad: int, precision: str, count: int,
                        sig_len: int) -> bool:  # fmt: skip
    """Whether :func:`stft`'s fused adjoint (value "adjoint") overlap-adds its ``count``
    frames of signals of ``sig_len`` samples in its kernel (``overlap_add``): the istft's
    condition (:func:`istft_fusable`, the same overlap-add and seam gather) with the padded
    signal as its output (any padding: what folds back goes through the fold gather)."""
    return istft_fusable(n_fft, hop, precision, True, count, sig_len + 2 * pad)


# Overlap-save convolution (fftconvolve of real operands on the GPU, both CUDA routes)

OVERLAP_SAVE_MIN = 256  # the shortest block FFT of overlap-save


@functools.lru_cache(maxsize=256)
def overlap_save_length(length: int, short: int, precision: str) -> int:
    """The block FFT length of an overlap-save convolution with a ``short``-tap kernel and
    ``length`` outputs per row, or 0 when whole-length FFTs should run instead: a power of two
    near four kernel lengths (at least 3/4 of each block's outputs are kept) whose frames one
    block kernel convolves (:func:`fft_exec.convolve_1d`), at least twice the kernel's tail,
    and shorter than the output (else a single whole-length FFT is as cheap)."""
    if short < 2:
        return 0
    block = OVERLAP_SAVE_MIN
    while block < 4 * (short - 1) and adjoint_fusable(2 * block, precision):
        block *= 2
    if 2 * (short - 1) > block or length <= block or not adjoint_fusable(block, precision):
        return 0
    return block


def overlap_save_operands(dtype: str, x_len: int, y_len: int) -> tuple[bool, int]:
    """How both CUDA routes convolve rows of ``x_len`` and ``y_len`` samples of ``dtype``:
    (swap, block) -- overlap-save with ``block``-point FFTs when ``block`` (real float32 /
    float64 only), the longer operand framed (``swap``: that is y; convolution commutes) --
    or block 0: whole-length FFTs of the operands in their order. One decision for both
    routes, whose results must be bit-identical."""
    if dtype not in ("float32", "float64"):
        return False, 0
    return y_len > x_len, overlap_save_length(x_len + y_len - 1, min(x_len, y_len), dtype)


@functools.lru_cache(maxsize=64)
def _overlap_save_phase(block: int, short: int) -> np.ndarray:
    """exp(2 pi i k (short - 1) / block) for the one-sided bins k: the kernel's spectrum times
    it is the spectrum of the kernel rotated by short - 1 samples, so each block's
    alias-free outputs come first (exact integer phase reduction, float64)."""
    k = np.arange(block // 2 + 1, dtype=np.int64)
    out = np.exp(2j * np.pi * ((k * (short - 1)) % block).astype(np.float64) / block)
    out.flags.writeable = False
    return out


def overlap_save(backend, x, taps, out, *, signals: int, sig_len: int, short: int,
                 block: int, precision: str, storage: str) -> None:  # fmt: skip
    """The full convolution of ``signals`` real rows of ``x`` (``sig_len`` samples each, in
    ``storage``) with as many real rows of ``taps`` (``short`` each, in ``storage``) into
    ``out`` (rows of ``sig_len + short - 1``, in ``storage``); all three contiguous.

    Frame f of a row holds samples f * hop - (short - 1) .. + block - 1 (zeros outside the
    signal), hop = block - short + 1; its circular convolution with the kernel rotated by
    short - 1 (the phase of :func:`_overlap_save_phase`) has the linear convolution's outputs
    f * hop .. + hop - 1 at its first hop positions. Two launches: the taps' ``block``-point
    one-sided spectra (the stft kernel: one frame a row, zero-padded in its loads) into a
    scratch, then each frame's forward transform, product and inverse transform in one block
    kernel (:func:`fft_exec.convolve_1d`), which stores those outputs (fewer for a row's last
    frame)."""
    length = sig_len + short - 1
    hop = block - short + 1
    spectra = backend.scratch(signals * (block // 2 + 1), precision)
    ones = backend.constant(("ones", block, precision), lambda: np.ones(block, dtype=precision))
    stft(backend, taps, spectra, ones, signals=signals, sig_len=short, n_fft=block, hop=block,
         pad=0, mode="constant", onesided=True, value="complex", eps=0.0, scale=1.0,
         precision=precision, src_storage=storage, dst_storage=precision,
         frames=1)  # fmt: skip
    framing = Framing(hop, short - 1, sig_len, -(-length // hop), "constant")
    phase = backend.table(("overlap-save phase", block, short),
                          _overlap_save_phase(block, short), precision)  # fmt: skip
    convolve_1d(backend, x, out, spectra, phase, n=block, framing=framing, signals=signals,
                out_len=length, precision=precision, storage=storage)  # fmt: skip


def convert(backend, src, dst, table, *, start: int, size: int, src_dtype: str, dst_dtype: str,
            conj: bool = False) -> None:  # fmt: skip
    """``dst`` (``size`` contiguous elements of ``dst_dtype``) = the strided view of ``src``
    that ``table`` describes (int64: ndim, out shape, view shape, view strides; the view
    starts ``start`` elements into ``src``), cast, zero beyond the view, conjugated if asked."""
    precision = "float64" if {src_dtype, dst_dtype} & {"float64", "complex128"} else "float32"
    option = f"{src_dtype}>{dst_dtype}" + ("~" if conj and dst_dtype.startswith("complex") else "")
    spec = GatherSpec("convert", precision, precision, option)
    _launch(backend, spec, size, _args(backend, src, dst, table, size=size, start=start))


# Enough blocks of a correlation to fill a large GPU (an H200 has 132 SMs) twice over before
# the tile is made taller: taller tiles reuse each staged kernel tap for more frames.
_CORRELATE_FILL = 264


# Dynamic shared memory a kernel may use without opting in (the correlate tiles stay below).
_SHARED_DEFAULT = 48 * 1024


def _tiled_blocks(option: str, n_rows: int, n_cols: int, splits: int = 1) -> int:
    """Blocks of a tiled kind's launch: row tiles x column tiles x splits."""
    rows, columns = correlate_frames(option), correlate_columns(option)
    return -(-n_rows // rows) * -(-n_cols // columns) * splits


def _tallest_tile(lanes: int, n: int, n_rows: int, n_cols: int, splits: int,
                  precision: str) -> str:  # fmt: skip
    """``lanes`` x ``n`` columns, rows 4 a thread (at most 128 a tile) unless that leaves
    fewer than ``_CORRELATE_FILL`` blocks or needs more than 48 KiB of shared memory (then
    2, then 1)."""
    m = min(4, lanes)
    while m > 1:
        option = f"c{lanes}n{n}m{m}"
        if (_tiled_blocks(option, n_rows, n_cols, splits) >= _CORRELATE_FILL
                and correlate_shared_bytes(option, precision) <= _SHARED_DEFAULT):  # fmt: skip
            break
        m //= 2
    return f"c{lanes}n{n}m{m}"


def _mma_blocks(option: str, rows: int, count: int, columns: int, taps: int, hop: int) -> int:
    """Blocks of a tensor-core correlation: row tiles of each signal's frames x column tiles x
    :func:`gather.mma_splits`."""
    tiles = -(-count // correlate_frames(option))
    return rows * tiles * -(-columns // correlate_columns(option)) * mma_splits(taps, hop)


def _launch_tiled(backend, kind: str, option: str, precision: str, blocks: int,
                  args: tuple) -> None:  # fmt: skip
    shared = correlate_shared_bytes(option, precision)
    if shared > _SHARED_DEFAULT:
        raise ValueError(f"correlate option={option!r} needs more than 48 KiB of shared memory "
                         f"in {precision}")  # fmt: skip
    backend.launch(GatherSpec(kind, precision, precision, option), blocks, CORRELATE_THREADS,
                   shared, args)  # fmt: skip


def tensor_cores(backend, precision: str) -> bool:
    """Whether ``backend``'s correlations in ``precision`` take the tensor-core tiles: float32,
    a device that has them (the backend's ``tensor_cores``: compute capability 8.0 or later)
    and :func:`specux.options.tensor_cores_enabled`."""
    return precision == "float32" and backend.tensor_cores and options.tensor_cores_enabled()


def correlate_option(rows: int, count: int, columns: int, taps: int, hop: int,
                     precision: str = "float32", mma: bool = False) -> str:  # fmt: skip
    """The tile of a correlation (``gather.correlate_tile``). ``mma`` (float32 only, see
    :func:`tensor_cores`), filters longer than the hop (``gather._tiled_mma`` loads each
    sample once for the frames that share it: with one hop-step there is nothing to share,
    and the H200 ran cqt's one-step octaves slower than the SIMT tiles) and a hop whose
    32-sample chunks are at least two thirds samples: a tensor-core tile of up to 4 column
    fragments (32 columns), two row fragments a warp unless that leaves fewer than
    ``_CORRELATE_FILL`` blocks or the tile has 4 column fragments (w4m2: 177 registers a
    thread, NVRTC 13 sm_90; not timed). Otherwise the fewest column lanes (1, 2, 4, 8) that
    leave at most 3 columns a thread (8 lanes beyond 24 columns), then
    :func:`_tallest_tile`; every such tile gives the same bits. (Measured on an H200, cqt's
    24-column octaves: 8 lanes of 3 columns beat 4 of 6 -- fewer registers, more resident
    warps to hide the loads.)"""
    if mma and precision != "float32":
        raise ValueError(f"tensor-core correlation tiles are float32, not {precision}")
    width = min(hop, taps)
    if mma and taps > hop and 2 * -(-width // CORRELATE_TAPS) * CORRELATE_TAPS <= 3 * width:
        n = min(4, -(-columns // 8))
        tall = f"w{n}m2"
        if n < 4 and _mma_blocks(tall, rows, count, columns, taps, hop) >= _CORRELATE_FILL:
            return tall
        return f"w{n}m1"
    lanes = next((c for c in CORRELATE_LANES if -(-columns // c) <= 3), 8)
    n = min(8, -(-columns // lanes))
    return _tallest_tile(lanes, n, rows * count, columns, -(-taps // CORRELATE_SPLIT),
                         precision)  # fmt: skip


def correlate(backend, src, dst, kernel, *, rows: int, count: int, columns: int, taps: int,
              hop: int, row_len: int, start: int, out_width: int, column: int,
              precision: str, option: str | None = None, peaks=None,
              top_db: float = 0.0) -> None:  # fmt: skip
    """``dst[r, t, column + c] = sum_j src[r, start + t * hop + j] * kernel[j, c]`` for
    ``c < columns``, ``j < taps``: rows of ``row_len`` in, of ``out_width`` out (one
    constant-Q octave group of the correlation kernels). ``option`` the tile (tests pin
    it; :func:`correlate_option` by default). Kernels longer than ``CORRELATE_SPLIT`` taps
    sum each split into a scratch array, added up by a second launch. With ``peaks`` (one
    value a row, the precision), row r's samples are read as ``max(x, peaks[r] - top_db)``
    (the kind ``correlate_clip``; SIMT tiles only)."""
    if taps < 1:
        raise ValueError(f"correlate needs taps >= 1, got {taps}")
    if rows * count * columns == 0:
        return
    clip = peaks is not None
    option = option or correlate_option(rows, count, columns, taps, hop, precision,
                                        tensor_cores(backend, precision) and not clip)  # fmt: skip
    mma = mma_tile(option) is not None
    if clip and mma:
        raise ValueError(f"a clipped correlation takes the SIMT tiles, not option={option!r}")
    splits = mma_splits(taps, hop) if mma else -(-taps // CORRELATE_SPLIT)
    frames = rows * count
    target = dst if splits == 1 else backend.scratch(-(-splits * frames * columns // 2),
                                                     precision)  # fmt: skip
    args = _args(backend, src, target, kernel, peaks, rows=rows, count=count, size=columns,
                 frame_len=taps, hop=hop, pad=column, sig_len=row_len, start=start,
                 stop=out_width, factor=top_db)  # fmt: skip
    blocks = (_mma_blocks(option, rows, count, columns, taps, hop) if mma
              else _tiled_blocks(option, frames, columns, splits))  # fmt: skip
    _launch_tiled(backend, "correlate_clip" if clip else "correlate", option, precision,
                  blocks, args)  # fmt: skip
    if splits > 1:
        elementwise(backend, "partsum", "", target, dst, rows=frames, size=columns,
                    count=splits, stop=out_width, pad=column, storage=precision,
                    precision=precision)  # fmt: skip


def correlate_t_option(rows: int, columns: int, precision: str = "float32") -> str:
    """The tile of a transposed correlation (``rows`` sample blocks by ``columns`` = hop
    samples): 8 column lanes of up to 4 columns, then :func:`_tallest_tile`."""
    return _tallest_tile(8, min(4, max(1, -(-columns // 8))), rows, columns, 1, precision)


def correlate_t(backend, src, dst, kernel_t, *, rows: int, count: int, columns: int,
                taps: int, hop: int, row_len: int, start: int, in_width: int, column: int,
                precision: str, option: str | None = None) -> None:  # fmt: skip
    """The transpose of :func:`correlate`: ``dst[r, start + t * hop + j] += sum_c src[r, t,
    column + c] * kernel[j, c]`` (``src`` rows of ``in_width``, ``dst`` rows of
    ``row_len``); ``kernel_t`` is :func:`hop_major` of the kernel."""
    if taps < 1 or hop < 1:
        raise ValueError(f"correlate_t needs taps >= 1 and hop >= 1, got {taps}, {hop}")
    if rows * count * columns == 0:
        return
    sample_blocks = rows * (count + -(-taps // hop) - 1)
    option = option or correlate_t_option(sample_blocks, hop, precision)
    args = _args(backend, src, dst, kernel_t, rows=rows, count=count, size=columns,
                 frame_len=taps, hop=hop, pad=column, sig_len=row_len, start=start,
                 stop=in_width)  # fmt: skip
    _launch_tiled(backend, "correlate_t", option, precision,
                  _tiled_blocks(option, sample_blocks, hop), args)  # fmt: skip


def hop_major(kernel: np.ndarray, hop: int) -> np.ndarray:
    """``(taps, C)`` -> ``(Q * C, hop)`` with ``[q * C + c, u] = kernel[q * hop + u, c]``
    (zeros past the taps; Q = ceil(taps / hop)): correlate_t's right operand."""
    taps, columns = kernel.shape
    q = -(-taps // hop)
    padded = np.zeros((q * hop, columns), dtype=kernel.dtype)
    padded[:taps] = kernel
    return np.ascontiguousarray(padded.reshape(q, hop, columns).transpose(0, 2, 1)
                                .reshape(q * columns, hop))  # fmt: skip


def filterbank_stft(backend, src, dst, window, bands, weights, *, p: StftParams, signals: int,
                    sig_len: int, n_out: int, power: float, db_factor: float | None, eps: float,
                    storage: str, precision: str) -> None:  # fmt: skip
    """``bank @ |stft| ** power`` (dB with ``db_factor``) as one kernel: the stft's bins stay
    in shared memory and the bank reduces them there (``stft_fusable(p.n_fft, precision,
    True)`` must hold); ``dst`` frame-major ``(signals, n_frames, n_out)``."""
    stft(backend, src, dst, window, signals=signals, sig_len=sig_len, n_fft=p.n_fft,
         hop=p.hop_length, pad=p.pad, mode=p.pad_mode, onesided=True, value="power", eps=eps,
         scale=1.0, precision=precision, src_storage=storage, dst_storage=storage,
         bank=BankReduce(n_out, power, db_factor), bands=bands, weights=weights)  # fmt: skip


def spectrum_value(power: float) -> str:
    """The stft value :func:`filterbank_of_spectrum` reads for a filterbank of ``|X| ** power``
    (beyond a block, where the spectrum is in memory)."""
    return "power" if power == 2.0 else "magnitude"


def filterbank_of_spectrum(backend, spectrum, dst, bands, weights, *, rows: int, n_in: int,
                           n_out: int, power: float, db_factor: float | None, eps: float,
                           storage: str, precision: str) -> None:  # fmt: skip
    """The filterbank of a spectrum of :func:`spectrum_value` (compute precision) in memory."""
    bank(backend, spectrum, dst, bands, weights, rows=rows, n_in=n_in, n_out=n_out,
         exponent=1.0 if power in (1.0, 2.0) else power, db_factor=db_factor, eps=eps,
         storage=storage, precision=precision)  # fmt: skip


def elementwise(backend, kind: str, option: str, src, dst, *, rows: int, size: int,
                storage: str, precision: str, table=None, count: int = 0,
                eps: float = 0.0, factor: float = 0.0, exponent: float = 0.0, pad: int = 0,
                stop: int = 0, total: int | None = None) -> None:  # fmt: skip
    """One of the gather module's array kinds (``map``, ``value``, ``cmul``, ``colnorm``,
    ``partsum``) over ``rows`` x ``size`` elements (``total`` threads if
    given)."""
    spec = GatherSpec(kind, storage, precision, option)
    args = _args(backend, src, dst, table, None, rows=rows, size=size, count=count, eps=eps,
                 factor=factor, exponent=exponent, pad=pad, stop=stop)  # fmt: skip
    _launch(backend, spec, rows * size if total is None else total, args)


# row_max: a block of ROWMAX_THREADS threads reduces a chunk of a row, of at most
# ROWMAX_CHUNK values (32 a thread) unless the row would need more than ROWMAX_CHUNKS chunks;
# so the second launch (a block a row over the chunks' maxima) reads at most four values a
# thread.
ROWMAX_CHUNK = 8192
ROWMAX_CHUNKS = 4 * ROWMAX_THREADS


def row_max_chunks(size: int) -> tuple[int, int]:
    """(chunks a row, values a chunk) of :func:`row_max` over rows of ``size`` values; every
    chunk holds at least one value."""
    if size < 1:
        raise ValueError(f"row_max: rows of {size} values have no maximum")
    length = -(-size // min(-(-size // ROWMAX_CHUNK), ROWMAX_CHUNKS))
    return -(-size // length), length


def _row_max_launch(backend, source, target, *, rows: int, values: int, count: int,
                    chunk: int, storage: str, precision: str) -> None:  # fmt: skip
    """``target[r * count + c]``: the maximum of chunk c (``chunk`` values) of row r
    (``values`` a row) of ``source`` (the ``rowmax`` block kernel, a block a chunk)."""
    if not rows:
        return
    args = _args(backend, source, target, rows=rows, size=values, count=count,
                 frame_len=chunk)  # fmt: skip
    shared = ROWMAX_THREADS * (8 if precision == "float64" else 4)
    backend.launch(GatherSpec("rowmax", storage, precision), rows * count, ROWMAX_THREADS,
                   shared, args)  # fmt: skip


def _row_max_chunks(backend, src, dst, *, rows: int, size: int, storage: str,
                    precision: str) -> int:  # fmt: skip
    """Each row's chunk maxima (:func:`row_max_chunks`) into ``dst`` (``rows * chunks``
    values of the storage): row_max's first launch; returns the chunks a row."""
    chunks, length = row_max_chunks(size)
    _row_max_launch(backend, src, dst, rows=rows, values=size, count=chunks, chunk=length,
                    storage=storage, precision=precision)  # fmt: skip
    return chunks


def row_max(backend, src, dst, *, rows: int, size: int, storage: str, precision: str) -> None:
    """``dst[r] = max(src[r, :])`` for ``rows`` contiguous rows of ``size`` values (NaN where
    a row holds one; numpy's and torch's max), in ``storage``: the ``rowmax`` block kernel
    over chunks of each row (:func:`row_max_chunks`) into the backend's scratch (``rows *
    chunks`` values of the storage, within complex scratch of the precision), then over those
    into ``dst``.
    One pass over the data with every SM busy: torch's ``amax`` of PERF.md's mfcc dB
    (64 signals of 50080 values) took 14 us for 12.8 MB."""
    chunks = row_max_chunks(size)[0]
    if chunks == 1:
        _row_max_chunks(backend, src, dst, rows=rows, size=size, storage=storage,
                        precision=precision)  # fmt: skip
        return
    partials = backend.scratch(-(-rows * chunks // 2), precision)  # storage <= real_t bytes
    _row_max_chunks(backend, src, partials, rows=rows, size=size, storage=storage,
                    precision=precision)  # fmt: skip
    _row_max_launch(backend, partials, dst, rows=rows, values=chunks, count=1, chunk=chunks,
                    storage=storage, precision=precision)  # fmt: skip


def bank_tables(starts: np.ndarray, stops: np.ndarray,
                padded: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The filterbank kernels' tables of a sparse bank: int32 (first bin, bins) per band
    (one 8-byte record: codegen.block.BAND_RECORD), and the row-padded weights ``padded``
    (bands, width) laid out bin-major -- band m's k-th weight at ``k * bands + m`` -- so the
    threads of consecutive bands, which run in step, read consecutive weights (coalesced)
    instead of a cache line each."""
    return _band_table(starts, stops), np.ascontiguousarray(np.asarray(padded).T).ravel()


def _band_table(starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.stack([starts, stops - starts], axis=1).astype(np.int32))


def dense_bands(n_out: int, n_in: int) -> np.ndarray:
    """:func:`bank_tables`' band table of a dense ``(n_out, n_in)`` matrix (every band spans
    every column); its weights are the matrix transposed (``matrix.T``, C order)."""
    return _band_table(np.zeros(n_out, np.int64), np.full(n_out, n_in, np.int64))


def sparse_tables(dense: np.ndarray, precision: str) -> tuple[np.ndarray, np.ndarray, int]:
    """(bands, weights, columns) of a dense matrix for the gather kernels: each row's nonzero
    extent and its weights in ``precision`` (:func:`bank_tables`), and the matrix's width."""
    sparse = filters.sparse_bank(dense)
    bands, weights = bank_tables(sparse.starts, sparse.stops, sparse.weights.astype(precision))
    return bands, weights, sparse.n_bins


@functools.lru_cache(maxsize=64)
def sparse_bank(bank_spec: str, precision: str) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`sparse_tables` of a named matrix (built once per spec and precision)."""
    dense = matrices.matrix(MatrixSpec.from_key(bank_spec), np.dtype("float64"))
    bands, weights, width = sparse_tables(dense, precision)
    bands.flags.writeable = False
    weights.flags.writeable = False
    return bands, weights, width


@functools.lru_cache(maxsize=64)
def named_dense(bank_spec: str, precision: str) -> bool:
    """:func:`is_dense` of a named matrix's tables (:func:`sparse_bank`)."""
    bands, _, width = sparse_bank(bank_spec, precision)
    return is_dense(bands, width)


def cqt_plan(spec: ConstantQSpec, precision: str, length: int, count: int):
    """(plan, n_frames, pad): the CPU backend's constant-Q kernels, every octave as a frames
    group (the GPU runs them as products over frames; the polyphase DFT path is a CPU flop
    saving), and the padding they need."""
    n_frames = cqt_n_frames(length, spec.hop_length)
    plan = cpu_cqt.kernel_plan(spec, np.dtype(precision), n_frames, count, (0, 0))
    return plan, n_frames, plan.pad(length, n_frames)


def cqt_kernel(backend, spec: ConstantQSpec, precision: str, group):
    """An octave group's correlation kernel ``(taps, 2 * bins)`` on the device (once)."""
    key = ("cqt kernel", spec.as_key(), precision, group.start, group.stop)
    return backend.constant(key, group.kernel)


def cqt_correlate_t(backend, grad, xbar, spec: ConstantQSpec, plan, *, count: int,
                    n_frames: int, row_len: int, pad: int, precision: str) -> None:  # fmt: skip
    """The transpose of :func:`cqt_correlate` (the constant-Q adjoint before the padding's
    fold): ``grad`` ``(count, n_frames, 2 * n_bins)`` real, its products added into ``xbar``
    ``(count, row_len)`` (zeros on entry), one launch per octave group, in plan order."""
    hop = spec.hop_length
    for g in plan.frames:
        key = ("cqt kernel by hop", spec.as_key(), precision, g.start, g.stop)
        kernel_t = backend.constant(key, lambda g=g: hop_major(g.kernel, hop))
        correlate_t(backend, grad, xbar, kernel_t, rows=count, count=n_frames,
                    columns=2 * (g.stop - g.start), taps=g.frame_length, hop=hop,
                    row_len=row_len, start=pad + g.offset, in_width=2 * spec.n_bins,
                    column=2 * g.start, precision=precision)  # fmt: skip


def cqt_correlate(backend, padded, out, spec: ConstantQSpec, plan, *, count: int,
                  n_frames: int, row_len: int, pad: int, precision: str,
                  spectral: int | None = None) -> None:  # fmt: skip
    """The constant-Q correlations of :func:`cqt_plan`'s octave groups: ``padded`` the
    ``count`` signals padded by ``pad`` on both sides (rows of ``row_len``), ``out``
    ``(count, n_frames, 2 * n_bins)`` real (interleaved complex), every group's columns.
    The leading groups (the longest filters) take the spectral path of :func:`cqt_spectral`
    where its cost model says so, ``SPECUX_CQT_SPECTRAL`` is not 0 and the device's tables
    of kernel spectra stay within ``_SPECTRA_BUDGET`` (``spectral``: that many groups
    instead, 0 for none), the rest one tiled correlation each."""
    if spectral is None and not options.cqt_spectral_enabled():
        spectral = 0
    mma = tensor_cores(backend, precision)
    sc = cqt_spectral(spec, plan, n_frames, count, precision, mma, spectral)
    if sc is not None and spectral is None and not _spectra_fit(backend, spec, sc, precision):
        sc = None  # the device's kernel spectra budget is spent: the correlations run
    first = 0
    if sc is not None:
        _cqt_fold(backend, padded, out, spec, plan, sc, count=count, n_frames=n_frames,
                  row_len=row_len, pad=pad, precision=precision,
                  mma=fold_on_tensor_cores(sc, n_frames, count, precision, mma))  # fmt: skip
        first = sc.groups
    for g in plan.frames[first:]:
        correlate(backend, padded, out, cqt_kernel(backend, spec, precision, g), rows=count,
                  count=n_frames, columns=2 * (g.stop - g.start), taps=g.frame_length,
                  hop=spec.hop_length, row_len=row_len, start=pad + g.offset,
                  out_width=2 * spec.n_bins, column=2 * g.start, precision=precision)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The spectral constant-Q path
#
# Group g's bin b is y_b[t] = sum_j xp[pad + o_g + t hop + j] k_b[j] (the frames groups'
# kernels). Cut the padded signal into blocks z_beta[n] = xp[s + beta T hop + n], n < F =
# M hop (s = pad + min o_g, zeros past the end), each holding T whole frames: with
# d_g = o_g - min o_g and span = max (d_g + taps_g), T = (F - span) // hop + 1. Then with
# Z the block's DFT and K_b(f) = sum_j k_b[j] e^(2 pi i f (d_g + j) / F) / F,
#     y_b[beta T + tau] = sum_f Z(f) K_b(f) e^(2 pi i f tau / M)
#                       = sum_m e^(2 pi i m tau / M) sum_q Z(m + q M) K_b(m + q M),
# an exact identity (no wrap-around: every frame's taps lie inside its block). Per frame and
# bin that is 4 F hop / (F - span) real multiply-adds instead of 2 taps_g: the longest
# filters cost ~10x less. Launches: the blocks (frame, in pairs: a signal's blocks two to a
# complex FFT, their count rounded up to even), their FFTs (fft_exec), the
# product folded modulo M (fold_product, a batched complex product over the hop terms of
# each residue m) and the M-point inverse DFTs into the output (fold_idft).

SPECTRAL_MAX_RESIDUES = 256  # M at most (fold_idft keeps a column's M residues in shared memory)
_SPECTRAL_TABLE = 1 << 23  # complex elements of the kernels' spectra at most (64 MB in float32)
# scratch bytes of the path at most (the blocks, their spectra and the partial sums): larger
# batches keep the correlations, which need none beyond their partial sums
_SPECTRAL_SCRATCH = 1 << 29
# fold_product blocks at most when splitting terms: three an H200 SM in float32 (396 blocks,
# all resident at once under the kernel's bound of three an SM, codegen.gather.
# FOLD_MIN_BLOCKS), two in float64
_FOLD_BLOCKS = {"float32": 396, "float64": 264}
_FOLD_MMA_BLOCKS = 264  # the tensor-core tiles': two an H200 SM (t8: 127 registers a thread)
# Whether fold_product may take the tensor-core tiles where correlations may
# (:func:`tensor_cores`); it does where the cost model prices them below the SIMT tiles
# (:func:`fold_on_tensor_cores`). 35th session, H200, graph replays: the PERF.md workload's
# product 78.1 us on t4 tiles against 97.5 on the SIMT tiles (cqt 0.188 ms against 0.205);
# three smaller workloads (hop 160 / 70 bins, 2 short signals, hop 256) ran it 1.4-1.5x
# slower on the tensor cores (too few blocks, columns padded to 64), and the model keeps them
# on the SIMT tiles; racecheck and memcheck clean. The tiles hold at most FOLD_MMA_TILE_NB n8
# fragments a warp: 4 ran the PERF.md product in 79.4 us, 8 (127 registers, two blocks an
# SM) in 122.5, 2 in 103.9.
_FOLD_TENSOR_CORES = True
FOLD_MMA_TILE_NB = 4
# The cost model, in microseconds on an H200 (fitted to the per-launch times of the PERF.md
# workload in float32 (torch.profiler), 31st and 32nd sessions; its totals are within 5% of
# 16 of 18 measured (groups, M) choices; float64 runs every part at about half the rate, so
# the choice holds): a tiled correlation on the tensor cores max(MAC / 12.7e6, 44 + MAC /
# 22e6) (short filters leave its blocks little work; the partial sums' launch included), on
# the SIMT tiles 8 + MAC / 5e6; the spectral path's product 4 F columns' bins' / 11.2e6 (both
# padded to whole tiles), the blocks' copy in pairs and their complex FFTs 1.05e-5 a real
# sample, the inverse DFT's 4 columns bins (M M2 + T M1) multiply-adds / 2.1e6, and its
# launches 8.
_US_MMA = (12.7e6, 44.0, 22.0e6)
_US_SIMT = (8.0, 5.0e6)
_US_PRODUCT = 11.2e6
# the product on the tensor-core tiles: 4 F columns' bins' (padded to whole tiles) / 13.96e6
# with _FOLD_MMA_BLOCKS blocks or more, proportionally slower with fewer (two blocks an SM
# fill it); fitted to the PERF.md workload's 78.1 us, it gave 36.4 / 25.4 / 77.9 us for the
# three smaller workloads' measured 38.3 / 21.0 / 78.3 (35th session)
_US_PRODUCT_MMA = 13.96e6
_US_FFT_SAMPLE = 1.05e-5
_US_INVERSE = 2.1e6
_US_LAUNCHES = 8.0


@dataclass(frozen=True)
class SpectralCqt:
    """The spectral path of a constant-Q plan's leading ``groups`` frames groups: bins
    ``0 .. bins``, blocks of ``size`` = F = ``residues`` * hop samples holding ``frames``
    frames each."""

    groups: int
    bins: int
    size: int
    residues: int
    frames: int

    def blocks(self, n_frames: int) -> int:
        """Blocks a signal: enough for ``n_frames`` frames, rounded up to an even count, as
        the blocks go two to a complex FFT and a pair stays within one signal (a non-finite
        sample or a loud one reaches no other signal's frames; an extra block's frames are
        past ``n_frames``, never written)."""
        needed = -(-n_frames // self.frames)
        return needed + needed % 2


def _direct_us(g, n_frames: int, count: int, hop: int, mma: bool) -> float:
    mac = n_frames * count * 2 * (g.stop - g.start) * g.frame_length
    if mma and g.frame_length > hop:  # the tensor-core tiles (correlate_option)
        rate, fixed, slow = _US_MMA
        return max(mac / rate, fixed + mac / slow)
    fixed, rate = _US_SIMT
    return fixed + mac / rate


def _idft_stages(residues: int) -> tuple[int, int]:
    """(M1, M2) of fold_idft's two stages: M1 the largest divisor of M up to its root."""
    m1 = max(d for d in range(1, math.isqrt(residues) + 1) if residues % d == 0)
    return m1, residues // m1


def _product_us(sc: SpectralCqt, columns: int, precision: str, mma: bool) -> float:
    """The model's fold_product time (us), on the tensor-core tiles (``mma``) or the SIMT."""
    grid = fold_grid(sc.residues, sc.bins, columns, sc.size // sc.residues, precision, mma)
    work = 4.0 * sc.size * grid.columns * grid.bins
    if mma:
        return work / _US_PRODUCT_MMA / min(1.0, grid.blocks / _FOLD_MMA_BLOCKS)
    # a term of a thread: nb + nc shared loads of 8 bytes (two cycles a warp on an SM's
    # 128 bytes a cycle) against 4 nb nc multiply-adds (one cycle a warp on each of four
    # schedulers): small tiles wait on shared memory
    nb, nc = fold_tile(grid.option)
    return work * max(nb * nc, 2 * (nb + nc)) / (nb * nc) / _US_PRODUCT


def fold_on_tensor_cores(sc: SpectralCqt, n_frames: int, count: int, precision: str,
                         mma: bool) -> bool:  # fmt: skip
    """Whether ``sc``'s fold_product runs on the tensor-core tiles: they are allowed
    (:func:`fold_tensor_cores`) and the model prices them below the SIMT tiles."""
    if not fold_tensor_cores(mma) or precision != "float32":
        return False
    columns = count * sc.blocks(n_frames)
    return _product_us(sc, columns, precision, True) < _product_us(sc, columns, precision,
                                                                   False)  # fmt: skip


def _spectral_us(sc: SpectralCqt, n_frames: int, count: int, precision: str,
                 mma: bool = False) -> float:  # fmt: skip
    columns = count * sc.blocks(n_frames)
    m1, m2 = _idft_stages(sc.residues)
    inverse = 4.0 * columns * sc.bins * (sc.residues * m2 + sc.frames * m1)
    product = _product_us(sc, columns, precision, mma)
    return (product + _US_FFT_SAMPLE * columns * sc.size + inverse / _US_INVERSE
            + _US_LAUNCHES)  # fmt: skip


# Bytes of kernel-spectra tables one device keeps at most. Tables stay on the device for
# the process (a captured CUDA graph may read one), and each (spec, groups, M) has its own:
# a workload of many signal lengths would otherwise add one per length; past the budget,
# new combinations run as correlations.
_SPECTRA_BUDGET = 1 << 29
_spectra_made: dict = {}  # (device, spec key, SpectralCqt, precision) -> bytes
_spectra_lock = threading.Lock()


def _spectra_fit(backend, spec: ConstantQSpec, sc: SpectralCqt, precision: str) -> bool:
    """Whether ``sc``'s kernel spectra are on ``backend``'s device or fit its budget (and
    are then counted)."""
    device = (type(backend).__name__, getattr(backend, "index", id(backend)))
    key = (device, spec.as_key(), sc, precision)
    size = sc.size * sc.bins * (16 if precision == "float64" else 8)
    with _spectra_lock:
        if key in _spectra_made:
            return True
        used = sum(v for k, v in _spectra_made.items() if k[0] == device)
        if used + size > _SPECTRA_BUDGET:
            return False
        _spectra_made[key] = size
        return True


def fold_tensor_cores(mma: bool) -> bool:
    """Whether fold_product runs on the tensor-core tiles, ``mma`` whether correlations may
    (:func:`tensor_cores`): while ``_FOLD_TENSOR_CORES`` is off, never."""
    return mma and _FOLD_TENSOR_CORES


@functools.lru_cache(maxsize=32)
def cqt_spectral(spec: ConstantQSpec, plan, n_frames: int, count: int, precision: str,
                 mma: bool, groups: int | None = None) -> SpectralCqt | None:  # fmt: skip
    """The spectral path for ``plan``'s leading groups that the cost model prefers to their
    tiled correlations (``groups``: that many instead; 0 or None where none), or None, with
    the block length (a multiple of the hop whose factors the FFT plans have, at most
    ``SPECTRAL_MAX_RESIDUES`` hops, within the scratch bound) the model prefers; ``mma``:
    :func:`tensor_cores` (the correlations', and with :func:`fold_on_tensor_cores` the
    product's)."""
    hop = spec.hop_length
    frames = plan.frames
    if groups == 0 or not frames or n_frames == 0 or count == 0:
        return None
    best, best_cost = None, None
    direct = [_direct_us(g, n_frames, count, hop, mma) for g in frames]
    for n in range(1, len(frames) + 1):
        if groups is not None and n != groups:
            continue
        lead = frames[:n]
        if any(b.start != a.stop for a, b in zip(lead, lead[1:])) or lead[0].start != 0:
            break  # the spectral bins are 0 .. bins, in order
        base = min(g.offset for g in lead)
        span = max(g.offset - base + g.frame_length for g in lead)
        bins = lead[-1].stop
        low = -(-span // hop)
        for residues in range(max(low, 2), SPECTRAL_MAX_RESIDUES + 1):
            size = residues * hop
            if size * bins > _SPECTRAL_TABLE:
                break
            if factorize(size) is None:
                continue
            sc = SpectralCqt(n, bins, size, residues, (size - span) // hop + 1)
            on_mma = fold_on_tensor_cores(sc, n_frames, count, precision, mma)
            scratch = _spectral_scratch(sc, n_frames, count, hop, precision, on_mma)
            if scratch > _SPECTRAL_SCRATCH:
                continue
            cost = _spectral_us(sc, n_frames, count, precision, on_mma) + sum(direct[n:])
            if best_cost is None or cost < best_cost:
                best, best_cost = sc, cost
    if groups is None and best is not None and best_cost >= sum(direct):
        return None
    return best


def _spectral_scratch(sc: SpectralCqt, n_frames: int, count: int, hop: int,
                      precision: str, mma: bool = False) -> int:  # fmt: skip
    columns = count * sc.blocks(n_frames)
    real = 8 if precision == "float64" else 4
    splits = fold_grid(sc.residues, sc.bins, columns, hop, precision, mma).splits
    pairs = -(-columns // 2)  # the blocks in pairs and their complex spectra
    return real * (4 * pairs * sc.size + 2 * columns * splits * sc.residues * sc.bins)


@functools.lru_cache(maxsize=2)
def cqt_spectra(spec: ConstantQSpec, sc: SpectralCqt) -> np.ndarray:
    """The kernels' spectra ``K_b(f)`` of ``sc``'s bins, complex128 ``[m][q][b]`` for
    ``f = m + q * M``, from the float64 kernels (read-only, cached)."""
    groups = cpu_cqt.kernel_plan(spec, np.float64, 1, 1, (0, 0)).frames[:sc.groups]
    base = min(g.offset for g in groups)
    spectra = np.zeros((sc.bins, sc.size), dtype=np.complex128)
    for g in groups:
        d = g.offset - base
        placed = np.zeros((g.stop - g.start, sc.size), dtype=np.complex128)
        placed[:, d : d + g.frame_length] = (g.kernel[:, 0::2] + 1j * g.kernel[:, 1::2]).T
        spectra[g.start : g.stop] = np.fft.ifft(placed, axis=-1)  # sum_j k e^(+...) / F
    table = np.ascontiguousarray(
        spectra.reshape(sc.bins, spec.hop_length, sc.residues).transpose(2, 1, 0))
    table.flags.writeable = False
    return table


def fold_option(bins: int, columns: int) -> str:
    """The fold_product tile for ``bins`` by ``columns``: as few tiles as a thread's at
    most 6 bins and 5 columns allow, then the fewest bins and columns a thread that cover
    them (60 bins: two tiles of 32, not 48 and a quarter-full one)."""
    lanes_b, lanes_c = FOLD_LANES
    nb = -(-bins // (lanes_b * -(-bins // (6 * lanes_b))))
    nc = -(-columns // (lanes_c * -(-columns // (5 * lanes_c))))
    return f"p{nb}x{nc}"


@dataclass(frozen=True)
class FoldGrid:
    """A fold_product launch: its tile ``option``, ``blocks`` (residue pairs x bin tiles x
    column tiles x splits), ``per`` terms a split of the ``splits``, and the ``bins`` and
    ``columns`` its tiles cover (the padded sizes the threads compute)."""

    option: str
    blocks: int
    per: int
    splits: int
    bins: int
    columns: int


@functools.lru_cache(maxsize=256)
def fold_grid(residues: int, bins: int, columns: int, terms: int, precision: str,
              mma: bool = False) -> FoldGrid:  # fmt: skip
    """The launch of a fold_product of ``bins`` by ``columns`` over ``residues`` residues of
    ``terms`` terms: :func:`fold_option`'s tile, enough splits of the terms for at most
    ``_FOLD_BLOCKS[precision]`` blocks, each a multiple of FOLD_TERMS terms. ``mma``
    (float32, :func:`tensor_cores`): the tensor-core tile ``"t<nb>"`` -- as few tiles of up
    to ``8 FOLD_MMA_TILE_NB`` bins as cover them, then the fewest bins a tile that do (the
    kernel takes up to FOLD_MMA_MAX_NB fragments; fewer ran faster) -- a block a residue pair,
    at most ``_FOLD_MMA_BLOCKS`` blocks, splits a multiple of FOLD_MMA_TERMS terms."""
    if mma and precision != "float32":
        raise ValueError(f"the tensor-core fold_product is float32, not {precision}")
    if mma:
        bin_tiles = -(-bins // (8 * FOLD_MMA_TILE_NB))  # n8 fragments of 8 bins
        nb = -(-bins // (8 * bin_tiles))
        option, tile_b, tile_c, step = f"t{nb}", 8 * nb, FOLD_MMA_COLUMNS, FOLD_MMA_TERMS
        column_tiles = -(-columns // tile_c)
        base = (residues // 2 + 1) * bin_tiles * column_tiles
        most = _FOLD_MMA_BLOCKS
    else:
        option = fold_option(bins, columns)
        nb, nc = fold_tile(option)
        lanes_b, lanes_c = FOLD_LANES
        tile_b, tile_c, step = lanes_b * nb, lanes_c * nc, FOLD_TERMS
        bin_tiles, column_tiles = -(-bins // tile_b), -(-columns // tile_c)
        base = -(-residues // FOLD_RESIDUES) * bin_tiles * column_tiles
        most = _FOLD_BLOCKS[precision]
    splits = max(1, min(-(-terms // step), most // base))
    per = -(-terms // splits)
    per = -(-per // step) * step
    splits = -(-terms // per)
    return FoldGrid(option, base * splits, per, splits, bin_tiles * tile_b,
                    column_tiles * tile_c)  # fmt: skip


def fold_product(backend, spectra, dst, table, grid: FoldGrid, *, columns: int,
                 residues: int, bins: int, size: int, row: int,
                 precision: str) -> None:  # fmt: skip
    """``dst[s, m, c, b] = sum_q Z[c, m + q M] table[m, q, b]`` (gather kind fold_product)
    over each split's terms, ``Z[c]`` the ``size``-point spectrum of block c of ``columns``:
    ``spectra`` holds rows of ``row`` complex values, the spectra of the blocks in pairs
    (:func:`frame`'s ``pairs``: block 2 p the real part, 2 p + 1 the imaginary part of pair
    p's ``size``-point complex FFT), untangled as the terms are read; ``table``
    ``[M][size / M][bins]`` complex, ``dst`` the partial sums of :func:`fold_grid`'s
    ``grid`` (``grid.splits * M * columns * bins`` complex values). The tensor-core grid's
    split s of residue M - m sums the terms mirrored to residue m's (``Q - 1 - q``): the sum
    over the splits is the same."""
    if row < size:
        raise ValueError(f"fold_product reads full {size}-point spectra: row={row} is shorter")
    largest = max(-(-columns // 2) * row, grid.splits * residues * columns * bins,
                  size * bins)  # complex values of the spectra, partials and table
    if 2 * largest >= 2**31:  # the kernel's indices are 32-bit (as _SPECTRAL_SCRATCH keeps them)
        raise ValueError(f"fold_product of {columns} blocks of {size} points and {bins} bins "
                         "has indices past 2**31: split the batch")
    args = _args(backend, spectra, dst, table, rows=columns, count=residues, size=bins,
                 frame_len=size, hop=size // residues, sig_len=row, start=grid.per,
                 stop=grid.splits)  # fmt: skip
    backend.launch(GatherSpec("fold_product", precision, precision, grid.option), grid.blocks,
                   FOLD_THREADS,
                   fold_shared_bytes("fold_product", grid.option, residues, precision),
                   args)  # fmt: skip


def fold_idft(backend, partials, dst, roots, *, signals: int, blocks: int, n_frames: int,
              frames: int, residues: int, bins: int, splits: int, out_width: int,
              column: int, storage: str, precision: str) -> None:  # fmt: skip
    """``dst[r, t, column + 2 b + (0, 1)]`` (re, im) ``= sum_m Y[c, b, m] roots[(m tau) mod
    M]`` for block ``c = r * blocks + beta``, ``t = beta * frames + tau`` below ``n_frames``
    (gather kind fold_idft), ``Y`` the ``splits`` partial sums of :func:`fold_product`,
    ``roots`` the M roots ``exp(2 pi i k / M)``."""
    args = _args(backend, partials, dst, None, roots, rows=signals, count=n_frames, size=bins,
                 frame_len=frames, hop=residues, pad=column, sig_len=blocks, start=splits,
                 stop=out_width)  # fmt: skip
    backend.launch(GatherSpec("fold_idft", storage, precision),
                   signals * blocks * -(-bins // fold_bins(precision)), FOLD_THREADS,
                   fold_shared_bytes("fold_idft", "", residues, precision), args)  # fmt: skip


def _cqt_fold(backend, padded, out, spec: ConstantQSpec, plan, sc: SpectralCqt, *,
              count: int, n_frames: int, row_len: int, pad: int, precision: str,
              mma: bool) -> None:  # fmt: skip
    hop, size = spec.hop_length, sc.size
    blocks = sc.blocks(n_frames)
    columns = count * blocks
    pairs = -(-columns // 2)  # two real blocks a complex FFT, untangled by fold_product
    start = pad + min(g.offset for g in plan.frames[:sc.groups])
    frames = backend.scratch(pairs * size, precision)
    frame(backend, padded, frames, rows=count, sig_len=row_len, frame_len=size,
          hop=sc.frames * hop, pad=-start, mode="constant", count=blocks, storage=precision,
          precision=precision, pairs=True)  # fmt: skip
    spectra = backend.scratch(pairs * size, precision)
    rows = Strides.along((pairs, size), 1)
    transform_1d(backend, frames, spectra, n=size, kind="c2c", sign=-1, scale=1.0,
                 precision=precision, batch=pairs, src_storage=precision,
                 dst_storage=precision, src_strides=rows, dst_strides=rows)  # fmt: skip
    table = backend.table(("cqt spectra", spec.as_key(), sc), lambda: cqt_spectra(spec, sc),
                          precision)  # built only when new on the device
    grid = fold_grid(sc.residues, sc.bins, columns, hop, precision, mma)
    partials = backend.scratch(grid.splits * sc.residues * columns * sc.bins, precision)
    fold_product(backend, spectra, partials, table, grid, columns=columns,
                 residues=sc.residues, bins=sc.bins, size=size, row=size,
                 precision=precision)  # fmt: skip
    # exp(+2 pi i k / M): the block kernels' exactly symmetric roots, conjugated
    roots = backend.table(("inverse roots", sc.residues), lambda: np.conj(_roots(sc.residues)),
                          precision)  # fmt: skip
    fold_idft(backend, partials, out, roots, signals=count, blocks=blocks, n_frames=n_frames,
              frames=sc.frames, residues=sc.residues, bins=sc.bins, splits=grid.splits,
              out_width=2 * spec.n_bins, column=0, storage=precision,
              precision=precision)  # fmt: skip


__all__ = ["BankReduce", "adjoint_fusable", "adjoint_ola_fusable", "bank", "bank_tables",
           "convert", "correlate", "correlate_option", "correlate_t", "correlate_t_option",
           "cqt_correlate", "cqt_correlate_t", "cqt_kernel", "cqt_plan", "cqt_spectra",
           "cqt_spectral", "dense_bands", "dense_project", "fold_idft", "fold_option",
           "fold_product", "fold_grid", "fold_tensor_cores", "FoldGrid",
           "SpectralCqt",
           "elementwise", "filterbank_of_spectrum", "filterbank_stft", "fold_table", "frame",
           "hop_major", "istft", "istft_fusable", "istft_overlap_add", "overlap_add",
           "overlap_save", "overlap_save_length", "overlap_save_operands", "pad_sources",
           "sparse_bank", "sparse_tables", "spectrum_value", "stft", "stft_fusable"]  # fmt: skip
