"""Route a call by its input and ``backend=`` (seed-backends: auto routes by where the data
lives; an explicit backend is strict and never copies through the host)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from dataclasses import dataclass
from typing import Any

from specux.compat.arrays import CUPY, NUMPY, TORCH, device_type_of, library_of
from specux.compat.torch_compat import compiling
from specux.errors import BackendUnavailableError
from specux.meta.params import backend_name

# where a tensor's device type runs by default; meta tensors (shapes and dtypes only) take the
# CPU route, where the ops' fake kernels answer them through the dispatcher (no CPU kernel
# is registered for the meta device)
_DEVICE_BACKEND = {"cpu": "cpu", "cuda": "cuda", "mps": "metal", "meta": "cpu"}


@dataclass(frozen=True)
class Route:
    library: str  # numpy | torch | cupy
    device_type: str  # where the input lives: cpu | cuda | mps | ...
    backend: str  # cpu | cuda | metal: where the transform runs


@functools.cache
def cuda_driver_reason() -> str | None:
    """None when an NVIDIA driver library loads, else why not."""
    names = ["libcuda.so.1", "libcuda.so", ctypes.util.find_library("cuda") or ""]
    if sys.platform == "win32":
        names = ["nvcuda.dll"]
    for name in filter(None, names):
        try:
            ctypes.CDLL(name)
            return None
        except OSError:
            continue
    return "no NVIDIA driver found (libcuda could not be loaded)"


# Transform families with CUDA kernels in this version; the rest raise with the reason.
CUDA_FAMILIES = frozenset({
    "fft", "stft", "istft", "melspectrogram", "mfcc", "lfcc", "chroma", "cqt", "vqt",
    "fftconvolve",
})  # fmt: skip


@functools.cache
def _cuda_reason() -> str | None:
    reason = cuda_driver_reason()
    if reason is not None:
        return reason
    from specux.compat import cuda

    return cuda.unavailable_reason()


def backend_unavailable_reason(backend: str, family: str | None = None) -> str | None:
    """None if ``backend`` can run here (for transforms of ``family``), else why not."""
    if backend == "cpu":
        return None
    if backend == "cuda":
        # Traced code: the driver and NVRTC probes are not traceable, and the traced call's
        # tensors are on the device already (the kernels raise if it cannot run them).
        reason = None if compiling() else _cuda_reason()
        if reason is not None:
            return reason
        if family is not None and family not in CUDA_FAMILIES:
            return f"{family} has no CUDA kernels in this version"
        return None
    if backend == "metal":
        if sys.platform != "darwin":
            return f"Metal needs macOS (this is {sys.platform})"
        return "specux's Metal kernels are not part of this version yet"
    raise AssertionError(backend)


def route(x: Any, backend: Any = "auto", name: str = "x", family: str | None = None) -> Route:
    """Pick where a call on ``x`` runs, or raise BackendUnavailableError / TypeError."""
    backend = backend_name(backend)
    library = library_of(x, name)
    device_type = device_type_of(x, library)
    natural = _DEVICE_BACKEND.get(device_type)
    if natural is None:
        raise BackendUnavailableError(
            f"{name} lives on a {device_type!r} device; specux runs on cpu, cuda and mps "
            "(and takes meta tensors, for shapes)"
        )
    what = f"a {library} array on {device_type}"
    if backend == "auto":
        chosen = natural
    elif library == NUMPY and backend in ("cuda", "metal"):
        chosen = backend  # numpy arrays may be staged to a GPU on request
    elif backend != natural:
        raise BackendUnavailableError(
            f"backend={backend!r} does not match {name}, {what}: specux never copies between "
            f"devices silently; move the data yourself or pass backend='auto'"
        )
    else:
        chosen = backend
    reason = backend_unavailable_reason(chosen, family)
    if reason is not None:
        raise BackendUnavailableError(f"backend={chosen!r} is unavailable for {what}: {reason}")
    return Route(library, device_type, chosen)


__all__ = ["CUPY", "NUMPY", "TORCH", "Route", "backend_unavailable_reason", "route"]
