"""Tuning estimation (chroma(tuning=None)) against librosa.estimate_tuning."""

from __future__ import annotations

import librosa
import numpy as np
import pytest
from tolerances import TOLERANCES, rel_peak

import specux
from specux.kernels.cpu.tuning import estimate_tuning, pitch_tuning


def _tone(cents: float, sr: int = 22050, seconds: float = 2.0, seed: int = 0):
    t = np.arange(int(sr * seconds)) / sr
    f = 440.0 * 2 ** (cents / 1200)
    noise = 0.01 * np.random.default_rng(seed).standard_normal(t.size)
    return np.sin(2 * np.pi * f * t) + 0.5 * np.sin(3 * np.pi * f * t) + noise


@pytest.mark.parametrize("cents", [0.0, 17.0, -31.0, 45.0])
@pytest.mark.parametrize("bins_per_octave", [12, 24])
def test_estimate_tuning_equals_librosa(cents, bins_per_octave):
    y = np.stack([_tone(cents), 0.5 * _tone(cents, seed=1)])
    S = np.abs(librosa.stft(y, n_fft=2048, hop_length=512)) ** 2
    ours = estimate_tuning(S, 22050, 2048, bins_per_octave=bins_per_octave)
    assert ours == librosa.estimate_tuning(S=S, sr=22050, bins_per_octave=bins_per_octave)


def test_pitch_tuning_edge_cases():
    assert pitch_tuning(np.array([])) == 0.0
    assert pitch_tuning(np.array([0.0, -5.0])) == 0.0
    assert pitch_tuning(np.array([440.0] * 5)) == librosa.pitch_tuning(np.array([440.0] * 5))


def test_chroma_with_estimated_tuning_matches_librosa():
    y = _tone(23.0)
    got = specux.chroma(y, sr=22050, tuning=None)
    S = np.abs(librosa.stft(y, n_fft=2048, hop_length=512, pad_mode="constant")) ** 2
    tuning = librosa.estimate_tuning(S=S, sr=22050, bins_per_octave=12)
    assert tuning != 0.0
    bank = librosa.filters.chroma(sr=22050, n_fft=2048, tuning=tuning, dtype=np.float64)
    ref = librosa.util.normalize(bank @ S, norm=np.inf, axis=-2)
    assert rel_peak(got, ref) <= TOLERANCES["float64"]
