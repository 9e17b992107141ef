"""torch import and version shims. Importing this module does not import torch."""

from __future__ import annotations

import functools
import os
import sys
import threading
from types import ModuleType


@functools.cache
def torch_module() -> ModuleType | None:
    """torch if it can be imported, else None (a broken install counts as absent)."""
    try:
        import torch
    except Exception:  # noqa: BLE001 - a broken torch must not break specux
        return None
    return torch


def torch_loaded() -> ModuleType | None:
    """torch only if the user's program already imported it (never imports it)."""
    return sys.modules.get("torch")


def torch_version() -> tuple[int, int]:
    torch = torch_module()
    if torch is None:
        return (0, 0)
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def check(condition, message) -> None:
    """``torch._check(condition, message)`` without its first call's cost in eager code: a
    plain bool is tested here (RuntimeError with ``message()``, as torch raises), a symbolic
    one (an op's fake kernel tracing under compile / export) goes to torch._check. torch's
    checks import torch.fx.experimental.symbolic_shapes, and sympy with it, whatever the
    condition: the first eager backward of a melspectrogram took 3.5 s on the H200 machine
    (a fresh install: 2.8 s of it compiling sympy's modules), 0.4 s on the 2-core
    development machine; 52-56 ms on the H200 without it (kernels in the disk cache)."""
    if isinstance(condition, bool):
        if not condition:
            raise RuntimeError(message())
        return
    torch_module()._check(condition, message)


def dtype_name(dtype) -> str:
    """A torch dtype's plain name (``torch.float32`` -> ``"float32"``), as numpy spells it."""
    return str(dtype).removeprefix("torch.")


@functools.cache
def _mode_probes() -> tuple | None:
    """torch's (private) probes for active dispatch / function modes and functorch transforms,
    or None where this torch lacks one (then every call goes through the dispatcher)."""
    torch = torch_module()
    names = ("_len_torch_dispatch_stack", "_len_torch_function_stack",
             "_are_functorch_transforms_active")  # fmt: skip
    c = getattr(torch, "_C", None)
    functorch = getattr(c, "_functorch", None)
    probes = (
        getattr(c, names[0], None),
        getattr(c, names[1], None),
        getattr(functorch, names[2], None) or getattr(c, names[2], None),
    )
    return None if any(p is None for p in probes) else probes


@functools.cache
def _raw_stream_getter():
    torch = torch_module()
    # CUDA builds expose the current stream's raw handle directly (what inductor's generated
    # code calls); torch.cuda.current_stream builds a Stream object on every call.
    fast = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if fast is not None:
        return fast
    return lambda index: torch.cuda.current_stream(index).cuda_stream


def current_raw_stream(index: int) -> int:
    """The raw handle (an int) of torch's current CUDA stream on device ``index``."""
    return int(_raw_stream_getter()(index))


_UPLOAD_STREAMS: dict = {}
_UPLOADER: list = []  # the upload thread's executor, made on first use
_UPLOADER_LOCK = threading.Lock()


def _forget_uploader_in_child() -> None:
    """A forked child inherits the upload executor without its thread (see
    ``kernels.cpu.fft._forget_pool_in_child``): it makes its own on first use."""
    global _UPLOADER_LOCK
    _UPLOADER.clear()
    _UPLOAD_STREAMS.clear()
    _UPLOADER_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_uploader_in_child)


def _uploader():
    if not _UPLOADER:
        with _UPLOADER_LOCK:
            if not _UPLOADER:
                from concurrent.futures import ThreadPoolExecutor

                _UPLOADER.append(ThreadPoolExecutor(1, thread_name_prefix="specux-upload"))
    return _UPLOADER[0]


def _copy_on_side_stream(torch, host, index: int):
    stream = _UPLOAD_STREAMS.get(index)
    if stream is None:
        stream = _UPLOAD_STREAMS.setdefault(index, torch.cuda.Stream(device=index))
    with torch.cuda.stream(stream):
        return host.to(torch.device("cuda", index)), stream


def upload(host, device):
    """``host`` (a CPU tensor) copied to ``device`` for a cache that outlives the call.

    On a CUDA device the copy is made by specux's upload thread on a side stream, so its
    memory comes from the caching allocator's ordinary pool even while torch.compile's CUDA
    graph trees warm up a graph: they send every allocation of the warming thread to the
    graph's private pool and then require each live tensor there to be a graph output (a
    cache allocated there fails mode="reduce-overhead": "Detected N tensor(s) in the
    cudagraph pool not tracked as outputs"). The current stream waits for the copy before
    its later work, and the memory is marked as used by that stream, so a cache that drops
    the tensor (a new tensor version, an evicted shape) cannot have it reused by the next
    upload while kernels queued on the current stream still read it. Only cache misses
    come here."""
    torch = torch_module()
    device = torch.device(device)
    if device.type != "cuda":
        return host.to(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    out, stream = _uploader().submit(_copy_on_side_stream, torch, host, index).result()
    current = torch.cuda.current_stream(index)
    current.wait_stream(stream)
    out.record_stream(current)
    return out


def compiling() -> bool:
    """True while torch.compile traces the caller (False without torch)."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.compiler.is_compiling()


def static_scalar(value):
    """``value`` (a number) as a plain Python number while torch.compile traces the caller.

    Dynamo traces a float that reaches it from a function's arguments or defaults as a
    SymFloat under ``dynamic=True`` (and after a float argument changes under the default
    automatic dynamic), and an int argument as a SymInt. Parameters that name a filterbank
    or a kernel must be concrete: this guards on the value, so a new value recompiles.
    Eager calls, and values that are not numbers, return ``value`` itself."""
    if not compiling():
        return value
    torch = sys.modules["torch"]
    if not isinstance(value, (int, float, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value  # (Dynamo's symbolic numbers pass isinstance as int / float)
    from torch.fx.experimental.symbolic_shapes import guard_scalar

    return guard_scalar(value)


def plain_eager() -> bool:
    """True when no tracing, compiling, dispatch / function mode or functorch transform is
    active: an op called now may skip torch's dispatcher without changing what happens."""
    torch = torch_module()
    if torch.compiler.is_compiling():
        return False
    probes = _mode_probes()
    if probes is None:
        return False
    dispatch_stack, function_stack, functorch_active = probes
    return not (dispatch_stack() or function_stack() or functorch_active())


# device type -> the name of its autocast dispatch key (the keys torch.library.register_autocast
# registers at)
_AUTOCAST_KEYS = {"cpu": "AutocastCPU", "cuda": "AutocastCUDA", "mps": "AutocastMPS"}
_autocast_keys: dict = {}  # filled on the first call (the ops' declarations, at import)


def autocast_keys() -> dict:
    """``{device type: autocast dispatch key}`` for the device types this torch autocasts."""
    if not _autocast_keys:
        torch = torch_module()
        for device, name in _AUTOCAST_KEYS.items():
            key = getattr(torch._C.DispatchKey, name, None)
            if key is not None and torch._C._is_autocast_available(device):
                _autocast_keys[device] = key
    return _autocast_keys


def autocast_on(device: str) -> bool:
    """Whether an autocast region is active for ``device`` (a device type) in this thread
    (torch is imported: the caller holds a tensor)."""
    return device in autocast_keys() and sys.modules["torch"].is_autocast_enabled(device)
