"""Constant-Q / variable-Q transform on numpy arrays, and its exact adjoint.

Definition. With ``h_k`` librosa's wavelet filter for bin ``k`` (:func:`specux.meta.filters.
constant_q`: a windowed complex exponential of ``floor(L_k/2) + ceil(L_k/2)`` taps at times
``tau = -ceil(L_k/2) .. floor(L_k/2) - 1``, phase reference ``tau = 0``, exactly as librosa lays
it out), the transform is the full-resolution convolution sampled every ``hop_length`` samples::

    X[..., k, t] = s_k * sum_u xp[t * hop_length + u] * h_k(-u),   t = 0 .. L // hop_length

where ``xp`` is ``x`` extended on both sides by ``pad_mode`` (numpy.pad's meaning) and indexed so
that ``xp[n] = x[n]`` for ``0 <= n < L``, and ``s_k = L_k`` (librosa's ``fft_basis`` scaling),
divided by ``sqrt(L_k)`` when ``scale=True`` (so ``s_k = sqrt(L_k)``). This is librosa's
``__cqt_response`` at full rate (``fft_basis`` = FFT of the pow2-padded basis times
``L_k / n_fft`` applied to a ``window='ones'`` centred STFT) *if the product is summed over the
whole spectrum*; librosa sums the non-negative half only, which drops the filters'
negative-frequency content (window sidelobes, ~1e-5 of the peak for the default hann CQT).
librosa.cqt itself also sparsifies the kernels and resamples per octave; see tests/test_cqt.py
for the measured agreement.

Method (cost ~ n_frames * sum_k L_k at most, no decimation, no sparsification):

* High bins (filters up to a few ``hop_length`` long), one octave per group: frames of the padded
  signal as a strided view (frame length = the group's widest filter, hop = hop_length) times
  the group's ``(frame_length, 2 * n_bins_in_group)`` real kernel (real and imaginary parts of
  the complex kernel as columns), one BLAS call.
* Low bins (long filters), one group: the polyphase form. Cut the padded signal into blocks of
  ``hop_length`` samples, ``B[p, r] = xp[o + p * hop + r]``; then
  ``X[t, col] = sum_q sum_r B[t + q, r] g_col[q, r]``: a correlation along the block index with
  ``C = ceil(width / hop)`` taps per phase ``r``. It is evaluated exactly by overlap-save FFTs of
  length ``N`` along the block index (segments of ``S = N - C + 1`` outputs), with one complex
  matmul over the phases per frequency: ``Z[nu] = B^[nu] @ conj(G^[nu])``. Cost per output is
  ``~8 (N/2+1)/S * hop`` flops per column, independent of the filter length, instead of
  ``2 * width``: for C1 at 22050 Hz (11.7k taps, hop 512) about 10x fewer operations.
  The split between the two groups and ``N`` come from a cost model (:func:`choose_plan`).

Kernels are built in float64 from ``constant_q`` and cast once per dtype (cached); the
transform runs in the input's precision (float32 -> complex64, float64 -> complex128).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from specux.kernels.cpu import fft
from specux.kernels.cpu.frames import frame_view, overlap_add, pad_adjoint, pad_signal
from specux.kernels.cpu.stft import apply_output
from specux.meta.cqt_params import ConstantQSpec  # noqa: F401 - re-exported
from specux.meta.cqt_shapes import cqt_n_frames

__all__ = [
    "ConstantQSpec",
    "CqtPlan",
    "choose_plan",
    "correlation_taps",
    "cqt",
    "cqt_adjoint",
    "kernel_plan",
]

_COMPUTE = {np.dtype(np.float32): np.dtype(np.float32), np.dtype(np.float64): np.dtype(np.float64)}

# Cost-model weights, in flop-equivalents: a 2.5 N log2 N real FFT, and the write + read of a
# frame copy (memory traffic, worth a few flops per element on a BLAS-bound machine).
_FFT_FLOPS = 2.5
_COPY_COST = 4.0


# ---------------------------------------------------------------------------------------------
# Filters in correlation form


@dataclass(frozen=True, eq=False)
class _Taps:
    """``g_k(u) = s_k h_k(-u)`` for ``u = lo[k] .. hi[k]`` (complex128, ascending ``u``)."""

    lo: np.ndarray  # (n_bins,) int64
    hi: np.ndarray  # (n_bins,) int64
    values: tuple[np.ndarray, ...]


@functools.lru_cache(maxsize=16)
def _taps(spec: ConstantQSpec) -> _Taps:
    filters, lengths = spec.filters()
    width = filters.shape[1]
    lo, hi, values = [], [], []
    for row, length in zip(filters, lengths.tolist()):
        # The same expressions constant_q (and librosa) use to place the taps.
        start = -length // 2
        count = np.arange(start, length // 2).shape[0]
        left = (width - count) // 2
        taps = row[left : left + count]
        scale = math.sqrt(length) if spec.scale else length
        first_tau = int(start)
        lo.append(-(first_tau + count - 1))
        hi.append(-first_tau)
        values.append(scale * taps[::-1])
    return _Taps(np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64), tuple(values))


def correlation_taps(spec: ConstantQSpec) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """``(first_u, taps)``: ``X[k, t] = sum_i xp[t * hop + first_u[k] + i] * taps[k][i]``.

    float64 / complex128, scale ``s_k`` included; ``taps[k][i] = s_k h_k(-(first_u[k] + i))``.
    """
    t = _taps(spec)
    return t.lo.copy(), t.values


def _octave_groups(spec: ConstantQSpec) -> tuple[tuple[int, int], ...]:
    """Bin ranges ``[start, stop)`` of whole octaves counted from the top (librosa's split)."""
    bounds = list(range(spec.n_bins, 0, -spec.bins_per_octave)) + [0]
    return tuple((max(b, 0), a) for a, b in zip(bounds[:-1], bounds[1:]))[::-1]


def _span(taps: _Taps, start: int, stop: int) -> tuple[int, int]:
    lo = int(taps.lo[start:stop].min())
    return lo, int(taps.hi[start:stop].max()) - lo + 1


def _real_kernel(taps: _Taps, start: int, stop: int, lo: int, rows: int) -> np.ndarray:
    """``(rows, 2 * (stop - start))`` float64: real and imaginary parts interleaved per bin."""
    out = np.zeros((rows, 2 * (stop - start)))
    for j, k in enumerate(range(start, stop)):
        first = int(taps.lo[k]) - lo
        values = taps.values[k]
        out[first : first + values.shape[0], 2 * j] = values.real
        out[first : first + values.shape[0], 2 * j + 1] = values.imag
    return out


# ---------------------------------------------------------------------------------------------
# Plans


@dataclass(frozen=True, eq=False)
class _FramesGroup:
    start: int  # first bin
    stop: int
    offset: int  # u of the frame's first sample, relative to the frame centre t * hop
    frame_length: int
    kernel: np.ndarray  # (frame_length, 2 * n_bins_in_group), real


@dataclass(frozen=True, eq=False)
class _FftGroup:
    stop: int  # bins 0 .. stop
    offset: int  # u of block row 0's first sample
    chunks: int  # C: taps per phase along the block index
    fft_size: int  # N
    kernel: np.ndarray  # (N // 2 + 1, hop, 2 * stop): conj(rfft over the block index), complex

    @property
    def segment(self) -> int:
        return self.fft_size - self.chunks + 1

    def rows(self, n_frames: int) -> int:
        """Block rows read for ``n_frames`` outputs (whole segments)."""
        n_seg = -(-n_frames // self.segment)
        return (n_seg - 1) * self.segment + self.fft_size


@dataclass(frozen=True, eq=False)
class CqtPlan:
    """How one ConstantQSpec is evaluated in one dtype: an FFT group and frames groups."""

    spec: ConstantQSpec
    dtype: np.dtype
    fft: _FftGroup | None
    frames: tuple[_FramesGroup, ...]

    def pad(self, length: int, n_frames: int) -> int:
        """Samples of padding per side so every group reads inside the padded signal."""
        taps = _taps(self.spec)
        hop = self.spec.hop_length
        need = max(0, -int(taps.lo.min()))
        for g in self.frames:
            need = max(need, (n_frames - 1) * hop + g.offset + g.frame_length - length)
        if self.fft is not None:
            need = max(need, self.fft.offset + self.fft.rows(n_frames) * hop - length)
        return need


def _frames_cost(taps: _Taps, start: int, stop: int, hop: int) -> float:
    _, width = _span(taps, start, stop)
    cost = width * 2 * (stop - start) * 2.0
    return cost + (_COPY_COST * width if width > hop else 0.0)


def _fft_cost(chunks: int, size: int, hop: int, columns: int, n_frames: int, batch: int):
    n_seg = -(-n_frames // (size - chunks + 1))
    freqs = size // 2 + 1
    log = math.log2(size)
    matmul = (batch * n_seg + 1) * freqs * hop * columns * 8.0  # + 1: reading the kernel
    transforms = batch * n_seg * size * (hop + columns) * _FFT_FLOPS * log
    return matmul + transforms


def choose_plan(spec: ConstantQSpec, n_frames: int, batch: int = 1) -> tuple[int, int]:
    """``(fft_stop, fft_size)``: bins below ``fft_stop`` use FFTs of ``fft_size`` (0, 0: none).

    Minimizes a flop model over octave-aligned splits and power-of-two sizes.
    """
    taps = _taps(spec)
    hop = spec.hop_length
    groups = _octave_groups(spec)
    per_output = [_frames_cost(taps, a, b, hop) for a, b in groups]
    best = (batch * n_frames * sum(per_output), 0, 0)
    for j, (_, stop) in enumerate(groups, start=1):
        _, width = _span(taps, 0, stop)
        chunks = -(-width // hop)
        rest = batch * n_frames * sum(per_output[j:])
        size = 1 << max(1, (chunks - 1).bit_length())  # the smallest power of two >= C
        largest = 1 << max(1, (n_frames + chunks - 2).bit_length())  # one segment
        while True:
            cost = _fft_cost(chunks, size, hop, 2 * stop, n_frames, batch) + rest
            if cost < best[0]:
                best = (cost, stop, size)
            if size >= largest:
                break
            size *= 2
    return best[1], best[2]


@functools.lru_cache(maxsize=8)
def _plan(spec: ConstantQSpec, dtype: np.dtype, fft_stop: int, fft_size: int) -> CqtPlan:
    taps = _taps(spec)
    hop = spec.hop_length
    complex_dtype = fft.complex_dtype(dtype)
    fft_group = None
    if fft_stop:
        lo, width = _span(taps, 0, fft_stop)
        chunks = -(-width // hop)
        g = _real_kernel(taps, 0, fft_stop, lo, chunks * hop).reshape(chunks, hop, 2 * fft_stop)
        # Correlation along the block index: Z = B^ * conj(G^) (G real per column).
        spectrum = np.conj(np.fft.rfft(g, n=fft_size, axis=0))
        kernel = np.ascontiguousarray(spectrum, dtype=complex_dtype)
        kernel.flags.writeable = False
        fft_group = _FftGroup(fft_stop, lo, chunks, fft_size, kernel)
    frames = []
    for start, stop in _octave_groups(spec):
        if stop <= fft_stop:
            continue
        start = max(start, fft_stop)
        lo, width = _span(taps, start, stop)
        kernel = np.ascontiguousarray(_real_kernel(taps, start, stop, lo, width), dtype=dtype)
        kernel.flags.writeable = False
        frames.append(_FramesGroup(start, stop, lo, width, kernel))
    return CqtPlan(spec, np.dtype(dtype), fft_group, tuple(frames))


def kernel_plan(spec: ConstantQSpec, dtype, n_frames: int, batch: int = 1) -> CqtPlan:
    """The cached plan for ``spec`` in real ``dtype`` (float32 / float64) at this size."""
    fft_stop, fft_size = choose_plan(spec, n_frames, batch)
    return _plan(spec, np.dtype(dtype), fft_stop, fft_size)


# ---------------------------------------------------------------------------------------------
# Forward


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    return _COMPUTE.get(np.dtype(dtype), np.dtype(np.float64))


def _frames_forward(g: _FramesGroup, xp: np.ndarray, pad: int, n_frames: int, hop: int, out):
    start = pad + g.offset
    view = frame_view(xp[:, start:], g.frame_length, hop)[:, :n_frames]
    if g.frame_length > hop:
        # Overlapping frames are not a BLAS operand (leading dimension < columns): copy once.
        view = np.ascontiguousarray(view)
    out[:, :, 2 * g.start : 2 * g.stop] = np.matmul(view, g.kernel)


def _segments(blocks: np.ndarray, f: _FftGroup, n_seg: int) -> np.ndarray:
    """``(batch, n_seg, N, hop)`` overlapping views of ``(batch, rows, hop)`` blocks, hop S."""
    s0, s1, s2 = blocks.strides
    return np.lib.stride_tricks.as_strided(
        blocks,
        shape=(blocks.shape[0], n_seg, f.fft_size, blocks.shape[2]),
        strides=(s0, s1 * f.segment, s1, s2),
        writeable=False,
    )


def _fft_forward(f: _FftGroup, xp: np.ndarray, pad: int, n_frames: int, hop: int, out):
    batch = xp.shape[0]
    n_seg = -(-n_frames // f.segment)
    rows = f.rows(n_frames)
    start = pad + f.offset
    blocks = xp[:, start : start + rows * hop].reshape(batch, rows, hop)
    spectrum = fft.r2c(_segments(blocks, f, n_seg), (2,), "backward")  # (b, seg, nu, hop)
    freqs = spectrum.shape[2]
    product = np.matmul(spectrum.reshape(batch * n_seg, freqs, hop).transpose(1, 0, 2), f.kernel)
    z = fft.c2r(product, (0,), f.fft_size, "backward")[: f.segment]  # (S, b * seg, cols)
    columns = z.shape[-1]
    z = z.reshape(f.segment, batch, n_seg, columns).transpose(1, 2, 0, 3)
    out[:, :, : 2 * f.stop] = z.reshape(batch, n_seg * f.segment, columns)[:, :n_frames]


def cqt(
    x: np.ndarray,
    spec: ConstantQSpec,
    pad_mode: str = "constant",
    output: str = "complex",
    eps: float = 1e-10,
) -> np.ndarray:
    """``(..., L)`` real -> ``(..., n_bins, 1 + L // hop_length)``, frame-major in memory.

    complex64 for float32 input, complex128 for float64 (other real dtypes compute in float64);
    ``output`` = "magnitude" / "power" / "db" (``10 log10(max(power, eps))``) return reals.
    """
    x = np.asarray(x)
    dtype = _compute_dtype(x.dtype)
    *batch, length = x.shape
    hop = spec.hop_length
    n_frames = cqt_n_frames(length, hop)
    if length == 0 and pad_mode != "constant":
        raise ValueError(f"cqt: pad_mode={pad_mode!r} needs at least one sample")
    flat = x.reshape(-1, length).astype(dtype, copy=False)
    count = flat.shape[0]
    out = np.empty((count, n_frames, spec.n_bins), dtype=fft.complex_dtype(dtype))
    if count:
        plan = kernel_plan(spec, dtype, n_frames, count)
        pad = plan.pad(length, n_frames)
        xp = pad_signal(flat, pad, pad_mode)
        as_real = out.view(dtype)  # (count, n_frames, 2 n_bins): re, im interleaved per bin
        if plan.fft is not None:
            _fft_forward(plan.fft, xp, pad, n_frames, hop, as_real)
        for g in plan.frames:
            _frames_forward(g, xp, pad, n_frames, hop, as_real)
    result = apply_output(out.reshape(*batch, n_frames, spec.n_bins), output, eps)
    return result.swapaxes(-1, -2)


# ---------------------------------------------------------------------------------------------
# Adjoint


def _frames_adjoint(g: _FramesGroup, grad: np.ndarray, pad: int, hop: int, xbar: np.ndarray):
    frames = np.matmul(grad[:, :, 2 * g.start : 2 * g.stop], g.kernel.T)
    summed = overlap_add(frames, hop)
    start = pad + g.offset
    xbar[:, start : start + summed.shape[-1]] += summed


def _fft_adjoint(f: _FftGroup, grad: np.ndarray, pad: int, hop: int, xbar: np.ndarray):
    # The transpose of a correlation is a full convolution: each S-output segment of the
    # cotangent, zero-padded to N, convolves into N block rows without wrapping.
    batch, n_frames, _ = grad.shape
    columns = 2 * f.stop
    n_seg = -(-n_frames // f.segment)
    padded = np.zeros((batch, n_seg * f.segment, columns), dtype=grad.dtype)
    padded[:, :n_frames] = grad[:, :, :columns]
    segments = np.zeros((batch, n_seg, f.fft_size, columns), dtype=grad.dtype)
    segments[:, :, : f.segment] = padded.reshape(batch, n_seg, f.segment, columns)
    spectrum = fft.r2c(segments, (2,), "backward")  # (b, seg, nu, cols)
    freqs = spectrum.shape[2]
    spectrum = spectrum.reshape(batch * n_seg, freqs, columns).transpose(1, 0, 2)
    # conj(Zbar @ G^T) with G = conj(kernel): one matmul on the stored kernel, no conj copy.
    product = np.conj(np.matmul(np.conj(spectrum), f.kernel.transpose(0, 2, 1)))
    pieces = fft.c2r(product, (0,), f.fft_size, "backward")  # (N, b * seg, hop)
    pieces = pieces.reshape(f.fft_size, batch, n_seg, hop).transpose(1, 2, 0, 3)
    rows = _overlap_rows(pieces, f.segment)  # (b, rows, hop)
    start = pad + f.offset
    xbar[:, start : start + rows.shape[1] * hop] += rows.reshape(batch, -1)


def _overlap_rows(pieces: np.ndarray, hop_rows: int) -> np.ndarray:
    """Sum ``(b, n_seg, N, w)`` pieces placed every ``hop_rows`` rows: ``(b, rows, w)``."""
    batch, n_seg, size, width = pieces.shape
    chunks = -(-size // hop_rows)
    out = np.zeros((batch, (n_seg + chunks - 1) * hop_rows, width), dtype=pieces.dtype)
    for j in range(chunks):
        part = pieces[:, :, j * hop_rows : (j + 1) * hop_rows]
        rows = part.shape[2]
        target = out[:, j * hop_rows : (j + n_seg) * hop_rows].reshape(
            batch, n_seg, hop_rows, width
        )
        target[:, :, :rows] += part
    return out[:, : (n_seg - 1) * hop_rows + size]


def cqt_adjoint(
    grad: np.ndarray, spec: ConstantQSpec, pad_mode: str, length: int
) -> np.ndarray:
    """Exact transpose of :func:`cqt` (complex output) as a real-linear map.

    ``(..., n_bins, n_frames)`` complex -> ``(..., length)`` real with
    ``<cqt(x), G>_R = sum x * cqt_adjoint(G)``, ``<a, b>_R = Re sum conj(a) b``; i.e. the
    gradient ``Re(A^H G)`` of a real loss whose gradient with respect to the output is ``G``.
    """
    grad = np.asarray(grad)
    *batch, n_bins, n_frames = grad.shape
    hop = spec.hop_length
    if n_bins != spec.n_bins or n_frames != cqt_n_frames(length, hop):
        raise ValueError(
            f"cqt_adjoint: got {n_bins} bins x {n_frames} frames, expected {spec.n_bins} x "
            f"{cqt_n_frames(length, hop)} for length={length}"
        )
    if grad.dtype not in (np.complex64, np.complex128):
        grad = grad.astype(np.complex128)
    dtype = fft.real_dtype(grad.dtype)
    columns = np.ascontiguousarray(np.swapaxes(grad, -1, -2)).reshape(-1, n_frames, n_bins)
    count = columns.shape[0]
    if count == 0:
        return np.zeros((*batch, length), dtype=dtype)
    as_real = columns.view(dtype)  # (count, n_frames, 2 n_bins)
    plan = kernel_plan(spec, dtype, n_frames, count)
    pad = plan.pad(length, n_frames)
    xbar = np.zeros((count, length + 2 * pad), dtype=dtype)
    if plan.fft is not None:
        _fft_adjoint(plan.fft, as_real, pad, hop, xbar)
    for g in plan.frames:
        _frames_adjoint(g, as_real, pad, hop, xbar)
    return pad_adjoint(xbar, pad, pad_mode, length).reshape(*batch, length)
