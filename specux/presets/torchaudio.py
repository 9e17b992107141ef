"""torchaudio.transforms' names and defaults, computed by specux.

``from specux.presets import torchaudio as T`` then ``T.MelSpectrogram(sample_rate=16000)``:
modules with torchaudio's constructor parameters and defaults (``n_fft=400``, ``hop_length =
win_length // 2``, ``pad_mode="reflect"``, HTK mel without normalization, ...) whose outputs
follow torchaudio's formulas, including its quirks:

- frequencies of the mel and linear banks are ``linspace(0, sample_rate // 2, n_fft // 2 + 1)``
  (equal to the DFT bin frequencies only for even ``sample_rate`` and even ``n_fft``) and
  ``f_max`` defaults to ``float(sample_rate // 2)``;
- ``normalized=True`` / ``"window"`` divides the spectrum by the window's L2 norm
  ``sqrt(sum(window ** 2))``; ``"frame_length"`` by ``sqrt(n_fft)``;
- ``pad > 0`` zero-pads the signal on both sides before the STFT;
- ``MFCC`` / ``LFCC`` take ``10 log10(max(S, 1e-10))`` clipped 80 dB below a maximum taken
  over the last three axes of the ``(..., channel, band, frame)`` spectrogram, i.e. across the
  channels of each batch item (one floor for a ``(channel, time)`` input), as torchaudio's
  ``amplitude_to_DB`` does; ``log_mels`` / ``log_lf`` use ``log(S + 1e-6)`` instead.

They are :mod:`specux.nn` modules underneath (fused filterbank ops, autograd, ``torch.compile``),
which differ from torchaudio in these ways:

- buffers are built in float64 and stored in ``dtype`` (keyword, default float32), so
  ``dtype=torch.float64`` gives float64 filters (torchaudio computes its banks in float32);
- buffer names and layouts are specux's: ``window``, ``fb`` as ``(n_bands, n_freq)``, ``dct`` as
  ``(n_coefficients, n_bands)`` (torchaudio: ``mel_scale.fb`` ``(n_freq, n_mels)``, ``dct_mat``
  ``(n_mels, n_mfcc)``), so state dicts do not load across;
- parameters are checked as specux checks them (``0 <= f_min < f_max <= sample_rate / 2``,
  ``n_mfcc <= n_mels``, ``n_lfcc <= n_filter``, ...), at construction, and the messages
  name specux's parameters (``fmax``, ``sr``); ``MelScale`` alone takes an ``f_max`` above
  ``sample_rate / 2``, as torchaudio does (its bands past Nyquist stay empty);
- they are not TorchScript-able (``torch.jit.script``; ``torch.compile`` and
  ``torch.export`` work), ``Spectrogram`` has no ``return_complex`` (the complex spectrum
  is what ``power=None`` returns), and the composite modules have no submodules
  (``MFCC.MelSpectrogram``, ``MelSpectrogram.mel_scale``, ``LFCC.filter_mat`` ...);
- of torchaudio.functional, ``melscale_fbanks``, ``linear_fbanks``, ``create_dct``,
  ``amplitude_to_DB`` and ``fftconvolve`` are here.

``transforms`` and ``functional`` hold the same names as torchaudio's namespaces, so
``import specux.presets.torchaudio as torchaudio`` serves ``torchaudio.transforms.MFCC(...)``
and ``torchaudio.functional.melscale_fbanks(...)`` (``from specux.presets.torchaudio.transforms
import MFCC`` works too).
"""

from __future__ import annotations

import contextlib
import inspect
import numbers
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

try:
    import torch
except ImportError as error:
    raise ModuleNotFoundError(
        "specux.presets.torchaudio builds torch.nn.Module versions of torchaudio's transforms "
        "and needs torch, which could not be imported (specux.presets.librosa works without it)",
        name="torch",
    ) from error

import specux
import specux.nn
from specux.meta.filters import triangles
from specux.presets import namespace

__all__ = [
    "AmplitudeToDB",
    "InverseSpectrogram",
    "LFCC",
    "MFCC",
    "MelScale",
    "MelSpectrogram",
    "Spectrogram",
    "amplitude_to_DB",
    "create_dct",
    "fftconvolve",
    "functional",
    "linear_fbanks",
    "melscale_fbanks",
    "transforms",
]

_LOG_OFFSET = 1e-6  # torchaudio's log_mels / log_lf: log(S + 1e-6)
_DB_AMIN = 1e-10  # torchaudio's AmplitudeToDB amin
_CEPSTRUM_TOP_DB = 80.0  # torchaudio's MFCC / LFCC top_db


# ---------------------------------------------------------------------------------------------
# functional pieces


def melscale_fbanks(
    n_freqs: int,
    f_min: float,
    f_max: float,
    n_mels: int,
    sample_rate: float,
    norm: str | None = None,
    mel_scale: str = "htk",
    *,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """torchaudio's mel filterbank, ``(n_freqs, n_mels)``, built in float64.

    Triangles whose corners are ``n_mels + 2`` points equally spaced in mel (HTK or Slaney scale)
    from ``f_min`` to ``f_max``, sampled at ``linspace(0, sample_rate // 2, n_freqs)``;
    ``norm="slaney"`` divides each by half its width in Hz. Stored in ``dtype`` (default
    ``torch.get_default_dtype()``).
    """
    htk = _mel_scale_is_htk(mel_scale)
    _mel_norm(norm)
    mels = np.linspace(specux.hz_to_mel(f_min, htk=htk), specux.hz_to_mel(f_max, htk=htk),
                       n_mels + 2)  # fmt: skip
    corners = specux.mel_to_hz(mels, htk=htk)
    bank = _triangles(corners, n_freqs, sample_rate)
    lower, upper = corners[:-2, None], corners[2:, None]
    if norm == "slaney":
        bank *= 2.0 / (upper - lower)
    if (bank.max(axis=1) == 0.0).any():
        warnings.warn(
            f"at least one mel filter is all zero: n_mels={n_mels} may be too high for "
            f"n_freqs={n_freqs}",
            stacklevel=2,
        )
    return torch.from_numpy(bank.T.copy()).to(_default_dtype(dtype))


def _triangles(corners: np.ndarray, n_freqs: int, sample_rate: float) -> np.ndarray:
    """:func:`specux.meta.filters.triangles` with corners ``corners`` sampled at torchaudio's
    grid ``linspace(0, sample_rate // 2, n_freqs)``."""
    return triangles(np.linspace(0.0, sample_rate // 2, n_freqs), corners)


def _default_dtype(dtype: torch.dtype | None) -> torch.dtype:
    return torch.get_default_dtype() if dtype is None else dtype


def linear_fbanks(n_freqs: int, f_min: float, f_max: float, n_filter: int, sample_rate: int,
                  *, dtype: torch.dtype | None = None) -> torch.Tensor:  # fmt: skip
    """torchaudio's linear filterbank, ``(n_freqs, n_filter)``, built in float64: triangles
    whose corners are ``n_filter + 2`` points equally spaced in Hz from ``f_min`` to
    ``f_max``, sampled at ``linspace(0, sample_rate // 2, n_freqs)``. Stored in ``dtype``
    (default ``torch.get_default_dtype()``)."""
    corners = np.linspace(f_min, f_max, n_filter + 2)
    bank = _triangles(corners, n_freqs, sample_rate)
    return torch.from_numpy(bank.T.copy()).to(_default_dtype(dtype))


def create_dct(n_mfcc: int, n_mels: int, norm: str | None, *,
               dtype: torch.dtype | None = None) -> torch.Tensor:  # fmt: skip
    """torchaudio's DCT-II matrix, ``(n_mels, n_mfcc)`` (``x @ create_dct(...)`` transforms
    the last axis): ``specux.filters.dct(n_mfcc, n_mels, norm=norm).T``, ``norm`` "ortho"
    or None (unnormalized: twice the cosine sums, as scipy's DCT-II)."""
    if norm is not None and norm != "ortho":
        raise ValueError(f"norm={norm!r} is not supported: use 'ortho' or None")
    matrix = specux.filters.dct(n_mfcc, n_mels, norm=norm)
    return torch.from_numpy(matrix.T.copy()).to(_default_dtype(dtype))


def fftconvolve(x: torch.Tensor, y: torch.Tensor, mode: str = "full") -> torch.Tensor:
    """``torchaudio.functional.fftconvolve``: ``x (..., N)`` and ``y (..., M)`` convolved
    along the last axis, the leading axes broadcast (:func:`specux.fftconvolve`, ``dim=-1``);
    ``mode`` "full" (N + M - 1 samples), "valid" (max(N, M) - min(N, M) + 1) or "same" (N)."""
    return specux.fftconvolve(x, y, mode=mode, dim=-1)


def _mel_norm(norm: Any) -> None:
    """torchaudio's mel ``norm``: None or "slaney" (checked before specux's wider rule)."""
    if norm is not None and norm != "slaney":
        raise ValueError(f"norm={norm!r} is not supported: use None or 'slaney'")


def amplitude_to_DB(  # noqa: N802 - torchaudio's name
    x: torch.Tensor, multiplier: float, amin: float, db_multiplier: float,
    top_db: float | None = None,
) -> torch.Tensor:  # fmt: skip
    """torchaudio's ``amplitude_to_DB``: ``multiplier * (log10(max(x, amin)) - db_multiplier)``.

    With ``top_db``, values are raised to ``max - top_db``, the max taken over the last three
    axes (``(..., channel, freq, time)``: across the channels of each batch item) when ``x``
    has three or more, else over the whole 2-D ``(freq, time)`` input.
    """
    x_db = multiplier * torch.log10(torch.clamp_min(x, amin)) - multiplier * db_multiplier
    if top_db is None or x_db.numel() == 0:
        return x_db
    dims = (-3, -2, -1) if x_db.dim() > 2 else tuple(range(-x_db.dim(), 0))
    return torch.maximum(x_db, x_db.amax(dim=dims, keepdim=True) - top_db)


# ---------------------------------------------------------------------------------------------
# shared set-up


def _mel_scale_is_htk(mel_scale: Any) -> bool:
    if mel_scale not in ("htk", "slaney"):
        raise ValueError(f"mel_scale={mel_scale!r} is not supported: use 'htk' or 'slaney'")
    return mel_scale == "htk"


def _spec_norms(normalized: Any) -> tuple[bool, bool]:
    """(divide by the window's L2 norm, divide by sqrt(n_fft)) for torchaudio's ``normalized``."""
    if isinstance(normalized, str):
        if normalized not in ("window", "frame_length"):
            raise ValueError(
                f"normalized={normalized!r} is not supported: use True, False, 'window' or "
                "'frame_length'"
            )
        return normalized == "window", normalized == "frame_length"
    if isinstance(normalized, (bool, np.bool_)):
        return bool(normalized), False
    raise TypeError(f"normalized must be a bool or a str, got {type(normalized).__name__}")


def _window(window_fn: Callable, win_length: Any, wkwargs: dict | None) -> torch.Tensor:
    """``window_fn(win_length, **wkwargs)`` in float64 (asked for directly when it can be)."""
    kwargs = dict(wkwargs or {})
    try:
        window = window_fn(win_length, **kwargs, dtype=torch.float64)
    except TypeError:  # a window_fn without dtype=: build it as it comes
        window = window_fn(win_length, **kwargs)
    return torch.as_tensor(window).detach().to("cpu", torch.float64)


@dataclass(frozen=True)
class _Stft:
    """torchaudio's Spectrogram arguments, resolved: what specux.nn needs plus the extras."""

    win_length: Any
    hop_length: Any
    window: torch.Tensor
    pad: int
    window_norm: bool
    frame_norm: bool


def _stft(n_fft, win_length, hop_length, pad, window_fn, normalized, wkwargs) -> _Stft:
    win_length = n_fft if win_length is None else win_length
    if hop_length is None and isinstance(win_length, numbers.Integral):
        hop_length = win_length // 2
    if isinstance(pad, bool) or not isinstance(pad, numbers.Integral) or pad < 0:
        raise ValueError(f"pad={pad!r} is out of range: must be an integer >= 0")
    window_norm, frame_norm = _spec_norms(normalized)
    window = _window(window_fn, win_length, wkwargs)
    return _Stft(win_length, hop_length, window, int(pad), window_norm, frame_norm)


def _power(power: Any) -> float:
    if isinstance(power, bool) or not isinstance(power, numbers.Real) or not power > 0:
        raise ValueError(f"power={power!r} is out of range: must be > 0")
    return float(power)


def _pad(x: torch.Tensor, pad: int) -> torch.Tensor:
    return x if pad == 0 else torch.nn.functional.pad(x, (pad, pad))


def _gain(values: torch.Tensor, window: torch.Tensor, setup: _Stft, n_fft: int, power: float):
    """Scale band powers ``|X| ** power`` as torchaudio's normalized spectrum would."""
    if setup.window_norm:
        values = values * window.square().sum() ** (-0.5 * power)
    if setup.frame_norm:
        values = values * float(n_fft) ** (-0.5 * power)
    return values


def _with_defaults(function: Callable, what: str, **kwargs: Any) -> dict[str, Any]:
    """``kwargs`` (``what``: ``melkwargs`` / ``speckwargs``) bound to ``function``'s signature
    (``self`` aside), its defaults filled in. ``device`` / ``dtype`` are the preset's own
    keywords, not torchaudio's: there they would be ignored, so they raise as torchaudio does."""
    own = sorted({"device", "dtype"} & set(kwargs))
    if own:
        raise TypeError(f"{what} got an unexpected keyword argument {own[0]!r} (torchaudio's "
                        f"modules take none; pass {own[0]}= to the module itself)")  # fmt: skip
    bound = inspect.signature(function).bind(None, **kwargs)
    bound.apply_defaults()
    return {k: v for k, v in bound.arguments.items() if k not in ("self", "device", "dtype")}


def _f_max(f_max: Any, sample_rate: Any) -> Any:
    return float(sample_rate // 2) if f_max is None else f_max


@contextlib.contextmanager
def _librosa_grid_warning_off():
    # specux.nn builds librosa's mel bank before it is replaced by torchaudio's, which warns
    # about its own empty filters: the first bank's warning would only mislead.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Empty filters in the mel basis")
        yield


def _replace_bank(module: specux.nn.MelSpectrogram | specux.nn.MFCC, bank: torch.Tensor) -> None:
    # torchaudio's (n_freq, n_bands) float64 bank as specux's (n_bands, n_freq) `fb` buffer.
    module.set_filter("fb", bank.T)


# ---------------------------------------------------------------------------------------------
# modules


class Spectrogram(specux.nn.STFT):
    """``torchaudio.transforms.Spectrogram``: ``(..., time) -> (..., n_fft // 2 + 1, n_frames)``.

    ``power=None`` gives the complex spectrum, ``1`` the magnitude, ``2`` the power (any
    ``p > 0``: ``|X| ** p``). Buffer ``window`` (``window_fn(win_length, **wkwargs)``).
    """

    def __init__(
        self,
        n_fft: int = 400,
        win_length: int | None = None,
        hop_length: int | None = None,
        pad: int = 0,
        window_fn: Callable[..., torch.Tensor] = torch.hann_window,
        power: float | None = 2.0,
        normalized: bool | str = False,
        wkwargs: dict | None = None,
        center: bool = True,
        pad_mode: str = "reflect",
        onesided: bool = True,
        *,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        setup = _stft(n_fft, win_length, hop_length, pad, window_fn, normalized, wkwargs)
        if power is None:
            output = "complex"
        else:
            power = _power(power)
            output = {1.0: "magnitude", 2.0: "power"}.get(power, "magnitude")
        super().__init__(
            n_fft=n_fft, hop_length=setup.hop_length, win_length=setup.win_length,
            window=setup.window, center=center, pad_mode=pad_mode, normalized=setup.frame_norm,
            onesided=onesided, output=output, device=device, dtype=dtype,
        )  # fmt: skip
        self._setup = setup
        self.n_fft, self.win_length, self.hop_length = n_fft, setup.win_length, setup.hop_length
        self.pad, self.power, self.normalized = setup.pad, power, normalized
        self.center, self.pad_mode, self.onesided = center, pad_mode, onesided

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        spec = super().forward(_pad(waveform, self.pad))
        if self.power is not None and self.power not in (1.0, 2.0):
            spec = spec**self.power
        if self._setup.window_norm:
            spec = spec * self.window.square().sum() ** (-0.5 * (self.power or 1.0))
        return spec

    def extra_repr(self) -> str:
        return f"n_fft={self.n_fft}, hop_length={self.hop_length}, power={self.power}"


class InverseSpectrogram(specux.nn.ISTFT):
    """``torchaudio.transforms.InverseSpectrogram``: complex ``(..., freq, time) -> (..., time)``.

    ``forward(spectrogram, length=None)``; with ``pad > 0`` and ``length`` given, ``pad`` samples
    are removed from both ends (as torchaudio). Buffer ``window``.
    """

    def __init__(
        self,
        n_fft: int = 400,
        win_length: int | None = None,
        hop_length: int | None = None,
        pad: int = 0,
        window_fn: Callable[..., torch.Tensor] = torch.hann_window,
        normalized: bool | str = False,
        wkwargs: dict | None = None,
        center: bool = True,
        pad_mode: str = "reflect",
        onesided: bool = True,
        *,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        setup = _stft(n_fft, win_length, hop_length, pad, window_fn, normalized, wkwargs)
        super().__init__(
            n_fft=n_fft, hop_length=setup.hop_length, win_length=setup.win_length,
            window=setup.window, center=center, normalized=setup.frame_norm, onesided=onesided,
            device=device, dtype=dtype,
        )  # fmt: skip
        self._setup = setup
        self.n_fft, self.win_length, self.hop_length = n_fft, setup.win_length, setup.hop_length
        self.pad, self.normalized, self.center = setup.pad, normalized, center
        self.pad_mode, self.onesided = pad_mode, onesided  # pad_mode: unused, as in torchaudio

    def forward(self, spectrogram: torch.Tensor, length: int | None = None) -> torch.Tensor:
        if self._setup.window_norm:
            spectrogram = spectrogram * self.window.square().sum().sqrt()
        target = None if length is None else length + 2 * self.pad
        waveform = super().forward(spectrogram, target)
        if length is not None and self.pad > 0:
            waveform = waveform[..., self.pad : -self.pad]
        return waveform

    def extra_repr(self) -> str:
        return f"n_fft={self.n_fft}, hop_length={self.hop_length}"


class MelScale(torch.nn.Module):
    """``torchaudio.transforms.MelScale``: ``(..., n_stft, time) -> (..., n_mels, time)``.

    Buffer ``fb``, ``(n_stft, n_mels)`` as torchaudio lays it out (so a torchaudio
    ``MelScale``'s ``state_dict`` loads, square banks included), built by
    :func:`melscale_fbanks` in float64 and stored in ``dtype``.
    """

    def __init__(
        self,
        n_mels: int = 128,
        sample_rate: int = 16000,
        f_min: float = 0.0,
        f_max: float | None = None,
        n_stft: int = 201,
        norm: str | None = None,
        mel_scale: str = "htk",
        *,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        f_max = _f_max(f_max, sample_rate)
        if f_min > f_max:
            raise ValueError(f"f_min={f_min} is out of range: must be <= f_max={f_max}")
        bank = melscale_fbanks(n_stft, f_min, f_max, n_mels, sample_rate, norm, mel_scale,
                               dtype=torch.float64)  # fmt: skip
        dtype = torch.get_default_dtype() if dtype is None else dtype
        self.register_buffer("fb", bank.to(device=device, dtype=dtype))
        self.n_mels, self.sample_rate, self.f_min, self.f_max = n_mels, sample_rate, f_min, f_max
        self.norm, self.mel_scale = norm, mel_scale

    def forward(self, specgram: torch.Tensor) -> torch.Tensor:
        fb = self.fb if self.fb.dtype == specgram.dtype else self.fb.to(specgram.dtype)
        return torch.matmul(fb.mT, specgram)


class MelSpectrogram(specux.nn.MelSpectrogram):
    """``torchaudio.transforms.MelSpectrogram``: ``(..., time) -> (..., n_mels, n_frames)``.

    Buffers ``window`` and ``fb`` (``(n_mels, n_fft // 2 + 1)``, torchaudio's frequency grid).
    """

    def __init__(
        self,
        sample_rate: int = 16000,
        n_fft: int = 400,
        win_length: int | None = None,
        hop_length: int | None = None,
        f_min: float = 0.0,
        f_max: float | None = None,
        pad: int = 0,
        n_mels: int = 128,
        window_fn: Callable[..., torch.Tensor] = torch.hann_window,
        power: float = 2.0,
        normalized: bool | str = False,
        wkwargs: dict | None = None,
        center: bool = True,
        pad_mode: str = "reflect",
        onesided: bool | None = None,
        norm: str | None = None,
        mel_scale: str = "htk",
        *,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        if onesided is not None:
            warnings.warn("onesided has no influence on MelSpectrogram", stacklevel=2)
        setup = _stft(n_fft, win_length, hop_length, pad, window_fn, normalized, wkwargs)
        power = _power(power)
        f_max = _f_max(f_max, sample_rate)
        htk = _mel_scale_is_htk(mel_scale)
        _mel_norm(norm)
        with _librosa_grid_warning_off():
            super().__init__(
                sr=sample_rate, n_fft=n_fft, hop_length=setup.hop_length,
                win_length=setup.win_length, window=setup.window, center=center,
                pad_mode=pad_mode, power=power, n_mels=n_mels, fmin=f_min, fmax=f_max, htk=htk,
                norm=norm, device=device, dtype=dtype,
            )  # fmt: skip
        _replace_bank(self, melscale_fbanks(n_fft // 2 + 1, f_min, f_max, n_mels, sample_rate,
                                            norm, mel_scale, dtype=torch.float64))  # fmt: skip
        self._setup = setup
        self.sample_rate, self.n_fft, self.n_mels = sample_rate, n_fft, n_mels
        self.win_length, self.hop_length, self.pad = setup.win_length, setup.hop_length, setup.pad
        self.power, self.normalized, self.f_min, self.f_max = power, normalized, f_min, f_max

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        mel = super().forward(_pad(waveform, self.pad))
        return _gain(mel, self.window, self._setup, self.n_fft, self.power)

    def extra_repr(self) -> str:
        return f"sample_rate={self.sample_rate}, n_fft={self.n_fft}, n_mels={self.n_mels}"


class _TorchaudioCepstrum:
    """MFCC / LFCC stages as torchaudio computes them (mixed into specux.nn's cepstra)."""

    _setup: _Stft
    _log: bool

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        return super().forward(_pad(waveform, self._setup.pad))

    def band_power(self, x: torch.Tensor) -> torch.Tensor:
        bands = super().band_power(x)
        return _gain(bands, self.window, self._setup, self._stft.n_fft, self._power)

    def compress(self, bands: torch.Tensor) -> torch.Tensor:
        if self._log:
            return torch.log(bands + _LOG_OFFSET)
        return amplitude_to_DB(bands, 10.0, _DB_AMIN, 0.0, _CEPSTRUM_TOP_DB)


class MFCC(_TorchaudioCepstrum, specux.nn.MFCC):
    """``torchaudio.transforms.MFCC``: ``(..., time) -> (..., n_mfcc, n_frames)``.

    ``melkwargs`` are :class:`MelSpectrogram`'s (torchaudio's defaults). The mel power goes to
    dB with a floor 80 dB below the max across channels (see the module notes), or to
    ``log(S + 1e-6)`` with ``log_mels=True``; then the DCT-II (``norm`` "ortho" or None).
    Buffers ``window``, ``fb`` (n_mels, n_freq) and ``dct`` (n_mfcc, n_mels).
    """

    def __init__(
        self,
        sample_rate: int = 16000,
        n_mfcc: int = 40,
        dct_type: int = 2,
        norm: str | None = "ortho",
        log_mels: bool = False,
        melkwargs: dict | None = None,
        *,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        if dct_type != 2:
            raise ValueError(f"dct_type={dct_type!r} is not supported: torchaudio's MFCC uses 2")
        if norm not in (None, "ortho"):
            raise ValueError(f"norm={norm!r} is not supported: use 'ortho' or None")
        mel = _with_defaults(MelSpectrogram.__init__, "melkwargs", sample_rate=sample_rate,
                             **(melkwargs or {}))  # fmt: skip
        setup = _stft(mel["n_fft"], mel["win_length"], mel["hop_length"], mel["pad"],
                      mel["window_fn"], mel["normalized"], mel["wkwargs"])  # fmt: skip
        f_max = _f_max(mel["f_max"], sample_rate)
        _mel_norm(mel["norm"])
        with _librosa_grid_warning_off():
            super().__init__(
                sr=sample_rate, n_mfcc=n_mfcc, dct_type=2, norm=norm, lifter=0.0,
                top_db=_CEPSTRUM_TOP_DB, n_fft=mel["n_fft"], hop_length=setup.hop_length,
                win_length=setup.win_length, window=setup.window, center=mel["center"],
                pad_mode=mel["pad_mode"], power=_power(mel["power"]), n_mels=mel["n_mels"],
                fmin=mel["f_min"], fmax=f_max, htk=_mel_scale_is_htk(mel["mel_scale"]),
                mel_norm=mel["norm"], device=device, dtype=dtype,
            )  # fmt: skip
        _replace_bank(self, melscale_fbanks(mel["n_fft"] // 2 + 1, mel["f_min"], f_max,
                                            mel["n_mels"], sample_rate, mel["norm"],
                                            mel["mel_scale"], dtype=torch.float64))  # fmt: skip
        self._setup, self._log = setup, bool(log_mels)
        self.sample_rate, self.n_mfcc, self.dct_type, self.norm = sample_rate, n_mfcc, 2, norm
        self.top_db, self.log_mels = _CEPSTRUM_TOP_DB, bool(log_mels)

    def extra_repr(self) -> str:
        return f"sample_rate={self.sample_rate}, n_mfcc={self.n_mfcc}, log_mels={self.log_mels}"


class LFCC(_TorchaudioCepstrum, specux.nn.LFCC):
    """``torchaudio.transforms.LFCC``: ``(..., time) -> (..., n_lfcc, n_frames)``.

    ``speckwargs`` are :class:`Spectrogram`'s (torchaudio's defaults). The linear bank is
    torchaudio's ``linear_fbanks``; dB and DCT as :class:`MFCC` (``log_lf`` for the log).
    Buffers ``window``, ``fb`` (n_filter, n_freq) and ``dct`` (n_lfcc, n_filter).
    """

    def __init__(
        self,
        sample_rate: int = 16000,
        n_filter: int = 128,
        f_min: float = 0.0,
        f_max: float | None = None,
        n_lfcc: int = 40,
        dct_type: int = 2,
        norm: str | None = "ortho",
        log_lf: bool = False,
        speckwargs: dict | None = None,
        *,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        if dct_type != 2:
            raise ValueError(f"dct_type={dct_type!r} is not supported: torchaudio's LFCC uses 2")
        if norm not in (None, "ortho"):
            raise ValueError(f"norm={norm!r} is not supported: use 'ortho' or None")
        spec = _with_defaults(Spectrogram.__init__, "speckwargs", **(speckwargs or {}))
        if spec["power"] is None or spec["onesided"] is not True:
            raise ValueError("LFCC needs a one-sided real spectrogram: power > 0, onesided=True")
        setup = _stft(spec["n_fft"], spec["win_length"], spec["hop_length"], spec["pad"],
                      spec["window_fn"], spec["normalized"], spec["wkwargs"])  # fmt: skip
        f_max = _f_max(f_max, sample_rate)
        super().__init__(
            sr=sample_rate, n_lfcc=n_lfcc, n_filter=n_filter, fmin=f_min, fmax=f_max,
            dct_type=2, norm=norm, lifter=0.0, top_db=_CEPSTRUM_TOP_DB, n_fft=spec["n_fft"],
            hop_length=setup.hop_length, win_length=setup.win_length, window=setup.window,
            center=spec["center"], pad_mode=spec["pad_mode"], power=_power(spec["power"]),
            device=device, dtype=dtype,
        )  # fmt: skip
        self._setup, self._log = setup, bool(log_lf)
        self.sample_rate, self.n_filter, self.n_lfcc = sample_rate, n_filter, n_lfcc
        self.f_min, self.f_max, self.dct_type, self.norm = f_min, f_max, 2, norm
        self.top_db, self.log_lf = _CEPSTRUM_TOP_DB, bool(log_lf)

    def extra_repr(self) -> str:
        return f"sample_rate={self.sample_rate}, n_lfcc={self.n_lfcc}, log_lf={self.log_lf}"


class AmplitudeToDB(torch.nn.Module):
    """``torchaudio.transforms.AmplitudeToDB``: power (``stype="power"``, 10 log10) or amplitude
    (20 log10) to dB with ``amin=1e-10``, ``ref=1``; ``top_db`` as :func:`amplitude_to_DB`."""

    def __init__(self, stype: str = "power", top_db: float | None = None) -> None:
        super().__init__()
        if top_db is not None and top_db < 0:
            raise ValueError(f"top_db={top_db} is out of range: must be >= 0 (or None)")
        self.stype, self.top_db = stype, top_db
        self.multiplier = 10.0 if stype == "power" else 20.0
        self.amin, self.ref_value = _DB_AMIN, 1.0
        self.db_multiplier = float(np.log10(max(self.amin, self.ref_value)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return amplitude_to_DB(x, self.multiplier, self.amin, self.db_multiplier, self.top_db)


# torchaudio's two namespaces, so that ``import specux.presets.torchaudio as torchaudio`` serves
# code written as ``torchaudio.transforms.MelSpectrogram(...)`` and
# ``torchaudio.functional.melscale_fbanks(...)`` (also importable by those dotted names)
transforms = namespace(__name__, "transforms", [
    AmplitudeToDB, InverseSpectrogram, LFCC, MFCC, MelScale, MelSpectrogram, Spectrogram,
], "torchaudio.transforms' modules, as specux.presets.torchaudio has them.")  # fmt: skip
functional = namespace(__name__, "functional", [
    amplitude_to_DB, create_dct, fftconvolve, linear_fbanks, melscale_fbanks,
], "torchaudio.functional's functions that specux.presets.torchaudio has.")  # fmt: skip
