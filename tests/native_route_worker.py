"""The torch-free CUDA route, run in a process where torch cannot be imported (issue 6).

``python tests/native_route_worker.py OUT.npz [--quick]`` blocks torch, runs every case of
:data:`CASES` on numpy and cupy inputs (contiguous and strided), checks each result's
library, device and dtype, that the cupy and numpy routes agree bit for bit, and cupy's
stream semantics, then saves every result for tests/test_routes_cuda.py to compare with the
torch route (bit for bit) and the CPU backend. ``--quick`` skips the timing (the
compute-sanitizer workload of the route's kernels). Not collected by pytest (no test_ prefix);
:data:`CASES` and :func:`inputs` are shared with that test.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    sys.modules["torch"] = None  # an import of torch now raises ImportError

import time

import numpy as np
from tolerances import TOLERANCES

import specux

# name -> (input name, call); the inputs are numpy here and become cupy / strided below
CASES = {
    "stft": ("x", lambda x: specux.stft(x, n_fft=512, hop_length=128)),
    "stft_db_reflect": ("x", lambda x: specux.stft(x, n_fft=400, hop_length=160,
                                                   pad_mode="reflect", output="db")),
    "stft_odd": ("x", lambda x: specux.stft(x, n_fft=257, hop_length=100, output="power")),
    "stft_beyond_block": ("x", lambda x: specux.stft(x, n_fft=16384, hop_length=4000,
                                                     output="magnitude")),
    "mel": ("x", lambda x: specux.melspectrogram(x, sr=16000, n_fft=512, hop_length=128,
                                                 n_mels=40)),
    "mel_db": ("x", lambda x: specux.melspectrogram(x, sr=16000, n_fft=512, hop_length=128,
                                                    n_mels=40, output="db", top_db=60.0)),
    "mfcc": ("x", lambda x: specux.mfcc(x, sr=16000, n_mfcc=20, n_fft=512, hop_length=128,
                                       n_mels=40)),
    "lfcc": ("x", lambda x: specux.lfcc(x, sr=16000, n_lfcc=20, n_fft=512, hop_length=128,
                                       n_filter=40)),
    "chroma": ("x", lambda x: specux.chroma(x, sr=16000, n_fft=1024, hop_length=256)),
    "cqt": ("x", lambda x: specux.cqt(x, sr=16000, hop_length=256, fmin=65.4, n_bins=48)),
    "vqt_magnitude": ("x", lambda x: specux.vqt(x, sr=16000, hop_length=128, fmin=65.4,
                                                n_bins=36, gamma=10.0, output="magnitude")),
    "chroma_cqt": ("x", lambda x: specux.chroma(x, sr=16000, hop_length=256, source="cqt",
                                                tuning=0.0)),
    "fft": ("x", lambda x: specux.fft(x)),
    "rfft2": ("x", lambda x: specux.rfft2(x)),
    "irfft": ("S", lambda S: specux.irfft(S, n=1000)),
    "istft": ("S", lambda S: specux.istft(S, n_fft=512, hop_length=128, length=6000)),
    "fftconvolve": ("x", lambda x: specux.fftconvolve(x, x[:1, :257], mode="same")),
}
MATRIX = ("stft", "mel", "fft")  # every library x layout x dtype (issue 6's matrix)


def inputs(dtype: str, strided: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 12000)).astype(dtype)
    x = x[:, ::2] if strided else np.ascontiguousarray(x[:, :6000])
    S = specux.stft(np.ascontiguousarray(x), n_fft=512, hop_length=128, backend="cpu")
    return {"x": x, "S": np.ascontiguousarray(S)}


def variants():
    """(case, dtype, strided) of the run: the matrix in full, the rest in float32 and float64."""
    for case in CASES:
        for dtype in ("float32", "float64"):
            for strided in (False, True) if case in MATRIX else (False,):
                yield case, dtype, strided


def _key(case: str, dtype: str, strided: bool, library: str) -> str:
    return f"{case}|{dtype}|{'strided' if strided else 'contiguous'}|{library}"


SLOW_FILL = r"""
extern "C" __global__ void slow_fill(float* x, long long n) {
    long long start = clock64();
    while (clock64() - start < 20000000LL) { }  // ~10 ms at H200 clocks, every thread
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = sinf(0.001f * (float)i) + 0.5f * cosf(0.37f * (float)i);
}
"""


def _stream_check(cupy) -> None:
    """A slow producer on a non-default cupy stream, then specux and cupy work on it, with no
    synchronization: the result must see the produced data."""
    n = 4 * 16000
    i = np.arange(n, dtype=np.float32)
    expected = (np.sin(0.001 * i) + 0.5 * np.cos(0.37 * i)).reshape(4, 16000)
    reference = specux.stft(expected, n_fft=512, backend="cpu")
    kernel = cupy.RawKernel(SLOW_FILL, "slow_fill")
    specux.stft(cupy.zeros((4, 16000), dtype=cupy.float32), n_fft=512)  # constants uploaded
    cupy.cuda.Device().synchronize()  # (their upload synchronizes; the checked call must not)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        x = cupy.zeros(n, dtype=cupy.float32)
        kernel(((n + 255) // 256,), (256,), (x, cupy.int64(n)))
        out = specux.stft(x.reshape(4, 16000), n_fft=512)
        doubled = out * 2
    # Read back on `stream` too: the legacy default stream does not wait for a non-blocking one.
    got = cupy.asnumpy(doubled, stream=stream) / 2
    error = np.max(np.abs(got - reference)) / np.max(np.abs(reference))
    assert error <= TOLERANCES["stream_order32"], f"stream order: error {error}"


def main(path: str, quick: bool = False) -> None:
    import cupy

    assert sys.modules.get("torch") is None
    results = {}
    for case, dtype, strided in variants():
        name, fn = CASES[case]
        host = inputs(dtype, strided)[name]
        from_numpy = fn(host)
        assert isinstance(from_numpy, np.ndarray), (case, type(from_numpy))
        if strided:
            base = cupy.asarray(host.base if host.base is not None else host)
            device_input = base[:, ::2] if name == "x" else cupy.asarray(host)
        else:
            device_input = cupy.asarray(host)
        from_cupy = fn(device_input)
        assert isinstance(from_cupy, cupy.ndarray) and from_cupy.device.id == 0, case
        assert from_cupy.dtype == from_numpy.dtype, (case, from_cupy.dtype, from_numpy.dtype)
        assert np.array_equal(cupy.asnumpy(from_cupy), from_numpy), f"{case}: cupy != numpy"
        results[_key(case, dtype, strided, "numpy")] = from_numpy
    half = cupy.asarray(inputs("float32", False)["x"]).astype(cupy.float16)
    assert specux.stft(half, n_fft=256).dtype == cupy.complex64
    assert specux.melspectrogram(half, sr=16000, n_fft=512, n_mels=40).dtype == cupy.float16
    try:
        specux.stft(cupy.zeros((2, 4000), cupy.float32), n_fft=256, backend="cpu")
    except specux.BackendUnavailableError:
        pass
    else:
        raise AssertionError("backend='cpu' with a cupy array did not raise")
    _stream_check(cupy)
    np.savez(path, **results)
    print(f"ok {len(results)} results")
    if quick:
        return
    x = np.random.default_rng(1).standard_normal((64, 160000)).astype(np.float32)
    times = {}
    for backend in ("auto", "cpu"):
        specux.melspectrogram(x, sr=16000, n_fft=1024, hop_length=256, n_mels=80,
                              backend=backend)  # fmt: skip
        start = time.perf_counter()
        for _ in range(3):
            out = specux.melspectrogram(x, sr=16000, n_fft=1024, hop_length=256, n_mels=80,
                                        backend=backend)  # fmt: skip
        times[backend] = (time.perf_counter() - start) / 3
        assert isinstance(out, np.ndarray)
    print(f"mel numpy (64, 160000) without torch: via CUDA {times['auto'] * 1e3:.1f} ms, "
          f"CPU backend {times['cpu'] * 1e3:.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], quick="--quick" in sys.argv[2:])
