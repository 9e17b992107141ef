"""cqt / vqt: the numpy engine against a brute-force float64 reference and librosa (numpy
only: the torch-less CI job runs it; the ops through torch are tests/test_cqt_ops.py)."""

from __future__ import annotations

import librosa
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from tolerances import CQT_TOLERANCES, rel_peak

from specux.kernels.cpu import cqt as cpu_cqt
from specux.kernels.cpu.stft import apply_output
from specux.meta.cqt_params import C1_HZ, ConstantQSpec, cqt_arguments, cqt_spec
from specux.meta.cqt_shapes import cqt_adjoint_shape, cqt_shape
from specux.meta.filters import constant_q

NUMPY_PAD = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}
PAD_MODES = tuple(NUMPY_PAD)


# ---------------------------------------------------------------------------------------------
# Brute-force reference: the definition, written out with numpy.pad and explicit sums.


def brute_force_cqt(x, spec: ConstantQSpec, pad_mode: str) -> np.ndarray:
    """X[k, t] = s_k sum_tau xp[t hop - tau] h_k(tau), in float64, from constant_q's filters.

    One explicit sum per bin and frame (a gathered (n_frames, taps) matrix times the taps).
    """
    filters, lengths = constant_q(
        sr=spec.sr,
        fmin=spec.fmin,
        n_bins=spec.n_bins,
        bins_per_octave=spec.bins_per_octave,
        tuning=spec.tuning,
        filter_scale=spec.filter_scale,
        norm=spec.norm,
        window=spec.filter_window(),
        gamma=spec.gamma,
    )
    x = np.asarray(x, dtype=np.float64)
    hop = spec.hop_length
    n_frames = 1 + x.shape[-1] // hop
    pad = filters.shape[1] + 1
    xp = np.pad(x, (pad, pad), mode=NUMPY_PAD[pad_mode])
    out = np.zeros((spec.n_bins, n_frames), dtype=np.complex128)
    width = filters.shape[1]
    for k, length in enumerate(lengths.tolist()):
        # Filter k's taps sit at tau = first .. first + count - 1 in its (centred) row.
        first = -length // 2
        count = len(np.arange(first, length // 2))
        left = (width - count) // 2
        taps = filters[k, left : left + count]
        assert not np.any(np.delete(filters[k], np.arange(left, left + count)))
        scale = np.sqrt(length) if spec.scale else length
        # The sum written out: xp[t hop - tau] for tau = first + j, one row per frame.
        index = pad + np.arange(n_frames)[:, None] * hop - int(first) - np.arange(count)
        out[k] = scale * (xp[index] @ taps)
    return out


BRUTE_CONFIGS = [
    dict(sr=2000, fmin=100, n_bins=24, hop_length=64),
    dict(sr=8000, fmin=50, n_bins=40, hop_length=32),
    dict(
        sr=4000, fmin=30, n_bins=30, hop_length=100, bins_per_octave=7, filter_scale=0.7, gamma=None
    ),
    dict(
        sr=16000,
        fmin=40,
        n_bins=36,
        hop_length=160,
        bins_per_octave=24,
        norm=2,
        scale=False,
        tuning=0.3,
        window="hamming",
    ),
    dict(sr=1000, fmin=20, n_bins=20, hop_length=1, gamma=5.0, norm=np.inf, window=("kaiser", 8.0)),
    dict(sr=22050, n_bins=84, hop_length=512),
    dict(sr=3000, fmin=40, n_bins=9, hop_length=48, bins_per_octave=4, window=("gaussian", 7.0)),
]


def _paths(spec: ConstantQSpec):
    """The plan choices to force: automatic, frames only, and every bin on the polyphase path."""
    taps = cpu_cqt._taps(spec)
    width = cpu_cqt._span(taps, 0, spec.n_bins)[1]
    chunks = -(-width // spec.hop_length)
    return [None, (0, 0), (spec.n_bins, chunks + 3)]


@pytest.mark.parametrize("config", BRUTE_CONFIGS, ids=lambda c: f"sr{c['sr']}-hop{c['hop_length']}")
@pytest.mark.parametrize("length", [1, 37, 1000])
@pytest.mark.parametrize("pad_mode", PAD_MODES)
def test_engine_matches_brute_force(config, length, pad_mode):
    spec = cqt_spec(**config)
    x = np.random.default_rng(length).standard_normal(length)
    ref = brute_force_cqt(x, spec, pad_mode)
    for path in _paths(spec):
        got = cpu_cqt.cqt(x, spec, pad_mode, polyphase=path)
        assert got.shape == ref.shape and got.dtype == np.complex128
        assert rel_peak(got, ref) < CQT_TOLERANCES["direct64"], path


@pytest.mark.parametrize("config", BRUTE_CONFIGS[:4], ids=lambda c: f"sr{c['sr']}")
def test_polyphase_split_between_octaves(config):
    # The polyphase group stops at an octave boundary and frames groups cover the rest.
    spec = cqt_spec(**config)
    x = np.random.default_rng(0).standard_normal(777)
    ref = brute_force_cqt(x, spec, "reflect")
    stop = cpu_cqt._octave_groups(spec)[0][1]
    width = cpu_cqt._span(cpu_cqt._taps(spec), 0, stop)[1]
    chunks = -(-width // spec.hop_length)
    for size in (chunks + 1, 2 * chunks + 2, 3 * chunks + 7):
        got = cpu_cqt.cqt(x, spec, "reflect", polyphase=(stop, size))
        assert rel_peak(got, ref) < CQT_TOLERANCES["direct64"]


@settings(deadline=None)
@given(
    sr=st.sampled_from([800.0, 1000.0, 3000.0, 8000.0]),
    fmin=st.floats(5.0, 200.0),
    n_bins=st.integers(1, 30),
    bins_per_octave=st.integers(1, 24),
    hop_length=st.sampled_from([1, 2, 3, 7, 16, 33, 64, 100, 256, 1000]),
    filter_scale=st.floats(0.3, 2.0),
    gamma=st.sampled_from([None, 0.0, 3.0]),
    norm=st.sampled_from([1, 2, np.inf, None, 0, -np.inf]),
    scale=st.booleans(),
    tuning=st.floats(-0.5, 0.5),
    window=st.sampled_from(["hann", "hamming", ("kaiser", 5.0), "boxcar"]),
    length=st.sampled_from([1, 2, 5, 50, 333, 1500]),
    pad_mode=st.sampled_from(PAD_MODES),
    seed=st.integers(0, 2**16),
)
def test_random_configurations(length, pad_mode, seed, **config):
    try:
        spec = cqt_spec(**config)
    except ValueError:
        assume(False)  # the top filter crosses Nyquist
    # Keep the brute force (n_frames x width gathers per bin) small.
    assume(spec.filters()[0].shape[1] * (1 + length // spec.hop_length) <= 300_000)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(length)
    ref = brute_force_cqt(x, spec, pad_mode)
    grad = rng.standard_normal(ref.shape) + 1j * rng.standard_normal(ref.shape)
    # Relative to the largest possible output (a bin's |taps|_1 * max |x|), not to the peak:
    # a short periodic (circular) signal can cancel a long filter's response by 1e-6.
    bound = max(np.abs(t).sum() for t in cpu_cqt.correlation_taps(spec)[1]) * np.abs(x).max()
    tol = CQT_TOLERANCES["direct64_worst_case"]
    for path in _paths(spec):
        got = cpu_cqt.cqt(x, spec, pad_mode, polyphase=path)
        assert np.max(np.abs(got - ref)) <= tol * bound, path
        back = cpu_cqt.cqt_adjoint(grad, spec, pad_mode, length, polyphase=path)
        lhs, rhs = np.sum(np.real(np.conj(got) * grad)), np.sum(x * back)
        assert abs(lhs - rhs) <= tol * bound * np.sqrt(length) * np.abs(grad).sum(), path


def test_automatic_plan_uses_polyphase_for_long_filters():
    spec = cqt_spec(sr=22050)
    stop, size = cpu_cqt.choose_plan(spec, 431, 8)
    assert stop >= 24 and size > 0  # C1..B2 at least: 11.7k-tap filters, hop 512
    assert cpu_cqt.choose_plan(cqt_spec(sr=2000, fmin=500, n_bins=6), 5, 1) == (0, 0)


# ---------------------------------------------------------------------------------------------
# librosa: its full-rate algorithm (exact but for the half-spectrum sum) and librosa.cqt / vqt

SR = 22050


@pytest.fixture(scope="module")
def chirp():
    """3 s: a 50 -> 2000 Hz linear chirp plus 0.1 white noise, float64."""
    t = np.arange(3 * SR) / SR
    noise = np.random.default_rng(0).standard_normal(t.shape)
    return np.sin(2 * np.pi * (50 * t + (2000 - 50) / 6 * t**2)) + 0.1 * noise


def librosa_full_rate(
    y,
    *,
    sr,
    hop_length,
    fmin,
    n_bins,
    bins_per_octave=12,
    filter_scale=1.0,
    norm=1,
    window="hann",
    gamma=0.0,
    scale=True,
    pad_mode="constant",
    half=False,
):
    """librosa's __cqt_response at the full sample rate, built from librosa's public pieces.

    fft_basis = FFT of the pow2-padded wavelet basis times lengths / n_fft, applied to a
    window='ones' centred STFT; no sparsification, no downsampling. ``half=True`` sums the
    non-negative frequencies only (what librosa does); otherwise the whole spectrum, using
    the STFT's Hermitian symmetry for the negative half.
    """
    freqs = fmin * 2.0 ** (np.arange(n_bins) / bins_per_octave)
    basis, lengths = librosa.filters.wavelet(
        freqs=freqs,
        sr=sr,
        filter_scale=filter_scale,
        norm=norm,
        pad_fft=True,
        window=window,
        gamma=gamma,
        dtype=np.complex128,
    )
    n_fft = basis.shape[1]
    fft_basis = np.fft.fft(basis * (lengths[:, None] / n_fft), n=n_fft, axis=1)
    stft = librosa.stft(y, n_fft=n_fft, hop_length=hop_length, window="ones", pad_mode=pad_mode)
    if half:
        out = fft_basis[:, : n_fft // 2 + 1] @ stft
    else:
        out = fft_basis @ np.concatenate([stft, np.conj(stft[n_fft // 2 - 1 : 0 : -1])])
    return out / np.sqrt(lengths)[:, None] if scale else out


FULL_RATE_CASES = [
    ("cqt", dict(hop_length=512, fmin=C1_HZ, n_bins=84)),
    ("vqt", dict(hop_length=512, fmin=C1_HZ, n_bins=84, gamma=None)),
    (
        "reflect-norm2",
        dict(hop_length=256, fmin=65.0, n_bins=72, filter_scale=0.8, norm=2, pad_mode="reflect"),
    ),
    (
        "unscaled-hamming",
        dict(hop_length=512, fmin=C1_HZ, n_bins=84, scale=False, window="hamming"),
    ),
]


@pytest.mark.parametrize("name,kwargs", FULL_RATE_CASES, ids=[c[0] for c in FULL_RATE_CASES])
def test_definition_is_librosas_full_rate_response(chirp, name, kwargs):
    kwargs = dict(kwargs)
    pad_mode = kwargs.pop("pad_mode", "constant")
    spec_args = {k: v for k, v in kwargs.items()}
    spec = cqt_spec(sr=SR, **spec_args)
    ours = cpu_cqt.cqt(chirp, spec, pad_mode)
    ref = librosa_full_rate(chirp, sr=SR, pad_mode=pad_mode, **kwargs)
    assert rel_peak(ours, ref) < CQT_TOLERANCES["full_rate64"]
    # librosa's half-spectrum sum: the residual is real (not round-off) and small.
    half = rel_peak(ours, librosa_full_rate(chirp, sr=SR, pad_mode=pad_mode, half=True, **kwargs))
    assert half > 1e3 * CQT_TOLERANCES["full_rate64"]
    if name == "cqt":
        assert half < CQT_TOLERANCES["half_spectrum_cqt"]
    if name == "vqt":
        assert half < CQT_TOLERANCES["half_spectrum_vqt"]


@pytest.mark.parametrize("window", ["boxcar", "hamming", "hann"])
def test_a_filter_filling_its_fft_keeps_its_first_tap_where_it_is(window):
    """librosa's full-rate product multiplies spectra of n_fft points (the longest filter's
    length rounded up to a power of two), which is circular: a filter of exactly n_fft taps
    (here 1023.5 samples: taps -512 .. 511 around its centre, n_fft 1024) has its tap at
    -512 applied to the sample 512 before the frame's centre by the definition, and at the
    other end of the frame by that product. specux sums every tap where it lies (the brute
    force sum). With hann the tap is 0 and the two agree; with a window nonzero there they
    differ (docs/api.md, measured 6.5e-3 of the peak with hamming, 5.0e-2 with boxcar)."""
    alpha = float(_twelve_tone_alpha())
    fmin = SR / alpha / 1023.5  # the first (longest) filter 1023.5 samples long
    y = np.random.default_rng(3).standard_normal(8000)
    spec = cqt_spec(sr=SR, hop_length=64, fmin=fmin, n_bins=12, window=window)
    ours = cpu_cqt.cqt(y, spec, "constant")
    assert rel_peak(ours, brute_force_cqt(y, spec, "constant")) < CQT_TOLERANCES["direct64"]
    theirs = rel_peak(ours, librosa_full_rate(y, sr=SR, hop_length=64, fmin=fmin, n_bins=12,
                                              window=window))  # fmt: skip
    if window == "hann":
        assert theirs < CQT_TOLERANCES["full_rate64"]
    else:
        assert theirs > 1e-3


def _twelve_tone_alpha():
    """alpha of the default 12 bins an octave (the first of relative_bandwidth's values)."""
    from specux.meta.filters import relative_bandwidth

    return relative_bandwidth(100.0 * 2.0 ** (np.arange(12) / 12))[0]


@pytest.mark.parametrize("kind", ["cqt", "vqt"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_librosa_cqt_and_vqt_agree_to_documented_tolerance(chirp, kind, dtype):
    y = chirp.astype(dtype)
    if kind == "cqt":
        ref = librosa.cqt(y, sr=SR)
        spec = cqt_spec(sr=SR)
    else:
        ref = librosa.vqt(y, sr=SR)
        spec = cqt_spec(sr=SR, gamma=None)
    ours = cpu_cqt.cqt(y, spec)
    assert ours.shape == ref.shape and ours.dtype == ref.dtype
    complex_err = rel_peak(ours, ref)
    magnitude_err = float(np.max(np.abs(np.abs(ours) - np.abs(ref))) / np.max(np.abs(ref)))
    print(
        f"\n{kind} {np.dtype(dtype).name}: complex {complex_err:.3g}, magnitude "
        f"{magnitude_err:.3g} (relative to the peak)"
    )
    assert complex_err < CQT_TOLERANCES[f"librosa_{kind}_complex"]
    assert magnitude_err < CQT_TOLERANCES[f"librosa_{kind}_magnitude"]


@pytest.mark.parametrize("kind", ["cqt", "vqt"])
def test_tuning_none_is_librosas_estimate(chirp, kind):
    """``tuning=None`` estimates the tuning from the signal as librosa.cqt / vqt do
    (estimate_tuning(y=y, sr=sr, bins_per_octave=...)); the result is the transform at that
    tuning, and the preset stays within librosa's documented tolerance."""
    import specux
    from specux.presets import librosa as preset

    t = np.arange(3 * SR) / SR
    y = chirp + 10 * np.sin(2 * np.pi * 447 * t)  # a tone 27 cents above A4
    fn, lib = getattr(specux, kind), getattr(librosa, kind)
    for bins_per_octave, n_bins in ((12, 84), (24, 168)):
        estimate = librosa.estimate_tuning(y=y, sr=SR, bins_per_octave=bins_per_octave)
        assert abs(estimate) > 0.1
        kw = dict(sr=SR, bins_per_octave=bins_per_octave, n_bins=n_bins)
        got = fn(y, tuning=None, **kw)
        assert rel_peak(got, fn(y, tuning=estimate, **kw)) < CQT_TOLERANCES["tuning_estimate64"]
    ref = lib(y, sr=SR, tuning=None)
    assert rel_peak(preset_fn := getattr(preset, kind)(y, tuning=None), ref) < \
        CQT_TOLERANCES[f"librosa_{kind}_complex"]  # fmt: skip
    assert preset_fn.shape == ref.shape


def test_default_fmin_is_librosas_c1():
    assert C1_HZ == librosa.note_to_hz("C1")
    assert cqt_spec(sr=SR).fmin == C1_HZ


# ---------------------------------------------------------------------------------------------
# Precision, shapes, layouts, output modes, the adjoint


@pytest.mark.parametrize(
    "config",
    [
        dict(sr=22050),
        dict(sr=22050, hop_length=128, n_bins=96, fmin=40.0, gamma=None),
        dict(sr=16000, hop_length=160, fmin=50.0, n_bins=60, filter_scale=0.5),
    ],
)
def test_float32_error(config):
    spec = cqt_spec(**config)
    x32 = np.random.default_rng(3).standard_normal((2, 30000)).astype(np.float32)
    n_frames = 1 + 30000 // spec.hop_length
    for path in (None, (0, 0), cpu_cqt.choose_plan(spec, n_frames, 2)):
        got = cpu_cqt.cqt(x32, spec, polyphase=path)
        ref = cpu_cqt.cqt(x32.astype(np.float64), spec, polyphase=path)
        assert got.dtype == np.complex64
        err = rel_peak(got, ref)
        assert err < CQT_TOLERANCES["float32_peak"], (path, err)


@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_batch_shapes(batch):
    spec = cqt_spec(sr=4000, fmin=30, n_bins=30, hop_length=50)
    x = np.random.default_rng(1).standard_normal((*batch, 900))
    got = cpu_cqt.cqt(x, spec, "reflect")
    assert got.shape == (*batch, 30, 19) == cqt_shape(x.shape, 30, 50)
    flat = x.reshape(-1, 900)
    tol = CQT_TOLERANCES["batch_rows64"]
    for i, row in enumerate(flat):
        np.testing.assert_allclose(
            got.reshape(-1, 30, 19)[i], cpu_cqt.cqt(row, spec, "reflect"), rtol=0, atol=tol
        )


def test_non_contiguous_inputs():
    spec = cqt_spec(sr=4000, fmin=30, n_bins=30, hop_length=50)
    base = np.random.default_rng(2).standard_normal((3, 1800))
    for x in (base[:, ::2], base.T.copy().T[:, 5:905], np.asfortranarray(base)[:, :900]):
        assert not x.flags.c_contiguous
        np.testing.assert_array_equal(
            cpu_cqt.cqt(x, spec), cpu_cqt.cqt(np.ascontiguousarray(x), spec)
        )


@pytest.mark.parametrize("output", ["magnitude", "power", "db"])
def test_output_modes(output):
    spec = cqt_spec(sr=2000, fmin=100, n_bins=24, hop_length=64)
    x = np.random.default_rng(4).standard_normal((2, 700))
    complex_ = cpu_cqt.cqt(x, spec)
    got = cpu_cqt.cqt(x, spec, output=output, eps=1e-8)
    np.testing.assert_allclose(got, apply_output(complex_, output, 1e-8),
                               rtol=CQT_TOLERANCES["output_modes64_rtol"],
                               atol=CQT_TOLERANCES["output_modes64_atol"])  # fmt: skip
    assert got.dtype == np.float64


def test_empty_batch_and_empty_signal():
    spec = cqt_spec(sr=2000, fmin=100, n_bins=12, hop_length=64)
    assert cpu_cqt.cqt(np.zeros((0, 100)), spec).shape == (0, 12, 2)
    out = cpu_cqt.cqt(np.zeros(0), spec)
    assert out.shape == (12, 1) and not out.any()
    with pytest.raises(ValueError, match="pad_mode"):
        cpu_cqt.cqt(np.zeros(0), spec, "reflect")
    assert cpu_cqt.cqt_adjoint(np.zeros((0, 12, 2), complex), spec, "constant", 100).shape == (
        0,
        100,
    )


@pytest.mark.parametrize("config", BRUTE_CONFIGS, ids=lambda c: f"sr{c['sr']}-hop{c['hop_length']}")
@pytest.mark.parametrize("length", [1, 200, 2500])
def test_adjoint_is_exact_transpose(config, length):
    spec = cqt_spec(**config)
    rng = np.random.default_rng(length)
    n_frames = 1 + length // spec.hop_length
    x = rng.standard_normal((2, length))
    grad = rng.standard_normal((2, spec.n_bins, n_frames)) * (1 + 1j)
    grad += rng.standard_normal(grad.shape)
    for pad_mode in PAD_MODES:
        for path in _paths(spec):
            forward = cpu_cqt.cqt(x, spec, pad_mode, polyphase=path)
            back = cpu_cqt.cqt_adjoint(grad, spec, pad_mode, length, polyphase=path)
            assert back.shape == (2, length) == cqt_adjoint_shape(grad.shape, length)
            lhs = np.sum(np.real(np.conj(forward) * grad))
            rhs = np.sum(x * back)
            scale = np.linalg.norm(forward) * np.linalg.norm(grad)
            assert abs(lhs - rhs) <= CQT_TOLERANCES["adjoint64"] * scale, (pad_mode, path)


# ---------------------------------------------------------------------------------------------
# Parameters


def test_spec_key_round_trip():
    for config in BRUTE_CONFIGS + [dict(sr=22050, gamma=None, norm=None)]:
        spec = cqt_spec(**config)
        assert ConstantQSpec.from_key(spec.as_key()) == spec


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(fmin=0.0), "fmin"),
        (dict(fmin=-5.0), "fmin"),
        (dict(n_bins=0), "n_bins"),
        (dict(bins_per_octave=0), "bins_per_octave"),
        (dict(hop_length=0), "hop_length"),
        (dict(filter_scale=0.0), "filter_scale"),
        (dict(sr=0.0), "sr"),
        (dict(norm=-1), "norm"),
        (dict(norm=float("nan")), "norm"),
        (dict(gamma=-1.0), "gamma"),
        (dict(n_bins=120), "fmin"),  # the top filter crosses Nyquist
        (dict(window=np.ones(8)), "window"),
        (dict(tuning=1e300), "tuning"),  # OverflowError before
        (dict(fmin=1e-6), "fmin"),  # a 467 TiB bank: MemoryError before
    ],
)
def test_invalid_parameters_name_themselves(kwargs, name):
    args = dict(sr=SR)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        cqt_spec(**args)


def test_cqt_arguments_normalizes_call_options():
    spec, pad_mode, output, eps = cqt_arguments(sr=SR, pad_mode="edge", output="DB", eps=1e-6)
    assert (pad_mode, output, eps) == ("replicate", "db", 1e-6) and spec == cqt_spec(sr=SR)
    with pytest.raises(ValueError, match="output"):
        cqt_arguments(sr=SR, output="phase")
