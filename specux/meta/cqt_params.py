"""Constant-Q / variable-Q parameters: validation and the hashable spec passed through op schemas.

:func:`cqt_spec` is the one place ``cqt`` / ``vqt`` arguments are checked; every error names the
parameter. :class:`ConstantQSpec` travels through a torch op schema as one string
(:meth:`ConstantQSpec.as_key`), like :class:`~specux.meta.params.WindowSpec`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from specux.compat.torch_compat import compiling, static_scalar
from specux.meta import filters
from specux.meta.filters import constant_q
from specux.meta.params import (
    PARAMETRIC_WINDOWS,
    WindowSpec,
    as_bool,
    as_float,
    as_int,
    eps_value,
    output_name,
    pad_mode_name,
    window_spec,
)

# C1 in 12-TET with A4 = 440 Hz: MIDI 24, librosa's default fmin (note_to_hz("C1")).
C1_HZ = 440.0 * 2.0 ** ((24 - 69) / 12)

_FIELDS = (
    "sr",
    "hop_length",
    "fmin",
    "n_bins",
    "bins_per_octave",
    "tuning",
    "filter_scale",
    "norm",
    "window",
    "scale",
    "gamma",
)


def _optional_float(text: str) -> float | None:
    return None if text == "None" else float(text)


@dataclass(frozen=True)
class ConstantQSpec:
    """A validated CQT / VQT: everything but the signal, the padding and the output mode.

    ``window`` is a :meth:`WindowSpec.as_key` string (``"hann"``, ``"kaiser:8.6"``); ``norm`` is
    the p of the filters' p-norm (``None``: unnormalized, ``inf`` allowed); ``gamma`` is the VQT
    bandwidth offset in Hz (0: the CQT, ``None``: librosa's per-bin default).
    """

    sr: float
    hop_length: int
    fmin: float
    n_bins: int
    bins_per_octave: int
    tuning: float
    filter_scale: float
    norm: float | None
    window: str
    scale: bool
    gamma: float | None

    def as_key(self) -> str:
        """One string for an op schema; floats by ``repr`` so :meth:`from_key` is exact."""
        return ";".join(f"{name}={getattr(self, name)!r}" for name in _FIELDS)

    @staticmethod
    def from_key(key: str) -> ConstantQSpec:
        return _from_key(key)

    def n_frames(self, length: int) -> int:
        """Centred frames over ``length`` samples: ``1 + length // hop_length``."""
        return 1 + length // self.hop_length

    def filter_window(self) -> str | tuple[str, float]:
        """The window in :func:`specux.meta.filters.constant_q`'s spelling."""
        spec = WindowSpec.from_key(self.window)
        return (spec.name, spec.parameter) if spec.name in PARAMETRIC_WINDOWS else spec.name

    def filters(self):
        """``constant_q(...)`` of this spec: complex128 ``(n_bins, width)`` filters, lengths."""
        return constant_q(
            sr=self.sr,
            fmin=self.fmin,
            n_bins=self.n_bins,
            bins_per_octave=self.bins_per_octave,
            tuning=self.tuning,
            filter_scale=self.filter_scale,
            norm=self.norm,
            window=self.filter_window(),
            gamma=self.gamma,
        )


@functools.lru_cache(maxsize=256)
def _from_key(key: str) -> ConstantQSpec:
    values = dict(item.split("=", 1) for item in key.split(";"))
    if tuple(values) != _FIELDS:
        raise ValueError(f"not a ConstantQSpec key: {key!r}")
    return ConstantQSpec(
        sr=float(values["sr"]),
        hop_length=int(values["hop_length"]),
        fmin=float(values["fmin"]),
        n_bins=int(values["n_bins"]),
        bins_per_octave=int(values["bins_per_octave"]),
        tuning=float(values["tuning"]),
        filter_scale=float(values["filter_scale"]),
        norm=_optional_float(values["norm"]),
        window=values["window"].strip("'\""),
        scale=values["scale"] == "True",
        gamma=_optional_float(values["gamma"]),
    )


def filter_norm(name: str, norm: Any) -> float | None:
    """The filters' p-norm (librosa's ``norm``): None or one of filters.FILTER_NORMS; errors
    say ``name`` (chroma calls it ``cqt_norm``)."""
    if norm is None:
        return None
    value = as_float(name, norm, finite=False)
    if not filters.filter_norm_ok(value):
        raise ValueError(f"{name}={norm!r} is out of range: use None, {filters.FILTER_NORMS}")
    return value


def cqt_spec(
    *,
    sr: Any,
    hop_length: Any = 512,
    fmin: Any = None,
    n_bins: Any = 84,
    bins_per_octave: Any = 12,
    tuning: Any = 0.0,
    filter_scale: Any = 1.0,
    norm: Any = 1,
    window: Any = "hann",
    scale: Any = True,
    gamma: Any = 0.0,
) -> ConstantQSpec:
    """Validate ``cqt`` (``gamma=0``) / ``vqt`` (``gamma=None``: librosa's default) parameters.

    Raises ``ValueError`` naming the parameter: ``sr``/``fmin``/``filter_scale`` <= 0,
    ``n_bins``/``bins_per_octave``/``hop_length`` < 1, ``norm`` <= 0, ``gamma`` < 0, an array
    window, or a top filter whose passband crosses Nyquist (``fmin``/``n_bins`` too high).
    """
    sr_ = as_float("sr", sr, positive=True)
    hop = as_int("hop_length", hop_length, minimum=1)
    fmin_ = C1_HZ if fmin is None else as_float("fmin", fmin, positive=True)
    n_bins_ = as_int("n_bins", n_bins, minimum=1)
    bpo = as_int("bins_per_octave", bins_per_octave, minimum=1)
    tuning_ = as_float("tuning", tuning)
    filter_scale_ = as_float("filter_scale", filter_scale, positive=True)
    norm_ = filter_norm("norm", norm)
    spec = window_spec(window, arrays=False)
    if spec.is_array:
        raise ValueError(
            f"window={window!r} is not supported for cqt: pass a window name or a "
            "(name, parameter) tuple"
        )
    if gamma is None:
        gamma_ = None
    else:
        gamma_ = as_float("gamma", gamma)
        if gamma_ < 0:
            raise ValueError(f"gamma={gamma_} is out of range: must be >= 0 (or None)")
    fields = dict(
        sr=sr_,
        hop_length=hop,
        fmin=fmin_,
        n_bins=n_bins_,
        bins_per_octave=bpo,
        tuning=tuning_,
        filter_scale=filter_scale_,
        norm=norm_,
        window=spec.as_key(),
        scale=as_bool("scale", scale),
        gamma=gamma_,
    )
    if compiling():  # the key is a string: parameters traced as symbols become values
        fields = {name: static_scalar(value) for name, value in fields.items()}
    out = ConstantQSpec(**fields)
    if not compiling():
        # The Nyquist check (ValueError naming fmin and n_bins); cached for the engine. Traced
        # code skips it: the filters are numpy work that compile cannot trace, and the op's
        # kernel builds them (and raises the same error) when the compiled graph runs.
        out.filters()
    return out


def cqt_arguments(
    *, pad_mode: Any = "constant", output: Any = "complex", eps: Any = 1e-10, **spec: Any
) -> tuple[ConstantQSpec, str, str, float]:
    """Every ``cqt``/``vqt`` argument but the signal: ``(spec, pad_mode, output, eps)``."""
    return cqt_spec(**spec), pad_mode_name(pad_mode), output_name(output), eps_value(eps)
