"""Filterbank spectrograms and feature-axis projections on numpy arrays."""

from __future__ import annotations

import numpy as np

from specux.kernels.cpu.stft import framewise, single_threaded_blas
from specux.meta.params import StftParams


def magnitude_power(spectrum: np.ndarray, power: float) -> np.ndarray:
    """``|X| ** power`` without a square root for the usual power 2."""
    if power == 2.0:
        return spectrum.real * spectrum.real + spectrum.imag * spectrum.imag
    magnitude = np.abs(spectrum)
    return magnitude if power == 1.0 else magnitude**power


def db(values: np.ndarray, factor: float, eps: float) -> np.ndarray:
    """``factor * log10(max(values, eps))``."""
    return factor * np.log10(np.maximum(values, values.dtype.type(eps)))


def bank_spectrogram(
    x: np.ndarray,
    window: np.ndarray | None,
    p: StftParams,
    power: float,
    bank: np.ndarray,
    output: str,
    eps: float,
) -> np.ndarray:
    """``bank @ |stft(x)| ** power``: ``(..., L) -> (..., n_bands, n_frames)`` (frame-major).

    ``output="db"`` returns ``(20 / power) log10(max(S, eps))``. On the CPU one BLAS product
    per batch (frames x bins x bands) is faster than a sparse reduce; the GPU reduces sparsely.
    """
    weights = np.ascontiguousarray(bank.T, dtype=x.dtype)

    def reduce(spectrum: np.ndarray) -> np.ndarray:
        # Power and filterbank on each chunk while it is in cache: one small GEMM per chunk.
        magnitudes = magnitude_power(spectrum, power)
        flat = magnitudes.reshape(-1, magnitudes.shape[-1]) @ weights
        return flat.reshape(*magnitudes.shape[:-1], weights.shape[-1])

    values = framewise(x, window, p, reduce, weights.shape[-1], x.dtype)
    if output == "db":
        values = db(values, 20.0 / power, eps)
    return values.swapaxes(-1, -2)


def project(x: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """``matrix @ x`` along the feature axis: ``(..., n_in, T) -> (..., n_out, T)``."""
    with single_threaded_blas():
        return np.matmul(matrix.astype(x.dtype, copy=False), x)
