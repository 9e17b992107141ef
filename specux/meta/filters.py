"""Filterbank and transform matrices, built with numpy only.

Every builder here produces a plain matrix that later stages apply to spectra (or, for
:func:`constant_q`, to time-domain frames).  They share a few conventions:

* All arithmetic happens in float64 (complex128 for :func:`constant_q`); the ``dtype=``
  parameter only selects the dtype of the *returned* array, which is a cast copy of the
  float64 result.
* Results are memoised with :func:`functools.lru_cache` on the (normalised) parameters,
  so repeated calls return the *identical* object.  Because of that sharing, every
  returned array is read-only (``arr.flags.writeable is False``); call ``.copy()`` to
  get a mutable one.
* Frequencies are in Hz, sample rates in Hz (samples per second), and bank matrices are
  laid out ``(n_filters, n_bins)`` with ``n_bins = 1 + n_fft // 2`` one-sided DFT bins,
  so that ``bank @ spectrum`` maps a ``(n_bins, ...)`` magnitude spectrum to bands.

The mel, chroma and wavelet definitions follow librosa's, and :func:`linear` follows
torchaudio's ``linear_fbanks``, so that features computed with this library can be
compared against those references to float64 round-off.
"""

from __future__ import annotations

import functools
import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from specux.meta.params import (
    PARAMETRIC_WINDOWS,
    as_bool,
    as_float,
    as_int,
    check_memory,
    window_spec,
)
from specux.meta.windows import named_window

__all__ = [
    "SparseBank",
    "chroma",
    "constant_q",
    "cq_to_chroma",
    "dct",
    "hz_to_mel",
    "lifter_weights",
    "linear",
    "mel",
    "mel_sparse",
    "mel_to_hz",
    "relative_bandwidth",
    "sparse_bank",
    "vqt_default_gamma",
]

Norm = str | float | None
WindowSpec = str | tuple[str, float]

# Dense banks are at most a few MB; wavelet banks can reach tens of MB (84 filters of
# ~11k complex taps at C1), so they get a smaller cache.
_CACHE_SIZE = 64
_CQ_CACHE_SIZE = 16

_F64 = np.dtype(np.float64)
_C128 = np.dtype(np.complex128)
_TINY = np.finfo(np.float64).tiny

# C1 as MIDI note 24 in 12-TET referenced to A4 = 440 Hz (MIDI 69).
_C1_HZ = 440.0 * 2.0 ** ((24 - 69) / 12)

# Slaney's Auditory Toolbox mel scale: linear below 1 kHz, logarithmic above.
_MEL_F_SP = 200.0 / 3
_MEL_MIN_LOG_HZ = 1000.0
_MEL_MIN_LOG_MEL = _MEL_MIN_LOG_HZ / _MEL_F_SP
_MEL_LOGSTEP = math.log(6.4) / 27.0

# librosa decides whether a wavelet basis crosses Nyquist with *tabulated* equivalent
# noise bandwidths for named windows (they differ from the closed forms in the last
# digits, e.g. 1.50018... instead of 1.5 for hann).  Using the same numbers makes the
# Nyquist check accept/reject exactly the same parameter sets.
_TABULATED_BANDWIDTH = {
    "hann": 1.50018310546875,
    "hamming": 1.3629455320350348,
    "blackman": 1.7269681554262326,
    "boxcar": 1.0,
    "bartlett": 1.3334961334912805,
}

# --------------------------------------------------------------------------------------
# Small helpers: validation, freezing, normalisation
# --------------------------------------------------------------------------------------


def _freeze(arr: np.ndarray) -> np.ndarray:
    """A read-only view of ``arr``, itself made read-only: the caches hand out the view,
    whose flag numpy will not set back to writeable while its base is read-only (the base
    itself, an array owning its data, would let anyone do that and poison the cache)."""
    arr.flags.writeable = False
    view = arr.view()
    view.flags.writeable = False
    return view


def _frozen_cast(arr: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return _freeze(np.ascontiguousarray(arr, dtype=dtype).copy())


def _int_param(name: str, value: object, minimum: int) -> int:
    return as_int(name, value, minimum=minimum)


def _bank_size(rows_name: str, rows: int, n_fft: int) -> None:
    """A ``(rows, 1 + n_fft // 2)`` bank within the machine's memory."""
    check_memory(rows_name, rows, rows * (1 + n_fft // 2),
                 lambda: f"a bank of {rows} rows over the {1 + n_fft // 2} bins of n_fft={n_fft}")


def _real_param(name: str, value: object) -> float:
    return as_float(name, value)


def _positive_param(name: str, value: object) -> float:
    return as_float(name, value, positive=True)


def _tuned(base: float, tuning: float, per_octave: int, base_name: str, per_octave_name: str
           ) -> float:
    """``base * 2**(tuning / per_octave)``: the frequency a tuning moves ``base`` to, which
    must be a positive finite number (a ValueError naming ``tuning`` otherwise: a tuning of
    thousands of bins over- or underflows it)."""
    try:
        value = base * 2.0 ** (tuning / per_octave)
    except OverflowError:
        value = math.inf
    if not (math.isfinite(value) and value >= _TINY):
        raise ValueError(
            f"tuning={tuning} is out of range: {base_name} * 2**(tuning / {per_octave_name}) "
            f"= {base} * 2**({tuning} / {per_octave}) must be a positive finite frequency"
        )
    return value


# The most values ``constant_q`` builds its (n_bins, longest filter) complex128 bank of:
# 2**31 (32 GiB), beyond any practical setting (fmin=32.7 Hz at sr=22050 needs 84 x 11,340).
_LARGEST_BANK = 2**31


def _band_params(sr: float, fmin: object, fmax: object) -> tuple[float, float]:
    nyquist = sr / 2
    fmin_ = _real_param("fmin", fmin)
    fmax_ = nyquist if fmax is None else _real_param("fmax", fmax)
    if fmin_ < 0:
        raise ValueError(f"fmin={fmin_} is out of range: must satisfy 0 <= fmin < fmax")
    if not fmax_ > 0:  # (named, not left to the fmin < fmax check below)
        raise ValueError(f"fmax={fmax_} is out of range: must satisfy fmin < fmax <= sr/2 = "
                         f"{nyquist}")  # fmt: skip
    if not fmax_ <= nyquist:
        raise ValueError(
            f"fmax={fmax_} is out of range: must satisfy fmin < fmax <= sr/2 = {nyquist}"
        )
    if not fmin_ < fmax_:
        raise ValueError(f"fmin={fmin_} is out of range: must satisfy 0 <= fmin < fmax = {fmax_}")
    return fmin_, fmax_


# the p-norms librosa's util.normalize takes: inf (the peak), -inf (the smallest magnitude),
# 0 (the count of nonzero values) and any real p > 0
FILTER_NORMS = "np.inf, -np.inf, 0 or a real p > 0"


def filter_norm_ok(p: float) -> bool:
    """Whether ``p`` is one of FILTER_NORMS (nan is not)."""
    return p >= 0 or p == -math.inf


def _norm_param(norm: object, *, allow_slaney: bool, name: str = "norm") -> Norm:
    """A filterbank's normalization; errors name the caller's parameter (``name``: mfcc's
    is ``mel_norm``, its ``norm`` being the DCT's)."""
    if norm is None:
        return None
    allowed = ('"slaney", ' if allow_slaney else "") + "None, " + FILTER_NORMS
    if isinstance(norm, str):
        if allow_slaney and norm == "slaney":
            return norm
        raise ValueError(f"{name}={norm!r} is not supported: must be one of {allowed}")
    if isinstance(norm, numbers.Real) and not isinstance(norm, bool):
        p = float(norm)
        if filter_norm_ok(p):
            return p
    raise ValueError(f"{name}={norm!r} is not supported: must be one of {allowed}")


def dct_norm_param(norm: object) -> str | None:
    """A DCT's ``norm``: one of DCT_NORMS (an array or other unhashable value is refused by
    name, not by numpy's truth-value error)."""
    if not (norm is None or isinstance(norm, str)) or norm not in DCT_NORMS:
        raise ValueError(f"norm={norm!r} is not supported for the DCT: use 'ortho', 'forward', "
                         "'backward' or None")  # fmt: skip
    return norm


def _real_dtype(dtype: npt.DTypeLike) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.kind != "f":
        raise ValueError(f"dtype={dt} is not supported: must be a real floating dtype")
    return dt


def _complex_dtype(dtype: npt.DTypeLike) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.kind != "c":
        raise ValueError(f"dtype={dt} is not supported: must be a complex floating dtype")
    return dt


def _normalize(x: np.ndarray, norm: float | None, axis: int) -> np.ndarray:
    """Scale ``x`` to unit ``norm`` along ``axis``; near-zero slices are left unscaled.

    Slices whose norm is below the smallest normal float64 are passed through unchanged
    rather than blown up (matching librosa's ``util.normalize(fill=None)``), so empty
    filters stay exactly zero.
    """
    if norm is None:
        return x
    mag = np.abs(x)
    if norm == np.inf:
        length = np.max(mag, axis=axis, keepdims=True)
    elif norm == -np.inf:
        length = np.min(mag, axis=axis, keepdims=True)
    elif norm == 0:  # the count of nonzero values
        length = np.sum(mag > 0, axis=axis, keepdims=True, dtype=mag.dtype)
    else:
        length = np.sum(mag**norm, axis=axis, keepdims=True) ** (1.0 / norm)
    length = np.where(length < _TINY, 1.0, length)
    return x / length


def triangles(bin_freqs: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Overlapping triangles with corners at ``points``, sampled at ``bin_freqs``.

    Filter ``i`` rises from ``points[i]`` to a peak of 1 at ``points[i + 1]`` and falls to
    zero at ``points[i + 2]``; returns ``(len(points) - 2, len(bin_freqs))``.
    """
    ramps = points[:, np.newaxis] - bin_freqs[np.newaxis, :]
    widths = np.diff(points)
    rising = -ramps[:-2] / widths[:-1, np.newaxis]
    falling = ramps[2:] / widths[1:, np.newaxis]
    return np.maximum(0.0, np.minimum(rising, falling))


# --------------------------------------------------------------------------------------
# Mel scale
# --------------------------------------------------------------------------------------


def _scalar_or_array(out: np.ndarray) -> np.float64 | np.ndarray:
    return out[()] if out.ndim == 0 else out


def hz_to_mel(frequencies: npt.ArrayLike, htk: bool = False) -> np.float64 | np.ndarray:
    """Convert frequencies in Hz to mels.

    Parameters
    ----------
    frequencies : float or array_like
        Frequencies in Hz, any shape.
    htk : bool
        ``False`` (default): Slaney's Auditory Toolbox scale, linear (15 mel per
        1000 Hz) below 1 kHz and logarithmic above, as librosa's default.
        ``True``: the HTK formula ``2595 * log10(1 + f / 700)``.

    Returns
    -------
    np.float64 or np.ndarray
        Mels, float64, a scalar for scalar input, otherwise an array of the input shape.
    """
    f = np.asarray(frequencies, dtype=np.float64)
    if as_bool("htk", htk):
        return _scalar_or_array(2595.0 * np.log10(1.0 + f / 700.0))
    mels = f / _MEL_F_SP
    log_region = f >= _MEL_MIN_LOG_HZ
    # The inner where keeps log() away from non-positive inputs it would warn about.
    safe_f = np.where(log_region, f, _MEL_MIN_LOG_HZ)
    log_mels = _MEL_MIN_LOG_MEL + np.log(safe_f / _MEL_MIN_LOG_HZ) / _MEL_LOGSTEP
    return _scalar_or_array(np.where(log_region, log_mels, mels))


def mel_to_hz(mels: npt.ArrayLike, htk: bool = False) -> np.float64 | np.ndarray:
    """Convert mels to frequencies in Hz (inverse of :func:`hz_to_mel`).

    Parameters
    ----------
    mels : float or array_like
        Mel values, any shape.
    htk : bool
        Use the HTK scale instead of Slaney's (see :func:`hz_to_mel`).

    Returns
    -------
    np.float64 or np.ndarray
        Frequencies in Hz, float64, scalar for scalar input, otherwise the input shape.
    """
    m = np.asarray(mels, dtype=np.float64)
    if as_bool("htk", htk):
        return _scalar_or_array(700.0 * (10.0 ** (m / 2595.0) - 1.0))
    freqs = _MEL_F_SP * m
    log_region = m >= _MEL_MIN_LOG_MEL
    # Clamp before exp() so huge linear-region inputs cannot overflow in the unused branch.
    safe_m = np.where(log_region, m, _MEL_MIN_LOG_MEL)
    log_freqs = _MEL_MIN_LOG_HZ * np.exp(_MEL_LOGSTEP * (safe_m - _MEL_MIN_LOG_MEL))
    return _scalar_or_array(np.where(log_region, log_freqs, freqs))


def _mel_build(
    sr: float, n_fft: int, n_mels: int, fmin: float, fmax: float, htk: bool, norm: Norm
) -> np.ndarray:
    bin_freqs = np.fft.rfftfreq(n_fft, d=1.0 / sr)
    mel_points = np.linspace(hz_to_mel(fmin, htk=htk), hz_to_mel(fmax, htk=htk), n_mels + 2)
    hz_points = mel_to_hz(mel_points, htk=htk)
    weights = triangles(bin_freqs, hz_points)
    if norm == "slaney":
        # Divide by the triangle's base width in Hz so every band has ~equal area.
        weights *= (2.0 / (hz_points[2:] - hz_points[:-2]))[:, np.newaxis]
    else:
        weights = _normalize(weights, norm, axis=1)  # type: ignore[arg-type]
    # A band whose lower edge sits at 0 Hz may legitimately touch only DC; any other
    # all-zero row means the bands are narrower than the bin spacing.
    if not np.all((hz_points[:-2] == 0) | (weights.max(axis=1) > 0)):
        warnings.warn(
            f"Empty filters in the mel basis (sr={sr}, n_fft={n_fft}, n_mels={n_mels}, "
            f"fmin={fmin}, fmax={fmax}): some bands fall between FFT bins and will always "
            "be zero. Increase n_fft or reduce n_mels.",
            stacklevel=4,
        )
    return weights


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _mel_cached(
    sr: float,
    n_fft: int,
    n_mels: int,
    fmin: float,
    fmax: float,
    htk: bool,
    norm: Norm,
    dtype: np.dtype,
) -> np.ndarray:
    if dtype != _F64:
        return _frozen_cast(_mel_cached(sr, n_fft, n_mels, fmin, fmax, htk, norm, _F64), dtype)
    return _freeze(_mel_build(sr, n_fft, n_mels, fmin, fmax, htk, norm))


def mel_params(
    sr: float,
    n_fft: int,
    n_mels: int,
    fmin: float,
    fmax: float | None,
    htk: bool,
    norm: Norm,
    norm_name: str = "norm",
) -> tuple:
    sr_ = _positive_param("sr", sr)
    n_fft_ = _int_param("n_fft", n_fft, 1)
    n_mels_ = _int_param("n_mels", n_mels, 1)
    _bank_size("n_mels", n_mels_, n_fft_)
    fmin_, fmax_ = _band_params(sr_, fmin, fmax)
    return (sr_, n_fft_, n_mels_, fmin_, fmax_, as_bool("htk", htk),
            _norm_param(norm, allow_slaney=True, name=norm_name))


def mel(
    *,
    sr: float,
    n_fft: int,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: Norm = "slaney",
    dtype: npt.DTypeLike = np.float64,
) -> np.ndarray:
    """Mel filterbank matrix (librosa's ``filters.mel``).

    ``n_mels`` triangular filters whose corners are equally spaced on the mel scale
    between ``fmin`` and ``fmax``, sampled at the one-sided DFT bin frequencies
    ``k * sr / n_fft``.

    Parameters
    ----------
    sr : float > 0
        Sample rate in Hz.
    n_fft : int >= 1
        DFT size; the bank has ``1 + n_fft // 2`` columns.
    n_mels : int >= 1
        Number of mel bands (rows).
    fmin, fmax : float
        Lowest and highest band edge in Hz; ``0 <= fmin < fmax <= sr / 2``.
        ``fmax=None`` means ``sr / 2``.
    htk : bool
        HTK mel formula instead of Slaney's (see :func:`hz_to_mel`).
    norm : "slaney", None, or librosa's util.normalize norm: np.inf, -np.inf, 0 or a real p > 0
        ``"slaney"`` scales each triangle by ``2 / (upper_edge_hz - lower_edge_hz)``
        (constant area); ``None`` keeps peak height 1; a number scales each row to unit
        p-norm.
    dtype : real floating dtype
        dtype of the returned (cast, read-only) array.

    Returns
    -------
    np.ndarray, shape ``(n_mels, 1 + n_fft // 2)``, read-only
        Weights; ``bank @ |X|**power`` gives mel band energies.

    Warns
    -----
    UserWarning
        When some band covers no DFT bin (only once per parameter set, due to caching).

    Raises
    ------
    ValueError
        For out-of-range parameters; the message names the parameter, the value and the
        allowed range.
    """
    params = mel_params(sr, n_fft, n_mels, fmin, fmax, htk, norm)
    return _mel_cached(*params, _real_dtype(dtype))


# --------------------------------------------------------------------------------------
# Sparse banks
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SparseBank:
    """A filterbank stored as one contiguous run of weights per band.

    Band ``i`` has weight ``weights[i, j]`` on bin ``starts[i] + j`` for
    ``0 <= j < stops[i] - starts[i]`` and zero elsewhere, so applying it to a spectrum is
    a gather plus a short reduction rather than a dense matmul over all bins.

    Attributes
    ----------
    starts : np.ndarray of int64, shape ``(n_bands,)``
        First bin (inclusive) with nonzero weight; 0 for an all-zero band.
    stops : np.ndarray of int64, shape ``(n_bands,)``
        One past the last bin with nonzero weight; equal to ``starts`` for an all-zero
        band.
    weights : np.ndarray, shape ``(n_bands, max_width)``
        Left-aligned weights of each band, zero-padded past ``stops - starts``;
        ``max_width = max(stops - starts)``.
    n_bins : int
        Number of columns of the dense matrix (frequency bins).
    """

    starts: np.ndarray
    stops: np.ndarray
    weights: np.ndarray
    n_bins: int

    @property
    def n_bands(self) -> int:
        """Number of bands (rows of the dense matrix)."""
        return int(self.starts.shape[0])

    @property
    def max_width(self) -> int:
        """Width of the padded weight rows."""
        return int(self.weights.shape[1])

    def dense(self) -> np.ndarray:
        """Rebuild the dense ``(n_bands, n_bins)`` matrix (a fresh, writable array)."""
        out = np.zeros((self.n_bands, self.n_bins), dtype=self.weights.dtype)
        widths = self.stops - self.starts
        rows, offsets = np.nonzero(np.arange(self.max_width)[np.newaxis, :] < widths[:, None])
        out[rows, self.starts[rows] + offsets] = self.weights[rows, offsets]
        return out


def sparse_bank(dense_matrix: npt.ArrayLike) -> SparseBank:
    """Compress a dense ``(n_bands, n_bins)`` filterbank into a :class:`SparseBank`.

    Each band keeps the contiguous bin range from its first to its last nonzero weight
    (interior zeros inside that range are stored explicitly).  Works for any dtype,
    including complex.

    Parameters
    ----------
    dense_matrix : array_like, shape ``(n_bands, n_bins)``

    Returns
    -------
    SparseBank
        With read-only arrays; ``result.dense()`` reproduces ``dense_matrix`` exactly.
    """
    m = np.asarray(dense_matrix)
    if m.ndim != 2:
        raise ValueError(f"dense_matrix has shape {m.shape}: must be 2-D (n_bands, n_bins)")
    n_bands, n_bins = m.shape
    nonzero = m != 0
    has_any = nonzero.any(axis=1)
    if n_bins == 0:
        starts = np.zeros(n_bands, dtype=np.int64)
        stops = starts.copy()
    else:
        starts = np.where(has_any, nonzero.argmax(axis=1), 0).astype(np.int64)
        last = n_bins - 1 - nonzero[:, ::-1].argmax(axis=1)
        stops = np.where(has_any, last + 1, starts).astype(np.int64)
    widths = stops - starts
    max_width = int(widths.max(initial=0))
    offsets = np.arange(max_width)[np.newaxis, :]
    inside = offsets < widths[:, np.newaxis]
    cols = np.where(inside, starts[:, np.newaxis] + offsets, 0)
    gathered = np.take_along_axis(m, cols, axis=1) if n_bins else np.zeros((n_bands, 0), m.dtype)
    weights = np.where(inside, gathered, np.zeros((), dtype=m.dtype))
    return SparseBank(
        starts=_freeze(starts),
        stops=_freeze(stops),
        weights=_freeze(np.ascontiguousarray(weights, dtype=m.dtype)),
        n_bins=int(n_bins),
    )


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _mel_sparse_cached(*params: object) -> SparseBank:
    return sparse_bank(_mel_cached(*params))


def mel_sparse(
    *,
    sr: float,
    n_fft: int,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: Norm = "slaney",
    dtype: npt.DTypeLike = np.float64,
) -> SparseBank:
    """The :func:`mel` bank in :class:`SparseBank` form (same parameters, cached).

    ``mel_sparse(**kw).dense()`` equals ``mel(**kw)``; each mel triangle spans only a
    few bins, so ``weights`` is ``(n_mels, max_width)`` with ``max_width`` typically much
    smaller than ``1 + n_fft // 2``.
    """
    params = mel_params(sr, n_fft, n_mels, fmin, fmax, htk, norm)
    return _mel_sparse_cached(*params, _real_dtype(dtype))


# --------------------------------------------------------------------------------------
# Linear triangular bank
# --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _linear_cached(
    sr: float, n_fft: int, n_filter: int, fmin: float, fmax: float, dtype: np.dtype
) -> np.ndarray:
    if dtype != _F64:
        return _frozen_cast(_linear_cached(sr, n_fft, n_filter, fmin, fmax, _F64), dtype)
    # torchaudio spaces the bins over [0, sr // 2] (floor division, and n_freqs points
    # even for odd n_fft) instead of using the exact DFT bin frequencies; keep that quirk
    # so the bank is interchangeable with linear_fbanks.
    bin_freqs = np.linspace(0.0, sr // 2, 1 + n_fft // 2)
    points = np.linspace(fmin, fmax, n_filter + 2)
    return _freeze(triangles(bin_freqs, points))


def linear(
    *,
    sr: float,
    n_fft: int,
    n_filter: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    dtype: npt.DTypeLike = np.float64,
) -> np.ndarray:
    """Linearly spaced triangular filterbank (torchaudio's ``linear_fbanks``, transposed).

    ``n_filter`` unnormalised triangles (peak 1) with corners equally spaced in Hz from
    ``fmin`` to ``fmax``, sampled at ``1 + n_fft // 2`` frequencies equally spaced over
    ``[0, sr // 2]`` (torchaudio's grid, which uses integer division of ``sr``).

    Parameters
    ----------
    sr : float > 0
        Sample rate in Hz.
    n_fft : int >= 1
        DFT size; the bank has ``1 + n_fft // 2`` columns.
    n_filter : int >= 1
        Number of triangles (rows).
    fmin, fmax : float
        Lowest/highest corner in Hz, ``0 <= fmin < fmax <= sr / 2``; ``None`` = ``sr // 2``
        (torchaudio's LFCC default: the top of the grid, ``sr / 2`` for an even ``sr``).
    dtype : real floating dtype
        dtype of the returned (cast, read-only) array.

    Returns
    -------
    np.ndarray, shape ``(n_filter, 1 + n_fft // 2)``, read-only
    """
    return _linear_cached(*linear_params(sr, n_fft, n_filter, fmin, fmax), _real_dtype(dtype))


def linear_params(sr: object, n_fft: object, n_filter: object, fmin: object, fmax: object):
    """Validated, normalized ``(sr, n_fft, n_filter, fmin, fmax)`` of :func:`linear`."""
    sr_ = _positive_param("sr", sr)
    n_fft_ = _int_param("n_fft", n_fft, 1)
    n_filter_ = _int_param("n_filter", n_filter, 1)
    _bank_size("n_filter", n_filter_, n_fft_)
    if fmax is None:  # torchaudio's LFCC default, the top of linear_fbanks' grid
        if sr_ < 2:
            raise ValueError(f"sr={sr_} is out of range without an fmax: the default fmax, "
                             f"sr // 2 = {float(sr_ // 2)}, must be above fmin; pass fmax, at "
                             f"most sr/2 = {sr_ / 2}")  # fmt: skip
        fmax = float(sr_ // 2)
    fmin_, fmax_ = _band_params(sr_, fmin, fmax)
    return sr_, n_fft_, n_filter_, fmin_, fmax_


# --------------------------------------------------------------------------------------
# Chroma
# --------------------------------------------------------------------------------------


def _chroma_build(
    sr: float,
    n_fft: int,
    n_chroma: int,
    tuning: float,
    ctroct: float,
    octwidth: float | None,
    norm: float | None,
    base_c: bool,
) -> np.ndarray:
    # Work on all n_fft bins first: the width of the last kept bin depends on the next
    # bin's position, and every later step is per-column anyway.
    freqs = np.linspace(0, sr, n_fft, endpoint=False)[1:]
    a440 = _tuned(440.0, tuning, n_chroma, "440", "n_chroma")
    # Position of each bin in chroma units above C0-ish (A440 / 16 = A0).
    bin_pos = n_chroma * np.log2(freqs / (a440 / 16))
    # DC has no pitch; park it 1.5 octaves below bin 1 so it spreads over all classes.
    bin_pos = np.concatenate(([bin_pos[0] - 1.5 * n_chroma], bin_pos))
    bin_width = np.concatenate((np.maximum(np.diff(bin_pos), 1.0), [1.0]))

    half = np.round(n_chroma / 2)
    dist = bin_pos[np.newaxis, :] - np.arange(n_chroma, dtype=np.float64)[:, np.newaxis]
    # Wrap the pitch-class distance into [-half, half).  The 10 * n_chroma offset is
    # arithmetically redundant with np.mod but keeps the rounding identical to librosa.
    dist = np.remainder(dist + half + 10 * n_chroma, n_chroma) - half

    # Gaussian bumps; the factor 2 makes them half a bin-width wide.
    weights = np.exp(-0.5 * (2 * dist / bin_width[np.newaxis, :]) ** 2)
    weights = _normalize(weights, norm, axis=0)
    if octwidth is not None:
        octave_weight = np.exp(-0.5 * ((bin_pos / n_chroma - ctroct) / octwidth) ** 2)
        weights = weights * octave_weight[np.newaxis, :]
    if base_c:
        # Row 0 is A; rotate so row 0 is C (3 semitones up).
        weights = np.roll(weights, -3 * (n_chroma // 12), axis=0)
    return np.ascontiguousarray(weights[:, : 1 + n_fft // 2])


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _chroma_cached(*params: object) -> np.ndarray:
    *args, dtype = params
    if dtype != _F64:
        return _frozen_cast(_chroma_cached(*args, _F64), dtype)  # type: ignore[arg-type]
    return _freeze(_chroma_build(*args))  # type: ignore[arg-type]


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
    dtype: npt.DTypeLike = np.float64,
) -> np.ndarray:
    """Chroma filterbank projecting DFT bins onto pitch classes (librosa's ``filters.chroma``).

    Every bin contributes a Gaussian bump (in pitch-class distance, width proportional to
    the local bin spacing) to each chroma row; columns are then normalised and optionally
    weighted by a Gaussian over octaves.

    Parameters
    ----------
    sr : float > 0
        Sample rate in Hz.
    n_fft : int >= 2
        DFT size; the bank has ``1 + n_fft // 2`` columns.
    n_chroma : int >= 1
        Number of pitch classes (12 = semitones, 24 = quarter tones).
    tuning : float
        Tuning offset from A440 in fractions of a chroma bin.
    ctroct : float
        Centre, in octaves above A0 (27.5 Hz), of the octave-dominance window.
    octwidth : float > 0 or None
        Gaussian half-width, in octaves, of that window; ``None`` disables it.
    norm : None, or librosa's util.normalize norm: np.inf, -np.inf, 0 or a real p > 0
        Column normalisation applied before the octave weighting.
    base_c : bool
        Start rows at C (``True``) rather than A.
    dtype : real floating dtype
        dtype of the returned (cast, read-only) array.

    Returns
    -------
    np.ndarray, shape ``(n_chroma, 1 + n_fft // 2)``, read-only
    """
    params = chroma_params(sr, n_fft, n_chroma, tuning, ctroct, octwidth, norm, base_c)
    return _chroma_cached(*params, _real_dtype(dtype))


def chroma_params(sr, n_fft, n_chroma, tuning, ctroct, octwidth, norm, base_c) -> tuple:
    """Validated, normalized parameters of :func:`chroma`, in its order."""
    sr_ = _positive_param("sr", sr)
    # With a single bin there is no non-DC frequency to anchor the pitch classes on.
    n_fft_ = _int_param("n_fft", n_fft, 2)
    n_chroma_ = _int_param("n_chroma", n_chroma, 1)
    _bank_size("n_chroma", n_chroma_, n_fft_)
    tuning_ = _real_param("tuning", tuning)
    ctroct_ = _real_param("ctroct", ctroct)
    octwidth_ = None if octwidth is None else _positive_param("octwidth", octwidth)
    norm_ = _norm_param(norm, allow_slaney=False)
    return sr_, n_fft_, n_chroma_, tuning_, ctroct_, octwidth_, norm_, as_bool("base_c", base_c)


# --------------------------------------------------------------------------------------
# Windows (private; the public get_window lives elsewhere)
# --------------------------------------------------------------------------------------


def _window_name(window: WindowSpec) -> tuple[str, float | None]:
    """Canonical ``(name, parameter)`` of a named window; raises ValueError if unknown."""
    spec = window_spec(window, arrays=False)
    if spec.is_array:
        raise ValueError(
            f"window={window!r} is not supported here: pass a window name or a "
            "(name, parameter) tuple"
        )
    return spec.name, (spec.parameter if spec.name in PARAMETRIC_WINDOWS else None)


def _window(window: WindowSpec, n: int) -> np.ndarray:
    """Periodic window of length ``n`` as float64 (the library's one window builder)."""
    if n < 1:
        return np.ones(0, dtype=np.float64)
    return named_window(window_spec(window), n)


def _window_bandwidth(window: WindowSpec) -> float:
    """Equivalent noise bandwidth of ``window`` in bins (1.0 for a boxcar)."""
    name, _ = _window_name(window)
    if name in _TABULATED_BANDWIDTH:
        return _TABULATED_BANDWIDTH[name]
    n = 1000
    w = _window(window, n)
    return float(n * np.sum(w**2) / (np.sum(w) ** 2 + _TINY))


# --------------------------------------------------------------------------------------
# Constant-Q / variable-Q wavelets
# --------------------------------------------------------------------------------------


def relative_bandwidth(freqs: npt.ArrayLike) -> np.ndarray:
    """Relative bandwidth ``alpha`` of each frequency of a (log-spaced) filter set.

    Estimates the local resolution in bins per octave (centred differences of
    ``log2(freqs)``, one-sided at the ends) and returns
    ``alpha = (2**(2 / bpo) - 1) / (2**(2 / bpo) + 1)``, the bandwidth over centre
    frequency for which neighbouring filters meet at their half-bandwidth points
    (librosa's ``filters._relative_bandwidth``).

    Parameters
    ----------
    freqs : array_like, shape ``(n,)``, n >= 2
        Strictly positive centre frequencies in Hz, ascending.

    Returns
    -------
    np.ndarray of float64, shape ``(n,)``
        Dimensionless; for ``b`` bins per octave all entries equal ``(r**2-1)/(r**2+1)``
        with ``r = 2**(1/b)``.
    """
    f = np.asarray(freqs, dtype=np.float64)
    if f.ndim != 1 or f.shape[0] < 2:
        raise ValueError(
            f"freqs has shape {f.shape}: relative_bandwidth needs a 1-D array of 2 or more "
            "frequencies"
        )
    if not np.all(f > 0):
        raise ValueError("freqs must be strictly positive")
    logf = np.log2(f)
    bpo = np.empty_like(f)
    bpo[0] = 1 / (logf[1] - logf[0])
    bpo[-1] = 1 / (logf[-1] - logf[-2])
    bpo[1:-1] = 2 / (logf[2:] - logf[:-2])
    return (2.0 ** (2 / bpo) - 1) / (2.0 ** (2 / bpo) + 1)


def _et_relative_bandwidth(bins_per_octave: int) -> float:
    # Closed form of relative_bandwidth for equal (geometric) spacing.
    r = 2 ** (1 / bins_per_octave)
    return (r**2 - 1) / (r**2 + 1)


def vqt_default_gamma(bins_per_octave: int) -> float:
    """librosa's default VQT bandwidth offset ``gamma`` (Hz) for equal spacing.

    ``gamma = 24.7 * alpha / 0.108``: the equivalent rectangular bandwidth of auditory
    filters, ``ERB(f) = 24.7 + 0.108 f``, rescaled by the relative bandwidth ``alpha`` of
    ``bins_per_octave`` geometrically spaced bins.  :func:`constant_q` with
    ``gamma=None`` uses the same formula per bin with ``alpha`` from
    :func:`relative_bandwidth` (equal to this up to round-off).

    Parameters
    ----------
    bins_per_octave : int >= 1

    Returns
    -------
    float
        gamma in Hz.
    """
    bpo = _int_param("bins_per_octave", bins_per_octave, 1)
    return _et_relative_bandwidth(bpo) * 24.7 / 0.108


@functools.lru_cache(maxsize=_CQ_CACHE_SIZE)
def _constant_q_cached(
    sr: float,
    fmin: float,
    n_bins: int,
    bins_per_octave: int,
    tuning: float,
    filter_scale: float,
    norm: float | None,
    window: WindowSpec,
    gamma: float | None,
    dtype: np.dtype,
) -> tuple[np.ndarray, np.ndarray]:
    if dtype != _C128:
        filters, lengths = _constant_q_cached(
            sr,
            fmin,
            n_bins,
            bins_per_octave,
            tuning,
            filter_scale,
            norm,
            window,
            gamma,
            _C128,
        )
        return _frozen_cast(filters, dtype), lengths

    freqs = _tuned(fmin, tuning, bins_per_octave, "fmin", "bins_per_octave")
    nyquist = sr / 2.0
    top = math.log2(freqs) + (n_bins - 1) / bins_per_octave
    if top > math.log2(nyquist):  # (before the centres are built: they may overflow)
        raise ValueError(
            f"Wavelet basis with max frequency={2.0 ** top if top < 1024 else math.inf} "
            "would exceed the "
            f"Nyquist frequency={nyquist}: reduce fmin={fmin} or n_bins={n_bins}, or raise sr"
        )
    freqs = freqs * 2.0 ** (np.arange(n_bins, dtype=np.float64) / bins_per_octave)
    if n_bins == 1:
        alpha = np.array([_et_relative_bandwidth(bins_per_octave)])
    else:
        alpha = relative_bandwidth(freqs)
    gamma_ = alpha * 24.7 / 0.108 if gamma is None else gamma
    q = filter_scale / alpha
    lengths = q * sr / (freqs + gamma_ / alpha)

    # The filter's upper -6 dB-ish edge: centre plus half the window's bandwidth plus
    # half the VQT offset.  Past Nyquist the filter would alias.
    cutoff = np.max(freqs * (1 + 0.5 * _window_bandwidth(window) / q) + 0.5 * gamma_)
    if not cutoff <= nyquist:  # (a NaN cutoff too)
        vqt = "" if gamma is None else f", or lower gamma={gamma} (it adds gamma / 2 to the cutoff)"
        raise ValueError(
            f"Wavelet basis with max frequency={freqs[-1]} would exceed the Nyquist "
            f"frequency={nyquist} (filter cutoff {cutoff:.2f} Hz): reduce fmin={fmin} or "
            f"n_bins={n_bins}, or raise sr{vqt}"
        )

    longest = float(np.max(lengths))
    if not longest * n_bins <= _LARGEST_BANK:
        raise ValueError(
            f"fmin={fmin} (tuned to {freqs[0]:.6g} Hz with tuning={tuning}) needs filters of "
            f"{longest:.4g} samples at sr={sr}, bins_per_octave={bins_per_octave} and "
            f"filter_scale={filter_scale}: n_bins={n_bins} of them exceed the {_LARGEST_BANK} "
            "values constant_q builds; raise fmin, or lower bins_per_octave or filter_scale"
        )
    max_len = int(np.ceil(longest))
    check_memory("fmin", fmin, 2 * n_bins * max_len,  # complex128: two float64s a tap
                 lambda: f"the {n_bins} filters of up to {max_len} taps that fmin, "
                 "bins_per_octave and filter_scale ask for")  # fmt: skip
    filters = np.zeros((n_bins, max_len), dtype=np.complex128)
    for i, (length, freq) in enumerate(zip(lengths.tolist(), freqs.tolist(), strict=True)):
        # Taps at integer times floor(-L/2) .. floor(L/2) - 1 around the centre, so the
        # phase reference sits at t = 0 regardless of parity.
        t = np.arange(-length // 2, length // 2, dtype=np.float64)
        sig = np.exp(1j * (t * 2 * np.pi * freq / sr))
        sig *= _window(window, t.shape[0])
        sig = _normalize(sig, norm, axis=0)
        offset = (max_len - t.shape[0]) // 2
        filters[i, offset : offset + t.shape[0]] = sig
    return _freeze(filters), _freeze(lengths)


def constant_q(
    *,
    sr: float,
    fmin: float | None = None,
    n_bins: int = 84,
    bins_per_octave: int = 12,
    tuning: float = 0.0,
    filter_scale: float = 1.0,
    norm: float | None = 1,
    window: WindowSpec = "hann",
    gamma: float | None = 0.0,
    dtype: npt.DTypeLike = np.complex128,
) -> tuple[np.ndarray, np.ndarray]:
    """Time-domain constant-Q (``gamma=0``) or variable-Q wavelet filters.

    Filter ``k`` is a windowed complex exponential at
    ``f_k = fmin * 2**((k + tuning) / bins_per_octave)`` Hz whose length is
    ``L_k = Q * sr / (f_k + gamma / alpha_k)`` samples, ``Q = filter_scale / alpha_k``,
    with ``alpha_k`` from :func:`relative_bandwidth`.  This is exactly the basis of
    ``librosa.filters.wavelet(..., pad_fft=False)`` as used by ``librosa.cqt``/``vqt``.

    Parameters
    ----------
    sr : float > 0
        Sample rate in Hz.
    fmin : float > 0 or None
        Lowest centre frequency in Hz before tuning; ``None`` = C1 (~32.70 Hz).
    n_bins : int >= 1
        Number of filters.
    bins_per_octave : int >= 1
        Filters per octave.
    tuning : float
        Offset of all centres, in fractions of a bin.
    filter_scale : float > 0
        Scales every filter length (and so inversely the bandwidth).
    norm : None, or librosa's util.normalize norm: np.inf, -np.inf, 0 or a real p > 0
        Normalise each filter's taps to unit p-norm (1 = librosa's default).
    window : str or (str, float)
        Periodic window: "hann", "hamming", "blackman", "boxcar"/"rect", "bartlett",
        ("kaiser", beta) or ("gaussian", std in samples).
    gamma : float >= 0 or None
        VQT bandwidth offset in Hz; 0 gives the CQT, ``None`` librosa's VQT default
        (``24.7 * alpha_k / 0.108`` per bin, see :func:`vqt_default_gamma`).
    dtype : complex floating dtype
        dtype of the returned filters (``lengths`` is always float64).

    Returns
    -------
    filters : np.ndarray, shape ``(n_bins, ceil(max(lengths)))``, read-only
        Row ``k`` holds filter ``k`` centred in the row (left pad
        ``(width - len_k) // 2``), zeros elsewhere; ``len_k`` is
        ``floor(L_k / 2) + ceil(L_k / 2)`` taps.
    lengths : np.ndarray of float64, shape ``(n_bins,)``, read-only
        Fractional filter lengths ``L_k`` in samples (librosa's ``wavelet_lengths``).

    Raises
    ------
    ValueError
        For out-of-range parameters, or when the highest filter's passband would cross
        Nyquist.
    """
    sr_ = _positive_param("sr", sr)
    fmin_ = _C1_HZ if fmin is None else _positive_param("fmin", fmin)
    n_bins_ = _int_param("n_bins", n_bins, 1)
    bpo_ = _int_param("bins_per_octave", bins_per_octave, 1)
    tuning_ = _real_param("tuning", tuning)
    filter_scale_ = _positive_param("filter_scale", filter_scale)
    norm_ = _norm_param(norm, allow_slaney=False)
    name, param = _window_name(window)
    # Cache on the canonical spelling so aliases share one entry.
    window_key: WindowSpec = name if param is None else (name, param)
    gamma_ = None if gamma is None else _real_param("gamma", gamma)
    if gamma_ is not None and gamma_ < 0:
        raise ValueError(f"gamma={gamma_} is out of range: must satisfy gamma >= 0 (or None)")
    return _constant_q_cached(
        sr_,
        fmin_,
        n_bins_,
        bpo_,
        tuning_,
        filter_scale_,
        norm_,
        window_key,
        gamma_,
        _complex_dtype(dtype),
    )


# --------------------------------------------------------------------------------------
# DCT and liftering
# --------------------------------------------------------------------------------------


DCT_TYPES = (1, 2, 3, 4)  # scipy.fft.dct's types
DCT_NORMS = (None, "backward", "ortho", "forward")  # scipy.fft.dct's norms


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _dct_cached(
    n_filters: int, n_input: int, dct_type: int, norm: str | None, dtype: np.dtype
) -> np.ndarray:
    if dtype != _F64:
        return _frozen_cast(_dct_cached(n_filters, n_input, dct_type, norm, _F64), dtype)
    k = np.arange(n_filters, dtype=np.int64)[:, np.newaxis]
    n = np.arange(n_input, dtype=np.int64)[np.newaxis, :]
    # Reduce the integer phase index modulo one period before converting to radians, so
    # large k * n products do not lose precision inside cos().
    if dct_type == 1:
        period = 2 * (n_input - 1)
        basis = np.cos(np.pi * ((k * n) % period) / (n_input - 1))
        if norm == "ortho":
            edge = np.ones(n_input)
            edge[[0, -1]] = np.sqrt(0.5)
            mat = np.sqrt(2.0 / (n_input - 1)) * edge[:n_filters, np.newaxis] * edge * basis
        else:
            mat = 2.0 * basis
            mat[:, [0, -1]] *= 0.5
            if norm == "forward":
                mat /= period
    elif dct_type == 2:
        basis = np.cos(np.pi * ((k * (2 * n + 1)) % (4 * n_input)) / (2 * n_input))
        if norm == "ortho":
            scale = np.full((n_filters, 1), np.sqrt(2.0 / n_input))
            scale[0] = np.sqrt(1.0 / n_input)
            mat = scale * basis
        else:
            mat = 2.0 * basis / (2 * n_input if norm == "forward" else 1)
    elif dct_type == 3:
        basis = np.cos(np.pi * (((2 * k + 1) * n) % (4 * n_input)) / (2 * n_input))
        if norm == "ortho":
            mat = np.sqrt(2.0 / n_input) * basis
            mat[:, 0] = np.sqrt(1.0 / n_input)
        else:
            mat = 2.0 * basis
            mat[:, 0] = 1.0
            if norm == "forward":
                mat /= 2 * n_input
    else:
        basis = np.cos(np.pi * (((2 * k + 1) * (2 * n + 1)) % (8 * n_input)) / (4 * n_input))
        if norm == "ortho":
            mat = np.sqrt(2.0 / n_input) * basis
        else:
            mat = 2.0 * basis / (2 * n_input if norm == "forward" else 1)
    return _freeze(np.ascontiguousarray(mat))


def dct(
    n_filters: int,
    n_input: int,
    *,
    dct_type: int = 2,
    norm: str | None = "ortho",
    dtype: npt.DTypeLike = np.float64,
) -> np.ndarray:
    """DCT matrix ``D`` with ``D @ v == scipy.fft.dct(v, type=dct_type, norm=norm)[:n_filters]``.

    Parameters
    ----------
    n_filters : int, 1 <= n_filters <= n_input
        Number of output coefficients kept (e.g. ``n_mfcc``).
    n_input : int >= 1 (>= 2 for type 1)
        Length of the transformed vector (e.g. ``n_mels``).
    dct_type : {1, 2, 3, 4}
        DCT type with scipy's definitions (type 3 is the inverse of type 2 up to scale,
        type 4 its own inverse up to scale).
    norm : None, "backward", "ortho" or "forward"
        scipy's normalisation modes; ``None``/"backward" is unscaled, "ortho" makes the
        full square matrix orthonormal.
    dtype : real floating dtype
        dtype of the returned (cast, read-only) array.

    Returns
    -------
    np.ndarray, shape ``(n_filters, n_input)``, read-only
    """
    if dct_type not in DCT_TYPES or isinstance(dct_type, bool):
        raise ValueError(f"dct_type={dct_type!r} is not supported: must be 1, 2, 3 or 4")
    n_input_ = _int_param("n_input", n_input, 2 if dct_type == 1 else 1)
    n_filters_ = _int_param("n_filters", n_filters, 1)
    check_memory("n_filters", n_filters_, n_filters_ * n_input_,
                 lambda: f"a ({n_filters_}, {n_input_}) DCT matrix")  # fmt: skip
    if n_filters_ > n_input_:
        raise ValueError(
            f"n_filters={n_filters_} is out of range: must satisfy "
            f"1 <= n_filters <= n_input = {n_input_}"
        )
    norm = dct_norm_param(norm)
    norm_ = None if norm == "backward" else norm
    return _dct_cached(n_filters_, n_input_, int(dct_type), norm_, _real_dtype(dtype))


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _lifter_cached(n_mfcc: int, lifter: float, dtype: np.dtype) -> np.ndarray:
    if dtype != _F64:
        return _frozen_cast(_lifter_cached(n_mfcc, lifter, _F64), dtype)
    if lifter == 0:
        return _freeze(np.ones(n_mfcc, dtype=np.float64))
    k = np.arange(1, 1 + n_mfcc, dtype=np.float64)
    return _freeze(1 + (lifter / 2) * np.sin(np.pi * k / lifter))


def lifter_weights(n_mfcc: int, lifter: float, *, dtype: npt.DTypeLike = np.float64) -> np.ndarray:
    """Sinusoidal cepstral lifter, as applied by librosa's ``mfcc(lifter=...)``.

    ``w[i] = 1 + (lifter / 2) * sin(pi * (i + 1) / lifter)`` for ``i < n_mfcc``; it
    boosts the higher-order coefficients, which otherwise have small magnitude.

    Parameters
    ----------
    n_mfcc : int >= 1
        Number of cepstral coefficients.
    lifter : float >= 0
        Lifter parameter; 0 disables liftering (all weights 1).
    dtype : real floating dtype
        dtype of the returned (cast, read-only) array.

    Returns
    -------
    np.ndarray, shape ``(n_mfcc,)``, read-only
        Multiply the MFCCs (along the coefficient axis) by these weights.
    """
    n_mfcc_ = _int_param("n_mfcc", n_mfcc, 1)
    lifter_ = _real_param("lifter", lifter)
    if lifter_ < 0:
        raise ValueError(f"lifter={lifter_} is out of range: must satisfy lifter >= 0")
    return _lifter_cached(n_mfcc_, lifter_, _real_dtype(dtype))


# --------------------------------------------------------------------------------------
# Constant-Q bins -> chroma
# --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _cq_to_chroma_cached(
    n_input: int, bins_per_octave: int, n_chroma: int, fmin: float, base_c: bool
) -> np.ndarray:
    per_class = bins_per_octave // n_chroma
    # Each chroma class gathers `per_class` adjacent CQ bins, centred on the class's pitch.
    fold = np.repeat(np.eye(n_chroma), per_class, axis=1)
    fold = np.roll(fold, -(per_class // 2), axis=1)
    octaves = -(-n_input // bins_per_octave)
    fold = np.tile(fold, octaves)[:, :n_input]
    # Rotate so row 0 is C (base_c) or A, given the pitch class of the lowest CQ bin.
    pitch_class = np.mod(12.0 * np.log2(fmin / 440.0) + 69.0, 12.0)
    shift = pitch_class if base_c else pitch_class - 9.0
    fold = np.roll(fold, int(np.round(shift * n_chroma / 12.0)), axis=0)
    return _freeze(fold.astype(np.float64))


def cq_to_chroma(
    n_input: int,
    *,
    bins_per_octave: int = 12,
    n_chroma: int = 12,
    fmin: float | None = None,
    base_c: bool = True,
    dtype: npt.DTypeLike = np.float64,
) -> np.ndarray:
    """``(n_chroma, n_input)`` matrix folding constant-Q bins into pitch classes.

    librosa's ``filters.cq_to_chroma`` (without its optional smoothing window): the CQ bins
    start at ``fmin`` (default C1) with ``bins_per_octave`` per octave, which must be a
    multiple of ``n_chroma``.
    """
    n_input = _int_param("n_input", n_input, 1)
    bins_per_octave = _int_param("bins_per_octave", bins_per_octave, 1)
    n_chroma = _int_param("n_chroma", n_chroma, 1)
    if bins_per_octave % n_chroma:
        raise ValueError(
            f"bins_per_octave={bins_per_octave} must be a multiple of n_chroma={n_chroma}"
        )
    fmin_ = _C1_HZ if fmin is None else _positive_param("fmin", fmin)
    out = _cq_to_chroma_cached(n_input, bins_per_octave, n_chroma, fmin_,
                               as_bool("base_c", base_c))
    return out if np.dtype(dtype) == _F64 else _frozen_cast(out, np.dtype(dtype))


# The caches of built filters (specux.clear_cache empties them)
CACHES = (_mel_cached, _mel_sparse_cached, _linear_cached, _chroma_cached, _constant_q_cached,
          _dct_cached, _lifter_cached, _cq_to_chroma_cached)  # fmt: skip
