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


def graphed(fn: Callable[[], object]) -> Callable[[], None]:
    """``fn`` captured in a CUDA graph, torch's recipe (two warm-up calls on a side stream,
    then one captured call); returns the graph's replay, whose time is the GPU's alone (no
    Python, dispatcher or autograd-engine time per call). Raises what the capture raises: a
    call that waits for the device cannot be captured."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay
