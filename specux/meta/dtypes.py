"""Precision policy: which dtype a transform computes in and which it returns.

float32 / float64 compute as themselves. float16 and bfloat16 are storage formats: they
compute in float32; real results come back in the input dtype, complex results as complex64
(``torch.complex32`` for torch float16, which has a half-precision complex type; there is no
bfloat16 complex type, so complex values of bfloat16 signals are complex64 everywhere).
"""

from __future__ import annotations

_COMPUTE = {
    "float16": "float32",
    "bfloat16": "float32",
    "float32": "float32",
    "float64": "float64",
    "complex32": "complex64",
    "complex64": "complex64",
    "complex128": "complex128",
}
_COMPLEX_OF = {"float16": "complex32", "bfloat16": "complex64", "float32": "complex64",
               "float64": "complex128"}  # fmt: skip
_REAL_OF = {"complex32": "float16", "complex64": "float32", "complex128": "float64"}


def compute_dtype(name: str, backend: str = "cpu") -> str:
    """The dtype handed to the kernels for an input of dtype ``name``.

    The CUDA kernels load and store float16 and bfloat16 themselves (computing in float32);
    elsewhere half inputs are widened to float32 first.
    """
    if backend == "cuda" and name in ("float16", "bfloat16", "complex32"):
        return name
    return _COMPUTE[name]


def complex_of(compute_name: str) -> str:
    """complex64 for float32 (and bfloat16), complex128 for float64, complex32 for float16."""
    return _COMPLEX_OF[compute_name]


def real_of(compute_name: str) -> str:
    """float32 for complex64, float64 for complex128."""
    return _REAL_OF[compute_name]


def result_dtype(input_name: str, computed: str, library: str) -> str:
    """The dtype handed back for a result computed as ``computed`` from an ``input_name`` input."""
    storage = input_name in ("float16", "bfloat16", "complex32")
    if not storage:
        return computed
    if computed == "complex32" and library != "torch":
        return "complex64"  # numpy and cupy have no half-precision complex type
    if computed.startswith("float"):
        return "float16" if input_name == "complex32" else input_name
    if library == "torch" and input_name in ("float16", "complex32"):
        return "complex32"
    return computed


def common_compute(a: str, b: str) -> str:
    """The compute dtype of an operation on compute dtypes ``a`` and ``b`` (numpy promotion,
    written in plain Python so torch.compile can fold it)."""
    wide = "64" in a.replace("complex64", "") or "64" in b.replace("complex64", "")
    if a.startswith("complex") or b.startswith("complex"):
        return "complex128" if wide or "128" in a + b else "complex64"
    return "float64" if wide else "float32"
