"""Tests for specux.meta.filters against librosa, scipy and a re-derived torchaudio formula."""

from __future__ import annotations

import dataclasses
import math
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tolerances import TOLERANCES

import specux
from specux.meta import filters as F

SRS = [8000, 16000, 22050, 44100]
N_FFTS = [1, 2, 255, 256, 1024, 2048]
C1_HZ = 32.70319566257483


def rel_err(ours: np.ndarray, ref: np.ndarray) -> float:
    ours = np.asarray(ours)
    ref = np.asarray(ref)
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    if ref.size == 0:
        return 0.0
    scale = float(np.max(np.abs(ref)))
    diff = float(np.max(np.abs(ours - ref)))
    if scale == 0.0:
        return diff
    return diff / scale


def assert_close(ours: np.ndarray, ref: np.ndarray, kind: str, context: object = "") -> None:
    """max |ours - ref| / max |ref| within TOLERANCES["filters64"] (``kind`` names the filter
    family in the message)."""
    err, bound = rel_err(ours, ref), TOLERANCES["filters64"]
    assert err <= bound, f"{kind} {context}: relative error {err:.3e} > {bound:.0e}"


# --------------------------------------------------------------------------------------
# Mel scale conversions
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("htk", [False, True])
def test_hz_mel_conversions_match_librosa(htk: bool) -> None:
    import librosa
    freqs = np.concatenate(([0.0, 1.0, 999.999, 1000.0, 1000.001], np.geomspace(1, 96000, 257)))
    assert_close(F.hz_to_mel(freqs, htk=htk), librosa.hz_to_mel(freqs, htk=htk), "convert")
    mels = np.linspace(0, 150, 301)
    assert_close(F.mel_to_hz(mels, htk=htk), librosa.mel_to_hz(mels, htk=htk), "convert")
    for f in (0.0, 440.0, 1000.0, 8000.0):
        assert_close(F.hz_to_mel(f, htk=htk), librosa.hz_to_mel(f, htk=htk), "convert", f)


@settings(max_examples=200, deadline=None)
@given(
    f=st.floats(min_value=0.0, max_value=2e5, allow_nan=False, allow_infinity=False),
    htk=st.booleans(),
)
def test_hz_mel_property(f: float, htk: bool) -> None:
    import librosa
    m = F.hz_to_mel(f, htk=htk)
    assert math.isclose(float(m), float(librosa.hz_to_mel(f, htk=htk)),
                        rel_tol=TOLERANCES["filters64"], abs_tol=TOLERANCES["mel_abs64"])
    assert math.isclose(float(F.mel_to_hz(m, htk=htk)), f, rel_tol=TOLERANCES["mel_roundtrip64"],
                        abs_tol=TOLERANCES["mel_roundtrip_hz"])


def test_hz_mel_types_and_shapes() -> None:
    scalar = F.hz_to_mel(440)
    assert isinstance(scalar, np.float64)
    assert isinstance(F.mel_to_hz(10.0, htk=True), np.float64)
    arr = F.hz_to_mel([[100, 2000], [3000, 0]])
    assert arr.shape == (2, 2) and arr.dtype == np.float64
    assert F.mel_to_hz(np.zeros((3, 0))).shape == (3, 0)
    # Slaney scale: 15 mel at exactly 1 kHz, linear below.
    assert F.hz_to_mel(1000.0) == pytest.approx(15.0, rel=TOLERANCES["mel_exact64"])
    assert F.hz_to_mel(500.0) == pytest.approx(7.5, rel=TOLERANCES["mel_exact64"])


# --------------------------------------------------------------------------------------
# Mel filterbank
# --------------------------------------------------------------------------------------

# every norm librosa.filters.mel takes (util.normalize's: -inf and 0 too)
MEL_NORMS = ["slaney", None, 1, 2, np.inf, -np.inf, 0]


@pytest.mark.parametrize("htk", [False, True])
@pytest.mark.parametrize("n_fft", N_FFTS)
@pytest.mark.parametrize("sr", SRS)
def test_mel_matches_librosa(sr: int, n_fft: int, htk: bool) -> None:
    import librosa
    nyq = sr / 2
    bands = [(0.0, None), (30.0, None), (0.0, 0.5 * nyq), (0.25 * nyq, 0.75 * nyq)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # empty-filter warnings for tiny n_fft
        for n_mels in (1, 10, 40, 128):
            for norm in MEL_NORMS:
                for fmin, fmax in bands:
                    kw = dict(sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax, htk=htk)
                    ours = F.mel(**kw, norm=norm)
                    ref = librosa.filters.mel(**kw, norm=norm, dtype=np.float64)
                    assert ours.shape == (n_mels, 1 + n_fft // 2)
                    assert ours.dtype == np.float64
                    assert_close(ours, ref, "mel", (kw, norm))


def test_mel_empty_filter_warning() -> None:
    F._mel_cached.cache_clear()
    with pytest.warns(UserWarning, match="Empty filters"):
        F.mel(sr=8000, n_fft=16, n_mels=128, fmin=100.0)


def test_mel_caching_and_readonly() -> None:
    a = F.mel(sr=16000, n_fft=512, n_mels=40)
    # Equal-valued spellings of the same parameters share one cache entry.
    assert F.mel(sr=16000.0, n_fft=512, n_mels=40, fmax=8000, norm="slaney") is a
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0, 0] = 1.0
    a32 = F.mel(sr=16000, n_fft=512, n_mels=40, dtype=np.float32)
    assert a32.dtype == np.float32
    assert not a32.flags.writeable
    assert F.mel(sr=16000, n_fft=512, n_mels=40, dtype="float32") is a32
    np.testing.assert_array_equal(a32, a.astype(np.float32))


# --------------------------------------------------------------------------------------
# Sparse banks
# --------------------------------------------------------------------------------------


def _check_sparse_invariants(bank: F.SparseBank, dense: np.ndarray) -> None:
    assert bank.starts.dtype == np.int64 and bank.stops.dtype == np.int64
    assert bank.starts.shape == bank.stops.shape == (dense.shape[0],)
    assert bank.n_bins == dense.shape[1]
    widths = bank.stops - bank.starts
    assert bank.weights.shape == (dense.shape[0], int(widths.max(initial=0)))
    for i, row in enumerate(dense):
        nz = np.flatnonzero(row)
        if nz.size == 0:
            assert widths[i] == 0
        else:
            assert (bank.starts[i], bank.stops[i]) == (nz[0], nz[-1] + 1)
        np.testing.assert_array_equal(
            bank.weights[i, : widths[i]], row[bank.starts[i] : bank.stops[i]]
        )
        assert not np.any(bank.weights[i, widths[i] :])
    np.testing.assert_array_equal(bank.dense(), dense)
    for arr in (bank.starts, bank.stops, bank.weights):
        assert not arr.flags.writeable


@pytest.mark.parametrize("htk", [False, True])
@pytest.mark.parametrize("norm", MEL_NORMS)
def test_mel_sparse(norm: object, htk: bool) -> None:
    kw = dict(sr=22050, n_fft=2048, n_mels=128, htk=htk, norm=norm)
    bank = F.mel_sparse(**kw)
    dense = F.mel(**kw)
    _check_sparse_invariants(bank, dense)
    assert bank.max_width < dense.shape[1] // 4  # the point of the sparse form
    assert F.mel_sparse(**kw) is bank
    b32 = F.mel_sparse(**kw, dtype=np.float32)
    assert b32.weights.dtype == np.float32
    np.testing.assert_array_equal(b32.dense(), F.mel(**kw, dtype=np.float32))
    with pytest.raises(dataclasses.FrozenInstanceError):
        bank.n_bins = 3  # type: ignore[misc]


def test_sparse_bank_other_banks() -> None:
    for dense in (
        F.chroma(sr=22050, n_fft=1024),
        F.linear(sr=16000, n_fft=400, n_filter=30),
        F.constant_q(sr=22050, n_bins=24)[0],
        np.zeros((3, 5)),
        np.zeros((2, 0)),
        np.zeros((0, 4)),
    ):
        _check_sparse_invariants(F.sparse_bank(dense), np.asarray(dense))
    with pytest.raises(ValueError, match="dense_matrix"):
        F.sparse_bank(np.ones(4))


@settings(max_examples=100, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=0, max_side=12),
        elements=st.sampled_from([0.0, 0.0, 0.0, 1.5, -2.0, 1e-300]),
    )
)
def test_sparse_bank_roundtrip_property(dense: np.ndarray) -> None:
    _check_sparse_invariants(F.sparse_bank(dense), dense)


# --------------------------------------------------------------------------------------
# Linear (torchaudio linear_fbanks)
# --------------------------------------------------------------------------------------


def _torchaudio_linear_numpy(n_freqs, f_min, f_max, n_filter, sample_rate):
    """linear_fbanks re-derived in torchaudio's layout: (n_freqs, n_filter)."""
    all_freqs = np.linspace(0, sample_rate // 2, n_freqs)
    f_pts = np.linspace(f_min, f_max, n_filter + 2)
    out = np.zeros((n_freqs, n_filter))
    for j in range(n_filter):
        lo, mid, hi = f_pts[j], f_pts[j + 1], f_pts[j + 2]
        for i, f in enumerate(all_freqs):
            down = (f - lo) / (mid - lo)
            up = (hi - f) / (hi - mid)
            out[i, j] = max(0.0, min(down, up))
    return out


def _torchaudio_linear_torch(n_freqs, f_min, f_max, n_filter, sample_rate):
    torch = pytest.importorskip("torch")
    kw = dict(dtype=torch.float64)
    all_freqs = torch.linspace(0, sample_rate // 2, n_freqs, **kw)
    f_pts = torch.linspace(f_min, f_max, n_filter + 2, **kw)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return torch.clamp(torch.minimum(down, up), min=0.0).numpy()


@pytest.mark.parametrize("reference", [_torchaudio_linear_numpy, _torchaudio_linear_torch])
@pytest.mark.parametrize("sr", [8000, 16000, 22050, 44100, 11025])
def test_linear_matches_torchaudio_formula(sr: int, reference) -> None:
    for n_fft in (1, 2, 255, 256, 1024):
        for n_filter in (1, 10, 40):
            for fmin, fmax in ((0.0, None), (100.0, None), (50.0, sr / 4)):
                ours = F.linear(sr=sr, n_fft=n_fft, n_filter=n_filter, fmin=fmin, fmax=fmax)
                # fmax None: torchaudio LFCC's default float(sr // 2), the grid's top
                ref = reference(1 + n_fft // 2, fmin, fmax or float(sr // 2), n_filter, sr)
                assert ours.shape == (n_filter, 1 + n_fft // 2)
                assert_close(ours, ref.T, "linear", (sr, n_fft, n_filter, fmin, fmax))


def test_linear_caching_dtype() -> None:
    a = F.linear(sr=16000, n_fft=512, n_filter=20)
    assert F.linear(sr=16000, n_fft=512, n_filter=20, fmax=8000.0) is a
    assert not a.flags.writeable
    b = F.linear(sr=16000, n_fft=512, n_filter=20, dtype=np.float32)
    assert b.dtype == np.float32 and not b.flags.writeable
    assert F.linear(sr=16000, n_fft=512, n_filter=20, dtype=np.float32) is b


# --------------------------------------------------------------------------------------
# Chroma
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_chroma", [12, 24])
@pytest.mark.parametrize("n_fft", [2, 255, 256, 1024, 2048])
@pytest.mark.parametrize("sr", SRS)
def test_chroma_matches_librosa(sr: int, n_fft: int, n_chroma: int) -> None:
    import librosa
    for tuning in (0.0, -0.3, 0.45):
        for norm in (None, 1, 2, np.inf, -np.inf, 0):
            for octwidth, ctroct, base_c in ((2, 5.0, True), (None, 5.0, False), (1.5, 4.0, True)):
                kw = dict(
                    sr=sr, n_fft=n_fft, n_chroma=n_chroma, tuning=tuning, norm=norm,
                    octwidth=octwidth, ctroct=ctroct, base_c=base_c,
                )  # fmt: skip
                ours = F.chroma(**kw)
                ref = librosa.filters.chroma(**kw, dtype=np.float64)
                assert ours.shape == (n_chroma, 1 + n_fft // 2)
                assert_close(ours, ref, "chroma", kw)


def test_chroma_odd_n_chroma_and_caching() -> None:
    import librosa
    assert_close(
        F.chroma(sr=22050, n_fft=512, n_chroma=7),
        librosa.filters.chroma(sr=22050, n_fft=512, n_chroma=7, dtype=np.float64),
        "chroma",
    )
    a = F.chroma(sr=22050, n_fft=512)
    assert F.chroma(sr=22050.0, n_fft=512, norm=2.0) is a
    assert not a.flags.writeable
    assert F.chroma(sr=22050, n_fft=512, dtype=np.float32).dtype == np.float32


# --------------------------------------------------------------------------------------
# Windows (private helper) and constant-Q / variable-Q wavelets
# --------------------------------------------------------------------------------------

WINDOWS = [
    "hann",
    "hamming",
    "blackman",
    "boxcar",
    "rect",
    "bartlett",
    ("kaiser", 8.0),
    ("kaiser", 0.5),
    ("gaussian", 3.0),
    ("gaussian", 400.0),
]


@pytest.mark.parametrize("window", WINDOWS)
def test_private_window_matches_scipy(window) -> None:
    import scipy.signal as signal
    for n in (1, 2, 3, 4, 7, 64, 1000, 4097):
        ours = F._window(window, n)
        assert ours.dtype == np.float64
        assert_close(ours, signal.get_window(window, n, fftbins=True), "window", (window, n))


def _librosa_wavelet(librosa, *, sr, fmin, n_bins, bpo, tuning, filter_scale, norm, window, gamma):
    freqs = librosa.cqt_frequencies(n_bins, fmin=fmin * 2 ** (tuning / bpo), bins_per_octave=bpo)
    return librosa.filters.wavelet(
        freqs=freqs, sr=sr, window=window, filter_scale=filter_scale, pad_fft=False,
        norm=norm, gamma=gamma, dtype=np.complex128,
    )  # fmt: skip


@pytest.mark.parametrize("gamma", [0.0, None, 5.0])
@pytest.mark.parametrize("filter_scale", [1.0, 0.5])
@pytest.mark.parametrize("bpo", [12, 24])
def test_constant_q_matches_librosa(bpo: int, filter_scale: float, gamma) -> None:
    import librosa
    for norm in (1, 2, None, 0, -np.inf):  # util.normalize's norms, as librosa's wavelets
        kw = dict(sr=22050, n_bins=84, tuning=0.0, filter_scale=filter_scale, norm=norm)
        ours, lengths = F.constant_q(**kw, bins_per_octave=bpo, gamma=gamma)
        ref, ref_lengths = _librosa_wavelet(
            librosa, fmin=C1_HZ, bpo=bpo, window="hann", gamma=gamma, **kw
        )
        assert ours.dtype == np.complex128 and lengths.dtype == np.float64
        assert ours.shape == ref.shape
        assert_close(lengths, ref_lengths, "constant_q", (bpo, filter_scale, gamma, norm))
        assert_close(ours, ref, "constant_q", (bpo, filter_scale, gamma, norm))


@pytest.mark.parametrize(
    "window", ["hamming", "blackman", "boxcar", ("kaiser", 6.0), ("gaussian", 40.0)]
)
def test_constant_q_windows_tuning_inf_norm(window) -> None:
    import librosa
    kw = dict(sr=16000, n_bins=36, tuning=0.27, filter_scale=0.8, norm=np.inf, gamma=2.0)
    ours, lengths = F.constant_q(**kw, fmin=55.0, bins_per_octave=12, window=window)
    ref, ref_lengths = _librosa_wavelet(librosa, fmin=55.0, bpo=12, window=window, **kw)
    assert_close(lengths, ref_lengths, "constant_q", window)
    assert_close(ours, ref, "constant_q", window)


def test_constant_q_single_bin_uses_equal_temperament_alpha() -> None:
    import librosa
    r = 2 ** (1 / 12)
    alpha = (r**2 - 1) / (r**2 + 1)
    ours, lengths = F.constant_q(sr=22050, fmin=110.0, n_bins=1)
    ref, ref_lengths = librosa.filters.wavelet(
        freqs=np.array([110.0]), sr=22050, pad_fft=False, alpha=alpha, dtype=np.complex128
    )
    assert_close(lengths, ref_lengths, "constant_q")
    assert_close(ours, ref, "constant_q")


def test_constant_q_nyquist_check_agrees_with_librosa() -> None:
    import librosa
    sr = 22050
    outcomes = set()
    for gamma in (0.0, None):
        for n_bins in range(100, 116):
            freqs = librosa.cqt_frequencies(n_bins, fmin=C1_HZ, bins_per_octave=12)
            _, cutoff = librosa.filters.wavelet_lengths(freqs=freqs, sr=sr, gamma=gamma)
            librosa_rejects = cutoff > sr / 2
            outcomes.add(librosa_rejects)
            if librosa_rejects:
                with pytest.raises(ValueError, match="exceed the Nyquist") as info:
                    F.constant_q(sr=sr, n_bins=n_bins, gamma=gamma)
                assert "fmin=" in str(info.value) and f"n_bins={n_bins}" in str(info.value)
            else:
                F.constant_q(sr=sr, n_bins=n_bins, gamma=gamma)
    assert outcomes == {True, False}  # the scan crossed the boundary


def test_relative_bandwidth_and_default_gamma() -> None:
    import librosa
    rng = np.random.default_rng(0)
    freqs = np.sort(rng.uniform(20, 8000, size=50))
    assert_close(
        F.relative_bandwidth(freqs), librosa.filters._relative_bandwidth(freqs=freqs), "constant_q"
    )
    for bpo in (12, 24, 36):
        freqs = librosa.cqt_frequencies(10, fmin=C1_HZ, bins_per_octave=bpo)
        alpha = librosa.filters._relative_bandwidth(freqs=freqs)
        gamma = alpha[0] * 24.7 / 0.108
        assert F.vqt_default_gamma(bpo) == pytest.approx(gamma, rel=TOLERANCES["filters64"])


def test_constant_q_defaults_caching_dtype() -> None:
    filters, lengths = F.constant_q(sr=22050)
    assert filters.shape[0] == 84
    assert filters.shape[1] == math.ceil(lengths.max())
    assert F.constant_q(sr=22050.0, fmin=C1_HZ, window="han") is F.constant_q(sr=22050)
    assert not filters.flags.writeable and not lengths.flags.writeable
    f64, l64 = F.constant_q(sr=22050, dtype=np.complex64)
    assert f64.dtype == np.complex64 and l64.dtype == np.float64
    assert not f64.flags.writeable
    assert F.constant_q(sr=22050, dtype=np.complex64)[0] is f64


# --------------------------------------------------------------------------------------
# DCT and lifter
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
@pytest.mark.parametrize("dct_type", [1, 2, 3, 4])
def test_dct_matches_scipy(dct_type: int, norm) -> None:
    import scipy.fft as sfft
    for n_input in (1, 2, 3, 5, 13, 40, 128, 1000):
        if dct_type == 1 and n_input < 2:
            continue
        ref = sfft.dct(np.eye(n_input), type=dct_type, norm=norm, axis=0)
        for n_filters in sorted({1, max(1, n_input // 3), n_input}):
            ours = F.dct(n_filters, n_input, dct_type=dct_type, norm=norm)
            assert ours.shape == (n_filters, n_input)
            assert_close(ours, ref[:n_filters], "dct", (n_filters, n_input))


@settings(max_examples=60, deadline=None)
@given(
    n_input=st.integers(2, 300),
    frac=st.floats(0.0, 1.0),
    dct_type=st.sampled_from([1, 2, 3, 4]),
    norm=st.sampled_from([None, "ortho", "forward"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_dct_matvec_property(n_input, frac, dct_type, norm, seed) -> None:
    import scipy.fft as sfft
    n_filters = max(1, round(frac * n_input))
    v = np.random.default_rng(seed).standard_normal(n_input)
    ref = sfft.dct(v, type=dct_type, norm=norm)[:n_filters]
    assert_close(F.dct(n_filters, n_input, dct_type=dct_type, norm=norm) @ v, ref, "dct")


def test_dct_caching_dtype() -> None:
    d = F.dct(13, 40)
    assert F.dct(13, 40, dct_type=2, norm="ortho") is d
    assert not d.flags.writeable
    assert F.dct(13, 40, dtype=np.float32).dtype == np.float32
    assert F.dct(13, 40, norm="backward") is F.dct(13, 40, norm=None)


@pytest.mark.parametrize("lifter", [0, 1, 22, 0.5, 100])
def test_lifter_matches_librosa_mfcc(lifter) -> None:
    import librosa
    n_mfcc = 20
    log_mel = np.random.default_rng(1).standard_normal((40, 7))
    plain = librosa.feature.mfcc(S=log_mel, n_mfcc=n_mfcc, lifter=0)
    liftered = librosa.feature.mfcc(S=log_mel, n_mfcc=n_mfcc, lifter=lifter)
    w = F.lifter_weights(n_mfcc, lifter)
    assert w.shape == (n_mfcc,) and w.dtype == np.float64 and not w.flags.writeable
    assert_close(w[:, None] * plain, liftered, "lifter", lifter)
    expected = 1 + (lifter / 2) * np.sin(np.pi * np.arange(1, 1 + n_mfcc) / lifter) if lifter else 1
    assert_close(w, np.broadcast_to(expected, (n_mfcc,)), "lifter", lifter)
    assert F.lifter_weights(n_mfcc, lifter) is w
    assert F.lifter_weights(n_mfcc, lifter, dtype=np.float32).dtype == np.float32


def test_mfcc_pipeline_matches_librosa() -> None:
    """mel -> log -> dct -> lifter with our matrices equals librosa.feature.mfcc."""
    import librosa
    sr, n_fft = 16000, 512
    power = np.abs(np.random.default_rng(2).standard_normal((1 + n_fft // 2, 9))) ** 2
    log_mel = librosa.power_to_db(F.mel(sr=sr, n_fft=n_fft, n_mels=40) @ power)
    ours = F.lifter_weights(13, 22)[:, None] * (F.dct(13, 40) @ log_mel)
    ref = librosa.feature.mfcc(S=log_mel, n_mfcc=13, lifter=22)
    assert_close(ours, ref, "dct")


# --------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------

ERROR_CASES = [
    (F.mel, dict(sr=0, n_fft=512), "sr"),
    (F.mel, dict(sr=-16000, n_fft=512), "sr"),
    (F.mel, dict(sr=float("nan"), n_fft=512), "sr"),
    (F.mel, dict(sr=16000, n_fft=0), "n_fft"),
    (F.mel, dict(sr=16000, n_fft=2.5), "n_fft"),
    (F.mel, dict(sr=16000, n_fft=512, n_mels=0), "n_mels"),
    (F.mel, dict(sr=16000, n_fft=512, fmin=-1.0), "fmin"),
    (F.mel, dict(sr=16000, n_fft=512, fmin=9000.0), "fmin"),
    (F.mel, dict(sr=16000, n_fft=512, fmin=500.0, fmax=500.0), "fmin"),
    (F.mel, dict(sr=16000, n_fft=512, fmax=9000.0), "fmax"),
    (F.mel, dict(sr=16000, n_fft=512, norm="l2"), "norm"),
    (F.mel, dict(sr=16000, n_fft=512, norm=-0.5), "norm"),  # librosa refuses p < 0 too
    (F.mel, dict(sr=16000, n_fft=512, norm=-2), "norm"),
    (F.mel, dict(sr=16000, n_fft=512, dtype=np.int32), "dtype"),
    (F.mel, dict(sr=16000, n_fft=512, dtype=np.complex128), "dtype"),
    (F.mel_sparse, dict(sr=16000, n_fft=512, fmax=8001), "fmax"),
    (F.linear, dict(sr=16000, n_fft=512, n_filter=0), "n_filter"),
    (F.linear, dict(sr=16000, n_fft=512, fmax=8500.0), "fmax"),
    (F.linear, dict(sr=16000, n_fft=-4), "n_fft"),
    (F.chroma, dict(sr=22050, n_fft=1), "n_fft"),
    (F.chroma, dict(sr=0, n_fft=512), "sr"),
    (F.chroma, dict(sr=22050, n_fft=512, n_chroma=0), "n_chroma"),
    (F.chroma, dict(sr=22050, n_fft=512, octwidth=0), "octwidth"),
    (F.chroma, dict(sr=22050, n_fft=512, norm="slaney"), "norm"),
    (F.chroma, dict(sr=22050, n_fft=512, tuning=float("inf")), "tuning"),
    (F.chroma, dict(sr=22050, n_fft=512, tuning=1e6), "tuning"),  # 2**(tuning/12) overflows
    (F.chroma, dict(sr=22050, n_fft=512, tuning=-1e300), "tuning"),  # ... underflows to 0
    (F.constant_q, dict(sr=0), "sr"),
    (F.constant_q, dict(sr=22050, fmin=0.0), "fmin"),
    (F.constant_q, dict(sr=22050, tuning=1e300), "tuning"),
    (F.constant_q, dict(sr=22050, tuning=-1e300), "tuning"),
    # filters of 3.8e7 samples: a 47.8 GiB bank (MemoryError before), 8e254 samples for the
    # tuning (numpy's "Maximum allowed dimension exceeded" before)
    (F.constant_q, dict(sr=22050, fmin=0.01), "fmin"),
    (F.constant_q, dict(sr=22050, tuning=-1e4), "fmin"),
    (F.constant_q, dict(sr=22050, n_bins=0), "n_bins"),
    (F.constant_q, dict(sr=22050, bins_per_octave=0), "bins_per_octave"),
    (F.constant_q, dict(sr=22050, filter_scale=0), "filter_scale"),
    (F.constant_q, dict(sr=22050, gamma=-1.0), "gamma"),
    (F.constant_q, dict(sr=22050, norm=-1), "norm"),
    (F.constant_q, dict(sr=22050, window="triangle-ish"), "window"),
    (F.constant_q, dict(sr=22050, window="kaiser"), "window"),
    (F.constant_q, dict(sr=22050, dtype=np.float64), "dtype"),
    (F.constant_q, dict(sr=22050, n_bins=120), "n_bins"),
    (F.constant_q, dict(sr=8000, fmin=3000.0, n_bins=12), "fmin"),
    (F.dct, dict(n_filters=13, n_input=40, dct_type=5), "dct_type"),
    (F.dct, dict(n_filters=13, n_input=40, dct_type=0), "dct_type"),
    (F.dct, dict(n_filters=1, n_input=1, dct_type=1), "n_input"),
    (F.dct, dict(n_filters=41, n_input=40), "n_filters"),
    (F.dct, dict(n_filters=0, n_input=40), "n_filters"),
    (F.dct, dict(n_filters=13, n_input=40, norm="unitary"), "norm"),
    (F.lifter_weights, dict(n_mfcc=13, lifter=-1), "lifter"),
    (F.lifter_weights, dict(n_mfcc=0, lifter=22), "n_mfcc"),
    (F.vqt_default_gamma, dict(bins_per_octave=0), "bins_per_octave"),
]


@pytest.mark.parametrize(
    ("func", "kwargs", "param"),
    ERROR_CASES,
    ids=[f"{f.__name__}-{p}-{i}" for i, (f, _, p) in enumerate(ERROR_CASES)],
)
def test_validation_errors_name_the_parameter(func, kwargs, param) -> None:
    # The message starts with the parameter's name ("n_fft=0 is ...", "n_fft must be ...").
    with pytest.raises(ValueError, match=rf"\b{re.escape(param)}\b"):
        func(**kwargs)


def test_validation_message_gives_value_and_range() -> None:
    expected = "fmax=9000.0 is out of range: must satisfy fmin < fmax <= sr/2 = 8000.0"
    with pytest.raises(ValueError, match=re.escape(expected)):
        F.mel(sr=16000, n_fft=512, fmax=9000.0)
    with pytest.raises(ValueError, match=re.escape("n_mels=0 is out of range: must be >= 1")):
        F.mel(sr=16000, n_fft=512, n_mels=0)


def test_relative_bandwidth_needs_two_freqs() -> None:
    with pytest.raises(ValueError, match="freqs"):
        F.relative_bandwidth([440.0])


# --------------------------------------------------------------------------------------
# Import hygiene: numpy only
# --------------------------------------------------------------------------------------


def test_module_imports_with_numpy_only() -> None:
    """Load filters.py with scipy/torch/librosa imports blocked and parent packages stubbed.

    The parent ``specux`` packages are replaced by empty namespace stubs so that this checks
    the module itself, whatever the package ``__init__`` files import.
    """
    module_path = Path(F.__file__).resolve()
    meta_dir = module_path.parent
    code = textwrap.dedent(
        f"""
        import importlib.abc, sys, types

        BLOCKED = ("scipy", "torch", "librosa")

        class Blocker(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError("blocked import of " + name)
                return None

        sys.meta_path.insert(0, Blocker())
        stubs = (("specux", {str(meta_dir.parent)!r}), ("specux.meta", {str(meta_dir)!r}))
        for name, folder in stubs:
            stub = types.ModuleType(name)
            stub.__path__ = [folder]
            sys.modules[name] = stub

        import specux.meta.filters as f

        f.mel(sr=16000, n_fft=512)
        f.mel_sparse(sr=16000, n_fft=512)
        f.chroma(sr=22050, n_fft=512)
        f.linear(sr=16000, n_fft=512)
        f.constant_q(sr=22050, window=("kaiser", 5.0))
        f.dct(13, 40, dct_type=1)
        f.lifter_weights(13, 22)
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        assert not leaked, leaked
        print("numpy-only OK")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "numpy-only OK" in proc.stdout


def test_transposed_matrix_spec_names_the_transpose():
    from specux.meta import matrices

    spec = matrices.mel_spec(sr=16000, n_fft=512, n_mels=40, fmin=0.0, fmax=None, htk=False,
                             norm="slaney")  # fmt: skip
    t = spec.transposed()
    assert matrices.shape(t) == matrices.shape(spec)[::-1] == (257, 40)
    assert np.array_equal(matrices.matrix(t), matrices.matrix(spec).T)
    assert t.transposed() == spec
    assert matrices.MatrixSpec.from_key(t.as_key()) == t
    assert matrices.transposed_key(spec.as_key()) == t.as_key()  # the cached key form
    assert matrices.transposed_key(t.as_key()) == spec.as_key()


def test_clear_cache_drops_the_host_array_caches() -> None:
    # windows, filters and padding maps are cached by parameters (entries, not bytes: a
    # window of n_fft 2**23 is 64 MB); specux.clear_cache() empties those caches, and arrays
    # a caller holds stay valid
    from specux.kernels.cpu import frames
    from specux.kernels.cpu import stft as cpu_stft
    from specux.meta import windows

    x = np.random.default_rng(0).standard_normal(3000)
    before = specux.stft(x, n_fft=512, pad_mode="reflect")
    bank = F.mel(sr=22050, n_fft=512, n_mels=40)
    specux.clear_cache()
    caches = (windows._named_window, windows._cast, cpu_stft.named_full_window,
              frames.pad_sources, *F.CACHES)  # fmt: skip
    assert all(c.cache_info().currsize == 0 for c in caches)
    assert bank.shape == (40, 257) and bank.any()
    np.testing.assert_array_equal(specux.stft(x, n_fft=512, pad_mode="reflect"), before)
    np.testing.assert_array_equal(F.mel(sr=22050, n_fft=512, n_mels=40), bank)
