"""GPU FFT benchmark: specux's generated kernels vs torch.fft (cuFFT), side by side.

Workloads of ../shared/PERF.md: fft_b (complex64 (16384, 1024)), fft_big (complex64 2**24),
fft_prime (complex64 1000003), rfft_odd ((16384, 1000) float32 and float16). Timed with CUDA
events around --calls back-to-back calls, median of --repeat such samples after --warmup, in
one process; prints ms, the ratio
(cuFFT time / specux time: above 1 means specux is faster) and each result's relative L2
error against a float64 reference. ``--graph`` times replays of each call captured in a CUDA
graph instead: the GPU time alone, without the host's per-call cost (tens of microseconds of
Python and dispatch, comparable to these kernels' time). ``--bounds`` also times copies of
fft_big's 2**24 complex64 values with its passes' access patterns (:func:`bound_copies`):
contiguous, and a 4096 x 4096 matrix read or written in 32-byte pieces 32 KB apart, as a
four-step pass of 4 columns a block reads and writes them (docs/benchmarks.md).

    python bench/fft.py [--graph] [--bounds]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from timing import graphed, median_ms  # noqa: E402  (bench/timing.py, beside this script)

import specux  # noqa: E402

# PERF.md's FFT workloads: (shape, complex input); rfft_odd also runs in float16 here
SHAPES = {"fft_b": ((16384, 1024), True), "fft_big": ((2**24,), True),
          "fft_prime": ((1000003,), True), "rfft_odd": ((16384, 1000), False)}  # fmt: skip


def workload(name: str) -> tuple[torch.Tensor, Callable]:
    """Workload ``name``'s input (on the host, the same in every process: tools/ab.py compares
    processes' results) and the specux function it calls."""
    shape, complex_ = SHAPES[name]
    if complex_:
        return _complex(shape), specux.fft
    return torch.randn(shape, generator=torch.Generator().manual_seed(0)), specux.rfft


def _rel(a: torch.Tensor, ref: np.ndarray) -> float:
    a = a.detach().cpu().to(torch.complex128 if a.is_complex() else torch.float64).numpy()
    return float(np.linalg.norm((a - ref).ravel()) / np.linalg.norm(ref.ravel()))


def _complex(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g))


def bound_copies(x: torch.Tensor, y: torch.Tensor, rows: int = 4096,
                 piece: int = 4) -> dict[str, Callable[[], None]]:
    """Copies of complex ``x`` into ``y`` (both contiguous, ``rows`` rows of whole ``piece``-
    element pieces): ``contiguous``; ``strided reads``: x's rows read a piece at a time
    across the rows (pieces a row apart), y written in order; ``strided writes``: x read in
    order, y written a piece at a time across its rows. Each moves every element once."""
    xr, yr = torch.view_as_real(x), torch.view_as_real(y)
    groups = x.numel() // (rows * piece)
    if groups * rows * piece != x.numel() or y.shape != x.shape:
        raise ValueError(f"bound_copies: {x.numel()} values are not {rows} rows of whole "
                         f"{piece}-value pieces, or y's shape differs")  # fmt: skip
    matrix = (rows, groups, piece, 2)
    transposed = (groups, rows, piece, 2)
    return {
        "contiguous": lambda: y.copy_(x),
        "strided reads": lambda: yr.view(transposed).copy_(xr.view(matrix).transpose(0, 1)),
        "strided writes": lambda: yr.view(matrix).transpose(0, 1).copy_(xr.view(transposed)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--calls", type=int, default=10, help="back-to-back calls per sample")
    parser.add_argument("--graph", action="store_true",
                        help="time CUDA graph replays of each call (GPU time alone)")  # fmt: skip
    parser.add_argument("--autotune", action="store_true",
                        help="specux.autotune(True): each workload's first specux call tunes "
                             "its block kernels (winners stored in the cache folder)")  # fmt: skip
    parser.add_argument("--bounds", action="store_true",
                        help="also time copies with fft_big's access patterns")  # fmt: skip
    args = parser.parse_args()
    specux.autotune(args.autotune)
    name = torch.cuda.get_device_name()
    how = "CUDA graph replays" if args.graph else "eager calls"
    how += ", autotuned" if args.autotune else ""
    print(f"specux FFT benchmark on {name}, torch {torch.__version__}, median of {args.repeat}"
          f" samples, {how}")  # fmt: skip
    print(f"{'workload':14s} {'specux ms':>10s} {'cuFFT ms':>9s} {'ratio':>7s} "
          f"{'specux err':>11s} {'cuFFT err':>10s}")  # fmt: skip
    cases = []
    for name in SHAPES:
        host, ours = workload(name)
        theirs, reference = ((torch.fft.fft, np.fft.fft) if SHAPES[name][1]
                             else (torch.fft.rfft, np.fft.rfft))  # fmt: skip
        if name == "rfft_odd":
            cases.append(("rfft_odd f32", host, ours, theirs, reference))
            cases.append(("rfft_odd f16", host.half(), ours, theirs, reference))
        else:
            cases.append((name, host, ours, theirs, reference))

    def timed(fn):
        return graphed(fn) if args.graph else fn

    for label, host, ours, theirs, reference in cases:
        x = host.cuda()
        ref = reference(host.to(torch.complex128 if host.is_complex() else torch.float64).numpy())
        ours_ms = median_ms(timed(lambda x=x, ours=ours: ours(x)), args.warmup, args.repeat,
                            args.calls)  # fmt: skip
        ours_err = _rel(ours(x), ref)
        try:
            theirs_ms = median_ms(timed(lambda x=x, theirs=theirs: theirs(x)), args.warmup,
                                  args.repeat, args.calls)  # fmt: skip
            theirs_err = f"{_rel(theirs(x), ref):10.2e}"
            ratio = f"{theirs_ms / ours_ms:6.2f}x"
            theirs_txt = f"{theirs_ms:9.3f}"
        except RuntimeError as exc:  # cuFFT refuses non-power-of-two half precision
            theirs_txt, ratio, theirs_err = "refused", "-", "-"
            print(f"  cuFFT: {str(exc).splitlines()[0][:90]}")
        print(f"{label:14s} {ours_ms:10.3f} {theirs_txt:>9s} {ratio:>7s} {ours_err:11.2e} "
              f"{theirs_err:>10s}")  # fmt: skip
        del x
        torch.cuda.empty_cache()
    if args.bounds:
        x = _complex(SHAPES["fft_big"][0]).cuda()
        y = torch.empty_like(x)
        moved = 2 * x.numel() * x.element_size()  # read and written once
        print(f"copies of fft_big's {x.numel()} values (its passes' access patterns):")
        for label, fn in bound_copies(x, y).items():
            ms = median_ms(timed(fn), args.warmup, args.repeat, args.calls)
            print(f"  {label:16s} {ms:8.3f} ms  {moved / ms / 1e9:5.2f} TB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
