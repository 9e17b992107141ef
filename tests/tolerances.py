"""Every numeric tolerance of the test suite, with the reason for each (one place)."""

from __future__ import annotations

import numpy as np

TOLERANCES = {
    # float64 transforms against float64 references (numpy.fft, scipy, torch): both sides are
    # O(log n) ulp accurate FFTs; 1e-12 relative L2 leaves ~100x headroom over ~1e-15.
    "float64": 1e-12,
    # The CUDA FFT family in float64 (the generated kernels) against numpy.fft, relative L2
    # (tests/test_cuda_fft.py): the same O(log n) ulp accuracy as "float64", held to a 10x
    # tighter bound, the value those tests have always used.
    "float64_cuda_fft": 1e-13,
    # A float64 root of unity (fft_exec's twiddle and four-step twist tables) against the
    # exact one (mpmath, 40 digits), absolute: correctly rounded, each part would be within
    # half an ulp (5.6e-17 below 1); 2e-16 allows about an ulp (1.1e-16) in each part, as a
    # table computed with float64 arithmetic (not always correctly rounded) needs.
    "unit_root64": 2e-16,
    # istft(stft(x)) in float64: two FFTs and an envelope division, each O(ulp).
    "roundtrip64": 1e-12,
    # The same round trip in float32, relative L2: each step a few float32 ulp (6e-8).
    "roundtrip32": 1e-6,
    # float64 istft samples of a unit-variance signal, absolute: against the natural-length
    # istft of the same frames (a length= that pads or trims), or against the signal itself
    # (the round trip): a few ulp of values of order 1.
    "istft_abs64": 1e-12,
    # overlap_add against a Python loop adding the frames one at a time, float64, absolute:
    # sums of <= 9 unit-variance terms in another order, an ulp or two of order-1 values.
    "overlap_add64": 1e-12,
    # Filters, windows, DCTs and scale conversions against librosa / scipy / formulas, max
    # error relative to the peak, float64 on both sides: they differ only in operation order
    # and FFT vs direct-sum evaluation (observed <= ~2e-15); a formula or indexing mismatch
    # shows as 1e-3 or worse (tests/test_filters.py).
    "filters64": 1e-12,
    # hz_to_mel against librosa's at a single frequency (math.isclose, with "filters64" as the
    # relative part): the absolute part for mel values at or near 0, where a relative bound
    # alone would ask for exact equality.
    "mel_abs64": 1e-12,
    # mel_to_hz(hz_to_mel(f)) against f: the scale's log and its inverse exp (above 1 kHz
    # for Slaney, everywhere for htk), each an ulp or two, relative; plus an absolute part in
    # Hz for f at or near 0, where htk's inverse 700 (10 ** (m / 2595) - 1) cancels.
    "mel_roundtrip64": 1e-12,
    "mel_roundtrip_hz": 1e-9,
    # The Slaney scale's linear part at points it defines exactly (1 kHz is 15 mel, 500 Hz 7.5
    # mel): one division's rounding, an ulp (2.2e-16) relative.
    "mel_exact64": 1e-15,
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
    # cupy's stream semantics (tests/test_routes_cuda.py, tests/native_route_worker.py): a
    # float32 signal produced by a slow kernel (sinf / cosf) on a non-blocking stream, its
    # stft on that stream, against the CPU backend's float32 stft of numpy's float32 sin / cos
    # of the same points, relative to the peak: the inputs differ by a few float32 ulp and
    # the two float32 stft chains agree within "float32_peak" (1e-5); reading the buffer
    # before the producer finished (the failure this catches) gives an error of order 1.
    # The bound is the value those checks have always used.
    "stream_order32": 1e-4,
    # dB values are compared in absolute dB: 10*log10 of a 1e-5 relative error is 4.3e-5 dB.
    "db_abs32": 1e-3,
    "db_abs64": 1e-9,
    # The CPU backend's dB (factor / ln 10 times numpy's natural log) against float64 log10:
    # the log's error (an ulp or two) and two roundings, in units of the dtype's eps times
    # max(|dB|, 1).
    "db_log_eps": 4.0,
    # A dB output counts as at its eps floor (10 log10(eps)) within this many dB: the float32
    # floor is 10 log10(eps) rounded to float32 (an ulp at 100 dB is 7.6e-6 dB), so 1e-3 dB
    # tells values at the floor from the rest (tests/test_cuda_transforms.py's eps test).
    "db_floor_slack": 1e-3,
    # The dB backward from the kept output (values = 10 ** (db / factor)) against the
    # recomputing backward, float64, relative and absolute (times the gradient's peak):
    # exponentiating the dB value turns its absolute rounding (an ulp of |dB| <= ~100, 1.4e-14)
    # into ~3e-15 relative error of the values.
    "db_kept_backward64": 1e-12,
    # The dB derivative's scale (factor / ln 10 / values) against the same formula written
    # in float64: a division and a product, a few ulp relative.
    "db_cotangent64": 1e-15,
    # float16 storage (compute in float32) against the float32 result, relative to the peak:
    # the input and the output are rounded to 11 significant bits (2**-11 ~ 4.9e-4 each),
    # plus a float32 FFT's error: 2e-3 is issue 4's bound.
    "float16_storage": 2e-3,
    # The same bound of issue 4 for the CUDA rfft / irfft on float16 storage, as relative L2
    # against the float64 transform of the same (float16, exactly representable) input
    # (tests/test_cuda_fft.py), rather than relative to the peak.
    "float16_fft_l2": 2e-3,
    # A value computed in float32 and stored once as float16 against a float64 reference on
    # the same, exactly representable input, relative to the peak: half an ulp of float16's
    # 11 significant bits is at most 2**-11 of the value, and 2**-10 also covers the float32
    # arithmetic (the emulated kernels' float16 storage, tests/test_codegen.py).
    "float16_store": 2.0**-10,
    # float16 chroma (computed in float32, rounded once to float16) against the float32
    # chroma of the same input, absolute, for values <= 1 (norm=inf): half a float16 ulp at 1
    # (2**-11) bounds the rounding of any value <= 1.
    "float16_round_once": 2.0**-11,
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
    # The colnorm kernel (emulated) against NumpyEngine.normalize (librosa's util.normalize),
    # float64, relative: one reduction and one division per value, in another order.
    "colnorm64": 1e-15,
    # The CUDA istft's cached reciprocal window envelope, rebuilt after the window is doubled,
    # against the first one / 4: a power-of-two scale is exact, so the two agree to an ulp
    # or so, relative (the value the test used).
    "envelope_rescale64": 1e-15,
    # nn.FFTConvolve with its kernel made a Parameter against specux.fftconvolve with the same
    # kernel, float64, absolute: the same transform on unit-variance data, up to the rounding
    # of a float64 FFT convolution of order-1 values.
    "fftconvolve_module64": 1e-12,
    # The torchaudio preset's MelScale (float32) against a float32 matmul of the same bank,
    # relative: float32 sums of 40 products in another order, a few ulp (1.2e-7 each).
    "melscale32": 1e-6,
    # A saxpy kernel compiled by NVRTC and launched on torch's stream against
    # (a x + y) computed in float64 and rounded to the dtype (tests/test_cuda_runtime.py),
    # relative and absolute alike: float32 within a few ulp (1.2e-7), float64 within a few
    # ulp (2.2e-16) of order-1 values, float16 (computed in float32, rounded once to half)
    # within one half ulp (2**-11 ~ 4.9e-4 relative).
    "saxpy32": 1e-6,
    "saxpy64": 1e-14,
    "saxpy16": 1e-3,
}


# Every CQT-specific tolerance, with the measurement it comes from (all relative to the peak
# magnitude of the reference unless stated).
CQT_TOLERANCES = {
    # Engine vs tests/test_cqt.py's brute-force float64 sums (explicit per bin): exact sums;
    # measured <= 5e-15 (<= 2e-12 for 1-sample signals, whose response is a tiny sidelobe, so
    # the peak itself is ~1e-3 of a typical one). The figure the spec asks for.
    "direct64": 1e-10,
    # The same comparison on random configurations (tests/test_cqt.py's hypothesis test),
    # relative to the largest possible output, a bin's |taps|_1 times max |x|, rather than
    # to the peak (a short periodic signal can cancel a long filter's response by 1e-6);
    # for the adjoint identity <cqt(x), g> == <x, cqt_adjoint(g)> the same factor multiplies
    # that bound times sqrt(length) times sum |g|. Float64 round-off of the sums.
    "direct64_worst_case": 1e-13,
    # tuning=None (the tuning estimated inside, as librosa.cqt / vqt do) against the same
    # transform at librosa's estimate passed explicitly: both at the same tuning, so the same
    # filters up to the estimate's float64 rounding.
    "tuning_estimate64": 1e-12,
    # A batch against each of its rows transformed alone, absolute: the same float64 sums,
    # possibly blocked differently, on outputs of order 1 (a unit-variance input).
    "batch_rows64": 1e-13,
    # output="magnitude" / "power" / "db" against apply_output of the complex result:
    # the same formulas evaluated in another place, float64 (rtol, and atol for values near 0).
    "output_modes64_rtol": 1e-14,
    "output_modes64_atol": 1e-12,
    # transform_exec.cqt_spectra (the kernels' DFT table, float64) against the explicit DFT
    # exp(2 pi i f (d + j) / F) @ k / F, relative to the peak per term of the size-F sum:
    # each of the F terms rounded to ~1e-16, summed in another order.
    "spectra_table64": 1e-15,
    # The emulated tiled correlation kernel (float64) against numpy's float64 product of the
    # gathered frames and the kernel: sums of <= 600 products in another order.
    "correlate64": 1e-12,
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
    # specux.chroma(source="cqt") against librosa.feature.chroma_cqt: librosa's multirate CQT
    # (the ~1.5e-2 above), carried through the fold and the normalization. Absolute for the
    # default norm=inf (each frame's peak is 1), on a 3 s noise signal; absolute for p-norms
    # (2, 3, 8) of float32 tones at scales 1e-14 to 2e4; relative to the peak for the
    # librosa preset's options on a two-tone signal (tests/test_presets.py). The values the
    # tests have always used.
    "librosa_chroma": 5e-2,
    "librosa_chroma_pnorm": 1e-1,
    "librosa_chroma_preset": 1e-1,
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
