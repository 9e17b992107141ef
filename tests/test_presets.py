"""specux.presets.librosa against librosa, specux.presets.torchaudio against a float64
re-derivation of torchaudio's formulas (torchaudio itself is not a test dependency)."""

from __future__ import annotations

import inspect
import math

import librosa
import numpy as np
import pytest
from tolerances import CQT_TOLERANCES, TOLERANCES, rel_l2, rel_peak

import specux
from specux.presets import librosa as sl

torch = pytest.importorskip("torch")
from specux.presets import torchaudio as ta  # noqa: E402 - needs torch

# torchaudio's defaults (n_fft=400, n_mels=128) leave some mel filters empty; it warns too.
pytestmark = pytest.mark.filterwarnings("ignore:at least one mel filter is all zero")

F64 = TOLERANCES["float64"]
F32 = TOLERANCES["float32_peak"]


def _signal(shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _levels(shape, levels, seed=0):
    """Signals whose leading rows differ in level (so a shared top_db floor matters)."""
    x = _signal(shape, seed)
    return x * np.asarray(levels, dtype=np.float64).reshape(-1, *([1] * (len(shape) - 1)))


# =============================================================================================
# librosa preset


def _librosa_defaults(*functions):
    out = {}
    for function in reversed(functions):  # the first function's defaults win
        for name, p in inspect.signature(function).parameters.items():
            if p.default is not inspect.Parameter.empty:
                out[name] = p.default
    return out


@pytest.mark.parametrize(
    "ours,theirs",
    [
        (sl.stft, (librosa.stft,)),
        (sl.istft, (librosa.istft,)),
        (sl.melspectrogram, (librosa.feature.melspectrogram, librosa.filters.mel)),
        (sl.mfcc, (librosa.feature.mfcc, librosa.feature.melspectrogram, librosa.filters.mel)),
        (sl.chroma_stft, (librosa.feature.chroma_stft, librosa.filters.chroma)),
        (sl.chroma_cqt, (librosa.feature.chroma_cqt,)),
        (sl.cqt, (librosa.cqt,)),
        (sl.vqt, (librosa.vqt,)),
        (sl.power_to_db, (librosa.power_to_db,)),
        (sl.amplitude_to_db, (librosa.amplitude_to_db,)),
    ],
)
def test_librosa_preset_defaults_are_librosas(ours, theirs):
    reference = _librosa_defaults(*theirs)
    for name, p in inspect.signature(ours).parameters.items():
        if name in ("backend",) or p.default is inspect.Parameter.empty:
            continue
        assert name in reference, name
        assert p.default == reference[name] or (p.default is None and reference[name] is None), (
            name, p.default, reference[name],
        )  # fmt: skip


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(n_fft=512, hop_length=100, win_length=400, window="hamming", pad_mode="reflect"),
        dict(n_fft=256, center=False, window=("kaiser", 6.0)),
    ],
)
def test_librosa_stft_istft(kwargs):
    y = _signal((2, 5000))
    got, ref = sl.stft(y, **kwargs), librosa.stft(y, **kwargs)
    assert got.shape == ref.shape and got.dtype == ref.dtype == np.complex128
    assert rel_l2(got, ref) <= F64
    inverse = {k: v for k, v in kwargs.items() if k != "pad_mode"}
    # center=False (the kaiser case): the envelope is small at the edges, so the F64 bound
    # is relative to the output's norm, which the edge samples' rounding does not reach
    assert rel_l2(sl.istft(ref, **inverse), librosa.istft(ref, **inverse)) <= F64
    for length in (4000, 5000, 0):  # 0: not given, as librosa's `if length:`
        got = sl.istft(ref, length=length, **inverse)
        expected = librosa.istft(ref, length=length, **inverse)
        assert got.shape == expected.shape and rel_l2(got, expected) <= F64


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_librosa_istft_leaves_vanishing_envelope_samples_as_librosa_does(dtype):
    """Where the window-sum-square envelope vanishes, librosa divides only where it is above
    the dtype's ``tiny`` and leaves the overlap-add elsewhere; the preset does the same
    (``specux.istft(nola="keep")``), where specux.istft (like torch.istft) refuses. Cases:
    center=False with hann (zero at the first sample, and an envelope near 5e-12 next to
    it, divided), and lengths past the frames' span. Dividing by such envelopes magnifies
    rounding (the two libraries differ by 2.5e-12 in float64), so each is held to the
    signal it reconstructs: ours within float32_vs_numpy times librosa's error."""
    y = _signal(5000)
    for kwargs in (dict(center=False), dict(center=False, n_fft=512, hop_length=128),
                   dict(length=7000), dict(center=False, length=6000)):  # fmt: skip
        forward = {k: v for k, v in kwargs.items() if k != "length"}
        S = librosa.stft(y, **forward).astype(dtype)
        expected = librosa.istft(S, **kwargs)
        with pytest.raises(ValueError, match="NOLA"):
            specux.istft(S, **kwargs)
        got = sl.istft(S, **kwargs)
        assert got.shape == expected.shape and got.dtype == expected.dtype, kwargs
        n_fft, hop = forward.get("n_fft", 2048), forward.get("hop_length", 512)
        covered = 5000 if kwargs.get("center", True) else (5000 - n_fft) // hop * hop + n_fft
        ref = np.zeros(expected.shape)
        ref[: min(covered, ref.size)] = y[: min(covered, ref.size)]
        if not kwargs.get("center", True):
            assert got[0] == expected[0] == 0.0  # hann's zero: the overlap-add itself
            ref[0] = 0.0
        floor = F64 if dtype == np.complex128 else TOLERANCES["float32_floor"]
        theirs = max(rel_l2(expected, ref), floor)
        assert rel_l2(got, ref) <= TOLERANCES["float32_vs_numpy"] * theirs, kwargs


MEL_CASES = [
    dict(),
    dict(sr=16000, n_fft=512, hop_length=160, n_mels=40, fmin=20.0, fmax=7600.0),
    dict(sr=44100, n_fft=1024, win_length=800, window="blackman", htk=True, norm=None),
    dict(sr=8000, n_fft=256, hop_length=64, n_mels=24, power=1.0, norm=2.0, center=False),
]


@pytest.mark.parametrize("kwargs", MEL_CASES)
def test_librosa_melspectrogram(kwargs):
    y = _signal((2, 12000))
    got = sl.melspectrogram(y, **kwargs)
    ref = librosa.feature.melspectrogram(y=y, dtype=np.float64, **kwargs)
    assert got.shape == ref.shape and got.dtype == np.float64
    assert rel_l2(got, ref) <= F64


def test_librosa_melspectrogram_float32_and_torch():
    y = _signal((2, 12000))
    ref = librosa.feature.melspectrogram(y=y, dtype=np.float64)
    got32 = sl.melspectrogram(y.astype(np.float32))
    assert got32.dtype == np.float32 and rel_peak(got32, ref) <= F32
    got_torch = sl.melspectrogram(torch.from_numpy(y))
    assert isinstance(got_torch, torch.Tensor) and rel_l2(got_torch.numpy(), ref) <= F64


MFCC_CASES = [
    dict(),
    dict(sr=16000, n_mfcc=13, n_fft=512, hop_length=160, n_mels=40, lifter=22),
    dict(n_mfcc=30, dct_type=3, norm=None, htk=True, mel_norm=None, fmax=8000.0),
    dict(n_mfcc=12, dct_type=1, n_mels=64, power=1.0),
]


@pytest.mark.parametrize("kwargs", MFCC_CASES)
@pytest.mark.parametrize("shape", [(20000,), (1, 20000)])
def test_librosa_mfcc_one_signal(kwargs, shape):
    y = _signal(shape)
    got, ref = sl.mfcc(y, **kwargs), librosa.feature.mfcc(y=y, dtype=np.float64, **kwargs)
    assert got.shape == ref.shape and rel_l2(got, ref) <= F64


@pytest.mark.parametrize("kwargs", MFCC_CASES[:2])
def test_librosa_mfcc_batch_clips_against_the_loudest_signal(kwargs):
    # librosa's power_to_db floor is the max of the whole array minus 80 dB: a signal 90 dB
    # below another is floored by the loud one, unlike specux.mfcc (per signal).
    y = _levels((3, 2, 16000), [1.0, 1e-3, 10**-4.5])
    got, ref = sl.mfcc(y, **kwargs), librosa.feature.mfcc(y=y, dtype=np.float64, **kwargs)
    assert got.shape == ref.shape and rel_l2(got, ref) <= F64
    per_signal = specux.mfcc(y, **{"sr": 22050, "hop_length": 512, **kwargs})
    assert rel_l2(per_signal, ref) > 1e-3
    got_torch = sl.mfcc(torch.from_numpy(y), **kwargs)
    assert rel_l2(got_torch.numpy(), ref) <= F64


def test_librosa_batch_mfcc_dct_types_and_n_mfcc_check():
    # the batch path builds its DCT rows from the same spec as specux.mfcc: its checks name
    # librosa's n_mfcc / n_mels, and every DCT type and lifter matches librosa
    y = _levels((2, 16000), [1.0, 0.1])
    for kwargs in MFCC_CASES[2:]:
        got, ref = sl.mfcc(y, **kwargs), librosa.feature.mfcc(y=y, dtype=np.float64, **kwargs)
        assert got.shape == ref.shape and rel_l2(got, ref) <= F64, kwargs
    with pytest.raises(ValueError, match=r"n_mfcc=200 is out of range: .*\(n_mels=128\)"):
        sl.mfcc(y, n_mfcc=200)


def test_librosa_float16_signal_computes_and_returns_float32():
    # librosa computes a float16 signal in float32 (its stft is complex64); the preset does
    # too, where specux's functions keep float16 storage (a 0.9-amplitude tone's unnormalized
    # mel power, ~2.5e5, overflows float16)
    t = np.arange(22050) / 22050
    y = (0.9 * np.sin(2 * np.pi * 440 * t)).astype(np.float16)
    y32 = y.astype(np.float32)
    calls = [
        (lambda s: sl.stft(s), lambda s: librosa.stft(s)),
        (lambda s: sl.melspectrogram(s, norm=None),
         lambda s: librosa.feature.melspectrogram(y=s, norm=None)),
        (lambda s: sl.mfcc(s), lambda s: librosa.feature.mfcc(y=s)),
        (lambda s: sl.chroma_stft(s, tuning=0.0),
         lambda s: librosa.feature.chroma_stft(y=s, tuning=0.0)),
    ]  # fmt: skip
    for ours, theirs in calls:
        got, ref = ours(y), theirs(y)
        assert got.dtype == ref.dtype and got.dtype in (np.float32, np.complex64)
        assert np.all(np.isfinite(got))
        assert np.array_equal(got, ours(y32))  # the float32 computation exactly
        assert rel_peak(got, ref) <= F32
    assert specux.melspectrogram(y, sr=22050, norm=None).dtype == np.float16  # specux's rule


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),  # tuning=None: estimated, as librosa
        dict(tuning=0.0),
        dict(sr=44100, n_fft=4096, hop_length=1024, tuning=-0.2, n_chroma=24, norm=2.0),
        dict(tuning=0.1, norm=None, ctroct=4.0, octwidth=None, base_c=False, window="hamming"),
        dict(tuning=0.0, norm=-np.inf),
        dict(tuning=0.0, norm=0),
    ],
)
def test_librosa_chroma_stft(kwargs):
    t = np.arange(30000) / kwargs.get("sr", 22050)
    tone = np.sin(2 * np.pi * 446.0 * t) + 0.5 * np.sin(2 * np.pi * 669.0 * t)
    y = np.stack([tone, tone + 0.1 * _signal(t.shape)])
    got = sl.chroma_stft(y, **kwargs)
    ref = librosa.feature.chroma_stft(y=y, dtype=np.float64, **kwargs)
    assert got.shape == ref.shape and rel_l2(got, ref) <= F64


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),  # tuning=None: estimated, as librosa
        dict(tuning=0.0, norm=2.0, threshold=0.05, n_octaves=5, fmin=65.0),
        dict(tuning=0.1, bins_per_octave=None, n_chroma=12, norm=None, threshold=None),
        dict(tuning=0.0, n_chroma=24, bins_per_octave=48, n_octaves=5, norm=1),
    ],
)
def test_librosa_chroma_cqt(kwargs):
    """The preset maps librosa's arguments onto specux.chroma(source="cqt") (equal bits), and
    lands near librosa.feature.chroma_cqt: librosa's multirate CQT differs from the direct
    one by ~1.5e-2 of its peak (tests/test_cqt.py), which the fold and the normalization
    carry into the chroma (0.1 of the peak bounds it on this tonal signal)."""
    t = np.arange(3 * 22050) / 22050
    tone = np.sin(2 * np.pi * 446.0 * t) + 0.5 * np.sin(2 * np.pi * 669.0 * t)
    y = np.stack([tone, tone + 0.1 * _signal(t.shape)])
    got = sl.chroma_cqt(y, **kwargs)
    mapped = dict(kwargs)
    if mapped.get("bins_per_octave", 36) is None:
        mapped["bins_per_octave"] = mapped.get("n_chroma", 12)
    if "threshold" in mapped and mapped["threshold"] is None:
        mapped["threshold"] = 0.0
    mapped.setdefault("tuning", None)
    mapped.setdefault("norm", np.inf)
    np.testing.assert_array_equal(got, specux.chroma(y, sr=22050, source="cqt", **mapped))
    ref = librosa.feature.chroma_cqt(y=y, **kwargs)
    assert got.shape == ref.shape
    peak = np.max(np.abs(ref))
    assert np.max(np.abs(got - ref)) <= CQT_TOLERANCES["librosa_chroma_preset"] * peak


def test_librosa_chroma_cqt_refuses_what_it_does_not_take():
    y = _signal((4000,))
    with pytest.raises(ValueError, match="window"):
        sl.chroma_cqt(y, window=np.ones(3))
    with pytest.raises(ValueError, match="cqt_mode='hybrid'"):
        sl.chroma_cqt(y, cqt_mode="hybrid")
    with pytest.raises(TypeError):
        sl.chroma_cqt(y, C=np.ones((84, 10)))


@pytest.mark.parametrize("function", ["power_to_db", "amplitude_to_db"])
@pytest.mark.parametrize(
    "kwargs",
    [dict(), dict(ref=np.max), dict(ref=np.min, top_db=None), dict(ref=np.mean),
     dict(ref=np.median), dict(ref=2.5, amin=1e-6, top_db=40.0), dict(top_db=None)],
)
def test_librosa_db(function, kwargs):
    """The dB conversions as librosa's, numpy and torch input alike (numpy's reductions as
    ``ref`` included: they run as the tensor's own, np.max once raised for a tensor)."""
    S = np.abs(_levels((3, 40, 50), [1.0, 1e-3, 1e-6])) ** 2
    ours, theirs = getattr(sl, function), getattr(librosa, function)
    ref = theirs(S, **kwargs)
    got = ours(S, **kwargs)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert rel_l2(got, ref) <= F64
    got_torch = ours(torch.from_numpy(S), **kwargs)
    assert isinstance(got_torch, torch.Tensor) and rel_l2(got_torch.numpy(), ref) <= F64
    got32 = ours(S.astype(np.float32), **kwargs)
    assert got32.dtype == theirs(S.astype(np.float32), **kwargs).dtype == np.float32


def test_librosa_db_edge_cases():
    D = librosa.stft(_signal(4000), n_fft=256)
    with pytest.warns(UserWarning, match="complex"):
        got = sl.power_to_db(D)
    with pytest.warns(UserWarning):
        ref = librosa.power_to_db(D)
    assert rel_l2(got, ref) <= F64
    with pytest.warns(UserWarning, match="complex"):
        got = sl.amplitude_to_db(D)
    with pytest.warns(UserWarning):
        ref = librosa.amplitude_to_db(D)
    assert rel_l2(got, ref) <= F64
    assert float(sl.power_to_db(3.0)) == pytest.approx(float(librosa.power_to_db(3.0)), rel=F64)
    with pytest.raises(ValueError, match="amin"):
        sl.power_to_db(np.ones(3), amin=0.0)
    with pytest.raises(ValueError, match="top_db"):
        sl.amplitude_to_db(np.ones(3), top_db=-1.0)


@pytest.mark.parametrize("name", ["cqt", "vqt"])
def test_librosa_constant_q_when_available(name):
    if not hasattr(specux, name):
        assert not hasattr(sl, name)
        pytest.skip(f"specux.{name} is not in this version")
    y = _signal((2, 8000))
    got = getattr(sl, name)(y, n_bins=36, hop_length=256)
    np.testing.assert_array_equal(
        got, getattr(specux, name)(y, sr=22050, n_bins=36, hop_length=256)
    )


# =============================================================================================
# torchaudio preset: the reference, re-derived from torchaudio's documented formulas


def ref_window(win_length):
    return torch.hann_window(win_length, dtype=torch.float64).numpy()


def ref_spectrogram(x, n_fft=400, win_length=None, hop_length=None, pad=0, window=None,
                    power=2.0, normalized=False, center=True, pad_mode="reflect",
                    onesided=True):  # fmt: skip
    """torch.stft framing (centred, reflect-padded) + torchaudio's pad / normalization."""
    win_length = win_length or n_fft
    hop_length = hop_length or win_length // 2
    w = ref_window(win_length) if window is None else window
    x = np.asarray(x, dtype=np.float64)
    lead = [(0, 0)] * (x.ndim - 1)
    if pad:
        x = np.pad(x, lead + [(pad, pad)])
    if center:
        x = np.pad(x, lead + [(n_fft // 2, n_fft // 2)], mode=pad_mode)
    full = np.zeros(n_fft)
    left = (n_fft - win_length) // 2
    full[left : left + win_length] = w
    count = 1 + (x.shape[-1] - n_fft) // hop_length
    frames = x[..., np.arange(count)[:, None] * hop_length + np.arange(n_fft)] * full
    spec = np.fft.rfft(frames) if onesided else np.fft.fft(frames)
    spec = np.swapaxes(spec, -1, -2)
    if normalized == "frame_length":
        spec = spec / math.sqrt(n_fft)
    elif normalized is True or normalized == "window":
        spec = spec / math.sqrt(np.sum(w**2))
    return spec if power is None else np.abs(spec) ** power


def ref_istft(S, length=None, n_fft=400, win_length=None, hop_length=None, pad=0,
              normalized=False, center=True):  # fmt: skip
    """torch.istft: overlap-add of windowed irffts over the window-square envelope."""
    win_length = win_length or n_fft
    hop_length = hop_length or win_length // 2
    w = ref_window(win_length)
    if normalized is True or normalized == "window":
        S = S * math.sqrt(np.sum(w**2))
    full = np.zeros(n_fft)
    left = (n_fft - win_length) // 2
    full[left : left + win_length] = w
    norm = "ortho" if normalized == "frame_length" else "backward"
    frames = np.fft.irfft(np.swapaxes(S, -1, -2), n=n_fft, norm=norm) * full
    count = frames.shape[-2]
    span = n_fft + hop_length * (count - 1)
    y = np.zeros((*frames.shape[:-2], span))
    envelope = np.zeros(span)
    for t in range(count):
        y[..., t * hop_length : t * hop_length + n_fft] += frames[..., t, :]
        envelope[t * hop_length : t * hop_length + n_fft] += full**2
    start = n_fft // 2 if center else 0
    target = None if length is None else length + 2 * pad
    stop = span - start if target is None else start + target
    out = y[..., start:stop] / envelope[start:stop]
    if target is not None and out.shape[-1] < target:
        out = np.pad(out, [(0, 0)] * (out.ndim - 1) + [(0, target - out.shape[-1])])
    if length is not None and pad > 0:
        out = out[..., pad:-pad]
    return out


def _hz_to_mel(f, mel_scale):
    f = np.asarray(f, dtype=np.float64)
    if mel_scale == "htk":
        return 2595.0 * np.log10(1.0 + f / 700.0)
    linear = f / (200.0 / 3)
    logarithmic = 15.0 + np.log(np.maximum(f, 1e-300) / 1000.0) / (math.log(6.4) / 27.0)
    return np.where(f >= 1000.0, logarithmic, linear)


def _mel_to_hz(m, mel_scale):
    if mel_scale == "htk":
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    return np.where(m >= 15.0, 1000.0 * np.exp(math.log(6.4) / 27.0 * (m - 15.0)),
                    200.0 / 3 * m)  # fmt: skip


def _triangles(all_freqs, f_pts):
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts[None, :] - all_freqs[:, None]
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return np.maximum(0.0, np.minimum(down, up))  # (n_freqs, n_filters)


def ref_mel_fbanks(n_freqs, f_min, f_max, n_mels, sample_rate, norm=None, mel_scale="htk"):
    all_freqs = np.linspace(0, sample_rate // 2, n_freqs)
    m_pts = np.linspace(_hz_to_mel(f_min, mel_scale), _hz_to_mel(f_max, mel_scale), n_mels + 2)
    f_pts = _mel_to_hz(m_pts, mel_scale)
    fb = _triangles(all_freqs, f_pts)
    if norm == "slaney":
        fb = fb * (2.0 / (f_pts[2 : n_mels + 2] - f_pts[:n_mels]))[None, :]
    return fb


def ref_linear_fbanks(n_freqs, f_min, f_max, n_filter, sample_rate):
    all_freqs = np.linspace(0, sample_rate // 2, n_freqs)
    return _triangles(all_freqs, np.linspace(f_min, f_max, n_filter + 2))


def ref_create_dct(n_mfcc, n_mels, norm):
    n = np.arange(n_mels, dtype=np.float64)
    k = np.arange(n_mfcc, dtype=np.float64)[:, None]
    dct = np.cos(math.pi / n_mels * (n + 0.5) * k)
    if norm is None:
        dct = dct * 2.0
    else:
        dct[0] *= 1.0 / math.sqrt(2.0)
        dct = dct * math.sqrt(2.0 / n_mels)
    return dct.T  # (n_mels, n_mfcc)


def ref_amplitude_to_db(x, multiplier, amin, db_multiplier, top_db=None):
    x_db = multiplier * np.log10(np.maximum(x, amin)) - multiplier * db_multiplier
    if top_db is None:
        return x_db
    shape = x_db.shape
    channels = shape[-3] if x_db.ndim > 2 else 1
    packed = x_db.reshape(-1, channels, shape[-2], shape[-1])
    floor = packed.max(axis=(-3, -2, -1), keepdims=True) - top_db
    return np.maximum(packed, floor).reshape(shape)


def _apply_bank(spec, fb):  # torchaudio: (..., time, freq) @ (freq, bands) -> (..., bands, time)
    return np.swapaxes(np.swapaxes(spec, -1, -2) @ fb, -1, -2)


MEL_DEFAULTS = dict(n_fft=400, win_length=None, hop_length=None, f_min=0.0, f_max=None, pad=0,
                    n_mels=128, power=2.0, normalized=False, center=True, pad_mode="reflect",
                    norm=None, mel_scale="htk")  # fmt: skip


def ref_melspectrogram(x, sample_rate=16000, **kwargs):
    a = {**MEL_DEFAULTS, **kwargs}
    spec = ref_spectrogram(x, a["n_fft"], a["win_length"], a["hop_length"], a["pad"],
                           power=a["power"], normalized=a["normalized"], center=a["center"],
                           pad_mode=a["pad_mode"])  # fmt: skip
    f_max = float(sample_rate // 2) if a["f_max"] is None else a["f_max"]
    fb = ref_mel_fbanks(a["n_fft"] // 2 + 1, a["f_min"], f_max, a["n_mels"], sample_rate,
                        a["norm"], a["mel_scale"])  # fmt: skip
    return _apply_bank(spec, fb)


def ref_mfcc(x, sample_rate=16000, n_mfcc=40, norm="ortho", log_mels=False, melkwargs=None):
    mel = ref_melspectrogram(x, sample_rate, **(melkwargs or {}))
    if log_mels:
        mel = np.log(mel + 1e-6)
    else:
        mel = ref_amplitude_to_db(mel, 10.0, 1e-10, 0.0, 80.0)
    return _apply_bank(mel, ref_create_dct(n_mfcc, mel.shape[-2], norm))


def ref_lfcc(x, sample_rate=16000, n_filter=128, f_min=0.0, f_max=None, n_lfcc=40,
             norm="ortho", log_lf=False, speckwargs=None):  # fmt: skip
    spec = ref_spectrogram(x, **(speckwargs or {}))
    n_fft = (speckwargs or {}).get("n_fft", 400)
    f_max = float(sample_rate // 2) if f_max is None else f_max
    spec = _apply_bank(spec, ref_linear_fbanks(n_fft // 2 + 1, f_min, f_max, n_filter,
                                               sample_rate))  # fmt: skip
    if log_lf:
        spec = np.log(spec + 1e-6)
    else:
        spec = ref_amplitude_to_db(spec, 10.0, 1e-10, 0.0, 80.0)
    return _apply_bank(spec, ref_create_dct(n_lfcc, n_filter, norm))


def _check(module, x, ref):
    """float64 module (dtype=float64, and .double() of a float32 one) and float32 module."""
    got64 = module(dtype=torch.float64)(torch.from_numpy(x))
    assert got64.dtype in (torch.float64, torch.complex128) and got64.shape == ref.shape
    assert rel_l2(got64.numpy(), ref) <= F64
    assert rel_l2(module().double()(torch.from_numpy(x)).numpy(), ref) <= F64
    got32 = module()(torch.from_numpy(x.astype(np.float32)))
    assert got32.dtype in (torch.float32, torch.complex64)
    assert rel_peak(got32.numpy(), ref) <= F32


# ---------------------------------------------------------------------------------------------
# the filterbanks


@pytest.mark.parametrize(
    "sample_rate,n_fft,equal",
    [(16000, 400, True), (22050, 1024, True), (16000, 401, False), (22051, 512, False)],
)
def test_torchaudio_htk_bank_is_librosas_only_for_even_rates_and_sizes(sample_rate, n_fft, equal):
    ours = ref_mel_fbanks(n_fft // 2 + 1, 0.0, float(sample_rate // 2), 40, sample_rate)
    theirs = librosa.filters.mel(
        sr=sample_rate,
        n_fft=n_fft,
        n_mels=40,
        htk=True,
        norm=None,
        fmax=float(sample_rate // 2),
        dtype=np.float64,
    ).T
    if equal:
        assert rel_l2(ours, theirs) <= F64
    else:  # the grid linspace(0, sr // 2, n_fft // 2 + 1) is not the DFT bins k sr / n_fft
        assert rel_l2(ours, theirs) > 1e-6


@pytest.mark.parametrize("sample_rate,n_freqs", [(16000, 201), (22051, 257), (8000, 129)])
@pytest.mark.parametrize("norm", [None, "slaney"])
@pytest.mark.parametrize("mel_scale", ["htk", "slaney"])
def test_torchaudio_melscale_fbanks(sample_rate, n_freqs, norm, mel_scale):
    f_max = float(sample_rate // 2) - 100.0
    got = ta.melscale_fbanks(n_freqs, 30.0, f_max, 40, sample_rate, norm, mel_scale,
                             dtype=torch.float64)  # fmt: skip
    ref = ref_mel_fbanks(n_freqs, 30.0, f_max, 40, sample_rate, norm, mel_scale)
    assert got.shape == ref.shape and rel_l2(got.numpy(), ref) <= F64
    scale = ta.MelScale(
        n_mels=40,
        sample_rate=sample_rate,
        f_min=30.0,
        f_max=f_max,
        n_stft=n_freqs,
        norm=norm,
        mel_scale=mel_scale,
        dtype=torch.float64,
    )
    spec = np.abs(_signal((2, n_freqs, 7)))
    assert rel_l2(scale(torch.from_numpy(spec)).numpy(), _apply_bank(spec, ref)) <= F64
    # the buffer as torchaudio lays it out, (n_stft, n_mels): its state_dict loads
    assert dict(scale.state_dict())["fb"].shape == (n_freqs, 40)


def test_torchaudio_melscale_state_dict_is_torchaudios():
    """MelScale's ``fb`` is ``(n_stft, n_mels)`` as torchaudio's, so a torchaudio state_dict
    of a square bank (n_stft == n_mels) loads the right way round, and one of another shape
    is refused by torch's size check."""
    bank = ta.melscale_fbanks(40, 0.0, 8000.0, 40, 16000, dtype=torch.float64)
    theirs = {"fb": bank.float()}  # torchaudio.transforms.MelScale(40, n_stft=40).state_dict()
    scale = ta.MelScale(n_mels=40, n_stft=40, f_min=100.0)  # another bank, to be replaced
    scale.load_state_dict(theirs)
    spec = torch.rand(3, 40, 5)
    torch.testing.assert_close(scale(spec), (spec.mT @ bank.float()).mT,
                               rtol=TOLERANCES["melscale32"], atol=0)  # fmt: skip
    with pytest.raises(RuntimeError, match="size mismatch"):
        ta.MelScale(n_mels=40, n_stft=41).load_state_dict(theirs)


# ---------------------------------------------------------------------------------------------
# the modules


SPECTROGRAM_CASES = [
    dict(),
    dict(power=None),
    dict(power=1.0, n_fft=512, hop_length=128, win_length=300),
    dict(power=1.5, pad=37, normalized=True),
    dict(power=None, normalized="window", onesided=False, n_fft=256),
    dict(normalized="frame_length", center=False, n_fft=256, hop_length=100),
    dict(pad_mode="constant", n_fft=511),
]


@pytest.mark.parametrize("kwargs", SPECTROGRAM_CASES)
def test_torchaudio_spectrogram(kwargs):
    x = _signal((2, 3, 4000))

    def module(**factory):
        return ta.Spectrogram(**kwargs, **factory)

    _check(module, x, ref_spectrogram(x, **kwargs))


@pytest.mark.parametrize(
    "kwargs",
    [dict(), dict(n_fft=512, hop_length=128, win_length=400, pad=11),
     dict(normalized=True), dict(normalized="frame_length", n_fft=256)],
)  # fmt: skip
@pytest.mark.parametrize("length", [None, 3900, 4000])
def test_torchaudio_inverse_spectrogram(kwargs, length):
    x = _signal((2, 4000))
    spec_kwargs = {k: v for k, v in kwargs.items()}
    S = ref_spectrogram(x, power=None, **spec_kwargs)
    ref = ref_istft(S, length, **kwargs)
    got = ta.InverseSpectrogram(**kwargs, dtype=torch.float64)(torch.from_numpy(S), length)
    assert got.shape == ref.shape and rel_l2(got.numpy(), ref) <= F64
    if length == 4000:
        assert rel_l2(got.numpy(), x) <= TOLERANCES["roundtrip64"]
    got32 = ta.InverseSpectrogram(**kwargs)(torch.from_numpy(S.astype(np.complex64)), length)
    assert got32.dtype == torch.float32 and rel_peak(got32.numpy(), ref) <= F32


MELSPEC_CASES = [
    dict(),
    dict(sample_rate=22050, n_fft=1024, hop_length=256, n_mels=64, norm="slaney",
         mel_scale="slaney"),
    dict(sample_rate=22051, n_fft=401, n_mels=40, f_min=20.0, f_max=8000.0, pad=5),
    dict(n_mels=40, power=1.0, normalized=True, win_length=300),
    dict(n_mels=40, normalized="frame_length", center=False, pad_mode="constant"),
]  # fmt: skip


@pytest.mark.parametrize("kwargs", MELSPEC_CASES)
def test_torchaudio_melspectrogram(kwargs):
    x = _signal((2, 5000))

    def module(**factory):
        return ta.MelSpectrogram(**kwargs, **factory)

    _check(module, x, ref_melspectrogram(x, **kwargs))


MFCC_TA_CASES = [
    dict(),
    dict(n_mfcc=13, melkwargs=dict(n_fft=512, hop_length=160, n_mels=40, center=False)),
    dict(n_mfcc=20, norm=None, melkwargs=dict(n_mels=64, norm="slaney", mel_scale="slaney")),
    dict(log_mels=True, melkwargs=dict(n_mels=48, pad=20, normalized=True)),
    dict(sample_rate=22051, n_mfcc=30, melkwargs=dict(n_fft=401, n_mels=50, f_min=40.0)),
]


@pytest.mark.parametrize("kwargs", MFCC_TA_CASES)
@pytest.mark.parametrize("shape", [(5000,), (3, 5000), (2, 3, 5000)])
def test_torchaudio_mfcc(kwargs, shape):
    # Channels 90 dB apart: the top_db floor is shared across channels (last three axes).
    x = _signal(shape)
    if len(shape) > 1:
        x = x * np.array([1.0, 1e-3, 10**-4.5])[:, None]

    def module(**factory):
        return ta.MFCC(**kwargs, **factory)

    _check(module, x, ref_mfcc(x, **kwargs))


def test_torchaudio_mfcc_floor_is_shared_across_channels():
    x = _signal((3, 5000)) * np.array([1.0, 1e-3, 10**-4.5])[:, None]
    shared = ref_mfcc(x)
    own = np.stack([ref_mfcc(row) for row in x])  # one floor per channel
    assert rel_l2(shared, own) > 1e-3
    got = ta.MFCC(dtype=torch.float64)(torch.from_numpy(x)).numpy()
    assert rel_l2(got, shared) <= F64


LFCC_CASES = [
    dict(),
    dict(n_filter=64, n_lfcc=20, f_min=50.0, f_max=7000.0, norm=None),
    dict(sample_rate=22051, log_lf=True,
         speckwargs=dict(n_fft=512, hop_length=128, win_length=400, pad=3, normalized=True)),
]  # fmt: skip


@pytest.mark.parametrize("kwargs", LFCC_CASES)
def test_torchaudio_lfcc(kwargs):
    x = _signal((2, 3, 5000)) * np.array([1.0, 1e-3, 10**-4.5])[None, :, None]

    def module(**factory):
        return ta.LFCC(**kwargs, **factory)

    _check(module, x, ref_lfcc(x, **kwargs))


@pytest.mark.parametrize("stype", ["power", "magnitude"])
@pytest.mark.parametrize("top_db", [None, 40.0])
@pytest.mark.parametrize("shape", [(30, 20), (3, 30, 20), (2, 3, 30, 20)])
def test_torchaudio_amplitude_to_db(stype, top_db, shape):
    S = np.abs(_signal(shape))
    if len(shape) > 2:  # channels 60 dB apart
        S = S * np.array([1.0, 1e-3, 1e-6])[:, None, None]
    multiplier = 10.0 if stype == "power" else 20.0
    ref = ref_amplitude_to_db(S, multiplier, 1e-10, 0.0, top_db)
    got = ta.AmplitudeToDB(stype, top_db)(torch.from_numpy(S))
    assert rel_l2(got.numpy(), ref) <= F64


def test_torchaudio_preset_defaults_and_errors():
    spec = ta.Spectrogram()
    assert (spec.n_fft, spec.win_length, spec.hop_length, spec.pad, spec.power) == (
        400, 400, 200, 0, 2.0,
    )  # fmt: skip
    assert spec.center is True and spec.pad_mode == "reflect" and spec.onesided is True
    mel = ta.MelSpectrogram()
    assert (mel.sample_rate, mel.n_fft, mel.n_mels, mel.f_max) == (16000, 400, 128, 8000.0)
    mfcc = ta.MFCC()
    assert (mfcc.n_mfcc, mfcc.dct_type, mfcc.norm, mfcc.log_mels, mfcc.top_db) == (
        40, 2, "ortho", False, 80.0,
    )  # fmt: skip
    lfcc = ta.LFCC()
    assert (lfcc.n_filter, lfcc.n_lfcc, lfcc.f_max) == (128, 40, 8000.0)
    assert {k: tuple(v.shape) for k, v in mfcc.state_dict().items()} == {
        "window": (400,), "fb": (128, 201), "dct": (40, 128),
    }  # fmt: skip
    with pytest.raises(ValueError, match="dct_type"):
        ta.MFCC(dct_type=3)
    with pytest.raises(ValueError, match="normalized"):
        ta.Spectrogram(normalized="energy")
    with pytest.raises(ValueError, match="mel_scale"):
        ta.MelSpectrogram(mel_scale="bark")
    with pytest.raises(ValueError, match="pad"):
        ta.Spectrogram(pad=-1)
    with pytest.raises(TypeError):
        ta.MFCC(melkwargs=dict(n_filters=3))
    with pytest.raises(ValueError, match="top_db"):
        ta.AmplitudeToDB(top_db=-1.0)


def test_torchaudio_mfcc_compiles_and_differentiates():
    torch._dynamo.reset()
    module = ta.MFCC(n_mfcc=13, melkwargs=dict(n_mels=40, pad=8, normalized=True))
    compiled = torch.compile(module, fullgraph=True, backend="aot_eager")
    x = torch.from_numpy(_signal((2, 3000), dtype=np.float32))

    def run(fn):
        xx = x.clone().requires_grad_(True)
        out = fn(xx)
        out.square().mean().backward()
        return out.detach(), xx.grad

    for got, ref in zip(run(compiled), run(module)):
        torch.testing.assert_close(got, ref, rtol=0, atol=0)


def test_librosa_namespaces_feature_and_filters():
    """``import specux.presets.librosa as librosa`` serves ``librosa.feature.*`` and
    ``librosa.filters.*`` code: the same functions, importable by their dotted names; the
    banks in librosa's float32 by default (writable), float64 on request."""
    import importlib

    feature = importlib.import_module("specux.presets.librosa.feature")
    assert feature is sl.feature
    for name in ("melspectrogram", "mfcc", "chroma_stft", "chroma_cqt"):
        assert getattr(sl.feature, name) is getattr(sl, name)
    from specux.presets.librosa.filters import chroma, mel

    assert not hasattr(sl, "mel") and not hasattr(sl, "chroma")  # librosa's places only
    for ours, theirs, kwargs in ((mel, librosa.filters.mel, dict(n_mels=40, fmax=7000.0)),
                                 (chroma, librosa.filters.chroma, dict(n_chroma=24))):
        got = ours(sr=16000, n_fft=512, **kwargs)
        want = theirs(sr=16000, n_fft=512, **kwargs)
        assert got.dtype == want.dtype == np.float32 and got.flags.writeable
        assert rel_peak(got, want) <= TOLERANCES["float32_peak"]
        got = ours(sr=16000, n_fft=512, dtype=np.float64, **kwargs)
        want = theirs(sr=16000, n_fft=512, dtype=np.float64, **kwargs)
        assert got.dtype == np.float64 and rel_peak(got, want) <= F64
    assert inspect.signature(mel).parameters.keys() == inspect.signature(
        librosa.filters.mel).parameters.keys()  # fmt: skip
    assert inspect.signature(chroma).parameters.keys() == inspect.signature(
        librosa.filters.chroma).parameters.keys()  # fmt: skip


def test_torchaudio_namespaces_and_functional():
    """``torchaudio.transforms`` / ``torchaudio.functional`` code runs on the preset: the
    same modules, and functional's linear_fbanks, create_dct and fftconvolve equal to
    torchaudio's formulas (the references above) and scipy, in the default dtype."""
    import importlib

    import scipy.signal

    assert importlib.import_module("specux.presets.torchaudio.transforms") is ta.transforms
    for name in ("Spectrogram", "InverseSpectrogram", "MelScale", "MelSpectrogram", "MFCC",
                 "LFCC", "AmplitudeToDB"):  # fmt: skip
        assert getattr(ta.transforms, name) is getattr(ta, name)
    from specux.presets.torchaudio.functional import create_dct, fftconvolve, linear_fbanks

    assert ta.functional.melscale_fbanks is ta.melscale_fbanks
    bank = linear_fbanks(201, 40.0, 7000.0, 32, 16000)
    assert bank.dtype == torch.float32 and bank.shape == (201, 32)
    bank = linear_fbanks(201, 40.0, 7000.0, 32, 16000, dtype=torch.float64)
    assert rel_peak(bank.numpy(), ref_linear_fbanks(201, 40.0, 7000.0, 32, 16000)) <= F64
    for norm in ("ortho", None):
        dct = create_dct(13, 40, norm, dtype=torch.float64)
        assert dct.shape == (40, 13)
        assert rel_peak(dct.numpy(), ref_create_dct(13, 40, norm)) <= F64
    with pytest.raises(ValueError, match="norm='backward' is not supported"):
        create_dct(13, 40, "backward")
    x = torch.from_numpy(_signal(300).reshape(3, 100))
    y = torch.from_numpy(_signal(20).reshape(2, 1, 10))
    xb = np.broadcast_to(x.numpy(), (2, 3, 100))  # (scipy's "same" crops to x's shape)
    yb = np.broadcast_to(y.numpy(), (2, 3, 10))
    for mode in ("full", "valid", "same"):
        got = fftconvolve(x, y, mode)
        want = scipy.signal.fftconvolve(xb, yb, mode=mode, axes=-1)
        assert got.shape == want.shape == (2, 3, {"full": 109, "valid": 91, "same": 100}[mode])
        assert rel_peak(got.numpy(), want) <= F64


def test_torchaudio_preset_refuses_what_torchaudio_refuses():
    """Keywords torchaudio's inner modules do not take raise as torchaudio raises (the
    preset's own device= / dtype= go to the module), and the mel norm is checked against
    torchaudio's choices first."""
    with pytest.raises(TypeError, match="melkwargs got an unexpected keyword argument 'dtype'"):
        ta.MFCC(melkwargs={"dtype": torch.float64})
    with pytest.raises(TypeError, match="speckwargs got an unexpected keyword argument 'device'"):
        ta.LFCC(speckwargs={"device": "cpu"})
    assert ta.MFCC(n_mfcc=13, dtype=torch.float64, melkwargs={"n_mels": 40}).fb.dtype == (
        torch.float64)
    for make in (lambda: ta.MelSpectrogram(norm="ortho"), lambda: ta.MelSpectrogram(norm=2),
                 lambda: ta.MFCC(melkwargs={"norm": 2})):  # fmt: skip
        with pytest.raises(ValueError, match=r"is not supported: use None or 'slaney'"):
            make()
