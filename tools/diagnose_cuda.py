"""Stage-by-stage check of the CUDA path (prints timings; dumps stacks if a stage hangs)."""

import faulthandler
import sys
import time

faulthandler.dump_traceback_later(40, repeat=True, file=sys.stderr)
t0 = time.perf_counter()


def say(msg):
    print(f"[{time.perf_counter() - t0:7.2f}s] {msg}", flush=True)


import torch  # noqa: E402

say("torch imported")
import specux  # noqa: E402

say("specux imported")
from specux.kernels.codegen.dialects import CUDA  # noqa: E402
from specux.kernels.codegen.fft import KERNEL_NAME, render_pass  # noqa: E402
from specux.kernels.cuda.compiler import compile_cubin  # noqa: E402
from specux.kernels.cuda.runtime import compile_arch, get_kernel  # noqa: E402
from specux.kernels.plan import USER, LoadSpec, StoreSpec, passes  # noqa: E402

torch.zeros(1, device="cuda")
say(f"cuda context up; arch {compile_arch(0)}")
spec = passes(8, -1, "float32", LoadSpec(USER, "complex", "float32"),
              StoreSpec(USER, "complex", "float32", scaled=True))[0]
src = render_pass(spec, CUDA)
cubin = compile_cubin(src, name=KERNEL_NAME, arch=compile_arch(0))
say(f"compiled {len(cubin)} bytes")
kernel = get_kernel(src, KERNEL_NAME, 0)
say(f"kernel loaded {kernel}")
x = torch.randn(4, 8, dtype=torch.complex64, device="cuda")
torch.cuda.synchronize()
y = specux.fft(x)
say("specux.fft returned")
torch.cuda.synchronize()
say(f"synchronized; max err {(y - torch.fft.fft(x)).abs().max().item():.2e}")
for n in (1000, 1031, 4096, 1024 * 1024):
    x = torch.randn(8, n, dtype=torch.complex64, device="cuda")
    y = specux.fft(x)
    torch.cuda.synchronize()
    ref = torch.fft.fft(x.double() if False else x.to(torch.complex128))
    err = ((y.to(torch.complex128) - ref).norm() / ref.norm()).item()
    say(f"n={n}: rel err {err:.2e}")
faulthandler.cancel_dump_traceback_later()
