"""stft / istft against float64 references (a direct numpy construction, torch, librosa)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.signal
from hypothesis import given
from hypothesis import strategies as st
from tolerances import TOLERANCES, float32_bound, rel_l2, rel_peak

import specux

NUMPY_PAD = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def reference_stft(
    x, n_fft, hop, win_length=None, window="hann", center=True, pad_mode="constant",
    normalized=False, onesided=True, dtype=np.float64,
):  # fmt: skip
    """A direct construction from numpy.pad + explicit frames + numpy.fft, in ``dtype``."""
    win_length = win_length or n_fft
    if isinstance(window, np.ndarray):
        w = window.astype(np.float64)
    else:
        w = scipy.signal.get_window(window, win_length, fftbins=True)
    full = np.zeros(n_fft)
    left = (n_fft - win_length) // 2
    full[left : left + win_length] = w
    x = np.asarray(x, dtype=np.float64)
    if center:
        widths = [(0, 0)] * (x.ndim - 1) + [(n_fft // 2, n_fft // 2)]
        x = np.pad(x, widths, mode=NUMPY_PAD[pad_mode])
    count = 1 + (x.shape[-1] - n_fft) // hop
    index = np.arange(count)[:, None] * hop + np.arange(n_fft)[None, :]
    frames = (x[..., index] * full).astype(dtype)
    norm = "ortho" if normalized else "backward"
    spec = np.fft.rfft(frames, axis=-1, norm=norm) if onesided else np.fft.fft(frames, norm=norm)
    return np.swapaxes(spec, -1, -2)


CONFIGS = [
    # n_fft, hop, win_length
    (1, 1, None),
    (2, 1, None),
    (17, 5, None),
    (97, 31, 60),
    (256, 64, None),
    (1000, 333, 800),
    (1031, 256, None),
]


@pytest.mark.parametrize("n_fft,hop,win_length", CONFIGS)
@pytest.mark.parametrize("pad_mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("length", [1, 3, 1500])
def test_stft_float64_every_pad_mode_and_length(rng, n_fft, hop, win_length, pad_mode, length):
    x = rng.standard_normal((2, length))
    got = specux.stft(x, n_fft, hop, win_length, pad_mode=pad_mode)
    ref = reference_stft(x, n_fft, hop, win_length, pad_mode=pad_mode)
    assert got.shape == ref.shape and got.dtype == np.complex128
    assert rel_l2(got, ref) <= TOLERANCES["float64"]


@pytest.mark.parametrize(
    "window",
    ["hann", "hamming", "blackman", "bartlett", "boxcar", ("kaiser", 8.0), ("gaussian", 20.0)],
)
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("normalized", [False, True])
@pytest.mark.parametrize("onesided", [True, False])
def test_stft_windows_and_options(rng, window, center, normalized, onesided):
    x = rng.standard_normal((3, 700))
    got = specux.stft(x, 128, 50, 100, window, center, "reflect", normalized, onesided)
    ref = reference_stft(x, 128, 50, 100, window, center, "reflect", normalized, onesided)
    assert rel_l2(got, ref) <= TOLERANCES["float64"]


def test_stft_array_window(rng):
    x = rng.standard_normal(500)
    w = rng.random(90)
    got = specux.stft(x, 128, 32, 90, window=w)
    assert rel_l2(got, reference_stft(x, 128, 32, 90, window=w)) <= TOLERANCES["float64"]


@pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "negative", "offset"])
def test_stft_batch_and_layouts(rng, batch, layout):
    base = rng.standard_normal((*batch, 2 * 640 + 1))
    x = {
        "contiguous": np.ascontiguousarray(base[..., :640]),
        "strided": base[..., ::2],
        "negative": base[..., ::-2],
        "offset": base[..., 1:641],
    }[layout]
    got = specux.stft(x, 64, 16)
    ref = reference_stft(x, 64, 16)
    assert got.shape == (*batch, 33, 1 + x.shape[-1] // 16)
    assert rel_l2(got, ref) <= TOLERANCES["float64"]


def test_non_native_byte_order_gives_the_native_results(rng):
    """A big-endian numpy signal is read in native order: results are native-order arrays,
    bit-identical to those of the native copy (mel's used to come back big-endian)."""
    x = rng.standard_normal((2, 3000)).astype(np.float32)
    big = x.astype(">f4")
    for fn in (lambda a: specux.stft(a, n_fft=256),
               lambda a: specux.melspectrogram(a, sr=16000, n_fft=512, n_mels=40),
               specux.rfft, lambda a: specux.fftconvolve(a, a[..., :31])):  # fmt: skip
        got, ref = fn(big), fn(x)
        assert got.dtype == ref.dtype and got.dtype.isnative
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("n_fft,hop", [(17, 4), (256, 100), (1031, 300)])
def test_stft_float32_error_within_3x_numpy(rng, n_fft, hop):
    x = rng.standard_normal((4, 4000)).astype(np.float32)
    ref = reference_stft(x, n_fft, hop)
    numpy32 = reference_stft(x, n_fft, hop, dtype=np.float32)
    got = specux.stft(x, n_fft, hop)
    assert got.dtype == np.complex64
    assert rel_l2(got, ref) <= float32_bound(rel_l2(numpy32, ref))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_stft_outputs(rng, dtype):
    x = rng.standard_normal((2, 1200)).astype(dtype)
    ref = reference_stft(x, 200, 60)
    power = np.abs(ref) ** 2
    mag = specux.stft(x, 200, 60, output="magnitude")
    pow_ = specux.stft(x, 200, 60, output="power")
    db = specux.stft(x, 200, 60, output="db", eps=1e-6)
    assert mag.dtype == pow_.dtype == db.dtype == dtype
    tol = TOLERANCES["float32_peak"] if dtype == np.float32 else TOLERANCES["float64"]
    assert rel_peak(mag, np.abs(ref)) <= tol
    assert rel_peak(pow_, power) <= tol
    db_tol = TOLERANCES["db_abs32"] if dtype == np.float32 else TOLERANCES["db_abs64"]
    assert np.max(np.abs(db - 10 * np.log10(np.maximum(power, 1e-6)))) <= db_tol


def test_stft_matches_torch(rng):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(rng.standard_normal((2, 3000)))
    for n_fft, hop, win, mode in [(512, 128, 400, "reflect"), (255, 77, None, "constant")]:
        w = torch.hann_window(win or n_fft, dtype=torch.float64)
        ref = torch.stft(x, n_fft, hop, win or n_fft, w, center=True, pad_mode=mode,
                         return_complex=True)  # fmt: skip
        got = specux.stft(x, n_fft, hop, win, pad_mode=mode)
        assert isinstance(got, torch.Tensor) and got.dtype == torch.complex128
        assert got.stride() == ref.stride()
        assert rel_l2(got.numpy(), ref.numpy()) <= TOLERANCES["float64"]


def test_stft_matches_librosa(rng):
    import librosa
    x = rng.standard_normal(5000)
    for n_fft, hop, win in [(2048, 512, None), (1000, 250, 700)]:
        ref = librosa.stft(x, n_fft=n_fft, hop_length=hop, win_length=win, pad_mode="constant")
        got = specux.stft(x, n_fft, hop, win)
        assert rel_l2(got, ref) <= TOLERANCES["float64"]


# --------------------------------------------------------------------------------------------
# istft


@pytest.mark.parametrize(
    "n_fft,hop,win_length,window",
    [(16, 4, None, "hann"), (17, 5, None, "hann"), (256, 64, 200, "hamming"),
     (1031, 250, None, ("kaiser", 6.0)), (64, 32, None, "boxcar"), (100, 30, 90, "blackman")],
)  # fmt: skip
@pytest.mark.parametrize("onesided", [True, False])
@pytest.mark.parametrize("normalized", [False, True])
def test_istft_roundtrip_float64(rng, n_fft, hop, win_length, window, onesided, normalized):
    x = rng.standard_normal((2, 3001))
    S = specux.stft(x, n_fft, hop, win_length, window, normalized=normalized, onesided=onesided)
    y = specux.istft(S, n_fft, hop, win_length, window, normalized=normalized,
                     onesided=onesided, length=x.shape[-1])  # fmt: skip
    assert y.shape == x.shape and y.dtype == np.float64
    assert rel_l2(y, x) <= TOLERANCES["roundtrip64"]


def test_istft_length_pad_and_trim(rng):
    x = rng.standard_normal(1000)
    S = specux.stft(x, 64, 16, pad_mode="reflect")  # reflect: the padded tail is not zero
    natural = specux.istft(S, 64, 16)
    assert natural.shape == (16 * (S.shape[-1] - 1),)
    longer = specux.istft(S, 64, 16, length=1100)
    assert longer.shape == (1100,)
    # Samples up to the end of the last frame are returned (as torch does); beyond, zeros.
    covered = 64 + 16 * (S.shape[-1] - 1) - 32
    tol = TOLERANCES["istft_abs64"]
    np.testing.assert_allclose(longer[: natural.shape[0]], natural, rtol=0, atol=tol)
    assert np.all(np.abs(longer[natural.shape[0] : covered]) > 1e-6)
    np.testing.assert_array_equal(longer[covered:], 0.0)
    shorter = specux.istft(S, 64, 16, length=500)
    np.testing.assert_allclose(shorter, x[:500], rtol=0, atol=tol)


@pytest.mark.parametrize("onesided", [True, False])
def test_istft_rows_on_the_pool_match_one_thread_and_one_row(rng, onesided, monkeypatch):
    """The CPU istft runs a signal a pool task (its inverse FFT, window, overlap-add and
    division in cache): the same bits as all rows on the calling thread and as each row
    alone, in either spectrum layout (frame-major from specux.stft, freq-major as
    torch.stft lays it out)."""
    from specux.kernels.cpu import stft as cpu_stft

    x = rng.standard_normal((2, 3, 30000)).astype(np.float32)
    kw = dict(n_fft=512, hop_length=128, onesided=onesided)
    S = specux.stft(x, **kw)
    for spectrum in (S, np.ascontiguousarray(S)):
        pooled = specux.istft(spectrum, length=29000, **kw)
        assert pooled.shape == (2, 3, 29000) and pooled.dtype == np.float32
        for i, j in np.ndindex(2, 3):
            np.testing.assert_array_equal(
                specux.istft(spectrum[i, j], length=29000, **kw), pooled[i, j])
        with monkeypatch.context() as m:
            m.setattr(cpu_stft, "_SERIAL_BYTES", 1 << 62)  # every row on this thread
            np.testing.assert_array_equal(specux.istft(spectrum, length=29000, **kw), pooled)
        assert rel_l2(pooled, x[..., :29000]) <= TOLERANCES["roundtrip32"]
        assert specux.istft(spectrum, length=0, **kw).shape == (2, 3, 0)
        assert specux.istft(spectrum[:0], length=100, **kw).shape == (0, 3, 100)
    # a spectrum broadcast over a leading axis: each task takes its row as a view
    wide = np.broadcast_to(S[:1], (4, 3, *S.shape[-2:]))
    broadcast = specux.istft(wide, length=29000, **kw)
    for i, j in np.ndindex(4, 3):
        np.testing.assert_array_equal(broadcast[i, j], specux.istft(S[0, j], length=29000, **kw))


@pytest.mark.parametrize("power", [2.0, 1.0])
def test_power_adjoint_rows_on_the_pool_match_one_thread_and_one_row(rng, power, monkeypatch):
    """The CPU |stft| ** power backward runs a signal a pool task: the same bits as all rows
    on the calling thread and as each row alone (a reflect padding folded back, a cotangent
    broadcast over a leading axis)."""
    from specux.kernels.cpu import stft as cpu_stft

    x = rng.standard_normal((2, 3, 30000)).astype(np.float32)
    p = cpu_stft.StftParams(n_fft=512, hop_length=100, win_length=512,
                            window=cpu_stft.WindowSpec.from_key("hann"), center=True,
                            pad_mode="reflect", normalized=False, onesided=True)  # fmt: skip
    grad = rng.standard_normal((1, 3, 257, 301)).astype(np.float32)
    pooled = cpu_stft.power_adjoint(x, None, p, power, grad)
    assert pooled.shape == x.shape and pooled.dtype == np.float32
    for i, j in np.ndindex(2, 3):
        alone = cpu_stft.power_adjoint(x[i, j], None, p, power, grad[0, j])
        np.testing.assert_array_equal(alone, pooled[i, j])
    monkeypatch.setattr(cpu_stft, "_SERIAL_BYTES", 1 << 62)  # every row on this thread
    np.testing.assert_array_equal(cpu_stft.power_adjoint(x, None, p, power, grad), pooled)


def test_short_signals_share_pool_tasks_with_the_bits_of_each_alone(rng, monkeypatch):
    """Many short signals go to the pool several a task (cpu.stft.row_ranges; one task a
    signal had made 10 ** 5 signals of 16 samples take 6 to 36 s): the stft, the istft and
    the |stft| ** power backward give each row the bits it gets alone, and the same bits
    with every task on the calling thread."""
    from specux.kernels.cpu import stft as cpu_stft

    assert cpu_stft.row_ranges(3, 1 << 30) == [(0, 1), (1, 2), (2, 3)]  # long rows: one a task
    ranges = cpu_stft.row_ranges(100_000, 320)  # the 16-sample signals' frames
    assert ranges[0][0] == 0 and ranges[-1][1] == 100_000 and 1 < len(ranges) < 1000
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    x = rng.standard_normal((3, 700, 40)).astype(np.float32)
    kw = dict(n_fft=16, hop_length=4)
    p = cpu_stft.StftParams(n_fft=16, hop_length=4, win_length=16,
                            window=cpu_stft.WindowSpec.from_key("hann"), center=True,
                            pad_mode="reflect", normalized=False, onesided=True)  # fmt: skip
    grad = rng.standard_normal((1, 700, 9, 11)).astype(np.float32)  # broadcast over axis 0
    with monkeypatch.context() as m:
        m.setattr(cpu_stft, "_SERIAL_BYTES", 0)  # on the pool, as a large batch would be
        S = specux.stft(x, **kw)
        y = specux.istft(S, length=40, **kw)
        g = cpu_stft.power_adjoint(x, None, p, 2.0, grad)
    for i, j in [(0, 0), (1, 350), (2, 699)]:
        np.testing.assert_array_equal(specux.stft(x[i, j], **kw), S[i, j])
        np.testing.assert_array_equal(specux.istft(S[i, j], length=40, **kw), y[i, j])
        np.testing.assert_array_equal(
            cpu_stft.power_adjoint(x[i, j], None, p, 2.0, grad[0, j]), g[i, j])
    with monkeypatch.context() as m:
        m.setattr(cpu_stft, "_SERIAL_BYTES", 1 << 62)  # every task on this thread
        np.testing.assert_array_equal(specux.stft(x, **kw), S)
        np.testing.assert_array_equal(specux.istft(S, length=40, **kw), y)
        np.testing.assert_array_equal(cpu_stft.power_adjoint(x, None, p, 2.0, grad), g)
    assert rel_l2(y, x) <= TOLERANCES["roundtrip32"]


def test_istft_matches_torch(rng):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(rng.standard_normal((3, 2000)))
    w = torch.hann_window(300, dtype=torch.float64)
    S = torch.stft(x, 400, 100, 300, w, return_complex=True)
    ref = torch.istft(S, 400, 100, 300, w, length=1990)
    got = specux.istft(S, 400, 100, 300, length=1990)
    assert rel_l2(got.numpy(), ref.numpy()) <= TOLERANCES["float64"]


def test_two_sided_istft_of_any_spectrum_takes_the_real_part_of_each_frame(rng):
    """istft(onesided=False) of a spectrum that is no real signal's (not Hermitian): each
    frame is the real part of its inverse FFT, which is the inverse of the spectrum's
    Hermitian part (torch.istft reads the first n_fft // 2 + 1 bins as a one-sided
    spectrum instead; docs/api.md)."""
    n_fft, hop, count = 16, 4, 20
    S = rng.standard_normal((2, n_fft, count)) + 1j * rng.standard_normal((2, n_fft, count))
    got = specux.istft(S, n_fft, hop, onesided=False)
    w = scipy.signal.get_window("hann", n_fft, fftbins=True)
    frames = np.fft.ifft(S, axis=-2).real * w[:, None]
    summed = np.zeros((2, n_fft + hop * (count - 1)))
    envelope = np.zeros(summed.shape[-1])
    for t in range(count):
        summed[:, t * hop:t * hop + n_fft] += frames[..., t]
        envelope[t * hop:t * hop + n_fft] += w**2
    span = slice(n_fft // 2, n_fft // 2 + hop * (count - 1))  # center: the padding cut
    ref = summed[:, span] / envelope[span]
    assert got.shape == ref.shape
    assert rel_l2(got, ref) <= TOLERANCES["float64"]
    hermitian = (S + np.conj(np.roll(S[:, ::-1], 1, axis=1))) / 2  # S[k] + conj(S[-k])
    one_sided = specux.istft(hermitian[:, : n_fft // 2 + 1], n_fft, hop)
    assert rel_l2(got, one_sided) <= TOLERANCES["float64"]


def test_istft_nola_violation_raises(rng):
    S = specux.stft(rng.standard_normal(400), 64, 16, center=False)
    with pytest.raises(ValueError, match="NOLA"):
        specux.istft(S, 64, 16, center=False)
    S = specux.stft(rng.standard_normal(400), 64, 80)
    with pytest.raises(ValueError, match="NOLA"):
        specux.istft(S, 64, 80)


def _istft_keep_reference(S, n_fft, hop, window, center):
    """librosa's istft rule in float64 numpy: the overlap-add of the windowed inverse
    transforms, divided where the envelope exceeds float64's tiny."""
    frames = np.fft.irfft(np.swapaxes(S, -1, -2), n_fft) * window
    count = frames.shape[-2]
    ola = np.zeros(S.shape[:-2] + ((count - 1) * hop + n_fft,))
    env = np.zeros(ola.shape[-1])
    for t in range(count):
        ola[..., t * hop : t * hop + n_fft] += frames[..., t, :]
        env[t * hop : t * hop + n_fft] += window**2
    safe = np.where(env > np.finfo(np.float64).tiny, env, 1.0)
    pad = n_fft // 2 if center else 0
    return (ola / safe)[..., pad : ola.shape[-1] - pad]


def test_istft_nola_keep_is_librosas_rule(rng):
    """istft(nola="keep"): where the envelope vanishes (hann's zero at the first sample of an
    uncentred signal; a hop past the window, leaving gaps) the overlap-add is kept
    undivided -- 0 there -- and every other sample divided, however small its envelope.
    Where NOLA holds it gives the bits of nola="raise"."""
    x = rng.standard_normal((2, 400))
    window = scipy.signal.get_window("hann", 64, fftbins=True)
    for hop, center in ((16, False), (80, True), (80, False)):
        S = specux.stft(x, 64, hop, center=center)
        with pytest.raises(ValueError, match="NOLA"):
            specux.istft(S, 64, hop, center=center)
        got = specux.istft(S, 64, hop, center=center, nola="keep")
        ref = _istft_keep_reference(S, 64, hop, window, center)
        assert got.shape == ref.shape
        # the samples next to a zero of the envelope divide by ~1e-10: relative to the signal
        assert rel_l2(got, ref) <= TOLERANCES["roundtrip64"], (hop, center)
        if not center:
            assert (got[..., 0] == 0).all()
        if hop == 80:  # gaps between the frames: nothing was added there
            pad = 32 if center else 0
            assert (got[..., 64 - pad : 80 - pad] == 0).all()
    S = specux.stft(x, 64, 16)
    np.testing.assert_array_equal(specux.istft(S, 64, 16, nola="keep"), specux.istft(S, 64, 16))
    with pytest.raises(ValueError, match="nola"):
        specux.istft(S, 64, 16, nola="skip")


def test_istft_nola_keep_gradients():
    """The backward of istft(nola="keep") divides by the forward's divisor (1 where the
    envelope vanishes): gradcheck in float64 through the torch op, an uncentred hann (zero
    envelope at sample 0) and, for the window's gradient, a hop past the window (gaps that
    no frame covers, whatever the window: a window zero would be a discontinuity, its
    envelope rising from 0 past tiny under any perturbation)."""
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 120, dtype=torch.float64, generator=g)
    S = specux.stft(x, 16, 4, center=False).detach().requires_grad_(True)
    gapped = specux.stft(x, 16, 20, center=False).detach().requires_grad_(True)
    w = (torch.rand(16, dtype=torch.float64, generator=g) + 0.5).requires_grad_(True)

    def named(s):
        return specux.istft(s, 16, 4, center=False, nola="keep")

    def windowed(s, win):
        return specux.istft(s, 16, 20, window=win, center=False, nola="keep", length=110)

    assert named(S)[..., 0].abs().max() == 0
    assert windowed(gapped, w)[..., 16:20].abs().max() == 0
    assert torch.autograd.gradcheck(named, (S,))
    assert torch.autograd.gradcheck(windowed, (gapped, w))


@given(
    n_fft=st.integers(2, 96),
    hop_fraction=st.sampled_from([1, 2, 3, 4]),
    length=st.integers(1, 400),
    batch=st.sampled_from([(), (2,), (1, 2)]),
)
def test_istft_roundtrip_property(n_fft, hop_fraction, length, batch):
    hop = max(1, n_fft // (2 * hop_fraction))
    x = np.random.default_rng(n_fft * 1000 + length).standard_normal((*batch, length))
    S = specux.stft(x, n_fft, hop, pad_mode="reflect")
    y = specux.istft(S, n_fft, hop, length=length)
    assert rel_l2(y, x) <= TOLERANCES["roundtrip64"]


@given(
    frame_length=st.integers(1, 40),
    hop=st.integers(1, 50),
    count=st.integers(1, 9),
    batch=st.sampled_from([(), (2,), (2, 3)]),
)
def test_overlap_add_matches_a_loop_over_frames(frame_length, hop, count, batch):
    # hop below, equal to and above the frame length (a last chunk shorter than a hop)
    from specux.kernels.cpu.frames import overlap_add
    from specux.meta.shapes import ola_length

    frames = np.random.default_rng(frame_length * 97 + hop).standard_normal(
        (*batch, count, frame_length))
    expected = np.zeros((*batch, ola_length(count, frame_length, hop)))
    for t in range(count):
        expected[..., t * hop : t * hop + frame_length] += frames[..., t, :]
    got = overlap_add(frames, hop)
    assert got.shape == expected.shape
    assert np.allclose(got, expected, rtol=0, atol=TOLERANCES["overlap_add64"])


@pytest.mark.parametrize("shape", [(1, 600000), (2, 300000), (8, 60000)])
def test_cpu_blocks_do_not_depend_on_the_thread_count(rng, shape, monkeypatch):
    """The CPU backend splits frames into blocks by the input's shape only (not the core
    count), so the filterbank's GEMMs see the same blocks and the bits are the same whether
    one worker or several run them (these shapes have enough frames for the pool)."""
    from specux.kernels.cpu import fft as cpu_fft

    x = rng.standard_normal(shape).astype(np.float32)
    pooled = []
    run_blocks = cpu_fft.run_blocks

    def counted(work, items, parallel=True):
        if parallel:
            pooled.append(len(items))
        run_blocks(work, items, parallel)

    monkeypatch.setattr(cpu_fft, "run_blocks", counted)

    def features():
        return (specux.melspectrogram(x, sr=16000, n_fft=512, hop_length=128, n_mels=40),
                specux.stft(x, n_fft=512, hop_length=128, output="power"))  # fmt: skip

    several = features()
    assert pooled and min(pooled) >= 8  # a few long rows are cut into >= 8 blocks
    monkeypatch.setattr(cpu_fft, "WORKERS", 1)
    for a, b in zip(several, features()):
        assert np.array_equal(a, b)


def test_small_cpu_calls_stay_on_the_calling_thread(rng, monkeypatch):
    """Below 4 MiB of frames the blocks run on the calling thread: handing them to the pool
    cost more than it saved (a (1, 16000) mel 1.6-1.9 ms on the pool, 0.45-0.83 ms without,
    on the 2-core development VM)."""
    from specux.kernels.cpu import fft as cpu_fft

    def refuse(work, items, parallel=True):
        assert not parallel, f"{len(items)} blocks went to the pool"
        for item in items:
            work(item)

    x = rng.standard_normal((4, 16000)).astype(np.float32)
    want = specux.melspectrogram(x, sr=16000, n_fft=1024, hop_length=256, n_mels=40)
    monkeypatch.setattr(cpu_fft, "run_blocks", refuse)
    got = specux.melspectrogram(x, sr=16000, n_fft=1024, hop_length=256, n_mels=40)
    assert np.array_equal(got, want)
    specux.stft(x[:1], n_fft=1024, hop_length=256)


@pytest.mark.parametrize("pad_mode", ["constant", "reflect", "replicate", "circular"])
def test_short_signals_frame_from_one_padded_copy(rng, pad_mode, monkeypatch):
    """Signals up to 256 KiB (padded) are framed from one padded copy, longer ones read their
    inner frames in place and pad only the edge frames: the same frames, so the same
    spectrum bits (each row's FFT does not depend on its batch). The three regions' frames
    are gathered into one block: one FFT call a block (both short rows here, one task:
    cpu.stft.row_ranges), not one a region."""
    from specux.kernels.cpu import fft as cpu_fft
    from specux.kernels.cpu import stft as cpu_stft

    x = rng.standard_normal((2, 3001)).astype(np.float32)
    kw = dict(n_fft=256, hop_length=100, pad_mode=pad_mode)
    copied = specux.stft(x, **kw)
    monkeypatch.setattr(cpu_stft, "_PADDED_COPY_BYTES", 0)
    assert len(cpu_stft._frame_regions(x, cpu_stft.StftParams(
        n_fft=256, hop_length=100, win_length=256, window=cpu_stft.WindowSpec.from_key("hann"),
        center=True, pad_mode=pad_mode, normalized=False, onesided=True), 31)) == 3
    calls = []
    forward_into = cpu_fft.forward_into
    monkeypatch.setattr(cpu_fft, "forward_into",
                        lambda src, *a: calls.append(src.shape) or forward_into(src, *a))
    for output in ("complex", "power"):
        calls.clear()
        got = specux.stft(x, output=output, **kw)
        assert calls == [(62, 256)]
        if output == "complex":
            np.testing.assert_array_equal(got, copied)
        else:
            np.testing.assert_array_equal(got, copied.real**2 + copied.imag**2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_db_into_floor_and_accuracy(dtype):
    """The CPU backend's dB (cpu stft.db_into: the natural log times factor / ln 10, chosen
    when numpy's float32 log10 was 3x slower; numpy 2.4.6 vectorizes both): values at or
    below eps get exactly the correctly rounded floor (10 log10(1e-10) = -100, which the dB
    backward recognizes, whatever numpy's float32 log10 rounds it to), NaN and inf pass
    through, it runs in place, and it matches float64 log10 to a few eps of the dB value."""
    from specux.kernels.cpu.stft import db_into

    rng = np.random.default_rng(0)
    values = np.concatenate([10.0 ** rng.uniform(-12, 6, 20000), rng.uniform(0.5, 2.0, 2000),
                             [0.0, 1e-10, 1e-11, -3.0, np.inf, np.nan]]).astype(dtype)  # fmt: skip
    for factor in (10.0, 20.0):
        ref = factor * np.log10(np.maximum(values.astype(np.float64), np.float64(dtype(1e-10))))
        out = np.empty_like(values)
        db_into(values, factor, 1e-10, out)
        low = values <= 1e-10
        assert low[-6:-2].all() and (out[low] == -factor * 10).all()
        assert np.isposinf(out[-2]) and np.isnan(out[-1])
        finite = np.isfinite(ref)
        bound = TOLERANCES["db_log_eps"] * np.finfo(dtype).eps * np.maximum(np.abs(ref), 1.0)
        assert (np.abs(out[finite] - ref[finite]) <= bound[finite]).all()
        inplace = values.copy()
        db_into(inplace, factor, 1e-10, inplace)
        np.testing.assert_array_equal(inplace, out)


def _forked_child_work() -> None:
    """Runs in a forked child: the CPU pool's work and a pooled stft (raises -> exit 1)."""
    from specux.kernels.cpu import fft as cpu_fft

    done: list = []
    cpu_fft.run_blocks(done.append, range(4))
    assert sorted(done) == [0, 1, 2, 3]
    x = np.random.default_rng(1).standard_normal((16, 40000))  # 5 MB: rows on the pool
    ref = specux.stft(x[:1], n_fft=256)
    assert np.array_equal(specux.stft(x, n_fft=256)[:1], ref)


@pytest.mark.skipif(not hasattr(__import__("os"), "register_at_fork"), reason="no fork here")
def test_a_forked_child_starts_its_own_cpu_pool(monkeypatch):
    """A child forked after the parent's CPU pool started (multiprocessing's default on
    Linux, torch DataLoader workers) gets a pool of its own: it inherited the pool object
    but none of its threads, and its first pooled call waited for ever."""
    import multiprocessing

    from specux.kernels.cpu import fft as cpu_fft

    monkeypatch.setattr(cpu_fft, "WORKERS", 2)  # (a pool even on one core)
    done: list = []
    cpu_fft.run_blocks(done.append, range(4))  # the parent's pool is running
    assert cpu_fft._pool is not None
    child = multiprocessing.get_context("fork").Process(target=_forked_child_work)
    child.start()
    child.join(120)
    hung = child.is_alive()
    if hung:
        child.kill()
    assert not hung and child.exitcode == 0
