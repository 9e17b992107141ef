"""``specux.plan``: a transform bound to one input layout, and the autotune switches.

A :class:`Plan` fixes a transform, its parameters and the shape, dtype, library and device of
its input. Making it runs the transform once on that input, so everything a call builds the
first time (the parameters' checks, filterbanks and windows, the FFT plan, on a GPU the
generated kernels compiled or loaded from the disk cache) is built then and not inside the
first call that matters; calling it checks that the input has the bound layout and runs the
transform. Results are the function's own, bit for bit.

:meth:`Plan.autotune` times, on the plan's CUDA device, the alternatives of the block kernels
its call launches (transforms a block, register bound: :mod:`specux.kernels.tuning`) and keeps
a faster one only where it gives the same output bits; the winners are stored per GPU model
in the cache folder, so later processes plan with them. ``specux.autotune(True)`` (or
``SPECUX_AUTOTUNE=1``) does this for the first eager call of each new configuration (function,
parameters, input layout) on a CUDA torch tensor or cupy array.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from specux import options as _options
from specux.compat.arrays import dtype_name, library_of
from specux.compat.torch_compat import compiling
from specux.errors import BackendUnavailableError
from specux.meta.params import as_bool
from specux.twins import short_repr

# the transforms a plan can bind (API.md's functions whose first argument is the signal)
_TRANSFORMS = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2",
               "irfft2", "fftn", "ifftn", "rfftn", "irfftn", "stft", "istft", "melspectrogram",
               "mfcc", "lfcc", "chroma", "cqt", "vqt", "fftconvolve")  # fmt: skip


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
        self._params = dict(params)
        self.library, self.shape, self.dtype, self.device = _layout(x)
        self.tuning = None  # autotune()'s report
        # Warm-up: checks the parameters and builds what the first call builds.
        self._function(x, **self._params)

    @property
    def params(self) -> dict[str, Any]:
        """The bound parameters (a copy of the dict, checked when the plan was made; array
        parameters are held by reference, as a function call takes them)."""
        return dict(self._params)

    def __call__(self, x: Any) -> Any:
        got = _layout(x)
        wanted = (self.library, self.shape, self.dtype, self.device)
        if got != wanted:
            names = ("library", "shape", "dtype", "device")
            # (x's values only in eager calls: a traced shape may be symbolic, which
            # torch.compile cannot format)
            diffs = [f"{n} {'differs' if compiling() else repr(g)} (the plan's: {w!r})"
                     for n, g, w in zip(names, got, wanted) if g != w]  # fmt: skip
            raise ValueError(f"this {self.op} plan does not take x: its " + ", ".join(diffs))
        return self._function(x, **self._params)

    def autotune(self, *, backward: bool = False) -> Plan:
        """Time the plan's block-kernel variants on its CUDA device (module doc) with a
        random input of its layout, keep the fastest that gives the rule's output bits, and
        store the winners; ``plan.tuning`` then holds the report (``str()`` it). Returns the
        plan. ``backward=True`` (torch plans of a floating or complex input) times the call
        and the backward of its output's sum together, so the backward's kernels are tuned
        too (and the gradient's bits must match as well). CPU (numpy) plans raise
        BackendUnavailableError."""
        if self.library not in ("torch", "cupy") or self.device == "cpu":
            raise BackendUnavailableError(
                "autotune: this plan runs on the CPU; autotuning times CUDA kernels: make the "
                "plan with a CUDA torch tensor or a cupy array")  # fmt: skip
        sample = _sample(self.library, self.shape, self.dtype, self.device)
        if not as_bool("backward", backward):
            self.tuning = _tune(lambda: self._function(sample, **self._params), self.library,
                                sample)  # fmt: skip
            return self
        if self.library != "torch" or not (sample.is_floating_point() or sample.is_complex()):
            raise ValueError(f"autotune(backward=True) needs a torch plan of a floating or "
                             f"complex input; this one is {self.library} {self.dtype}")
        import torch

        def run():
            x = sample.detach().requires_grad_(True)
            out = self._function(x, **self._params)
            total = (torch.view_as_real(out) if out.is_complex() else out).sum()
            (grad,) = torch.autograd.grad(total, x)
            return out.detach(), grad

        self.tuning = _tune(run, self.library, sample, grad=True)
        return self

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={short_repr(v)}" for k, v in self._params.items())
        return (f"Plan({self.op}, {self.library} {self.dtype} {self.shape} on {self.device}, "
                f"{{{params}}})")  # fmt: skip


def plan(op: str | Callable, x: Any, **params: Any) -> Plan:
    """A reusable transform bound to ``x``'s shape, dtype and device (:class:`Plan`)."""
    return Plan(op, x, **params)


def autotune(flag: bool) -> None:
    """``autotune(True)``: autotune the first eager call of every new CUDA configuration
    (function, parameters, input layout), once a process; its winners are stored and apply
    in later processes too. ``autotune(False)`` (the default; ``SPECUX_AUTOTUNE=1`` starts
    on) stops tuning new configurations and keeps the winners found."""
    _options.set_autotune(as_bool("flag", flag))


def _sample(library: str, shape: tuple, dtype: str, device: str):
    """A random input of a plan's layout (timing does not depend on the values)."""
    if library == "torch":
        import torch

        g = torch.Generator(device=device).manual_seed(0)
        return torch.randn(shape, dtype=getattr(torch, dtype), device=device, generator=g)
    import cupy

    digits = re.findall(r"\d+", device)  # "<CUDA Device 0>"
    with cupy.cuda.Device(int(digits[-1]) if digits else 0):
        real = cupy.random.default_rng(0).standard_normal(shape)
        if dtype.startswith("complex"):
            real = real + 1j * cupy.random.default_rng(1).standard_normal(shape)
        return real.astype(dtype)


def _device_index(sample) -> int:
    device = sample.device
    return int(device.index if hasattr(device, "index") else device.id)


_tuning = threading.local()  # set while this thread tunes (its calls are not tuned again)


def _tune(run: Callable[[], Any], library: str, sample, grad: bool = False):
    from specux.kernels import tuning
    from specux.kernels.cuda.runtime import gpu_model

    index = _device_index(sample)
    timer = tuning.Timer(library, index)
    model = gpu_model(index)  # (the winners are stored for the GPU they were timed on)
    _tuning.active = True
    try:
        if library == "torch":
            import torch

            with torch.set_grad_enabled(grad), torch.cuda.device(index):
                return tuning.autotune_call(run, timer, model)
        import cupy

        with cupy.cuda.Device(index):
            return tuning.autotune_call(run, timer, model)
    finally:
        _tuning.active = False


_tuned_configurations: set = set()
_configurations_lock = threading.Lock()
_MOST_CONFIGURATIONS = 4096  # then the set starts over (a configuration may be tuned again)


def _key_value(value: Any) -> Any:
    try:
        return ("array", _layout(value), library_of(value))
    except (TypeError, AttributeError):  # not an array: the value itself
        return value


def _configuration(fn: Callable, signature, bound) -> tuple | None:
    """A hashable key of a call's configuration: the function, its input's layout and every
    other argument (arrays by their layout, the extra keyword parameters of mfcc / lfcc /
    chroma one by one), or None if an argument cannot be keyed."""
    import inspect

    items = []
    for name, value in bound.arguments.items():
        if signature.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
            items += [(f"{name}.{k}", _key_value(v)) for k, v in sorted(value.items())]
        else:
            items.append((name, _key_value(value)))
    key = (fn.__module__, fn.__qualname__, tuple(items))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _capturing(library: str) -> bool:
    """Whether the current stream is capturing a CUDA graph (torch's or cupy's)."""
    if library == "torch":
        import torch

        return torch.cuda.is_current_stream_capturing()
    import cupy

    return cupy.cuda.get_current_stream().is_capturing()


def autotune_first_call(public: Callable, signature, args: tuple, kwargs: dict) -> None:
    """With ``specux.autotune(True)``: tune a configuration's first plain eager CUDA call
    (through the public function ``public``, on a random input of its layout) before the
    call runs. Calls being captured into a CUDA graph, calls under torch's fake tensors,
    dispatch modes or functorch transforms, and numpy inputs are not tuned; the caller
    skips calls being compiled (this function is not traceable). An argument the function
    refuses is left to the call to raise."""
    from specux.compat.arrays import CUPY, TORCH
    from specux.compat.torch_compat import plain_eager

    if getattr(_tuning, "active", False):
        return
    try:
        bound = signature.bind(*args, **kwargs)
        first_name, first = next(iter(bound.arguments.items()))
        library = library_of(first)
        if library not in (TORCH, CUPY):
            return
        if library == TORCH and (first.device.type != "cuda" or not plain_eager()):
            return
        if _capturing(library):
            return
        key = _configuration(public, signature, bound)
        if key is None:
            return
        with _configurations_lock:
            if key in _tuned_configurations:
                return
            if len(_tuned_configurations) >= _MOST_CONFIGURATIONS:
                _tuned_configurations.clear()
            _tuned_configurations.add(key)
        sample = _sample(*_layout(first))
    except Exception:  # noqa: BLE001 - an argument the call itself refuses (and raises)
        return
    bound.arguments[first_name] = sample
    try:
        _tune(lambda: public(*bound.args, **bound.kwargs), library, sample)
    except (ValueError, TypeError, BackendUnavailableError):
        return  # bad arguments, no CUDA: the call itself raises the same next
    except Exception as exc:  # noqa: BLE001 - tuning is an optimization: the call still runs
        import warnings

        warnings.warn(f"specux: autotuning {public.__name__} failed ({type(exc).__name__}: "
                      f"{exc}); the call runs with the planner's kernels", RuntimeWarning,
                      stacklevel=3)  # fmt: skip


__all__ = ["Plan", "autotune", "plan"]
