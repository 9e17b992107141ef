"""Configured twins: a transform whose parameters are bound once and checked at construction.

``specux.MelSpectrogram(sr=16000, n_fft=512)(x)`` equals
``specux.melspectrogram(x, sr=16000, n_fft=512)`` for ``x`` of any library (numpy, torch, cupy):
a twin takes exactly its function's parameters (positionally after the signal, or by name) and
calls the function with them. ``specux.nn`` holds the ``torch.nn.Module`` versions.

Construction runs the function once on a short probe signal of zeros (a numpy array, or an
array of the window's library when ``window`` is an array), so every check the function makes
on its parameters, including those between parameters (``win_length <= n_fft``,
``fmax <= sr / 2``, ``n_mfcc <= n_mels``, ``top_db`` only with ``output="db"``), raises at
construction with the function's own message. Checks on the input itself (library, dtype,
length, device) run at each call. ``backend=`` is checked by name at construction and applied
at each call.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import numbers
import sys
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from specux.compat.arrays import dtype_name, library_of
from specux.meta.params import as_int, as_size, backend_name

__all__ = ["Twin", "STFT", "ISTFT", "MelSpectrogram", "MFCC", "LFCC", "Chroma", "FFTConvolve"]

_NOT_GIVEN = object()


def public_function(name: str) -> Callable | None:
    """``specux.<name>`` if the package has it (looked up when asked, so import order is moot)."""
    return getattr(importlib.import_module("specux"), name, None)


def short_repr(value: Any) -> str:
    """``repr`` for parameters, with arrays summarized as library, dtype and shape."""
    try:
        library = library_of(value)
    except TypeError:
        return repr(value)
    return f"<{library} {dtype_name(value, library)} array {tuple(value.shape)}>"


def _valid_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1


class Twin:
    """A public specux function with its parameters bound.

    Subclasses name the function (``function_name``) and the array arguments a call takes
    (``arrays``); ``params`` holds every parameter with the function's defaults filled in and
    ``given`` the ones passed at construction (what ``repr`` shows).
    """

    function_name: ClassVar[str]
    arrays: ClassVar[tuple[str, ...]] = ("x",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        function = public_function(self.function_name)
        if function is None:
            raise NotImplementedError(f"specux.{self.function_name} is not in this version")
        signature = inspect.signature(function)
        # The array arguments are placeholders: a twin binds only the parameters.
        try:
            bound = signature.bind(*([None] * len(self.arrays)), *args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{type(self).__name__}(): {error}") from None
        self._function = function
        self._given = self._flatten(signature, bound.arguments)
        bound.apply_defaults()
        self._params = self._flatten(signature, bound.arguments)
        self._check()

    def _flatten(self, signature: inspect.Signature, arguments: dict) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in arguments.items():
            if name in self.arrays:
                continue
            if signature.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                out.update(value)  # mfcc's **mel_params, lfcc's **stft_params, ...
            else:
                out[name] = value
        return out

    @property
    def function(self) -> Callable:
        """The public function this twin calls."""
        return self._function

    @property
    def params(self) -> dict[str, Any]:
        """Every parameter, the function's defaults filled in (a copy)."""
        return dict(self._params)

    @property
    def given(self) -> dict[str, Any]:
        """The parameters passed at construction (a copy)."""
        return dict(self._given)

    def __call__(self, *arrays: Any) -> Any:
        if len(arrays) != len(self.arrays):
            names = ", ".join(self.arrays)
            raise TypeError(f"{type(self).__name__} is called with ({names}), got {len(arrays)}")
        return self._function(*arrays, **self._given)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={short_repr(value)}" for name, value in self._given.items())
        return f"{type(self).__name__}({shown})"

    # -- construction-time check ---------------------------------------------------------------

    def _check(self) -> None:
        kwargs = self.probe_parameters(dict(self._given))
        if "backend" in kwargs:
            # The probe runs on the host; the backend is checked by name and applied per call.
            backend_name(kwargs.pop("backend"))
        like = self._array_parameter()
        with _no_grad():
            self._function(*self.probe(like), **kwargs)

    def probe_parameters(self, given: dict[str, Any]) -> dict[str, Any]:
        """The parameters the probe runs with (all of them, unless a subclass checks one
        another way)."""
        return given

    def _array_parameter(self) -> Any:
        for value in self._given.values():
            try:
                library_of(value)
            except TypeError:
                continue
            return value
        return None

    def probe(self, like: Any) -> tuple[Any, ...]:
        """Arrays of zeros to run the function on once (in ``like``'s library if given)."""
        n_fft = self._params.get("n_fft", 2048)
        if _valid_int(n_fft):  # (a probe of n_fft zeros must fit, as the window must)
            as_size("n_fft", n_fft, what="the n_fft-sample window")
        return (_zeros((n_fft if _valid_int(n_fft) else 1,), like),)


@contextlib.contextmanager
def _no_grad():
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    with torch.no_grad():
        yield


def _zeros(shape: tuple[int, ...], like: Any, complex_: bool = False) -> Any:
    """float64 (complex128) zeros; in ``like``'s library and on its device when given."""
    if like is None:
        return np.zeros(shape, dtype=np.complex128 if complex_ else np.float64)
    library = library_of(like)
    if library == "torch":
        torch = sys.modules["torch"]
        dtype = torch.complex128 if complex_ else torch.float64
        return torch.zeros(shape, dtype=dtype, device=like.device)
    module = importlib.import_module(library)
    return module.zeros(shape, dtype=np.complex128 if complex_ else np.float64)


class STFT(Twin):
    """:func:`specux.stft` with its parameters bound: ``STFT(n_fft=512)(x)``."""

    function_name = "stft"


class ISTFT(Twin):
    """:func:`specux.istft` with its parameters bound: ``ISTFT(n_fft=512)(S)``.

    ``length`` may also be given per call: ``ISTFT(n_fft=512)(S, length=len(x))``.
    """

    function_name = "istft"
    arrays = ("S",)

    def __call__(self, S: Any, length: Any = _NOT_GIVEN) -> Any:  # noqa: N803 - istft's name
        kwargs = dict(self._given)
        if length is not _NOT_GIVEN:
            kwargs["length"] = length
        return self._function(S, **kwargs)

    def probe_parameters(self, given: dict[str, Any]) -> dict[str, Any]:
        # ``length`` reaches past the probe's one frame: checked here as istft checks it,
        # not run (the frames a call's S holds decide whether its envelope covers length)
        length = given.pop("length", None)
        if length is not None:
            as_int("length", length, minimum=0)
        return given

    def probe(self, like: Any) -> tuple[Any, ...]:
        # One frame: enough to run every parameter check, while the NOLA test (which depends
        # on how many frames overlap) stays with the call.
        onesided = self._params.get("onesided", True)
        onesided = onesided if isinstance(onesided, (bool, np.bool_)) else True
        n_fft, win_length = self._params.get("n_fft"), self._params.get("win_length")
        window = self._params.get("window")
        if win_length is None and getattr(window, "ndim", None) == 1:
            win_length = int(window.shape[0])  # a window array's length is win_length
        if n_fft is None:
            # istft derives n_fft from S: make it just long enough for win_length.
            n_fft = win_length if _valid_int(win_length) else 2
            n_fft += n_fft % 2 if onesided else 0
        if not _valid_int(n_fft):
            n_fft = 2
        n_freq = n_fft // 2 + 1 if onesided else n_fft
        return (_zeros((n_freq, 1), like, complex_=True),)


class MelSpectrogram(Twin):
    """:func:`specux.melspectrogram` with its parameters bound: ``MelSpectrogram(sr=16000)(x)``."""

    function_name = "melspectrogram"


class MFCC(Twin):
    """:func:`specux.mfcc` with its parameters bound: ``MFCC(sr=16000, n_mfcc=13)(x)``."""

    function_name = "mfcc"


class LFCC(Twin):
    """:func:`specux.lfcc` with its parameters bound: ``LFCC(sr=16000, n_lfcc=20)(x)``."""

    function_name = "lfcc"


class Chroma(Twin):
    """:func:`specux.chroma` with its parameters bound: ``Chroma(sr=22050)(x)``."""

    function_name = "chroma"


class FFTConvolve(Twin):
    """:func:`specux.fftconvolve` with its parameters bound: ``FFTConvolve("same")(x, y)``
    binds ``mode`` (and ``dim``); with the kernel given too, ``FFTConvolve(h, mode="same")``
    or ``FFTConvolve(y=h)``, it is called with the signal alone, ``(x)``, like the other
    twins (an array first argument is the kernel, a string the mode)."""

    function_name = "fftconvolve"
    arrays = ("x", "y")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kernel = kwargs.pop("y", _NOT_GIVEN)
        if kernel is _NOT_GIVEN and args and not isinstance(args[0], str):
            try:
                library_of(args[0])
            except TypeError:
                pass
            else:  # the kernel, given positionally
                kernel, args = args[0], args[1:]
        if kernel is not _NOT_GIVEN:
            self.arrays = ("x",)  # y is a bound parameter: calls take the signal alone
            args = (kernel, *args)  # bound in y's place, before mode and dim
        super().__init__(*args, **kwargs)

    def probe(self, like: Any) -> tuple[Any, ...]:
        dim = self._params.get("dim", -1)
        ndim = 1
        if isinstance(dim, numbers.Integral) and not isinstance(dim, bool):
            ndim = max(1, dim + 1 if dim >= 0 else -dim)
            kernel = None if "y" in self.arrays else self._params.get("y")
            if dim >= 0 and hasattr(kernel, "shape"):
                # a dim counted from the front needs a signal of the bound kernel's
                # dimensions (fftconvolve refuses others as ambiguous)
                ndim = max(1, len(kernel.shape))
        return tuple(_zeros((1,) * ndim, like) for _ in self.arrays)


class _ConstantQ(Twin):
    def probe(self, like: Any) -> tuple[Any, ...]:
        # one sample: the CQT takes any length (a probe of 2 * hop_length samples made
        # CQT(hop_length=10**9) allocate 15 GB where cqt itself runs at once)
        return (_zeros((1,), like),)


# Twins of functions that may not be in this version: built when the function exists.
_OPTIONAL = {
    "CQT": ("cqt", ":func:`specux.cqt` with its parameters bound: ``CQT(sr=22050)(x)``."),
    "VQT": ("vqt", ":func:`specux.vqt` with its parameters bound: ``VQT(sr=22050)(x)``."),
}


def _optional_twin(name: str) -> type[Twin] | None:
    function_name, doc = _OPTIONAL[name]
    if public_function(function_name) is None:
        return None
    cls = type(name, (_ConstantQ,), {"function_name": function_name, "__doc__": doc})
    cls.__module__ = __name__
    globals()[name] = cls
    __all__.append(name)
    return cls


for _name in _OPTIONAL:
    _optional_twin(_name)


def __getattr__(name: str) -> Any:
    # CQT / VQT when specux.cqt / specux.vqt appeared after this module was imported.
    if name in _OPTIONAL and name not in globals():
        cls = _optional_twin(name)
        if cls is not None:
            return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
