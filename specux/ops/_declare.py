"""One helper to declare an op: schema + fake + kernels + autograd, all in one call."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from specux.compat import arrays
from specux.compat.torch_compat import autocast_keys, autocast_on, dtype_name, plain_eager
from specux.meta import dtypes
from specux.ops import _checks

NAMESPACE = "specux"

arrays.prefill_torch_names(torch)


@dataclass(frozen=True)
class OpInfo:
    name: str
    schema: str
    devices: tuple[str, ...]

    @property
    def op(self):
        return getattr(getattr(torch.ops, NAMESPACE), self.name).default


# Every declared op, by name: tests enrol each one in opcheck / gradcheck from this table.
OPS: dict[str, OpInfo] = {}
_KERNELS: dict[str, dict[str, Callable]] = {}


def declare(
    name: str,
    schema: str,
    *,
    fake: Callable,
    kernels: dict[str, Callable],
    backward: Callable | None = None,
    setup_context: Callable | None = None,
) -> None:
    """Define ``specux::name`` and register its fake, per-device kernels and backward."""
    qualname = f"{NAMESPACE}::{name}"
    # torch.library.define + impl dispatch in about half the host time of @custom_op.
    torch.library.define(qualname, schema)
    kernels = {device: _not_views(kernel) for device, kernel in kernels.items()}
    if "cpu" in kernels:
        kernels["cpu"] = _full_width(name, kernels["cpu"])
    checker = getattr(_checks, name, None)  # the raw op's argument checks
    fake = _checked(name, checker, fake)
    torch.library.register_fake(qualname, fake)
    for device, kernel in kernels.items():
        torch.library.impl(qualname, device, _checked(name, checker, kernel))
    if backward is not None:
        torch.library.register_autograd(qualname, backward, setup_context=setup_context)
    _autocast(name)
    OPS[name] = OpInfo(name, schema, tuple(kernels))
    _KERNELS[name] = dict(kernels)
    if backward is not None and setup_context is not None:
        _eager_autograd(name, backward, setup_context)


# Inside torch.autocast the transforms compute in float32 (API.md), as torch's own spectral
# ops do: half-precision inputs are cast up, so the results are float32 / complex64.
# (also the dtype the CUDA kernels compute a half-precision tensor in)
FULL_WIDTH = {torch.float16: torch.float32, torch.bfloat16: torch.float32,
              torch.complex32: torch.complex64}  # fmt: skip
_autocast_libraries: list = []  # registrations live as long as the process


def full_width(dtype: torch.dtype) -> torch.dtype:
    """``dtype``, or the full-width dtype a half-precision one computes in (FULL_WIDTH)."""
    return FULL_WIDTH.get(dtype, dtype)


def _autocast(name: str) -> None:
    """Register ``specux::name``'s autocast rule on every device type torch autocasts: its
    float16 / bfloat16 / complex32 tensors cast to float32 / complex64, then the op runs with
    that device's autocast off (torch.library.register_autocast's pattern; that helper casts
    real floating tensors only, and would leave complex32 ones in half precision)."""
    op = getattr(torch.ops.specux, name).default
    library = torch.library.Library(NAMESPACE, "FRAGMENT")
    _autocast_libraries.append(library)
    for key in autocast_keys().values():

        def run(*args, key=key):
            with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key)):
                return op(*(_float32(a) for a in args))

        op.py_impl(key)(run)  # traced calls (the Python dispatcher)
        library.impl(name, lambda _keys, *args, run=run: run(*args), key.name,
                     with_keyset=True)  # fmt: skip


def _float32(arg):
    if isinstance(arg, torch.Tensor) and arg.dtype in FULL_WIDTH:
        return arg.to(full_width(arg.dtype))
    return arg


def _checked(name: str, checker: Callable | None, kernel: Callable) -> Callable:
    """``kernel`` after ``checker`` (:mod:`specux.ops._checks`, if the op has one) on its
    arguments and a check that its tensors share one device: what the dispatcher runs for a
    direct ``torch.ops.specux`` call (it picks one device's kernel, or the fake one for a meta
    tensor among others, and a kernel given another device's tensor would read it as its
    own). ``call``'s eager path, whose arguments the public functions checked, runs the
    kernels without it."""

    @functools.wraps(kernel)
    def run(*args):
        _one_device(name, args)
        if checker is not None:
            checker(*args)
        return kernel(*args)

    return run


def _one_device(name: str, args) -> None:
    first = None
    for arg in args:
        if isinstance(arg, torch.Tensor):
            if first is None:
                first = arg.device
            elif arg.device != first:
                raise ValueError(f"specux::{name}: tensors on {first} and {arg.device}: every "
                                 "tensor argument must be on one device")  # fmt: skip


_HALF = frozenset({torch.float16, torch.bfloat16, torch.complex32})


def _full_width(name: str, kernel: Callable) -> Callable:
    """``kernel`` (a CPU kernel: numpy, float32 / float64 only) refusing half-precision
    tensors with a TypeError that names the argument. The public functions widen half inputs
    before they reach an op on the CPU; a direct ``torch.ops.specux`` call must too (numpy
    has no complex32: it raised its own unhelpful TypeError)."""
    arguments = getattr(torch.ops.specux, name).default._schema.arguments
    tensors = [(i, a.name) for i, a in enumerate(arguments) if "Tensor" in str(a.type)]

    @functools.wraps(kernel)
    def run(*args):
        for i, arg_name in tensors:
            arg = args[i]
            if arg is not None and arg.dtype in _HALF:
                raise TypeError(
                    f"specux::{name} on the CPU takes float32 / float64 tensors, got {arg_name} "
                    f"of dtype {arg.dtype}: cast it (.float()), or call the specux function, "
                    "which computes half inputs in float32"
                )
        return kernel(*args)

    return run


def _not_views(kernel: Callable) -> Callable:
    """``kernel`` with outputs that are views (the frame-major results, transposes of the
    buffers the kernels fill) detached: the same memory and strides, but not a view, so the
    caller may change them in place under autograd (a custom op's view output may not be:
    ``c -= c.mean(-1, keepdim=True)`` on an mfcc raised)."""

    def fresh(out):
        return out.detach() if isinstance(out, torch.Tensor) and out._is_view() else out

    @functools.wraps(kernel)
    def run(*args):
        out = kernel(*args)
        return tuple(fresh(o) for o in out) if isinstance(out, tuple) else fresh(out)

    return run


def call(name: str, *args):
    """Run ``specux::name`` on ``args``.

    Plain eager calls (torch.Tensor inputs on one device, nothing tracing, compiling or
    intercepting) run the device kernel directly: the result is the same and the
    dispatcher's host time is saved, which matters for GPU kernels that take about as long.
    When an input needs a gradient, the kernel runs inside the op's eager autograd.Function,
    which records the op's registered setup_context and backward as the dispatcher's
    autograd kernel does, without the dispatcher's re-dispatch and default filling (under
    cProfile on an H200 host, half of the mel op's host time). Everything else goes through
    ``torch.ops.specux``.
    """
    device, grad = _plain_device(args)
    if device is not None:
        kernel = _KERNELS[name].get(device)
        if kernel is not None:
            if not grad:
                return kernel(*args)
            function = _AUTOGRAD.get(name)
            if function is not None:
                return function.apply(*args)
    return getattr(torch.ops.specux, name)(*args)


def _plain_device(args) -> tuple[str | None, bool]:
    """(the device of a plain eager call or None when the call needs the dispatcher,
    whether an input needs a gradient)."""
    if torch.compiler.is_compiling():  # first: nothing below is traced
        return None, False
    grad_mode = torch.is_grad_enabled()
    device, grad = None, False
    for arg in args:
        if isinstance(arg, torch.Tensor):
            if type(arg) is not torch.Tensor:
                return None, False
            grad = grad or (grad_mode and arg.requires_grad)
            kind = arg.device.type
            if device is None:
                device = kind
            elif kind != device:
                return None, False
    if device is None or not plain_eager() or autocast_on(device):
        return None, False  # (autocast: the op's rule casts the inputs, _autocast)
    return device, grad


# name -> the op's eager autograd.Function (ops with a registered backward)
_AUTOGRAD: dict[str, type] = {}


def _eager_autograd(name: str, backward: Callable, setup_context: Callable) -> None:
    """The autograd.Function that ``call`` applies to a plain eager call needing a gradient:
    the device kernel forward, the registered ``setup_context`` and ``backward``. Only for ops
    whose schema has no defaults and no keyword-only arguments, so ``call``'s positional
    arguments are exactly the inputs setup_context sees through the dispatcher."""
    schema = getattr(torch.ops.specux, name).default._schema
    if any(a.kwarg_only or a.has_default_value() for a in schema.arguments):
        return
    kernels = _KERNELS[name]

    def forward(ctx, *args):
        device = next(a.device.type for a in args if isinstance(a, torch.Tensor))
        output = kernels[device](*args)
        setup_context(ctx, args, output)
        return output

    _AUTOGRAD[name] = type(f"SpecuxEager_{name}", (torch.autograd.Function,),
                           {"forward": staticmethod(forward),
                            "backward": staticmethod(backward)})  # fmt: skip


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A zero-copy numpy view of a CPU tensor (conjugate / negative views resolved first)."""
    return t.resolve_conj().resolve_neg().numpy()


def from_numpy(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(a)


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The numpy dtype of a torch dtype's name (for constants built on the host)."""
    return np.dtype(dtype_name(dtype))


# torch spellings of meta.dtypes' complex <-> real pairing (fake kernels need them).
_PAIRED = ("float16", "float32", "float64")
REAL_OF = {getattr(torch, dtypes.complex_of(real)): getattr(torch, real) for real in _PAIRED}
COMPLEX_OF = {**{real: complex_ for complex_, real in REAL_OF.items()},
              torch.bfloat16: torch.complex64}  # no bfloat16 complex type  # fmt: skip
