"""specux.plan / Plan (a transform bound to one input layout); autotuning: test_autotune.py."""

from __future__ import annotations

import numpy as np
import pytest

import specux

try:
    import torch
except ImportError:  # the torch-less CI job runs the numpy half of this file
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")


@pytest.mark.parametrize("op, params", [
    ("stft", dict(n_fft=256, hop_length=64)),
    ("melspectrogram", dict(sr=16000, n_fft=256, n_mels=20)),
    ("mfcc", dict(sr=16000, n_fft=256, n_mels=20, n_mfcc=8)),
    ("rfft", dict(n=1000)),
    ("fft2", dict(norm="ortho")),
    ("fftconvolve", dict(y=np.hanning(33), mode="same")),
])  # fmt: skip
def test_a_plan_is_its_function_bound(op, params, rng):
    x = rng.standard_normal((3, 2000)).astype(np.float32)
    p = specux.plan(op, x, **params)
    assert (p.op, p.library, p.shape, p.dtype, p.device) == (op, "numpy", (3, 2000), "float32",
                                                              "cpu")  # fmt: skip
    y = rng.standard_normal((3, 2000)).astype(np.float32)
    np.testing.assert_array_equal(p(y), getattr(specux, op)(y, **params))
    assert op in repr(p)


def test_a_plan_refuses_other_layouts(rng):
    x = rng.standard_normal((2, 1000))
    p = specux.plan(specux.stft, x, n_fft=128)
    assert p.op == "stft"
    with pytest.raises(ValueError, match=r"shape \(2, 999\) \(the plan's: \(2, 1000\)\)"):
        p(x[:, :999])
    with pytest.raises(ValueError, match=r"dtype 'float32' \(the plan's: 'float64'\)"):
        p(x.astype(np.float32))
    if torch is not None:
        with pytest.raises(ValueError, match=r"library 'torch' \(the plan's: 'numpy'\)"):
            p(torch.from_numpy(x))


def test_plan_checks_its_op_and_parameters_when_made(rng):
    x = rng.standard_normal(500)
    with pytest.raises(ValueError, match="op='stfft' is not a specux transform"):
        specux.plan("stfft", x)
    with pytest.raises(ValueError, match="op=<built-in function len> is not"):
        specux.plan(len, x)
    with pytest.raises(ValueError, match="n_fft=0"):
        specux.plan("stft", x, n_fft=0)


def test_plan_params_are_a_copy_and_its_repr_summarizes_arrays(rng):
    x = rng.standard_normal((2, 4000))
    p = specux.plan("fftconvolve", x, y=rng.standard_normal((2, 33)), mode="same")
    assert repr(p) == ("Plan(fftconvolve, numpy float64 (2, 4000) on cpu, "
                       "{y=<numpy float64 array (2, 33)>, mode='same'})")  # fmt: skip
    q = specux.plan("stft", x, n_fft=256)
    q.params["n_fft"] = 512  # a copy: the plan keeps the parameters it checked
    assert q.params["n_fft"] == 256 and q(x).shape == (2, 129, 63)


@needs_torch
def test_a_compiled_plan_names_what_differs():
    # under torch.compile a second shape is symbolic: the message could not format it
    # (torch raised "repr_impl not implemented"); it names the field and the plan's value
    x = torch.randn(2, 4000)
    p = specux.plan("stft", x, n_fft=256)
    f = torch.compile(lambda t: p(t), fullgraph=True, backend="eager")
    f(x)
    with pytest.raises((ValueError, RuntimeError)) as info:  # Dynamo's Unsupported wraps it
        f(torch.randn(2, 4002))
    error = info.value if isinstance(info.value, ValueError) else info.value.__cause__
    assert "this stft plan does not take x: its shape differs (the plan's: (2, 4000))" in str(
        error)  # fmt: skip


@needs_torch
def test_a_torch_plan_keeps_gradients(rng):
    x = torch.from_numpy(rng.standard_normal((2, 1500)))
    p = specux.plan("melspectrogram", x, sr=8000, n_fft=128, n_mels=10)
    a = x.clone().requires_grad_(True)
    b = x.clone().requires_grad_(True)
    p(a).sum().backward()
    specux.melspectrogram(b, sr=8000, n_fft=128, n_mels=10).sum().backward()
    assert torch.equal(a.grad, b.grad)


@pytest.mark.cuda
@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_cuda_plan(rng):
    x = torch.from_numpy(rng.standard_normal((4, 16000)).astype(np.float32)).cuda()
    p = specux.plan("mfcc", x, sr=16000, n_fft=512, n_mels=40)
    assert p.device == str(x.device)
    assert torch.equal(p(x), specux.mfcc(x, sr=16000, n_fft=512, n_mels=40))
    with pytest.raises(ValueError, match="device 'cpu'"):
        p(x.cpu())
    assert p.autotune() is p and p.tuning is not None  # (tests/test_autotune.py)
