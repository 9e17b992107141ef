"""``specux.plan``: a transform bound to one input layout, and the autotune switches.

A :class:`Plan` fixes a transform, its parameters and the shape, dtype, library and device of
its input. Making it runs the transform once on that input, so everything a call builds the
first time (the parameters' checks, filterbanks and windows, the FFT plan, on a GPU the
generated kernels compiled or loaded from the disk cache) is built then and not inside the
first call that matters; calling it checks that the input has the bound layout and runs the
transform. Results are the function's own, bit for bit.

Autotuning is not built: the CUDA planner chooses each configuration's kernel by rule and
has no variants to time yet, so :meth:`Plan.autotune` and ``specux.autotune(True)`` raise
:class:`~specux.errors.BackendUnavailableError` saying so (``SPECUX_AUTOTUNE`` is not read).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specux.compat.arrays import dtype_name, library_of
from specux.errors import BackendUnavailableError
from specux.meta.params import as_bool

# the transforms a plan can bind (API.md's functions whose first argument is the signal)
_TRANSFORMS = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2",
               "irfft2", "fftn", "ifftn", "rfftn", "irfftn", "stft", "istft", "melspectrogram",
               "mfcc", "lfcc", "chroma", "cqt", "vqt", "fftconvolve")  # fmt: skip

_NOT_BUILT = (
    "autotuning is not built: the CUDA planner picks one kernel per configuration by rule "
    "and has no variants to time yet"
)


def _transform(op: str | Callable) -> tuple[str, Callable]:
    import specux

    for name in _TRANSFORMS:
        if op is getattr(specux, name):
            return name, op
    if isinstance(op, str) and op in _TRANSFORMS:
        return op, getattr(specux, op)
    raise ValueError(f"op={op!r} is not a specux transform: one of {_TRANSFORMS} (a name or the "
                     "function)")  # fmt: skip


def _layout(x: Any) -> tuple[str, tuple[int, ...], str, str]:
    """(library, shape, dtype, device) of an input."""
    library = library_of(x)
    device = "cpu" if library == "numpy" else str(getattr(x, "device", "cuda"))
    return library, tuple(int(n) for n in x.shape), dtype_name(x, library), device


class Plan:
    """``specux.plan(op, x, **params)``: ``op`` (a transform's name or the function) with
    ``params`` bound, for inputs laid out as ``x`` (library, shape, dtype, device).

    ``plan(y)`` runs ``op(y, **params)`` after checking ``y``'s layout (a ValueError names
    what differs); ``plan.op``, ``plan.params``, ``plan.shape``, ``plan.dtype``,
    ``plan.device`` and ``plan.library`` describe it.
    """

    def __init__(self, op: str | Callable, x: Any, **params: Any) -> None:
        self.op, self._function = _transform(op)
        self.params = dict(params)
        self.library, self.shape, self.dtype, self.device = _layout(x)
        # Warm-up: checks the parameters and builds what the first call builds.
        self._function(x, **self.params)

    def __call__(self, x: Any) -> Any:
        got = _layout(x)
        wanted = (self.library, self.shape, self.dtype, self.device)
        if got != wanted:
            names = ("library", "shape", "dtype", "device")
            diffs = [f"{n} {g!r} (the plan's: {w!r})" for n, g, w in zip(names, got, wanted)
                     if g != w]  # fmt: skip
            raise ValueError(f"this {self.op} plan does not take x: its " + ", ".join(diffs))
        return self._function(x, **self.params)

    def autotune(self) -> Plan:
        """Time the plan's kernel variants on its device and keep the fastest: not built (see
        the module); raises BackendUnavailableError."""
        if self.device == "cpu":
            raise BackendUnavailableError(f"autotune: this plan runs on the CPU; autotuning "
                                          f"is for CUDA plans, and {_NOT_BUILT}")  # fmt: skip
        raise BackendUnavailableError(f"autotune: {_NOT_BUILT}")

    def __repr__(self) -> str:
        return (f"Plan({self.op}, {self.library} {self.dtype} {self.shape} on {self.device}, "
                f"{self.params})")  # fmt: skip


def plan(op: str | Callable, x: Any, **params: Any) -> Plan:
    """A reusable transform bound to ``x``'s shape, dtype and device (:class:`Plan`)."""
    return Plan(op, x, **params)


def autotune(flag: bool) -> None:
    """``autotune(True)``: autotune every new CUDA configuration once, cached -- not built
    (the module says why): raises BackendUnavailableError. ``autotune(False)`` is the state
    the library is always in."""
    if as_bool("flag", flag):
        raise BackendUnavailableError(f"autotune(True): {_NOT_BUILT}")


__all__ = ["Plan", "autotune", "plan"]
