"""A small workload of every CUDA spectral-transform kernel family (framing FFTs with every
output value and padding, the fused filterbank, the gather kernels, their backward chains),
for compute-sanitizer:

    compute-sanitizer --tool memcheck python3 tools/sanitize_transforms.py
    compute-sanitizer --tool racecheck python3 tools/sanitize_transforms.py

The torch-free route's kernels (conversions, elementwise maps, the constant-Q correlation)
have their own workload, tests/native_route_worker.py, which blocks torch:

    compute-sanitizer --tool memcheck python3 tests/native_route_worker.py /tmp/n.npz --quick

memcheck's error count includes host API errors that are not specux's kernels: cuda-bindings
probes driver entry points at start-up, and each probe the driver answers with
CUDA_ERROR_INVALID_VALUE (cuGetProcAddress_v2) is listed (34 of them, the whole count, on the
H200 with cuda-bindings 13, 2026-12-02). Kernel errors read "Invalid __global__ ..." etc.
"""

import torch

import specux
import specux.nn

for dtype in (torch.float32, torch.float64, torch.float16):
    x = torch.randn(2, 3000, dtype=dtype, device="cuda")
    # packed even (1024), plain odd (1000 one-sided=False), Bluestein (257), beyond a block
    for n_fft, hop in ((1024, 256), (1000, 333), (257, 100), (16384, 4096)):
        for pad_mode in ("constant", "reflect"):
            for output in ("complex", "magnitude", "power", "db"):
                specux.stft(x, n_fft=n_fft, hop_length=hop, pad_mode=pad_mode, output=output)
        specux.stft(x, n_fft=n_fft, hop_length=hop, onesided=False)
        for power in (2.0, 1.0, 1.5):  # fused filterbank (power, magnitude, pow), dB
            specux.melspectrogram(x, sr=16000, n_fft=n_fft, hop_length=hop, n_mels=40,
                                  power=power, output="db")  # fmt: skip
    if dtype != torch.float16:
        S = specux.stft(x, n_fft=512, hop_length=128)
        specux.istft(S, n_fft=512, hop_length=128, length=3100)
        # rows of an odd length: the seam gather's vector stores on some rows, scalar on others
        specux.istft(S, n_fft=512, hop_length=128, length=3001)
        specux.mfcc(x, sr=16000, n_fft=512, hop_length=128, n_mels=40)
        # signals of several row_max chunks (the top_db peaks in two launches)
        y = torch.randn(3, 100000, dtype=dtype, device="cuda")
        y[1, 777] = float("nan")  # a NaN peak: its signal's clipped DCT is NaN
        specux.mfcc(y, sr=16000, n_fft=512, hop_length=128, n_mels=40)
        specux.cqt(x, sr=16000, hop_length=256, n_bins=48, fmin=100.0)
        # overlap-save (512-point blocks, a partial last frame); whole-length FFTs (an output
        # that fits one block)
        specux.fftconvolve(x, torch.randn(3, 1, 101, dtype=dtype, device="cuda"), mode="same")
        specux.fftconvolve(x, torch.randn(2, 2900, dtype=dtype, device="cuda"))
        # a module's filterbank buffer: the sparse tables built from a tensor
        specux.nn.MelSpectrogram(sr=16000, n_fft=512, hop_length=128, n_mels=40).to(
            device="cuda", dtype=dtype)(x)  # fmt: skip
        # backward chains: frame / overlap-add gathers (with the reflect fold), c2r, cqt adjoint
        xg = x.clone().requires_grad_(True)
        specux.stft(xg, n_fft=64, hop_length=16, pad_mode="reflect").abs().sum().backward()
        specux.melspectrogram(xg, sr=16000, n_fft=257, hop_length=64, n_mels=20).sum().backward()
        # the fused adjoint kernel (even n_fft): forward FFT, cotangent, inverse FFT, window
        specux.melspectrogram(xg, sr=16000, n_fft=1024, hop_length=256,
                              n_mels=40).sum().backward()  # fmt: skip
        specux.stft(xg, n_fft=64, hop_length=20, pad_mode="constant",
                    output="magnitude").sum().backward()  # fmt: skip
        # the fused adjoint's overlap-add with a folding padding (the seam gather's edges)
        specux.stft(xg, n_fft=512, hop_length=128, pad_mode="reflect",
                    output="power").sum().backward()  # fmt: skip
        specux.cqt(xg, sr=16000, hop_length=256, n_bins=24, fmin=200.0).abs().sum().backward()
        Sg = S.clone().requires_grad_(True)
        specux.istft(Sg, n_fft=512, hop_length=128).sum().backward()
        # the istft of n_fft 1024 (512-point packed; float32: radices 16, 16, 2, a warp a
        # frame, warp barriers between stages; float64: 8, 8, 8; plan.block), from the
        # stft's frame-major memory and, with staged loads, from a bins-major copy; a window
        # tensor's envelope
        S2 = specux.stft(x, n_fft=1024, hop_length=256)
        for spectrum in (S2, S2.contiguous()):
            specux.istft(spectrum, n_fft=1024, hop_length=256, window=torch.hann_window(
                1024, dtype=dtype, device="cuda") + 0.1)  # fmt: skip
torch.cuda.synchronize()
print("sanitize workload done")
