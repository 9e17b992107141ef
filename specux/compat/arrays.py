"""Tell numpy, torch and cupy arrays apart without importing torch or cupy."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

NUMPY = "numpy"
TORCH = "torch"
CUPY = "cupy"
NATIVE = "native"  # specux.kernels.native.DeviceArray: the torch-free routes' device arrays


def _native_array(x: Any) -> bool:
    native = sys.modules.get("specux.kernels.native")
    return native is not None and isinstance(x, native.DeviceArray)


def library_of(x: Any, name: str = "x") -> str:
    """Return ``"numpy"``, ``"torch"`` or ``"cupy"`` for an array; raise TypeError otherwise."""
    if isinstance(x, np.ndarray):
        return NUMPY
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        if x.layout != torch.strided:
            raise TypeError(f"{name} is a torch tensor of layout {x.layout}: specux takes "
                            "dense (strided) tensors; call .to_dense() first")  # fmt: skip
        return TORCH
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(x, cupy.ndarray):
        return CUPY
    if _native_array(x):
        return NATIVE
    raise TypeError(
        f"{name} must be a numpy.ndarray, torch.Tensor or cupy.ndarray, "
        f"got {type(x).__module__}.{type(x).__qualname__}"
    )


def device_type_of(x: Any, library: str) -> str:
    """Where the data lives: ``"cpu"``, ``"cuda"`` or ``"mps"`` (or torch's other types)."""
    if library == NUMPY:
        return "cpu"
    if library in (CUPY, NATIVE):
        return "cuda"
    return x.device.type


# dtype kinds, by the dtype's name so torch and cupy need not be imported.
_REAL = {"float16", "bfloat16", "float32", "float64"}
_COMPLEX = {"complex32", "complex64", "complex128", "chalf"}


_TORCH_NAMES: dict = {}  # torch dtype -> its plain name


def prefill_torch_names(torch: Any) -> None:
    """Fill the torch dtype-name table before anything is traced: a first call under
    torch.compile that added a name made its guard on the table fail at the next call (one
    recompilation)."""
    from specux.compat.torch_compat import dtype_name as torch_dtype_name

    for name in ("float16", "bfloat16", "float32", "float64", "complex32", "complex64",
                 "complex128", "bool", "uint8", "int8", "int16", "int32", "int64"):  # fmt: skip
        dtype = getattr(torch, name)
        _TORCH_NAMES[dtype] = torch_dtype_name(dtype)


def dtype_name(x: Any, library: str) -> str:
    """The dtype as a plain name: ``"float32"``, ``"complex64"``, ``"bfloat16"``, ..."""
    if library == TORCH:
        name = _TORCH_NAMES.get(x.dtype)
        if name is None:  # once per dtype (a function-level import costs ~1 us a call)
            from specux.compat.torch_compat import dtype_name as torch_dtype_name

            name = _TORCH_NAMES[x.dtype] = torch_dtype_name(x.dtype)
        return name
    if library == NATIVE:
        return x.dtype
    return numpy_name(x.dtype)


_NUMPY_NAMES: dict = {}  # numpy dtype -> its name (numpy computes ``.name`` on every access)


def numpy_name(dtype: Any) -> str:
    """``np.dtype(dtype).name``, remembered per dtype."""
    name = _NUMPY_NAMES.get(dtype)
    if name is None:
        if len(_NUMPY_NAMES) >= 256:  # bounded for a process that meets endless dtypes
            _NUMPY_NAMES.clear()
        name = _NUMPY_NAMES[dtype] = np.dtype(dtype).name
    return name


def float_kind(x: Any, library: str, name: str = "x") -> str:
    """``"real"`` or ``"complex"`` for floating arrays; TypeError for int, bool and object."""
    dtype = dtype_name(x, library)
    if dtype in _REAL:
        return "real"
    if dtype in _COMPLEX:
        return "complex"
    raise TypeError(
        f"{name} has dtype {dtype}: specux transforms take float16, bfloat16, float32, float64 "
        "or complex (complex32, complex64, complex128) inputs: cast other dtypes first"
    )


__all__ = ["CUPY", "NATIVE", "NUMPY", "TORCH", "device_type_of", "dtype_name", "float_kind",
           "library_of", "numpy_name"]  # fmt: skip
