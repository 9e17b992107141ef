"""Constant-Q / variable-Q transform on numpy arrays, and its exact adjoint.

Definition. With ``h_k`` librosa's wavelet filter for bin ``k`` (:func:`specux.meta.filters.
constant_q`: a windowed complex exponential of ``floor(L_k/2) + ceil(L_k/2)`` taps at times
``tau = -ceil(L_k/2) .. floor(L_k/2) - 1``, phase reference ``tau = 0``, exactly as librosa lays
it out), the transform is the full-resolution convolution sampled every ``hop_length`` samples::

    X[..., k, t] = s_k * sum_u xp[t * hop_length + u] * h_k(-u),   t = 0 .. L // hop_length

where ``xp`` is ``x`` extended on both sides by ``pad_mode`` (numpy.pad's meaning) and indexed so
that ``xp[n] = x[n]`` for ``0 <= n < L``, and ``s_k = L_k`` (librosa's ``fft_basis`` scaling),
divided by ``sqrt(L_k)`` when ``scale=True`` (so ``s_k = sqrt(L_k)``).

This is librosa's ``__cqt_response`` at full rate (``fft_basis`` = FFT of the pow2-padded basis
times ``L_k / n_fft``, applied to a ``window='ones'`` centred STFT) when the product is summed
over the whole spectrum. librosa sums the non-negative half only, which drops the filters'
negative-frequency content (window sidelobes: 3.5e-5 of the peak for the default CQT on a
chirp, 2.4e-3 for the default VQT, whose filters are shorter; with the whole spectrum the two
agree to 1.5e-15, see tests/test_cqt.py). librosa.cqt also sparsifies its kernels and
resamples per octave (1.6e-2 of the peak for the default CQT).

Method: no decimation, no sparsification; every bin is an exact (float rounding only) evaluation
of the sum above. Bins are grouped by octave (from the top, as librosa does):

* ``_FramesGroup`` (short filters): frames of the padded signal as strided views, frame length
  = the group's widest filter, hop = hop_length, times the group's ``(frame_length, 2 n_bins)``
  real kernel (real and imaginary parts as columns). A frame longer than the hop is cut into
  hop-wide column chunks, each a BLAS operand without copying (leading dimension = hop).
  Cost: ``n_frames * width * 4`` flops per bin.
* ``_PolyphaseGroup`` (the lowest octaves, long filters): cut the padded signal into blocks of
  hop_length samples, ``B[p, r] = xp[o + p * hop + r]``. Then
  ``X[t, col] = sum_q sum_r B[t + q, r] g_col[q, r]``, a correlation along the block index with
  ``C = ceil(width / hop)`` taps per phase ``r``. It is evaluated exactly by overlap-save DFTs
  of length ``N`` along the block index (segments of ``S = N - C + 1`` outputs) and one complex
  product per frequency, ``Z[nu] = Bhat[nu] @ conj(Ghat[nu])`` over the phases. All three
  stages are real BLAS matmuls: the DFTs are small dense matrices (N ~ 3C; an FFT library
  is slower than BLAS at these lengths), and the complex product is one real matmul per
  frequency, ``[Re B | Im B] @ [[Re K, Im K], [-Im K, Re K]]``. Cost per output and column is
  ``~8 hop (N/2+1) / S`` flops, independent of the filter length, plus a DFT shared by the
  group. For the default CQT (84 bins from C1 = 11.7k taps, 22050 Hz, hop 512) the four
  lowest octaves cost 1.5 GFLOP instead of 3.6 as frames, for 8 signals of 10 s.

A flop model (:func:`choose_plan`) picks how many octaves take the polyphase path and ``N``.
Kernels are built in float64 from ``constant_q`` and cast once per dtype (cached); the
transform runs in the input's precision (float32 -> complex64, float64 -> complex128).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from specux.kernels.cpu import fft
from specux.kernels.cpu.frames import frame_view, pad_adjoint, pad_signal
from specux.kernels.cpu.stft import apply_output
from specux.meta.cqt_params import ConstantQSpec
from specux.meta.cqt_shapes import cqt_n_frames
from specux.meta.dtypes import compute_dtype

__all__ = [
    "ConstantQSpec",
    "CqtPlan",
    "choose_plan",
    "correlation_kernel",
    "correlation_kernel_shape",
    "correlation_taps",
    "cqt",
    "cqt_adjoint",
    "kernel_plan",
]


# Flop-model weight of one BLAS call (dispatch, packing), in flops; keeps tiny problems on the
# frames path, which has fewer calls.
_CALL_COST = 2.0e4
# Frames matmuls have few columns (2 per bin of an octave) and run at ~3/4 of the speed of the
# polyphase ones (measured with OpenBLAS on 2 cores); their flops count this much more.
_FRAMES_WEIGHT = 1.3
# Largest polyphase kernel considered, in elements (32 MB in float32, 64 MB in float64): beyond
# it the kernel's memory traffic, not flops, sets the time, and plans are cached.
_KERNEL_ELEMENTS = 1 << 23


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
        # The expressions constant_q (and librosa) use to place the taps in the padded row.
        start = -length // 2
        count = np.arange(start, length // 2).shape[0]
        left = (width - count) // 2
        scale = math.sqrt(length) if spec.scale else length
        lo.append(-(int(start) + count - 1))
        hi.append(-int(start))
        value = scale * row[left : left + count][::-1]
        value.flags.writeable = False  # cached and handed out by correlation_taps
        values.append(value)
    return _Taps(np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64), tuple(values))


def correlation_taps(spec: ConstantQSpec) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """``(first_u, taps)`` with ``X[k, t] = sum_i xp[t * hop + first_u[k] + i] * taps[k][i]``.

    complex128, the scale ``s_k`` included: ``taps[k][i] = s_k h_k(-(first_u[k] + i))``.
    """
    t = _taps(spec)
    return t.lo.copy(), t.values


def _reach(t: _Taps) -> int:
    return max(-int(t.lo.min()), int(t.hi.max()) + 1, 1)


def correlation_kernel_shape(spec: ConstantQSpec) -> tuple[int, int, int]:
    """The shape of :func:`correlation_kernel` ``(n_bins, 2 R, 2)``, without building it."""
    return spec.n_bins, 2 * _reach(_taps(spec)), 2


def correlation_kernel(spec: ConstantQSpec) -> np.ndarray:
    """The taps as one real array ``K`` of shape ``(n_bins, 2 R, 2)``, float64 (a new array:
    a default chroma(source="cqt")'s is 141 MB, so none is kept):
    ``X[..., k, t] = sum_i xp[t * hop_length - R + i] * (K[k, i, 0] + 1j K[k, i, 1])``.

    ``R`` is the smallest reach that holds every bin's taps (``u = -R .. R - 1``), so each
    frame is centred on its sample like the transform's. This is the layout of
    ``specux.nn.CQT``'s ``kernel`` buffer and of the ``cqt_kernel`` ops' kernel argument
    (``torch.view_as_complex`` of it gives the complex taps).
    """
    t = _taps(spec)
    reach = _reach(t)
    out = np.zeros((spec.n_bins, 2 * reach, 2))
    for k, values in enumerate(t.values):
        first = int(t.lo[k]) + reach
        out[k, first : first + values.shape[0], 0] = values.real
        out[k, first : first + values.shape[0], 1] = values.imag
    return out


def _octave_groups(spec: ConstantQSpec) -> tuple[tuple[int, int], ...]:
    """Bin ranges ``[start, stop)`` of whole octaves counted from the top, ascending."""
    bounds = list(range(spec.n_bins, 0, -spec.bins_per_octave)) + [0]
    return tuple((max(b, 0), a) for a, b in zip(bounds[:-1], bounds[1:]))[::-1]


def _span(taps: _Taps, start: int, stop: int) -> tuple[int, int]:
    """``(first_u, width)`` covering the taps of bins ``start .. stop``."""
    lo = int(taps.lo[start:stop].min())
    return lo, int(taps.hi[start:stop].max()) - lo + 1


def _real_kernel(taps: _Taps, start: int, stop: int, lo: int, rows: int) -> np.ndarray:
    """``(rows, 2 * (stop - start))`` float64; columns ``2j, 2j+1`` = Re, Im of bin start+j."""
    out = np.zeros((rows, 2 * (stop - start)))
    for j, k in enumerate(range(start, stop)):
        first = int(taps.lo[k]) - lo
        values = taps.values[k]
        out[first : first + values.shape[0], 2 * j] = values.real
        out[first : first + values.shape[0], 2 * j + 1] = values.imag
    return out


def _frozen(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    out = np.ascontiguousarray(a, dtype=dtype)
    out.flags.writeable = False
    return out


# ---------------------------------------------------------------------------------------------
# Plans


@dataclass(frozen=True, eq=False)
class _FramesGroup:
    start: int  # first bin
    stop: int
    offset: int  # u of a frame's first sample, relative to the frame centre t * hop
    frame_length: int
    kernel: np.ndarray  # (frame_length, 2 * (stop - start)), real


@dataclass(frozen=True, eq=False)
class _PolyphaseGroup:
    stop: int  # bins 0 .. stop
    offset: int  # u of block row 0's first sample, relative to the frame centre t * hop
    chunks: int  # C: taps per phase along the block index
    size: int  # N: DFT length along the block index
    dft: np.ndarray  # (2 F, N), F = N // 2 + 1: rows (nu, Re) = cos, (nu, Im) = -sin
    kernel: np.ndarray  # (F, 2 hop, 2 cols): [[Re K, Im K], [-Im K, Re K]], K = conj(DFT_q(g))
    inverse: np.ndarray  # (S, 2 F): the real inverse DFT, columns (nu, Re), (nu, Im)

    @property
    def segment(self) -> int:
        """S: outputs per overlap-save segment."""
        return self.size - self.chunks + 1

    def n_segments(self, n_frames: int) -> int:
        return -(-n_frames // self.segment)

    def rows(self, n_frames: int) -> int:
        """Block rows read for ``n_frames`` outputs (whole segments)."""
        return (self.n_segments(n_frames) - 1) * self.segment + self.size


@dataclass(frozen=True, eq=False)
class CqtPlan:
    """How one ConstantQSpec is evaluated in one dtype: a polyphase group and frames groups."""

    spec: ConstantQSpec
    dtype: np.dtype
    polyphase: _PolyphaseGroup | None
    frames: tuple[_FramesGroup, ...]

    def pad(self, length: int, n_frames: int) -> int:
        """Samples of padding per side so every group reads inside the padded signal."""
        taps = _taps(self.spec)
        hop = self.spec.hop_length
        need = max(0, -int(taps.lo.min()))
        for g in self.frames:
            need = max(need, (n_frames - 1) * hop + g.offset + g.frame_length - length)
        p = self.polyphase
        if p is not None:
            need = max(need, p.offset + p.rows(n_frames) * hop - length)
        return need


def _frames_cost(width: int, n_bins: int, hop: int, n_frames: int, batch: int) -> float:
    calls = -(-width // hop) * batch  # numpy's matmul loops over the batch, one call each
    return _FRAMES_WEIGHT * batch * n_frames * width * 4.0 * n_bins + calls * _CALL_COST


def _polyphase_cost(
    chunks: int, size: int, hop: int, columns: int, n_frames: int, batch: int
) -> float:
    segment = size - chunks + 1
    # M, segments over the batch; fractional (+ half a segment of rounding) so the choice for
    # long signals does not flip with the length, and cached plans get reused.
    rows = batch * (n_frames / segment + 0.5)
    freqs = size // 2 + 1
    dft = rows * 2 * freqs * size * hop * 2.0
    product = (rows + 1) * freqs * 2 * hop * 2 * columns * 2.0  # + 1: streaming the kernel
    inverse = segment * 2 * freqs * rows * columns * 2.0
    calls = (rows + freqs + 1) * _CALL_COST
    return dft + product + inverse + calls


def _sizes(chunks: int, n_frames: int, hop: int, columns: int) -> list[int]:
    """Candidate DFT lengths: 3-smooth numbers above C, up to one segment covering every frame.

    Sizes whose kernel would exceed ``_KERNEL_ELEMENTS`` are left out (but never all of them).
    """
    low, high = chunks + 1, n_frames + chunks - 1
    limit = 2 * max(low, high)
    out = []
    p2 = 1
    while p2 < limit:
        p3 = p2
        while p3 < limit:
            if p3 >= low:
                out.append(p3)
            p3 *= 3
        p2 *= 2
    out.sort()
    covering = next(i for i, n in enumerate(out) if n >= high)
    out = out[: covering + 1]
    small = [n for n in out if 4 * (n // 2 + 1) * hop * columns <= _KERNEL_ELEMENTS]
    return small or out[:1]


@functools.lru_cache(maxsize=64)
def choose_plan(spec: ConstantQSpec, n_frames: int, batch: int = 1) -> tuple[int, int]:
    """``(stop, size)``: bins below ``stop`` take the polyphase path with DFT length ``size``.

    ``(0, 0)``: frames only. Minimizes a flop model over octave-aligned splits and 3-smooth
    sizes.
    """
    taps = _taps(spec)
    hop = spec.hop_length
    groups = _octave_groups(spec)
    frames = [_frames_cost(_span(taps, a, b)[1], b - a, hop, n_frames, batch) for a, b in groups]
    best = (sum(frames), 0, 0)
    for j, (_, stop) in enumerate(groups, start=1):
        chunks = -(-_span(taps, 0, stop)[1] // hop)
        rest = sum(frames[j:])
        for size in _sizes(chunks, n_frames, hop, 2 * stop):
            cost = _polyphase_cost(chunks, size, hop, 2 * stop, n_frames, batch) + rest
            if cost < best[0]:
                best = (cost, stop, size)
    return best[1], best[2]


def _dft_matrices(size: int, segment: int) -> tuple[np.ndarray, np.ndarray]:
    """Forward ``(2 F, N)`` and inverse ``(S, 2 F)`` real DFT matrices, F = N // 2 + 1.

    Rows / columns are ordered ``(nu, part)``: the forward maps ``b`` to ``Re, Im`` of
    ``sum_n b[n] exp(-2 pi i nu n / N)``; the inverse maps ``Re, Im`` of a half spectrum to the
    first ``S`` samples of its (Hermitian) inverse DFT.
    """
    freqs = size // 2 + 1
    # The phase index is reduced modulo N in integers before scaling to radians.
    nu = np.arange(freqs)[:, None]
    angle = 2.0 * np.pi * ((nu * np.arange(size)[None, :]) % size) / size
    cos, sin = np.cos(angle), np.sin(angle)
    forward = np.stack([cos, -sin], axis=1).reshape(2 * freqs, size)
    weight = np.full(freqs, 2.0)
    weight[0] = 1.0
    if size % 2 == 0:
        weight[-1] = 1.0
    weight /= size
    inverse = np.stack([weight[:, None] * cos, -weight[:, None] * sin], axis=1)
    return forward, inverse.reshape(2 * freqs, size)[:, :segment].T


@functools.lru_cache(maxsize=4)
def _plan(spec: ConstantQSpec, dtype: np.dtype, stop: int, size: int) -> CqtPlan:
    taps = _taps(spec)
    hop = spec.hop_length
    polyphase = None
    if stop:
        lo, width = _span(taps, 0, stop)
        chunks = -(-width // hop)
        g = _real_kernel(taps, 0, stop, lo, chunks * hop).reshape(chunks, hop, 2 * stop)
        # Correlation along the block index: Z = Bhat * conj(Ghat), each column of g real.
        k = np.conj(np.fft.rfft(g, n=size, axis=0))  # (F, hop, cols)
        kernel = np.concatenate(
            [np.concatenate([k.real, k.imag], axis=2), np.concatenate([-k.imag, k.real], axis=2)],
            axis=1,
        )
        forward, inverse = _dft_matrices(size, size - chunks + 1)
        polyphase = _PolyphaseGroup(
            stop,
            lo,
            chunks,
            size,
            _frozen(forward, dtype),
            _frozen(kernel, dtype),
            _frozen(inverse, dtype),
        )
    frames = []
    for start, end in _octave_groups(spec):
        if end <= stop:
            continue
        start = max(start, stop)
        lo, width = _span(taps, start, end)
        kernel = _frozen(_real_kernel(taps, start, end, lo, width), dtype)
        frames.append(_FramesGroup(start, end, lo, width, kernel))
    return CqtPlan(spec, np.dtype(dtype), polyphase, tuple(frames))


def kernel_plan(
    spec: ConstantQSpec,
    dtype,
    n_frames: int,
    batch: int = 1,
    polyphase: tuple[int, int] | None = None,
) -> CqtPlan:
    """The cached plan for ``spec`` in real ``dtype`` at this size.

    ``polyphase=(stop, size)`` overrides :func:`choose_plan` (tests, tuning).
    """
    stop, size = choose_plan(spec, n_frames, batch) if polyphase is None else polyphase
    return _plan(spec, np.dtype(dtype), stop, size)


# ---------------------------------------------------------------------------------------------
# Forward


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """float32 / float64 as themselves, float16 in float32 (specux.meta.dtypes), others float64."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        raise ValueError(f"cqt needs a real signal, got dtype {dtype}")
    try:
        return np.dtype(compute_dtype(dtype.name))
    except KeyError:  # integers, bool, longdouble
        return np.dtype(np.float64)


def _chunks(g: _FramesGroup, hop: int):
    """Hop-wide column chunks ``(first, width)`` of a frame: each a BLAS operand as a view."""
    for first in range(0, g.frame_length, hop):
        yield first, min(hop, g.frame_length - first)


def _frames_forward(g: _FramesGroup, xp: np.ndarray, pad: int, n_frames: int, hop: int, out):
    start = pad + g.offset
    acc = None
    for first, width in _chunks(g, hop):
        view = frame_view(xp[:, start + first :], width, hop)[:, :n_frames]
        part = np.matmul(view, g.kernel[first : first + width])
        acc = part if acc is None else np.add(acc, part, out=acc)
    out[:, :, 2 * g.start : 2 * g.stop] = acc


def _segments(blocks: np.ndarray, p: _PolyphaseGroup, n_seg: int) -> np.ndarray:
    """``(batch, n_seg, N, hop)`` overlapping views of ``(batch, rows, hop)`` blocks, hop S."""
    s0, s1, s2 = blocks.strides
    return np.lib.stride_tricks.as_strided(
        blocks,
        shape=(blocks.shape[0], n_seg, p.size, blocks.shape[2]),
        strides=(s0, s1 * p.segment, s1, s2),
        writeable=False,
    )


def _polyphase_forward(p: _PolyphaseGroup, xp: np.ndarray, pad: int, n_frames: int, hop, out):
    batch = xp.shape[0]
    n_seg = p.n_segments(n_frames)
    rows = p.rows(n_frames)
    start = pad + p.offset
    blocks = xp[:, start : start + rows * hop].reshape(batch, rows, hop)
    spectrum = np.matmul(p.dft, _segments(blocks, p, n_seg))  # (b, seg, 2 F, hop)
    freqs = p.kernel.shape[0]
    count = batch * n_seg
    columns = p.kernel.shape[2] // 2
    # Per frequency: [Re | Im] of the block spectrum (M, 2 hop) @ kernel -> [Re Z | Im Z].
    spectrum = spectrum.reshape(count, freqs, 2 * hop).transpose(1, 0, 2)
    product = np.matmul(spectrum, p.kernel)  # (F, M, 2 cols)
    product = product.reshape(freqs, count, 2, columns).transpose(0, 2, 1, 3)
    z = np.matmul(p.inverse, product.reshape(2 * freqs, count * columns))  # (S, M * cols)
    z = z.reshape(p.segment, batch, n_seg, columns).transpose(1, 2, 0, 3)
    out[:, :, :columns] = z.reshape(batch, n_seg * p.segment, columns)[:, :n_frames]


def cqt(
    x: np.ndarray,
    spec: ConstantQSpec,
    pad_mode: str = "constant",
    output: str = "complex",
    eps: float = 1e-10,
    *,
    polyphase: tuple[int, int] | None = None,
) -> np.ndarray:
    """``(..., L)`` real -> ``(..., n_bins, 1 + L // hop_length)``, frame-major in memory.

    complex64 for float32 (and float16) input, complex128 for float64 (and integers);
    ``output`` = "magnitude" / "power" / "db" (``10 log10(max(power, eps))``) gives reals.
    ``polyphase`` forces the plan split (see :func:`kernel_plan`).
    """
    x = np.asarray(x)
    dtype = _compute_dtype(x.dtype)
    *batch, length = x.shape
    hop = spec.hop_length
    n_frames = cqt_n_frames(length, hop)
    if length == 0 and pad_mode != "constant":
        raise ValueError(f"cqt: pad_mode={pad_mode!r} needs at least one sample")
    count = math.prod(batch)
    flat = x.reshape(count, length).astype(dtype, copy=False)
    out = np.empty((count, n_frames, spec.n_bins), dtype=fft.complex_dtype(dtype))
    if count:
        plan = kernel_plan(spec, dtype, n_frames, count, polyphase)
        pad = plan.pad(length, n_frames)
        xp = pad_signal(flat, pad, pad_mode)
        as_real = out.view(dtype)  # (count, n_frames, 2 n_bins): Re, Im interleaved per bin
        # an inf sample makes inf * 0 in the products: non-finite bins where the FFT
        # paths give them too, without numpy's warning (they give none)
        with np.errstate(invalid="ignore"):
            if plan.polyphase is not None:
                _polyphase_forward(plan.polyphase, xp, pad, n_frames, hop, as_real)
            for g in plan.frames:
                _frames_forward(g, xp, pad, n_frames, hop, as_real)
    result = apply_output(out.reshape(*batch, n_frames, spec.n_bins), output, eps)
    return result.swapaxes(-1, -2)


# ---------------------------------------------------------------------------------------------
# Adjoint (every stage above transposed, in reverse order)


def _frames_adjoint(g: _FramesGroup, grad: np.ndarray, pad: int, hop: int, xbar: np.ndarray):
    batch, n_frames, _ = grad.shape
    cotangent = grad[:, :, 2 * g.start : 2 * g.stop]
    start = pad + g.offset
    for first, width in _chunks(g, hop):
        part = np.matmul(cotangent, g.kernel[first : first + width].T)  # (b, T, width)
        # Chunks are at most a hop wide: the frames of one chunk never overlap.
        base = start + first
        target = xbar[:, base : base + n_frames * hop].reshape(batch, n_frames, hop)
        target[:, :, :width] += part


def _polyphase_adjoint(p: _PolyphaseGroup, grad: np.ndarray, pad: int, hop: int, xbar):
    batch, n_frames, _ = grad.shape
    freqs = p.kernel.shape[0]
    columns = p.kernel.shape[2] // 2
    n_seg = p.n_segments(n_frames)
    count = batch * n_seg
    z = np.zeros((p.segment, batch, n_seg, columns), dtype=grad.dtype)
    cotangent = grad[:, :, :columns]
    full = n_frames // p.segment
    z[:, :, :full] = (
        cotangent[:, : full * p.segment]
        .reshape(batch, full, p.segment, columns)
        .transpose(2, 0, 1, 3)
    )
    tail = n_frames - full * p.segment
    if tail:
        z[:tail, :, full] = cotangent[:, full * p.segment :].transpose(1, 0, 2)
    product = np.matmul(p.inverse.T, z.reshape(p.segment, count * columns))  # (2 F, M cols)
    product = product.reshape(freqs, 2, count, columns).transpose(0, 2, 1, 3)
    product = product.reshape(freqs, count, 2 * columns)
    spectrum = np.matmul(product, p.kernel.transpose(0, 2, 1))  # (F, M, 2 hop)
    # The DFT's transpose, one part at a time: each (F, hop) slice is a strided BLAS operand.
    pieces = np.matmul(p.dft[0::2].T, spectrum[:, :, :hop].transpose(1, 0, 2))
    pieces += np.matmul(p.dft[1::2].T, spectrum[:, :, hop:].transpose(1, 0, 2))
    rows = _overlap_rows(pieces.reshape(batch, n_seg, p.size, hop), p.segment)
    start = pad + p.offset
    xbar[:, start : start + rows.shape[1] * hop] += rows.reshape(batch, -1)


def _overlap_rows(pieces: np.ndarray, hop_rows: int) -> np.ndarray:
    """Sum ``(b, n_seg, N, w)`` pieces placed every ``hop_rows`` rows: ``(b, rows, w)``."""
    batch, n_seg, size, width = pieces.shape
    chunks = -(-size // hop_rows)
    out = np.zeros((batch, (n_seg + chunks - 1) * hop_rows, width), dtype=pieces.dtype)
    for j in range(chunks):
        part = pieces[:, :, j * hop_rows : (j + 1) * hop_rows]
        target = out[:, j * hop_rows : (j + n_seg) * hop_rows].reshape(
            batch, n_seg, hop_rows, width
        )
        target[:, :, : part.shape[2]] += part
    return out[:, : (n_seg - 1) * hop_rows + size]


def cqt_adjoint(
    grad: np.ndarray,
    spec: ConstantQSpec,
    pad_mode: str,
    length: int,
    *,
    polyphase: tuple[int, int] | None = None,
) -> np.ndarray:
    """The exact transpose of :func:`cqt` (complex output) as a real-linear map.

    ``(..., n_bins, n_frames)`` complex -> ``(..., length)`` real, ``Re(A^H G)``: the gradient
    of a real loss with respect to ``x`` given its gradient ``G`` (torch's convention,
    ``dL/dRe + i dL/dIm``) with respect to ``cqt(x)``; ``sum(x * cqt_adjoint(G)) ==
    Re(sum(conj(cqt(x)) * G))``.
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
    count = math.prod(batch)
    columns = np.ascontiguousarray(np.swapaxes(grad, -1, -2)).reshape(count, n_frames, n_bins)
    if count == 0:
        return np.zeros((*batch, length), dtype=dtype)
    as_real = columns.view(dtype)  # (count, n_frames, 2 n_bins)
    plan = kernel_plan(spec, dtype, n_frames, count, polyphase)
    pad = plan.pad(length, n_frames)
    # hop samples of slack: a frames chunk's cotangent is scattered as whole hop-wide rows.
    xbar = np.zeros((count, length + 2 * pad + hop), dtype=dtype)
    with np.errstate(invalid="ignore"):  # as in cqt
        if plan.polyphase is not None:
            _polyphase_adjoint(plan.polyphase, as_real, pad, hop, xbar)
        for g in plan.frames:
            _frames_adjoint(g, as_real, pad, hop, xbar)
    out = pad_adjoint(xbar[:, : length + 2 * pad], pad, pad_mode, length)
    return out.reshape(*batch, length)
