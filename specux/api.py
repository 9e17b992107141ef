"""The public functions: validate, route, run on the input's library, return in its dtype.

Time is the last axis; leading axes are kept. See docs/api.md for the full contract.
"""

from __future__ import annotations

import math
import operator
from typing import Any

from specux import routing
from specux.compat.arrays import TORCH, float_kind, library_of
from specux.compat.torch_compat import autocast_on
from specux.engines import dtype_of, engine_for
from specux.errors import AxisError
from specux.meta import dtypes, params, shapes
from specux.meta.params import ParameterError, StftParams
from specux.transport import across_libraries

# ---------------------------------------------------------------------------------------------
# shared helpers


class _Call:
    """One validated call: the route, the engine and the precision bookkeeping."""

    def __init__(self, x: Any, backend: Any, name: str = "x", family: str = "fft") -> None:
        self.name = name  # how the signature names the input, for errors
        self.route = routing.route(x, backend, name, family)
        self.engine = engine_for(self.route.library)
        self.kind = float_kind(x, self.route.library, name)
        self.input_dtype = dtype_of(x, self.route.library)
        if self.route.library == TORCH and autocast_on(self.route.device_type):
            # inside torch.autocast the transforms compute in float32 and return it, as
            # torch's spectral ops do: a half input is taken as its float32 value
            self.input_dtype = dtypes.compute_dtype(self.input_dtype)
        self.compute = dtypes.compute_dtype(self.input_dtype, self.route.backend)
        self.ndim = len(x.shape)

    def real_compute(self) -> str:
        return self.compute if self.kind == "real" else dtypes.real_of(self.compute)

    def complex_compute(self) -> str:
        return self.compute if self.kind == "complex" else dtypes.complex_of(self.compute)

    def finish(self, out: Any) -> Any:
        computed = dtype_of(out, self.route.library)
        wanted = dtypes.result_dtype(self.input_dtype, computed, self.route.library)
        return self.engine.cast(out, wanted)


def _pick_alias(primary: str, value: Any, alias: str, alias_value: Any, default: Any) -> Any:
    """``value``, or ``alias_value`` where the alias is given and ``value`` is left at its
    documented ``default`` (or None); both given and different is a ValueError."""
    if alias_value is None:
        return default if value is None else value
    if value is None or _same(value, default) or _same(value, alias_value):
        return alias_value
    raise ValueError(f"pass {primary}= or {alias}=, not both ({primary}={value!r}, "
                     f"{alias}={alias_value!r})")  # fmt: skip


def _same(value: Any, other: Any) -> bool:
    """An axis or sequence of axes equal to ``other`` (an int or a tuple)."""
    if _is_sequence(value) != isinstance(other, tuple):
        return False
    entries = _entries(value) if _is_sequence(value) else value
    try:
        return bool(entries == other)
    except (TypeError, RuntimeError):
        return False


def _require_ndim(call: _Call, minimum: int, name: str = "x") -> None:
    """An input of fewer than ``minimum`` dimensions: its transform's axes lie outside it,
    an AxisError (a ValueError and, as numpy.fft and torch.fft raise, an IndexError)."""
    if call.ndim < minimum:
        raise AxisError(
            f"{name} has {call.ndim} dimensions: this transform needs at least {minimum}"
        )


def _size(name: str, value: Any) -> int:
    # (what: no f-string of the value, which may be symbolic: formatting would pin it)
    return params.as_size(name, value, what="a transform of that many points")


def _s_entry(value: Any) -> int:
    """An entry of ``s`` other than -1 (which keeps the axis's size)."""
    size = params.as_int("s", value)
    if size < 1:
        raise ValueError(f"s={value} is out of range: each entry must be >= 1, or -1 to keep "
                         "the axis's size")  # fmt: skip
    return _size("s", size)


# ---------------------------------------------------------------------------------------------
# FFT family (numpy / torch.fft semantics)


def _fft_1d(x, n, dim, norm, backend, axis, *, forward: bool) -> Any:
    call = _Call(x, backend)
    _require_ndim(call, 1)
    d = params.axis("dim", _pick_alias("dim", dim, "axis", axis, -1), call.ndim)
    norm = params.norm_name(norm)
    n = x.shape[d] if n is None else _size("n", n)
    if n == 0:
        raise ValueError("n must be >= 1: the transform axis is empty")
    z = call.engine.cast(x, call.complex_compute())
    z = call.engine.resize(z, d, n)
    return call.finish(call.engine.c2c(z, (d,), forward, norm))


@across_libraries
def fft(x, n=None, dim=-1, norm=None, *, axis=None, backend="auto"):
    """1-D discrete Fourier transform of ``x`` along ``dim`` (default last), numpy semantics.

    ``n`` trims or zero-pads the axis first; ``norm`` is None/"backward", "ortho" or "forward".
    Real inputs are treated as complex. Returns complex ``(..., n, ...)``.
    """
    return _fft_1d(x, n, dim, norm, backend, axis, forward=True)


@across_libraries
def ifft(x, n=None, dim=-1, norm=None, *, axis=None, backend="auto"):
    """Inverse of :func:`fft` (scaled by 1/n with the default norm)."""
    return _fft_1d(x, n, dim, norm, backend, axis, forward=False)


def _real_input(call: _Call, function: str) -> None:
    if call.kind != "real":
        raise TypeError(f"{function} takes a real input, got {call.input_dtype}")


def _rfft(x, n, dim, norm, backend, axis, function: str, conjugate: bool, swap: bool):
    call = _Call(x, backend)
    _require_ndim(call, 1)
    _real_input(call, function)
    d = params.axis("dim", _pick_alias("dim", dim, "axis", axis, -1), call.ndim)
    norm = params.norm_name(norm)
    n = x.shape[d] if n is None else _size("n", n)
    if n == 0:
        raise ValueError("n must be >= 1: the transform axis is empty")
    r = call.engine.resize(call.engine.cast(x, call.compute), d, n)
    out = call.engine.r2c(r, (d,), params.dual_norm(norm) if swap else norm)
    return call.finish(call.engine.conj(out) if conjugate else out)


@across_libraries
def rfft(x, n=None, dim=-1, norm=None, *, axis=None, backend="auto"):
    """FFT of a real signal: ``(..., n) -> (..., n // 2 + 1)`` complex."""
    return _rfft(x, n, dim, norm, backend, axis, "rfft", conjugate=False, swap=False)


@across_libraries
def ihfft(x, n=None, dim=-1, norm=None, *, axis=None, backend="auto"):
    """Inverse of :func:`hfft`: ``conj(rfft(x))`` with the inverse direction's scaling."""
    return _rfft(x, n, dim, norm, backend, axis, "ihfft", conjugate=True, swap=True)


def _irfft(x, n, dim, norm, backend, axis, conjugate: bool, swap: bool):
    call = _Call(x, backend)
    _require_ndim(call, 1)
    d = params.axis("dim", _pick_alias("dim", dim, "axis", axis, -1), call.ndim)
    norm = params.norm_name(norm)
    bins = x.shape[d]
    n = 2 * (bins - 1) if n is None else _size("n", n)
    if n < 1:
        raise ValueError(
            f"n must be >= 1: with n=None the output has 2 * ({bins} - 1) = {n} samples; pass n"
        )
    z = call.engine.resize(call.engine.cast(x, call.complex_compute()), d, n // 2 + 1)
    if conjugate:
        z = call.engine.conj(z)
    return call.finish(call.engine.c2r(z, (d,), n, params.dual_norm(norm) if swap else norm))


@across_libraries
def irfft(x, n=None, dim=-1, norm=None, *, axis=None, backend="auto"):
    """Inverse of :func:`rfft`: ``(..., m)`` complex -> ``(..., n)`` real, n = 2 (m - 1) default."""
    return _irfft(x, n, dim, norm, backend, axis, conjugate=False, swap=False)


@across_libraries
def hfft(x, n=None, dim=-1, norm=None, *, axis=None, backend="auto"):
    """FFT of a Hermitian-symmetric signal given by its first half: real ``(..., n)``."""
    return _irfft(x, n, dim, norm, backend, axis, conjugate=True, swap=True)


def _nd_axes(call: _Call, x, s, dim, axes, default_last: int | None, name: str):
    """(dims, sizes or None) of an n-D transform ``name``: an ``s`` entry of -1 keeps the
    axis's size (numpy and torch), or on a c2r transform's last axis gives its default
    output length 2 (m - 1) (torch; numpy takes m there); ``s`` and ``dim`` may be any 1-D
    sequence of integers."""
    two_d = (-2, -1) if default_last == 2 else None  # the 2-D transforms' documented dim
    dim = _pick_alias("dim", dim, "axes", axes, two_d)
    if default_last == 2 and _same(dim, two_d):
        dim = None  # the last two axes, with the message for inputs of fewer dimensions
    if s is not None:
        s = _entries(s) if _is_sequence(s) else (s,)
        s = tuple(v if _is_minus_one(v) else _s_entry(v) for v in s)
    if dim is None:
        # the 2-D transforms' axes are the last two whatever s holds (numpy and torch raise
        # for an s of another length too); the N-D ones take the last len(s)
        if default_last is not None:
            count = default_last
        elif s is not None:
            count = len(s)
        else:
            count = call.ndim
        if count > call.ndim:
            if s is not None:
                raise AxisError(f"s={s} has more entries than x has dimensions ({call.ndim})")
            raise AxisError(
                f"x has {call.ndim} dimension(s): this transform needs at least {count} (it "
                f"transforms the last {count} unless dim= names others)"
            )
        dims = tuple(range(call.ndim - count, call.ndim))
    else:
        dims = params.axes("dim", _entries(dim) if _is_sequence(dim) else dim, call.ndim)
    if s is not None and len(s) != len(dims):
        raise ValueError(f"s={s} and dim={tuple(dims)} must have the same length")
    if s is not None:  # -1: the input's size, the c2r output's default on its last axis
        kept = [x.shape[d] for d in dims]
        if name in ("irfftn", "irfft2") and kept:
            kept[-1] = 2 * (kept[-1] - 1)
        s = tuple(k if _is_minus_one(v) else v for k, v in zip(kept, s))
        if all(type(v) is int for v in s):
            params.check_memory("s", s, math.prod(s), "a transform of that many points")
    if not dims and name not in ("fftn", "ifftn"):
        raise ValueError(f"{name} must transform at least one axis (dim names none, or x is "
                         "0-d)")  # fmt: skip
    return dims, s


def _entries(value: Any) -> tuple:
    """The entries of a tuple / list, or of a 1-D array / tensor as Python scalars (a 1-D
    tensor's entries are 0-d tensors, which the integer checks refuse)."""
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return tuple(value.tolist())


def _is_sequence(value: Any) -> bool:
    """A tuple, a list, or a 1-D array / tensor of integers (numpy accepts those for s)."""
    return isinstance(value, (tuple, list)) or getattr(value, "ndim", None) == 1


def _is_minus_one(value: Any) -> bool:
    """An ``s`` entry of -1: the axis keeps its size."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int) or params.symbolic_int(value):
        # (== rather than operator.index: a size traced by compile / export stays symbolic)
        return bool(value == -1)
    try:
        return operator.index(value) == -1
    except TypeError:
        return False


def _fftn(x, s, dim, axes, norm, backend, forward: bool, default_last: int | None):
    call = _Call(x, backend)
    dims, s = _nd_axes(call, x, s, dim, axes, default_last, "fftn" if forward else "ifftn")
    norm = params.norm_name(norm)
    z = call.engine.cast(x, call.complex_compute())
    if not dims:  # no axis to transform (x 0-d, or dim=()): a complex copy, as torch.fft
        return call.finish(z.clone() if hasattr(z, "clone") else z.copy())
    sizes = s if s is not None else tuple(x.shape[d] for d in dims)
    for d, size in zip(dims, sizes):
        if size == 0:
            raise ValueError(f"axis {d} is empty: every transformed axis needs >= 1 point")
        z = call.engine.resize(z, d, size)
    return call.finish(call.engine.c2c(z, dims, forward, norm))


@across_libraries
def fftn(x, s=None, dim=None, norm=None, *, axes=None, backend="auto"):
    """N-D FFT over ``dim`` (default: all axes, or the last ``len(s)``)."""
    return _fftn(x, s, dim, axes, norm, backend, True, None)


@across_libraries
def ifftn(x, s=None, dim=None, norm=None, *, axes=None, backend="auto"):
    """N-D inverse FFT over ``dim``."""
    return _fftn(x, s, dim, axes, norm, backend, False, None)


@across_libraries
def fft2(x, s=None, dim=(-2, -1), norm=None, *, axes=None, backend="auto"):
    """2-D FFT over ``dim`` (default the last two axes)."""
    return _fftn(x, s, dim, axes, norm, backend, True, 2)


@across_libraries
def ifft2(x, s=None, dim=(-2, -1), norm=None, *, axes=None, backend="auto"):
    """2-D inverse FFT over ``dim`` (default the last two axes)."""
    return _fftn(x, s, dim, axes, norm, backend, False, 2)


def _rfftn(x, s, dim, axes, norm, backend, default_last: int | None):
    call = _Call(x, backend)
    name = "rfft2" if default_last == 2 else "rfftn"
    _real_input(call, name)
    dims, s = _nd_axes(call, x, s, dim, axes, default_last, name)
    norm = params.norm_name(norm)
    r = call.engine.cast(x, call.compute)
    sizes = s if s is not None else tuple(x.shape[d] for d in dims)
    for d, size in zip(dims, sizes):
        if size == 0:
            raise ValueError(f"axis {d} is empty: every transformed axis needs >= 1 point")
        r = call.engine.resize(r, d, size)
    return call.finish(call.engine.r2c(r, dims, norm))


@across_libraries
def rfftn(x, s=None, dim=None, norm=None, *, axes=None, backend="auto"):
    """N-D FFT of a real input; the last transformed axis keeps ``n // 2 + 1`` bins."""
    return _rfftn(x, s, dim, axes, norm, backend, None)


@across_libraries
def rfft2(x, s=None, dim=(-2, -1), norm=None, *, axes=None, backend="auto"):
    """2-D :func:`rfftn` over the last two axes by default."""
    return _rfftn(x, s, dim, axes, norm, backend, 2)


def _irfftn(x, s, dim, axes, norm, backend, default_last: int | None):
    call = _Call(x, backend)
    name = "irfft2" if default_last == 2 else "irfftn"
    dims, s = _nd_axes(call, x, s, dim, axes, default_last, name)
    norm = params.norm_name(norm)
    if s is None:
        s = tuple(x.shape[d] for d in dims[:-1]) + (2 * (x.shape[dims[-1]] - 1),)
    for d, size in zip(dims[:-1], s[:-1]):
        if size == 0:
            raise ValueError(f"axis {d} is empty: every transformed axis needs >= 1 point")
    if s[-1] < 1:
        raise ValueError(
            f"the last axis would have {s[-1]} output samples: pass s with a positive size"
        )
    z = call.engine.cast(x, call.complex_compute())
    for d, size in zip(dims[:-1], s[:-1]):
        z = call.engine.resize(z, d, size)
    z = call.engine.resize(z, dims[-1], s[-1] // 2 + 1)
    return call.finish(call.engine.c2r(z, dims, s[-1], norm))


@across_libraries
def irfftn(x, s=None, dim=None, norm=None, *, axes=None, backend="auto"):
    """Inverse of :func:`rfftn`; ``s[-1]`` defaults to ``2 (m - 1)``."""
    return _irfftn(x, s, dim, axes, norm, backend, None)


@across_libraries
def irfft2(x, s=None, dim=(-2, -1), norm=None, *, axes=None, backend="auto"):
    """Inverse of :func:`rfft2`."""
    return _irfftn(x, s, dim, axes, norm, backend, 2)


# ---------------------------------------------------------------------------------------------
# STFT


def _array_window(call: _Call, window: Any, p: StftParams, name: str = "window"):
    """The user's window array, checked and cast to the compute dtype (None if named)."""
    if not p.window.is_array:
        return None
    try:
        library = library_of(window, name)
    except TypeError:
        raise ValueError(
            f"{name} must be a name, a (name, parameter) tuple or a 1-D array, got "
            f"{type(window).__name__}"
        ) from None
    if library != call.route.library:
        raise TypeError(f"{name} is a {library} array but {call.name} is a "
                        f"{call.route.library} array")  # fmt: skip
    try:
        real = float_kind(window, library, name) == "real"
    except TypeError:  # int, bool, object: its message would offer complex dtypes too
        real = False
    if not real:
        raise TypeError(f"{name} must be a real floating array (float16, bfloat16, float32 or "
                        f"float64), got {dtype_of(window, library)}")  # fmt: skip
    if len(window.shape) != 1 or window.shape[0] != p.win_length:
        raise ValueError(
            f"{name} has shape {tuple(window.shape)}: expected ({p.win_length},) (win_length)"
        )
    return call.engine.cast(window, call.real_compute())


def _check_same_device(x: Any, window: Any) -> None:
    if window is not None and hasattr(window, "device") and window.device != x.device:
        raise routing.BackendUnavailableError(
            f"window is on {window.device} but x is on {x.device}: specux never copies silently"
        )


@across_libraries
def stft(
    x: Any,
    n_fft: int = 2048,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Any = "hann",
    center: bool = True,
    pad_mode: str = "constant",
    normalized: bool = False,
    onesided: bool = True,
    output: str = "complex",
    eps: float = 1e-10,
    *,
    backend: str = "auto",
) -> Any:
    """Short-time Fourier transform of a real signal ``(..., L)``.

    Returns ``(..., n_fft // 2 + 1 (or n_fft), n_frames)`` with
    ``n_frames = 1 + (L_padded - n_fft) // hop_length``, ``L_padded = L + 2 (n_fft // 2)``
    when ``center``. ``output`` is "complex", "magnitude", "power" or "db"
    (``10 log10(max(power, eps))``). ``normalized`` scales by ``n_fft ** -0.5``.
    """
    call = _Call(x, backend, family="stft")
    p = params.stft_params(
        n_fft=n_fft, hop_length=hop_length, win_length=win_length, window=window,
        center=center, pad_mode=pad_mode, normalized=normalized, onesided=onesided,
    )  # fmt: skip
    output = params.output_name(output)
    eps = params.eps_value(eps)
    if call.kind != "real":
        raise TypeError(f"stft takes a real signal, got {call.input_dtype}")
    _require_ndim(call, 1)
    params.signal_length("x", x.shape[-1], p)
    w = _array_window(call, window, p)
    _check_same_device(x, w)
    xr = call.engine.cast(x, call.compute)
    return call.finish(call.engine.stft(xr, w, p, output, eps))


@across_libraries
def istft(
    S: Any,
    n_fft: int | None = None,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Any = "hann",
    center: bool = True,
    normalized: bool = False,
    onesided: bool = True,
    length: int | None = None,
    *,
    nola: str = "raise",
    backend: str = "auto",
) -> Any:
    """Inverse STFT of a complex spectrogram ``(..., n_freq, n_frames)`` -> real ``(..., length)``.

    Overlap-add of the inverse-transformed, windowed frames divided by the window-sum-square
    envelope. ``n_fft`` defaults to ``2 (n_freq - 1)`` (onesided) or ``n_freq``. A
    ``length`` longer than the frames cover is zero-padded; a shorter one trims.

    ``nola``: where the envelope vanishes inside the output (the NOLA condition fails, as
    at the first sample with ``center=False`` and a window that starts at 0). ``"raise"``
    (the default, as torch.istft): ValueError where it falls to 1e-11 or below. ``"keep"``
    (librosa.istft's rule): samples whose envelope is at most the output dtype's smallest
    normal number keep their overlap-add undivided (0 where the window is 0 at every frame
    that covers them); all others are divided, however small their envelope.
    """
    call = _Call(S, backend, "S", family="istft")
    _require_ndim(call, 2, "S")
    if call.kind != "complex":
        raise TypeError(f"istft takes a complex spectrogram, got {call.input_dtype}")
    n_freq, count = S.shape[-2], S.shape[-1]
    onesided = params.as_bool("onesided", onesided)
    if n_fft is None:
        n_fft = 2 * (n_freq - 1) if onesided else n_freq
        if n_fft < 1:
            raise ValueError(f"S has {n_freq} frequency bins: pass n_fft explicitly")
    p = params.stft_params(
        n_fft=n_fft, hop_length=hop_length, win_length=win_length, window=window,
        center=center, pad_mode="constant", normalized=normalized, onesided=onesided,
    )  # fmt: skip
    if n_freq != p.n_freq:
        raise ValueError(
            f"S has {n_freq} frequency bins but n_fft={p.n_fft} with onesided={onesided} "
            f"needs {p.n_freq}"
        )
    if count == 0:
        raise ValueError("S has no frames (its last axis is empty)")
    if length is not None:
        length = params.as_size("length", length, minimum=0, what="the signal")
    nola = params.as_choice("nola", nola, params.NOLA_RULES)
    # the overlap-add (and the window envelope) cover the frames' whole span, whatever length
    span = shapes.ola_length(count, p.n_fft, p.hop_length)
    params.check_memory("hop_length", p.hop_length, span,
                        lambda: f"the overlap-add of {count} frames {p.hop_length} apart")
    w = _array_window(call, window, p)
    _check_same_device(S, w)
    spec = call.engine.cast(S, call.compute)
    return call.finish(call.engine.istft(spec, w, p, length, nola))


__all__ = [
    "ParameterError",
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft",
    "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn",
    "stft", "istft",
]  # fmt: skip
