"""Configured twins (specux.twins) and torch.nn modules (specux.nn) against the functions."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from tolerances import TOLERANCES, rel_l2, rel_peak

import specux
from specux import twins

torch = pytest.importorskip("torch")
from specux import nn  # noqa: E402 - needs torch

SR = 16000

# (name, parameters): each transform with a few non-default parameters.
SIGNAL_CASES = [
    ("STFT", "stft", dict(n_fft=256, hop_length=100, window="hamming", pad_mode="reflect")),
    ("STFT", "stft", dict(n_fft=200, win_length=150, output="db", normalized=True)),
    ("MelSpectrogram", "melspectrogram",
     dict(sr=SR, n_fft=512, hop_length=128, n_mels=40, fmin=50.0, htk=True)),
    ("MelSpectrogram", "melspectrogram",
     dict(sr=SR, n_fft=400, n_mels=32, power=1.0, output="db", top_db=60.0, norm=None)),
    ("MFCC", "mfcc", dict(sr=SR, n_mfcc=13, n_fft=512, n_mels=40, lifter=22.0)),
    ("MFCC", "mfcc",
     dict(sr=SR, n_mfcc=20, dct_type=3, norm=None, top_db=None, n_mels=30, mel_norm=None,
          window=("kaiser", 8.0), center=False)),
    ("LFCC", "lfcc", dict(sr=SR, n_lfcc=16, n_filter=48, n_fft=400, win_length=300)),
    ("Chroma", "chroma", dict(sr=22050, n_fft=1024, tuning=0.25, norm=2.0)),
    ("Chroma", "chroma", dict(sr=22050, n_fft=1024, hop_length=256, octwidth=None, base_c=False)),
    ("Chroma", "chroma", dict(sr=22050, n_fft=1024, norm=-np.inf)),
    ("Chroma", "chroma", dict(sr=22050, n_fft=512, norm=0)),
]  # fmt: skip
IDS = [f"{name}-{i}" for i, (name, _, _) in enumerate(SIGNAL_CASES)]


def _signal(shape=(2, 3, 3000), dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------------------------------------
# twins


@pytest.mark.parametrize("name,function,kwargs", SIGNAL_CASES, ids=IDS)
@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_twin_equals_function(name, function, kwargs, library):
    x = _signal()
    if library == "torch":
        x = torch.from_numpy(x)
    twin = getattr(twins, name)(**kwargs)
    got, ref = twin(x), getattr(specux, function)(x, **kwargs)
    assert type(got) is type(ref) and got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))


def test_twin_istft_and_fftconvolve_equal_functions():
    x = _signal((2, 2000))
    S = specux.stft(x, 256, 64)
    istft = twins.ISTFT(n_fft=256, hop_length=64)
    np.testing.assert_array_equal(istft(S), specux.istft(S, 256, 64))
    # length per call overrides the configured one
    np.testing.assert_array_equal(istft(S, length=2000), specux.istft(S, 256, 64, length=2000))
    y = _signal((3, 2, 40), seed=1)
    conv = twins.FFTConvolve("valid", dim=-1)
    np.testing.assert_array_equal(conv(x, y), specux.fftconvolve(x, y, "valid", -1))
    with pytest.raises(TypeError, match=r"called with \(x, y\)"):
        conv(x)


@pytest.mark.parametrize("module", [False, True])
def test_istft_twin_takes_what_istft_takes(module):
    # a window array without n_fft (its length is win_length), and a length reaching past the
    # probe's one frame with win_length < n_fft: both raised at construction
    x = _signal((2, 2000))
    window = np.hanning(64)
    S = specux.stft(x, 64, 16, window=window)
    S2 = specux.stft(x, 64, 8, win_length=32)
    if module:
        t = torch.from_numpy
        got = nn.ISTFT(hop_length=16, window=t(window), dtype=torch.float64)(t(S)).numpy()
        got2 = nn.ISTFT(n_fft=64, win_length=32, hop_length=8, length=2000,
                        dtype=torch.float64)(t(S2)).numpy()  # fmt: skip
    else:
        got = twins.ISTFT(hop_length=16, window=window)(S)
        got2 = twins.ISTFT(n_fft=64, win_length=32, hop_length=8, length=2000)(S2)
    np.testing.assert_array_equal(got, specux.istft(S, hop_length=16, window=window))
    np.testing.assert_array_equal(got2, specux.istft(S2, 64, 8, win_length=32, length=2000))
    with pytest.raises(ValueError, match="length=-1"):
        twins.ISTFT(n_fft=64, length=-1)


@pytest.mark.parametrize("window", ["hann", ("kaiser", 6.0)])
def test_module_istft_without_a_size_takes_it_from_the_spectrum(window):
    """nn.ISTFT() (no n_fft, win_length or window array: it raised) builds its named window
    for the size S implies at each call, as specux.istft(S) does, and has no buffer."""
    x = torch.from_numpy(_signal((2, 3000)))
    m = nn.ISTFT(window=window, hop_length=16, length=3000)
    assert "window" not in m.state_dict()
    for n_fft in (64, 100):
        S = specux.stft(x, n_fft, 16, window=window)
        got = m(S)
        assert torch.equal(got, specux.istft(S, hop_length=16, window=window, length=3000))
        assert rel_l2(got.numpy(), x.numpy()) <= TOLERANCES["roundtrip64"]
    S = specux.stft(x, 64, 16).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda s: nn.ISTFT(hop_length=16)(s), (S[:1, :, :20],))


def test_twin_fftconvolve_binds_its_kernel():
    """With the kernel given (first positionally as an array, or y=) the twin is called with
    the signal alone, as API.md's twins are; a string first argument is still the mode."""
    x, h = _signal((2, 300)), _signal((17,), seed=2)
    ref = specux.fftconvolve(x, h, "same")
    for conv in (twins.FFTConvolve(h, "same"), twins.FFTConvolve(h, mode="same"),
                 twins.FFTConvolve("same", y=h), twins.FFTConvolve(y=h, mode="same")):
        assert conv.given["y"] is h and conv.given["mode"] == "same"
        np.testing.assert_array_equal(conv(x), ref)
        with pytest.raises(TypeError, match=r"called with \(x\), got 2"):
            conv(x, h)
    assert repr(twins.FFTConvolve(h)) == "FFTConvolve(y=<numpy float64 array (17,)>)"
    with pytest.raises(ValueError, match="mode='bogus'"):
        twins.FFTConvolve(h, "bogus")


def test_bound_kernel_with_a_dim_from_the_front():
    """A dim counted from the front with a bound kernel of several dimensions constructs
    (the probe signal takes the kernel's dimensions; a 1-D probe was refused as ambiguous)
    and equals the function; a dim past the kernel's axes is out of range at construction."""
    x, h = _signal((600, 2)), _signal((33, 1), seed=3)
    ref = specux.fftconvolve(x, h, dim=0)
    for conv in (twins.FFTConvolve(h, dim=0), twins.FFTConvolve(y=h, dim=0)):
        np.testing.assert_array_equal(conv(x), ref)
    module = nn.FFTConvolve(torch.from_numpy(h), dim=0)
    np.testing.assert_array_equal(module(torch.from_numpy(x)).numpy(), ref)
    x3, h3 = _signal((2, 50, 4)), _signal((2, 20, 4), seed=4)
    got = twins.FFTConvolve(h3, mode="valid", dim=1)(x3)
    np.testing.assert_array_equal(got, specux.fftconvolve(x3, h3, mode="valid", dim=1))
    with pytest.raises(ValueError, match="dim=2 is out of range for an input with 2 dimensions"):
        twins.FFTConvolve(h, dim=2)


def test_twin_positional_parameters_repr_and_params():
    a, b = twins.STFT(512, 128), twins.STFT(n_fft=512, hop_length=128)
    x = _signal((1000,))
    np.testing.assert_array_equal(a(x), b(x))
    assert repr(a) == "STFT(n_fft=512, hop_length=128)"
    assert a.params["window"] == "hann" and a.params["center"] is True
    assert a.given == {"n_fft": 512, "hop_length": 128}
    m = twins.MFCC(sr=SR, n_mfcc=13, n_mels=40)
    assert repr(m) == "MFCC(sr=16000, n_mfcc=13, n_mels=40)"
    assert m.params["n_mels"] == 40 and m.params["top_db"] == 80.0
    w = twins.STFT(n_fft=512, win_length=400, window=np.hanning(400))
    assert repr(w) == "STFT(n_fft=512, win_length=400, window=<numpy float64 array (400,)>)"


def test_twin_window_array_in_its_library():
    window = torch.hann_window(300, dtype=torch.float64)
    twin = twins.STFT(n_fft=512, win_length=300, window=window)
    x = torch.from_numpy(_signal((2, 2000)))
    torch.testing.assert_close(twin(x), specux.stft(x, 512, win_length=300, window=window))


BAD_PARAMETERS = [
    (twins.STFT, dict(n_fft=256, win_length=300), ValueError, "win_length=300"),
    (twins.STFT, dict(n_fft=256.0), TypeError, "n_fft must be an integer"),
    (twins.STFT, dict(hop_length=0), ValueError, "hop_length=0"),
    (twins.STFT, dict(window="triangle"), ValueError, "window='triangle'"),
    (twins.STFT, dict(pad_mode="mirror"), ValueError, "pad_mode='mirror'"),
    (twins.STFT, dict(output="phase"), ValueError, "output='phase'"),
    (twins.STFT, dict(n_fft=512, window=np.ones(100)), ValueError, r"expected \(512,\)"),
    (twins.STFT, dict(backend="tpu"), ValueError, "backend='tpu'"),
    (twins.STFT, dict(nfft=512), TypeError, r"STFT\(\): .*nfft"),
    (twins.ISTFT, dict(n_fft=256, win_length=300), ValueError, "win_length=300"),
    (twins.ISTFT, dict(n_fft=256, center=False), ValueError, "NOLA"),
    (twins.MelSpectrogram, dict(n_fft=512), TypeError, "sr"),
    (twins.MelSpectrogram, dict(sr=SR, fmax=9000.0), ValueError, "fmax=9000.0"),
    (twins.MelSpectrogram, dict(sr=SR, norm="area"), ValueError, "norm='area'"),
    (twins.MelSpectrogram, dict(sr=SR, top_db=80.0), ValueError, "top_db"),
    (twins.MelSpectrogram, dict(sr=-1.0), ValueError, "sr=-1.0"),
    (twins.MFCC, dict(sr=SR, n_mfcc=50, n_mels=40), ValueError, "n_mfcc=50"),
    (twins.MFCC, dict(sr=SR, dct_type=5), ValueError, "dct_type=5"),
    (twins.MFCC, dict(sr=SR, lifter=-1.0), ValueError, "lifter"),
    (twins.MFCC, dict(sr=SR, n_chroma=12), TypeError, "n_chroma"),
    (twins.LFCC, dict(sr=SR, fmin=9000.0), ValueError, "fmin"),
    (twins.LFCC, dict(sr=SR, n_filter=0), ValueError, "n_filter=0"),
    (twins.Chroma, dict(sr=22050, norm=-1.0), ValueError, "norm"),
    (twins.Chroma, dict(sr=22050, source="wavelet"), ValueError, "source='wavelet'"),
    (twins.FFTConvolve, dict(mode="circular"), ValueError, "mode='circular'"),
    (twins.FFTConvolve, dict(dim=1.5), TypeError, "dim must be an integer"),
]


@pytest.mark.parametrize("cls,kwargs,error,match", BAD_PARAMETERS)
def test_bad_parameters_fail_at_construction(cls, kwargs, error, match):
    with pytest.raises(error, match=match):
        cls(**kwargs)


@pytest.mark.parametrize("name", ["CQT", "VQT"])
def test_constant_q_twins_when_available(name):
    function = name.lower()
    if not hasattr(specux, function):
        assert not hasattr(twins, name)
        pytest.skip(f"specux.{function} is not in this version")
    twin = getattr(twins, name)(sr=22050, n_bins=24, hop_length=256)
    x = _signal((2, 4000))
    np.testing.assert_array_equal(
        twin(x), getattr(specux, function)(x, sr=22050, n_bins=24, hop_length=256)
    )
    # construction probes with one sample: it once took 2 * hop_length (here 16 TB of zeros,
    # a MemoryError), where the function itself runs at once
    huge = getattr(twins, name)(sr=22050, n_bins=24, hop_length=10**12)
    np.testing.assert_array_equal(
        huge(x), getattr(specux, function)(x, sr=22050, n_bins=24, hop_length=10**12)
    )


# ---------------------------------------------------------------------------------------------
# nn modules: numbers


def test_nn_is_an_attribute_of_specux_without_its_own_import():
    # API.md names ``specux.nn``: ``import specux`` alone must reach it (loaded on first use)
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = ("import sys, specux; assert 'specux.nn' not in sys.modules; "
            "m = specux.nn.MelSpectrogram(sr=16000, n_fft=512); "
            "assert type(m).__module__ == 'specux.nn'; from specux import nn; "
            "assert nn is specux.nn and 'specux.nn' in sys.modules; print('OK')")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "OK", done.stderr


def _module(name, kwargs, **factory):
    return getattr(nn, name)(**kwargs, **factory)


@pytest.mark.parametrize("name,function,kwargs", SIGNAL_CASES, ids=IDS)
def test_module_equals_function_float32(name, function, kwargs):
    x = torch.from_numpy(_signal(dtype=np.float32))
    module = _module(name, kwargs)
    assert all(b.dtype == torch.float32 for b in module.buffers())
    got, ref = module(x), getattr(specux, function)(x, **kwargs)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert rel_peak(got.numpy(), ref.numpy()) <= TOLERANCES["float32_peak"]


@pytest.mark.parametrize("name,function,kwargs", SIGNAL_CASES, ids=IDS)
@pytest.mark.parametrize("how", ["double", "to", "dtype"])
def test_module_equals_function_float64(name, function, kwargs, how):
    x = torch.from_numpy(_signal())
    if how == "dtype":
        module = _module(name, kwargs, dtype=torch.float64)
    else:
        module = _module(name, kwargs)
        module = module.double() if how == "double" else module.to(torch.float64)
    assert all(b.dtype == torch.float64 for b in module.buffers())
    got, ref = module(x), getattr(specux, function)(x, **kwargs)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert rel_l2(got.numpy(), ref.numpy()) <= TOLERANCES["float64"]


def test_float32_module_on_float64_input_computes_in_float64():
    # Buffers are cast to the input's compute dtype: float64 math with float32-rounded filters.
    x = torch.from_numpy(_signal())
    module = nn.MelSpectrogram(sr=SR, n_fft=512, n_mels=40)
    got, ref = module(x), specux.melspectrogram(x, sr=SR, n_fft=512, n_mels=40)
    assert got.dtype == torch.float64 and module.fb.dtype == torch.float32
    assert 0 < rel_peak(got.numpy(), ref.numpy()) <= TOLERANCES["float32_peak"]


def test_buffer_conversions_are_kept_until_the_buffer_changes():
    """A float32 module on float64 input hands the ops one converted filterbank on every call
    (the CUDA kernels cache its sparse tables by identity), a new one after the buffer
    changes in place or is replaced; a learnable bank is converted in the graph each call."""
    from specux.nn import _like

    x = torch.from_numpy(_signal())
    module = nn.MelSpectrogram(sr=SR, n_fft=512, n_mels=40)
    first = _like(module.fb, x, "fb")
    assert first.dtype == torch.float64 and _like(module.fb, x, "fb") is first
    base = module(x)
    with torch.no_grad():
        module.fb.mul_(2.0)
    second = _like(module.fb, x, "fb")
    assert second is not first and torch.equal(second, 2.0 * first)
    torch.testing.assert_close(module(x), 2.0 * base)
    module.fb = torch.nn.Parameter(module.fb.clone())
    converted = _like(module.fb, x, "fb")
    assert converted.grad_fn is not None and _like(module.fb, x, "fb") is not converted


@pytest.mark.parametrize("name", ["MelSpectrogram", "MFCC", "FFTConvolve"])
def test_inference_mode_call_then_training(name):
    """A module called under torch.inference_mode on input of another dtype than its buffers,
    then with gradients: the conversion made under inference mode (an inference tensor,
    which autograd cannot save) was kept and the backward raised."""
    module = (nn.FFTConvolve(torch.randn(16)) if name == "FFTConvolve"
              else getattr(nn, name)(sr=SR, n_fft=64, n_mels=8, **(
                  {"n_mfcc": 4} if name == "MFCC" else {}))).double()  # fmt: skip
    x = torch.randn(2, 1000)
    with torch.inference_mode():
        evaluated = module(x)
    x.requires_grad_()
    out = module(x)
    out.sum().backward()
    assert torch.equal(out.detach(), evaluated) and x.grad.abs().sum() > 0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["MelSpectrogram", "MFCC", "LFCC", "Chroma"])
def test_module_half_inputs_like_functions(name, dtype):
    function, kwargs = next((f, k) for n, f, k in SIGNAL_CASES if n == name)
    x = torch.from_numpy(_signal(dtype=np.float32)).to(getattr(torch, dtype))
    got, ref = _module(name, kwargs)(x), getattr(specux, function)(x, **kwargs)
    assert got.dtype == x.dtype == ref.dtype
    assert torch.equal(got, ref)


def test_module_stft_istft_fftconvolve_equal_functions():
    x = torch.from_numpy(_signal((2, 2000)))
    S = specux.stft(x, 256, 64)
    istft = nn.ISTFT(n_fft=256, hop_length=64, dtype=torch.float64)
    torch.testing.assert_close(istft(S), specux.istft(S, 256, 64), rtol=0, atol=0)
    torch.testing.assert_close(istft(S, 1990), specux.istft(S, 256, 64, length=1990))
    y = torch.from_numpy(_signal((2, 50), seed=3))
    conv = nn.FFTConvolve(mode="same")
    torch.testing.assert_close(conv(x, y), specux.fftconvolve(x, y, "same"), rtol=0, atol=0)
    # the window array given at construction becomes the buffer
    window = torch.rand(200, dtype=torch.float64) + 0.5
    stft = nn.STFT(n_fft=256, win_length=200, window=window, dtype=torch.float64)
    torch.testing.assert_close(stft(x), specux.stft(x, 256, win_length=200, window=window))


def test_module_fftconvolve_holds_a_bound_kernel():
    """nn.FFTConvolve(h): the kernel is buffer ``kernel`` (state_dict, .to(dtype)), forward
    takes the signal alone; unbound, forward needs y; complex kernels are not buffers."""
    x = torch.from_numpy(_signal((2, 500)))
    h = _signal((33,), seed=4)
    conv = nn.FFTConvolve(h, mode="same", dtype=torch.float64)
    assert list(conv.state_dict()) == ["kernel"]
    torch.testing.assert_close(conv(x), specux.fftconvolve(x, torch.from_numpy(h), "same"),
                               rtol=0, atol=0)  # fmt: skip
    other = nn.FFTConvolve(np.zeros(33), mode="same", dtype=torch.float64)
    other.load_state_dict(conv.state_dict())
    torch.testing.assert_close(other(x), conv(x), rtol=0, atol=0)
    assert conv.float()(x.float()).dtype == torch.float32
    with pytest.raises(TypeError, match="call it with x alone"):
        conv(x, x)
    with pytest.raises(TypeError, match="the kernel y is missing"):
        nn.FFTConvolve(mode="same")(x)
    with pytest.raises(TypeError, match="binds real kernels"):
        nn.FFTConvolve(h.astype(np.complex128))


def test_module_fftconvolve_keeps_its_kernels_dtype():
    """Without dtype=, a floating kernel's buffer keeps the kernel's dtype: a float64 kernel
    convolves a float64 signal exactly as the function does (it was rounded to float32, 2e-7
    off); dtype= still picks the buffer's dtype."""
    x = torch.from_numpy(_signal((2, 500)))
    h = _signal((33,), seed=4)
    for kernel in (h, torch.from_numpy(h)):
        conv = nn.FFTConvolve(kernel)
        assert conv.kernel.dtype == torch.float64
        torch.testing.assert_close(conv(x), specux.fftconvolve(x, torch.from_numpy(h)),
                                   rtol=0, atol=0)  # fmt: skip
    assert nn.FFTConvolve(h.astype(np.float32)).kernel.dtype == torch.float32
    assert nn.FFTConvolve(h, dtype=torch.float32).kernel.dtype == torch.float32


# ---------------------------------------------------------------------------------------------
# nn modules: buffers and state


BUFFERS = {
    "STFT": dict(kwargs=dict(n_fft=256, win_length=200), shapes={"window": (200,)}),
    "ISTFT": dict(kwargs=dict(n_fft=256), shapes={"window": (256,)}),
    "MelSpectrogram": dict(kwargs=dict(sr=SR, n_fft=512, n_mels=40),
                           shapes={"window": (512,), "fb": (40, 257)}),
    "MFCC": dict(kwargs=dict(sr=SR, n_mfcc=13, n_fft=512, n_mels=40),
                 shapes={"window": (512,), "fb": (40, 257), "dct": (13, 40)}),
    "LFCC": dict(kwargs=dict(sr=SR, n_lfcc=10, n_filter=30, n_fft=256),
                 shapes={"window": (256,), "fb": (30, 129), "dct": (10, 30)}),
    "Chroma": dict(kwargs=dict(sr=22050, n_fft=1024, n_chroma=24),
                   shapes={"window": (1024,), "fb": (24, 513)}),
    "FFTConvolve": dict(kwargs=dict(mode="full"), shapes={}),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BUFFERS))
def test_module_buffers(name):
    case = BUFFERS[name]
    module = _module(name, case["kwargs"])
    got = {k: tuple(v.shape) for k, v in module.named_buffers()}
    assert got == case["shapes"]
    assert set(module.state_dict()) == set(case["shapes"])
    assert all(b.dtype == torch.float32 and not b.requires_grad for b in module.buffers())
    assert list(module.parameters()) == []
    for k, v in case["kwargs"].items():
        assert f"{k}={v!r}" in repr(module)


@pytest.mark.parametrize("name", ["MelSpectrogram", "MFCC", "LFCC", "Chroma"])
def test_state_dict_round_trip(name):
    kwargs = BUFFERS[name]["kwargs"]
    module = _module(name, kwargs)
    with torch.no_grad():
        module.fb.mul_(torch.linspace(0.5, 1.5, module.fb.shape[-1]))
        module.window.add_(0.25)
        if hasattr(module, "dct"):
            module.dct.mul_(-1.0)
    fresh = _module(name, kwargs)
    x = torch.from_numpy(_signal(dtype=np.float32))
    assert not torch.equal(fresh(x), module(x))
    fresh.load_state_dict(module.state_dict())
    torch.testing.assert_close(fresh(x), module(x), rtol=0, atol=0)
    # values loaded from elsewhere are kept through a dtype change (cast, not rebuilt)
    assert torch.equal(fresh.double().fb, module.fb.double())


def test_deepcopy_and_to_dtype_rebuild_pristine_filters_only():
    module = nn.MFCC(sr=SR, n_mfcc=13, n_fft=512, n_mels=40, lifter=10.0)
    exact = torch.from_numpy(np.array(specux.filters.mel(sr=SR, n_fft=512, n_mels=40)))
    assert torch.equal(copy.deepcopy(module).double().fb, exact)
    assert torch.equal(module.half().float().double().fb, exact)
    with torch.no_grad():
        module.fb[0, 0] = 1.0
    assert not torch.equal(module.float().double().fb, exact)


def test_replacing_buffers_changes_the_output():
    x = torch.from_numpy(_signal(dtype=np.float32))
    module = nn.MelSpectrogram(sr=SR, n_fft=512, n_mels=40)
    base = module(x)
    module.fb = 2.0 * module.fb
    torch.testing.assert_close(module(x), 2.0 * base)
    module.fb = module.fb[:10]  # fewer bands: the output follows the buffer's shape
    assert module(x).shape == (*x.shape[:-1], 10, base.shape[-1])
    mfcc = nn.MFCC(sr=SR, n_mfcc=13, n_fft=512, n_mels=40)
    before = mfcc(x)
    mfcc.dct = mfcc.dct[:5]
    torch.testing.assert_close(mfcc(x), before[..., :5, :])
    # a float64 filter given through set_filter is kept as the float64 source
    mel = nn.MelSpectrogram(sr=SR, n_fft=512, n_mels=40)
    bank = torch.rand(40, 257, dtype=torch.float64)
    mel.set_filter("fb", bank)
    assert mel.fb.dtype == torch.float32 and torch.equal(mel.double().fb, bank)


@pytest.mark.parametrize("shape", [(40, 100), (40, 300), (257,), (2, 40, 257)])
def test_a_filterbank_of_the_wrong_shape_is_refused(shape):
    """A replaced ``fb`` must be (n_bands, n_fft // 2 + 1): too few columns once ran as if
    zero-padded (and its backward crashed), too many or another rank failed deep inside. The
    module names ``fb``; a direct op call names ``bank``. set_filter takes the module's own
    filters only (an unknown name once added a buffer)."""
    x = torch.from_numpy(_signal(dtype=np.float32))
    mel = nn.MelSpectrogram(sr=SR, n_fft=512, n_mels=40)
    mel.fb = torch.rand(shape)
    with pytest.raises(ValueError, match=r"fb has shape .*: expected \(n_bands, 257\)"):
        mel(x)
    with pytest.raises(RuntimeError, match=r"bank has shape .*, expected \(n_bands, 257\)"):
        torch.ops.specux.bank_spectrogram(x, mel.window, "array", 512, 128, 512, True,
                                          "constant", 2.0, torch.rand(shape), "", "power",
                                          1e-10)  # fmt: skip
    with pytest.raises(ValueError, match=r"'foo' is not one of this module's filters"):
        mel.set_filter("foo", [1.0])


def test_module_moves_with_to_and_refuses_other_devices():
    module = nn.MelSpectrogram(sr=SR, n_fft=512, n_mels=40).to("meta")
    assert all(b.device.type == "meta" for b in module.buffers())
    with pytest.raises(specux.BackendUnavailableError, match="move the module"):
        module(torch.zeros(2000))


def test_module_input_and_parameter_errors():
    with pytest.raises(TypeError, match="backend="):
        nn.MelSpectrogram(sr=SR, backend="cpu")
    with pytest.raises(TypeError, match="torch.Tensor"):
        nn.MelSpectrogram(sr=SR, n_fft=256, n_mels=40)(np.zeros(1000))
    # every module, those that hand other calls to the function too (a numpy x had reached
    # a device check: "the module's kernel is on cpu but the input is on cpu")
    signal, kernel = np.zeros(3000), torch.randn(5)
    for module, args in [
        (nn.STFT(n_fft=256), (signal,)),
        (nn.ISTFT(n_fft=256), (np.zeros((129, 4), np.complex64),)),
        (nn.Chroma(sr=22050, n_fft=256), (signal,)),
        (nn.FFTConvolve(kernel), (signal,)),
        (nn.FFTConvolve(kernel), ([0.0] * 10,)),
        (nn.FFTConvolve(), (signal, np.ones(5))),
        (nn.FFTConvolve(), (torch.zeros(30), np.ones(5))),
    ]:
        with pytest.raises(TypeError, match="takes a torch.Tensor"):
            module(*args)
    with pytest.raises(TypeError, match="int64"):
        nn.MFCC(sr=SR, n_fft=256, n_mels=40)(torch.zeros(1000, dtype=torch.int64))
    with pytest.raises(ValueError, match="center=False"):
        nn.MFCC(sr=SR, n_fft=256, n_mels=40, center=False)(torch.zeros(100))
    with pytest.raises(ValueError, match="n_mfcc=50"):
        nn.MFCC(sr=SR, n_mfcc=50, n_mels=40)
    with pytest.raises(ValueError, match="tuning"):
        nn.Chroma(sr=22050, tuning=None)
    with pytest.raises(TypeError, match="dtype"):
        nn.STFT(dtype=torch.int32)


# ---------------------------------------------------------------------------------------------
# nn modules: gradients and compile


TINY = {
    "STFT": dict(n_fft=32, hop_length=8, output="power"),
    "MelSpectrogram": dict(sr=SR, n_fft=32, hop_length=8, n_mels=6, output="db"),
    "MFCC": dict(sr=SR, n_mfcc=4, n_fft=32, hop_length=8, n_mels=6, top_db=None, lifter=3.0),
    "LFCC": dict(sr=SR, n_lfcc=4, n_filter=6, n_fft=32, hop_length=8, top_db=None),
    "Chroma": dict(sr=22050, n_fft=32, hop_length=8, n_chroma=6, norm=2.0),
}


@pytest.mark.parametrize("name", sorted(TINY))
def test_gradcheck_input(name):
    module = _module(name, TINY[name]).double()
    x = torch.from_numpy(_signal((2, 70), seed=5)).requires_grad_(True)
    assert torch.autograd.gradcheck(
        module, (x,), atol=TOLERANCES["gradcheck_atol"], rtol=TOLERANCES["gradcheck_rtol"]
    )


@pytest.mark.parametrize("name", ["MelSpectrogram", "MFCC", "LFCC", "Chroma"])
def test_gradcheck_filterbank_as_parameter(name):
    module = _module(name, TINY[name], dtype=torch.float64)
    x = torch.from_numpy(_signal((2, 70), seed=6))
    fb = module.fb.clone().requires_grad_(True)

    def run(bank):
        return torch.func.functional_call(module, {"fb": bank}, (x,))

    assert torch.autograd.gradcheck(
        run, (fb,), atol=TOLERANCES["gradcheck_atol"], rtol=TOLERANCES["gradcheck_rtol"]
    )


def test_filterbank_parameter_gradient_is_the_power_spectrum():
    # d sum(fb @ P) / d fb[b, f] = sum over signals and frames of P[f]
    module = nn.MelSpectrogram(sr=SR, n_fft=64, hop_length=16, n_mels=8, dtype=torch.float64)
    module.fb = torch.nn.Parameter(module.fb.clone())
    assert [name for name, _ in module.named_parameters()] == ["fb"]
    x = torch.from_numpy(_signal((3, 500), seed=7)).requires_grad_(True)
    module(x).sum().backward()
    power = specux.stft(x.detach(), 64, 16, output="power").sum(dim=(0, -1))
    torch.testing.assert_close(module.fb.grad, power.expand(8, -1))
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_fftconvolve_kernel_as_parameter_learns():
    """A bound kernel made learnable (moved from the buffers to the parameters) is the one
    forward convolves with, and its gradient is the correlation of x with the cotangent."""
    h = torch.from_numpy(_signal((9,), seed=8))
    module = nn.FFTConvolve(h, mode="full")
    module.kernel = torch.nn.Parameter(module.kernel.clone())
    assert [name for name, _ in module.named_parameters()] == ["kernel"]
    x = torch.from_numpy(_signal((2, 100), seed=9))
    out = module(x)
    tol = TOLERANCES["fftconvolve_module64"]
    torch.testing.assert_close(out, specux.fftconvolve(x, h), rtol=0, atol=tol)
    g = torch.from_numpy(_signal((2, 108), seed=10))
    out.backward(g)
    # d sum(g * (x * h)) / d h[k] = sum over signals and n of g[n + k] x[n]
    want = sum(torch.stack([(g[i, k:k + 100] * x[i]).sum() for k in range(9)])
               for i in range(2))  # fmt: skip
    tol = TOLERANCES["float64"]
    torch.testing.assert_close(module.kernel.grad, want, rtol=tol, atol=tol)
    with pytest.raises(TypeError, match="holds its kernel"):
        module(x, h)
    state = module.state_dict()
    assert list(state) == ["kernel"]


@pytest.mark.parametrize("name", ["MelSpectrogram", "MFCC"])
def test_compile_fullgraph_equals_eager(name):
    torch._dynamo.reset()
    kwargs = dict(sr=SR, n_fft=256, hop_length=64, n_mels=24)
    if name == "MFCC":
        kwargs["n_mfcc"] = 12
    module = _module(name, kwargs)
    compiled = torch.compile(module, fullgraph=True, backend="aot_eager")
    x = torch.from_numpy(_signal((2, 2000), dtype=np.float32))

    def run(fn):
        xx = x.clone().requires_grad_(True)
        out = fn(xx)
        out.square().mean().backward()
        return out.detach(), xx.grad

    for got, ref in zip(run(compiled), run(module)):
        torch.testing.assert_close(got, ref, rtol=0, atol=0)
