"""The FFT family on CUDA tensors: plans run through generated, NVRTC-compiled kernels.

Launches go on torch's current stream of the tensor's device; scratch comes from torch's
caching allocator; Bluestein tables are uploaded once per (length, precision, device).
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
import torch

from specux.compat.torch_compat import current_raw_stream, dtype_name, upload
from specux.kernels.codegen.gather import MMA_CAPABILITY
from specux.kernels.cuda.launch import kernel, launch
from specux.kernels.cuda.runtime import compute_capability, load_winners
from specux.kernels.fft_exec import Strides, transform_1d
from specux.kernels.native import axis_scale
from specux.meta import dtypes

# torch dtype -> (storage name, register precision)
_STORAGE = {
    torch.float16: ("float16", "float32"),
    torch.bfloat16: ("bfloat16", "float32"),
    torch.float32: ("float32", "float32"),
    torch.float64: ("float64", "float64"),
    torch.complex32: ("float16", "float32"),
    torch.complex64: ("float32", "float32"),
    torch.complex128: ("float64", "float64"),
}
_SCRATCH = {"float32": torch.complex64, "float64": torch.complex128}


class TorchCudaBackend:
    """fft_exec.Backend on one CUDA device, on its current torch stream."""

    _tables: dict = {}
    _lock = threading.Lock()

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.index = device.index if device.index is not None else torch.cuda.current_device()
        self.stream = current_raw_stream(self.index)
        self.tensor_cores = compute_capability(self.index) >= MMA_CAPABILITY
        load_winners(self.index)  # before anything is planned for the device

    def scratch(self, count: int, precision: str) -> torch.Tensor:
        return torch.empty(count, dtype=_SCRATCH[precision], device=self.device)

    def table(self, key: tuple, values, precision: str) -> torch.Tensor:
        """``values`` (or a function building them, called only for a new key) as the
        precision's complex dtype on the device, uploaded once per key."""
        full_key = (key, precision, self.index)
        table = self._tables.get(full_key)
        if table is None:
            values = values() if callable(values) else values
            host = torch.from_numpy(np.array(values, dtype=np.complex128))  # a writable copy
            table = upload(host.to(dtype=_SCRATCH[precision]), self.device)
            with self._lock:
                table = self._tables.setdefault(full_key, table)
        return table

    def constant(self, key: tuple, values) -> torch.Tensor:
        """``values`` on the device as they are (dtype kept), uploaded once per key; a
        function building them is called only when ``key`` is new (``key`` then fixes the
        dtype), as :meth:`specux.kernels.native.Device.constant`."""
        full_key = ("constant", key, "built" if callable(values) else values.dtype.str,
                    self.index)  # fmt: skip
        table = self._tables.get(full_key)
        if table is None:
            host = values() if callable(values) else values
            table = upload(torch.from_numpy(np.array(host)), self.device)
            with self._lock:
                table = self._tables.setdefault(full_key, table)
        return table

    def pointer(self, buffer: torch.Tensor) -> int:
        return buffer.data_ptr()

    def launch(self, spec, grid: int, block: int, shared: int, args: tuple) -> None:
        launch(spec, self.index, self.stream, grid, block, shared, args)


def precompile(sizes, *, kinds=("c2c",), signs=(-1, 1), storage="float32", device=None,
               workers: int | None = None) -> int:  # fmt: skip
    """Compile, concurrently, every kernel that transforms of these lengths would launch
    (contiguous rows); returns how many distinct kernels that is. Every length being its own
    kernel, this is how a sweep over thousands of lengths (the tests) pays NVRTC once, on all
    cores, instead of once per length in turn."""
    from concurrent.futures import ThreadPoolExecutor

    from specux.kernels.fft_exec import _program

    index = torch.device("cuda" if device is None else device).index
    index = torch.cuda.current_device() if index is None else index
    load_winners(index)  # plan the kernels the calls will (autotuned winners included)
    precision = "float64" if storage == "float64" else "float32"
    specs = set()
    for n in sizes:
        for kind in kinds:
            for sign in signs:
                rows = Strides.along((1, n), 1)
                half = Strides.along((1, n // 2 + 1), 1)
                ins = half if kind == "c2r" else rows
                out = half if kind == "r2c" else rows
                program = _program(n, kind, sign, 1.0, precision, 1, storage, storage, ins, out,
                                   True)  # fmt: skip
                specs.update(launch[0] for launch in program.launches)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda spec: kernel(spec, index), specs))
    return len(specs)


def _empty(shape, dtype: torch.dtype, device) -> torch.Tensor:
    if dtype is not torch.complex32:
        return torch.empty(shape, dtype=dtype, device=device)
    with warnings.catch_warnings():
        # torch warns on every complex32 allocation; complex32 is what API.md promises for
        # float16 inputs, and the kernels read and write it themselves.
        warnings.filterwarnings("ignore", message="ComplexHalf support is experimental")
        return torch.empty(shape, dtype=dtype, device=device)


def _dense(x: torch.Tensor) -> torch.Tensor:
    """C-contiguous with conjugate / negative views materialized (the kernels read memory)."""
    return x.resolve_conj().resolve_neg().contiguous()


def _complex_of(dtype: torch.dtype) -> torch.dtype:
    return getattr(torch, dtypes.complex_of(dtype_name(dtype)))


def _real_of(dtype: torch.dtype) -> torch.dtype:
    return getattr(torch, dtypes.real_of(dtype_name(dtype)))


def _run(backend, src, dst, axis, n, kind, inverse, norm) -> None:
    src_storage, precision = _STORAGE[src.dtype]
    dst_storage, _ = _STORAGE[dst.dtype]
    batch = src.numel() // max(src.shape[axis], 1) if src.shape[axis] else 0
    transform_1d(
        backend, src, dst, n=n, kind=kind, sign=1 if inverse else -1,
        scale=axis_scale(n, norm, inverse), precision=precision, batch=batch,
        src_storage=src_storage, dst_storage=dst_storage,
        src_strides=Strides.along(tuple(src.shape), axis),
        dst_strides=Strides.along(tuple(dst.shape), axis),
    )  # fmt: skip


def _intermediate(shape, like: torch.Tensor) -> torch.Tensor:
    """Between axes, values stay in the register precision (float16 storage is rounded once)."""
    precision = _STORAGE[like.dtype][1]
    return torch.empty(shape, dtype=_SCRATCH[precision], device=like.device)


def c2c(x: torch.Tensor, dims, forward: bool, norm: str) -> torch.Tensor:
    x = _dense(x)
    dims = [d % x.dim() for d in dims]
    out = _empty(x.shape, x.dtype, x.device)
    if x.numel() == 0 or not dims:
        return out.copy_(x)
    backend = TorchCudaBackend(x.device)
    current = x
    for index, axis in enumerate(dims):
        last = index == len(dims) - 1
        target = out if last else _intermediate(x.shape, x)
        _run(backend, current, target, axis, x.shape[axis], "c2c", not forward, norm)
        current = target
    return out


def r2c(x: torch.Tensor, dims, norm: str) -> torch.Tensor:
    x = _dense(x)
    dims = [d % x.dim() for d in dims]
    last_axis = dims[-1]
    shape = list(x.shape)
    shape[last_axis] = x.shape[last_axis] // 2 + 1
    out = _empty(shape, _complex_of(x.dtype), x.device)
    if x.numel() == 0:
        return out.zero_()
    backend = TorchCudaBackend(x.device)
    first = out if len(dims) == 1 else _intermediate(shape, x)
    _run(backend, x, first, last_axis, x.shape[last_axis], "r2c", False, norm)
    current = first
    for index, axis in enumerate(dims[:-1]):
        last = index == len(dims) - 2
        target = out if last else _intermediate(shape, x)
        _run(backend, current, target, axis, shape[axis], "c2c", False, norm)
        current = target
    return out


def c2r(x: torch.Tensor, dims, last_size: int, norm: str) -> torch.Tensor:
    x = _dense(x)
    dims = [d % x.dim() for d in dims]
    last_axis = dims[-1]
    shape = list(x.shape)
    shape[last_axis] = last_size
    out = torch.empty(shape, dtype=_real_of(x.dtype), device=x.device)
    if out.numel() == 0:
        return out
    backend = TorchCudaBackend(x.device)
    current = x
    for axis in dims[:-1]:
        target = _intermediate(x.shape, x)
        _run(backend, current, target, axis, x.shape[axis], "c2c", True, norm)
        current = target
    _run(backend, current, out, last_axis, last_size, "c2r", True, norm)
    return out
