"""Run 1-D FFTs from plans on any backend that can allocate, upload and launch.

The orchestration (which passes, which buffers, which tables) is written once here; a backend
supplies memory and launches (``specux.kernels.cuda.fft`` with torch tensors on the GPU,
``specux.kernels.emulate`` with numpy buffers and the C++ dialect on the host).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from specux.kernels.codegen.fft import fused_launch_args, launch_sizes
from specux.kernels.plan import (
    CANONICAL,
    USER,
    FusedSpec,
    LoadSpec,
    PassSpec,
    StoreSpec,
    bluestein_length,
    factorize,
    fused,
    passes,
)

# The fused one-block kernel is correct (host emulation; memcheck and racecheck clean on an
# H200) but, measured with bench/fft.py, still slower than the pass kernels: its 64-bit index
# arithmetic and per-butterfly float64 twiddles dominate once memory traffic is gone. It stays
# opt-in until 32-bit indexing and twiddle tables land.
FUSED_BY_DEFAULT = False

_LOAD_MODE = {"c2c": "complex", "r2c": "real", "c2r": "hermitian"}
_STORE_MODE = {"c2c": "complex", "r2c": "half", "c2r": "real"}


@dataclass(frozen=True)
class Strides:
    """A user array seen as ``batch`` rows of transform elements (see plan.Layout)."""

    inner: int
    outer_stride: int
    inner_stride: int
    elem_stride: int

    @staticmethod
    def along(shape: tuple[int, ...], axis: int) -> Strides:
        """Rows along ``axis`` of a C-contiguous array of ``shape``."""
        inner = 1
        for size in shape[axis + 1 :]:
            inner *= size
        return Strides(max(inner, 1), shape[axis] * inner, 1, inner)


class Backend(Protocol):
    def scratch(self, count: int, precision: str) -> Any: ...
    def table(self, key: tuple, values: np.ndarray, precision: str) -> Any: ...
    def launch(self, spec: PassSpec | FusedSpec, grid: int, block: int, shared: int,
               args: tuple) -> None: ...  # fmt: skip
    def pointer(self, buffer: Any) -> int: ...


@functools.lru_cache(maxsize=64)
def _chirp(n: int, sign: int) -> np.ndarray:
    """exp(sign i pi m^2 / n), m < n, with m^2 reduced mod 2n in integers first."""
    m = np.arange(n, dtype=np.int64)
    phase = (m * m) % (2 * n)
    out = np.exp(sign * 1j * np.pi * phase.astype(np.float64) / n)
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=64)
def _bluestein_filter(n: int, length: int, sign: int) -> np.ndarray:
    """FFT_length of conj(chirp) wrapped around, divided by length (the inverse's 1/M)."""
    chirp = _chirp(n, sign)
    b = np.zeros(length, dtype=np.complex128)
    b[:n] = np.conj(chirp)
    b[length - n + 1 :] = np.conj(chirp[1:])[::-1]
    out = np.fft.fft(b) / length
    out.flags.writeable = False
    return out


def transform_1d(
    backend: Backend,
    src: Any,
    dst: Any,
    *,
    n: int,
    kind: str,
    sign: int,
    scale: float,
    precision: str,
    batch: int,
    src_storage: str,
    dst_storage: str,
    src_strides: Strides,
    dst_strides: Strides,
    allow_fused: bool = FUSED_BY_DEFAULT,
) -> None:
    """One batch of ``n``-point transforms from ``src`` to ``dst`` (user layouts).

    kind ``c2c``: complex in and out; ``r2c``: real in, bins 0..n/2 out; ``c2r``: bins
    0..n/2 in (Hermitian), real out. ``sign`` -1 forward, +1 inverse; ``scale`` multiplies
    the result (the normalization). With ``allow_fused``, lengths that fit a block run as
    one fused kernel instead of one kernel per pass.
    """
    if batch == 0:
        return
    load = LoadSpec(USER, _LOAD_MODE[kind], src_storage)
    store = StoreSpec(USER, _STORE_MODE[kind], dst_storage, scaled=True, logical=n)
    run = functools.partial(_transform, backend, batch=batch, allow_fused=allow_fused)
    if factorize(n) is not None:
        run(n, sign, precision, load, store, src, dst, scale, src_strides, dst_strides)
        return
    length = bluestein_length(n)
    chirp = backend.table(("chirp", n, sign), _chirp(n, sign), precision)
    filt = backend.table(("bluestein", n, length, sign), _bluestein_filter(n, length, sign),
                         precision)  # fmt: skip
    spectrum = backend.scratch(batch * length, precision)
    run(length, -1, precision,
        LoadSpec(USER, _LOAD_MODE[kind], src_storage, valid=n, table=True), StoreSpec(),
        src, spectrum, 1.0, src_strides, None, load_table=chirp)  # fmt: skip
    run(length, 1, precision, LoadSpec(table=True),
        StoreSpec(USER, _STORE_MODE[kind], dst_storage, valid=n, table=True, scaled=True,
                  logical=n),
        spectrum, dst, scale, None, dst_strides, load_table=filt, store_table=chirp)  # fmt: skip



_NONE = Strides(1, 0, 0, 0)
_PASS_BLOCK = 256


def _fused_threads(n: int) -> int:
    """Threads per fused block: about one per 4 points, whole warps, 32 to 256."""
    return max(32, min(256, -(-n // 4 // 32) * 32))


def _transform(
    backend, n, sign, precision, load, store, src, dst, scale, src_strides, dst_strides, *,
    batch, allow_fused, load_table=None, store_table=None,
) -> None:  # fmt: skip
    """One transform of ``n`` points: a fused kernel if it fits a block, else passes."""

    def common(source, target, first, last, ins, outs):
        ins, outs = ins or _NONE, outs or _NONE
        return (
            backend.pointer(source), backend.pointer(target),
            backend.pointer(load_table) if first and load_table is not None else 0,
            backend.pointer(store_table) if last and store_table is not None else 0,
            batch, float(scale) if last else 1.0,
            ins.inner, ins.outer_stride, ins.inner_stride, ins.elem_stride,
            outs.inner, outs.outer_stride, outs.inner_stride, outs.elem_stride,
        )  # fmt: skip

    spec = fused(n, sign, precision, load, store) if allow_fused else None
    if spec is not None:
        args = common(src, dst, True, True, src_strides, dst_strides) + fused_launch_args(spec)
        backend.launch(spec, batch, _fused_threads(n), spec.shared_bytes, args)
        return
    chain = passes(n, sign, precision, load, store)
    count = min(2, len(chain) - 1)
    buffers = [backend.scratch(batch * n, precision) for _ in range(count)]
    current = src
    for index, step in enumerate(chain):
        first, last = index == 0, index == len(chain) - 1
        target = dst if last else buffers[index % 2]
        args = common(current, target, first, last, src_strides if first else None,
                      dst_strides if last else None) + launch_sizes(step)  # fmt: skip
        threads = batch * (n // step.radix)
        backend.launch(step, -(-threads // _PASS_BLOCK), _PASS_BLOCK, 0, args)
        current = target


__all__ = ["CANONICAL", "Strides", "transform_1d"]
