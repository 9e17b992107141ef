"""ops._declare.call: plain eager calls run the device kernel directly (same result, less
host time; with an op's eager autograd.Function when an input needs a gradient); anything
tracing, compiling or a mode needs goes through the dispatcher."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import specux  # noqa: E402,F401  (registers the ops)
from specux.ops import _declare  # noqa: E402


@pytest.fixture
def direct_calls(monkeypatch):
    """Count the kernels ``call`` runs itself (the dispatcher holds its own references)."""
    counts = {"c2c": 0}
    original = _declare._KERNELS["c2c"]["cpu"]

    def counting(*args):
        counts["c2c"] += 1
        return original(*args)

    monkeypatch.setitem(_declare._KERNELS["c2c"], "cpu", counting)
    return counts


def test_plain_eager_call_skips_the_dispatcher_with_the_same_result(direct_calls):
    x = torch.randn(3, 16, dtype=torch.complex128)
    direct = _declare.call("c2c", x, [1], True, "backward")
    assert direct_calls["c2c"] == 1
    assert torch.equal(direct, torch.ops.specux.c2c(x, [1], True, "backward"))
    assert direct_calls["c2c"] == 1


def test_gradients_run_the_kernel_in_the_eager_autograd_function(direct_calls):
    x = torch.randn(3, 16, dtype=torch.complex128, requires_grad=True)
    out = _declare.call("c2c", x, [1], True, "backward")
    assert direct_calls["c2c"] == 1
    assert type(out.grad_fn).__name__ == "SpecuxEager_c2cBackward"
    out.abs().sum().backward()  # the backward is a c2c of plain tensors itself: direct too
    assert direct_calls["c2c"] == 2
    x2 = x.detach().requires_grad_(True)
    torch.ops.specux.c2c(x2, [1], True, "backward").abs().sum().backward()
    assert torch.equal(x.grad, x2.grad)
    with torch.no_grad():  # no graph to record: the kernel alone
        out = _declare.call("c2c", x, [1], True, "backward")
    assert out.grad_fn is None


def test_gradients_under_a_mode_go_through_the_dispatcher(direct_calls):
    from torch.overrides import TorchFunctionMode

    class Watching(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    x = torch.randn(3, 16, dtype=torch.complex128, requires_grad=True)
    with Watching():
        out = _declare.call("c2c", x, [1], True, "backward")
    assert direct_calls["c2c"] == 0
    assert "GeneratedBackwardFor_specux_c2c" in type(out.grad_fn).__name__


def test_fake_tensors_and_modes_go_through_the_dispatcher(direct_calls):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.overrides import TorchFunctionMode

    with FakeTensorMode():
        fake = torch.empty(3, 16, dtype=torch.complex128)
        out = _declare.call("c2c", fake, [1], True, "backward")
        assert out.shape == (3, 16)

    class Watching(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Watching():
        _declare.call("c2c", torch.randn(2, 8, dtype=torch.complex128), [1], True, "backward")
    assert direct_calls["c2c"] == 0


def test_mixed_devices_and_subclasses_are_not_plain():
    x = torch.randn(4)
    assert _declare._plain_device((x, 3, "name")) == ("cpu", False)
    assert _declare._plain_device((x.requires_grad_(True), 3)) == ("cpu", True)
    with torch.no_grad():
        assert _declare._plain_device((x, 3)) == ("cpu", False)
    assert _declare._plain_device((torch.nn.Parameter(x, requires_grad=False),)) == (None, False)
    assert _declare._plain_device((x, torch.empty(1, device="meta"))) == (None, False)
    assert _declare._plain_device((None, 1.0)) == (None, False)


def test_cuda_matrix_width_is_checked_before_any_kernel_reads():
    """The CUDA gather kernels read n_in values per row: a matrix of another width must be a
    ValueError on the host (checked without a GPU: the check runs before any upload)."""
    from specux.kernels.cuda import transforms
    from specux.meta import matrices

    class Uploads:  # records what would go to the device
        def constant(self, key, values):
            return values

    mel = matrices.mel_spec(sr=16000, n_fft=1024, n_mels=80, fmin=0.0, fmax=None, htk=False,
                            norm="slaney").as_key()  # fmt: skip
    transposed = matrices.MatrixSpec.from_key(mel).transposed().as_key()
    assert transforms._bands(Uploads(), None, mel, "float32", 513, "the stft")[2] == 80
    assert transforms._bands(Uploads(), None, transposed, "float32", 80, "x")[2] == 513
    assert transforms._bands(Uploads(), torch.zeros(20, 80), "", "float32", 80, "x")[2] == 20
    with pytest.raises(ValueError, match="513 columns"):
        transforms._bands(None, None, mel, "float32", 512, "the stft")
    with pytest.raises(ValueError, match="80 columns"):
        transforms._bands(None, torch.zeros(20, 80), "", "float32", 81, "x")
    with pytest.raises(ValueError, match="2-D"):
        transforms._bands(None, torch.zeros(20, 80, 1), "", "float32", 80, "x")


def test_public_functions_take_meta_tensors_for_shapes():
    # Meta tensors (shape inference, models built on the meta device) take the CPU route,
    # where the ops' fake kernels answer them: the shape and dtype of the CPU result.
    import numpy as np

    calls = {
        "fft": lambda t: specux.fft(t, n=1000),
        "irfft": lambda t: specux.irfft(specux.rfft(t)),
        "rfft2": lambda t: specux.rfft2(t),
        "stft-db": lambda t: specux.stft(t, n_fft=511, hop_length=100, output="db"),
        "istft": lambda t: specux.istft(specux.stft(t, n_fft=512), n_fft=512, length=3000),
        "melspectrogram": lambda t: specux.melspectrogram(t, sr=16000, output="db", top_db=80.0),
        "mfcc": lambda t: specux.mfcc(t, sr=16000, n_fft=512),
        "lfcc": lambda t: specux.lfcc(t, sr=16000, n_fft=512),
        "cqt": lambda t: specux.cqt(t, sr=16000, hop_length=256, n_bins=48),
        "chroma-cqt": lambda t: specux.chroma(t, sr=16000, source="cqt"),
        "fftconvolve": lambda t: specux.fftconvolve(t, t[..., :100], mode="valid"),
    }
    for dtype in (torch.float32, torch.float64):
        x = torch.from_numpy(np.random.default_rng(0).standard_normal((2, 3, 3000))).to(dtype)
        for name, fn in calls.items():
            want = fn(x)
            got = fn(x.to("meta"))
            assert got.device.type == "meta", name
            assert got.shape == want.shape and got.dtype == want.dtype, (name, dtype)
    meta = torch.empty(2, 3000, device="meta")
    assert specux.stft(meta, n_fft=256, backend="cpu").shape == (2, 129, 47)
    with pytest.raises(specux.BackendUnavailableError, match="does not match x"):
        specux.stft(meta, n_fft=256, backend="cuda")
