"""Arrays on the second GPU run on the second GPU (issue 6: cuda:N runs on device N, on that
device's current stream), through every route: torch tensors, cupy arrays through torch, and
cupy arrays on the torch-free route (a subprocess with torch blocked).

Needs a machine with two CUDA devices: ``python -m pytest -q tests/test_multi_gpu.py``.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import specux  # noqa: E402

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                       reason="needs two CUDA devices"),  # fmt: skip
]

CALLS = {
    "stft": lambda x: specux.stft(x, n_fft=512, hop_length=128),
    "mel_db": lambda x: specux.melspectrogram(x, sr=16000, n_fft=1024, hop_length=256,
                                              n_mels=80, output="db", top_db=80.0),
    "mfcc": lambda x: specux.mfcc(x, sr=16000, n_mfcc=20, n_fft=1024, hop_length=256),
    "fft_bluestein": lambda x: specux.fft(x[..., :4099]),
    "fftconvolve": lambda x: specux.fftconvolve(x, x[..., :300]),
    "cqt": lambda x: specux.cqt(x, sr=16000, hop_length=256, fmin=65.4, n_bins=48),
    "istft": lambda x: specux.istft(specux.stft(x, n_fft=400, hop_length=100), n_fft=400,
                                    hop_length=100, length=x.shape[-1]),
}


def _signal(seed=0):
    return np.random.default_rng(seed).standard_normal((3, 16000)).astype(np.float32)


@pytest.mark.parametrize("name", CALLS)
def test_torch_tensors_on_the_second_device(name):
    x = _signal()
    on0 = CALLS[name](torch.from_numpy(x).to("cuda:0"))
    side = torch.cuda.Stream(device="cuda:1")
    with torch.cuda.device(0), torch.cuda.stream(side):  # device 0 current, device 1's stream
        x1 = torch.from_numpy(x).to("cuda:1", non_blocking=False)
        on1 = CALLS[name](x1)
    assert on1.device == torch.device("cuda:1")
    torch.cuda.synchronize(1)
    assert torch.equal(on1.cpu(), on0.cpu()), name


def test_backward_on_the_second_device():
    x = _signal()
    grads = []
    for device in ("cuda:0", "cuda:1"):
        t = torch.from_numpy(x).to(device).requires_grad_()
        specux.melspectrogram(t, sr=16000, n_fft=1024, hop_length=256).sum().backward()
        assert t.grad.device == torch.device(device)
        grads.append(t.grad.cpu())
    assert torch.equal(grads[0], grads[1])


@pytest.mark.parametrize("name", ["stft", "mel_db", "fftconvolve"])
def test_cupy_on_the_second_device_through_torch(name):
    cupy = pytest.importorskip("cupy")
    x = _signal()
    on0 = CALLS[name](torch.from_numpy(x).to("cuda:0")).cpu().numpy()
    with cupy.cuda.Device(1):
        x1 = cupy.asarray(x)
    with cupy.cuda.Device(0):  # the array's device decides, not the current one
        out = CALLS[name](x1)
    assert isinstance(out, cupy.ndarray) and out.device.id == 1
    assert np.array_equal(cupy.asnumpy(out), on0)


_TORCH_FREE = """
import sys
sys.modules["torch"] = None
import numpy as np, cupy, specux
x = np.random.default_rng(0).standard_normal((3, 16000)).astype(np.float32)
calls = {
    "stft": lambda a: specux.stft(a, n_fft=512, hop_length=128),
    "mel_db": lambda a: specux.melspectrogram(a, sr=16000, n_fft=1024, hop_length=256,
                                              n_mels=80, output="db", top_db=80.0),
    "fftconvolve": lambda a: specux.fftconvolve(a, a[..., :300]),
}
results = {}
for name, fn in calls.items():
    with cupy.cuda.Device(0):
        on0 = cupy.asnumpy(fn(cupy.asarray(x)))
    with cupy.cuda.Device(1):
        x1 = cupy.asarray(x)
        stream = cupy.cuda.Stream(non_blocking=True)
    with cupy.cuda.Device(0):
        with cupy.cuda.Device(1), stream:
            out = fn(x1)
        assert out.device.id == 1, name
    stream.synchronize()
    assert np.array_equal(cupy.asnumpy(out), on0), name
    results[name] = on0
with cupy.cuda.Device(0):
    k0 = cupy.asarray(x[:, :300])
try:
    specux.fftconvolve(x1, k0)
except specux.BackendUnavailableError:
    pass
else:
    raise SystemExit("arrays on two devices did not raise")
np.savez(sys.argv[1], **results)
print("ok")
"""


def test_torch_free_cupy_on_the_second_device(tmp_path):
    pytest.importorskip("cupy")
    path = tmp_path / "free.npz"
    run = subprocess.run([sys.executable, "-c", _TORCH_FREE, str(path)], capture_output=True,
                         text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    saved = np.load(path)
    x = torch.from_numpy(_signal()).to("cuda:1")
    for name in saved.files:  # and equal to the torch route
        assert np.array_equal(saved[name], CALLS[name](x).cpu().numpy()), name
