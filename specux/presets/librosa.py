"""librosa's names and defaults, computed by specux: ``from specux.presets import librosa as sl``.

The functions sit where librosa has them: ``sl.stft``, ``sl.feature.melspectrogram`` (also
``sl.melspectrogram``), ``sl.filters.mel`` (float32 by default, as librosa's), so
``import specux.presets.librosa as librosa`` serves code written for librosa, and ``from
specux.presets.librosa.feature import mfcc`` works too.

Each function takes librosa's parameters with librosa's defaults (``sr=22050``,
``hop_length=512`` for the features, ...) and gives librosa's numbers: in float64 they agree to
round-off with librosa called with float64 filters. librosa builds its mel and chroma filters in
float32 unless given ``dtype=np.float64``; specux builds them in float64, so on float64 input the
two differ by about 1e-7 relative when librosa keeps its float32 default.

The signal may be a numpy, torch or cupy array, time last, with any leading axes; results come
back in its library (differentiable for torch, except where a step is noted as host-side). A
float16 numpy or cupy signal is computed and returned in float32, as librosa does (specux's own
functions keep float16 storage); torch tensors follow specux's precision rules.

Not taken from librosa: precomputed inputs (``S=``, ``C=``), callable windows, and the
``dtype=`` / ``out=`` arguments; :func:`cqt` / :func:`vqt`'s ``sparsity`` and ``res_type``
(specux computes the full-rate transform) and :func:`vqt`'s ``intervals``. Refused with a
``ValueError`` that names the parameter, where librosa accepts them: pad modes other than
constant, reflect, edge and wrap (``"symmetric"``, ``"linear_ramp"`` ...), windows other than
hann, hamming, blackman, bartlett, boxcar and the kaiser / gaussian tuples (``"triang"``,
``("tukey", 0.5)`` ...), chroma's ``octwidth=0``, :func:`chroma_cqt`'s ``window`` and
``cqt_mode="hybrid"``, and
``n_mfcc`` above ``n_mels``; and the values specux's own checks refuse: ``fmax`` above
``sr / 2`` (librosa leaves the bands past Nyquist empty), ``fmin`` negative or above
``fmax``, ``n_mels``, ``n_mfcc`` or ``power`` of 0, a float window (scipy's kaiser beta), a
real ``stft_matrix`` (a TypeError) or one whose bins do not match ``n_fft`` in :func:`istft`, and
:func:`cqt`'s ``norm=0``. Those messages name specux's parameters (``x`` for ``y``), except
the TypeError for a ``y`` that is not an array. :func:`istft` leaves the samples where the
window-sum-square envelope vanishes unnormalized, as librosa does (``specux.istft``'s
``nola="keep"``; ``specux.istft`` itself raises there).
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

import numpy as np

import specux
from specux.compat.arrays import library_of
from specux.features import dct_of_db
from specux.meta import matrices
from specux.presets import namespace

__all__ = [
    "amplitude_to_db",
    "chroma_cqt",
    "chroma_stft",
    "feature",
    "filters",
    "istft",
    "melspectrogram",
    "mfcc",
    "power_to_db",
    "stft",
]


def stft(
    y: Any,
    *,
    n_fft: int = 2048,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Any = "hann",
    center: bool = True,
    pad_mode: str = "constant",
    backend: str = "auto",
) -> Any:
    """``librosa.stft``: complex ``(..., 1 + n_fft // 2, n_frames)``.

    ``hop_length`` defaults to ``win_length // 4``, ``win_length`` to ``n_fft``; frames are
    centred (zero padding, ``pad_mode="constant"``) by default.
    """
    y = _signal(y)
    return specux.stft(
        y, n_fft=n_fft, hop_length=hop_length, win_length=win_length, window=window,
        center=center, pad_mode=pad_mode, backend=backend,
    )  # fmt: skip


def istft(
    stft_matrix: Any,
    *,
    hop_length: int | None = None,
    win_length: int | None = None,
    n_fft: int | None = None,
    window: Any = "hann",
    center: bool = True,
    length: int | None = None,
    backend: str = "auto",
) -> Any:
    """``librosa.istft``: real ``(..., length)`` from ``(..., 1 + n_fft // 2, n_frames)``.

    ``n_fft`` defaults to ``2 (n_freq - 1)``. Where the window-sum-square envelope vanishes
    (at most the dtype's smallest normal number: the first sample with ``center=False`` and
    a hann window) the overlap-add is left undivided, as librosa leaves it
    (``specux.istft(nola="keep")``).
    """
    return specux.istft(
        stft_matrix, n_fft=n_fft, hop_length=hop_length, win_length=win_length, window=window,
        center=center, length=length or None, nola="keep",
        backend=backend,  # librosa: length=0 means not given
    )  # fmt: skip


def melspectrogram(
    y: Any,
    *,
    sr: float = 22050,
    n_fft: int = 2048,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Any = "hann",
    center: bool = True,
    pad_mode: str = "constant",
    power: float = 2.0,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: Any = "slaney",
    backend: str = "auto",
) -> Any:
    """``librosa.feature.melspectrogram``: ``(..., n_mels, n_frames)``, ``|stft| ** power`` in mel.

    The mel filters are ``librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin,
    fmax=fmax, htk=htk, norm=norm)`` built in float64.
    """
    y = _signal(y)
    return specux.melspectrogram(
        y, sr=sr, n_fft=n_fft, hop_length=hop_length, win_length=win_length, window=window,
        center=center, pad_mode=pad_mode, power=power, n_mels=n_mels, fmin=fmin, fmax=fmax,
        htk=htk, norm=norm, backend=backend,
    )  # fmt: skip


def mfcc(
    y: Any,
    *,
    sr: float = 22050,
    n_mfcc: int = 20,
    dct_type: int = 2,
    norm: str | None = "ortho",
    lifter: float = 0.0,
    mel_norm: Any = "slaney",
    n_fft: int = 2048,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Any = "hann",
    center: bool = True,
    pad_mode: str = "constant",
    power: float = 2.0,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    backend: str = "auto",
) -> Any:
    """``librosa.feature.mfcc``: ``(..., n_mfcc, n_frames)``.

    ``power_to_db(melspectrogram(y, ...))`` (ref 1, amin 1e-10, top_db 80), then
    ``scipy.fft.dct(type=dct_type, norm=norm)`` over the mel axis, the first ``n_mfcc`` rows,
    then the lifter. As in librosa, the top_db floor is set by the largest value of the whole
    array: for several signals at once (``y`` of shape ``(..., L)``) a quiet signal is clipped
    against the loudest one, not against its own peak (``specux.mfcc`` clips per signal).
    """
    mel_params = {
        "n_fft": n_fft, "hop_length": hop_length, "win_length": win_length, "window": window,
        "center": center, "pad_mode": pad_mode, "power": power, "n_mels": n_mels, "fmin": fmin,
        "fmax": fmax, "htk": htk,
    }  # fmt: skip
    y = _signal(y)
    if math.prod(y.shape[:-1]) <= 1:
        # One signal: its own peak is the array's, and specux.mfcc is the fused path.
        return specux.mfcc(
            y, sr=sr, n_mfcc=n_mfcc, dct_type=dct_type, norm=norm, lifter=lifter, top_db=80.0,
            mel_norm=mel_norm, backend=backend, **mel_params,
        )  # fmt: skip
    mel = melspectrogram(y, sr=sr, norm=mel_norm, backend=backend, **mel_params)
    log_mel = power_to_db(mel)
    if _library(log_mel) == "torch":  # the project op: torch.compile traces it
        return dct_of_db(log_mel, n_mfcc, dct_type, norm, lifter, backend=backend)
    # (the spec checks n_mfcc against n_mels by their names, as specux.mfcc does)
    rows = matrices.matrix(matrices.dct_spec(n_out=n_mfcc, n_in=log_mel.shape[-2],
                                             dct_type=dct_type, norm=norm, lifter=lifter))
    return _constant_like(rows, log_mel) @ log_mel


def chroma_stft(
    y: Any,
    *,
    sr: float = 22050,
    norm: float | None = np.inf,
    n_fft: int = 2048,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Any = "hann",
    center: bool = True,
    pad_mode: str = "constant",
    tuning: float | None = None,
    n_chroma: int = 12,
    ctroct: float = 5.0,
    octwidth: float | None = 2,
    base_c: bool = True,
    backend: str = "auto",
) -> Any:
    """``librosa.feature.chroma_stft``: ``(..., n_chroma, n_frames)``.

    The chroma filters (``librosa.filters.chroma``) on the power spectrogram, each frame
    normalized to unit ``norm``. ``tuning=None`` (librosa's default) estimates the tuning from
    the signal as ``librosa.estimate_tuning`` does (for an odd ``n_fft`` taking the bins for
    those of ``n_fft - 1`` points, as librosa), pooled over all signals; that step reads the
    spectrogram on the host and is not differentiable: pass ``tuning=0.0`` (A440) or a known
    value for torch inputs on a GPU, gradients through the tuning, or ``torch.compile``.
    """
    y = _signal(y)
    return specux.chroma(
        y, sr=sr, n_chroma=n_chroma, source="stft", tuning=tuning, norm=norm, n_fft=n_fft,
        hop_length=hop_length, win_length=win_length, window=window, center=center,
        pad_mode=pad_mode, ctroct=ctroct, octwidth=octwidth, base_c=base_c, backend=backend,
    )  # fmt: skip


def chroma_cqt(
    y: Any,
    *,
    sr: float = 22050,
    hop_length: int = 512,
    fmin: float | None = None,
    norm: float | None = math.inf,
    threshold: float | None = 0.0,
    tuning: float | None = None,
    n_chroma: int = 12,
    n_octaves: int = 7,
    window: Any = None,
    bins_per_octave: int | None = 36,
    cqt_mode: str = "full",
    backend: str = "auto",
) -> Any:
    """``librosa.feature.chroma_cqt``: ``(..., n_chroma, n_frames)``, the magnitude CQT
    (``n_octaves * bins_per_octave`` bins from ``fmin``, default C1) folded into chroma
    (``librosa.filters.cq_to_chroma``), values below ``threshold`` zeroed, each frame
    normalized to unit ``norm``. ``bins_per_octave=None`` is ``n_chroma``; ``tuning=None``
    (librosa's default) estimates the tuning from the signal on the host, as
    :func:`chroma_stft`. The CQT is specux's direct transform: librosa's multirate one
    differs by about 1.5e-2 of its peak, and the chroma by up to about 0.1 on a tonal signal.
    Not taken: ``C=`` (a precomputed CQT; not a parameter here), and ``window`` (librosa
    convolves it into the fold) and ``cqt_mode="hybrid"``, which raise a ValueError naming
    them."""
    if window is not None:
        raise ValueError("window: librosa's chroma_cqt window (convolved into the CQT-to-"
                         "chroma fold) is not supported: leave it None")  # fmt: skip
    if cqt_mode != "full":
        raise ValueError(f"cqt_mode={cqt_mode!r} is not supported: specux computes the full "
                         "CQT ('full'), not librosa's hybrid one")  # fmt: skip
    y = _signal(y)
    return specux.chroma(
        y, sr=sr, n_chroma=n_chroma, source="cqt", tuning=tuning, norm=norm,
        hop_length=hop_length, fmin=fmin, n_octaves=n_octaves,
        bins_per_octave=n_chroma if bins_per_octave is None else bins_per_octave,
        threshold=0.0 if threshold is None else threshold, backend=backend,
    )  # fmt: skip


def power_to_db(S: Any, *, ref: Any = 1.0, amin: float = 1e-10, top_db: float | None = 80.0):
    """``librosa.power_to_db``: ``10 log10(max(S, amin)) - 10 log10(max(ref, amin))``.

    With ``top_db``, values below ``max - top_db`` are raised to it, the max taken over the
    WHOLE array as librosa does (for a batch of signals: the loudest signal's peak), not per
    signal. ``ref`` is a number or a callable applied to ``|S|`` (e.g. ``np.max``). Complex input
    warns and uses ``|S|``, as librosa does.
    """
    amin = _positive("amin", amin)
    top_db = _top_db(top_db)
    ops = _Ops(S)
    S = ops.array
    if ops.is_complex(S):
        warnings.warn(
            "power_to_db was called on complex input so phase information will be discarded; "
            "call power_to_db(abs(D) ** 2) instead",
            stacklevel=2,
        )
        S = ops.abs(S)
    ref_value = ops.reference(ref, S) if callable(ref) else abs(ref)
    log_spec = 10.0 * ops.log10(ops.clamp_min(S, amin))
    if isinstance(ref_value, numbers.Real):
        log_spec = log_spec - 10.0 * float(np.log10(max(amin, float(ref_value))))
    else:
        log_spec = log_spec - 10.0 * ops.log10(ops.clamp_min(ref_value, amin))
    if top_db is not None and ops.size(log_spec):
        log_spec = ops.maximum(log_spec, log_spec.max() - top_db)
    return log_spec


def amplitude_to_db(S: Any, *, ref: Any = 1.0, amin: float = 1e-5, top_db: float | None = 80.0):
    """``librosa.amplitude_to_db``: ``power_to_db(|S| ** 2, ref=ref ** 2, amin=amin ** 2)``.

    ``20 log10(max(|S|, amin)) - 20 log10(max(ref, amin))``; ``top_db`` clips against the max of
    the WHOLE array, as :func:`power_to_db`. librosa's defaults: ``ref=1.0``, ``amin=1e-5``
    (``1e-10`` in power), ``top_db=80``. Complex input warns (the phase is dropped), as librosa.
    """
    amin = _positive("amin", amin)
    ops = _Ops(S)
    if ops.is_complex(ops.array):
        warnings.warn(
            "amplitude_to_db was called on complex input so phase information will be "
            "discarded; call amplitude_to_db(abs(S)) instead",
            stacklevel=2,
        )
    magnitude = ops.abs(ops.array)
    ref_value = ops.reference(ref, magnitude) if callable(ref) else abs(ref)
    return power_to_db(magnitude * magnitude, ref=ref_value * ref_value, amin=amin * amin,
                       top_db=top_db)  # fmt: skip


if hasattr(specux, "cqt"):

    def cqt(
        y: Any,
        *,
        sr: float = 22050,
        hop_length: int = 512,
        fmin: float | None = None,
        n_bins: int = 84,
        bins_per_octave: int = 12,
        tuning: float | None = 0.0,
        filter_scale: float = 1.0,
        norm: float | None = 1,
        window: Any = "hann",
        scale: bool = True,
        pad_mode: str = "constant",
        backend: str = "auto",
    ) -> Any:
        """``librosa.cqt``: complex ``(..., n_bins, 1 + L // hop_length)`` (``fmin`` default C1;
        ``tuning=None`` estimated from ``y`` as librosa does). The filters are normalized at
        the full sample rate (the direct transform, :func:`specux.cqt`); librosa normalizes
        each octave's at its downsampled rate, so for ``norm`` other than 1 its lower
        octaves are smaller than these by 2 ** (1 - 1 / norm) per halving of the rate
        (``norm=None`` as ``np.inf``: a factor 2; measured, 3 s chirp: 1.41 / 2 per octave)."""
        y = _signal(y)
        return specux.cqt(
            y, sr=sr, hop_length=hop_length, fmin=fmin, n_bins=n_bins,
            bins_per_octave=bins_per_octave, tuning=tuning, filter_scale=filter_scale,
            norm=norm, window=window, scale=scale, pad_mode=pad_mode, backend=backend,
        )  # fmt: skip

    __all__.append("cqt")


if hasattr(specux, "vqt"):

    def vqt(
        y: Any,
        *,
        sr: float = 22050,
        hop_length: int = 512,
        fmin: float | None = None,
        n_bins: int = 84,
        gamma: float | None = None,
        bins_per_octave: int = 12,
        tuning: float | None = 0.0,
        filter_scale: float = 1.0,
        norm: float | None = 1,
        window: Any = "hann",
        scale: bool = True,
        pad_mode: str = "constant",
        backend: str = "auto",
    ) -> Any:
        """``librosa.vqt``: complex ``(..., n_bins, 1 + L // hop_length)``; ``gamma=None`` is
        librosa's ERB-based default; ``tuning`` and ``norm`` as :func:`cqt`."""
        y = _signal(y)
        return specux.vqt(
            y, sr=sr, hop_length=hop_length, fmin=fmin, n_bins=n_bins, gamma=gamma,
            bins_per_octave=bins_per_octave, tuning=tuning, filter_scale=filter_scale,
            norm=norm, window=window, scale=scale, pad_mode=pad_mode, backend=backend,
        )  # fmt: skip

    __all__.append("vqt")


# ---------------------------------------------------------------------------------------------
# librosa.filters' banks, and the namespaces


def mel(
    *,
    sr: float,
    n_fft: int,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: Any = "slaney",
    dtype: Any = np.float32,
) -> np.ndarray:
    """``librosa.filters.mel``: ``(n_mels, 1 + n_fft // 2)``, built in float64 by
    :func:`specux.filters.mel` and returned (writable) in ``dtype``, float32 by default as
    librosa's."""
    return np.array(specux.filters.mel(sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax,
                                       htk=htk, norm=norm, dtype=dtype))  # fmt: skip


def chroma(
    *,
    sr: float,
    n_fft: int,
    n_chroma: int = 12,
    tuning: float = 0.0,
    ctroct: float = 5.0,
    octwidth: float | None = 2,
    norm: float | None = 2,
    base_c: bool = True,
    dtype: Any = np.float32,
) -> np.ndarray:
    """``librosa.filters.chroma``: ``(n_chroma, 1 + n_fft // 2)``, built in float64 by
    :func:`specux.filters.chroma` and returned (writable) in ``dtype``, float32 by default."""
    return np.array(specux.filters.chroma(sr=sr, n_fft=n_fft, n_chroma=n_chroma, tuning=tuning,
                                          ctroct=ctroct, octwidth=octwidth, norm=norm,
                                          base_c=base_c, dtype=dtype))  # fmt: skip


# librosa's namespaces, so that ``import specux.presets.librosa as librosa`` serves code written
# as ``librosa.feature.mfcc(...)`` and ``librosa.filters.mel(...)`` (also importable by those
# dotted names); the top-level functions stay where librosa has them too
feature = namespace(__name__, "feature", [chroma_cqt, chroma_stft, melspectrogram, mfcc],
                    "librosa.feature's functions that specux.presets.librosa has.")  # fmt: skip
filters = namespace(__name__, "filters", [chroma, mel],
                    "librosa.filters' banks that specux.presets.librosa has.")  # fmt: skip
del chroma, mel  # librosa has them under filters only


# ---------------------------------------------------------------------------------------------
# helpers: the few array operations the dB conversions need, in the input's library


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{name}={value!r} is out of range: must be > 0")
    return float(value)


def _top_db(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
        raise ValueError(f"top_db={value!r} is out of range: must be >= 0 (or None)")
    return float(value)


def _signal(y: Any) -> Any:
    """``y``, a TypeError naming it (librosa's name) unless it is a numpy, torch or cupy
    array; a float16 numpy / cupy array widened to float32, as librosa computes it (its
    stft of float16 is complex64, its features float32), where specux's own functions would
    round real results back to float16 (a loud tone's mel power overflows it)."""
    library = library_of(y, "y")
    if library in ("numpy", "cupy") and y.dtype == np.float16:
        return y.astype(np.float32)
    return y


def _library(x: Any) -> str:
    module = type(x).__module__.partition(".")[0]
    return module if module in ("torch", "cupy") else "numpy"


class _Ops:
    """numpy / cupy (same functions) or torch versions of the dB conversions' operations."""

    def __init__(self, x: Any) -> None:
        self.library = _library(x)
        if self.library == "torch":
            import torch

            self._torch = torch
            self.array = x
        elif self.library == "cupy":
            import cupy

            self._xp = cupy
            self.array = x
        else:
            self._xp = np
            self.array = np.asarray(x)
            if self.array.dtype.kind not in "biufc":
                raise TypeError(
                    f"S must be a numeric array (numpy, torch or cupy) or array-like, got "
                    f"{type(x).__module__}.{type(x).__qualname__}"
                    + (f" of dtype {self.array.dtype}" if x is not None else "")
                )

    def is_complex(self, x: Any) -> bool:
        return x.is_complex() if self.library == "torch" else x.dtype.kind == "c"

    def reference(self, ref: Any, x: Any) -> Any:
        """``ref(x)`` for a callable ``ref``; numpy's whole-array reductions librosa's docs
        suggest (``np.max`` ...) run as the tensor's own for torch input (numpy's would
        call ``tensor.max(axis=None)``, which torch refuses)."""
        if self.library == "torch":
            own = {np.max: "amax", np.amax: "amax", np.min: "amin", np.amin: "amin",
                   np.mean: "mean"}.get(ref)  # fmt: skip
            if own is not None:
                return getattr(x, own)()
        return ref(x)

    def abs(self, x: Any) -> Any:
        return x.abs() if self.library == "torch" else self._xp.abs(x)

    def log10(self, x: Any) -> Any:
        return self._torch.log10(x) if self.library == "torch" else self._xp.log10(x)

    def clamp_min(self, x: Any, value: float) -> Any:
        if self.library == "torch":
            return self._torch.clamp_min(x, value)
        return self._xp.maximum(x, value)

    def maximum(self, x: Any, y: Any) -> Any:
        if self.library == "torch":
            return self._torch.maximum(x, y)
        return self._xp.maximum(x, y)

    def size(self, x: Any) -> int:
        return x.numel() if self.library == "torch" else x.size


def _constant_like(matrix: np.ndarray, like: Any) -> Any:
    """A float64 host matrix in ``like``'s library (numpy or cupy) and dtype."""
    if _library(like) == "cupy":
        import cupy

        return cupy.asarray(matrix, dtype=like.dtype)
    return matrix.astype(like.dtype, copy=False)
