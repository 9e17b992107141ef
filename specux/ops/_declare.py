"""One helper to declare an op: schema + fake + kernels + autograd, all in one call."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from specux.compat.torch_compat import dtype_name
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


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A zero-copy numpy view of a CPU tensor (conjugate / negative views resolved first)."""
    return t.resolve_conj().resolve_neg().numpy()


def from_numpy(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(a)


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The numpy dtype of a torch dtype's name (for constants built on the host)."""
    return np.dtype(dtype_name(dtype))


# torch spellings of meta.dtypes' complex <-> real pairing (fake kernels need them).
COMPLEX_OF = {
    getattr(torch, real): getattr(torch, dtypes.complex_of(real))
    for real in ("float16", "float32", "float64")
}
REAL_OF = {value: key for key, value in COMPLEX_OF.items()}
