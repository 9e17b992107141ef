"""Parameter validation and normalization: the one place user arguments are checked.

Every error names the parameter, the value given and what is allowed. A parameter of the wrong
type raises :class:`ParameterError`, which is both a ``ValueError`` and a ``TypeError`` so that
either ``except`` clause catches it.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from specux.compat.torch_compat import static_scalar
from specux.errors import (
    AxisError,
    BackendUnavailableError,  # noqa: F401 - re-exported for callers
)


class ParameterError(ValueError, TypeError):
    """A parameter has the wrong type (a float ``n_fft``, a string ``hop_length``, ...)."""


BACKENDS = ("auto", "cuda", "metal", "cpu")
PAD_MODES = ("constant", "reflect", "replicate", "circular")
_PAD_ALIASES = {"edge": "replicate", "wrap": "circular", "zeros": "constant"}
OUTPUTS = ("complex", "magnitude", "power", "db")
NORMS = ("backward", "ortho", "forward")
# istft where the window-sum-square envelope vanishes: raise (API.md), or keep the
# overlap-add there unnormalized (librosa's rule; specux.kernels.cpu.stft.envelope_divisor)
NOLA_RULES = ("raise", "keep")
WINDOW_NAMES = ("hann", "hamming", "blackman", "bartlett", "boxcar")
# scipy.signal.get_window's short names, so scipy and librosa users' strings work unchanged.
_WINDOW_ALIASES = {
    "hanning": "hann",
    "han": "hann",
    "hamm": "hamming",
    "ham": "hamming",
    "black": "blackman",
    "blk": "blackman",
    "rect": "boxcar",
    "rectangular": "boxcar",
    "box": "boxcar",
    "ones": "boxcar",
    "bart": "bartlett",
    "brt": "bartlett",
    "ksr": "kaiser",
    "gauss": "gaussian",
    "gss": "gaussian",
}
PARAMETRIC_WINDOWS = ("kaiser", "gaussian")
# The largest kaiser beta whose window is finite: numpy's i0(beta), the window's divisor,
# overflows float64 between 709.78 and 709.79 (an all-NaN window; scipy's too).
KAISER_BETA_MAX = 709.0


def _describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


# The largest magnitude of an integer parameter: 2**48 elements (a size, hop or length; no
# signal comes near it, and beyond 2**59 a size's byte count no longer fits in int64).
LARGEST_INT = 2**48


def symbolic_int(value: Any) -> bool:
    """A torch.SymInt: a size traced as a symbol (torch.export / compile with dynamic
    shapes), kept symbolic so sizes derived from a signal's length stay traced."""
    return type(value).__name__ == "SymInt" and type(value).__module__.startswith("torch")


def as_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    """An integer parameter (Python or numpy int, never bool or float; a torch.SymInt kept
    as it is), at least ``minimum``."""
    if type(value) is not int:  # the common case skips the ABC checks (~1 us a parameter)
        if symbolic_int(value):  # (no upper bound: a guard would narrow a dynamic range)
            if minimum is not None and value < minimum:
                raise ValueError(f"{name}={value} is out of range: must be >= {minimum}")
            return value
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ParameterError(f"{name} must be an integer, got {_describe(value)}")
        value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}={value} is out of range: must be >= {minimum}")
    if not -LARGEST_INT <= value <= LARGEST_INT:  # (sizes past it overflow int64 byte counts)
        raise ValueError(f"{name}={value} is out of range: must be within +-2**48")
    return value


def _host_memory() -> int | None:
    """Bytes of physical memory of this machine (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


# read once, at import (torch.compile traces the checks below, and cannot trace sysconf)
HOST_MEMORY = _host_memory()


def _bytes(count: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if count < 1024 or unit == "PiB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError  # (unreachable)


# An array sized by one parameter may take at most this fraction of the machine's memory:
# building it takes a few temporaries of its size (a mel bank of 8 GB on a 24 GB machine
# got the process killed by the kernel's OOM killer, not a MemoryError)
_MEMORY_SHARE = 8


def check_memory(name: str, value: Any, count: int, what: str | Callable[[], str]) -> None:
    """ValueError naming ``name``'s ``value`` when ``count`` float64 values (``what``, or
    what it returns: built only then, as a traced size cannot be formatted) would
    take more than 1 / ``_MEMORY_SHARE`` of this machine's physical memory: the allocation
    (and its temporaries) would fail, swap or be killed, so it is refused before it is
    tried. Symbolic sizes are not checked."""
    memory = HOST_MEMORY
    if memory is None or type(count) is not int or count * 8 * _MEMORY_SHARE <= memory:
        return
    what = what if isinstance(what, str) else what()
    raise ValueError(f"{name}={value} is out of range: {what} would take {_bytes(count * 8)}; "
                     f"specux refuses arrays above 1/{_MEMORY_SHARE} of this machine's "
                     f"{_bytes(memory)} of memory")  # fmt: skip


def as_size(name: str, value: Any, *, minimum: int = 1, what: str | None = None) -> int:
    """A size parameter: :func:`as_int` at least ``minimum``, and an array of that many
    float64 values (``what``) within the machine's memory (:func:`check_memory`)."""
    value = as_int(name, value, minimum=minimum)
    check_memory(name, value, value, what or f"an array of {name} values")
    return value


def as_bool(name: str, value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ParameterError(f"{name} must be True or False, got {_describe(value)}")


def as_float(name: str, value: Any, *, positive: bool = False, finite: bool = True) -> float:
    if type(value) is not float:  # as as_int: Python floats skip the ABC checks
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ParameterError(f"{name} must be a real number, got {_describe(value)}")
        value = float(value)
    # (not math.isfinite: Dynamo cannot trace it on the floats dynamic=True leaves symbolic)
    if finite and not -math.inf < value < math.inf:
        raise ValueError(f"{name}={value} is out of range: must be finite")
    if positive and not value > 0:
        raise ValueError(f"{name}={value} is out of range: must be > 0")
    return value


def as_choice(name: str, value: Any, allowed: tuple[str, ...], aliases: dict | None = None) -> str:
    if not isinstance(value, str):
        raise ParameterError(f"{name} must be one of {allowed}, got {_describe(value)}")
    key = value.lower()
    key = (aliases or {}).get(key, key)
    if key not in allowed:
        extra = f" (aliases: {sorted(aliases)})" if aliases else ""
        raise ValueError(f"{name}={value!r} is not supported: use one of {allowed}{extra}")
    return key


def backend_name(value: Any) -> str:
    return as_choice("backend", value, BACKENDS)


def pad_mode_name(value: Any) -> str:
    return as_choice("pad_mode", value, PAD_MODES, _PAD_ALIASES)


def output_name(value: Any, allowed: tuple[str, ...] = OUTPUTS) -> str:
    return as_choice("output", value, allowed)


def norm_name(value: Any) -> str:
    """FFT normalization: None means ``"backward"`` (numpy / torch.fft)."""
    if value is None:
        return "backward"
    return as_choice("norm", value, NORMS)


def axis_scale(n: int, norm: str, inverse: bool) -> float:
    """The factor a transform of ``n`` points (the product of the axes' lengths for an n-D
    one) applies for ``norm`` in the forward (``inverse`` False) or inverse direction."""
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    if (norm == "backward") == inverse:
        return 1.0 / n
    return 1.0


def dual_norm(value: str) -> str:
    """The norm whose inverse-direction scale equals ``value``'s forward-direction scale."""
    return {"backward": "forward", "forward": "backward", "ortho": "ortho"}[value]


def axis(name: str, value: Any, ndim: int) -> int:
    """A single axis, negative allowed, returned non-negative."""
    value = as_int(name, value)
    if not -ndim <= value < ndim:
        raise AxisError(f"{name}={value} is out of range for an input with {ndim} dimensions")
    return value % ndim


def axes(name: str, value: Any, ndim: int) -> tuple[int, ...]:
    """A sequence of distinct axes, returned non-negative in the given order."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, (tuple, list)):
        raise ParameterError(f"{name} must be an int or a sequence of ints, got {_describe(value)}")
    out = tuple(axis(name, v, ndim) for v in value)
    if len(set(out)) != len(out):
        raise ValueError(f"{name}={tuple(value)} repeats an axis")
    return out


@dataclass(frozen=True)
class WindowSpec:
    """A window: by name (built in float64 by the backend) or given as an array."""

    name: str  # a WINDOW_NAMES / PARAMETRIC_WINDOWS entry, or "array"
    parameter: float = 0.0  # kaiser beta, gaussian std

    @property
    def is_array(self) -> bool:
        return self.name == "array"

    def as_key(self) -> str:
        """A compact string for op schemas: ``"hann"``, ``"kaiser:8.6"``."""
        if self.name in PARAMETRIC_WINDOWS:
            return f"{self.name}:{self.parameter!r}"
        return self.name

    @staticmethod
    def from_key(key: str) -> WindowSpec:
        name, _, parameter = key.partition(":")
        return WindowSpec(name, float(parameter) if parameter else 0.0)


def check_window_parameter(key: str, parameter: float, shown: Callable[[], str]) -> None:
    """A parametric window's parameter (a float), for :func:`window_spec` and the ops' window
    keys alike: the gaussian std > 0; the kaiser beta within KAISER_BETA_MAX in magnitude
    (past ~709.78 numpy's I0(beta) overflows and the window would be NaN, as scipy's is).
    ``shown()``: how the caller names it in the error, built only then (a parameter traced
    by torch.compile cannot be formatted)."""
    if key == "gaussian" and not parameter > 0:
        raise ValueError(f"{shown()}: the gaussian std must be > 0")
    if key == "kaiser" and not abs(parameter) <= KAISER_BETA_MAX:
        raise ValueError(f"{shown()}: the kaiser beta must be at most {KAISER_BETA_MAX} in "
                         "magnitude")  # fmt: skip


def window_spec(value: Any, arrays: bool = True) -> WindowSpec:
    """Normalize ``window=``: a name, a ``(name, parameter)`` tuple, or an array (checked
    later; ``arrays``: whether the caller takes one, for the error's list of what is)."""
    if isinstance(value, str):
        key = value.lower()
        key = _WINDOW_ALIASES.get(key, key)
        if key in WINDOW_NAMES:
            return WindowSpec(key)
        if key in PARAMETRIC_WINDOWS:
            raise ValueError(
                f"window={value!r} needs a parameter: pass ({key!r}, "
                f"{'beta' if key == 'kaiser' else 'std'})"
            )
        array = ", or a 1-D array of length win_length" if arrays else ""
        raise ValueError(
            f"window={value!r} is not supported: use one of {WINDOW_NAMES}, "
            f"('kaiser', beta) or ('gaussian', std){array}"
        )
    if isinstance(value, tuple):
        if len(value) == 1 and isinstance(value[0], str):
            return window_spec(value[0], arrays)
        if len(value) != 2 or not isinstance(value[0], str):
            raise ValueError(
                f"window={value!r} is not supported: a tuple window is (name, parameter), "
                "e.g. ('kaiser', 12.0) or ('gaussian', 7.0)"
            )
        key = value[0].lower()
        key = _WINDOW_ALIASES.get(key, key)
        if key not in PARAMETRIC_WINDOWS:
            raise ValueError(
                f"window={value!r} is not supported: parametric windows are {PARAMETRIC_WINDOWS}"
            )
        parameter = as_float(f"window[1] ({key} parameter)", value[1])
        check_window_parameter(key, parameter, lambda: f"window={value!r}")
        # (the key is a string: a parameter traced as a symbol becomes its value)
        return WindowSpec(key, static_scalar(parameter))
    return WindowSpec("array")


@dataclass(frozen=True)
class StftParams:
    """Normalized stft / istft parameters (a hashable plan ingredient)."""

    n_fft: int
    hop_length: int
    win_length: int
    window: WindowSpec
    center: bool
    pad_mode: str
    normalized: bool
    onesided: bool

    @property
    def n_freq(self) -> int:
        return self.n_fft // 2 + 1 if self.onesided else self.n_fft

    @property
    def pad(self) -> int:
        """Samples of padding on each side of the signal (center=True)."""
        return self.n_fft // 2 if self.center else 0

    @property
    def fft_norm(self) -> str:
        # normalized=True scales by n_fft ** -0.5 (torch's meaning), i.e. the "ortho" FFT.
        return "ortho" if self.normalized else "backward"


def stft_params(
    *,
    n_fft: Any,
    hop_length: Any,
    win_length: Any,
    window: Any,
    center: Any,
    pad_mode: Any = "constant",
    normalized: Any = False,
    onesided: Any = True,
) -> StftParams:
    n_fft = as_size("n_fft", n_fft, what="the n_fft-sample window")
    if win_length is None:
        win_length = n_fft
    win_length = as_int("win_length", win_length, minimum=1)
    if win_length > n_fft:
        raise ValueError(f"win_length={win_length} is out of range: must be <= n_fft={n_fft}")
    if hop_length is None:
        # win_length // 4 as in librosa and torch; at least 1 so tiny windows still work.
        hop_length = max(1, win_length // 4)
    hop_length = as_int("hop_length", hop_length, minimum=1)
    return StftParams(
        n_fft=n_fft,
        hop_length=hop_length,
        win_length=win_length,
        window=window_spec(window),
        center=as_bool("center", center),
        pad_mode=pad_mode_name(pad_mode),
        normalized=as_bool("normalized", normalized),
        onesided=as_bool("onesided", onesided),
    )


def eps_value(value: Any) -> float:
    return as_float("eps", value, positive=True)


def signal_length(name: str, length: int, p: StftParams) -> None:
    """Check a signal of ``length`` samples can be framed with ``p``."""
    if length == 0:
        raise ValueError(f"{name} has an empty time axis: stft needs at least one sample")
    if not p.center and length < p.n_fft:
        raise ValueError(
            f"{name} has {length} samples, fewer than n_fft={p.n_fft} with center=False: "
            "pass center=True, a smaller n_fft, or a longer signal"
        )
