"""Filterbank spectrograms and feature-axis projections on numpy arrays."""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from specux.kernels.cpu.stft import db_into, framewise, power_into, scratch, single_threaded_blas
from specux.meta import matrices
from specux.meta.filters import sparse_bank
from specux.meta.matrices import MatrixSpec
from specux.meta.params import StftParams


def magnitude_power(spectrum: np.ndarray, power: float) -> np.ndarray:
    """``|X| ** power`` without a square root for the usual power 2."""
    if power == 2.0:
        return spectrum.real * spectrum.real + spectrum.imag * spectrum.imag
    magnitude = np.abs(spectrum)
    return magnitude if power == 1.0 else magnitude**power


# Band-grouping cost model (measured with OpenBLAS on 2 cores, float32): one GEMM call costs
# about as much as this many multiply-adds per frame; groups of consecutive bands are merged
# while that saves time.
_GEMM_CALL_MACS = 1500
# the most bands a group holds (a dense bank of more runs as several products: each group's
# call costs ~1500 of its multiply-adds a frame, a fraction of a percent of such a group's)
_GROUP_BANDS = 256


def band_groups(weights: np.ndarray) -> list[tuple[int, int, int, int]]:
    """:func:`_band_groups` of the nonzero pattern of ``weights``, cached."""
    nonzero = weights != 0
    key = (nonzero.shape, np.packbits(nonzero).tobytes())
    groups = _GROUPS.get(key)
    if groups is None:
        if len(_GROUPS) >= 64:
            _GROUPS.clear()
        groups = _GROUPS[key] = _band_groups(nonzero)
    return groups


_GROUPS: dict = {}


def _band_groups(nonzero: np.ndarray) -> list[tuple[int, int, int, int]]:
    """``(c0, c1, r0, r1)``: columns ``c0 .. c1`` are zero outside rows ``r0 .. r1``.

    A filterbank is banded (each FFT bin feeds at most two mel triangles), so instead of one
    dense ``(n_freq, n_bands)`` product, consecutive bands are grouped and each group multiplies
    only the bins it covers: the same nonzero terms, a fraction of the flops. The partition
    minimizes ``calls * _GEMM_CALL_MACS + multiply-adds`` (dynamic programming over bands)
    among groups of at most :data:`_GROUP_BANDS` bands, each step vectorized over a group's
    possible starts: linear in the bands (it was quadratic, in Python: 13 s for 5000 mels)."""
    n_rows, n_cols = nonzero.shape
    extent = sparse_bank(nonzero.T)  # each band's first and one-past-last nonzero bin
    empty = extent.stops <= extent.starts
    lo = np.where(empty, n_rows, extent.starts).astype(np.int64)  # (empty: no rows)
    hi = np.where(empty, 0, extent.stops).astype(np.int64)
    best = np.zeros(n_cols + 1)
    choice = np.zeros(n_cols + 1, np.int64)
    for c1 in range(1, n_cols + 1):
        c0 = np.arange(c1 - 1, max(c1 - _GROUP_BANDS, 0) - 1, -1)  # the group's first band
        r0 = np.minimum.accumulate(lo[c0])  # rows of bands c0 .. c1 - 1
        r1 = np.maximum.accumulate(hi[c0])
        cost = best[c0] + _GEMM_CALL_MACS + np.maximum(r1 - r0, 0) * (c1 - c0)
        k = int(np.argmin(cost))  # (the first minimum: the shortest group, as the loop took)
        best[c1], choice[c1] = cost[k], c0[k]
    groups, c1 = [], n_cols
    while c1 > 0:
        c0 = int(choice[c1])
        cols = nonzero[:, c0:c1].any(axis=1)
        rows = np.flatnonzero(cols)
        r0, r1 = (int(rows[0]), int(rows[-1]) + 1) if rows.size else (0, 0)
        groups.append((c0, c1, r0, r1))
        c1 = c0
    return groups[::-1]


class BankPlan(NamedTuple):
    """A filterbank as :func:`bank_spectrogram` applies it: its band count and its band
    groups ``(c0, c1, r0, r1, weights)`` (:func:`band_groups`; the transposed bank's rows
    ``r0 .. r1`` and columns ``c0 .. c1``, contiguous)."""

    n_bands: int
    groups: list


def bank_plan(bank: np.ndarray, dtype) -> BankPlan:
    """The :class:`BankPlan` of a ``(n_bands, n_freq)`` bank in ``dtype``."""
    weights = np.ascontiguousarray(bank.T, dtype=dtype)
    groups = [(c0, c1, r0, r1, np.ascontiguousarray(weights[r0:r1, c0:c1]))
              for c0, c1, r0, r1 in band_groups(weights)]  # fmt: skip
    return BankPlan(weights.shape[-1], groups)


@functools.lru_cache(maxsize=64)
def named_bank_plan(spec: MatrixSpec, dtype: str) -> BankPlan:
    """The :class:`BankPlan` of a named matrix, built once per spec and dtype (a small call
    spent ~15% of its time transposing and grouping the bank)."""
    return bank_plan(matrices.matrix(spec, dtype), dtype)


def bank_spectrogram(
    x: np.ndarray,
    window: np.ndarray | None,
    p: StftParams,
    power: float,
    bank: np.ndarray | BankPlan,
    output: str,
    eps: float,
) -> np.ndarray:
    """``bank @ |stft(x)| ** power``: ``(..., L) -> (..., n_bands, n_frames)`` (frame-major).
    ``bank``: the ``(n_bands, n_freq)`` matrix, or its :func:`bank_plan` in ``x``'s dtype.

    ``output="db"`` returns ``(20 / power) log10(max(S, eps))``. On the CPU each block of
    frames is reduced in cache by a few BLAS products over the bins each group of bands covers
    (:func:`band_groups`); the GPU reduces sparsely.
    """
    n_bands, groups = bank if isinstance(bank, BankPlan) else bank_plan(bank, x.dtype)
    factor = 20.0 / power

    def reduce(spectrum: np.ndarray, out: np.ndarray) -> None:
        # Power and filterbank on each block while it is in cache.
        if power == 2.0:
            magnitudes = scratch("power", spectrum.shape, x.dtype)
            power_into(spectrum, magnitudes)
        else:
            magnitudes = magnitude_power(spectrum, power)
        for c0, c1, r0, r1, part in groups:
            if r1 > r0:
                np.matmul(magnitudes[:, r0:r1], part, out=out[:, c0:c1])
            else:
                out[:, c0:c1] = 0
        if output == "db":
            db_into(out, factor, eps, out)

    with single_threaded_blas():  # the blocks' GEMMs run on the pool threads
        values = framewise(x, window, p, reduce, n_bands, x.dtype)
    return values.swapaxes(-1, -2)


def db(values: np.ndarray, factor: float, eps: float) -> np.ndarray:
    """``factor * log10(max(values, eps))`` (:func:`~specux.kernels.cpu.stft.db_into`)."""
    out = np.empty_like(values)
    db_into(values, factor, eps, out)
    return out


def clip_top_db(values: np.ndarray, top_db: float) -> np.ndarray:
    """Per signal (leading index): ``max(S, max(S) - top_db)`` over the last two axes."""
    if values.size == 0:
        return values
    peak = values.max(axis=(-2, -1), keepdims=True)
    return np.maximum(values, peak - values.dtype.type(top_db))


def project(x: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """``matrix @ x`` along the feature axis: ``(..., n_in, T) -> (..., n_out, T)``, as one
    product of all the frames, the result frame-major (mfcc's DCT of (8, 80, 626) float32:
    0.39 ms, not the 0.68 ms of a product per signal). A frame-major ``x`` (a transposed
    view, as the spectrograms are) is read in place and any other layout copied to it first:
    the BLAS kernels' order of summation differs between layouts, and the result must not
    depend on how ``x`` lies in memory (a cotangent's layout differs between eager and
    compiled autograd)."""
    m = matrix.astype(x.dtype, copy=False)
    with single_threaded_blas():
        if x.ndim < 2 or x.size == 0:
            return np.matmul(m, x)
        frames = np.ascontiguousarray(x.swapaxes(-1, -2))
        out = frames.reshape(-1, x.shape[-2]) @ m.T
    return out.reshape(*frames.shape[:-1], m.shape[0]).swapaxes(-1, -2)
