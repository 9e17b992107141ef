"""A CUDA :class:`specux.kernels.native.Device` without torch: memory and launches of one call
through the driver API (cuda-python), on one stream.

- cupy arrays (:func:`for_cupy`): the call runs on cupy's current stream of the array's
  device; every buffer comes from cupy's memory pool (stream-ordered on that stream), so the
  results are cupy arrays that own their memory.
- numpy arrays (:func:`for_numpy`): the call runs on specux's own non-blocking stream of the
  current device; buffers come from specux's stream-ordered memory pool of the device
  (``cuMemAllocFromPoolAsync``; the pool keeps freed memory for the next call) and are freed
  when the call ends (``cuMemFreeAsync``), inputs and results move by ``cuMemcpyHtoDAsync`` /
  ``cuMemcpyDtoHAsync``.

Constants (windows, filterbanks, index tables, twiddles) are uploaded once per device into
memory that lives as long as the process, shared by both routes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from specux.compat import cuda as _cuda
from specux.kernels.codegen.gather import MMA_CAPABILITY
from specux.kernels.cuda import runtime
from specux.kernels.cuda.launch import launch as _launch
from specux.kernels.native import Device, DeviceArray, itemsize

_constants: dict[int, dict] = {}  # device index -> Device.constants
_streams: dict[int, tuple[int, object]] = {}  # device index -> (stream, memory pool): numpy route


class _Pointer:
    """Device memory: ``owner`` keeps it alive (a cupy array) where the call does not manage
    it; ``fresh`` marks memory this call allocated (results may be handed out as they are)."""

    __slots__ = ("fresh", "owner", "ptr")

    def __init__(self, ptr: int, owner: Any = None, fresh: bool = False) -> None:
        self.ptr = int(ptr)
        self.owner = owner
        self.fresh = fresh


class CudaDevice(Device):
    """One call's memory and launches on device ``index``, on the raw stream ``stream``."""

    kind = "cuda"

    def __init__(self, index: int, stream: int, library: str, pool: object = None) -> None:
        self.index = int(index)
        self.stream = int(stream)
        self.library = library  # "cupy": cupy's pool; "numpy": the call's own allocations
        self.pool = pool  # numpy route: specux's memory pool of the device
        self.constants = runtime.once(_constants, self.index, dict)
        self.tensor_cores = runtime.compute_capability(self.index) >= MMA_CAPABILITY
        runtime.load_winners(self.index)  # before anything is planned for the device
        self._owned: list[int] = []
        self._driver = _cuda.driver()

    def __repr__(self) -> str:
        return f"CudaDevice(cuda:{self.index}, stream={self.stream:#x}, {self.library})"

    @contextlib.contextmanager
    def session(self) -> Iterator[CudaDevice]:
        """The device's primary context current for the call (the caller's restored after);
        the call's own allocations freed, stream-ordered, when it ends."""
        ctx = runtime._primary_context(self.index)
        with runtime._current(ctx, int(ctx)):
            try:
                yield self
            finally:
                owned, self._owned = self._owned, []
                for ptr in owned:
                    _cuda.check(self._driver.cuMemFreeAsync(ptr, self.stream), "cuMemFreeAsync")

    # -- Device
    def allocate(self, nbytes: int) -> Any:
        if nbytes == 0:
            return _Pointer(0)
        if self.library == "cupy":
            import cupy

            memory = cupy.empty(nbytes, dtype=cupy.uint8)  # on cupy's current stream
            return _Pointer(memory.data.ptr, memory, fresh=True)
        ptr = int(_cuda.check(self._driver.cuMemAllocFromPoolAsync(nbytes, self.pool, self.stream),
                              "cuMemAllocFromPoolAsync"))  # fmt: skip
        self._owned.append(ptr)
        return _Pointer(ptr)

    def keep(self, host: np.ndarray) -> DeviceArray:
        """A constant: plain device memory, never freed (like torch's cached tables)."""
        host = np.ascontiguousarray(host)
        nbytes = host.nbytes
        ptr = int(_cuda.check(self._driver.cuMemAlloc(max(nbytes, 1)), "cuMemAlloc"))
        if nbytes:
            # Complete before it is shared: later calls may read it from other streams.
            self.copy_in(ptr, host)
            _cuda.check(self._driver.cuStreamSynchronize(self.stream), "cuStreamSynchronize")
        return DeviceArray(self, _Pointer(ptr), host.shape, host.dtype.name)

    def copy_in(self, ptr: int, host: np.ndarray) -> None:
        # From pageable memory the driver stages the bytes before it returns: ``host`` may go.
        _cuda.check(self._driver.cuMemcpyHtoDAsync(ptr, host.ctypes.data, host.nbytes,
                                                   self.stream), "cuMemcpyHtoDAsync")  # fmt: skip

    def copy_out(self, host: np.ndarray, ptr: int) -> None:
        _cuda.check(self._driver.cuMemcpyDtoHAsync(host.ctypes.data, ptr, host.nbytes,
                                                   self.stream), "cuMemcpyDtoHAsync")  # fmt: skip
        _cuda.check(self._driver.cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    def memset_zero(self, ptr: int, nbytes: int) -> None:
        _cuda.check(self._driver.cuMemsetD8Async(ptr, 0, nbytes, self.stream), "cuMemsetD8Async")

    def launch(self, spec, grid: int, block: int, shared: int, args: tuple) -> None:
        _launch(spec, self.index, self.stream, grid, block, shared, args)

    # -- arrays of the caller's library
    def wrap_cupy(self, a: Any) -> DeviceArray:
        """A cupy array as a DeviceArray view of its memory (zero-copy, any strides)."""
        size = itemsize(a.dtype.name)
        if any(s % size for s in a.strides):
            import cupy

            a = cupy.ascontiguousarray(a)
        strides = tuple(s // size for s in a.strides)
        return DeviceArray(self, _Pointer(a.data.ptr, a), a.shape, a.dtype.name, strides)

    def to_cupy(self, array: DeviceArray) -> Any:
        """A DeviceArray of this call's cupy memory as a cupy array (a copy if it is not)."""
        import cupy

        from specux.kernels.native import convert

        if array.size == 0:
            return cupy.empty(array.shape, dtype=array.dtype)
        if not array.buffer.fresh:  # an input or a constant: results never alias those
            array = convert(array, array.dtype)
        buffer = array.buffer
        size = array.itemsize
        memory = buffer.owner.data + array.offset * size
        return cupy.ndarray(array.shape, dtype=array.dtype, memptr=memory,
                            strides=tuple(s * size for s in array.strides))  # fmt: skip


def for_cupy(a: Any) -> CudaDevice:
    """The device of a cupy array, on cupy's current stream."""
    import cupy

    with cupy.cuda.Device(a.device.id):
        stream = cupy.cuda.get_current_stream().ptr
    return CudaDevice(a.device.id, stream, "cupy")


def for_numpy(index: int) -> CudaDevice:
    """Device ``index`` on specux's own stream and memory pool (created once per device)."""
    stream, pool = runtime.once(_streams, index, lambda: _stream_and_pool(index))
    return CudaDevice(index, stream, "numpy", pool)


def _stream_and_pool(index: int) -> tuple[int, object]:
    """A non-blocking stream and a stream-ordered memory pool that keeps what the calls free
    (the driver's default pool returns it to the OS at every synchronization, so each call
    would map its buffers again)."""
    driver = _cuda.driver()
    ctx = runtime._primary_context(index)
    with runtime._current(ctx, int(ctx)):
        flags = driver.CUstream_flags.CU_STREAM_NON_BLOCKING
        stream = int(_cuda.check(driver.cuStreamCreate(flags), "cuStreamCreate"))
        props = driver.CUmemPoolProps()
        props.allocType = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        props.handleTypes = driver.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE
        props.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        props.location.id = index
        pool = _cuda.check(driver.cuMemPoolCreate(props), "cuMemPoolCreate")
        keep_all = driver.cuuint64_t(2**64 - 1)
        attribute = driver.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
        _cuda.check(driver.cuMemPoolSetAttribute(pool, attribute, keep_all),
                    "cuMemPoolSetAttribute")  # fmt: skip
    return stream, pool


__all__ = ["CudaDevice", "for_cupy", "for_numpy"]
