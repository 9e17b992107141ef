"""Host emulation: the generated kernels rendered in the C++ dialect, built with the system
compiler and run on numpy buffers: pass kernels one loop iteration per GPU thread, block
kernels one host thread per GPU thread with a std::barrier per block (SIMT emulation).

It checks the generator's indexing and numerics on any machine (CI has no GPU). Not a
backend for users: it is slow and needs a C++20 compiler (g++ or clang++).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

from specux.kernels.codegen.dialects import CPP
from specux.kernels.codegen.fft import arg_types
from specux.kernels.codegen.kernels import Spec, is_block, render, source_key
from specux.kernels.fft_exec import Strides, transform_1d
from specux.kernels.native import Device

_COMPLEX = {"float32": np.complex64, "float64": np.complex128}


def compiler() -> str | None:
    """The C++ compiler the emulation builds with, or None."""
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")


@functools.cache
def _build(source: str, name: str, params: tuple, extra: int) -> ctypes.CDLL:
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    folder = os.path.join(tempfile.gettempdir(), f"specux-emulate-{os.getuid()}")
    os.makedirs(folder, exist_ok=True)
    library = os.path.join(folder, f"{digest}.so")
    if not os.path.exists(library):
        source_path = os.path.join(folder, f"{digest}.cpp")
        with open(source_path, "w") as f:
            f.write(source)
        partial = f"{library}.{os.getpid()}.tmp"
        cmd = [compiler(), "-std=c++20", "-O0", "-pthread", "-shared", "-fPIC", source_path,
               "-o", partial]  # fmt: skip
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"host build of {source_path} failed:\n{result.stderr}")
        os.replace(partial, library)
    lib = ctypes.CDLL(library)
    entry = getattr(lib, name)
    entry.argtypes = [ctypes.c_longlong] * extra + list(arg_types(params))
    entry.restype = None
    return lib


@functools.lru_cache(maxsize=1024)
def _entry_for_key(key: Spec):
    source, name, params = render(key, CPP)
    # Block kernels: (blocks, threads per block, shared bytes, kernel arguments...);
    # pass kernels: (threads, kernel arguments...).
    extra = 3 if is_block(key) else 1
    return getattr(_build(source, name, params, extra), name)


@functools.lru_cache(maxsize=4096)
def entry(spec: Spec):
    """The host function of a kernel (one build per distinct source)."""
    return _entry_for_key(source_key(spec))


class HostBackend:
    """fft_exec.Backend on numpy buffers; keeps every buffer alive until it is discarded.
    ``tensor_cores=True`` runs float32 correlations on the tensor-core tiles' emulation."""

    tensor_cores = False

    def __init__(self) -> None:
        self._keep: list[np.ndarray] = []

    def scratch(self, count: int, precision: str) -> np.ndarray:
        buffer = np.zeros(count, dtype=_COMPLEX[precision])
        self._keep.append(buffer)
        return buffer

    def table(self, key: tuple, values, precision: str) -> np.ndarray:
        values = values() if callable(values) else values
        buffer = np.ascontiguousarray(values, dtype=_COMPLEX[precision])
        self._keep.append(buffer)
        return buffer

    def constant(self, key: tuple, values) -> np.ndarray:
        buffer = np.ascontiguousarray(values() if callable(values) else values)
        self._keep.append(buffer)
        return buffer

    def pointer(self, buffer: np.ndarray) -> int:
        return buffer.ctypes.data

    def launch(self, spec, grid: int, block: int, shared: int, args: tuple) -> None:
        if is_block(spec):  # one host thread per GPU thread of a block
            entry(spec)(grid, block, shared, *args)
        else:  # pass kernels: one loop step per GPU thread
            entry(spec)(grid * block, *args)


class _HostBuffer:
    __slots__ = ("memory", "ptr")

    def __init__(self, nbytes: int) -> None:
        self.memory = np.zeros(max(nbytes, 1), dtype=np.uint8)
        self.ptr = self.memory.ctypes.data


class HostDevice(Device):
    """A :class:`specux.kernels.native.Device` in host memory: the torch-free engine's code
    (views, conversions, launch sequences) runs here on the emulated kernels."""

    kind = "host"
    index = -1

    def __init__(self) -> None:
        self.constants = {}

    def allocate(self, nbytes: int) -> _HostBuffer:
        return _HostBuffer(nbytes)

    def copy_in(self, ptr: int, host: np.ndarray) -> None:
        ctypes.memmove(ptr, host.ctypes.data, host.nbytes)

    def copy_out(self, host: np.ndarray, ptr: int) -> None:
        ctypes.memmove(host.ctypes.data, ptr, host.nbytes)

    def memset_zero(self, ptr: int, nbytes: int) -> None:
        ctypes.memset(ptr, 0, nbytes)

    launch = HostBackend.launch


_STORAGE = {
    np.dtype(np.float16): "float16",
    np.dtype(np.float32): "float32",
    np.dtype(np.float64): "float64",
    np.dtype(np.complex64): "float32",
    np.dtype(np.complex128): "float64",
}


def fft_1d(x: np.ndarray, kind: str, n: int, sign: int = -1, scale: float = 1.0,
           axis: int = -1, blocks: bool = True) -> np.ndarray:  # fmt: skip
    """An FFT along ``axis`` computed by the emulated kernels (tests compare it with numpy).

    ``x`` is complex (c2c), real (r2c) or a half spectrum (c2r); float16 storage is a
    ``(..., 2)`` float16 array of (re, im) pairs for complex data, plain float16 for real.
    """
    half_pairs = x.dtype == np.float16 and kind != "r2c"
    shape = x.shape[:-1] if half_pairs else x.shape
    axis %= len(shape)
    x = np.ascontiguousarray(x)
    storage = _STORAGE[x.dtype]
    precision = "float64" if storage == "float64" else "float32"
    out_len = {"c2c": n, "r2c": n // 2 + 1, "c2r": n}[kind]
    out_shape = list(shape)
    out_shape[axis] = out_len
    if kind == "c2r":
        out = np.zeros(out_shape, dtype=np.float16 if storage == "float16" else
                       np.dtype(_COMPLEX[precision]).type(0).real.dtype)  # fmt: skip
    elif storage == "float16":
        out = np.zeros((*out_shape, 2), dtype=np.float16)
    else:
        out = np.zeros(out_shape, dtype=_COMPLEX[precision])
    batch = int(np.prod(shape)) // shape[axis] if shape[axis] else 0
    backend = HostBackend()
    transform_1d(
        backend, x, out, n=n, kind=kind, sign=sign, scale=scale, precision=precision,
        batch=batch, src_storage=storage, dst_storage=storage,
        src_strides=Strides.along(tuple(shape), axis),
        dst_strides=Strides.along(tuple(out_shape), axis), use_blocks=blocks,
    )  # fmt: skip
    return out
