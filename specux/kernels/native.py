"""The transforms on device memory without torch: the generated kernels on :class:`DeviceArray`
views, for the torch-free routes of seed-backends (cupy arrays by raw pointer on cupy's
current stream; numpy arrays staged by the runtime itself).

A :class:`Device` is where one call's arrays live: it allocates, uploads, downloads and
launches (``specux.kernels.cuda.device`` on a GPU stream; ``specux.kernels.emulate`` runs the
same code on the host, which is how CI checks it). :class:`NativeEngine` is the engine the
public functions use for such arrays (``specux.engines``): the same kernels and launch
sequences as the torch CUDA kernels (``specux.kernels.cuda``), so both routes give the same
bits (``cqt`` / ``vqt`` included: one tiled correlation kernel per octave group on both).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from specux.errors import BackendUnavailableError
from specux.kernels import transform_exec
from specux.kernels.cpu import stft as cpu_stft
from specux.kernels.fft_exec import Strides, transform_1d
from specux.kernels.plan import smooth_length
from specux.meta import dtypes, shapes
from specux.meta.cqt_params import ConstantQSpec
from specux.meta.matrices import MatrixSpec
from specux.meta.params import StftParams, axis_scale
from specux.meta.windows import centered_offset

NATIVE = "native"  # the library name of DeviceArray (specux.compat.arrays)

# dtype name -> (storage, register precision) of the kernels
_STORAGE = {
    "float16": ("float16", "float32"),
    "float32": ("float32", "float32"),
    "float64": ("float64", "float64"),
    "complex32": ("float16", "float32"),
    "complex64": ("float32", "float32"),
    "complex128": ("float64", "float64"),
}
_ITEMSIZE = {"complex32": 4}


def itemsize(dtype: str) -> int:
    return _ITEMSIZE.get(dtype) or np.dtype(dtype).itemsize


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


class DeviceArray:
    """A strided view (element strides, numpy's order) of one device allocation: the array
    type of the torch-free routes. It has metadata and views only; values change through the
    engine's kernels."""

    __slots__ = ("buffer", "device", "dtype", "offset", "shape", "strides")

    def __init__(self, device: Device, buffer: Any, shape, dtype: str, strides=None,
                 offset: int = 0) -> None:  # fmt: skip
        self.device = device
        self.buffer = buffer  # has .ptr; keeps the memory alive
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.strides = _contiguous_strides(self.shape) if strides is None else tuple(strides)
        self.offset = int(offset)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return itemsize(self.dtype)

    @property
    def ptr(self) -> int:
        return self.buffer.ptr + self.offset * self.itemsize if self.size else 0

    @property
    def is_contiguous(self) -> bool:
        expected = _contiguous_strides(self.shape)
        return all(n <= 1 or s == e for n, s, e in zip(self.shape, self.strides, expected))

    def view(self, shape, strides, offset: int | None = None) -> DeviceArray:
        return DeviceArray(self.device, self.buffer, shape, self.dtype, strides,
                           self.offset if offset is None else offset)  # fmt: skip

    def reshape(self, shape) -> DeviceArray:
        if not self.is_contiguous:
            raise ValueError("reshape of a non-contiguous DeviceArray (make it dense first)")
        shape = tuple(shape)
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape = tuple(self.size // max(known, 1) if s == -1 else s for s in shape)
        return self.view(shape, _contiguous_strides(shape))

    def swapaxes(self, a: int, b: int) -> DeviceArray:
        order = list(range(self.ndim))
        order[a], order[b] = order[b], order[a]
        return self.view([self.shape[i] for i in order], [self.strides[i] for i in order])

    def moveaxis(self, source: int, destination: int) -> DeviceArray:
        order = list(range(self.ndim))
        order.insert(destination % self.ndim, order.pop(source % self.ndim))
        return self.view([self.shape[i] for i in order], [self.strides[i] for i in order])

    def narrow(self, axis: int, start: int, length: int) -> DeviceArray:
        axis %= self.ndim
        shape = list(self.shape)
        shape[axis] = length
        return self.view(shape, self.strides, self.offset + start * self.strides[axis])

    def broadcast_to(self, shape) -> DeviceArray:
        """A stride-0 view over ``shape`` (numpy's broadcasting of the leading axes)."""
        shape = tuple(shape)
        lead = len(shape) - self.ndim
        strides = [0] * lead + [0 if n == 1 and m != 1 else s for n, m, s in
                                zip(self.shape, shape[lead:], self.strides)]  # fmt: skip
        return self.view(shape, strides)

    def __repr__(self) -> str:
        return (f"DeviceArray(shape={self.shape}, dtype={self.dtype}, strides={self.strides}, "
                f"device={self.device!r})")  # fmt: skip


# Distinct view geometry tables a device keeps (a few hundred bytes each).
VIEW_TABLES = 4096


class Device:
    """Memory and launches of one call (subclasses: the CUDA runtime, the host emulation).

    Subclasses implement ``allocate(nbytes)`` (an object with ``.ptr``), ``copy_in(ptr,
    host)``, ``copy_out(host, ptr)``, ``memset_zero(ptr, nbytes)`` and ``launch(spec, grid,
    block, shared, args)``, and give ``constants`` (a dict shared by every Device of the same
    memory space).
    """

    constants: dict
    # Whether float32 correlations may take the tensor-core tiles (transform_exec.tensor_cores):
    # the CUDA runtime sets it from the device's compute capability; the host emulation runs
    # them when a test sets it.
    tensor_cores: bool = False

    # -- arrays
    def empty(self, shape, dtype: str) -> DeviceArray:
        size = math.prod(shape)
        return DeviceArray(self, self.allocate(size * itemsize(dtype)), shape, dtype)

    def zeros(self, shape, dtype: str) -> DeviceArray:
        out = self.empty(shape, dtype)
        if out.size:
            self.memset_zero(out.ptr, out.size * out.itemsize)
        return out

    def upload(self, host: np.ndarray) -> DeviceArray:
        host = np.ascontiguousarray(host)
        out = self.empty(host.shape, host.dtype.name)
        if host.size:
            self.copy_in(out.ptr, host)
        return out

    def download(self, array: DeviceArray) -> np.ndarray:
        """The values of a contiguous array as numpy (waits for the device)."""
        if not array.is_contiguous:
            raise ValueError("download needs a contiguous array")
        host = np.empty(array.shape, dtype=np.dtype(array.dtype))
        if host.size:
            self.copy_out(host, array.ptr)
        return host

    # -- fft_exec.Backend
    def scratch(self, count: int, precision: str) -> DeviceArray:
        return self.empty((count,), dtypes.complex_of(precision))

    def table(self, key: tuple, values, precision: str) -> DeviceArray:
        """``values`` (or a function building them) in the precision's complex dtype."""
        dtype = np.dtype(dtypes.complex_of(precision))  # cast only when not yet on the device
        return self.constant(("table", key, precision), lambda: np.asarray(
            values() if callable(values) else values).astype(dtype))

    def constant(self, key: tuple, values) -> DeviceArray:
        """``values`` uploaded once per key (and dtype), kept for the process's lifetime;
        ``values`` may be a function building them, called only when ``key`` is new (then
        ``key`` alone must fix the dtype)."""
        full_key = (key, "built" if callable(values) else np.asarray(values).dtype.str)
        array = self.constants.get(full_key)
        if array is None:
            host = values() if callable(values) else values
            array = self.constants.setdefault(full_key, self.keep(np.array(host)))
        return array

    def view_table(self, table: np.ndarray) -> DeviceArray:
        """A view's geometry table (``convert``'s int64 ndim / shapes / strides), uploaded once
        per distinct table and kept like the constants, so a repeated call uploads nothing;
        past ``VIEW_TABLES`` distinct tables a device uploads the rest per call (bounded
        memory for a process that meets endless shapes)."""
        tables = self.constants.setdefault("view tables", {})
        key = table.tobytes()
        cached = tables.get(key)
        if cached is not None:
            return cached
        if len(tables) >= VIEW_TABLES:
            return self.upload(table)
        return tables.setdefault(key, self.keep(np.array(table)))

    def keep(self, host: np.ndarray) -> DeviceArray:
        """``host`` uploaded to memory that outlives the call (the constants); by default the
        call's own memory (a subclass whose call memory is freed overrides it)."""
        return self.upload(host)

    def pointer(self, buffer: DeviceArray) -> int:
        return buffer.ptr


# ---------------------------------------------------------------------------------------------
# elementwise kernels


def convert(x: DeviceArray, dtype: str, shape=None, conj: bool = False,
            out: DeviceArray | None = None) -> DeviceArray:  # fmt: skip
    """``x`` (any strides) as a contiguous array of ``dtype`` and ``shape`` (each axis as long
    as ``x``'s or longer: the rest is zeros), conjugated if asked; into ``out`` if given."""
    device = x.device
    shape = tuple(x.shape if shape is None else shape)
    if out is None:
        out = device.empty(shape, dtype)
    if out.size == 0:
        return out
    nd = max(x.ndim, 1)
    view_shape = x.shape or (1,)
    table = np.array([nd, *(shape or (1,)), *view_shape, *(x.strides or (0,))], dtype=np.int64)
    transform_exec.convert(device, x.buffer, out, device.view_table(table), start=x.offset,
                           size=out.size, src_dtype=x.dtype, dst_dtype=out.dtype,
                           conj=conj)  # fmt: skip
    return out


def dense(x: DeviceArray) -> DeviceArray:
    return x if x.is_contiguous else convert(x, x.dtype)


def _elementwise(kind: str, option: str, x: DeviceArray, out_dtype: str, *, rows: int,
                 size: int, table=None, eps: float = 0.0, factor: float = 0.0,
                 count: int = 0, exponent: float = 0.0, out: DeviceArray | None = None,
                 out_shape=None, total: int | None = None) -> DeviceArray:  # fmt: skip
    if out is None:
        out = x.device.empty(x.shape if out_shape is None else out_shape, out_dtype)
    storage, precision = _STORAGE[out_dtype]
    if kind == "value":  # complex in the precision -> the output's real storage
        precision = _STORAGE[x.dtype][1]
    transform_exec.elementwise(x.device, kind, option, x, out, rows=rows, size=size,
                               storage=storage, precision=precision, table=table,
                               count=count, eps=eps, factor=factor,
                               exponent=exponent, total=total)  # fmt: skip
    return out


def row_max(values: DeviceArray, rows: int, size: int) -> DeviceArray:
    """The maximum of each of the ``rows`` contiguous rows of ``size`` values of dense
    ``values`` (NaN if the row holds one), ``(rows,)`` in its dtype
    (:func:`transform_exec.row_max`: a block a chunk of a row, then a block a row)."""
    out = values.device.empty((rows,), values.dtype)
    storage, precision = _STORAGE[values.dtype]
    transform_exec.row_max(values.device, values, out, rows=rows, size=size, storage=storage,
                           precision=precision)  # fmt: skip
    return out


def _map(option: str, x: DeviceArray, *, size: int, table=None, factor=0.0,
         eps=0.0) -> DeviceArray:  # fmt: skip
    x = dense(x)
    return _elementwise("map", option, x, x.dtype, rows=x.size // max(size, 1), size=size,
                        table=table, factor=factor, eps=eps)  # fmt: skip


def apply_value(spectrum: DeviceArray, value: str, eps: float, out: DeviceArray | None = None,
                out_dtype: str | None = None) -> DeviceArray:  # fmt: skip
    """complex -> magnitude / power / dB (10 log10 max(power, eps)), or a cast of the complex."""
    spectrum = dense(spectrum)
    if out is not None:
        out_dtype = out.dtype
    if value == "complex":
        return convert(spectrum, out_dtype or spectrum.dtype, out=out)
    real = out_dtype or dtypes.real_of(spectrum.dtype)
    return _elementwise("value", value, spectrum, real, rows=1, size=spectrum.size, eps=eps,
                        out=out)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# FFT family


def _run(src: DeviceArray, dst: DeviceArray, axis: int, n: int, kind: str, inverse: bool,
         norm: str) -> None:  # fmt: skip
    src_storage, precision = _STORAGE[src.dtype]
    dst_storage, _ = _STORAGE[dst.dtype]
    batch = src.size // max(src.shape[axis], 1) if src.shape[axis] else 0
    transform_1d(
        src.device, src, dst, n=n, kind=kind, sign=1 if inverse else -1,
        scale=axis_scale(n, norm, inverse), precision=precision, batch=batch,
        src_storage=src_storage, dst_storage=dst_storage,
        src_strides=Strides.along(src.shape, axis), dst_strides=Strides.along(dst.shape, axis),
    )  # fmt: skip


def _intermediate(shape, like: DeviceArray) -> DeviceArray:
    return like.device.empty(shape, dtypes.complex_of(_STORAGE[like.dtype][1]))


def c2c(x: DeviceArray, dims, forward: bool, norm: str) -> DeviceArray:
    x = dense(x)
    dims = [d % x.ndim for d in dims]
    if x.size == 0 or not dims:
        return convert(x, x.dtype)
    out = x.device.empty(x.shape, x.dtype)
    current = x
    for index, axis in enumerate(dims):
        target = out if index == len(dims) - 1 else _intermediate(x.shape, x)
        _run(current, target, axis, x.shape[axis], "c2c", not forward, norm)
        current = target
    return out


def r2c(x: DeviceArray, dims, norm: str) -> DeviceArray:
    x = dense(x)
    dims = [d % x.ndim for d in dims]
    last_axis = dims[-1]
    shape = list(x.shape)
    shape[last_axis] = x.shape[last_axis] // 2 + 1
    complex_type = dtypes.complex_of(x.dtype)
    if x.size == 0:
        return x.device.zeros(shape, complex_type)
    out = x.device.empty(shape, complex_type)
    first = out if len(dims) == 1 else _intermediate(shape, x)
    _run(x, first, last_axis, x.shape[last_axis], "r2c", False, norm)
    current = first
    for index, axis in enumerate(dims[:-1]):
        target = out if index == len(dims) - 2 else _intermediate(shape, x)
        _run(current, target, axis, shape[axis], "c2c", False, norm)
        current = target
    return out


def c2r(x: DeviceArray, dims, last_size: int, norm: str) -> DeviceArray:
    x = dense(x)
    dims = [d % x.ndim for d in dims]
    last_axis = dims[-1]
    shape = list(x.shape)
    shape[last_axis] = last_size
    out = x.device.empty(shape, dtypes.real_of(x.dtype))
    if out.size == 0:
        return out
    current = x
    for axis in dims[:-1]:
        target = _intermediate(x.shape, x)
        _run(current, target, axis, x.shape[axis], "c2c", True, norm)
        current = target
    _run(current, out, last_axis, last_size, "c2r", True, norm)
    return out


# ---------------------------------------------------------------------------------------------
# stft / istft


def full_window(p: StftParams, window: DeviceArray | None, precision: str,
                device: Device) -> DeviceArray:  # fmt: skip
    """The n_fft-point window in the compute precision: a named one is the CPU backend's
    (float64, rounded once) uploaded once; an array is zero-padded around its center."""
    if window is None:
        host = cpu_stft.full_window(p, None, np.dtype(precision))
        return device.constant(("window", p.window, p.win_length, p.n_fft), host)
    out = device.zeros((p.n_fft,), precision)
    left = centered_offset(p.win_length, p.n_fft)
    convert(window, precision, out=out.narrow(0, left, p.win_length))
    return out


def _rows(x: DeviceArray) -> tuple[DeviceArray, int]:
    """``x`` dense, and its rows of the last axis, also when that axis is empty (as the
    torch route's: cuda.transforms._rows)."""
    x = dense(x)
    return x, math.prod(x.shape[:-1])


def _storage(x: DeviceArray) -> tuple[str, str]:
    if x.dtype.startswith("complex") or x.dtype not in _STORAGE:
        raise TypeError(f"these kernels read real float16, float32 and float64 arrays, "
                        f"not {x.dtype}")  # fmt: skip
    return _STORAGE[x.dtype]


def _spectrum_dtype(storage: str, value: str) -> str:
    return dtypes.complex_of(storage) if value == "complex" else storage


def frame(x: DeviceArray, frame_length: int, hop: int, pad: int, mode: str) -> DeviceArray:
    storage, precision = _storage(x)
    x, rows = _rows(x)
    length = x.shape[-1]
    count = shapes.n_frames(length, frame_length, hop, pad)
    out = x.device.empty((*x.shape[:-1], count, frame_length), x.dtype)
    transform_exec.frame(x.device, x, out, rows=rows, sig_len=length, frame_len=frame_length,
                         hop=hop, pad=pad, mode=mode, count=count, storage=storage,
                         precision=precision)  # fmt: skip
    return out


def stft_frames(x: DeviceArray, window, p: StftParams, value: str, eps: float,
                storage: str | None = None) -> DeviceArray:  # fmt: skip
    """The stft of ``x`` frame-major, ``(..., n_frames, n_freq)`` of ``value``."""
    src_storage, precision = _storage(x)
    dst_storage = storage or src_storage
    x, rows = _rows(x)
    length = x.shape[-1]
    device = x.device
    count = shapes.n_frames(length, p.n_fft, p.hop_length, p.pad)
    out = device.empty((*x.shape[:-1], count, p.n_freq), _spectrum_dtype(dst_storage, value))
    if out.size == 0:
        return out
    w = full_window(p, window, precision, device)
    if transform_exec.stft_fusable(p.n_fft, precision, p.onesided):
        transform_exec.stft(device, x, out, w, signals=rows, sig_len=length, n_fft=p.n_fft,
                            hop=p.hop_length, pad=p.pad, mode=p.pad_mode, onesided=p.onesided,
                            value=value, eps=eps, scale=axis_scale(p.n_fft, p.fft_norm, False),
                            precision=precision, src_storage=src_storage,
                            dst_storage=dst_storage)  # fmt: skip
        return out
    # Beyond a block: frames in memory, windowed, the FFT kernels, the output mapping.
    frames = convert(frame(x, p.n_fft, p.hop_length, p.pad, p.pad_mode), precision)
    frames = _map("window", frames, size=p.n_fft, table=w)
    if p.onesided:
        spectrum = r2c(frames, [-1], p.fft_norm)
    else:
        spectrum = c2c(convert(frames, dtypes.complex_of(precision)), [-1], True, p.fft_norm)
    return apply_value(spectrum, value, eps, out=out)


def istft(spec: DeviceArray, window, p: StftParams, length: int, nola: str = "raise"
          ) -> DeviceArray:  # fmt: skip
    """One-sided spectra whose frames' inverse FFT is a block kernel go through the fused
    overlap-add (:func:`transform_exec.istft`); the others through the inverse FFT's frames
    and the istft gather."""
    storage, precision = _STORAGE[spec.dtype]
    device = spec.device
    count = spec.shape[-1]
    if window is None:
        env, start, stop, out_length = named_istft_envelope(p, count, length, precision, nola)
        envelope = device.constant(("inverse envelope", p, count, length, nola), env)
    else:
        w64 = device.download(full_window(p, window, "float64", device))
        env, start, stop, out_length = istft_envelope(p, w64, count, length, precision, nola)
        envelope = device.upload(env)
    w = full_window(p, window, precision, device)
    out = device.empty((*spec.shape[:-2], out_length), dtypes.real_of(spec.dtype))
    rows = out.size // out_length if out_length else 0
    bounds = dict(count=count, start=start, stop=stop, out_len=out_length, storage=storage,
                  precision=precision)  # fmt: skip
    if transform_exec.istft_fusable(p.n_fft, p.hop_length, precision, p.onesided, count,
                                    out_length):  # fmt: skip
        spec, strides = _signal_axes(spec)
        transform_exec.istft(device, spec, out, w, envelope, signals=rows, strides=strides,
                             n_fft=p.n_fft, hop=p.hop_length,
                             scale=axis_scale(p.n_fft, p.fft_norm, True), **bounds)  # fmt: skip
        return out
    columns = spec.swapaxes(-1, -2)
    if p.onesided:
        frames = c2r(columns, [-1], p.n_fft, p.fft_norm)
    else:
        frames = convert(c2c(columns, [-1], False, p.fft_norm), dtypes.real_of(spec.dtype))
    transform_exec.istft_overlap_add(device, frames, out, w, envelope, rows=rows,
                                     frame_len=p.n_fft, hop=p.hop_length, **bounds)  # fmt: skip
    return out


def _signal_axes(x: DeviceArray) -> tuple[DeviceArray, tuple[int, int, int]]:
    """``x`` (..., a, b) as (signals, a, b): its element strides there, with the leading axes
    as one (``x`` made dense first when they do not collapse into one stride)."""
    lead = [(n, s) for n, s in zip(x.shape[:-2], x.strides[:-2]) if n != 1]
    if any(s < 0 for s in x.strides) or any(outer != inner * n for (_, outer), (n, inner)
                                            in zip(lead, lead[1:])):  # fmt: skip
        return _signal_axes(convert(x, x.dtype))
    return x, (lead[-1][1] if lead else 0, x.strides[-2], x.strides[-1])


@functools.lru_cache(maxsize=128)
def named_istft_envelope(p: StftParams, count: int, length: int, precision: str,
                         nola: str = "raise"):  # fmt: skip
    """:func:`istft_envelope` of ``p``'s named window, computed once per call shape."""
    w64 = np.asarray(cpu_stft.full_window(p, None, np.dtype("float64")))
    return istft_envelope(p, w64, count, length, precision, nola)


def istft_envelope(p: StftParams, w64: np.ndarray, count: int, length: int, precision: str,
                   nola: str = "raise"):  # fmt: skip
    """(the envelope's reciprocals over [start, stop) in the compute precision, start, stop,
    out_length) of the float64 window ``w64`` after the NOLA check, or with 1 where it
    vanishes for ``nola="keep"`` (:func:`~specux.kernels.cpu.stft.envelope_divisor`, as the
    CPU backend divides); both CUDA routes use it. The kernels multiply by the reciprocal
    (rounded once from float64): a division costs a float32 kernel a dozen instructions an
    output."""
    env = cpu_stft.envelope(p, w64, count)
    start, stop, out_length = cpu_stft.istft_bounds(p, count, None if length < 0 else length)
    divisor = cpu_stft.envelope_divisor(env, start, stop, p, nola, np.dtype(precision))
    part = np.ascontiguousarray((1.0 / divisor).astype(precision))
    part.flags.writeable = False
    return part, start, stop, out_length


# ---------------------------------------------------------------------------------------------
# filterbanks, projections


def named_bands(device, spec: str, precision: str, n_in: int, what: str):
    """(bands, weights, rows) of a named matrix on ``device`` (anything with ``constant``:
    a :class:`Device`, the torch route's backend), after checking its width."""
    bands, weights, width = transform_exec.sparse_bank(spec, precision)
    if width != n_in:
        raise ValueError(f"the matrix has {width} columns but {what} has {n_in} features")
    return (device.constant(("bands", spec), bands), device.constant(("bank", spec), weights),
            len(bands))  # fmt: skip


def bank_spectrogram(x: DeviceArray, window, p: StftParams, power: float, bank_spec: str,
                     output: str, eps: float) -> DeviceArray:  # fmt: skip
    """``bank @ |stft(x)| ** power`` (dB when output is "db"), ``(..., n_bands, n_frames)``."""
    storage, precision = _storage(x)
    device = x.device
    bands, weights, n_out = named_bands(device, bank_spec, precision, p.n_freq, "the stft")
    db_factor = 20.0 / power if output == "db" else None
    x, rows = _rows(x)
    length = x.shape[-1]
    count = shapes.n_frames(length, p.n_fft, p.hop_length, p.pad)
    out = device.empty((*x.shape[:-1], count, n_out), x.dtype)
    if out.size == 0:
        return out.swapaxes(-1, -2)
    common = dict(n_out=n_out, power=power, db_factor=db_factor, eps=eps, storage=storage,
                  precision=precision)  # fmt: skip
    if transform_exec.stft_fusable(p.n_fft, precision, True):
        w = full_window(p, window, precision, device)
        transform_exec.filterbank_stft(device, x, out, w, bands, weights, p=p, signals=rows,
                                       sig_len=length, **common)  # fmt: skip
        return out.swapaxes(-1, -2)
    spectrum = stft_frames(x, window, p, transform_exec.spectrum_value(power), eps,
                           storage=precision)  # fmt: skip
    transform_exec.filterbank_of_spectrum(device, spectrum, out, bands, weights,
                                          rows=out.size // n_out, n_in=p.n_freq, **common)
    return out.swapaxes(-1, -2)


def project(x: DeviceArray, spec: str, top_db: float | None = None) -> DeviceArray:
    """``matrix @ x`` along the feature axis (-2) for a named matrix: one kernel
    (:func:`transform_exec.project`); with ``top_db``, of ``x`` clipped per signal at its
    peak minus ``top_db`` (transform_exec.project finds the peaks; the projection kernel or
    the tiled correlation clips as it reads, the gather reads a clipped copy)."""
    storage, precision = _storage(x)
    device = x.device
    n_in = x.shape[-2]
    bands, weights, n_out = named_bands(device, spec, precision, n_in, "x")
    is_dense = transform_exec.named_dense(spec, precision)
    signals = math.prod(x.shape[:-2])
    clip = top_db is not None and x.size
    if clip and not transform_exec.projects_clipped(is_dense, n_in, storage, precision):
        x, clip = NativeEngine.clip_top_db(x, top_db), False
    rows = dense(x.swapaxes(-1, -2))
    out = device.empty((*rows.shape[:-1], n_out), x.dtype)
    transform_exec.project(device, rows, out, bands, weights, rows=out.size // max(n_out, 1),
                           n_in=n_in, n_out=n_out, storage=storage, precision=precision,
                           dense=is_dense, signals=signals, clip=bool(clip),
                           top_db=0.0 if top_db is None else top_db)  # fmt: skip
    return out.swapaxes(-1, -2)


# ---------------------------------------------------------------------------------------------
# cqt, fftconvolve


def cqt(x: DeviceArray, spec: ConstantQSpec, pad_mode: str, output: str,
        eps: float) -> DeviceArray:  # fmt: skip
    """``(..., L)`` real -> ``(..., n_bins, n_frames)``: the CPU backend's definition (exact
    correlation with the constant-Q filters), one tiled correlation kernel per octave group
    (the torch route's launches)."""
    _, precision = _storage(x)
    device = x.device
    x = convert(x, precision) if x.dtype != precision else dense(x)
    *batch, length = x.shape
    count = x.size // length if length else 0
    plan, n_frames, pad = transform_exec.cqt_plan(spec, precision, length, max(count, 1))
    out = device.zeros((count, n_frames, 2 * spec.n_bins), precision)
    if count and n_frames:
        flat = x.reshape((count, length))
        padded = frame(flat, length + 2 * pad, 1, pad, pad_mode)  # (count, 1, length + 2 pad)
        transform_exec.cqt_correlate(device, padded, out, spec, plan, count=count,
                                     n_frames=n_frames, row_len=length + 2 * pad, pad=pad,
                                     precision=precision)  # fmt: skip
    spectrum = DeviceArray(device, out.buffer, (count, n_frames, spec.n_bins),
                           dtypes.complex_of(precision))  # fmt: skip
    result = apply_value(spectrum, output, eps)
    return result.reshape((*batch, n_frames, spec.n_bins)).swapaxes(-1, -2)


def fftconvolve(x: DeviceArray, y: DeviceArray) -> DeviceArray:
    """Full linear convolution along the last axis (leading axes broadcast); ``x`` and ``y``
    of one compute dtype."""
    length = x.shape[-1] + y.shape[-1] - 1
    lead = tuple(np.broadcast_shapes(x.shape[:-1], y.shape[:-1]))
    swap, block = transform_exec.overlap_save_operands(x.dtype, x.shape[-1], y.shape[-1])
    if block:
        return _overlap_save(*((y, x) if swap else (x, y)), block, lead)
    n = smooth_length(length)
    if x.dtype.startswith("complex"):
        fx = c2c(convert(x, x.dtype, (*x.shape[:-1], n)), [-1], True, "backward")
        fy = c2c(convert(y, y.dtype, (*y.shape[:-1], n)), [-1], True, "backward")
    else:
        fx = r2c(convert(x, x.dtype, (*x.shape[:-1], n)), [-1], "backward")
        fy = r2c(convert(y, y.dtype, (*y.shape[:-1], n)), [-1], "backward")
    product = spectral_product(fx, fy, lead)
    if x.dtype.startswith("complex"):
        out = c2c(product, [-1], False, "backward")
    else:
        out = c2r(product, [-1], n, "backward")
    return dense(out.narrow(-1, 0, length))


def _overlap_save(x: DeviceArray, y: DeviceArray, block: int,
                  lead: tuple[int, ...]) -> DeviceArray:  # fmt: skip
    """transform_exec.overlap_save of real ``x`` with the shorter real ``y`` (one dtype)."""
    short = y.shape[-1]
    out = x.device.empty((*lead, x.shape[-1] + short - 1), x.dtype)
    if out.size == 0:
        return out
    storage, precision = _storage(x)
    xd, rows = _rows(x.broadcast_to((*lead, x.shape[-1])))
    taps, _ = _rows(y.broadcast_to((*lead, short)))
    transform_exec.overlap_save(x.device, xd, taps, out, signals=rows, sig_len=x.shape[-1],
                                short=short, block=block, precision=precision,
                                storage=storage)  # fmt: skip
    return out


def spectral_product(fx: DeviceArray, fy: DeviceArray, lead: tuple[int, ...]) -> DeviceArray:
    """``fx * fy`` with the leading axes broadcast to ``lead`` (one cmul kernel)."""
    shape = (*lead, fx.shape[-1])
    fx = dense(fx.broadcast_to(shape)) if fx.shape != shape else fx
    fy = dense(fy.broadcast_to(shape)) if fy.shape != shape else fy
    return _elementwise("cmul", "", fx, fx.dtype, rows=1, size=fx.size, table=fy)


# ---------------------------------------------------------------------------------------------
# the engine



# colnorm kernel options by librosa's normalize norm (any other p > 0: "p")
_COLNORM_OPTIONS = {math.inf: "inf", -math.inf: "min", 0.0: "count", 1.0: "1"}


class NativeEngine:
    """specux.engines' interface on DeviceArrays (forward only: no autograd without torch)."""

    library = NATIVE

    @staticmethod
    def cast(x: DeviceArray, dtype: str) -> DeviceArray:
        return x if x.dtype == dtype else convert(x, dtype)

    @staticmethod
    def resize(x: DeviceArray, axis: int, size: int) -> DeviceArray:
        have = x.shape[axis]
        if have >= size:
            return x if have == size else x.narrow(axis, 0, size)
        shape = list(x.shape)
        shape[axis] = size
        return convert(x, x.dtype, shape)

    @staticmethod
    def conj(x: DeviceArray) -> DeviceArray:
        return convert(x, x.dtype, conj=True) if x.dtype.startswith("complex") else x

    c2c = staticmethod(c2c)
    r2c = staticmethod(r2c)
    c2r = staticmethod(c2r)

    @staticmethod
    def stft(x, window, p: StftParams, output: str, eps: float):
        return stft_frames(x, window, p, output, eps).swapaxes(-1, -2)

    @staticmethod
    def istft(spec, window, p: StftParams, length: int | None, nola: str = "raise"):
        return istft(spec, window, p, -1 if length is None else length, nola)

    @staticmethod
    def bank_spectrogram(x, window, p: StftParams, power, bank: MatrixSpec, output, eps):
        return bank_spectrogram(x, window, p, power, bank.as_key(), output, eps)

    @staticmethod
    def project(x, spec: MatrixSpec, top_db: float | None = None):
        return project(x, spec.as_key(), top_db)

    fftconvolve = staticmethod(fftconvolve)

    @staticmethod
    def cqt(x, spec: ConstantQSpec, pad_mode: str, output: str, eps: float):
        return cqt(x, spec, pad_mode, output, eps)

    @staticmethod
    def db(values: DeviceArray, factor: float, eps: float) -> DeviceArray:
        return _map("db", values, size=max(values.size, 1), factor=factor, eps=eps)

    @staticmethod
    def clip_top_db(values: DeviceArray, top_db: float) -> DeviceArray:
        """Per signal (leading index): ``max(S, max(S) - top_db)`` over the last two axes."""
        if values.size == 0:
            return values
        values = dense(values)
        size = values.shape[-1] * values.shape[-2]
        rows = values.size // size
        return _map("clip", values, size=size, table=row_max(values, rows, size),
                    factor=top_db)  # fmt: skip

    @staticmethod
    def normalize(values: DeviceArray, norm: float, axis: int) -> DeviceArray:
        """librosa's util.normalize along ``axis`` (-2 here): unit ``norm`` per column."""
        if axis % values.ndim != values.ndim - 2:
            raise ValueError("normalize runs along the feature axis (-2) on this route")
        values = dense(values)
        count, size = values.shape[-2], values.shape[-1]
        rows = values.size // max(count * size, 1)
        option = _COLNORM_OPTIONS.get(norm, "p")
        tiny = float(np.finfo(np.dtype(values.dtype)).tiny)
        return _elementwise("colnorm", option, values, values.dtype, rows=rows, size=size,
                            count=count, eps=tiny, exponent=float(norm))  # fmt: skip

    @staticmethod
    def moveaxis(x: DeviceArray, source: int, destination: int) -> DeviceArray:
        return x.moveaxis(source, destination)

    @staticmethod
    def threshold(values: DeviceArray, level: float) -> DeviceArray:
        return _map("threshold", values, size=max(values.size, 1), factor=level)

    @staticmethod
    def host(x) -> np.ndarray:
        raise BackendUnavailableError(
            "this step reads values back to the host and specux does not copy from the GPU "
            "silently (pass tuning= to chroma, or run it on the CPU)"
        )

    @staticmethod
    def narrow(x: DeviceArray, axis: int, start: int, length: int) -> DeviceArray:
        return x.narrow(axis, start, length)


__all__ = ["NATIVE", "Device", "DeviceArray", "NativeEngine", "convert", "dense"]
