"""Every numeric tolerance of the test suite, with the reason for each (one place)."""

from __future__ import annotations

import numpy as np

TOLERANCES = {
    # float64 transforms against float64 references (numpy.fft, scipy, torch): both sides are
    # O(log n) ulp accurate FFTs; 1e-12 relative L2 leaves ~100x headroom over ~1e-15.
    "float64": 1e-12,
    # istft(stft(x)) in float64: two FFTs and an envelope division, each O(ulp).
    "roundtrip64": 1e-12,
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
