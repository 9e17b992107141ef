"""One helper to declare an op: schema + fake + kernels + autograd, all in one call."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from specux.compat.torch_compat import dtype_name, plain_eager
from specux.meta import dtypes

NAMESPACE = "specux"


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
    torch.library.register_fake(qualname, fake)
    for device, kernel in kernels.items():
        torch.library.impl(qualname, device, kernel)
    if backward is not None:
        torch.library.register_autograd(qualname, backward, setup_context=setup_context)
    OPS[name] = OpInfo(name, schema, tuple(kernels))
    _KERNELS[name] = dict(kernels)


def call(name: str, *args):
    """Run ``specux::name`` on ``args``.

    Plain eager calls (torch.Tensor inputs on one device, none needing a gradient, nothing
    tracing, compiling or intercepting) run the device kernel directly: the result is the same
    and the dispatcher's tens of microseconds of host time are saved, which matters for GPU
    kernels that take about as long. Everything else goes through ``torch.ops.specux``.
    """
    device = _plain_device(args)
    if device is not None:
        kernel = _KERNELS[name].get(device)
        if kernel is not None:
            return kernel(*args)
    return getattr(torch.ops.specux, name)(*args)


def _plain_device(args) -> str | None:
    """The device of a plain eager call, or None (the call needs the dispatcher)."""
    if torch.compiler.is_compiling():  # first: nothing below is traced
        return None
    grad = torch.is_grad_enabled()
    device = None
    for arg in args:
        if isinstance(arg, torch.Tensor):
            if type(arg) is not torch.Tensor or (grad and arg.requires_grad):
                return None
            kind = arg.device.type
            if device is None:
                device = kind
            elif kind != device:
                return None
    if device is None or not plain_eager():
        return None
    return device


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
