"""numpy and cupy arrays on CUDA (seed-backends' routes), with torch and without it.

The public functions are written against numpy arrays (the CPU engine), torch tensors (the
torch ops, whose CUDA kernels are specux's own) and DeviceArrays (the torch-free engine,
:mod:`specux.kernels.native`). :func:`across_libraries` wraps each one so that

- a cupy array runs on CUDA, zero-copy, on cupy's current stream: with torch (built with
  CUDA) it enters torch by DLPack and the result leaves the same way, torch's current stream
  set to cupy's for the call; without it, the array's pointer and strides go straight to the
  kernels (buffers from cupy's pool) and the results are cupy arrays;
- a numpy array runs on CUDA when the machine has a CUDA device (``backend="auto"`` or
  ``"cuda"``): with torch, staged through pinned host memory on torch's allocator and current
  stream; without it, uploaded and read back by the runtime itself on specux's own stream
  (buffers from its own stream-ordered memory pool, async copies); the result is numpy;
- everything else (torch tensors, numpy without a GPU) calls the function unchanged.

Both routes run the same kernels in the same order, so they give the same bits (cqt / vqt
included: both correlate in the same tiled kernel).
Results follow API.md's dtype rules for the input's library (complex64 where torch would
give complex32). cupy inputs are forward-only (cupy has no autograd).
"""

from __future__ import annotations

import functools
import inspect
import sys
from typing import Any

import numpy as np

from specux import options as _options
from specux import routing
from specux.compat.arrays import CUPY, NUMPY, library_of
from specux.compat.torch_compat import compiling, torch_module
from specux.errors import BackendUnavailableError
from specux.meta.params import backend_name

# Parameters that may hold arrays of the input's library (converted with it).
_ARRAY_PARAMETERS = ("x", "S", "y", "window")


def numpy_runs_on_cuda(backend: str) -> bool:
    """Whether a numpy input with this ``backend`` runs on CUDA here (False: on the CPU)."""
    if backend not in ("auto", "cuda"):
        return False
    if routing.cuda_driver_reason() is not None:
        return False  # no driver: auto means the CPU (and "cuda" raises in routing)
    reason = routing.backend_unavailable_reason("cuda")
    if reason is not None and backend == "auto":
        _warn_numpy_on_cpu(reason)  # a GPU that cannot be used: said once, never silent
    return reason is None


@functools.cache
def _warn_numpy_on_cpu(reason: str) -> None:
    import warnings

    warnings.warn(
        f"an NVIDIA driver is present but specux's CUDA backend cannot run ({reason}): numpy "
        "inputs with backend='auto' run on the CPU. Install the cuda13 / cuda12 extra, or pass "
        "backend='cpu' to choose the CPU explicitly.",
        stacklevel=4,
    )


def _torch_on_cuda() -> bool:
    """Whether the torch route is available (torch installed, built with CUDA, a device)."""
    torch = torch_module()
    return torch is not None and torch.cuda.is_available()


def across_libraries(fn=None, *, host_only=None):
    """Wrap a public function so numpy and cupy inputs take the CUDA routes (module doc).

    ``host_only(kwargs)``: True when that call reads its data back to the host (e.g.
    chroma's tuning estimate); a numpy input then stays on the CPU under ``backend="auto"``.
    """
    if fn is None:
        return functools.partial(across_libraries, host_only=host_only)
    signature = inspect.signature(fn)
    first_name = next(iter(signature.parameters))

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _options.is_autotuning() and not compiling():
            from specux.plans import autotune_first_call

            autotune_first_call(wrapper, signature, args, kwargs)
        first = args[0] if args else kwargs.get(first_name)
        if not isinstance(first, np.ndarray) and not _is_cupy(first):
            return fn(*args, **kwargs)  # torch tensors (and bad inputs: fn raises)
        backend = kwargs.get("backend", "auto")  # keyword-only in every public function
        library = library_of(first, first_name)
        if library == NUMPY:
            try:
                name = backend_name(backend)
            except Exception:  # noqa: BLE001 - fn raises the parameter error itself
                return fn(*args, **kwargs)
            if not numpy_runs_on_cuda(name):
                return fn(*args, **kwargs)
            if name == "auto" and host_only is not None and host_only(kwargs):
                return fn(*args, **kwargs)
            bound = signature.bind(*args, **kwargs)
            if _torch_on_cuda():
                return _through_torch(fn, bound, library, _numpy_to_cuda, _cuda_to_numpy)
            return _through_native(fn, bound, library)
        # cupy: strict backend checks (and why CUDA cannot run) come first
        routing.route(first, backend, first_name)
        bound = signature.bind(*args, **kwargs)
        if _torch_on_cuda():
            return _through_torch(fn, bound, library, _cupy_to_torch, _torch_to_cupy)
        return _through_native(fn, bound, library)

    return wrapper


def _is_cupy(x: Any) -> bool:
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(x, cupy.ndarray)


def _through_torch(fn, bound, library: str, enter, leave) -> Any:
    torch = torch_module()
    first = next(iter(bound.arguments.values()))
    device = torch.device("cuda", _device_index(first, library))
    with torch.cuda.device(device), torch.cuda.stream(_stream(device, library)):
        for name in _ARRAY_PARAMETERS:
            value = bound.arguments.get(name)
            if value is not None and _same_library(value, library):
                bound.arguments[name] = enter(value, device)
        out = fn(*bound.args, **bound.kwargs)
        return leave(out)


def _through_native(fn, bound, library: str) -> Any:
    """The torch-free route: DeviceArrays on the kernel runtime (module doc)."""
    import contextlib

    from specux.kernels import native
    from specux.kernels.cuda import device as cuda_device

    first = next(iter(bound.arguments.values()))
    if library == CUPY:
        import cupy

        device = cuda_device.for_cupy(first)
        scope = cupy.cuda.Device(first.device.id)
        leave = device.to_cupy

        def enter(value):
            if value.device.id != first.device.id:
                raise BackendUnavailableError(
                    f"the arrays are on cuda:{first.device.id} and cuda:{value.device.id}: "
                    "specux never copies between devices silently"
                )
            return device.wrap_cupy(value)
    else:
        device = cuda_device.for_numpy(0)  # numpy has no device: the first visible one
        scope = contextlib.nullcontext()
        enter = device.upload

        def leave(out):
            return device.download(native.dense(out))

    with scope, device.session():
        for name in _ARRAY_PARAMETERS:
            value = bound.arguments.get(name)
            if value is not None and _same_library(value, library):
                bound.arguments[name] = enter(value)
        return leave(fn(*bound.args, **bound.kwargs))


def _same_library(value: Any, library: str) -> bool:
    return isinstance(value, np.ndarray) if library == NUMPY else _is_cupy(value)


def _device_index(x: Any, library: str) -> int:
    if library == CUPY:
        return int(x.device.id)
    return torch_module().cuda.current_device()


def _stream(device, library: str):
    """cupy's current stream as a torch stream (cupy inputs), else torch's current one."""
    torch = torch_module()
    if library == CUPY:
        import cupy

        return torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr, device=device)
    return torch.cuda.current_stream(device)


def _host_dtype_out(t):
    """complex32 has no numpy / cupy type: API.md returns complex64 for those libraries."""
    torch = torch_module()
    return t.to(torch.complex64) if t.dtype == torch.complex32 else t


def _numpy_to_cuda(a: np.ndarray, device):
    torch = torch_module()
    host = torch.from_numpy(np.ascontiguousarray(a))  # numpy's negative strides: a copy
    return host.pin_memory().to(device, non_blocking=True)


def _cuda_to_numpy(t) -> np.ndarray:
    torch = torch_module()
    t = _host_dtype_out(t)
    host = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, pin_memory=True)
    host.copy_(t, non_blocking=True)
    torch.cuda.current_stream(t.device).synchronize()
    return host.numpy()


def _cupy_to_torch(a, device):
    torch = torch_module()
    import cupy

    if any(s < 0 for s in a.strides):  # DLPack has no negative strides
        a = cupy.ascontiguousarray(a)
    return torch.from_dlpack(a)


def _torch_to_cupy(t):
    import cupy

    return cupy.from_dlpack(_host_dtype_out(t).detach())


__all__ = ["across_libraries", "numpy_runs_on_cuda"]
