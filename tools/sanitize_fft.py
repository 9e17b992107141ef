"""A small workload of every CUDA FFT kernel family, for compute-sanitizer:

    compute-sanitizer --tool memcheck python3 tools/sanitize_fft.py
    compute-sanitizer --tool racecheck python3 tools/sanitize_fft.py

(memcheck's count includes cuda-bindings' start-up probes of driver entry points, host API
errors: see tools/sanitize_transforms.py.)
"""

import torch

import specux

for n in (1, 2, 7, 8, 12, 17, 64, 97, 1000, 1031):
    for dtype in (torch.complex64, torch.complex128):
        x = torch.randn(3, n, dtype=dtype, device="cuda")
        specux.fft(x)
        specux.ifft(x, norm="ortho")
        specux.irfft(x, n=2 * n)
        specux.fft2(torch.randn(5, n, dtype=dtype, device="cuda"))
    r = torch.randn(2, n, device="cuda")
    specux.rfft(r)
    specux.rfft(r.half())
    specux.rfftn(torch.randn(3, 4, n, device="cuda", dtype=torch.float64))
# staged block columns (transform along a leading axis) and the four-step pair (> 8192 points,
# Bluestein over a four-step length for 10007), float32 and float64
for dtype in (torch.complex64, torch.complex128):
    specux.fft(torch.randn(64, 5, dtype=dtype, device="cuda"), dim=0)
    specux.fft(torch.randn(12000, 3, dtype=dtype, device="cuda"), dim=0)
    specux.ifft(torch.randn(2, 10007, dtype=dtype, device="cuda"))
    specux.irfft(torch.randn(2, 6001, dtype=dtype, device="cuda"))
# three column passes (plan.column_split), from a column-major view: 125 x 125 x 125 in
# float64, 256 x 256 x 512 in float32
specux.fft(torch.randn(5**9, 2, dtype=torch.complex128, device="cuda").T)
specux.ifft(torch.randn(2**25, dtype=torch.complex64, device="cuda"))
torch.cuda.synchronize()
print("sanitize workload done")
