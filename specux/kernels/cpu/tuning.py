"""Tuning estimation from spectral peaks (librosa's ``estimate_tuning`` / ``piptrack``).

Data-dependent and not differentiable (as in librosa): the estimate is a number that selects
the chroma filterbank, computed on the host from the power spectrogram.
"""

from __future__ import annotations

import numpy as np


def _parabolic_shift(spectrum: np.ndarray) -> np.ndarray:
    """Sub-bin offset of a parabola through each bin and its neighbours (0 at the edges)."""
    shift = np.zeros_like(spectrum)
    before, here, after = spectrum[..., :-2, :], spectrum[..., 1:-1, :], spectrum[..., 2:, :]
    curvature = after + before - 2.0 * here
    slope = 0.5 * (after - before)
    with np.errstate(divide="ignore", invalid="ignore"):
        interior = np.where(np.abs(slope) >= np.abs(curvature), 0.0, -slope / curvature)
    shift[..., 1:-1, :] = interior
    return shift


def _local_max(values: np.ndarray) -> np.ndarray:
    """Strictly above the lower neighbour and not below the upper one (edges repeat)."""
    padded = np.concatenate([values[..., :1, :], values, values[..., -1:, :]], axis=-2)
    return (values > padded[..., :-2, :]) & (values >= padded[..., 2:, :])


def spectral_peaks(spectrum: np.ndarray, sr: float, n_fft: int, fmin=150.0, fmax=4000.0,
                   threshold=0.1) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Interpolated peak frequencies (Hz) and magnitudes of a ``(..., n_freq, T)`` spectrum."""
    spectrum = np.abs(spectrum).astype(np.float64)
    freqs = np.arange(spectrum.shape[-2]) * (sr / n_fft)
    fmin, fmax = max(fmin, 0.0), min(fmax, sr / 2.0)
    slope = np.gradient(spectrum, axis=-2) if spectrum.shape[-2] > 1 else np.zeros_like(spectrum)
    shift = _parabolic_shift(spectrum)
    reference = threshold * spectrum.max(axis=-2, keepdims=True)
    in_band = ((fmin <= freqs) & (freqs < fmax))[:, None]
    peaks = in_band & _local_max(spectrum * (spectrum > reference))
    bins = np.nonzero(peaks)[-2]
    frequencies = (bins + shift[peaks]) * (sr / n_fft)
    magnitudes = (spectrum + 0.5 * slope * shift)[peaks]
    return frequencies, magnitudes


def pitch_tuning(frequencies: np.ndarray, resolution: float = 0.01, bins_per_octave: int = 12):
    """The most common deviation of ``frequencies`` from the equal-tempered grid, in bins."""
    frequencies = np.atleast_1d(frequencies)
    frequencies = frequencies[frequencies > 0]
    if frequencies.size == 0:
        return 0.0
    octaves = np.log2(frequencies / (440.0 / 16.0))
    residual = np.mod(bins_per_octave * octaves, 1.0)
    residual[residual >= 0.5] -= 1.0
    edges = np.linspace(-0.5, 0.5, int(np.ceil(1.0 / resolution)) + 1)
    counts, edges = np.histogram(residual, edges)
    return float(edges[np.argmax(counts)])


def estimate_tuning(spectrum: np.ndarray, sr: float, n_fft: int, bins_per_octave: int = 12,
                    resolution: float = 0.01) -> float:  # fmt: skip
    """librosa's estimate_tuning on a spectrogram: peaks above their median magnitude vote.

    One estimate for the whole array (all signals pooled), as librosa does.
    """
    frequencies, magnitudes = spectral_peaks(spectrum, sr, n_fft)
    keep = frequencies > 0
    threshold = np.median(magnitudes[keep]) if keep.any() else 0.0
    return pitch_tuning(frequencies[(magnitudes >= threshold) & keep], resolution, bins_per_octave)
