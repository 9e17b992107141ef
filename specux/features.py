"""Spectral features on top of the STFT: melspectrogram, mfcc, lfcc, chroma; and fftconvolve.

Each is assembled from a few ops (a filterbank spectrogram, a dB step, a per-signal top_db
clip, a constant projection) so the GPU backend can fuse the same stages; on torch inputs
every step is a ``torch.ops.specux`` op or a differentiable elementwise torch op.
"""

from __future__ import annotations

import contextlib
import math
import operator
from dataclasses import dataclass
from typing import Any

from specux.api import _array_window, _Call, _check_same_device, _require_ndim
from specux.compat.arrays import library_of
from specux.kernels.cpu.tuning import estimate_tuning
from specux.meta import dtypes, matrices, params
from specux.meta.cqt_params import C1_HZ, cqt_arguments, filter_norm
from specux.meta.params import StftParams
from specux.transport import across_libraries

_MEL_DB_AMIN = 1e-10  # mfcc / lfcc: 10 log10(max(S, 1e-10)), librosa's power_to_db amin


def _stft_setup(call: _Call, x, *, n_fft, hop_length, win_length, window, center, pad_mode):
    p = params.stft_params(
        n_fft=n_fft, hop_length=hop_length, win_length=win_length, window=window,
        center=center, pad_mode=pad_mode, normalized=False, onesided=True,
    )  # fmt: skip
    if call.kind != "real":
        raise TypeError(f"x must be a real signal, got {call.input_dtype}")
    _require_ndim(call, 1)
    params.signal_length("x", x.shape[-1], p)
    w = _array_window(call, window, p)
    _check_same_device(x, w)
    return p, w


def _power(value: Any) -> float:
    return params.as_float("power", value, positive=True)


def _top_db(value: Any) -> float | None:
    if value is None:
        return None
    top_db = params.as_float("top_db", value)
    if top_db < 0:
        raise ValueError(f"top_db={top_db} is out of range: must be >= 0 (or None)")
    return top_db


def _filterbank_spectrogram(call: _Call, x, p: StftParams, w, power, bank, output, eps):
    xr = call.engine.cast(x, call.compute)
    return call.engine.bank_spectrogram(xr, w, p, power, bank, output, eps)


@across_libraries
def melspectrogram(
    x: Any,
    *,
    sr: float,
    n_fft: int = 2048,
    hop_length: int | None = None,
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
    output: str = "power",
    eps: float = 1e-10,
    top_db: float | None = None,
    backend: str = "auto",
) -> Any:
    """Mel spectrogram ``(..., L) -> (..., n_mels, n_frames)``.

    The mel filterbank (``librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax, htk, norm)``)
    applied to ``|stft(x)| ** power``. ``output="db"`` returns
    ``(20 / power) log10(max(S, eps))`` and, with ``top_db``, clips each signal at its own
    maximum minus ``top_db``.
    """
    call = _Call(x, backend, family="melspectrogram")
    p, w = _stft_setup(call, x, n_fft=n_fft, hop_length=hop_length, win_length=win_length,
                       window=window, center=center, pad_mode=pad_mode)  # fmt: skip
    bank = matrices.mel_spec(
        sr=sr, n_fft=p.n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax, htk=htk, norm=norm
    )
    power = _power(power)
    output = params.output_name(output, ("power", "db"))
    eps = params.eps_value(eps)
    top_db = _top_db(top_db)
    if top_db is not None and output != "db":
        raise ValueError(f"top_db={top_db} is a dB range: it needs output='db', got "
                         f"output={output!r}")  # fmt: skip
    out = _filterbank_spectrogram(call, x, p, w, power, bank, output, eps)
    if top_db is not None:
        out = call.engine.clip_top_db(out, top_db)
    return call.finish(out)


_STFT_KEYS = ("n_fft", "hop_length", "win_length", "window", "center", "pad_mode", "power")
_MEL_KEYS = _STFT_KEYS + ("n_mels", "fmin", "fmax", "htk", "mel_norm")


def _split_params(function: str, given: dict, allowed: tuple[str, ...]) -> dict:
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise TypeError(f"{function}() got unexpected parameters {unknown}; allowed: {allowed}")
    return given


def _log_bank_spectrogram(call: _Call, x, p, w, power, bank):
    """10 log10(max(S, 1e-10)) of the filterbank spectrogram S of ``|X| ** power``; for
    power 2 that is the bank op's own dB output (one kernel on the GPU)."""
    if power == 2.0:
        return _filterbank_spectrogram(call, x, p, w, power, bank, "db", _MEL_DB_AMIN)
    spectrogram = _filterbank_spectrogram(call, x, p, w, power, bank, "power", _MEL_DB_AMIN)
    return call.engine.db(spectrogram, 10.0, _MEL_DB_AMIN)


def _cepstrum(call: _Call, x, log_spec, n_out, n_bands, dct_type, norm, lifter, top_db,
              names=("n_mfcc", "n_mels")):  # fmt: skip
    """dB spectrogram -> per-signal top_db clip -> first n_out (liftered) DCT rows (``names``:
    the caller's parameters for n_out and the band count, for error messages)."""
    dct = matrices.dct_spec(n_out=n_out, n_in=n_bands, dct_type=dct_type, norm=norm,
                            lifter=lifter, out_name=names[0], bands_name=names[1])  # fmt: skip
    # the clip is read by the DCT's kernel (the clipped values are never stored)
    return call.finish(call.engine.project(log_spec, dct, _top_db(top_db)))


def dct_of_db(log_spec: Any, n_out: int, dct_type: int, norm: str | None, lifter: float, *,
              backend: str = "auto") -> Any:  # fmt: skip
    """The first ``n_out`` (liftered) DCT rows of a dB spectrogram ``(..., n_bands,
    n_frames)`` (a torch tensor), as :func:`mfcc` applies them, with no top_db clip (the
    librosa preset clips the whole array first): the ``project`` op with the matrix named,
    so that nothing builds it in a traced function (torch.compile cannot trace the numpy
    that builds it)."""
    call = _Call(log_spec, backend, name="S", family="mfcc")
    n_out = params.as_int("n_mfcc", n_out, minimum=1)
    return _cepstrum(call, log_spec, log_spec, n_out, log_spec.shape[-2], dct_type, norm,
                     lifter, None)  # fmt: skip


@across_libraries
def mfcc(
    x: Any,
    *,
    sr: float,
    n_mfcc: int = 20,
    dct_type: int = 2,
    norm: str | None = "ortho",
    lifter: float = 0.0,
    top_db: float | None = 80.0,
    backend: str = "auto",
    **mel_params: Any,
) -> Any:
    """Mel-frequency cepstral coefficients ``(..., L) -> (..., n_mfcc, n_frames)``.

    ``scipy.fft.dct(type=dct_type, norm=norm)`` over the mel axis of
    ``10 log10(max(mel_power, 1e-10))`` clipped at ``top_db`` per signal, first ``n_mfcc``
    rows, then librosa's lifter. ``mel_params`` are melspectrogram's (``n_fft``,
    ``hop_length``, ``win_length``, ``window``, ``center``, ``pad_mode``, ``power``,
    ``n_mels`` (default 128), ``fmin``, ``fmax``, ``htk``) and ``mel_norm`` (the mel filter
    normalization, default "slaney", since ``norm`` is the DCT's).
    """
    mel_params = _split_params("mfcc", mel_params, _MEL_KEYS)
    call = _Call(x, backend, family="mfcc")
    p, w = _stft_setup(
        call, x, **{k: mel_params.get(k, d) for k, d in _STFT_DEFAULTS.items()}
    )
    n_mels = mel_params.get("n_mels", 128)
    bank = matrices.mel_spec(
        sr=sr, n_fft=p.n_fft, n_mels=n_mels, fmin=mel_params.get("fmin", 0.0),
        fmax=mel_params.get("fmax"), htk=mel_params.get("htk", False),
        norm=mel_params.get("mel_norm", "slaney"), norm_name="mel_norm",
    )  # fmt: skip
    power = _power(mel_params.get("power", 2.0))
    log_spec = _log_bank_spectrogram(call, x, p, w, power, bank)
    n_mfcc = params.as_int("n_mfcc", n_mfcc, minimum=1)
    return _cepstrum(call, x, log_spec, n_mfcc, bank.get("n_mels"), dct_type, norm, lifter,
                     top_db)  # fmt: skip


_STFT_DEFAULTS = {
    "n_fft": 2048,
    "hop_length": None,
    "win_length": None,
    "window": "hann",
    "center": True,
    "pad_mode": "constant",
}


@across_libraries
def lfcc(
    x: Any,
    *,
    sr: float,
    n_lfcc: int = 20,
    n_filter: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    dct_type: int = 2,
    norm: str | None = "ortho",
    lifter: float = 0.0,
    top_db: float | None = 80.0,
    backend: str = "auto",
    **stft_params: Any,
) -> Any:
    """Linear-frequency cepstral coefficients ``(..., L) -> (..., n_lfcc, n_frames)``.

    As :func:`mfcc` with the linearly spaced triangular bank of
    ``torchaudio.functional.linear_fbanks`` (``n_filter`` bands from ``fmin`` to ``fmax``) in
    place of mel. ``stft_params``: ``n_fft``, ``hop_length``, ``win_length``, ``window``,
    ``center``, ``pad_mode``, ``power`` (default 2).
    """
    stft_params = _split_params("lfcc", stft_params, _STFT_KEYS)
    call = _Call(x, backend, family="lfcc")
    p, w = _stft_setup(
        call, x, **{k: stft_params.get(k, d) for k, d in _STFT_DEFAULTS.items()}
    )
    bank = matrices.linear_spec(sr=sr, n_fft=p.n_fft, n_filter=n_filter, fmin=fmin, fmax=fmax)
    power = _power(stft_params.get("power", 2.0))
    log_spec = _log_bank_spectrogram(call, x, p, w, power, bank)
    n_lfcc = params.as_int("n_lfcc", n_lfcc, minimum=1)
    return _cepstrum(call, x, log_spec, n_lfcc, bank.get("n_filter"), dct_type, norm, lifter,
                     top_db, names=("n_lfcc", "n_filter"))  # fmt: skip


_CHROMA_STFT_KEYS = (
    "win_length", "window", "center", "pad_mode", "power", "ctroct", "octwidth", "base_c",
)  # fmt: skip


@across_libraries(host_only=lambda kwargs: kwargs.get("tuning", 0.0) is None)
def chroma(
    x: Any,
    *,
    sr: float,
    n_chroma: int = 12,
    source: str = "stft",
    tuning: float | None = 0.0,
    norm: float | None = math.inf,
    n_fft: int = 2048,
    hop_length: int = 512,
    backend: str = "auto",
    **params_: Any,
) -> Any:
    """Chromagram ``(..., L) -> (..., n_chroma, n_frames)``.

    ``source="stft"``: ``librosa.feature.chroma_stft`` — the chroma filterbank
    (``librosa.filters.chroma``) applied to ``|stft(x)| ** power`` (power 2), then each frame
    normalized to unit ``norm`` (inf by default; None leaves it). Extra parameters:
    ``win_length``, ``window``, ``center``, ``pad_mode``, ``power``, and the filterbank's
    ``ctroct``, ``octwidth``, ``base_c``.

    ``source="cqt"``: ``librosa.feature.chroma_cqt`` — |CQT| with ``bins_per_octave`` 36 over
    ``n_octaves`` 7 from ``fmin`` (C1) folded into ``n_chroma`` classes, values below
    ``threshold`` zeroed, then normalized; extra parameters ``fmin``, ``n_octaves``,
    ``bins_per_octave``, ``threshold``, ``filter_scale``, ``window``, ``cqt_norm``,
    ``pad_mode``. ``n_fft`` other than its default is refused there. ``tuning=None``
    estimates the tuning from the signal as librosa does (one estimate pooled over all
    signals; not differentiable, and it reads the spectrogram back to the host, so it does
    not run inside ``torch.compile``).
    """
    source = params.as_choice("source", source, ("stft", "cqt"))
    if source == "cqt":
        if not _is_default_n_fft(n_fft):  # given: it would be ignored
            raise ValueError(f"n_fft={n_fft!r} is a parameter of chroma(source='stft') only: the "
                             "cqt source's filter lengths follow from its bins")  # fmt: skip
        return _chroma_cqt(x, sr=sr, n_chroma=n_chroma, tuning=tuning, norm=norm,
                           hop_length=hop_length, backend=backend, extra=params_)  # fmt: skip
    extra = _split_params("chroma", params_, _CHROMA_STFT_KEYS)
    call = _Call(x, backend, family="chroma")
    p, w = _stft_setup(
        call, x, n_fft=n_fft, hop_length=hop_length, win_length=extra.get("win_length"),
        window=extra.get("window", "hann"), center=extra.get("center", True),
        pad_mode=extra.get("pad_mode", "constant"),
    )  # fmt: skip
    power = _power(extra.get("power", 2.0))
    if tuning is None:
        tuning = _estimate_tuning(call, x, p, w, power, sr, n_chroma)
    bank = matrices.chroma_spec(
        sr=sr, n_fft=p.n_fft, n_chroma=n_chroma, tuning=tuning,
        ctroct=extra.get("ctroct", 5.0), octwidth=extra.get("octwidth", 2),
        base_c=extra.get("base_c", True),
    )  # fmt: skip
    norm = filter_norm("norm", norm)  # librosa util.normalize's
    out = _filterbank_spectrogram(call, x, p, w, power, bank, "power", 1e-10)
    if norm is not None:
        out = call.engine.normalize(out, norm, -2)
    return call.finish(out)


def _is_default_n_fft(n_fft: Any) -> bool:
    """chroma's ``n_fft`` at its default 2048 (any integer type; bools are not sizes)."""
    if isinstance(n_fft, bool):
        return False
    try:
        return operator.index(n_fft) == 2048
    except TypeError:
        return False


def _constant_q(call: _Call, x, output, eps, pad_mode, **spec_params):
    """The CQT of ``x`` in the compute dtype (the caller finishes: casts back, or goes on).
    ``tuning=None``: librosa's ``estimate_tuning(y=x, sr=sr, bins_per_octave=...)`` (the
    magnitude of a 2048-point, hop-512 STFT; all signals pooled), as librosa.cqt does."""
    def check_signal() -> None:
        if call.kind != "real":
            raise TypeError(f"x must be a real signal, got {call.input_dtype}")
        _require_ndim(call, 1)
        if x.shape[-1] == 0:
            raise ValueError("x has an empty time axis: the CQT needs at least one sample")

    estimated = spec_params["tuning"] is None
    if estimated:  # the signal is read first, so checked first
        check_signal()
        bins_per_octave = params.as_int("bins_per_octave", spec_params["bins_per_octave"],
                                        minimum=1)  # fmt: skip
        p, w = _stft_setup(call, x, n_fft=2048, hop_length=512, win_length=None,
                           window="hann", center=True, pad_mode="constant")  # fmt: skip
        spec_params["tuning"] = _estimate_tuning(call, x, p, w, 1.0, spec_params["sr"],
                                                 bins_per_octave)  # fmt: skip
    spec, pad_mode, output, eps = cqt_arguments(
        pad_mode=pad_mode, output=output, eps=eps, **spec_params
    )
    if not estimated:
        check_signal()
    xr = call.engine.cast(x, call.compute)
    return call.engine.cqt(xr, spec, pad_mode, output, eps)


@across_libraries(host_only=lambda kwargs: kwargs.get("tuning", 0.0) is None)
def cqt(
    x: Any,
    *,
    sr: float,
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
    output: str = "complex",
    eps: float = 1e-10,
    backend: str = "auto",
) -> Any:
    """Constant-Q transform ``(..., L) -> (..., n_bins, 1 + L // hop_length)``.

    librosa's filters (``fmin`` default C1 = 32.703 Hz, ``filter_scale``, ``norm``,
    ``scale``), computed as the direct full-resolution transform (no per-octave resampling,
    no kernel sparsification): each bin correlates the centred, padded signal with its
    wavelet. librosa's own multirate result agrees with it to about 1.5e-2 of the peak (see
    docs/api.md). ``tuning`` in fractions of a bin; ``None`` estimates it from ``x`` as
    librosa.cqt does (``estimate_tuning``; reads the signal back to the host). ``output``:
    complex, magnitude, power or db.
    """
    call = _Call(x, backend, family="cqt")
    return call.finish(_constant_q(
        call, x, output, eps, pad_mode, sr=sr, hop_length=hop_length, fmin=fmin,
        n_bins=n_bins, bins_per_octave=bins_per_octave, tuning=tuning,
        filter_scale=filter_scale, norm=norm, window=window, scale=scale, gamma=0.0,
    ))  # fmt: skip


@across_libraries(host_only=lambda kwargs: kwargs.get("tuning", 0.0) is None)
def vqt(
    x: Any,
    *,
    sr: float,
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
    output: str = "complex",
    eps: float = 1e-10,
    gamma: float | None = None,
    backend: str = "auto",
) -> Any:
    """Variable-Q transform: :func:`cqt` with bandwidths widened by ``gamma`` Hz
    (``None``: librosa's default, from the equivalent rectangular bandwidth; 0: the CQT)."""
    call = _Call(x, backend, family="vqt")
    return call.finish(_constant_q(
        call, x, output, eps, pad_mode, sr=sr, hop_length=hop_length, fmin=fmin,
        n_bins=n_bins, bins_per_octave=bins_per_octave, tuning=tuning,
        filter_scale=filter_scale, norm=norm, window=window, scale=scale, gamma=gamma,
    ))  # fmt: skip


_CHROMA_CQT_KEYS = ("fmin", "n_octaves", "bins_per_octave", "threshold", "filter_scale",
                    "window", "cqt_norm", "pad_mode")  # fmt: skip


@dataclass(frozen=True)
class ChromaCqt:
    """chroma(source="cqt")'s parts: the CQT's parameters (``cqt_arguments``' keywords but
    ``tuning``), its pad mode, the fold of its bins into chroma, the magnitude threshold."""

    constant_q: dict
    pad_mode: Any
    fold: matrices.MatrixSpec
    threshold: float
    n_octaves: int

    @contextlib.contextmanager
    def nyquist_message(self):
        """The CQT's Nyquist error names its n_bins, which chroma does not take: say which
        chroma parameters set it."""
        n_bins, bins_per_octave = self.constant_q["n_bins"], self.constant_q["bins_per_octave"]
        try:
            yield
        except ValueError as error:
            if f"n_bins={n_bins}" not in str(error):
                raise
            raise ValueError(f"{error} (chroma(source='cqt') takes n_bins = n_octaves * "
                             f"bins_per_octave = {self.n_octaves} * {bins_per_octave}: reduce "
                             f"n_octaves={self.n_octaves})") from error  # fmt: skip


def chroma_cqt_parts(*, sr, n_chroma, hop_length, extra: dict) -> ChromaCqt:
    """librosa.feature.chroma_cqt's defaults and checks for ``extra`` (bins_per_octave 36,
    7 octaves from C1, the filters' ``cqt_norm`` 1, threshold 0)."""
    extra = _split_params("chroma(source='cqt')", extra, _CHROMA_CQT_KEYS)
    bins_per_octave = params.as_int("bins_per_octave", extra.get("bins_per_octave", 36),
                                    minimum=1)  # fmt: skip
    n_octaves = params.as_int("n_octaves", extra.get("n_octaves", 7), minimum=1)
    fmin = extra.get("fmin")
    fmin = C1_HZ if fmin is None else params.as_float("fmin", fmin, positive=True)
    cqt_norm = filter_norm("cqt_norm", extra.get("cqt_norm", 1))
    threshold = params.as_float("threshold", extra.get("threshold", 0.0))
    n_bins = n_octaves * bins_per_octave
    fold = matrices.cq_to_chroma_spec(n_input=n_bins, bins_per_octave=bins_per_octave,
                                      n_chroma=n_chroma, fmin=fmin)  # fmt: skip
    constant_q = dict(sr=sr, hop_length=hop_length, fmin=fmin, n_bins=n_bins,
                      bins_per_octave=bins_per_octave,
                      filter_scale=extra.get("filter_scale", 1.0), norm=cqt_norm,
                      window=extra.get("window", "hann"), scale=True, gamma=0.0)  # fmt: skip
    return ChromaCqt(constant_q, extra.get("pad_mode", "constant"), fold, threshold, n_octaves)


def _chroma_cqt(x, *, sr, n_chroma, tuning, norm, hop_length, backend, extra):
    """librosa.feature.chroma_cqt: fold |CQT| (bins_per_octave 36, 7 octaves) into chroma."""
    parts = chroma_cqt_parts(sr=sr, n_chroma=n_chroma, hop_length=hop_length, extra=extra)
    norm = filter_norm("norm", norm)  # librosa util.normalize's
    # One call for the whole chain: the fold, threshold and normalization stay in the compute
    # dtype and only the chroma is cast back (float16 input is rounded once).
    call = _Call(x, backend, family="chroma")
    with parts.nyquist_message():
        magnitude = _constant_q(call, x, "magnitude", 1e-10, parts.pad_mode, tuning=tuning,
                                **parts.constant_q)  # fmt: skip
    out = call.engine.project(magnitude, parts.fold)
    if parts.threshold > 0:
        out = call.engine.threshold(out, parts.threshold)
    if norm is not None:
        out = call.engine.normalize(out, norm, -2)
    return call.finish(out)


def _estimate_tuning(call: _Call, x, p: StftParams, w, power: float, sr, n_chroma) -> float:
    """librosa's estimate_tuning on |stft(x)|**power, all signals pooled (host-side numpy)."""
    sr = params.as_float("sr", sr, positive=True)
    n_chroma = params.as_int("n_chroma", n_chroma, minimum=1)
    xr = call.engine.cast(x, call.compute)
    try:
        spectrum = call.engine.host(call.engine.stft(xr, w, p, "magnitude", 1e-10))
    except params.BackendUnavailableError as exc:  # (a meta tensor: no values to read)
        raise params.BackendUnavailableError(
            f"tuning=None estimates the tuning from the signal's values on the host ({exc}): "
            "pass tuning= (in fractions of a bin) instead"
        ) from None
    # librosa's chroma_stft estimates from S alone, whose bins it takes for those of a
    # 2 (bins - 1)-point FFT: for an odd n_fft, n_fft - 1 (followed, so chroma equals
    # librosa's; the estimate moves by 0.04 of a bin at n_fft=511, 0.01 at 2047)
    return estimate_tuning(spectrum**power, sr, 2 * (p.n_fft // 2), bins_per_octave=n_chroma)


@across_libraries
def fftconvolve(x: Any, y: Any, mode: str = "full", dim: int = -1, *, backend: str = "auto"):
    """``scipy.signal.fftconvolve(x, y, mode)`` along ``dim``; the other axes broadcast.

    ``mode``: "full" (``Lx + Ly - 1`` samples), "same" (``Lx``, centred like scipy), "valid"
    (``|Lx - Ly| + 1``). Real inputs give a real result; float32 stays float32.
    """
    call = _Call(x, backend, family="fftconvolve")
    other = _Call(y, backend, "y", family="fftconvolve")
    if other.route != call.route:
        raise TypeError(
            f"x and y must be the same kind of array on the same device: x is "
            f"{call.route.library} on {call.route.device_type}, y is {other.route.library} "
            f"on {other.route.device_type}"
        )
    if library_of(x) == "torch" and x.device != y.device:
        raise params.BackendUnavailableError(f"x is on {x.device} but y is on {y.device}")
    mode = params.as_choice("mode", mode, ("full", "same", "valid"))
    _require_ndim(call, 1)
    _require_ndim(other, 1, "y")
    dim = params.as_int("dim", dim)
    ndim = max(call.ndim, other.ndim)
    if 0 <= dim < ndim and call.ndim != other.ndim:  # (past both: out of range, below)
        raise ValueError(
            f"dim={dim} counts from the front, which is ambiguous for inputs of {call.ndim} and "
            f"{other.ndim} dimensions: use a negative dim (counted from the end)"
        )
    d_x = params.axis("dim", dim, call.ndim)
    d_y = params.axis("dim", dim, other.ndim)
    length_x, length_y = x.shape[d_x], y.shape[d_y]
    if length_x == 0 or length_y == 0:
        empty = "x" if length_x == 0 else "y"
        raise ValueError(f"{empty} has no samples along dim={dim}: fftconvolve needs at least "
                         "one in each operand")  # fmt: skip
    others_x = tuple(n for i, n in enumerate(x.shape) if i != d_x)
    others_y = tuple(n for i, n in enumerate(y.shape) if i != d_y)
    if any(m != n and 1 not in (m, n) for m, n in zip(others_x[::-1], others_y[::-1])):
        raise ValueError(
            f"x and y must broadcast along the axes other than dim={dim}: x has "
            f"{others_x}, y has {others_y}"
        )
    compute = dtypes.common_compute(call.compute, other.compute)
    xs = call.engine.moveaxis(call.engine.cast(x, compute), d_x, -1)
    ys = call.engine.moveaxis(call.engine.cast(y, compute), d_y, -1)
    full = call.engine.fftconvolve(xs, ys)
    total = length_x + length_y - 1
    keep = {"full": total, "same": length_x, "valid": abs(length_x - length_y) + 1}[mode]
    out = call.engine.narrow(full, -1, (total - keep) // 2, keep)
    out = call.engine.moveaxis(out, -1, dim if dim >= 0 else ndim + dim)
    # stored back in a half type (float16 / bfloat16 / complex32) only when both inputs have
    # it, half and complex half giving complex half (torch's promotion); mixed with a wider
    # operand, the promoted compute dtype, as torch and numpy promote
    a, b = call.input_dtype, other.input_dtype
    if a == b or {a, b} == {"float16", "complex32"}:
        return (other if b == "complex32" else call).finish(out)
    return out
