"""``torch.nn.Module`` versions of the transforms, with their filters as buffers.

A module takes its function's parameters (``specux.nn.MelSpectrogram(sr=16000, n_fft=512)``),
checks them once at construction through the configured twin (:mod:`specux.twins`, kept as
``module.twin``), and keeps what it applies as buffers:

- ``window``, ``(win_length,)``: every STFT-based module;
- ``fb``, ``(n_bands, n_fft // 2 + 1)``: the mel, linear or chroma filterbank of
  ``MelSpectrogram``, ``MFCC``, ``LFCC``, ``Chroma``;
- ``dct``, ``(n_coefficients, n_bands)``: the DCT rows (lifter applied) of ``MFCC``, ``LFCC``;
- ``kernel``, ``(n_bins, 2 R, 2)``: the constant-Q taps of ``CQT``, ``VQT`` and
  ``Chroma(source="cqt")`` (which also keeps ``fb``, ``(n_chroma, n_bins)``, its fold into
  chroma), see :class:`CQT`.

Buffers are built in float64 and stored in ``dtype`` (default ``torch.get_default_dtype()``,
float32, as torchaudio does), so ``state_dict`` round-trips, ``.to(device)`` moves them, and a
user may replace them (``module.fb = my_bank``, or :meth:`set_filter` to give float64 values)
or learn them (``module.fb = torch.nn.Parameter(module.fb.clone())``): the ops' backward
reaches them. Change a buffer's values in place through the tensor itself (``with
torch.no_grad(): module.fb.copy_(bank)``), not through ``.data`` or a numpy view: conversions
to the input's dtype, the CUDA kernels' tables of a bank and whether a CQT kernel holds its
taps are kept per tensor version, which such edits do not advance (a buffer made under
``torch.inference_mode`` has no version: replace it, ``module.fb = ...``, to change it).
Changing the module's dtype (``.double()``, ``.to(torch.float64)``, ``.half()``) rounds a
buffer that still holds the filter it was built with afresh from its float64 values, so a
``.double()``-ed module equals the float64 function; a replaced or modified buffer (a loaded
``state_dict`` with other values included) is cast as usual.

Precision: inputs compute as with the functions (float16 / bfloat16 in float32, float32 and
float64 as themselves; real outputs come back in the input's dtype). Buffers are cast to that
compute dtype at each call when it differs from theirs, so a float32 module given a float64
input computes in float64 with its filters rounded to float32 (about 1e-7 relative from the
float64 function); call ``.double()`` (or build with ``dtype=torch.float64``) to equal the
float64 function. A float32 module on float32 input equals the function, whose filters are the
same float64 values rounded once.

Forward passes are ``torch.ops.specux`` ops (or the public functions, which call them) and
elementwise torch ops, so ``torch.compile(fullgraph=True)`` traces them. The modules run where
their input and buffers live; they take no ``backend=``.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, ClassVar

import numpy as np

try:
    import torch
except ImportError as error:  # `from specux import nn` / `import specux.nn`
    raise ModuleNotFoundError(
        "specux.nn holds torch.nn.Module versions of the transforms and needs torch, which "
        "could not be imported (the functions and twins work without it)", name="torch"
    ) from error
from torch.utils.weak import WeakIdKeyDictionary

import specux
from specux import twins
from specux.compat.torch_compat import autocast_on, dtype_name, plain_eager
from specux.engines import TorchEngine
from specux.features import chroma_cqt_parts
from specux.kernels.cpu.cqt import correlation_kernel
from specux.meta import dtypes, matrices
from specux.meta.cqt_params import cqt_arguments
from specux.meta.params import StftParams, signal_length, stft_params
from specux.meta.windows import named_window

__all__ = ["STFT", "ISTFT", "MelSpectrogram", "MFCC", "LFCC", "Chroma", "CQT", "VQT", "FFTConvolve"]

_COMPUTE = {
    torch.float16: torch.float32,
    torch.bfloat16: torch.float32,
    torch.float32: torch.float32,
    torch.float64: torch.float64,
}
# mfcc / lfcc take 10 log10(max(S, 1e-10)) (librosa's power_to_db amin), as the functions do.
_LOG_AMIN = 1e-10
_STFT_KEYS = ("n_fft", "hop_length", "win_length", "window", "center", "pad_mode")


def _defaults(function: Any) -> dict[str, Any]:
    return {
        name: p.default
        for name, p in inspect.signature(function).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def _mel_defaults() -> dict[str, Any]:
    """The STFT and mel parameters mfcc / lfcc / chroma share with melspectrogram, defaults."""
    mel = _defaults(specux.melspectrogram)
    keys = _STFT_KEYS + ("power", "n_mels", "fmin", "fmax", "htk")
    return {**{k: mel[k] for k in keys}, "mel_norm": mel["norm"]}


def _window64(window: Any, p: StftParams) -> Any:
    """The window in float64 on the host: the named one built, or the given array copied."""
    if not p.window.is_array:
        return named_window(p.window, p.win_length)
    if isinstance(window, torch.Tensor):
        return window.detach().to("cpu", torch.float64)
    if hasattr(window, "get"):  # cupy: one host copy, at construction
        window = window.get()
    return np.asarray(window, dtype=np.float64)


def _holds(buffer: torch.Tensor, source: torch.Tensor) -> bool:
    """Whether ``buffer`` holds the float64 filter ``source`` rounded to its dtype."""
    if buffer.shape != source.shape:
        return False
    try:
        return bool(torch.equal(buffer, source.to(device=buffer.device, dtype=buffer.dtype)))
    except (RuntimeError, NotImplementedError):  # meta tensors and the like: no values
        return False


def _built(build: Any) -> torch.Tensor:
    """A float64 filter from a function that builds a new numpy array (no second copy)."""
    return torch.from_numpy(np.asarray(build(), dtype=np.float64))


def _float64(values: Any) -> torch.Tensor:
    """``values`` (a tensor or an array) as a float64 CPU tensor, detached."""
    source = values if isinstance(values, torch.Tensor) else torch.from_numpy(np.array(values))
    return source.detach().to("cpu", torch.float64)


def _on_device(buffer: Any, x: torch.Tensor, name: str) -> None:
    """That buffer ``name`` is a tensor on ``x``'s device (specux never copies silently)."""
    if not isinstance(buffer, torch.Tensor):
        raise TypeError(f"the module's {name} is {type(buffer).__name__}, not a tensor: assign "
                        f"a tensor (module.{name} = ...) or build the module again")  # fmt: skip
    if buffer.device != x.device:
        raise specux.BackendUnavailableError(
            f"the module's {name} is on {buffer.device} but the input is on {x.device}: move the "
            "module with .to(device); specux never copies silently"
        )


def _like(buffer: torch.Tensor, x: torch.Tensor, name: str) -> torch.Tensor:
    """``buffer`` in ``x``'s dtype; it must already be on ``x``'s device (never copied).

    A conversion of a buffer that needs no gradient is kept (per buffer, dtype, version and
    data pointer) and handed out again: the ops then see the same tensor on every call, which
    is what the CUDA kernels cache a filterbank's sparse tables by (a new tensor per call
    would make them read it on the host every call)."""
    _on_device(buffer, x, name)
    if buffer.dtype == x.dtype:
        return buffer
    if (buffer.requires_grad or type(buffer) is not torch.Tensor or not plain_eager()
            or torch.is_inference_mode_enabled() or buffer.is_inference()):  # fmt: skip
        # in the autograd graph / traced: converted where used; under inference_mode the copy
        # would be an inference tensor, which a later call with gradients could not save (and
        # a buffer made under it has no version to keep a conversion by)
        return buffer.to(x.dtype)
    state = (buffer._version, buffer.data_ptr())
    kept = _CONVERTED.setdefault(buffer, {})
    entry = kept.get(x.dtype)
    if entry is None or entry[0] != state:
        entry = kept[x.dtype] = (state, buffer.to(x.dtype))
    return entry[1]


# buffer -> {dtype: ((version, data pointer), the buffer in that dtype)}, dropped with the buffer
_CONVERTED = WeakIdKeyDictionary()


def _restore(out: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return out if out.dtype == dtype else out.to(dtype)


# The functional API's own per-signal top_db clip and librosa-style normalization.
_clip_top_db = TorchEngine.clip_top_db
_normalize = TorchEngine.normalize


class _Module(torch.nn.Module):
    """A module configured like its twin; buffers built in float64, stored in ``dtype``."""

    twin_class: ClassVar[type[twins.Twin]]

    def __init__(self, *args: Any, device: Any = None, dtype: Any = None, **kwargs: Any) -> None:
        super().__init__()
        if "backend" in kwargs:
            raise TypeError(
                f"specux.nn.{type(self).__name__} runs where its input and buffers are (move it "
                "with .to()); backend= is for the functions and twins"
            )
        dtype = torch.get_default_dtype() if dtype is None else dtype
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        self.twin = self.twin_class(*args, **kwargs)
        self._factory = {"device": device, "dtype": dtype}
        # float64 host values of the filter buffers, or what builds them (large ones: the CQT's
        # kernel, built again when a dtype change or a comparison needs it, not kept twice)
        self._sources: dict[str, Any] = {}

    def _register(self, name: str, values: Any) -> None:
        """Buffer ``name`` from ``values`` (an array, or a function that builds it)."""
        self._set_filter(name, values, self._factory["dtype"], self._factory["device"])

    def set_filter(self, name: str, values: Any, dtype: Any = None, device: Any = None) -> None:
        """Replace buffer ``name`` (one of the module's filters: ``window``, ``fb``, ``dct``
        as it has them) by ``values``, taken as float64 and stored in ``dtype`` (default: the
        buffer's present dtype and device); later dtype changes round from them."""
        if name not in self._sources:
            raise ValueError(f"set_filter: {name!r} is not one of this module's filters "
                             f"({', '.join(map(repr, self._sources))})")  # fmt: skip
        self._set_filter(name, values, dtype, device)

    def _set_filter(self, name: str, values: Any, dtype: Any, device: Any) -> None:
        source = _built(values) if callable(values) else _float64(values)
        present = self._buffers.get(name)
        if present is not None:
            dtype = present.dtype if dtype is None else dtype
            device = present.device if device is None else device
        self._sources[name] = values if callable(values) else source
        self.register_buffer(name, source.to(device=device, dtype=dtype))

    def _source(self, name: str) -> torch.Tensor:
        source = self._sources[name]
        return _built(source) if callable(source) else source

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        # .double() / .half() / .to(dtype): a buffer that held the filter it was built with is
        # rounded again from float64 rather than from its present (rounded) values. Compared
        # only when its dtype changed (the CQT's kernel is up to 141 MB in float64).
        before = {name: self._buffers.get(name) for name in self._sources}
        module = super()._apply(fn, recurse)
        for name, old in before.items():
            buffer = self._buffers.get(name)
            if not (isinstance(buffer, torch.Tensor) and isinstance(old, torch.Tensor)
                    and buffer.dtype != old.dtype and buffer.is_floating_point()
                    and old.is_floating_point()):  # fmt: skip
                continue
            source = self._source(name)
            if _holds(old, source):
                self._buffers[name] = source.to(buffer.device, buffer.dtype)
        return module

    def _setup_stft(self, a: dict[str, Any], n_fft: Any = None) -> StftParams:
        """Normalized STFT parameters (``a`` holds them); registers the ``window`` buffer."""
        p = stft_params(
            n_fft=a["n_fft"] if n_fft is None else n_fft, hop_length=a["hop_length"],
            win_length=a["win_length"], window=a["window"], center=a["center"],
            pad_mode=a.get("pad_mode", "constant"), normalized=a.get("normalized", False),
            onesided=a.get("onesided", True),
        )  # fmt: skip
        self._register("window", _window64(a["window"], p))
        return p

    def _tensor(self, x: Any, name: str = "x") -> None:
        """A module's array inputs are torch tensors (other arrays: the twin, or the
        function)."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(
                f"specux.nn.{type(self).__name__} takes a torch.Tensor {name}, got "
                f"{type(x).__name__}: use specux.{self.twin_class.__name__} (or the function) "
                "for other arrays"
            )

    def _prepare(self, x: Any) -> tuple[torch.Tensor, torch.dtype]:
        """``x`` in its compute dtype, and the dtype to hand results back in."""
        self._tensor(x)
        compute = _COMPUTE.get(x.dtype)
        if compute is None:
            raise TypeError(
                f"x has dtype {x.dtype}: this transform takes a float16, bfloat16, float32 or "
                "float64 signal"
            )
        if x.dim() < 1:
            raise ValueError("x has 0 dimensions: this transform needs at least 1")
        self._check_length(x)
        # inside torch.autocast results stay in the compute dtype, as the functions' do
        return x.to(compute), compute if autocast_on(x.device.type) else x.dtype

    def _check_length(self, x: torch.Tensor) -> None:
        """The transform's own check of the signal's length (a subclass's)."""

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={twins.short_repr(v)}" for k, v in self.twin.given.items())


class STFT(_Module):
    """:func:`specux.stft` as a module: ``STFT(n_fft=512)(x)``; buffer ``window``."""

    twin_class = twins.STFT

    def __init__(self, *args: Any, device: Any = None, dtype: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, device=device, dtype=dtype, **kwargs)
        a = self.twin.params
        p = self._setup_stft(a)
        self._kwargs = {
            "n_fft": p.n_fft, "hop_length": p.hop_length, "center": p.center,
            "pad_mode": p.pad_mode, "normalized": p.normalized, "onesided": p.onesided,
            "output": a["output"], "eps": a["eps"],
        }  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., L) -> (..., n_freq, n_frames)``, as :func:`specux.stft`."""
        self._tensor(x)
        window = self.window
        return specux.stft(x, window=window, win_length=window.shape[0], **self._kwargs)


class ISTFT(_Module):
    """:func:`specux.istft` as a module: ``ISTFT(n_fft=512)(S, length=None)``; buffer ``window``.

    The window buffer needs its length at construction, from ``n_fft`` or ``win_length`` (or a
    window array); with ``n_fft=None`` the transform size still comes from ``S`` at each call.
    With neither (``ISTFT()``, as ``specux.istft(S)``) a named window has no buffer: each call
    builds it for the size ``S`` implies, as the function does.
    """

    twin_class = twins.ISTFT

    def __init__(self, *args: Any, device: Any = None, dtype: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, device=device, dtype=dtype, **kwargs)
        a = self.twin.params
        size = a["n_fft"]
        if size is None:
            size = a["win_length"]
        if size is None and hasattr(a["window"], "shape"):
            size = a["window"].shape[0]
        self._length = a["length"]
        if size is None:  # the size comes from S at each call, and the named window with it
            self._named_window = a["window"]
            self._kwargs = {k: a[k] for k in ("hop_length", "center", "normalized", "onesided")}
            return
        self._named_window = None
        p = self._setup_stft({**a, "pad_mode": "constant"}, n_fft=size)
        self._kwargs = {
            "n_fft": a["n_fft"], "hop_length": p.hop_length, "center": p.center,
            "normalized": p.normalized, "onesided": p.onesided,
        }  # fmt: skip

    def forward(self, S: torch.Tensor, length: int | None = None) -> torch.Tensor:  # noqa: N803
        """``(..., n_freq, n_frames) -> (..., length)``; ``length`` overrides the configured one."""
        self._tensor(S, "S")
        length = self._length if length is None else length
        if self._named_window is not None:
            return specux.istft(S, window=self._named_window, length=length, **self._kwargs)
        window = self.window
        return specux.istft(
            S, window=window, win_length=window.shape[0], length=length, **self._kwargs
        )


class _Banded(_Module):
    """Shared by the filterbank modules: input checks and the fused filterbank spectrogram."""

    _stft: StftParams

    def _check_length(self, x: torch.Tensor) -> None:
        signal_length("x", x.shape[-1], self._stft)

    def _filterbank(self, x: torch.Tensor, bank: torch.Tensor, power: float, output: str,
                    eps: float) -> torch.Tensor:  # fmt: skip
        """``bank @ |stft(x)| ** power`` (or its dB): one ``specux.bank_spectrogram`` op."""
        p = self._stft
        n_freq = p.n_fft // 2 + 1
        if bank.dim() != 2 or bank.shape[1] != n_freq:  # (a user's fb: module.fb = ...)
            raise ValueError(f"fb has shape {tuple(bank.shape)}: expected (n_bands, {n_freq}), "
                             f"a band per row over the n_fft={p.n_fft} stft's bins")  # fmt: skip
        window = _like(self.window, x, "window")
        return torch.ops.specux.bank_spectrogram(
            x, window, "array", p.n_fft, p.hop_length, window.shape[0], p.center, p.pad_mode,
            power, _like(bank, x, "fb"), "", output, eps,
        )  # fmt: skip


class MelSpectrogram(_Banded):
    """:func:`specux.melspectrogram` as a module; buffers ``window`` and ``fb`` (n_mels, n_freq)."""

    twin_class = twins.MelSpectrogram

    def __init__(self, *args: Any, device: Any = None, dtype: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, device=device, dtype=dtype, **kwargs)
        a = self.twin.params
        self._stft = p = self._setup_stft(a)
        bank = matrices.mel_spec(
            sr=a["sr"], n_fft=p.n_fft, n_mels=a["n_mels"], fmin=a["fmin"], fmax=a["fmax"],
            htk=a["htk"], norm=a["norm"],
        )  # fmt: skip
        self._register("fb", matrices.matrix(bank))
        self._power = float(a["power"])
        self._output = str(a["output"]).lower()
        self._eps = float(a["eps"])
        self._top_db = None if a["top_db"] is None else float(a["top_db"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., L) -> (..., n_mels, n_frames)``, as :func:`specux.melspectrogram`."""
        xc, dtype = self._prepare(x)
        out = self._filterbank(xc, self.fb, self._power, self._output, self._eps)
        if self._top_db is not None:
            out = _clip_top_db(out, self._top_db)
        return _restore(out, dtype)


class _Cepstrum(_Banded):
    """MFCC / LFCC: ``dct @ compress(band_power(x))``, each stage overridable by subclasses."""

    def _setup_cepstrum(self, a: dict, stft: dict, bank: matrices.MatrixSpec, n_out: int,
                        names: tuple[str, str]) -> None:  # fmt: skip
        n_bands = matrices.shape(bank)[0]
        dct = matrices.dct_spec(n_out=n_out, n_in=n_bands, dct_type=a["dct_type"], norm=a["norm"],
                                lifter=a["lifter"], out_name=names[0],
                                bands_name=names[1])  # fmt: skip
        self._register("fb", matrices.matrix(bank))
        self._register("dct", matrices.matrix(dct))
        self._power = float(stft["power"])
        self._top_db = None if a["top_db"] is None else float(a["top_db"])

    def band_power(self, x: torch.Tensor) -> torch.Tensor:
        """``fb @ |stft(x)| ** power``: ``(..., L) -> (..., n_bands, n_frames)``, compute dtype."""
        return self._filterbank(x, self.fb, self._power, "power", _LOG_AMIN)

    def compress(self, bands: torch.Tensor) -> torch.Tensor:
        """``10 log10(max(S, 1e-10))``, clipped at each signal's max minus ``top_db``."""
        logs = 10.0 * torch.log10(bands.clamp_min(_LOG_AMIN))
        return logs if self._top_db is None else _clip_top_db(logs, self._top_db)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., L) -> (..., n_coefficients, n_frames)``."""
        xc, dtype = self._prepare(x)
        stock = (type(self).band_power is _Cepstrum.band_power
                 and type(self).compress is _Cepstrum.compress)  # fmt: skip
        top_db = None
        if stock and self._power == 2.0:
            # The bank op's own dB (one kernel on the GPU) and the clip read by the DCT's
            # op, as the functions compute them.
            logs = self._filterbank(xc, self.fb, 2.0, "db", _LOG_AMIN)
            top_db = self._top_db
        else:
            logs = self.compress(self.band_power(xc))
        dct = _like(self.dct, logs, "dct")
        return _restore(torch.ops.specux.project(logs, dct, "", top_db), dtype)


class MFCC(_Cepstrum):
    """:func:`specux.mfcc` as a module; buffers ``window``, ``fb`` (n_mels, n_freq), ``dct``.

    ``forward(x) = project(compress(band_power(x)), dct)``: the mel power, its dB clipped per
    signal at ``top_db``, the first ``n_mfcc`` (liftered) DCT rows.
    """

    twin_class = twins.MFCC

    def __init__(self, *args: Any, device: Any = None, dtype: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, device=device, dtype=dtype, **kwargs)
        a = self.twin.params
        mel = {k: a.get(k, v) for k, v in _mel_defaults().items()}
        self._stft = p = self._setup_stft(mel)
        bank = matrices.mel_spec(
            sr=a["sr"], n_fft=p.n_fft, n_mels=mel["n_mels"], fmin=mel["fmin"], fmax=mel["fmax"],
            htk=mel["htk"], norm=mel["mel_norm"], norm_name="mel_norm",
        )  # fmt: skip
        self._setup_cepstrum(a, mel, bank, a["n_mfcc"], ("n_mfcc", "n_mels"))


class LFCC(_Cepstrum):
    """:func:`specux.lfcc` as a module; buffers ``window``, ``fb`` (n_filter, n_freq), ``dct``."""

    twin_class = twins.LFCC

    def __init__(self, *args: Any, device: Any = None, dtype: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, device=device, dtype=dtype, **kwargs)
        a = self.twin.params
        defaults = _mel_defaults()
        stft = {k: a.get(k, defaults[k]) for k in _STFT_KEYS + ("power",)}
        self._stft = p = self._setup_stft(stft)
        bank = matrices.linear_spec(sr=a["sr"], n_fft=p.n_fft, n_filter=a["n_filter"],
                                    fmin=a["fmin"], fmax=a["fmax"])  # fmt: skip
        self._setup_cepstrum(a, stft, bank, a["n_lfcc"], ("n_lfcc", "n_filter"))


class Chroma(_Banded):
    """:func:`specux.chroma` as a module; buffers ``window`` and ``fb`` (n_chroma, n_freq).

    The filterbank is fixed at construction, so ``tuning`` must be a number here; use
    :func:`specux.chroma` with ``tuning=None`` to estimate it from each input.
    """

    twin_class = twins.Chroma

    def __init__(self, *args: Any, device: Any = None, dtype: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, device=device, dtype=dtype, **kwargs)
        a = self.twin.params
        self._through_function = str(a["source"]).lower() != "stft"
        self._key = None
        if self._through_function:
            if a["tuning"] is not None:
                self._setup_constant_q(a)
            return
        if a["tuning"] is None:
            raise ValueError(
                "specux.nn.Chroma keeps its filterbank as a buffer, which needs a fixed tuning: "
                "pass tuning= in fractions of a chroma bin, or call specux.chroma(tuning=None) "
                "to estimate it from each input"
            )
        mel = _mel_defaults()
        bank_defaults = _defaults(matrices.chroma_spec)
        stft = {
            "n_fft": a["n_fft"], "hop_length": a["hop_length"],
            **{k: a.get(k, mel[k]) for k in ("win_length", "window", "center", "pad_mode")},
        }  # fmt: skip
        self._stft = p = self._setup_stft(stft)
        bank = matrices.chroma_spec(
            sr=a["sr"], n_fft=p.n_fft, n_chroma=a["n_chroma"], tuning=a["tuning"],
            **{k: a.get(k, bank_defaults[k]) for k in ("ctroct", "octwidth", "base_c")},
        )  # fmt: skip
        self._register("fb", matrices.matrix(bank))
        self._power = float(a.get("power", mel["power"]))
        self._norm = None if a["norm"] is None else float(a["norm"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., L) -> (..., n_chroma, n_frames)``, as :func:`specux.chroma`."""
        self._tensor(x)
        if self._through_function and self._key is None:
            return self.twin(x)
        xc, dtype = self._prepare(x)
        if self._through_function:
            magnitude = torch.ops.specux.cqt_kernel(
                xc, _taps_operand(self.kernel, xc), self._key, self._pad_mode, "magnitude",
                _LOG_AMIN,
            )  # fmt: skip
            out = torch.ops.specux.project(magnitude, _like(self.fb, xc, "fb"), "", None)
            if self._threshold > 0:
                out = TorchEngine.threshold(out, self._threshold)
        else:
            out = self._filterbank(xc, self.fb, self._power, "power", _LOG_AMIN)
        if self._norm is not None:
            out = _normalize(out, self._norm, -2)
        return _restore(out, dtype)

    def _setup_constant_q(self, a: dict[str, Any]) -> None:
        """Buffers ``kernel`` (the CQT's taps, as :class:`CQT`'s) and ``fb`` (n_chroma, n_bins),
        the fold of the CQT's bins into chroma, for ``source="cqt"`` with a fixed tuning."""
        named = ("sr", "n_chroma", "source", "tuning", "norm", "n_fft", "hop_length", "backend")
        parts = chroma_cqt_parts(sr=a["sr"], n_chroma=a["n_chroma"], hop_length=a["hop_length"],
                                 extra={k: v for k, v in a.items() if k not in named})
        with parts.nyquist_message():
            spec, self._pad_mode, _, _ = cqt_arguments(pad_mode=parts.pad_mode,
                                                       tuning=a["tuning"], **parts.constant_q)
        self._key = spec.as_key()
        self._register("kernel", functools.partial(correlation_kernel, spec))
        self._register("fb", matrices.matrix(parts.fold))
        self._threshold = parts.threshold
        self._norm = None if a["norm"] is None else float(a["norm"])

    def _check_length(self, x: torch.Tensor) -> None:
        if self._key is None:
            super()._check_length(x)
        else:
            _constant_q_length(x)


def _floating_dtype(values: Any) -> torch.dtype | None:
    """The torch dtype of a floating tensor or numpy array, else None."""
    if isinstance(values, torch.Tensor):
        return values.dtype if values.dtype.is_floating_point else None
    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        return torch.from_numpy(np.zeros(0, values.dtype)).dtype
    return None


class FFTConvolve(_Module):
    """:func:`specux.fftconvolve` as a module: ``FFTConvolve(mode="same")(x, y)``; with a real
    kernel bound, ``FFTConvolve(h, mode="same")(x)`` (or ``y=h``): buffer ``kernel``, in the
    input's dtype when called, as the other modules' filters. The buffer keeps a floating
    kernel's own dtype unless ``dtype=`` is given (a float64 kernel is the user's data, not a
    filter built here: rounding it to the default float32 would change float64 results)."""

    twin_class = twins.FFTConvolve

    def __init__(self, *args: Any, device: Any = None, dtype: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, device=device, dtype=dtype, **kwargs)
        kernel = self.twin.given.get("y")
        if kernel is not None:
            if kernel.dtype.is_complex if isinstance(kernel, torch.Tensor) else (
                    np.iscomplexobj(kernel)):  # fmt: skip
                raise TypeError("specux.nn.FFTConvolve binds real kernels (a float buffer); "
                                "pass a complex kernel to forward(x, y) instead")  # fmt: skip
            own = _floating_dtype(kernel)
            if dtype is None and own is not None:
                self._set_filter("kernel", kernel, own, self._factory["device"])
            else:
                self._register("kernel", kernel)

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        self._tensor(x)
        if y is not None:
            self._tensor(y, "y")
        # (a buffer, or a Parameter once made learnable: module.kernel = nn.Parameter(...))
        kernel = self._buffers.get("kernel", self._parameters.get("kernel"))
        if kernel is None:
            if y is None:
                raise TypeError("FFTConvolve.forward(x, y): the kernel y is missing (or bind "
                                "one at construction: FFTConvolve(h))")  # fmt: skip
            return self.twin(x, y)
        if y is not None:
            raise TypeError("this FFTConvolve holds its kernel (module.kernel): call it with "
                            "x alone")  # fmt: skip
        params = self.twin.given  # a copy: the bound kernel is the buffer, not the twin's y
        del params["y"]
        return specux.fftconvolve(x, _like(kernel, x, "kernel"), **params)


def _taps_operand(kernel: Any, x: torch.Tensor) -> torch.Tensor:
    """A constant-Q ``kernel`` buffer as the ``cqt_kernel`` op takes it: float32 / float64 as
    they are (the op rounds a wider one to the signal's dtype, and a float64 buffer that holds
    its taps runs the spec's kernels for float32 signals too: no conversion a call), half
    precision in the signal's dtype."""
    _on_device(kernel, x, "kernel")
    if kernel.dtype in (torch.float32, torch.float64):
        return kernel
    return _like(kernel, x, "kernel")


def _constant_q_length(x: torch.Tensor) -> None:
    if x.shape[-1] == 0:
        raise ValueError("x has an empty time axis: the CQT needs at least one sample")


class _ConstantQ(_Module):
    """CQT / VQT: buffer ``kernel``, the constant-Q taps as ``(n_bins, 2 R, 2)`` (Re, Im)
    pairs (``torch.view_as_complex(module.kernel)``; ``specux.kernels.cpu.cqt.
    correlation_kernel`` lays them out): bin ``k`` of frame ``t`` is
    ``sum_i xp[t * hop_length - R + i] * kernel[k, i]``, ``xp`` the signal padded by
    ``pad_mode``, so the taps are librosa's filters time-reversed and scaled as the function
    scales them (``R``: half the longest filter's span).

    While the buffer holds the taps it was built with (read once per tensor version), forward
    runs the function's kernels and equals it; a changed, loaded or learned kernel (``module.
    kernel = torch.nn.Parameter(module.kernel.clone())``) runs a dense correlation, every tap
    of every bin over frames of ``2 R`` samples (same values, slower; see docs/api.md for its
    memory), and the ops' backward reaches the kernel.
    ``tuning=None`` estimates the tuning from each input, as the function does: such a module
    holds no kernel and calls the function.
    """

    _spec_keys = ("sr", "hop_length", "fmin", "n_bins", "bins_per_octave", "tuning",
                  "filter_scale", "norm", "window", "scale")  # fmt: skip

    def __init__(self, *args: Any, device: Any = None, dtype: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, device=device, dtype=dtype, **kwargs)
        a = self.twin.params
        self._key = None
        if a["tuning"] is None:
            return
        spec, self._pad_mode, self._output, self._eps = cqt_arguments(
            pad_mode=a["pad_mode"], output=a["output"], eps=a["eps"],
            gamma=a.get("gamma", 0.0), **{k: a[k] for k in self._spec_keys},
        )  # fmt: skip
        self._key = spec.as_key()
        self._register("kernel", functools.partial(correlation_kernel, spec))

    def _check_length(self, x: torch.Tensor) -> None:
        _constant_q_length(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., L) -> (..., n_bins, 1 + L // hop_length)``, as the function."""
        self._tensor(x)
        if self._key is None:
            return self.twin(x)
        xc, dtype = self._prepare(x)
        out = torch.ops.specux.cqt_kernel(xc, _taps_operand(self.kernel, xc), self._key,
                                          self._pad_mode, self._output, self._eps)  # fmt: skip
        wanted = dtypes.result_dtype(dtype_name(dtype), dtype_name(out.dtype), "torch")
        return _restore(out, getattr(torch, wanted))


class CQT(_ConstantQ):
    """:func:`specux.cqt` as a module; buffer ``kernel`` (n_bins, 2 R, 2) (see below)."""

    __doc__ = (__doc__ or "") + "\n\n" + (_ConstantQ.__doc__ or "")
    twin_class = twins.CQT


class VQT(_ConstantQ):
    """:func:`specux.vqt` as a module; buffer ``kernel`` (n_bins, 2 R, 2) (see below)."""

    __doc__ = (__doc__ or "") + "\n\n" + (_ConstantQ.__doc__ or "")
    twin_class = twins.VQT
