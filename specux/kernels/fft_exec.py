"""Run 1-D FFTs from plans on any backend that can allocate, upload and launch.

The orchestration (which passes, which buffers, which tables) is written once here; a backend
supplies memory and launches (``specux.kernels.cuda.fft`` with torch tensors on the GPU,
``specux.kernels.emulate`` with numpy buffers and the C++ dialect on the host).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from specux.kernels import tuning
from specux.kernels.codegen.block import block_launch_sizes
from specux.kernels.codegen.fft import launch_sizes
from specux.kernels.codegen.gather import GATHER_THREADS, SEAM_POSITIONS, GatherSpec
from specux.kernels.plan import (
    CANONICAL,
    USER,
    BlockSpec,
    LoadSpec,
    PassSpec,
    StoreSpec,
    block,
    block_fits,
    bluestein_length,
    column_block,
    column_split,
    expand_count,
    factorize,
    passes,
    stage_radices,
)

_LOAD_MODE = {"c2c": "complex", "r2c": "real", "c2r": "hermitian"}
_STORE_MODE = {"c2c": "complex", "r2c": "half", "c2r": "real"}


@dataclass(frozen=True)
class Strides:
    """A user array seen as ``batch`` rows of transform elements (see plan.Layout)."""

    inner: int
    outer_stride: int
    inner_stride: int
    elem_stride: int

    @staticmethod
    def along(shape: tuple[int, ...], axis: int) -> Strides:
        """Rows along ``axis`` of a C-contiguous array of ``shape``."""
        inner = 1
        for size in shape[axis + 1 :]:
            inner *= size
        return Strides(max(inner, 1), shape[axis] * inner, 1, inner)


class Backend(Protocol):
    def scratch(self, count: int, precision: str) -> Any: ...
    def table(self, key: tuple, values: Any, precision: str) -> Any: ...
    # values: an array (cast to the precision's complex dtype), or a function building it,
    # called only when key is new on the device
    def launch(self, spec: PassSpec | BlockSpec, grid: int, block: int, shared: int,
               args: tuple) -> None: ...  # fmt: skip
    def pointer(self, buffer: Any) -> int: ...


@functools.lru_cache(maxsize=64)
def _chirp(n: int, sign: int) -> np.ndarray:
    """exp(sign i pi m^2 / n), m < n, with m^2 reduced mod 2n in integers first."""
    m = np.arange(n, dtype=np.int64)
    phase = (m * m) % (2 * n)
    out = np.exp(sign * 1j * np.pi * phase.astype(np.float64) / n)
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=64)
def _bluestein_filter(n: int, length: int, sign: int) -> np.ndarray:
    """FFT_length of conj(chirp) wrapped around, divided by length (the inverse's 1/M)."""
    chirp = _chirp(n, sign)
    b = np.zeros(length, dtype=np.complex128)
    b[:n] = np.conj(chirp)
    b[length - n + 1 :] = np.conj(chirp[1:])[::-1]
    out = np.fft.fft(b) / length
    out.flags.writeable = False
    return out


def transform_1d(
    backend: Backend,
    src: Any,
    dst: Any,
    *,
    n: int,
    kind: str,
    sign: int,
    scale: float,
    precision: str,
    batch: int,
    src_storage: str,
    dst_storage: str,
    src_strides: Strides,
    dst_strides: Strides,
    use_blocks: bool = True,
) -> None:
    """One batch of ``n``-point transforms from ``src`` to ``dst`` (user layouts).

    kind ``c2c``: complex in and out; ``r2c``: real in, bins 0..n/2 out; ``c2r``: bins
    0..n/2 in (Hermitian), real out. ``sign`` -1 forward, +1 inverse; ``scale`` multiplies
    the result (the normalization). Lengths whose points fit a thread block run as one block
    kernel, longer smooth lengths as two (four-step); ``use_blocks=False`` (tests) and
    lengths beyond two blocks run one global-memory kernel per radix pass instead.

    The launches are planned once per distinct call (cached); a repeated call only binds
    buffers and launches.
    """
    if batch == 0:
        return
    program = _program(n, kind, sign, float(scale), precision, batch, src_storage, dst_storage,
                       src_strides, dst_strides, use_blocks)  # fmt: skip
    program.run(backend, src, dst)


class _Ref:
    """A buffer of a planned program (by identity), bound to a real one when it runs."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name  # for reading a recorded program

    def __repr__(self) -> str:
        return f"<{self.name}>"


_SRC, _DST = _Ref("src"), _Ref("dst")
_WINDOW, _PAD_TABLE, _ENVELOPE = _Ref("window"), _Ref("pad table"), _Ref("envelope")
_BANDS, _WEIGHTS, _FACTORS = _Ref("bands"), _Ref("weights"), _Ref("factors")
_FOLD = (_Ref("fold targets"), _Ref("fold offsets"), _Ref("fold positions"))


class _Program:
    """What a transform launches, recorded by running the orchestration on a planning
    backend: scratch sizes, tables, and each launch with buffer references in its args."""

    def __init__(self) -> None:
        self.scratch: list[tuple[_Ref, int, str]] = []
        self.tables: list[tuple[_Ref, tuple, np.ndarray, str]] = []
        self.launches: list[tuple[Any, int, int, int, tuple]] = []
        self._bindings: list | None = None  # built at the first run (see _bind)

    # the planning backend
    def scratch_buffer(self, count: int, precision: str) -> _Ref:
        ref = _Ref("scratch")
        self.scratch.append((ref, count, precision))
        return ref

    def table_buffer(self, key: tuple, values: np.ndarray, precision: str) -> _Ref:
        for ref, known, _, known_precision in self.tables:
            if (known, known_precision) == (key, precision):
                return ref
        ref = _Ref(f"table {key}")
        self.tables.append((ref, key, values, precision))
        return ref

    def launch(self, spec, grid: int, block: int, shared: int, args: tuple) -> None:
        self.launches.append((spec, grid, block, shared, args))
        self._bindings = None

    def _bind(self) -> list:
        """Per launch: its args with the buffer references zeroed, and (position, reference
        id) of each reference -- so a run patches a few pointers instead of testing every
        argument's type (programs are cached and run on every call)."""
        if self._bindings is None:
            self._bindings = [
                (spec, grid, threads, shared, [0 if type(a) is _Ref else a for a in args],
                 tuple((i, id(a)) for i, a in enumerate(args) if type(a) is _Ref))
                for spec, grid, threads, shared, args in self.launches
            ]  # fmt: skip
        return self._bindings

    def run(self, backend: Backend, src: Any, dst: Any, bound: dict | None = None) -> None:
        """Launch with the references bound."""
        pointers = {id(_SRC): backend.pointer(src), id(_DST): backend.pointer(dst)}
        for ref, buffer in (bound or {}).items():  # further caller buffers (window, tables)
            pointers[id(ref)] = backend.pointer(buffer) if buffer is not None else 0
        keep = []  # scratch stays referenced until every launch is queued
        for ref, count, precision in self.scratch:
            buffer = backend.scratch(count, precision)
            keep.append(buffer)
            pointers[id(ref)] = backend.pointer(buffer)
        for ref, key, values, precision in self.tables:
            buffer = backend.table(key, values, precision)
            keep.append(buffer)
            pointers[id(ref)] = backend.pointer(buffer)
        for spec, grid, threads, shared, template, refs in self._bind():
            values = template.copy()
            for index, ref in refs:
                values[index] = pointers[ref]
            backend.launch(spec, grid, threads, shared, tuple(values))


class _Planner:
    """fft_exec.Backend that records into a _Program (pointers stay references)."""

    def __init__(self, program: _Program) -> None:
        self.program = program
        self.scratch = program.scratch_buffer
        self.table = program.table_buffer
        self.launch = program.launch

    @staticmethod
    def pointer(buffer: Any) -> Any:
        return buffer


@functools.lru_cache(maxsize=512)
def _program(n, kind, sign, scale, precision, batch, src_storage, dst_storage, src_strides,
             dst_strides, use_blocks) -> _Program:  # fmt: skip
    program = _Program()
    _orchestrate(_Planner(program), _SRC, _DST, n=n, kind=kind, sign=sign, scale=scale,
                 precision=precision, batch=batch, src_storage=src_storage,
                 dst_storage=dst_storage, src_strides=src_strides, dst_strides=dst_strides,
                 use_blocks=use_blocks)  # fmt: skip
    return program


def _orchestrate(backend, src, dst, *, n, kind, sign, scale, precision, batch, src_storage,
                 dst_storage, src_strides, dst_strides, use_blocks) -> None:  # fmt: skip
    load = LoadSpec(USER, _LOAD_MODE[kind], src_storage)
    store = StoreSpec(USER, _STORE_MODE[kind], dst_storage, scaled=scale != 1.0, logical=n)
    _any_length(backend, n, sign, precision, load, store, src, dst, scale, src_strides,
                dst_strides, batch=batch, use_blocks=use_blocks)  # fmt: skip


def _any_length(backend, n, sign, precision, load, store, src, dst, scale, src_strides,
                dst_strides, *, batch, use_blocks, framing=None, eps=0.0,
                bank=None) -> None:  # fmt: skip
    """An ``n``-point transform with ``load`` / ``store`` as its prologue / epilogue: directly
    for lengths with radices, else as Bluestein's algorithm -- a chirp-multiplied, zero-padded
    forward transform of a smooth length (the load's framing goes there) and a
    chirp-multiplied inverse after the filter product (the store's value / reduce there)."""
    run = functools.partial(_transform, backend, batch=batch, use_blocks=use_blocks)
    if factorize(n) is not None:
        run(n, sign, precision, load, store, src, dst, scale, src_strides, dst_strides,
            framing=framing, eps=eps, bank=bank)  # fmt: skip
        return
    length = bluestein_length(n)
    chirp = backend.table(("chirp", n, sign), _chirp(n, sign), precision)
    filt = backend.table(("bluestein", n, length, sign), _bluestein_filter(n, length, sign),
                         precision)  # fmt: skip
    spectrum = backend.scratch(batch * length, precision)
    run(length, -1, precision, dataclasses.replace(load, valid=n, table=True), StoreSpec(),
        src, spectrum, 1.0, src_strides, None, load_table=chirp, framing=framing)  # fmt: skip
    run(length, 1, precision, LoadSpec(table=True),
        dataclasses.replace(store, valid=n, table=True), spectrum, dst, scale, None,
        dst_strides, load_table=filt, store_table=chirp, eps=eps, bank=bank)  # fmt: skip


@functools.lru_cache(maxsize=256)
def stft_fusable(n: int, precision: str, onesided: bool) -> bool:
    """Whether an ``n``-point STFT runs as framing block kernels (:func:`stft_1d`): a smooth
    length that fits a block (or whose half does, for the packed one-sided transform), or a
    Bluestein length that does."""
    if factorize(n) is not None:
        packs = onesided and n % 2 == 0 and block_fits(n // 2, precision)
        return block_fits(n, precision) or packs
    return block_fits(bluestein_length(n), precision)


@functools.lru_cache(maxsize=256)
def adjoint_fusable(n: int, precision: str) -> bool:
    """Whether the adjoint of an ``n``-point stft's ``|X| ** e`` runs as one kernel
    (:func:`stft_1d`'s value "adjoint"): an even length whose half is a packed block
    transform."""
    return n % 2 == 0 and factorize(n) is not None and block_fits(n // 2, precision)


def stft_1d(
    backend: Backend, src: Any, dst: Any, window: Any, pad_table: Any, *, n: int,
    framing: Framing, signals: int, onesided: bool, value: str, eps: float, scale: float,
    precision: str, src_storage: str, dst_storage: str, src_strides: Strides,
    bank: BankReduce | None = None, bands: Any = None, weights: Any = None,
    factors: Any = None, exponent: float = 2.0, inverse_scale: float = 1.0,
    expand_width: int = 0, expand_terms: int = 0, ola: OverlapAdd | None = None,
    fold_tables: tuple = (None,) * 3,
) -> None:  # fmt: skip
    """The STFT of ``signals`` real signals (rows of ``src``) into ``dst``: frame-major rows
    of ``n // 2 + 1`` (``onesided``) or ``n`` bins, each stored as ``value`` (complex,
    magnitude, power or db). Framing, padding and the window happen in the FFT's loads and
    the output mapping in its stores (``stft_fusable`` must hold); ``window`` is ``n``
    real values of the compute precision, ``pad_table`` the int64 sources of the padded
    samples (``framing.pad_kind`` ``indexed``) or None.

    With ``bank`` (one-sided only; ``value`` is then ignored), rows of ``bank.n_bands``
    filterbank outputs instead: ``bands`` (int32 first bin, bins, weight offset per band)
    and ``weights`` (compute precision) describe the sparse bank.

    ``value`` "cotangent" (one-sided only): each bin's complex ``F e |X| ** (e - 2) X``,
    halved off DC and Nyquist, for ``e`` = ``exponent`` and real ``factors`` F (compute
    precision, laid out like ``dst``): the input of the one-sided stft's adjoint for a
    cotangent ``F`` of ``|X| ** e`` (plan.StoreSpec).

    ``value`` "adjoint" (one-sided, :func:`adjoint_fusable`): that adjoint in the same
    kernel -- the cotangent's inverse real FFT scaled by ``inverse_scale``, times the window:
    frame-major rows of ``n`` real samples in ``dst``, to be overlap-added (no window). With
    ``expand_width`` > 0, F = B^T G for the cotangent G of a filterbank B's output: ``factors``
    holds G (frame-major rows of ``expand_width`` values) and ``bands`` / ``weights`` the
    bank tables of B^T (:func:`transform_exec.bank_tables`; one band per bin), whose padded
    width ``expand_terms`` gives (0: not known; the kernel then loops over each bin's terms).

    ``value`` "adjoint" with ``ola`` (:func:`ola_fusable`; ``ola.frames`` is
    ``framing.frames``): the frames overlap-added in the kernel too, as the istft's are
    (:func:`istft_1d`, without an envelope): ``dst`` holds contiguous rows of ``ola.out_len``
    samples, padded positions [``ola.start``, ``ola.stop``) of the overlap-add: the padding's
    positions dropped, or with ``ola.fold`` (an indexed padding of ``ola.start`` samples a
    side) folded back onto their sources by ``fold_tables`` (int64 targets, offsets,
    positions: transform_exec.fold_table, ``ola.fold`` targets)."""
    if ola is not None and (value != "adjoint" or ola.frames != framing.frames):
        raise ValueError("an stft overlap-adds the adjoint's frames only, all of them")
    if signals == 0 or framing.frames == 0:
        return
    if value in ("cotangent", "adjoint"):
        if not onesided or bank is not None:
            raise ValueError(f"the {value} store needs the one-sided spectrum and no bank")
        if value == "adjoint" and not adjoint_fusable(n, precision):
            raise ValueError(f"the adjoint of a {n}-point stft is not one {precision} kernel")
        if expand_width and value != "adjoint":
            raise ValueError("factors through a bank need the fused adjoint")
        terms = expand_count(expand_terms) if expand_width else 0
        bank = CotangentStore(float(exponent), float(inverse_scale), int(expand_width), terms)
    program = _stft_program(n, framing, signals, onesided, value, float(eps), float(scale),
                            precision, src_storage, dst_storage, src_strides, bank,
                            ola)  # fmt: skip
    program.run(backend, src, dst, {_WINDOW: window, _PAD_TABLE: pad_table, _BANDS: bands,
                                    _WEIGHTS: weights, _FACTORS: factors,
                                    **dict(zip(_FOLD, fold_tables))})  # fmt: skip


def convolve_1d(backend: Backend, src: Any, dst: Any, spectra: Any, phase: Any, *, n: int,
                framing: Framing, signals: int, out_len: int, precision: str,
                storage: str) -> None:  # fmt: skip
    """The overlap-save convolution of ``signals`` contiguous real rows of ``src``
    (``framing.sig_len`` samples, in ``storage``) in one block kernel a frame (StoreSpec.value
    "convolve", :func:`adjoint_fusable` must hold for ``n``): frame t of a row (``n``
    samples from t * hop - pad, zeros outside the signal), its packed r2c transform, each
    bin k times the row's kernel spectrum (``spectra``: rows of n / 2 + 1 complex values, the
    precision) and ``phase[k]`` (n / 2 + 1), the inverse transform times 1 / n, of which the
    frame's first ``framing.hop`` samples (fewer where the row ends) go to ``dst``
    (contiguous rows of ``out_len``, in ``storage``) at t * hop. The spectrum never leaves
    the block."""
    if not adjoint_fusable(n, precision):
        raise ValueError(f"an {n}-point overlap-save frame is not one {precision} kernel")
    if signals == 0 or framing.frames == 0:
        return
    program = _convolve_program(n, framing, signals, out_len, precision, storage)
    program.run(backend, src, dst, {_FACTORS: spectra, _WEIGHTS: phase, _WINDOW: None,
                                    _PAD_TABLE: None})  # fmt: skip


@functools.lru_cache(maxsize=64)
def _convolve_program(n: int, framing: Framing, signals: int, out_len: int, precision: str,
                      storage: str) -> _Program:  # fmt: skip
    program = _Program()
    backend = _Planner(program)
    load = LoadSpec(USER, "real", storage, frames=framing.pad_kind)
    store = StoreSpec(USER, "real", storage, logical=n, value="convolve")
    spec = block(n // 2, -1, precision, load, store, pack="r2c", unit_in=True, unit_out=True)
    batch = signals * framing.frames
    # frame t of signal s is output row (s, t): s * out_len + t * hop, its outputs below hop
    outs = Strides(framing.frames, out_len, framing.hop, 1)
    # the factor 1 / n (the inverse's normalization) as the adjoint's inverse scale
    args = _block_args(backend, _SRC, _DST, None, None, _WEIGHTS, batch, 1.0,
                       Strides(1, framing.sig_len, 0, 1), outs, framing.frames, 0, 1, 0, 1, n,
                       framing.hop, n, 0, framing, 0.0, CotangentStore(2.0, 1.0 / n),
                       out_len=out_len)  # fmt: skip
    _launch_block(backend, spec, batch, args)
    return program


@dataclass(frozen=True)
class OverlapAdd:
    """The istft's overlap-add of ``frames`` frames per signal, ``hop`` apart: outputs of
    ``out_len`` samples, padded positions [``start``, ``stop``) divided by the window
    envelope (0 from ``stop`` on). The stft adjoint's (:func:`stft_1d`) has no envelope, and
    ``fold`` > 0 targets of its padding's fold (``start`` positions a side)."""

    hop: int
    frames: int
    out_len: int
    start: int
    stop: int
    fold: int = 0


def _ola_spec(n: int, hop: int, precision: str, src_storage: str, dst_storage: str,
              unit_in: bool, scaled: bool) -> BlockSpec:  # fmt: skip
    """The c2r block kernel of the istft's ``n``-point frames with the overlap-add in it."""
    load = LoadSpec(USER, "hermitian", src_storage)
    store = StoreSpec(USER, "real", dst_storage, scaled=scaled, logical=n, ola_hop=hop)
    return block(n // 2, 1, precision, load, store, load_staged=not unit_in, pack="c2r",
                 unit_in=unit_in)  # fmt: skip


@functools.lru_cache(maxsize=256)
def ola_fusable(n: int, hop: int, precision: str) -> bool:
    """Whether ``n``-point frames ``hop`` apart are overlap-added in their block kernel: the
    istft's c2r kernel (:func:`istft_1d`) and the fused stft adjoint (:func:`stft_1d`'s
    ``ola``) alike -- an even smooth length whose half fits a block (:func:`adjoint_fusable`),
    and a hop with which plan.ola_frames finds a block of frames for both (their radices,
    so their threads a frame, may differ: plan.block)."""
    if not adjoint_fusable(n, precision):
        return False
    try:
        _ola_spec(n, hop, precision, precision, precision, False, False)
        _adjoint_ola_spec(n, hop, precision, precision, precision, False, False, "constant", 0)
    except ValueError:
        return False
    return True


def _adjoint_ola_spec(n: int, hop: int, precision: str, src_storage: str, dst_storage: str,
                      unit_in: bool, scaled: bool, pad_kind: str,
                      expand: int) -> BlockSpec:  # fmt: skip
    """The fused adjoint's r2c block kernel (stft value "adjoint") with the overlap-add."""
    load = LoadSpec(USER, "real", src_storage, frames=pad_kind, window=True)
    store = StoreSpec(USER, "real", dst_storage, scaled=scaled, logical=n, value="adjoint",
                      expand=expand, ola_hop=hop)  # fmt: skip
    return block(n // 2, -1, precision, load, store, pack="r2c", unit_in=unit_in)


def istft_1d(backend: Backend, src: Any, dst: Any, window: Any, envelope: Any, *, n: int,
             ola: OverlapAdd, signals: int, scale: float, precision: str, src_storage: str,
             dst_storage: str, src_strides: Strides) -> None:  # fmt: skip
    """The istft of ``signals`` one-sided spectra (``src``: rows of ``n // 2 + 1`` bins, the
    row of frame t of signal s being ``s * ola.frames + t`` of ``src_strides``) into rows of
    ``ola.out_len`` real samples (``dst``, contiguous): each frame's inverse real FFT times
    ``window`` (n values of the precision), overlap-added, times ``scale`` and ``envelope``
    (the window envelope's ``ola.stop - ola.start`` reciprocals, in the precision) in the
    FFT's block kernel, the samples that two blocks' frames share added by a ``seam`` gather
    after it (:func:`ola_fusable` must hold)."""
    if signals == 0 or ola.out_len == 0:
        return
    program = _istft_program(n, ola, signals, float(scale), precision, src_storage,
                             dst_storage, src_strides)  # fmt: skip
    program.run(backend, src, dst, {_WINDOW: window, _ENVELOPE: envelope})


@functools.lru_cache(maxsize=256)
def _istft_program(n, ola, signals, scale, precision, src_storage, dst_storage,
                   src_strides) -> _Program:  # fmt: skip
    program = _Program()
    backend = _Planner(program)
    spec = _ola_spec(n, ola.hop, precision, src_storage, dst_storage,
                     src_strides.elem_stride == 1, scale != 1.0)  # fmt: skip
    per = spec.per_block
    cols, seams = _ola_layout(backend, n, ola, per, signals, precision)
    args = _block_args(backend, _SRC, _DST, None, None, None, signals * cols, scale, src_strides,
                       _rows(n), cols, 0, 1, 0, 1, n, n, n, 0, window=_WINDOW,
                       ola=(ola.frames, ola.out_len, ola.start, ola.stop, _ENVELOPE, seams,
                            None))  # fmt: skip
    _launch_block(backend, spec, signals * cols, args)
    _seam_gather(backend, seams, ola, signals, per, n, scale, precision, dst_storage, _ENVELOPE)
    return program


def _ola_layout(backend, n: int, ola: OverlapAdd, per: int, signals: int,
                precision: str) -> tuple[int, Any]:  # fmt: skip
    """An overlap-add block kernel's frames a signal (``cols``: rounded up to whole blocks of
    ``per``) and its seams' scratch (n - hop sums before and after each block boundary)."""
    groups = -(-ola.frames // per)  # blocks per signal
    return groups * per, backend.scratch(max(1, signals * (groups + 1) * (n - ola.hop)),
                                         precision)  # fmt: skip


def _seam_gather(backend, seams, ola: OverlapAdd, signals: int, per: int, n: int,
                 factor: float, precision: str, storage: str, envelope,
                 edges=None) -> None:  # fmt: skip
    """The ``seam`` gather after an overlap-add block kernel of ``per`` frames a block (of
    ``n`` samples): each seam's two sums added, times ``factor`` (and the ``envelope``'s
    reciprocals, unless None), into ``_DST``, the padded positions into ``edges`` (unless
    None); 0 at the positions no frame reaches."""
    groups = -(-ola.frames // per)  # blocks per signal
    overlap = n - ola.hop
    end = ola.start + ola.out_len + (ola.start if edges is not None else 0)  # padding's too
    past = max(0, end - (groups * per * ola.hop + overlap))  # positions no frame reaches
    size = (groups + 1) * overlap + past
    per_thread = SEAM_POSITIONS if overlap % SEAM_POSITIONS == 0 else 1
    option = "x4" if per_thread > 1 else ""
    if envelope is None:
        option += "flat" if edges is None else "flatedges"
    gather = GatherSpec("seam", storage, precision, option)
    table_a, table_b = (0 if t is None else t for t in (envelope, edges))
    args = (seams, _DST, table_a, table_b, 0, signals, groups + 1, size, overlap,
            per * ola.hop, ola.start, ola.out_len, ola.start, ola.stop, 0.0, factor,
            0.0)  # fmt: skip
    total = signals * -(-size // per_thread)
    if total:
        backend.launch(gather, -(-total // GATHER_THREADS), GATHER_THREADS, 0, args)


def _bank_value(exponent: float) -> str:
    return {2.0: "power", 1.0: "magnitude"}.get(exponent, "pow")


@functools.lru_cache(maxsize=256)
def _stft_program(n, framing, signals, onesided, value, eps, scale, precision, src_storage,
                  dst_storage, src_strides, bank, ola=None) -> _Program:  # fmt: skip
    program = _Program()
    backend = _Planner(program)
    if ola is not None:
        _adjoint_ola(backend, n, framing, ola, signals, scale, precision, src_storage,
                     dst_storage, src_strides, bank)  # fmt: skip
        return program
    batch = signals * framing.frames
    load = LoadSpec(USER, "real", src_storage, frames=framing.pad_kind, window=True)
    mode = "half" if onesided else "complex"
    outs = _rows(n // 2 + 1 if onesided else n)
    reduce = {}
    if value == "adjoint":  # frames of real samples
        mode, outs = "real", _rows(n)
        reduce = dict(expand=bank.expand_terms)
    if isinstance(bank, BankReduce):
        if not onesided:
            raise ValueError("a filterbank reduce needs the one-sided spectrum")
        value = _bank_value(bank.exponent)
        reduce = dict(reduce="bank_db" if bank.db_factor is not None else "bank",
                      bins=n // 2 + 1, bands=bank.n_bands)  # fmt: skip
        outs = _rows(bank.n_bands)
    store = StoreSpec(USER, mode, dst_storage, scaled=scale != 1.0, logical=n, value=value,
                      **reduce)  # fmt: skip
    _any_length(backend, n, -1, precision, load, store, _SRC, _DST, scale, src_strides, outs,
                batch=batch, use_blocks=True, framing=framing, eps=eps, bank=bank)  # fmt: skip
    return program


def _adjoint_ola(backend, n, framing: Framing, ola: OverlapAdd, signals, scale, precision,
                 src_storage, dst_storage, src_strides, bank: CotangentStore) -> None:  # fmt: skip
    """The fused adjoint's block kernel with the overlap-add in it, and its seam gather."""
    spec = _adjoint_ola_spec(n, framing.hop, precision, src_storage, dst_storage,
                             src_strides.elem_stride == 1, scale != 1.0, framing.pad_kind,
                             bank.expand_terms)  # fmt: skip
    per = spec.per_block
    cols, seams = _ola_layout(backend, n, ola, per, signals, precision)
    edges = backend.scratch(signals * ola.start, precision) if ola.fold else None  # 2 pad reals
    args = _block_args(backend, _SRC, _DST, None, None, None, signals * cols, scale, src_strides,
                       _rows(n), cols, 0, 1, 0, 1, n, n, n, 0, framing, 0.0, bank,
                       ola=(ola.frames, ola.out_len, ola.start, ola.stop, None, seams,
                            edges))  # fmt: skip
    _launch_block(backend, spec, signals * cols, args)
    _seam_gather(backend, seams, ola, signals, per, n, bank.inverse_scale, precision,
                 dst_storage, None, edges)  # fmt: skip
    if ola.fold:  # the padded positions' sums onto their sources (after both wrote them)
        args = (edges, _DST, *_FOLD, signals, 0, ola.fold, 0, 0, ola.start, ola.out_len, 0, 0,
                0.0, 0.0, 0.0)  # fmt: skip
        total = signals * ola.fold
        backend.launch(GatherSpec("fold", dst_storage, precision, "edges"),
                       -(-total // GATHER_THREADS), GATHER_THREADS, 0, args)  # fmt: skip


_NONE = Strides(1, 0, 0, 0)
_PASS_BLOCK = 256


def _rows(n: int) -> Strides:
    """Contiguous rows of ``n`` elements (the scratch layout)."""
    return Strides(1, n, 0, 1)


@functools.lru_cache(maxsize=256)
def _roots(n: int) -> np.ndarray:
    """exp(-2 pi i m / n), m < n, in float64 (the block kernels' twiddle table), exactly
    symmetric: each value is a cosine and a sine of an angle in the first eighth turn, swapped
    and negated into place, so that W^(m + n/4) = -i W^m, W^(n/4 - m) = -i conj W^m and
    W^(n - m) = conj W^m hold bit for bit (in float32 too: rounding commutes with both), and
    a kernel may derive those roots from W^m instead of reading them
    (codegen.block._untangled_last_stage). The cosines and sines of angles below pi / 4 are
    also closer to the true roots than exp of the whole angle: max error 1.6e-16 against
    9.7e-16 over n = 400 .. 2048 (an mpmath reference)."""
    out = _unit_roots(n, np.arange(n, dtype=np.int64))
    out.flags.writeable = False
    return out


def _unit_roots(n: int, m: np.ndarray) -> np.ndarray:
    """exp(-2 pi i m / n) for integers 0 <= m < n, as :func:`_roots` builds them."""
    quarters, rest = np.divmod(4 * m, n)  # the angle 2 pi m / n = (quarters + rest / n) pi / 2
    low = 2 * rest <= n  # within the first eighth turn: (cos, sin) of rest, else swapped
    angle = np.where(low, rest, n - rest).astype(np.float64) * (np.pi / (2 * n))
    cos, sin = np.cos(angle), np.sin(angle)
    c, s = np.where(low, cos, sin), np.where(low, sin, cos)
    s = np.where(2 * rest == n, c, s)  # on the diagonal, one value for both
    turned = [(c, s), (-s, c), (-c, -s), (s, -c)]  # a quarter turn: (c, s) -> (-s, c)
    return (np.choose(quarters, [t[0] for t in turned])
            - 1j * np.choose(quarters, [t[1] for t in turned]))  # fmt: skip


@functools.lru_cache(maxsize=64)
def _twist_table(total: int, step: int) -> np.ndarray:
    """The four-step twist kernel's table (codegen.block._twist_rows): exp(-2 pi i step q /
    total) for q < total / step."""
    out = _unit_roots(total, step * np.arange(total // step, dtype=np.int64))
    out.flags.writeable = False
    return out


def _transform(
    backend, n, sign, precision, load, store, src, dst, scale, src_strides, dst_strides, *,
    batch, use_blocks, load_table=None, store_table=None, framing=None, eps=0.0, bank=None,
) -> None:  # fmt: skip
    """One transform of ``n`` points: a block kernel, a four-step pair of them, or passes.
    Framing loads and value / reduce stores exist in block kernels only (``stft_fusable``)."""
    if use_blocks:
        ins = src_strides or _rows(n)
        outs = dst_strides or _rows(n)
        if block_fits(n, precision) or _pack(n, precision, load, store):
            _block(backend, n, sign, precision, load, store, src, dst, scale, ins, outs,
                   batch, load_table, store_table, framing, eps, bank)  # fmt: skip
            return
    if framing is not None or bank is not None or store.value != "complex":
        raise ValueError(f"a {n}-point framing / value transform needs one block kernel")
    if use_blocks:
        split = column_split(n, precision, store, outs.inner == 1)
        if split is not None:
            _four_step(backend, split, sign, precision, load, store, src, dst, scale, ins, outs,
                       batch, load_table, store_table)  # fmt: skip
            return
    _passes(backend, n, sign, precision, load, store, src, dst, scale, src_strides,
            dst_strides, batch, load_table, store_table)  # fmt: skip


def _pack(n, precision, load, store) -> str:
    """``r2c`` / ``c2r`` when the real transform runs as a half-length complex one (a store
    of the first ``valid`` outputs only: c2r, whose packed store writes each real output by
    its own index)."""
    if n % 2 or load.table or store.table or load.valid:
        return ""
    if store.valid and not (load.mode == "hermitian" and store.mode == "real"):
        return ""
    if not block_fits(n // 2, precision):
        return ""
    if load.mode == "real" and (store.mode == "half" or store.value == "adjoint"):
        return "r2c"
    if load.mode == "hermitian" and store.mode == "real":
        return "c2r"
    return ""


@dataclass(frozen=True)
class Framing:
    """STFT framing of the input: ``frames`` frames of each signal of ``sig_len`` samples,
    frame t starting at sample ``t * hop - pad``; ``pad_kind`` ``constant`` (zeros) or
    ``indexed`` (a table of the padded samples' sources)."""

    hop: int
    pad: int
    sig_len: int
    frames: int
    pad_kind: str


@dataclass(frozen=True)
class BankReduce:
    """A filterbank applied to ``|X| ** exponent`` of an stft's one-sided bins inside the
    FFT kernel: ``n_bands`` outputs per frame, in dB (``db_factor * log10(max(s, eps))``)
    when ``db_factor`` is set."""

    n_bands: int
    exponent: float
    db_factor: float | None = None


@dataclass(frozen=True)
class CotangentStore:
    """The launch arguments of an stft of value "cotangent" or "adjoint": the exponent ``e``
    of ``F e |X| ** (e - 2) X``, the adjoint's inverse scale (as the bank's dB factor), the
    width of the rows G that expand through a bank's transpose into F (0: F given) and its
    StoreSpec.expand (plan.expand_count)."""

    exponent: float
    inverse_scale: float = 1.0
    expand_width: int = 0
    expand_terms: int = 0


def _block_args(
    backend, src, dst, table, load_table, store_table, batch, scale, ins, outs,
    cols, in_cm, in_jm, out_cm, out_jm, load_valid, store_valid, logical, total,
    framing: Framing | None = None, eps: float = 0.0,
    bank: BankReduce | CotangentStore | None = None, window: Any = None, ola: tuple = (),
    twists: Any = None, out_len: int = 0,
):  # fmt: skip
    """The launch arguments of a block kernel (codegen.block.BLOCK_PARAMS); ``window`` for
    the overlap-add, ``ola`` its (frames, out_len, start, stop, envelope, seams, edges);
    ``twists`` a four-step twist kernel's table (_twist_table); ``out_len`` without an
    overlap-add: the output rows' length (the convolution's store limit)."""

    def ptr(buffer):
        return backend.pointer(buffer) if buffer is not None else 0

    frame_args: tuple = (0, 0, 0, 0)
    if framing is not None:  # (with the overlap-add, cols rounds the frames up to blocks)
        cols, in_cm = cols if ola else framing.frames, framing.hop
        frame_args = (framing.sig_len, framing.pad, ptr(_PAD_TABLE), ptr(_WINDOW))
    elif window is not None:
        frame_args = (0, 0, 0, ptr(window))
    ola_args = (*ola[:4], *map(ptr, ola[4:])) if ola else (0, out_len, 0, 0, 0, 0, 0)
    bank_args: tuple = (0, 0, 0, 0, 0.0, 0.0)
    if isinstance(bank, BankReduce):
        bank_args = (ptr(_BANDS), ptr(_WEIGHTS), 0, bank.n_bands, float(bank.db_factor or 0.0),
                     float(bank.exponent))  # fmt: skip
    elif isinstance(bank, CotangentStore):
        tables = (ptr(_BANDS), ptr(_WEIGHTS)) if bank.expand_width else (0, 0)
        bank_args = (*tables, ptr(_FACTORS), bank.expand_width, float(bank.inverse_scale),
                     float(bank.exponent))  # fmt: skip
    return (
        ptr(src), ptr(dst), ptr(table), ptr(load_table), ptr(store_table), batch, float(scale),
        ins.inner, ins.outer_stride, ins.inner_stride, ins.elem_stride,
        outs.inner, outs.outer_stride, outs.inner_stride, outs.elem_stride,
        cols, in_cm, in_jm, out_cm, out_jm, load_valid, store_valid, logical, total,
        ptr(twists), *frame_args, float(eps), *bank_args, *ola_args,
    )  # fmt: skip


def _block_table(spec: BlockSpec) -> np.ndarray:
    """The block kernel's twiddles: its ``table_n`` roots indexed by ``spec.twiddle_index``."""
    out = _roots(spec.table_n)[np.asarray(spec.twiddle_index(), dtype=np.int64)]
    out.flags.writeable = False
    return out


def _launch_block(backend, spec: BlockSpec, batch: int, args: tuple) -> None:
    key = ("block roots", spec.table_n, spec.radices)
    table = backend.table(key, _block_table(spec), spec.precision)
    args = args[:2] + (backend.pointer(table),) + args[3:]
    grid, threads, shared = block_launch_sizes(spec, batch)
    tuning.launched(spec)
    backend.launch(spec, grid, threads, shared, args)


def _block(backend, n, sign, precision, load, store, src, dst, scale, ins, outs, batch,
           load_table, store_table, framing=None, eps=0.0, bank=None) -> None:  # fmt: skip
    pack = _pack(n, precision, load, store)
    if store.value == "adjoint" and pack != "r2c":
        raise ValueError(f"the adjoint of a {n}-point stft needs a packed block kernel")
    size = n // 2 if pack else n
    # Strided elements with adjacent transforms: move whole tiles through shared memory.
    load_staged = (not pack and not load.frames and ins.elem_stride != 1 and ins.inner > 1
                   and ins.inner_stride == 1)  # fmt: skip
    store_staged = not pack and outs.elem_stride != 1 and outs.inner > 1 and outs.inner_stride == 1
    if pack or not block_fits(size, precision):
        load_staged = store_staged = False
    spec = block(size, sign, precision, load, store, load_staged=load_staged,
                 store_staged=store_staged, pack=pack, unit_in=ins.elem_stride == 1,
                 unit_out=outs.elem_stride == 1)  # fmt: skip
    args = _block_args(backend, src, dst, None, load_table, store_table, batch, scale, ins,
                       outs, 1, 0, 1, 0, 1, load.valid or n, store.valid or n,
                       store.logical or n, 0, framing, eps, bank)  # fmt: skip
    _launch_block(backend, spec, batch, args)


def _four_step(backend, split, sign, precision, load, store, src, dst, scale, ins, outs,
               batch, load_table, store_table) -> None:  # fmt: skip
    """n = n1 m: n1-point columns (stride m) times the twiddles, then m-point rows, the result
    stored transposed; all are block kernels with staged (coalesced) columns. With m = n2 n3
    the rows are a four-step of their own, written back to back: n2-point columns (stride n3,
    twiddles of m) in place of the rows, then n3-point rows, a block's transforms those of
    adjacent k1 (the output's fastest index): k = k1 + n1 (k2 + n2 k3)."""
    n = math.prod(split)
    n1, m = split[0], n // split[0]
    scratch = backend.scratch(batch * n, precision)
    _twist_pass(backend, n1, m, sign, precision, load, src, scratch, ins, batch,
                load.valid or n, load_table)  # fmt: skip
    # the last pass: rows (block transforms of adjacent k1) of ``length`` points
    length, rows, rows_in, rows_out, out_jm = m, batch, _rows(n), outs, n1
    if len(split) == 3:
        n2, n3 = split[1:]
        columns = backend.scratch(batch * n, precision)
        _twist_pass(backend, n2, n3, sign, precision, LoadSpec(), scratch, columns, _rows(m),
                    batch * n1, m, None)  # fmt: skip
        scratch, length, rows, out_jm = columns, n3, batch * n2, n1 * n2
        rows_in = Strides(n2, n, n3, 1)  # user row (u, k2) -> its rows (u, k1, k2) at k1 m
        rows_out = Strides(n2, outs.outer_stride, n1 * outs.elem_stride, outs.elem_stride)
    last = column_block(length, sign, precision, LoadSpec(), store, twist=False)
    args = _block_args(backend, scratch, dst, None, None, store_table, rows * n1, scale,
                       rows_in, rows_out, n1, m, 1, 1, out_jm, n, store.valid or n,
                       store.logical or n, n)  # fmt: skip
    _launch_block(backend, last, rows * n1, args)


def _twist_pass(backend, length, stride, sign, precision, load, src, dst, ins, rows,
                load_valid, load_table) -> None:  # fmt: skip
    """A four-step's first pass over ``rows`` rows of ``length * stride`` points: each row's
    ``stride`` columns of ``length`` points (element j at j * stride) times the twiddles
    W^(c k) of the row's length, written as ``length`` contiguous rows of ``stride``."""
    total = length * stride
    spec = column_block(length, sign, precision, load, StoreSpec(), twist=True)
    twists = backend.table(("four-step twists", total, spec.threads),
                           _twist_table(total, spec.threads), "float64")  # fmt: skip
    args = _block_args(backend, src, dst, None, load_table, None, rows * stride, 1.0, ins,
                       _rows(total), stride, 1, stride, 1, stride, load_valid, total, total,
                       total, twists=twists)  # fmt: skip
    _launch_block(backend, spec, rows * stride, args)


def _passes(backend, n, sign, precision, load, store, src, dst, scale, src_strides,
            dst_strides, batch, load_table, store_table) -> None:  # fmt: skip
    """One global-memory kernel per radix pass (any smooth length; the fallback)."""

    def common(source, target, first, last, ins, outs):
        ins, outs = ins or _NONE, outs or _NONE
        return (
            backend.pointer(source), backend.pointer(target),
            backend.pointer(load_table) if first and load_table is not None else 0,
            backend.pointer(store_table) if last and store_table is not None else 0,
            batch, float(scale) if last else 1.0,
            ins.inner, ins.outer_stride, ins.inner_stride, ins.elem_stride,
            outs.inner, outs.outer_stride, outs.inner_stride, outs.elem_stride,
        )  # fmt: skip

    chain = passes(n, sign, precision, load, store)
    count = min(2, len(chain) - 1)
    buffers = [backend.scratch(batch * n, precision) for _ in range(count)]
    current = src
    for index, step in enumerate(chain):
        first, last = index == 0, index == len(chain) - 1
        target = dst if last else buffers[index % 2]
        args = common(current, target, first, last, src_strides if first else None,
                      dst_strides if last else None) + launch_sizes(step)  # fmt: skip
        threads = batch * (n // step.radix)
        backend.launch(step, -(-threads // _PASS_BLOCK), _PASS_BLOCK, 0, args)
        current = target


__all__ = ["CANONICAL", "BankReduce", "Framing", "OverlapAdd", "Strides", "adjoint_fusable",
           "convolve_1d", "istft_1d", "ola_fusable", "stage_radices", "stft_1d", "stft_fusable",
           "transform_1d"]  # fmt: skip
