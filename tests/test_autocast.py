"""Inside ``torch.autocast`` the transforms compute in float32 (API.md, "torch integration").

Outside autocast a float16 / bfloat16 tensor is a storage format: computed in float32, real
results rounded back to it (API.md, "Precision"). Inside an autocast region -- where the
layers before a transform hand it half-precision activations -- specux follows torch's own
spectral ops (torch.stft, torch.fft.*, on autocast's float32 list): a half input is taken as
its float32 value and the result is float32 / complex64, never rounded to half (a float16
power spectrum of a loud signal overflows to inf). So the result under autocast equals,
bit for bit, the same call on ``x.float()``. float32 and float64 inputs are unaffected.
The CUDA counterpart is tests/test_cuda_transforms.py::test_autocast_computes_in_float32.
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

import specux  # noqa: E402

HALVES = [torch.float16, torch.bfloat16]
SR = 16000


def _signal(shape, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return scale * torch.randn(*shape, generator=g)


def _quiet(fn, *args):
    with warnings.catch_warnings():  # torch: "ComplexHalf support is experimental"
        warnings.simplefilter("ignore", UserWarning)
        return fn(*args)


# name -> a call of one public function on a signal (..., L)
CALLS = {
    "stft": lambda t: specux.stft(t, n_fft=256, hop_length=64),
    "stft-power": lambda t: specux.stft(t, n_fft=256, hop_length=64, output="power"),
    "stft-db": lambda t: specux.stft(t, n_fft=255, hop_length=100, output="db"),
    "melspectrogram-db": lambda t: specux.melspectrogram(
        t, sr=SR, n_fft=256, hop_length=64, n_mels=40, output="db", top_db=80.0
    ),
    "mfcc": lambda t: specux.mfcc(t, sr=SR, n_fft=256, hop_length=64, n_mels=40),
    "lfcc": lambda t: specux.lfcc(t, sr=SR, n_fft=256, hop_length=64, n_filter=40),
    "cqt": lambda t: specux.cqt(t, sr=SR, hop_length=128, n_bins=36),
    "vqt": lambda t: specux.vqt(t, sr=SR, hop_length=128, n_bins=24, gamma=10.0),
    "chroma-stft": lambda t: specux.chroma(t, sr=SR, n_fft=256, hop_length=64),
    "chroma-cqt": lambda t: specux.chroma(t, sr=SR, source="cqt", hop_length=128),
    # (the kernel a constant: a leaf used twice would sum two gradients rounded to half)
    "fftconvolve": lambda t: specux.fftconvolve(t, t.detach()[..., :101], mode="same"),
    "fft": lambda t: specux.fft(t, n=1000),
    "rfft": lambda t: specux.rfft(t),
    "irfft": lambda t: specux.irfft(t, n=300),
    "hfft": lambda t: specux.hfft(t),
    "ihfft": lambda t: specux.ihfft(t),
    "rfft2": lambda t: specux.rfft2(t),
    "fftn": lambda t: specux.fftn(t, s=(3, 64)),
}


@pytest.mark.parametrize("half", HALVES, ids=["f16", "bf16"])
@pytest.mark.parametrize("name", list(CALLS))
def test_half_input_under_autocast_computes_and_returns_float32(name, half):
    x = _signal((2, 3000), seed=1, scale=30.0).to(half)  # loud: |X|^2 overflows float16
    fn = CALLS[name]
    want = _quiet(fn, x.float())
    with torch.autocast("cpu", dtype=half):
        got = _quiet(fn, x)
    assert got.dtype == want.dtype and want.dtype in (torch.float32, torch.complex64), name
    assert torch.equal(got, want), name
    # outside the region the storage rule holds again: results in the half type
    outside = _quiet(fn, x)
    assert outside.dtype in (half, torch.complex32, torch.complex64), name
    assert outside.dtype != want.dtype or outside.dtype == torch.complex64, name


@pytest.mark.parametrize("half", HALVES, ids=["f16", "bf16"])
def test_complex_half_spectrogram_under_autocast(half):
    # istft of a complex32 spectrogram (the float16 stft's own output type) and of a
    # complex64 one made under the same region
    x = _signal((2, 4000), seed=2).to(torch.float16)
    S = _quiet(specux.stft, x, 512)  # complex32 outside autocast
    assert S.dtype == torch.complex32
    want = specux.istft(S.to(torch.complex64), 512, length=4000)
    with torch.autocast("cpu", dtype=half):
        got = _quiet(specux.istft, S, 512, None, None, "hann", True, False, True, 4000)
        inverse = _quiet(specux.ifft, S)
    assert got.dtype == torch.float32 and torch.equal(got, want)
    assert inverse.dtype == torch.complex64
    assert torch.equal(inverse, specux.ifft(S.to(torch.complex64)))


@pytest.mark.parametrize("half", HALVES, ids=["f16", "bf16"])
def test_full_precision_inputs_keep_their_dtype_under_autocast(half):
    for dtype in (torch.float32, torch.float64):
        x = _signal((2, 3000), seed=3).to(dtype)
        for name in ("stft", "melspectrogram-db", "mfcc", "cqt", "fftconvolve", "rfft"):
            want = CALLS[name](x)
            with torch.autocast("cpu", dtype=half):
                got = CALLS[name](x)
            assert got.dtype == want.dtype and torch.equal(got, want), (name, dtype)


@pytest.mark.parametrize("half", HALVES, ids=["f16", "bf16"])
def test_gradient_of_a_half_leaf_under_autocast(half):
    # the cast up is part of the graph: the leaf's gradient comes back in its own dtype, equal
    # to the float32 computation's gradient rounded once
    x = _signal((2, 3000), seed=4).to(half)
    for name in ("stft-power", "melspectrogram-db", "mfcc", "fftconvolve"):
        leaf = x.clone().requires_grad_(True)
        with torch.autocast("cpu", dtype=half):
            out = CALLS[name](leaf)
        assert out.dtype == torch.float32, name
        (got,) = torch.autograd.grad(out.sum(), leaf)
        wide = x.float().requires_grad_(True)
        (want,) = torch.autograd.grad(CALLS[name](wide).sum(), wide)
        assert got.dtype == half, name
        assert torch.equal(got, want.to(half)), name


@pytest.mark.parametrize("half", HALVES, ids=["f16", "bf16"])
def test_nn_modules_under_autocast(half):
    x = _signal((2, 3000), seed=5, scale=30.0).to(half)
    modules = {
        "STFT": specux.nn.STFT(n_fft=256),
        "MelSpectrogram": specux.nn.MelSpectrogram(sr=SR, n_fft=256, n_mels=40),
        "MFCC": specux.nn.MFCC(sr=SR, n_fft=256, n_mels=40),
        "LFCC": specux.nn.LFCC(sr=SR, n_fft=256, n_filter=40),
        "Chroma": specux.nn.Chroma(sr=SR, n_fft=256),
        "CQT": specux.nn.CQT(sr=SR, hop_length=128, n_bins=36),
    }
    for name, module in modules.items():
        want = _quiet(module, x.float())
        with torch.autocast("cpu", dtype=half):
            got = _quiet(module, x)
        assert got.dtype == want.dtype and want.dtype in (torch.float32, torch.complex64), name
        assert torch.equal(got, want), name
        assert _quiet(module, x).dtype != want.dtype or want.dtype == torch.complex64, name


def test_ops_cast_half_inputs_under_autocast():
    # a direct torch.ops.specux call goes through the op's registered autocast rule
    x = _signal((2, 1000), seed=6).to(torch.float16)
    with torch.autocast("cpu", dtype=torch.float16):
        spectrum = torch.ops.specux.r2c(x, [-1], "backward")
        power = torch.ops.specux.stft(x, None, "hann", 256, 64, 256, True, "constant", False,
                                      True, "power", 1e-10)  # fmt: skip
    assert spectrum.dtype == torch.complex64
    assert torch.equal(spectrum, torch.ops.specux.r2c(x.float(), [-1], "backward"))
    assert power.dtype == torch.float32
    assert torch.equal(power, specux.stft(x.float(), n_fft=256, hop_length=64, output="power"))


def test_compiled_transform_under_autocast():
    fn = torch.compile(CALLS["melspectrogram-db"], fullgraph=True)
    x = _signal((2, 3000), seed=7).to(torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = fn(x)
    assert got.dtype == torch.float32
    assert torch.equal(got, CALLS["melspectrogram-db"](x.float()))
    assert fn(x).dtype == torch.bfloat16  # outside the region: the storage rule
