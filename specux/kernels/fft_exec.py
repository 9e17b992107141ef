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

from specux.kernels.codegen.fft import launch_sizes
from specux.kernels.plan import (
    CANONICAL,
    USER,
    LoadSpec,
    PassSpec,
    StoreSpec,
    bluestein_length,
    factorize,
    passes,
)

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
    def launch(self, spec: PassSpec, threads: int, args: tuple) -> None: ...
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
) -> None:
    """One batch of ``n``-point transforms from ``src`` to ``dst`` (user layouts).

    kind ``c2c``: complex in and out; ``r2c``: real in, bins 0..n/2 out; ``c2r``: bins
    0..n/2 in (Hermitian), real out. ``sign`` -1 forward, +1 inverse; ``scale`` multiplies
    the result (the normalization).
    """
    if batch == 0:
        return
    load = LoadSpec(USER, _LOAD_MODE[kind], src_storage)
    store = StoreSpec(USER, _STORE_MODE[kind], dst_storage, scaled=True, logical=n)
    if factorize(n) is not None:
        _chain(backend, passes(n, sign, precision, load, store), src, dst, batch, scale,
               src_strides, dst_strides, None, None)  # fmt: skip
        return
    length = bluestein_length(n)
    chirp = backend.table(("chirp", n, sign), _chirp(n, sign), precision)
    filt = backend.table(("bluestein", n, length, sign), _bluestein_filter(n, length, sign),
                         precision)  # fmt: skip
    spectrum = backend.scratch(batch * length, precision)
    forward = passes(length, -1, precision,
                     LoadSpec(USER, _LOAD_MODE[kind], src_storage, valid=n, table=True),
                     StoreSpec())  # fmt: skip
    _chain(backend, forward, src, spectrum, batch, 1.0, src_strides, None, chirp, None)
    inverse = passes(length, 1, precision, LoadSpec(table=True),
                     StoreSpec(USER, _STORE_MODE[kind], dst_storage, valid=n, table=True,
                               scaled=True, logical=n))  # fmt: skip
    _chain(backend, inverse, spectrum, dst, batch, scale, None, dst_strides, filt, chirp)


def _chain(backend, chain, src, dst, batch, scale, src_strides, dst_strides, load_table,
           store_table) -> None:  # fmt: skip
    """Run passes src -> scratch -> ... -> dst; the first pass reads src, the last writes dst."""
    n = chain[0].n
    count = min(2, len(chain) - 1)
    buffers = [backend.scratch(batch * n, chain[0].precision) for _ in range(count)]
    current = src
    none = Strides(1, 0, 0, 0)
    for index, spec in enumerate(chain):
        last = index == len(chain) - 1
        target = dst if last else buffers[index % 2]
        ins = src_strides if (index == 0 and src_strides is not None) else none
        outs = dst_strides if (last and dst_strides is not None) else none
        args = (
            backend.pointer(current), backend.pointer(target),
            backend.pointer(load_table) if index == 0 and load_table is not None else 0,
            backend.pointer(store_table) if last and store_table is not None else 0,
            batch, float(scale),
            ins.inner, ins.outer_stride, ins.inner_stride, ins.elem_stride,
            outs.inner, outs.outer_stride, outs.inner_stride, outs.elem_stride,
            *launch_sizes(spec),
        )  # fmt: skip
        backend.launch(spec, batch * (n // spec.radix), args)
        current = target


__all__ = ["CANONICAL", "Strides", "transform_1d"]
