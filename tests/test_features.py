"""melspectrogram, mfcc, lfcc, chroma and fftconvolve against independent float64 references.

References: librosa's float64 filters (built explicitly: librosa's defaults are float32) applied
to |librosa.stft|**power; scipy.fft.dct + librosa's lifter; torchaudio's linear_fbanks formulas
re-derived here (torchaudio is not a dependency); scipy.signal.fftconvolve. Then batch shapes,
memory layouts, torch parity, gradcheck, torch.compile and torch.export.
"""

from __future__ import annotations

import itertools
import math

import librosa
import numpy as np
import pytest
import scipy.fft
import scipy.signal
from tolerances import CQT_TOLERANCES, TOLERANCES, float32_bound, rel_l2, rel_peak

import specux

try:
    import torch
except ImportError:  # pragma: no cover - numpy-only installs
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")

# Narrow bands at small n_fft are part of the parameter sweep; librosa and specux both warn.
pytestmark = pytest.mark.filterwarnings("ignore:Empty filters")

F64 = TOLERANCES["float64"]
PEAK32 = TOLERANCES["float32_peak"]


# --------------------------------------------------------------------------------------------
# float64 references


def power_spectrogram(
    x, n_fft, hop, win_length=None, window="hann", center=True, pad_mode="constant", power=2.0
):
    """|librosa.stft(x)| ** power in float64."""
    X = librosa.stft(
        np.asarray(x, dtype=np.float64),
        n_fft=n_fft,
        hop_length=hop,
        win_length=win_length,
        window=window,
        center=center,
        pad_mode=pad_mode,
    )
    assert X.dtype == np.complex128
    return np.abs(X) ** power


def apply_bank(bank, S):
    return np.einsum("bf,...ft->...bt", bank, S)


def reference_mel(
    x,
    *,
    sr,
    n_fft,
    hop,
    win_length=None,
    window="hann",
    center=True,
    pad_mode="constant",
    power=2.0,
    n_mels=128,
    fmin=0.0,
    fmax=None,
    htk=False,
    norm="slaney",
):
    bank = librosa.filters.mel(
        sr=sr,
        n_fft=n_fft,
        n_mels=n_mels,
        fmin=fmin,
        fmax=fmax,
        htk=htk,
        norm=norm,
        dtype=np.float64,
    )
    assert bank.dtype == np.float64
    S = power_spectrogram(x, n_fft, hop, win_length, window, center, pad_mode, power)
    return apply_bank(bank, S)


def clip_per_signal(db, top_db):
    """Each signal (leading index) clipped at its own max - top_db."""
    if top_db is None:
        return db
    return np.maximum(db, db.max(axis=(-2, -1), keepdims=True) - top_db)


def reference_cepstrum(S, n_out, dct_type=2, norm="ortho", lifter=0.0, top_db=80.0):
    """scipy DCT over the band axis of the per-signal clipped 10 log10, then librosa's lifter."""
    log_spec = clip_per_signal(10.0 * np.log10(np.maximum(S, 1e-10)), top_db)
    C = scipy.fft.dct(log_spec, type=dct_type, norm=norm, axis=-2)[..., :n_out, :]
    if lifter > 0:
        C = C * (1 + (lifter / 2) * np.sin(np.pi * np.arange(1, n_out + 1) / lifter))[:, None]
    return C


def reference_linear_fbanks(n_freqs, f_min, f_max, n_filter, sample_rate):
    """torchaudio.functional.linear_fbanks, re-derived: (n_freqs, n_filter)."""
    all_freqs = np.linspace(0, sample_rate // 2, n_freqs)
    f_pts = np.linspace(f_min, f_max, n_filter + 2)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts[None, :] - all_freqs[:, None]
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return np.maximum(0.0, np.minimum(down, up))


def reference_chroma(
    S, *, sr, n_fft, tuning=0.0, n_chroma=12, norm=np.inf, base_c=True, octwidth=2
):
    bank = librosa.filters.chroma(
        sr=sr,
        n_fft=n_fft,
        tuning=tuning,
        n_chroma=n_chroma,
        octwidth=octwidth,
        base_c=base_c,
        dtype=np.float64,
    )
    assert bank.dtype == np.float64
    return librosa.util.normalize(apply_bank(bank, S), norm=norm, axis=-2)


def _signal(rng, shape, dtype=np.float64):
    return rng.standard_normal(shape).astype(dtype)


# --------------------------------------------------------------------------------------------
# melspectrogram

HOP = {256: 100, 400: 150, 1000: 333, 1031: 256}  # none divides its n_fft
WIN = {256: 200, 400: None, 1000: 800, 1031: 1000}


def _mel_grid():
    out = []
    for i, (sr, n_fft) in enumerate(itertools.product((8000, 16000, 22050), HOP)):
        band = [(0.0, None), (40.0, 0.45 * sr), (300.0, None), (0.0, 3000.0)][i % 4]
        out.append(
            dict(
                sr=sr,
                n_fft=n_fft,
                hop=HOP[n_fft],
                win_length=WIN[n_fft],
                htk=bool(i % 2),
                norm=("slaney", None, 2.0)[i % 3],
                power=(2.0, 1.0, 1.5)[(i // 3) % 3],  # with norm: all 9 (norm, power) pairs
                pad_mode=("constant", "reflect")[(i // 2) % 2],
                center=i % 5 != 4,
                fmin=band[0],
                fmax=band[1],
                n_mels=40,
            )
        )
    return out


MEL_GRID = _mel_grid()


def _mel_call(x, c, **extra):
    return specux.melspectrogram(
        x,
        sr=c["sr"],
        n_fft=c["n_fft"],
        hop_length=c["hop"],
        win_length=c["win_length"],
        center=c["center"],
        pad_mode=c["pad_mode"],
        power=c["power"],
        n_mels=c["n_mels"],
        fmin=c["fmin"],
        fmax=c["fmax"],
        htk=c["htk"],
        norm=c["norm"],
        **extra,
    )


def _mel_ref(x, c):
    return reference_mel(
        x,
        sr=c["sr"],
        n_fft=c["n_fft"],
        hop=c["hop"],
        win_length=c["win_length"],
        center=c["center"],
        pad_mode=c["pad_mode"],
        power=c["power"],
        n_mels=c["n_mels"],
        fmin=c["fmin"],
        fmax=c["fmax"],
        htk=c["htk"],
        norm=c["norm"],
    )


@pytest.mark.parametrize("c", MEL_GRID, ids=lambda c: f"sr{c['sr']}-n{c['n_fft']}")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_melspectrogram_vs_librosa_grid(rng, c, dtype):
    x = _signal(rng, (2, 4000), dtype)
    got = _mel_call(x, c)
    ref = _mel_ref(x, c)
    assert got.shape == ref.shape and got.dtype == dtype
    if dtype == np.float64:
        assert rel_l2(got, ref) <= F64
    else:
        assert rel_peak(got, ref) <= PEAK32


@pytest.mark.parametrize("htk", [False, True])
@pytest.mark.parametrize("norm", ["slaney", None, 2.0])
@pytest.mark.parametrize("power", [1.0, 2.0, 1.5])
@pytest.mark.parametrize(
    "center,pad_mode", [(True, "constant"), (True, "reflect"), (False, "constant")]
)
def test_melspectrogram_every_option(rng, htk, norm, power, center, pad_mode):
    c = dict(
        sr=16000,
        n_fft=400,
        hop=150,
        win_length=300,
        htk=htk,
        norm=norm,
        power=power,
        pad_mode=pad_mode,
        center=center,
        fmin=50.0,
        fmax=7000.0,
        n_mels=32,
    )
    x = _signal(rng, (2, 3001))
    assert rel_l2(_mel_call(x, c), _mel_ref(x, c)) <= F64
    x32 = x.astype(np.float32)
    assert rel_peak(_mel_call(x32, c), _mel_ref(x32, c)) <= PEAK32


def test_melspectrogram_defaults_match_librosa(rng):
    x = _signal(rng, 6000)
    got = specux.melspectrogram(x, sr=22050)
    ref = reference_mel(x, sr=22050, n_fft=2048, hop=512)
    assert got.shape == (128, 1 + 6000 // 512)
    assert rel_l2(got, ref) <= F64


@pytest.mark.parametrize("power", [1.0, 2.0, 1.5])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("eps", [1e-10, 1e-3])
def test_melspectrogram_db(rng, power, dtype, eps):
    x = _signal(rng, (2, 3000), dtype)
    x[:, 1000:2000] = 0  # whole frames of zeros: S = 0 -> eps
    got = specux.melspectrogram(
        x, sr=16000, n_fft=256, hop_length=100, n_mels=40, power=power, output="db", eps=eps
    )
    S = reference_mel(x, sr=16000, n_fft=256, hop=100, n_mels=40, power=power)
    ref = (20.0 / power) * np.log10(np.maximum(S, eps))
    assert got.dtype == dtype and got.shape == ref.shape
    assert np.any(S < eps)  # the eps floor is exercised
    tol = TOLERANCES["db_abs64"] if dtype == np.float64 else TOLERANCES["db_abs32"]
    assert np.max(np.abs(got - ref)) <= tol


@pytest.mark.parametrize("power", [2.0, 1.0])
@pytest.mark.parametrize("batch", [(2,), (2, 3)])
def test_melspectrogram_top_db_clips_each_signal_at_its_own_max(rng, power, batch):
    x = _signal(rng, (*batch, 3000))
    x[..., 1000:2000] = 0  # silence in every signal: values far below its own max - top_db
    x[0] *= 1e-3  # the first signal (row) is 60 dB (power) quieter than the rest
    top_db = 25.0
    got = specux.melspectrogram(
        x, sr=16000, n_fft=512, hop_length=128, n_mels=40, power=power, output="db", top_db=top_db
    )
    S = reference_mel(x, sr=16000, n_fft=512, hop=128, n_mels=40, power=power)
    db = (20.0 / power) * np.log10(np.maximum(S, 1e-10))
    assert np.max(np.abs(got - clip_per_signal(db, top_db))) <= TOLERANCES["db_abs64"]
    for index in np.ndindex(*batch):
        own_floor = db[index].max() - top_db
        assert np.any(db[index] < own_floor - 1)  # the clip is active on every signal
        assert abs(got[index].min() - own_floor) <= TOLERANCES["db_abs64"]
        # Never the batch max: every signal keeps exactly top_db of its own range.
        spread = got[index].max() - got[index].min()
        assert abs(spread - top_db) <= 2 * TOLERANCES["db_abs64"]
    assert got[0].max() < got[1].max() - (20.0 / power) * 3 + 1  # the quiet row stays quiet


def test_melspectrogram_top_db_needs_db_output(rng):
    x = _signal(rng, 1000)
    with pytest.raises(ValueError, match="top_db"):
        specux.melspectrogram(x, sr=16000, n_fft=256, top_db=80.0)
    with pytest.raises(ValueError, match="top_db"):
        specux.melspectrogram(x, sr=16000, n_fft=256, output="db", top_db=-1.0)


# --------------------------------------------------------------------------------------------
# mfcc

MFCC_KW = dict(n_fft=512, hop_length=160, n_mels=40)


@pytest.mark.parametrize("dct_type", [1, 2, 3, 4])
@pytest.mark.parametrize("norm", ["ortho", None, "forward"])
@pytest.mark.parametrize("lifter", [0.0, 22.0])
@pytest.mark.parametrize("top_db", [80.0, None])
@pytest.mark.parametrize("n_mfcc", [13, 20])
def test_mfcc_vs_scipy_dct_and_librosa(rng, dct_type, norm, lifter, top_db, n_mfcc):
    x = _signal(rng, (2, 4000))
    x[1, :1500] = 0  # silence: -100 dB frames, clipped by top_db=80 (only in this signal)
    x[0] *= 1e-3
    got = specux.mfcc(
        x,
        sr=16000,
        n_mfcc=n_mfcc,
        dct_type=dct_type,
        norm=norm,
        lifter=lifter,
        top_db=top_db,
        **MFCC_KW,
    )
    mel = reference_mel(x, sr=16000, n_fft=512, hop=160, n_mels=40)
    ref = reference_cepstrum(mel, n_mfcc, dct_type, norm, lifter, top_db)
    assert got.shape == ref.shape == (2, n_mfcc, 1 + 4000 // 160) and got.dtype == np.float64
    assert rel_l2(got, ref) <= F64
    # librosa.feature.mfcc on the float64 mel (power_to_db clips over its whole input: one
    # signal at a time).
    for i in range(2):
        lib = librosa.feature.mfcc(
            S=librosa.power_to_db(mel[i], top_db=top_db),
            n_mfcc=n_mfcc,
            dct_type=dct_type,
            norm=norm,
            lifter=lifter,
        )
        assert rel_l2(got[i], lib) <= F64


def test_mfcc_float32(rng):
    x = _signal(rng, (2, 4000), np.float32)
    got = specux.mfcc(x, sr=16000, lifter=22, **MFCC_KW)
    ref = reference_cepstrum(
        reference_mel(x, sr=16000, n_fft=512, hop=160, n_mels=40), 20, lifter=22
    )
    assert got.dtype == np.float32
    # 10 log10 turns the float32 peak-relative error into absolute dB; the DCT sums n_mels dB
    # values, so compare relative to the output's peak as for the other float32 features.
    assert rel_peak(got, ref) <= PEAK32


def test_mfcc_mel_params_and_mel_norm(rng):
    x = _signal(rng, (2, 3000))
    mel_params = dict(
        n_fft=400,
        hop_length=160,
        win_length=300,
        window="hamming",
        center=False,
        pad_mode="reflect",
        power=1.0,
        n_mels=30,
        fmin=50.0,
        fmax=7000.0,
        htk=True,
    )
    for mel_norm in [None, 2.0, "slaney"]:
        got = specux.mfcc(x, sr=16000, n_mfcc=13, mel_norm=mel_norm, **mel_params)
        mel = reference_mel(
            x,
            sr=16000,
            n_fft=400,
            hop=160,
            win_length=300,
            window="hamming",
            center=False,
            power=1.0,
            n_mels=30,
            fmin=50.0,
            fmax=7000.0,
            htk=True,
            norm=mel_norm,
        )
        assert rel_l2(got, reference_cepstrum(mel, 13)) <= F64
    default = specux.mfcc(x, sr=16000, n_mfcc=13, **mel_params)
    unnormalized = specux.mfcc(x, sr=16000, n_mfcc=13, mel_norm=None, **mel_params)
    assert rel_l2(unnormalized, default) > 1e-3  # mel_norm reaches the filterbank


def test_cpu_projection_does_not_depend_on_the_layout(rng):
    """The CPU backend's ``matrix @ x`` (mfcc's DCT, the filterbank adjoint's bank^T G)
    gives the same bits for a frame-major and a feature-major ``x`` of the same values --
    eager and compiled autograd hand the filterbank adjoint its cotangent in different
    layouts, and compile must equal eager -- and equals the float64 product."""
    from specux.kernels.cpu import features as cpu_features

    matrix = rng.standard_normal((12, 40))
    for dtype in (np.float32, np.float64):
        frame_major = rng.standard_normal((3, 50, 40)).astype(dtype).swapaxes(-1, -2)
        feature_major = np.ascontiguousarray(frame_major)
        a = cpu_features.project(frame_major, matrix)
        b = cpu_features.project(feature_major, matrix)
        np.testing.assert_array_equal(a, b)
        ref = np.matmul(matrix, frame_major.astype(np.float64))
        assert rel_peak(a, ref) <= (TOLERANCES["float32_peak"] if dtype == np.float32
                                    else TOLERANCES["float64"])  # fmt: skip
    empty = cpu_features.project(np.zeros((0, 40, 5)), matrix)
    assert empty.shape == (0, 12, 5)


def test_mfcc_errors(rng):
    x = _signal(rng, 2000)
    with pytest.raises(TypeError, match="bogus"):
        specux.mfcc(x, sr=16000, bogus=3)
    with pytest.raises(TypeError, match="norm_mel"):
        specux.mfcc(x, sr=16000, n_fft=512, norm_mel=None)
    with pytest.raises(ValueError, match="n_mfcc"):
        specux.mfcc(x, sr=16000, n_mfcc=41, n_fft=512, n_mels=40)
    with pytest.raises(ValueError, match="lifter"):
        specux.mfcc(x, sr=16000, n_mfcc=13, n_fft=512, n_mels=40, lifter=-1)


# --------------------------------------------------------------------------------------------
# lfcc

LFCC_CASES = [
    # sr, n_fft, hop, n_filter, fmin, fmax, n_lfcc, top_db, pad_mode
    (16000, 512, 160, 128, 0.0, None, 20, 80.0, "constant"),
    (16000, 400, 100, 40, 100.0, 6000.0, 13, None, "reflect"),
    (22050, 1031, 256, 64, 0.0, 11025.0, 20, 80.0, "constant"),
    (11025, 257, 77, 30, 20.0, 5000.0, 30, 80.0, "reflect"),  # odd sr: torchaudio's sr // 2 grid
    (8000, 256, 100, 128, 0.0, None, 20, 40.0, "constant"),
]


@pytest.mark.parametrize("sr,n_fft,hop,n_filter,fmin,fmax,n_lfcc,top_db,pad_mode", LFCC_CASES)
def test_lfcc_vs_torchaudio_formulas(
    rng, sr, n_fft, hop, n_filter, fmin, fmax, n_lfcc, top_db, pad_mode
):
    x = _signal(rng, (2, 4000))
    x[0] *= 1e-3
    x[1, 2000:] = 0
    fbank = reference_linear_fbanks(
        n_fft // 2 + 1, fmin, sr / 2 if fmax is None else fmax, n_filter, sr
    )
    ours = specux.filters.linear(sr=sr, n_fft=n_fft, n_filter=n_filter, fmin=fmin, fmax=fmax)
    assert ours.shape == fbank.T.shape and rel_l2(ours, fbank.T) <= F64
    got = specux.lfcc(
        x,
        sr=sr,
        n_lfcc=n_lfcc,
        n_filter=n_filter,
        fmin=fmin,
        fmax=fmax,
        top_db=top_db,
        n_fft=n_fft,
        hop_length=hop,
        pad_mode=pad_mode,
    )
    S = power_spectrogram(x, n_fft, hop, pad_mode=pad_mode)
    ref = reference_cepstrum(apply_bank(fbank.T, S), n_lfcc, 2, "ortho", 0.0, top_db)
    assert got.shape == ref.shape and got.dtype == np.float64
    assert rel_l2(got, ref) <= F64


def test_lfcc_options_and_float32(rng):
    x = _signal(rng, (2, 3000))
    kw = dict(
        n_lfcc=16,
        n_filter=40,
        dct_type=3,
        norm=None,
        lifter=22.0,
        n_fft=256,
        hop_length=100,
        win_length=200,
        power=1.0,
    )
    got = specux.lfcc(x, sr=16000, **kw)
    S = power_spectrogram(x, 256, 100, 200, power=1.0)
    bank = reference_linear_fbanks(129, 0.0, 8000.0, 40, 16000).T
    ref = reference_cepstrum(apply_bank(bank, S), 16, 3, None, 22.0, 80.0)
    assert rel_l2(got, ref) <= F64
    x32 = x.astype(np.float32)
    got32 = specux.lfcc(x32, sr=16000, **kw)
    ref32 = reference_cepstrum(
        apply_bank(bank, power_spectrogram(x32, 256, 100, 200, power=1.0)), 16, 3, None, 22.0, 80.0
    )
    assert got32.dtype == np.float32 and rel_peak(got32, ref32) <= PEAK32
    with pytest.raises(TypeError, match="n_mels"):
        specux.lfcc(x, sr=16000, n_mels=40)


# --------------------------------------------------------------------------------------------
# chroma


def _tones(rng, shape, sr, length):
    t = np.arange(length) / sr
    f = 220.0 * 2 ** (rng.integers(0, 24, size=(*shape, 3)) / 12)
    tones = np.sin(2 * np.pi * f[..., None] * t).sum(axis=-2)
    return tones + 0.1 * rng.standard_normal((*shape, length))


@pytest.mark.parametrize("tuning", [0.0, 0.3])
@pytest.mark.parametrize("n_chroma", [12, 24])
@pytest.mark.parametrize("norm", [np.inf, -np.inf, 0, 1, 2, None])
def test_chroma_vs_librosa(rng, tuning, n_chroma, norm):
    sr = 22050
    x = _tones(rng, (2,), sr, 8000)
    got = specux.chroma(x, sr=sr, n_chroma=n_chroma, tuning=tuning, norm=norm)
    S = power_spectrogram(x, 2048, 512)
    ref = reference_chroma(S, sr=sr, n_fft=2048, tuning=tuning, n_chroma=n_chroma, norm=norm)
    assert got.shape == ref.shape == (2, n_chroma, 1 + 8000 // 512)
    assert rel_l2(got, ref) <= F64
    # librosa's own chroma_stft builds its filters in float32: agreement to float32 precision.
    lib = librosa.feature.chroma_stft(S=S, sr=sr, tuning=tuning, n_chroma=n_chroma, norm=norm)
    assert rel_peak(got, lib) <= PEAK32


@pytest.mark.parametrize("base_c,octwidth", [(False, 2), (True, None), (False, None)])
@pytest.mark.parametrize("power,center", [(2.0, True), (1.0, False)])
def test_chroma_filter_options(rng, base_c, octwidth, power, center):
    sr = 16000
    x = _tones(rng, (2,), sr, 5000)
    got = specux.chroma(
        x,
        sr=sr,
        n_fft=1000,
        hop_length=333,
        base_c=base_c,
        octwidth=octwidth,
        tuning=-0.2,
        win_length=800,
        pad_mode="reflect",
        power=power,
        center=center,
    )
    S = power_spectrogram(x, 1000, 333, 800, center=center, pad_mode="reflect", power=power)
    ref = reference_chroma(S, sr=sr, n_fft=1000, tuning=-0.2, base_c=base_c, octwidth=octwidth)
    assert rel_l2(got, ref) <= F64


def test_chroma_float32(rng):
    x = _tones(rng, (2,), 22050, 6000).astype(np.float32)
    for norm in [np.inf, None]:
        got = specux.chroma(x, sr=22050, norm=norm)
        ref = reference_chroma(power_spectrogram(x, 2048, 512), sr=22050, n_fft=2048, norm=norm)
        assert got.dtype == np.float32 and rel_peak(got, ref) <= PEAK32


@pytest.mark.parametrize("scale", [2e4, 1.0, 1e-14])
@pytest.mark.parametrize("norm", [2, 3, 8])
def test_chroma_p_norm_float32_at_any_scale(rng, scale, norm):
    """A p-norm of float32 chroma (``sum |x| ** p``) once overflowed (int16-scale audio,
    p = 3: all zeros) or underflowed (quiet audio: not normalized); now the peak is factored
    out first, as librosa's float64 sums avoid both. numpy and torch, both sources."""
    x = (scale * _tones(rng, (2,), 22050, 6000)).astype(np.float32)
    S = power_spectrogram(x.astype(np.float64), 2048, 512)
    ref = reference_chroma(S, sr=22050, n_fft=2048, norm=norm)
    got = specux.chroma(x, sr=22050, tuning=0.0, norm=norm)
    assert got.dtype == np.float32 and rel_peak(got, ref) <= PEAK32
    lib = librosa.feature.chroma_cqt(y=x.astype(np.float64), sr=22050, tuning=0.0, norm=norm)
    cqt = specux.chroma(x, sr=22050, source="cqt", tuning=0.0, norm=norm)
    # librosa's downsampled CQT
    assert np.max(np.abs(cqt - lib)) < CQT_TOLERANCES["librosa_chroma_pnorm"] and cqt.max() > 0.5
    if torch is not None:
        t = specux.chroma(torch.from_numpy(x), sr=22050, tuning=0.0, norm=norm)
        assert rel_peak(t.numpy(), ref) <= PEAK32


@pytest.mark.parametrize("source", ["stft", "cqt"])
@pytest.mark.parametrize("norm", [2, 3, 1.5, np.inf, 1, -np.inf, 0])
def test_chroma_gradient_is_finite_on_silent_frames(rng, norm, source):
    """A silent frame's chroma is left as it is (its length is 0), and so is its gradient:
    with a p-norm the length's ``sum ** (1 / p)`` at 0 once had an infinite derivative, and
    every sample under a silent frame got a NaN gradient (0 * inf). Across silence and
    signal the gradient is checked against finite differences (gradcheck's fast mode)."""
    if torch is None:
        pytest.skip("needs torch")
    x = np.zeros((1, 12288))
    x[0, 8192:] = rng.standard_normal(4096)  # the cqt's longest filter spans 1852 samples
    t = torch.tensor(x, requires_grad=True)
    kw = dict(sr=22050, n_fft=512, hop_length=128, tuning=0.0, norm=norm, source=source)
    if source == "cqt":
        kw = dict(sr=22050, hop_length=128, tuning=0.0, norm=norm, source=source, fmin=200.0,
                  n_octaves=3)
    out = specux.chroma(t, **kw)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(t.grad).all()
    assert (out[..., :4] == 0).all()  # frames over silence only
    # silence, then a signal; with norm=-inf (each frame over its smallest value) the frames
    # at the onset divide by values near 0, too ill-conditioned for finite differences: the
    # signal alone there
    start = 9216 if norm == -np.inf else 7168
    small = torch.tensor(x[:, start : start + 2048], requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: specux.chroma(v, **kw), (small,), fast_mode=True)


@pytest.mark.parametrize("n_fft", [511, 2047, 2048])
def test_chroma_tuning_estimate_as_librosa_for_odd_n_fft(n_fft):
    """chroma(tuning=None) estimates as librosa.feature.chroma_stft, which takes the bins of
    an odd n_fft for those of n_fft - 1 points (specux used the true n_fft: 1.8e-2 of the
    peak apart at n_fft=511)."""
    rng = np.random.default_rng(0)
    y = np.sin(2 * np.pi * 452 * np.arange(22050) / 22050) + 0.1 * rng.standard_normal(22050)
    got = specux.chroma(y, sr=22050, n_fft=n_fft, tuning=None)
    lib = librosa.feature.chroma_stft(y=y, sr=22050, n_fft=n_fft)
    assert rel_peak(got, lib) <= PEAK32  # librosa builds its filters in float32


def test_chroma_unsupported_options(rng):
    x = _signal(rng, 3000)
    with pytest.raises(ValueError, match="source"):
        specux.chroma(x, sr=22050, source="mel")
    with pytest.raises(TypeError, match="n_mels"):
        specux.chroma(x, sr=22050, n_mels=3)
    with pytest.raises(TypeError, match="ctroct"):
        specux.chroma(x, sr=22050, source="cqt", ctroct=4.0)  # an stft-source option


@pytest.mark.parametrize("n_chroma,bins_per_octave", [(12, 36), (12, 24), (24, 48)])
@pytest.mark.parametrize("norm", [np.inf, -np.inf, 0, 2, None])
def test_chroma_cqt_folds_the_cqt(rng, n_chroma, bins_per_octave, norm):
    # Exact in float64: librosa's cq_to_chroma fold of specux's own |CQT|, then normalize.
    import librosa
    x = _signal(rng, 22050)
    got = specux.chroma(x, sr=22050, source="cqt", n_chroma=n_chroma, norm=norm,
                        bins_per_octave=bins_per_octave, n_octaves=5, tuning=0.1)  # fmt: skip
    magnitude = np.abs(specux.cqt(x, sr=22050, n_bins=5 * bins_per_octave,
                                  bins_per_octave=bins_per_octave, tuning=0.1))  # fmt: skip
    fold = librosa.filters.cq_to_chroma(5 * bins_per_octave, bins_per_octave=bins_per_octave,
                                        n_chroma=n_chroma, dtype=np.float64)  # fmt: skip
    ref = fold @ magnitude
    if norm is not None:
        ref = librosa.util.normalize(ref, norm=norm, axis=-2)
    assert rel_peak(got, ref) <= TOLERANCES["float64"]


def test_chroma_cqt_near_librosa(rng):
    # librosa resamples per octave; its CQT differs from the direct transform by ~1.5e-2 of
    # the peak (tests/test_cqt.py documents it), and chroma inherits that difference.
    import librosa
    x = _signal(rng, 3 * 22050)
    got = specux.chroma(x, sr=22050, source="cqt", tuning=0.0)
    ref = librosa.feature.chroma_cqt(y=x, sr=22050, tuning=0.0)
    assert got.shape == ref.shape
    assert np.max(np.abs(got - ref)) <= CQT_TOLERANCES["librosa_chroma"]


# --------------------------------------------------------------------------------------------
# fftconvolve


def scipy_conv(x, y, mode, axis=-1):
    """scipy.signal.fftconvolve with the other axes broadcast first (scipy's "same" would
    otherwise crop a broadcast axis back to x's size)."""
    x, y = np.asarray(x), np.asarray(y)
    ndim = max(x.ndim, y.ndim)
    x = x.reshape((1,) * (ndim - x.ndim) + x.shape)
    y = y.reshape((1,) * (ndim - y.ndim) + y.shape)
    axis %= ndim
    batch = np.broadcast_shapes(
        *[tuple(1 if i == axis else n for i, n in enumerate(a.shape)) for a in (x, y)]
    )
    x = np.broadcast_to(x, tuple(x.shape[axis] if i == axis else n for i, n in enumerate(batch)))
    y = np.broadcast_to(y, tuple(y.shape[axis] if i == axis else n for i, n in enumerate(batch)))
    return scipy.signal.fftconvolve(x, y, mode, axes=axis)


LENGTHS = [1, 2, 17, 97, 1031]
MODES = ["full", "same", "valid"]


@pytest.mark.parametrize("lx", LENGTHS)
@pytest.mark.parametrize("ly", LENGTHS)
@pytest.mark.parametrize("mode", MODES)
def test_fftconvolve_vs_scipy_lengths(rng, lx, ly, mode):
    x = _signal(rng, (2, lx))
    y = _signal(rng, (2, ly))
    got = specux.fftconvolve(x, y, mode)
    ref = scipy.signal.fftconvolve(x, y, mode, axes=-1)
    assert got.shape == ref.shape and got.dtype == np.float64
    assert rel_l2(got, ref) <= F64


@pytest.mark.parametrize("mode", MODES)
def test_fftconvolve_broadcasts_leading_axes(rng, mode):
    x = _signal(rng, (3, 1, 97))
    y = _signal(rng, (4, 17))
    got = specux.fftconvolve(x, y, mode)
    ref = scipy_conv(x, y, mode)
    assert got.shape == ref.shape == (3, 4, {"full": 113, "same": 97, "valid": 81}[mode])
    assert rel_l2(got, ref) <= F64
    got = specux.fftconvolve(y, x, mode)  # shorter first
    ref = scipy_conv(y, x, mode)
    assert got.shape == ref.shape and rel_l2(got, ref) <= F64


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dim", [-2, 0, 1])
def test_fftconvolve_dim(rng, mode, dim):
    x = _signal(rng, (17, 3, 2))
    y = _signal(rng, (5, 1, 2))
    if dim == -2 or dim == 1:
        x, y = x.transpose(1, 0, 2), y.transpose(1, 0, 2)  # (3, 17, 2), (1, 5, 2)
    got = specux.fftconvolve(x, y, mode, dim=dim)
    ref = scipy_conv(x, y, mode, dim)
    assert got.shape == ref.shape and rel_l2(got, ref) <= F64


def test_fftconvolve_negative_dim_different_ndim(rng):
    x = _signal(rng, (4, 3, 30, 2))
    y = _signal(rng, (7, 2))
    got = specux.fftconvolve(x, y, "same", dim=-2)
    ref = scipy_conv(x, y, "same", -2)
    assert got.shape == ref.shape == (4, 3, 30, 2) and rel_l2(got, ref) <= F64


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kinds", ["cc", "rc", "cr"])
def test_fftconvolve_complex(rng, mode, kinds):
    def make(kind, n):
        a = _signal(rng, (2, n))
        return a + 1j * _signal(rng, (2, n)) if kind == "c" else a

    x, y = make(kinds[0], 33), make(kinds[1], 10)
    got = specux.fftconvolve(x, y, mode)
    ref = scipy.signal.fftconvolve(x, y, mode, axes=-1)
    assert got.dtype == np.complex128 and rel_l2(got, ref) <= F64


@pytest.mark.parametrize("lx,ly", [(1031, 97), (17, 1031), (2, 2)])
@pytest.mark.parametrize("mode", MODES)
def test_fftconvolve_float32_within_scipy_error(rng, lx, ly, mode):
    x = _signal(rng, (2, lx), np.float32)
    y = _signal(rng, (2, ly), np.float32)
    ref = scipy.signal.fftconvolve(x.astype(np.float64), y.astype(np.float64), mode, axes=-1)
    scipy32 = scipy.signal.fftconvolve(x, y, mode, axes=-1)
    assert scipy32.dtype == np.float32
    got = specux.fftconvolve(x, y, mode)
    assert got.dtype == np.float32
    assert rel_l2(got, ref) <= float32_bound(rel_l2(scipy32, ref))
    mixed = specux.fftconvolve(x, y.astype(np.float64), mode)
    assert mixed.dtype == np.float64  # result_type(float32, float64)
    for a, b in [(x.astype(np.float16), y.astype(np.float64)),
                 (x.astype(np.float64), y.astype(np.float16))]:  # fmt: skip
        assert specux.fftconvolve(a, b, mode).dtype == np.float64  # as scipy's
    assert specux.fftconvolve(x.astype(np.float16), y.astype(np.float16), mode).dtype == (
        np.float16)  # storage kept


# CPU overlap-save (kernels.cpu.conv._overlap_save): outputs of at least 16384 samples and
# two frames. (3, 20000) * 33 taps in 256-point frames; the long operand second; (2, 1,
# 17000) * (3, 1031) broadcast, 4096-point frames, a partial last frame; (1, 40000) * 4096
# taps, 8192-point frames.
OVERLAP_SAVE_SHAPES = [((3, 20000), (3, 33)), ((2, 300), (2, 19000)),
                       ((2, 1, 17000), (3, 1031)), ((1, 40000), (1, 4096))]  # fmt: skip


@pytest.mark.parametrize("shapes", OVERLAP_SAVE_SHAPES)
@pytest.mark.parametrize("mode", MODES)
def test_fftconvolve_overlap_save(rng, shapes, mode, monkeypatch):
    from specux.kernels.cpu import conv

    calls = []
    original = conv._overlap_save
    monkeypatch.setattr(conv, "_overlap_save",
                        lambda *a: calls.append(a[2]) or original(*a))  # fmt: skip
    x, y = _signal(rng, shapes[0]), _signal(rng, shapes[1])
    ref = scipy_conv(x, y, mode)
    got = specux.fftconvolve(x, y, mode)
    assert got.shape == ref.shape and got.dtype == np.float64
    assert rel_l2(got, ref) <= F64
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    got32 = specux.fftconvolve(x32, y32, mode)
    scipy32 = scipy_conv(x32, y32, mode)  # scipy's whole-length float32 FFTs
    assert got32.dtype == scipy32.dtype == np.float32
    assert rel_l2(got32, ref) <= float32_bound(rel_l2(scipy32, ref))
    mixed = specux.fftconvolve(x32, y, mode)  # result_type(float32, float64)
    assert mixed.dtype == np.float64
    assert rel_l2(mixed, ref) <= float32_bound(rel_l2(scipy32, ref))
    short = min(shapes[0][-1], shapes[1][-1])
    assert calls == [conv.overlap_save_block(short)] * 3


def test_fftconvolve_overlap_save_threads(rng, monkeypatch):
    """The rows' chunks run on the CPU pool or all on the calling thread: the same bits."""
    from specux.kernels.cpu import conv

    x, y = _signal(rng, (9, 30000), np.float32), _signal(rng, (9, 257), np.float32)
    pooled = conv.fftconvolve_full(x, y)
    monkeypatch.setattr(conv, "_SERIAL_BYTES", 1 << 62)
    monkeypatch.setattr(conv, "_ROW_CHUNK_BYTES", 1 << 62)  # one chunk, this thread
    assert np.array_equal(conv.fftconvolve_full(x, y), pooled)


def test_fftconvolve_errors(rng):
    x = _signal(rng, (2, 20))
    with pytest.raises(ValueError, match="dim"):
        specux.fftconvolve(x, _signal(rng, 5), dim=0)  # dim >= 0, different ndims
    with pytest.raises(ValueError, match="x has no samples along dim=-1"):
        specux.fftconvolve(np.zeros((2, 0)), x)
    with pytest.raises(ValueError, match="y has no samples along dim=-1"):
        specux.fftconvolve(x, np.zeros((2, 0)))
    with pytest.raises(ValueError, match="mode"):
        specux.fftconvolve(x, x, "circular")
    if torch is not None:
        with pytest.raises(TypeError, match="same kind of array"):
            specux.fftconvolve(x, torch.from_numpy(x))
        with pytest.raises(TypeError, match="same kind of array"):
            specux.fftconvolve(torch.from_numpy(x), x)


# --------------------------------------------------------------------------------------------
# every function: batch shapes, layouts, torch parity

KERNEL = np.hanning(9)


def _like(x, a):
    return (
        torch.as_tensor(a, dtype=x.dtype)
        if torch is not None and isinstance(x, torch.Tensor)
        else a.astype(x.dtype)
    )


FEATURES = {
    "melspectrogram": lambda x: specux.melspectrogram(
        x, sr=16000, n_fft=256, hop_length=100, n_mels=24, output="db", top_db=30.0
    ),
    "mfcc": lambda x: specux.mfcc(
        x, sr=16000, n_mfcc=13, lifter=22, n_fft=256, hop_length=100, n_mels=24
    ),
    "lfcc": lambda x: specux.lfcc(
        x, sr=16000, n_lfcc=13, n_filter=40, n_fft=256, hop_length=100, top_db=30.0
    ),
    "chroma": lambda x: specux.chroma(x, sr=16000, n_fft=256, hop_length=100, norm=2),
    "fftconvolve": lambda x: specux.fftconvolve(x, _like(x, KERNEL), "same"),
}
FEATURE_ROWS = {"melspectrogram": 24, "mfcc": 13, "lfcc": 13, "chroma": 12}


@pytest.mark.parametrize("name", FEATURES)
@pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "negative", "fortran"])
def test_batch_shapes_and_layouts(rng, name, batch, layout):
    fn = FEATURES[name]
    base = _signal(rng, (*batch, 2 * 1000 + 1))
    base[(0,) * len(batch)] *= 1e-2  # per-signal top_db must not depend on the neighbours
    x = {
        "contiguous": np.ascontiguousarray(base[..., :1000]),
        "strided": base[..., ::2],
        "negative": base[..., ::-2],
        "fortran": np.asfortranarray(base[..., :1000]),
    }[layout]
    got = fn(x)
    L = x.shape[-1]
    rows = FEATURE_ROWS.get(name)
    assert got.shape == ((*batch, L) if rows is None else (*batch, rows, 1 + L // 100))
    for index in np.ndindex(*batch):
        one = fn(np.ascontiguousarray(x[index]))
        assert rel_l2(got[index], one) <= F64


@pytest.mark.parametrize("name", FEATURES)
@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_empty_batch(name, library):
    if library == "torch" and torch is None:
        pytest.skip("needs torch")
    x = np.zeros((0, 3, 1000))
    if library == "torch":
        x = torch.from_numpy(x)
    got = FEATURES[name](x)
    rows = FEATURE_ROWS.get(name)
    assert tuple(got.shape) == ((0, 3, 1000) if rows is None else (0, 3, rows, 11))


@needs_torch
@pytest.mark.parametrize("name", FEATURES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_torch_matches_numpy(rng, name, dtype):
    fn = FEATURES[name]
    base = _signal(rng, (2, 3, 2001), dtype)
    x = base[..., ::2]
    xt = torch.from_numpy(base)[..., ::2]  # non-contiguous tensor
    want = fn(x)
    got = fn(xt)
    assert isinstance(got, torch.Tensor) and got.dtype == getattr(torch, dtype)
    assert tuple(got.shape) == want.shape
    if dtype == "float64":
        assert rel_l2(got.numpy(), want) <= F64
    else:
        assert rel_peak(got.numpy(), want) <= PEAK32


@needs_torch
@pytest.mark.parametrize("mode", MODES)
def test_fftconvolve_torch(rng, mode):
    x = _signal(rng, (3, 1, 50))
    y = _signal(rng, (4, 17)) + 1j * _signal(rng, (4, 17))
    got = specux.fftconvolve(torch.from_numpy(x), torch.from_numpy(y), mode)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.complex128
    assert rel_l2(got.numpy(), scipy_conv(x, y, mode)) <= F64
    x32 = torch.from_numpy(x.astype(np.float32))
    assert specux.fftconvolve(x32, x32[0], mode).dtype == torch.float32
    assert specux.fftconvolve(x32, torch.from_numpy(x[0]), mode).dtype == torch.float64
    # half types are kept only when both operands have them; mixed, torch's promotion (the
    # result's dtype once took x's half type alone, whatever y was)
    half, h = x32.half(), x32[0].half()
    others = [h, h.bfloat16(), x32[0], torch.from_numpy(x[0]), torch.from_numpy(y[0])]
    for a, b in [(half, o) for o in others] + [(o, half) for o in others]:
        got = specux.fftconvolve(a, b, mode)
        assert got.dtype == torch.promote_types(a.dtype, b.dtype), (a.dtype, b.dtype)
        if got.dtype == torch.float64:  # the half operand's values, exactly widened
            want = scipy_conv(a.double().numpy(), b.double().numpy(), mode)
            assert rel_l2(got.numpy(), want) <= F64
    a, b = _signal(rng, (17, 3, 2)), _signal(rng, (5, 1, 2))
    got = specux.fftconvolve(torch.from_numpy(a), torch.from_numpy(b), mode, dim=0)
    assert rel_l2(got.numpy(), scipy_conv(a, b, mode, 0)) <= F64


# --------------------------------------------------------------------------------------------
# gradients

N16 = dict(n_fft=16, hop_length=8)

GRAD_CASES = {
    "mel-power": lambda x: specux.melspectrogram(x, sr=8000, n_mels=6, **N16),
    "mel-power1.5": lambda x: specux.melspectrogram(x, sr=8000, n_mels=6, power=1.5, **N16),
    "mel-db-top_db": lambda x: specux.melspectrogram(
        x, sr=8000, n_mels=6, output="db", top_db=6.0, **N16
    ),
    "mfcc-lifter22": lambda x: specux.mfcc(x, sr=8000, n_mfcc=5, lifter=22, n_mels=6, **N16),
    "lfcc": lambda x: specux.lfcc(x, sr=8000, n_lfcc=5, n_filter=6, **N16),
    "chroma-inf": lambda x: specux.chroma(x, sr=8000, norm=math.inf, **N16),
    "chroma-2": lambda x: specux.chroma(x, sr=8000, norm=2, **N16),
}


def _gradcheck(fn, inputs, fast_mode=True):
    # fast_mode (random projections of the Jacobian) keeps 200-sample checks quick; the full
    # Jacobian is compared on smaller inputs in test_gradcheck_full_jacobian.
    return torch.autograd.gradcheck(
        fn,
        inputs,
        atol=TOLERANCES["gradcheck_atol"],
        rtol=TOLERANCES["gradcheck_rtol"],
        fast_mode=fast_mode,
    )


@needs_torch
@pytest.mark.parametrize("case", GRAD_CASES)
def test_gradcheck_features(case):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 200, dtype=torch.float64, generator=g, requires_grad=True)
    fn = GRAD_CASES[case]
    if case == "mel-db-top_db":
        raw = specux.melspectrogram(x.detach(), sr=8000, n_mels=6, output="db", **N16)
        gap = raw - raw.amax(dim=(-2, -1), keepdim=True) + 6.0
        assert (gap < 0).any(dim=-1).any(dim=-1).all()  # the clip is active in each signal
        # ... and no value within 1e-3 dB of the kink, far beyond gradcheck's 1e-6 steps.
        assert gap.abs().min() > 1e-3
    out = fn(x)
    assert out.requires_grad
    out.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    assert _gradcheck(fn, (x.detach().requires_grad_(True),))


@needs_torch
@pytest.mark.parametrize("mode", ["same", "valid", "full"])
@pytest.mark.parametrize("complex_", [False, True])
def test_gradcheck_fftconvolve(mode, complex_):
    g = torch.Generator().manual_seed(3)
    dtype = torch.complex128 if complex_ else torch.float64
    x = torch.randn(2, 1, 200, dtype=dtype, generator=g, requires_grad=True)
    y = torch.randn(3, 9, dtype=torch.float64, generator=g, requires_grad=True)  # broadcast
    assert _gradcheck(lambda a, b: specux.fftconvolve(a, b, mode), (x, y))
    assert _gradcheck(lambda a, b: specux.fftconvolve(b, a, mode), (x, y))  # shorter first


# The gradient of the short operand against a long real one by overlap-save frames
# (ops.conv.correlation_frame): (x shape, y shape, frame). Many short segments; a broadcast
# target against a signal axis; PERF.md's 4096 taps (16384-point frames) with the taps
# shared by the rows; a 1-D target.
FRAMED_GRAD_SHAPES = [((3, 20000), (3, 33), 256), ((2, 1, 9000), (3, 300), 2048),
                      ((4, 40000), (1, 4096), 16384), ((2, 5000), (100,), 512)]  # fmt: skip


def _correlation_reference(w, x, lags, shape):
    """float64 ``sum_n w[..., n + j] x[..., n]`` for ``j < lags``, summed to ``shape``."""
    w, x = np.asarray(w, np.float64), np.asarray(x, np.float64)
    x = np.broadcast_to(x, w.shape[:-1] + x.shape[-1:])
    rows = [np.correlate(a, b, mode="valid")[:lags]
            for a, b in zip(w.reshape(-1, w.shape[-1]), x.reshape(-1, x.shape[-1]))]  # fmt: skip
    full = torch.from_numpy(np.stack(rows).reshape(*w.shape[:-1], lags))
    return full.sum_to_size(shape).numpy()


@needs_torch
@pytest.mark.parametrize("shapes", FRAMED_GRAD_SHAPES)
def test_fftconvolve_short_operand_gradient_by_frames(shapes, monkeypatch):
    """The taps' gradient (either operand order) by framed correlation equals float64
    np.correlate; in float32 it is within the float32 bound of the whole-length route's
    error; the long operand's gradient is unchanged."""
    from specux.ops import conv

    x_shape, y_shape, frame = shapes
    assert conv.correlation_frame(y_shape[-1], x_shape[-1]) == frame
    framed = []
    original = conv._framed_correlation
    monkeypatch.setattr(conv, "_framed_correlation",
                        lambda *a: framed.append(a[3]) or original(*a))  # fmt: skip
    g = torch.Generator().manual_seed(y_shape[-1])
    x = torch.randn(x_shape, dtype=torch.float64, generator=g)
    y = torch.randn(y_shape, dtype=torch.float64, generator=g)

    def grads(a, b, swap=False, whole=False):
        if whole:
            monkeypatch.setattr(conv, "_MAX_FRAME", 0)
        a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
        z = specux.fftconvolve(b, a) if swap else specux.fftconvolve(a, b)
        w = torch.randn(z.shape, dtype=z.dtype, generator=torch.Generator().manual_seed(1))
        out = torch.autograd.grad(z, (a, b), w)
        monkeypatch.setattr(conv, "_MAX_FRAME", original_max)
        return w, out

    original_max = conv._MAX_FRAME
    for swap in (False, True):
        framed.clear()
        w, (gx, gy) = grads(x, y, swap)
        assert framed == [frame]
        ref = _correlation_reference(w, x, y_shape[-1], y_shape)
        assert rel_l2(gy, ref) <= F64
        _, (gx_whole, gy_whole) = grads(x, y, swap, whole=True)
        assert rel_l2(gx, gx_whole) <= F64  # the long operand's route is unchanged
        _, (_, gy32) = grads(x.float(), y.float(), swap)
        _, (_, gy32_whole) = grads(x.float(), y.float(), swap, whole=True)
        assert gy32.dtype == torch.float32
        assert rel_l2(gy32, ref) <= float32_bound(rel_l2(gy32_whole, ref))
    framed.clear()
    w, (_, mixed) = grads(x.float(), y)  # float32 x, float64 taps: float64 gradients
    assert framed == [frame] and mixed.dtype == torch.float64
    assert rel_l2(mixed, _correlation_reference(w, x.float(), y_shape[-1], y_shape)) <= F64


@needs_torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fftconvolve_half_gradients_by_frames(dtype, monkeypatch):
    """Half operands compute in float32 (the op never sees half): the taps' gradient runs by
    frames in float32 and is rounded to half once, equal to the float32 gradients of the
    same (half-rounded) operands to half precision."""
    from specux.ops import conv

    framed = []
    original = conv._framed_correlation
    monkeypatch.setattr(conv, "_framed_correlation",
                        lambda *a: framed.append(a[0].dtype) or original(*a))  # fmt: skip
    g = torch.Generator().manual_seed(5)
    half = getattr(torch, dtype)
    x = torch.randn(2, 3000, generator=g).to(half)
    y = torch.randn(2, 31, generator=g).to(half)
    grads = []
    for a, b in ((x.float(), y.float()), (x, y)):
        a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
        specux.fftconvolve(a, b).sum().backward()
        grads.append((a.grad, b.grad))
    assert framed == [torch.float32, torch.float32]
    tol = TOLERANCES["float16_storage" if dtype == "float16" else "bfloat16_storage"]
    for got, ref in zip(grads[1], grads[0]):
        assert got.dtype == half
        assert rel_peak(got.float().numpy(), ref.numpy()) <= tol


@needs_torch
def test_gradcheck_fftconvolve_by_frames():
    """gradcheck (the full Jacobian: random projections missed a wrapped lag, checked) and
    gradgradcheck where the taps' gradient runs by frames (256-point frames, three a row;
    the second derivative runs through the stft and c2r ops' gradients)."""
    from specux.ops import conv

    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 520, dtype=torch.float64, generator=g, requires_grad=True)
    y = torch.randn(1, 5, dtype=torch.float64, generator=g, requires_grad=True)
    assert conv.correlation_frame(5, 520) == 256
    assert _gradcheck(specux.fftconvolve, (x, y), fast_mode=False)
    assert torch.autograd.gradgradcheck(specux.fftconvolve, (x, y),
                                        atol=TOLERANCES["gradcheck_atol"],
                                        rtol=TOLERANCES["gradcheck_rtol"], fast_mode=True)


# --------------------------------------------------------------------------------------------
# torch.compile / torch.export


def _mel_db(x):
    return specux.melspectrogram(
        x, sr=16000, n_fft=128, hop_length=50, n_mels=20, output="db", top_db=20.0
    )


def _mfcc(x):
    return specux.mfcc(x, sr=16000, n_mfcc=13, lifter=22, n_fft=128, hop_length=50, n_mels=20)


def _conv(x, y):
    return specux.fftconvolve(x, y, "same")


@needs_torch
@pytest.mark.parametrize(
    "fn,n_inputs",
    [(_mel_db, 1), (_mfcc, 1), (_conv, 2)],
    ids=["melspectrogram", "mfcc", "fftconvolve"],
)
def test_compile_forward_backward_equals_eager(fn, n_inputs):
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(0)
    inputs = [torch.randn(2, 600, dtype=torch.float64, generator=g)]
    if n_inputs == 2:
        inputs.append(torch.randn(1, 31, dtype=torch.float64, generator=g))
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")

    def run(f):
        leaves = [t.clone().requires_grad_(True) for t in inputs]
        out = f(*leaves)
        (out * torch.linspace(0, 1, out.shape[-1], dtype=out.dtype)).sum().backward()
        return [out.detach()] + [t.grad for t in leaves]

    for a, b in zip(run(fn), run(compiled)):
        torch.testing.assert_close(b, a, rtol=F64, atol=F64)


@needs_torch
def test_export_mfcc_gives_specux_nodes():
    class MFCC(torch.nn.Module):
        def forward(self, x):
            return specux.mfcc(x, sr=16000, n_mfcc=13, n_fft=256, hop_length=100, n_mels=24)

    ep = torch.export.export(MFCC(), (torch.randn(2, 1000),))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert "specux.bank_spectrogram.default" in targets
    assert "specux.project.default" in targets
    x = torch.randn(2, 1000)
    torch.testing.assert_close(ep.module()(x), MFCC()(x))


@needs_torch
def test_gradcheck_full_jacobian():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(1, 64, dtype=torch.float64, generator=g, requires_grad=True)
    assert _gradcheck(GRAD_CASES["mfcc-lifter22"], (x,), fast_mode=False)
    assert _gradcheck(GRAD_CASES["chroma-inf"], (x,), fast_mode=False)
    a = torch.randn(2, 1, 12, dtype=torch.complex128, generator=g, requires_grad=True)
    b = torch.randn(3, 5, dtype=torch.float64, generator=g, requires_grad=True)
    assert _gradcheck(lambda u, v: specux.fftconvolve(u, v, "same"), (a, b), fast_mode=False)


def test_chroma_cqt_float16_is_rounded_once(rng):
    # The fold, threshold and normalization run in float32; only the chroma (values <= 1 with
    # norm=inf) is rounded to float16: at most half a float16 ulp at 1, 2**-11.
    x = _signal(rng, (2, 22050))
    half = specux.chroma(x.astype(np.float16), sr=22050, source="cqt", tuning=0.0)
    single = specux.chroma(x.astype(np.float16).astype(np.float32), sr=22050, source="cqt",
                           tuning=0.0)  # fmt: skip
    assert half.dtype == np.float16
    assert np.max(np.abs(half.astype(np.float32) - single)) <= TOLERANCES["float16_round_once"]


@needs_torch
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[
    pytest.mark.cuda, pytest.mark.skipif(torch is None or not torch.cuda.is_available(),
                                         reason="needs a CUDA GPU")])])  # fmt: skip
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_project_top_db_is_the_torch_clip_then_project(device, dtype):
    """project(x, .., top_db) (mfcc's clip read by its DCT) against torch's own per-signal
    clip, ``maximum(x, amax(x) - top_db)``, then the plain projection: the same values (the
    same bits on the CPU, where both clip in numpy's order) and the same gradients, with a
    signal whose peak is reached twice and values exactly at the floor (torch's maximum
    splits a tie's gradient in halves; its amax shares the peak's among the ties)."""
    from specux.meta import matrices
    from specux.ops.features import project

    dt = getattr(torch, dtype)
    key = matrices.dct_spec(n_out=20, n_in=40, dct_type=2, norm="ortho", lifter=0.0).as_key()
    g = torch.Generator().manual_seed(7)
    x = (torch.randn(3, 40, 50, generator=g, dtype=torch.float64) * 10).to(dt)
    x[0, 3, 7] = x[0, 30, 40] = x[0].max() + 1  # the peak, twice
    x[2, 5, 5:9] = x[2].max() - 20  # at the floor
    x = x.to(device)
    cotangent = torch.randn(3, 20, 50, generator=g, dtype=dt).to(device)

    def run(fused):
        leaf = x.clone().requires_grad_(True)
        if fused:
            out = project(leaf, None, key, 20.0)
        else:
            clipped = torch.maximum(leaf, leaf.amax(dim=(-2, -1), keepdim=True) - 20.0)
            out = project(clipped, None, key)
        (grad,) = torch.autograd.grad(out, leaf, cotangent)
        return out.detach(), grad

    (out, grad), (ref, ref_grad) = run(True), run(False)
    assert (x[2] == x[2].max() - 20).sum() >= 4 and (x[0] == x[0].max()).sum() == 2
    if device == "cpu":
        torch.testing.assert_close(out, ref, rtol=0, atol=0)
    else:
        tol = TOLERANCES[f"{dtype}_peak"] * ref.abs().max().item()
        torch.testing.assert_close(out, ref, rtol=0, atol=tol)
    scale = ref_grad.abs().max().item()
    torch.testing.assert_close(grad, ref_grad, rtol=0, atol=TOLERANCES[f"{dtype}_peak"] * scale)


def _partition_cost(nonzero, groups, call_macs):
    """The band-grouping cost model of a partition: a call per group plus its rows x bands."""
    total = 0
    for c0, c1, _, _ in groups:
        rows = np.flatnonzero(nonzero[:, c0:c1].any(axis=1))
        total += call_macs + (rows[-1] + 1 - rows[0] if rows.size else 0) * (c1 - c0)
    return total


def test_band_groups_partition_the_bands_at_least_cost():
    """The CPU filterbank's band groups (kernels.cpu.features._band_groups) cover every band
    once, in order, each group's rows covering its nonzero weights, at most _GROUP_BANDS
    bands a group; and no partition into such groups costs less (brute force over every
    partition of small random banks)."""
    from specux.kernels.cpu import features as cpu_features

    rng = np.random.default_rng(3)
    call = cpu_features._GEMM_CALL_MACS
    for trial in range(30):
        n_bands, n_bins = int(rng.integers(1, 9)), int(rng.integers(1, 300))
        bank = np.zeros((n_bins, n_bands), bool)
        for m in range(n_bands):
            if rng.random() < 0.15:
                continue  # an empty band
            start = int(rng.integers(0, n_bins))
            bank[start:start + int(rng.integers(1, 120)), m] = True
        groups = cpu_features._band_groups(bank)
        assert [g[0] for g in groups] == [0, *[g[1] for g in groups[:-1]]]
        assert groups[-1][1] == n_bands
        for c0, c1, r0, r1 in groups:
            assert not bank[:r0, c0:c1].any() and not bank[r1:, c0:c1].any()
        best = min(
            _partition_cost(bank, [(a, b, 0, 0) for a, b in zip((0, *cuts), (*cuts, n_bands))],
                            call)
            for k in range(n_bands)
            for cuts in itertools.combinations(range(1, n_bands), k)
        )  # fmt: skip
        assert _partition_cost(bank, groups, call) == best, trial
    # a dense bank of more bands than a group holds: several groups, none past the limit
    dense = np.ones((50, 2 * cpu_features._GROUP_BANDS + 3), bool)
    groups = cpu_features._band_groups(dense)
    assert max(c1 - c0 for c0, c1, _, _ in groups) <= cpu_features._GROUP_BANDS
    assert groups[-1][1] == dense.shape[1] and len(groups) == 3
