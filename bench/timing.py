"""The timing both GPU benchmarks use (bench/fft.py, bench/transforms.py)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np


def median_ms(fn: Callable, warmup: int, repeat: int, calls: int, device: str = "cuda") -> float:
    """Median over ``repeat`` samples of the mean time of ``calls`` back-to-back calls (ms).

    CUDA: events around the calls -- the GPU time of a call when the host keeps the queue
    full, as in a training loop; CPU (the scripts' smoke runs): time.perf_counter.
    """
    cuda = device == "cuda"
    if cuda:
        import torch
    for _ in range(warmup):
        fn()
    if cuda:
        torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / calls)
        else:
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times.append((time.perf_counter() - t0) * 1e3 / calls)
    return float(np.median(times))
