"""Every numeric tolerance of the test suite, with the reason for each (one place)."""

from __future__ import annotations

import numpy as np

TOLERANCES = {
    # float64 transforms against float64 references (numpy.fft, scipy, torch): both sides are
    # O(log n) ulp accurate FFTs; 1e-12 relative L2 leaves ~100x headroom over ~1e-15.
    "float64": 1e-12,
    # istft(stft(x)) in float64: two FFTs and an envelope division, each O(ulp).
    "roundtrip64": 1e-12,
    # Filters, windows, DCTs and scale conversions against librosa / scipy / formulas, max
    # error relative to the peak, float64 on both sides: they differ only in operation order
    # and FFT vs direct-sum evaluation (observed <= ~2e-15); a formula or indexing mismatch
    # shows as 1e-3 or worse (tests/test_filters.py).
    "filters64": 1e-12,
    # CUDA float32 FFTs: relative L2 against float64 at most this many times cuFFT's on the
    # same data (issue 4's acceptance; tests/test_cuda_fft.py).
    "float32_vs_cufft": 1.5,
    # float32 results may be at most this many times numpy's own float32 error on the same
    # data (relative L2 against the float64 reference), per the foundation issue.
    "float32_vs_numpy": 3.0,
    # floor for the float32 comparison: numpy's error can be exactly 0 on trivial inputs
    # (n = 1, constant signals); 8 ulp of float32 then bounds ours.
    "float32_floor": 8 * float(np.finfo(np.float32).eps),
    # float32 spectrogram features (magnitude, power, dB) against float64 references,
    # relative to the output's peak: a few ulp of float32 on the peak.
    "float32_peak": 1e-5,
    # CUDA against the CPU backend (or eager), float64, relative to the peak: issue 5's
    # acceptance; two differently ordered float64 FFT chains agree to ~1e-15, so 1e-10 also
    # covers the envelope divisions and dB logs of the longer chains.
    "float64_peak": 1e-10,
    # dB values are compared in absolute dB: 10*log10 of a 1e-5 relative error is 4.3e-5 dB.
    "db_abs32": 1e-3,
    "db_abs64": 1e-9,
    # The CPU backend's dB (factor / ln 10 times numpy's natural log) against float64 log10:
    # the log's error (an ulp or two) and two roundings, in units of the dtype's eps times
    # max(|dB|, 1).
    "db_log_eps": 4.0,
    # float16 storage (compute in float32) against the float32 result, relative to the peak:
    # the input and the output are rounded to 11 significant bits (2**-11 ~ 4.9e-4 each),
    # plus a float32 FFT's error: 2e-3 is issue 4's bound.
    "float16_storage": 2e-3,
    # bfloat16 storage keeps 8 significant bits (2**-8 ~ 3.9e-3 for input and output).
    "bfloat16_storage": 2e-2,
    # A value computed in float32 and stored once as bfloat16 (the kernels' bfloat16 storage
    # against a float64 reference on the same, exactly representable input): half an ulp of
    # bfloat16's 8 significant bits (at most 2**-8 of the value, so of the peak) plus the
    # float32 arithmetic's error on the peak.
    "bfloat16_store": 2.0**-8 + 1e-5,
    # gradcheck in float64 (finite differences with eps=1e-6): torch's defaults.
    "gradcheck_atol": 1e-5,
    "gradcheck_rtol": 1e-3,
}


# Every CQT-specific tolerance, with the measurement it comes from (all relative to the peak
# magnitude of the reference unless stated).
CQT_TOLERANCES = {
    # Engine vs tests/test_cqt.py's brute-force float64 sums (explicit per bin): exact sums;
    # measured <= 5e-15 (<= 2e-12 for 1-sample signals, whose response is a tiny sidelobe, so
    # the peak itself is ~1e-3 of a typical one). The figure the spec asks for.
    "direct64": 1e-10,
    # Engine vs librosa's own full-rate pipeline (wavelet(pad_fft=True) * lengths / n_fft,
    # numpy FFT, stft(window='ones')) summed over the whole spectrum: measured 1.5e-15.
    "full_rate64": 1e-12,
    # librosa sums the non-negative half of the spectrum only; that drops the hann filters'
    # negative-frequency sidelobes: measured 3.5e-5 of the peak for the default CQT on the
    # chirp (2.4e-3 for the default VQT, whose filters are shorter).
    "half_spectrum_cqt": 1e-4,
    "half_spectrum_vqt": 5e-3,
    # librosa.cqt / librosa.vqt (defaults: soxr_hq resampling per octave, sparsity=0.01) vs
    # ours on a 3 s chirp + noise at 22050 Hz. Measured: cqt 1.57e-2 complex, 1.35e-2
    # magnitude; vqt 6.9e-2 complex, 4.9e-2 magnitude (worst at the first frames, where the
    # resampler's edge transient sits; 2.4e-2 complex in the interior). librosa.cqt differs
    # from its own full-rate sum by the same 1.57e-2 (1.49e-2 with sparsity=0: resampling
    # dominates). Bounds: about 2x the measurements.
    "librosa_cqt_complex": 3e-2,
    "librosa_cqt_magnitude": 2.5e-2,
    "librosa_vqt_complex": 1.2e-1,
    "librosa_vqt_magnitude": 1e-1,
    # float32 vs float64 on the same (float32) input: measured <= 1e-6 (BLAS sums of <= ~1k
    # terms and a 3-smooth real DFT as a matmul, each a few ulp).
    "float32_peak": 1e-5,
    # <cqt(x), G> == <x, cqt_adjoint(G)>, relative to |cqt(x)| |G|: float64 round-off.
    "adjoint64": 1e-12,
}


def rel_l2(actual, expected) -> float:
    """||actual - expected|| / ||expected|| (0 when both are zero)."""
    actual = np.asarray(actual, dtype=np.complex128)
    expected = np.asarray(expected, dtype=np.complex128)
    scale = np.linalg.norm(expected.ravel())
    err = np.linalg.norm((actual - expected).ravel())
    if scale == 0:
        return float(err)
    return float(err / scale)


def rel_peak(actual, expected) -> float:
    """max |actual - expected| / max |expected|."""
    actual = np.asarray(actual, dtype=np.complex128)
    expected = np.asarray(expected, dtype=np.complex128)
    peak = np.max(np.abs(expected)) if expected.size else 0.0
    err = np.max(np.abs(actual - expected)) if expected.size else 0.0
    return float(err / peak) if peak else float(err)


def float32_bound(numpy_f32_err: float) -> float:
    """Our allowed float32 error given numpy's own float32 error on the same data."""
    return TOLERANCES["float32_vs_numpy"] * max(numpy_f32_err, TOLERANCES["float32_floor"])
