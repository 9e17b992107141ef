"""Named constant matrices applied along a feature axis: filterbanks, DCTs, chroma folds.

Ops take a :class:`MatrixSpec` (serialized to one string in their schema) instead of a
tensor, so the functional API never builds constants inside code that ``torch.compile``
traces; each backend builds the float64 matrix once from the spec (cached) and casts it.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specux.compat.arrays import numpy_name
from specux.compat.torch_compat import compiling, static_scalar
from specux.meta import filters


@dataclass(frozen=True)
class MatrixSpec:
    """A constant ``(n_out, n_in)`` matrix by kind and parameters (hashable, serializable).

    kinds: ``mel``, ``linear``, ``chroma`` (filterbanks over ``n_in = n_fft // 2 + 1`` bins;
    their ``n_fft`` parameter fixes ``n_in``), ``dct`` (first ``n_out`` DCT rows, optionally
    liftered), ``cq_to_chroma``. A ``transpose=True`` parameter names the transpose (the
    backward passes apply it).
    """

    kind: str
    params: tuple[tuple[str, Any], ...]
    # as_key's string, built once (every op call passes it); not part of equality or hash
    key: str = field(default="", init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Plain string building (not json.dumps) so torch.compile can fold it as a constant;
        # the result is valid JSON, read back by from_key.
        items = sorted((("kind", self.kind),) + self.params)
        key = "{" + ", ".join(f'"{name}": {_json_value(v)}' for name, v in items) + "}"
        object.__setattr__(self, "key", key)

    @staticmethod
    def of(kind: str, **params: Any) -> MatrixSpec:
        if compiling():  # the key is a string: parameters traced as symbols become values
            params = {name: static_scalar(value) for name, value in params.items()}
        return MatrixSpec(kind, tuple(sorted(params.items())))

    def as_key(self) -> str:
        return self.key

    @staticmethod
    def from_key(key: str) -> MatrixSpec:
        return _from_key(key)

    def get(self, name: str) -> Any:
        return dict(self.params)[name]

    def transposed(self) -> MatrixSpec:
        """The spec of this matrix's transpose."""
        params = dict(self.params)
        params["transpose"] = not params.pop("transpose", False)
        if not params["transpose"]:
            del params["transpose"]
        return MatrixSpec.of(self.kind, **params)


@functools.lru_cache(maxsize=256)
def transposed_key(key: str) -> str:
    """The key of the transpose of the matrix ``key`` names (a backward asks on every call)."""
    return _from_key(key).transposed().as_key()


@functools.lru_cache(maxsize=256)
def _from_key(key: str) -> MatrixSpec:
    fields = json.loads(key)  # the kernels parse the spec of every call: once per key
    kind = fields.pop("kind")
    return MatrixSpec.of(kind, **fields)


def _dct_lifted(n_out: int, n_in: int, dct_type: int, norm: str | None, lifter: float):
    matrix = filters.dct(n_out, n_in, dct_type=dct_type, norm=norm)
    if lifter > 0:
        matrix = filters.lifter_weights(n_out, lifter)[:, None] * matrix
    return matrix


def _json_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value + '"'
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


_BUILDERS = {
    "mel": filters.mel,
    "linear": filters.linear,
    "chroma": filters.chroma,
    "dct": lambda **p: _dct_lifted(**p),
    "cq_to_chroma": lambda n_input, **p: filters.cq_to_chroma(n_input, **p),
}


@functools.lru_cache(maxsize=128)
def _build(spec: MatrixSpec, dtype: str) -> np.ndarray:
    params = dict(spec.params)
    transpose = params.pop("transpose", False)
    matrix = np.asarray(_BUILDERS[spec.kind](**params), dtype=np.float64)
    if transpose:
        matrix = matrix.T
    out = np.ascontiguousarray(matrix, dtype=dtype)  # rounded once from float64
    out.flags.writeable = False
    return out


def matrix(spec: MatrixSpec, dtype: Any = np.float64) -> np.ndarray:
    """The dense ``(n_out, n_in)`` matrix of ``spec`` in ``dtype`` (cached, read-only)."""
    return _build(spec, numpy_name(dtype))


def shape(spec: MatrixSpec) -> tuple[int, int]:
    """``(n_out, n_in)`` without building the matrix (fake kernels call this)."""
    p = dict(spec.params)
    if p.pop("transpose", False):
        n_in, n_out = shape(MatrixSpec.of(spec.kind, **p))
        return n_out, n_in
    if spec.kind in ("mel", "linear", "chroma"):
        n_out = {"mel": "n_mels", "linear": "n_filter", "chroma": "n_chroma"}[spec.kind]
        return p[n_out], p["n_fft"] // 2 + 1
    if spec.kind == "dct":
        return p["n_out"], p["n_in"]
    if spec.kind == "cq_to_chroma":
        return p["n_chroma"], p["n_input"]
    raise ValueError(f"unknown matrix kind {spec.kind!r}")


# Validated specs: pure Python on scalars (no numpy), so they run inside traced code.


def _memoized(builder):
    """``builder`` (keyword arguments only) with eager calls cached by their arguments and
    the arguments' types (a spec costs ~10-20 us of validation and key building, on every
    transform call): traced calls and unhashable arguments run it uncached, so errors and
    traced code are what they were."""
    cached = functools.lru_cache(maxsize=256, typed=True)(builder)

    @functools.wraps(builder)
    def spec(**kwargs: Any) -> MatrixSpec:
        if compiling():
            return builder(**kwargs)
        try:
            return cached(**kwargs)
        except TypeError:  # unhashable values (or a refused type: raised again, uncached)
            return builder(**kwargs)

    return spec


@_memoized
def mel_spec(*, sr, n_fft, n_mels, fmin, fmax, htk, norm, norm_name="norm") -> MatrixSpec:
    """``norm_name``: the caller's name for ``norm`` in errors (mfcc's ``mel_norm``)."""
    sr, n_fft, n_mels, fmin, fmax, htk, norm = filters.mel_params(
        sr, n_fft, n_mels, fmin, fmax, htk, norm, norm_name
    )
    return MatrixSpec.of(
        "mel", sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax, htk=htk, norm=norm
    )


@_memoized
def linear_spec(*, sr, n_fft, n_filter, fmin, fmax) -> MatrixSpec:
    sr, n_fft, n_filter, fmin, fmax = filters.linear_params(sr, n_fft, n_filter, fmin, fmax)
    return MatrixSpec.of("linear", sr=sr, n_fft=n_fft, n_filter=n_filter, fmin=fmin, fmax=fmax)


@_memoized
def chroma_spec(*, sr, n_fft, n_chroma, tuning, ctroct=5.0, octwidth=2, norm=2, base_c=True):
    sr, n_fft, n_chroma, tuning, ctroct, octwidth, norm, base_c = filters.chroma_params(
        sr, n_fft, n_chroma, tuning, ctroct, octwidth, norm, base_c
    )
    return MatrixSpec.of(
        "chroma", sr=sr, n_fft=n_fft, n_chroma=n_chroma, tuning=tuning, ctroct=ctroct,
        octwidth=octwidth, norm=norm, base_c=base_c,
    )  # fmt: skip


@_memoized
def dct_spec(*, n_out, n_in, dct_type, norm, lifter, out_name="n_mfcc",
             bands_name="n_mels") -> MatrixSpec:  # fmt: skip
    """The first ``n_out`` (liftered) DCT rows over ``n_in`` bands; errors name the caller's
    parameters (``out_name``: n_mfcc or n_lfcc, ``bands_name``: n_mels or n_filter)."""
    from specux.meta.params import as_float, as_int

    dct_type = as_int("dct_type", dct_type)
    if dct_type not in filters.DCT_TYPES:
        raise ValueError(f"dct_type={dct_type} is not supported: use 1, 2, 3 or 4")
    norm = filters.dct_norm_param(norm)
    n_in = as_int(bands_name, n_in, minimum=1)
    if dct_type == 1 and n_in < 2:
        raise ValueError(f"{bands_name}={n_in} is out of range: dct_type=1 needs at least 2 bands")
    n_out = as_int(out_name, n_out, minimum=1)
    if n_out > n_in:
        raise ValueError(f"{out_name}={n_out} is out of range: must be <= the {n_in} input "
                         f"bands ({bands_name}={n_in})")
    lifter = as_float("lifter", lifter)
    if lifter < 0:
        raise ValueError(f"lifter={lifter} is out of range: must be >= 0")
    return MatrixSpec.of(
        "dct", n_out=n_out, n_in=n_in, dct_type=dct_type,
        norm=None if norm == "backward" else norm, lifter=lifter,
    )  # fmt: skip


@_memoized
def cq_to_chroma_spec(*, n_input, bins_per_octave, n_chroma, fmin, base_c=True) -> MatrixSpec:
    from specux.meta.params import as_float, as_int

    n_input = as_int("n_bins", n_input, minimum=1)
    bins_per_octave = as_int("bins_per_octave", bins_per_octave, minimum=1)
    n_chroma = as_int("n_chroma", n_chroma, minimum=1)
    if bins_per_octave % n_chroma:
        raise ValueError(
            f"bins_per_octave={bins_per_octave} must be a multiple of n_chroma={n_chroma}"
        )
    return MatrixSpec.of(
        "cq_to_chroma", n_input=n_input, bins_per_octave=bins_per_octave, n_chroma=n_chroma,
        fmin=as_float("fmin", fmin, positive=True), base_c=bool(base_c),
    )  # fmt: skip
