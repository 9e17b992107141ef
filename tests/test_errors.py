"""API.md's Errors section for stft / istft and routing: each documented bad input raises the
documented exception naming the parameter; NaN/Inf and empty inputs; torch-less import;
deterministic mode."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from tolerances import TOLERANCES

try:
    import torch
except ImportError:  # the torch-less CI job runs the numpy half of this file
    torch = None


import specux
from specux import routing

LIBS = ["numpy", "torch"] if torch is not None else ["numpy"]

N_FFT = 256


@pytest.fixture
def x(rng):
    return rng.standard_normal((2, 4000))


def _raises(exc, match, f, *args, **kwargs):
    with pytest.raises(exc, match=match) as info:
        f(*args, **kwargs)
    return info.value


# ---------------------------------------------------------------------------------------------
# stft parameters


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize(
    "value, exc",
    [
        (0, ValueError),
        (-1, ValueError),
        (2048.0, specux.ParameterError),
        ("2048", specux.ParameterError),
        (True, specux.ParameterError),
        (None, specux.ParameterError),
    ],
    ids=repr,
)
def test_n_fft(value, exc, lib, x):
    data = torch.from_numpy(x) if lib == "torch" else x
    err = _raises(exc, "n_fft", specux.stft, data, n_fft=value)
    assert isinstance(err, ValueError)  # ParameterError is a ValueError (and a TypeError)
    if exc is specux.ParameterError:
        assert isinstance(err, TypeError)
    assert repr(value) in str(err) or str(value) in str(err)


def test_istft_n_fft(x):
    S = specux.stft(x, n_fft=N_FFT)
    _raises(ValueError, "n_fft", specux.istft, S, n_fft=0)
    _raises(specux.ParameterError, "n_fft", specux.istft, S, n_fft=256.0)
    _raises(specux.ParameterError, "n_fft", specux.istft, S, n_fft=True)


@pytest.mark.parametrize(
    "value, exc",
    [(0, ValueError), (-4, ValueError), (1.5, specux.ParameterError),
     (64.0, specux.ParameterError), ("64", specux.ParameterError)],
    ids=repr,
)  # fmt: skip
def test_hop_length(value, exc, x):
    _raises(exc, "hop_length", specux.stft, x, n_fft=N_FFT, hop_length=value)
    S = specux.stft(x, n_fft=N_FFT)
    _raises(exc, "hop_length", specux.istft, S, n_fft=N_FFT, hop_length=value)


def test_win_length(x):
    err = _raises(ValueError, "win_length", specux.stft, x, n_fft=N_FFT, win_length=N_FFT + 1)
    assert str(N_FFT + 1) in str(err) and "n_fft" in str(err)
    _raises(ValueError, "win_length", specux.stft, x, n_fft=N_FFT, win_length=0)
    _raises(specux.ParameterError, "win_length", specux.stft, x, n_fft=N_FFT, win_length=100.0)
    S = specux.stft(x, n_fft=N_FFT)
    _raises(ValueError, "win_length", specux.istft, S, n_fft=N_FFT, win_length=N_FFT + 1)


@pytest.mark.parametrize("lib", LIBS)
def test_center_false_short_signal(lib, x):
    data = x[:, : N_FFT - 1]
    data = torch.from_numpy(np.ascontiguousarray(data)) if lib == "torch" else data
    err = _raises(ValueError, "n_fft", specux.stft, data, n_fft=N_FFT, center=False)
    assert "center=False" in str(err) and str(N_FFT - 1) in str(err)
    # exactly n_fft samples is fine: one frame
    ok = x[:, :N_FFT]
    ok = torch.from_numpy(np.ascontiguousarray(ok)) if lib == "torch" else ok
    assert tuple(specux.stft(ok, n_fft=N_FFT, center=False).shape) == (2, N_FFT // 2 + 1, 1)


def test_empty_time_axis():
    _raises(ValueError, "x", specux.stft, np.zeros((2, 0)), n_fft=N_FFT)


@pytest.mark.parametrize("value", [True, 1, "yes", None])
@pytest.mark.parametrize("name", ["center", "normalized", "onesided"])
def test_bool_flags(name, value, x):
    if value is True:
        specux.stft(x, n_fft=N_FFT, **{name: value})
        return
    _raises(specux.ParameterError, name, specux.stft, x, n_fft=N_FFT, **{name: value})


# ---------------------------------------------------------------------------------------------
# windows


@pytest.mark.parametrize("window", ["bogus", "hannn", "kaiser", "gaussian", ""], ids=repr)
def test_unknown_window_name(window, x):
    err = _raises(ValueError, "window", specux.stft, x, n_fft=N_FFT, window=window)
    assert repr(window) in str(err)
    S = specux.stft(x, n_fft=N_FFT)
    _raises(ValueError, "window", specux.istft, S, n_fft=N_FFT, window=window)


def test_unknown_window_name_lists_arrays_only_where_taken(x):
    """The error for an unknown window name offers a window array where the function takes
    one (stft) and not where it does not (cqt, get_window, the filters)."""
    err = _raises(ValueError, "'bogus' is not supported", specux.stft, x, n_fft=N_FFT,
                  window="bogus")  # fmt: skip
    assert "1-D array of length win_length" in str(err)
    for call in (lambda: specux.cqt(x, sr=8000, fmin=100, n_bins=24, window="bogus"),
                 lambda: specux.get_window("bogus", 4),
                 lambda: specux.filters.constant_q(sr=8000, fmin=100, n_bins=24,
                                                   window="bogus")):  # fmt: skip
        err = _raises(ValueError, "'bogus' is not supported", call)
        assert "array" not in str(err) and "win_length" not in str(err)


@pytest.mark.parametrize(
    "window, exc",
    [
        (("hann", 1.0), ValueError),  # not parametric
        (("bogus", 1.0), ValueError),
        (("kaiser", 1.0, 2.0), ValueError),  # too long
        ((), ValueError),
        ((1.0, "kaiser"), ValueError),  # order swapped
        (("kaiser", "a"), specux.ParameterError),
        (("kaiser", float("nan")), ValueError),
        (("gaussian", 0.0), ValueError),
        (("gaussian", -1.0), ValueError),
        (("kaiser", 710.0), ValueError),  # I0(beta) overflows: a NaN window
        (("kaiser", -1e6), ValueError),
    ],
    ids=repr,
)
def test_bad_window_tuple(window, exc, x):
    _raises(exc, "window", specux.stft, x, n_fft=N_FFT, window=window)
    _raises(exc, "window", specux.chroma, x, sr=8000, n_fft=N_FFT, window=window)


def test_window_parameter_tuples_work(x):
    for window in [("kaiser", 8.0), ("gaussian", 30.0), ("hann",), "hanning", "HANN",
                   ("kaiser", 709.0)]:  # fmt: skip
        S = specux.stft(x, n_fft=N_FFT, window=window)
        assert S.shape == (2, 129, 63) and np.isfinite(S).all()


def test_feature_errors_name_the_callers_parameter(x):
    """mfcc's mel filter norm is ``mel_norm`` (its ``norm`` is the DCT's), an array norm is
    refused by name (it had raised numpy's truth-value error), lfcc's default fmax of a
    sample rate below 2 is called the default, and a constant-Q bank too large or past
    Nyquist names bins_per_octave / gamma among its remedies."""
    calls = [functools.partial(specux.mfcc, x, sr=8000, n_fft=64, n_mels=10)]
    if torch is not None:
        calls.append(functools.partial(specux.nn.MFCC, sr=8000, n_fft=64, n_mels=10))
    for call in calls:
        for bad in (-1, -0.5, "bad"):
            _raises(ValueError, "^mel_norm=", call, mel_norm=bad)
        _raises(ValueError, "norm=array.*for the DCT", call, norm=np.array([1.0, 2.0]))
    _raises(ValueError, "norm=array.*for the DCT", specux.lfcc, x, sr=8000, n_fft=64,
            n_filter=10, norm=np.array([1.0, 2.0]))  # fmt: skip
    _raises(ValueError, "default fmax", specux.lfcc, x, sr=1, n_fft=4, n_filter=3, n_lfcc=3)
    assert specux.lfcc(x, sr=1, n_fft=4, n_filter=2, n_lfcc=2, fmax=0.5).shape[-2] == 2
    y = x[0, :2000]
    _raises(ValueError, "bins_per_octave=1000000000000", specux.cqt, y, sr=22050,
            bins_per_octave=10**12)  # fmt: skip
    _raises(ValueError, "gamma=1000000000000.0", specux.vqt, y, sr=22050, gamma=1e12)


@pytest.mark.parametrize("lib", LIBS)
def test_window_array_wrong_length_or_ndim(lib, x):
    as_lib = (lambda a: torch.from_numpy(a)) if lib == "torch" else (lambda a: a)
    data = as_lib(x)
    for bad in (np.hanning(N_FFT - 1), np.ones(N_FFT + 1), np.ones((1, N_FFT)), np.ones(())):
        err = _raises(ValueError, "window", specux.stft, data, n_fft=N_FFT, window=as_lib(bad))
        assert "win_length" in str(err)
    # win_length given: the array must have win_length samples, not n_fft
    _raises(ValueError, "window", specux.stft, data, n_fft=N_FFT, win_length=200,
            window=as_lib(np.ones(N_FFT)))  # fmt: skip
    out = specux.stft(data, n_fft=N_FFT, win_length=200, window=as_lib(np.ones(200)))
    assert tuple(out.shape) == (2, 129, 1 + 4000 // 50)  # hop defaults to win_length // 4


def test_window_array_wrong_library(x):
    err = _raises(TypeError, "window", specux.stft, torch.from_numpy(x), n_fft=N_FFT,
                  window=np.hanning(N_FFT))  # fmt: skip
    assert "numpy" in str(err) and "torch" in str(err)
    _raises(TypeError, "window", specux.stft, x, n_fft=N_FFT, window=torch.ones(N_FFT))
    S = specux.stft(torch.from_numpy(x), n_fft=N_FFT)
    # istft's input is S: the error names it so
    _raises(TypeError, "window is a numpy array but S is a torch array", specux.istft, S,
            n_fft=N_FFT, window=np.hanning(N_FFT))  # fmt: skip


def test_window_array_bad_dtype_or_type(x):
    # the message offers the real floating dtypes only (an int window's once offered complex)
    message = r"window must be a real floating array \(float16, bfloat16, float32 or float64\)"
    for dtype in (np.complex128, np.int64, np.bool_):
        err = _raises(TypeError, message, specux.stft, x, n_fft=N_FFT,
                      window=np.ones(N_FFT, dtype))  # fmt: skip
        assert str(err).endswith(np.dtype(dtype).name)
    _raises(ValueError, "window", specux.stft, x, n_fft=N_FFT, window=[1.0] * N_FFT)
    _raises(ValueError, "window", specux.stft, x, n_fft=N_FFT, window=3.0)


# ---------------------------------------------------------------------------------------------
# choices: pad_mode, output, norm, eps


@pytest.mark.parametrize("value", ["bogus", "symmetric", "", "zero"], ids=repr)
def test_unknown_pad_mode(value, x):
    err = _raises(ValueError, "pad_mode", specux.stft, x, n_fft=N_FFT, pad_mode=value)
    assert repr(value) in str(err) and "constant" in str(err)
    _raises(specux.ParameterError, "pad_mode", specux.stft, x, n_fft=N_FFT, pad_mode=None)


def test_pad_mode_aliases_work(x):
    for mode in ["constant", "reflect", "replicate", "edge", "circular", "REFLECT"]:
        assert specux.stft(x, n_fft=N_FFT, pad_mode=mode).shape == (2, 129, 63)


@pytest.mark.parametrize("value", ["bogus", "abs", "dB2", ""], ids=repr)
def test_unknown_output(value, x):
    err = _raises(ValueError, "output", specux.stft, x, n_fft=N_FFT, output=value)
    assert "magnitude" in str(err)
    _raises(specux.ParameterError, "output", specux.stft, x, n_fft=N_FFT, output=None)


@pytest.mark.parametrize("fn", ["fft", "rfft", "irfft", "fftn", "irfft2"])
def test_unknown_norm(fn, x):
    data = x + 0j if fn in ("irfft", "irfft2") else x
    err = _raises(ValueError, "norm", getattr(specux, fn), data, norm="bogus")
    assert "ortho" in str(err)
    _raises((ValueError, TypeError), "norm", getattr(specux, fn), data, norm=2)


@pytest.mark.parametrize(
    "eps, exc",
    [(0, ValueError), (0.0, ValueError), (-1e-10, ValueError), (float("nan"), ValueError),
     (float("inf"), ValueError), ("1e-10", specux.ParameterError), (None, specux.ParameterError)],
    ids=repr,
)  # fmt: skip
def test_eps(eps, exc, x):
    _raises(exc, "eps", specux.stft, x, n_fft=N_FFT, output="db", eps=eps)


# ---------------------------------------------------------------------------------------------
# dtypes and array types


@pytest.mark.parametrize("lib", LIBS)
def test_complex_input_to_stft(lib, x):
    z = x + 1j * x
    data = torch.from_numpy(z) if lib == "torch" else z
    _raises(TypeError, "real", specux.stft, data, n_fft=N_FFT)


@pytest.mark.parametrize("lib", LIBS)
def test_real_input_to_istft(lib, x):
    S = np.abs(specux.stft(x, n_fft=N_FFT))
    data = torch.from_numpy(S) if lib == "torch" else S
    _raises(TypeError, "complex", specux.istft, data, n_fft=N_FFT)


@pytest.mark.parametrize(
    "bad",
    [np.zeros((2, 1000), np.int32), np.zeros((2, 1000), bool), np.zeros((2, 1000), object)]
    + ([torch.zeros((2, 1000), dtype=torch.int64)] if torch is not None else []),
    ids=lambda b: f"{type(b).__module__}-{b.dtype}",
)  # fmt: skip
def test_bad_dtype(bad):
    _raises(TypeError, "dtype", specux.stft, bad, n_fft=N_FFT)


@pytest.mark.parametrize(
    "bad", [[0.0] * 1000, (0.0,) * 1000, 1.0, "signal", None, object()],
    ids=lambda b: type(b).__name__,
)
def test_not_an_array(bad):
    _raises(TypeError, "numpy.ndarray", specux.stft, bad, n_fft=N_FFT)
    _raises(TypeError, "numpy.ndarray", specux.istft, bad, n_fft=N_FFT)
    _raises(TypeError, "numpy.ndarray", specux.fft, bad)


# ---------------------------------------------------------------------------------------------
# istft


def test_istft_n_freq_inconsistent(x):
    S = specux.stft(x, n_fft=N_FFT)  # 129 bins
    err = _raises(ValueError, "n_fft", specux.istft, S, n_fft=512)
    assert "129" in str(err) and "257" in str(err)
    _raises(ValueError, "n_fft", specux.istft, S, n_fft=N_FFT, onesided=False)
    # n_fft 256 and 257 both have 129 bins onesided: 257 is consistent
    assert specux.istft(S, n_fft=257, hop_length=64).shape[0] == 2


def test_istft_one_bin_needs_n_fft(x):
    S = np.zeros((2, 1, 5), complex)  # 2 * (1 - 1) = 0
    _raises(ValueError, "n_fft", specux.istft, S)


@pytest.mark.parametrize("lib", LIBS)
def test_istft_zero_frames(lib):
    S = np.zeros((2, N_FFT // 2 + 1, 0), complex)
    data = torch.from_numpy(S) if lib == "torch" else S
    _raises(ValueError, "frames", specux.istft, data, n_fft=N_FFT)


def test_istft_needs_two_dims():
    _raises(ValueError, "S", specux.istft, np.zeros(129, complex), n_fft=N_FFT)


def test_istft_bad_length(x):
    S = specux.stft(x, n_fft=N_FFT)
    _raises(ValueError, "length", specux.istft, S, n_fft=N_FFT, length=-1)
    _raises(specux.ParameterError, "length", specux.istft, S, n_fft=N_FFT, length=100.0)


@pytest.mark.parametrize("lib", LIBS)
def test_istft_nola_center_false(lib, x):
    # hann is 0 at its first sample: with center=False the first output sample has no cover
    S = specux.stft(x, n_fft=N_FFT, center=False)
    data = torch.from_numpy(S) if lib == "torch" else S
    err = _raises(ValueError, "NOLA", specux.istft, data, n_fft=N_FFT, center=False)
    assert "center=True" in str(err)


def test_istft_nola_advice_fits_the_call():
    """The NOLA error's advice: center=True only where center is off; where only samples
    past the frames' natural end fail (a long ``length`` reaching the hann envelope's last,
    tiny samples at n_fft 2048), the longest length that works, which then does."""
    y = np.random.default_rng(0).standard_normal(22050)
    S = specux.stft(y, n_fft=2048, hop_length=512)
    natural = 512 * (S.shape[-1] - 1)
    err = _raises(ValueError, "NOLA", specux.istft, S, n_fft=2048, hop_length=512,
                  length=natural + 1024)  # fmt: skip
    assert "center=True" not in str(err)
    assert str(err).endswith(f"length of at most {natural + 1023}")
    assert specux.istft(S, n_fft=2048, hop_length=512, length=natural + 1023).shape == (
        natural + 1023,)
    err = _raises(ValueError, "NOLA", specux.istft, S, n_fft=2048, hop_length=2100)
    assert "center=True" not in str(err) and "length of at most" not in str(err)


@pytest.mark.parametrize("lib", LIBS)
def test_istft_nola_hop_larger_than_window(lib, x):
    S = specux.stft(x, n_fft=N_FFT, hop_length=N_FFT + 44)
    data = torch.from_numpy(S) if lib == "torch" else S
    _raises(ValueError, "NOLA", specux.istft, data, n_fft=N_FFT, hop_length=N_FFT + 44)
    # win_length < hop <= n_fft: the zero-padded window leaves gaps too
    S = specux.stft(x, n_fft=N_FFT, hop_length=160, win_length=128)
    _raises(ValueError, "NOLA", specux.istft, S, n_fft=N_FFT, hop_length=160, win_length=128)


def test_istft_boxcar_center_false_is_fine(x):
    S = specux.stft(x, n_fft=N_FFT, center=False, window="boxcar")
    out = specux.istft(S, n_fft=N_FFT, center=False, window="boxcar")
    assert np.all(np.isfinite(out))


# ---------------------------------------------------------------------------------------------
# backends


@pytest.mark.parametrize("backend", ["cuda", "metal"])
def test_torch_cpu_tensor_with_gpu_backend(backend, x):
    t = torch.from_numpy(x)
    err = _raises(specux.BackendUnavailableError, "backend", specux.stft, t, n_fft=N_FFT,
                  backend=backend)  # fmt: skip
    assert isinstance(err, RuntimeError)
    assert repr(backend) in str(err)
    S = specux.stft(t, n_fft=N_FFT)
    _raises(specux.BackendUnavailableError, "backend", specux.istft, S, n_fft=N_FFT,
            backend=backend)  # fmt: skip


@pytest.mark.parametrize("backend", ["cuda", "metal"])
def test_numpy_with_missing_gpu_backend(backend, x):
    reason = routing.backend_unavailable_reason(backend)
    if reason is None:
        pytest.skip(f"{backend} is available here")
    err = _raises(specux.BackendUnavailableError, "backend", specux.stft, x, n_fft=N_FFT,
                  backend=backend)  # fmt: skip
    assert reason in str(err)


def test_unknown_backend(x):
    err = _raises(ValueError, "backend", specux.stft, x, n_fft=N_FFT, backend="bogus")
    assert "'bogus'" in str(err)
    _raises(ValueError, "backend", specux.istft, specux.stft(x, n_fft=N_FFT), backend="tpu")


def test_backend_cpu_works(x):
    a = specux.stft(x, n_fft=N_FFT, backend="cpu")
    b = specux.stft(torch.from_numpy(x), n_fft=N_FFT, backend="cpu")
    np.testing.assert_array_equal(a, specux.stft(x, n_fft=N_FFT))
    assert isinstance(b, torch.Tensor) and b.shape == a.shape


# ---------------------------------------------------------------------------------------------
# NaN / Inf


def _frames_covering(index, length, n_fft, hop):
    """Mask over frames (center=True) whose span contains sample ``index``."""
    pad = n_fft // 2
    count = 1 + (length + 2 * pad - n_fft) // hop
    starts = np.arange(count) * hop - pad
    return (starts <= index) & (index < starts + n_fft)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_stft_nonfinite(bad, lib, x):
    y = x.copy()
    y[0, 1000] = bad
    data = torch.from_numpy(y) if lib == "torch" else y
    for output in ("complex", "magnitude", "power", "db"):
        out = specux.stft(data, n_fft=N_FFT, hop_length=64, output=output)
        out = out.numpy() if lib == "torch" else out
        hit = _frames_covering(1000, y.shape[-1], N_FFT, 64)
        assert not np.any(np.isfinite(out[0][:, hit])), output
        assert np.all(np.isfinite(out[0][:, ~hit])), output
        assert np.all(np.isfinite(out[1])), output  # other batch entries untouched
        if bad is np.nan:
            assert np.all(np.isnan(out[0][:, hit])), output


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("fn", ["fft", "rfft", "ifft", "fft2"])
def test_fft_nonfinite(fn, bad, lib, rng):
    y = rng.standard_normal((3, 8, 16))
    y[1, 2, 5] = bad
    data = torch.from_numpy(y) if lib == "torch" else y
    out = getattr(specux, fn)(data)
    out = out.resolve_conj().numpy() if lib == "torch" else out
    if fn == "fft2":
        assert not np.any(np.isfinite(out[1]))
    else:
        assert not np.any(np.isfinite(out[1, 2]))
        assert np.all(np.isfinite(np.delete(out[1], 2, axis=0)))
    assert np.all(np.isfinite(out[0])) and np.all(np.isfinite(out[2]))
    if bad is np.nan:
        assert np.all(np.isnan(out[1] if fn == "fft2" else out[1, 2]))


@pytest.mark.parametrize("lib", LIBS)
def test_cqt_nonfinite_without_numpy_warnings(lib, x):
    """An inf sample in a cqt (forward and, on torch, backward) gives non-finite bins where
    its frames reach, as the FFT paths do, and no numpy RuntimeWarning (inf * 0 in the
    products; the FFT paths raise none either)."""
    import warnings

    y = x.copy()
    y[0, 2000] = np.inf
    data = torch.from_numpy(y).requires_grad_(True) if lib == "torch" else y
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = specux.cqt(data, sr=8000, fmin=100, n_bins=24)
        if lib == "torch":
            out.abs().sum().backward()
            out = out.detach().numpy()
    assert not np.all(np.isfinite(out[0])) and np.all(np.isfinite(out[1]))


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_estimated_tuning_of_a_meta_tensor_names_tuning():
    """tuning=None reads the signal's values: on a meta tensor (no values) the error says
    that tuning=None is the cause and to pass a number."""
    x = torch.empty(4000, device="meta")
    for call in (lambda: specux.cqt(x, sr=8000, fmin=100, n_bins=24, tuning=None),
                 lambda: specux.chroma(x, sr=8000, tuning=None)):  # fmt: skip
        _raises(specux.BackendUnavailableError, r"tuning=None .* pass tuning=", call)


# ---------------------------------------------------------------------------------------------
# empty leading axes


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("lead", [(0,), (2, 0), (0, 3)], ids=str)
def test_stft_istft_empty_leading(lead, lib):
    length = 1000
    n_frames = 1 + length // (N_FFT // 4)
    z = np.zeros(lead + (length,), np.float32)
    data = torch.from_numpy(z) if lib == "torch" else z
    S = specux.stft(data, n_fft=N_FFT)
    assert tuple(S.shape) == lead + (N_FFT // 2 + 1, n_frames)
    assert "complex64" in str(S.dtype)
    for output in ("magnitude", "db"):
        assert tuple(specux.stft(data, n_fft=N_FFT, output=output).shape) == tuple(S.shape)
    y = specux.istft(S, n_fft=N_FFT)
    assert tuple(y.shape) == lead + ((n_frames - 1) * (N_FFT // 4),)
    assert "float32" in str(y.dtype)
    y = specux.istft(S, n_fft=N_FFT, length=length)
    assert tuple(y.shape) == lead + (length,)


# ---------------------------------------------------------------------------------------------
# import without torch


def test_import_without_torch(tmp_path):
    script = textwrap.dedent(
        """
        import sys

        class BlockTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError(f"{name} is blocked for this test")
                return None

        sys.meta_path.insert(0, BlockTorch())
        import numpy as np
        import specux

        assert "torch" not in sys.modules
        x = np.random.default_rng(0).standard_normal((2, 4000))
        S = specux.stft(x, n_fft=256)
        assert S.shape == (2, 129, 63) and S.dtype == np.complex128
        y = specux.istft(S, n_fft=256, length=4000)
        assert np.max(np.abs(y - x)) / np.max(np.abs(x)) <= ROUNDTRIP64
        assert specux.rfft(x).shape == (2, 2001)
        assert specux.is_deterministic() in (True, False)
        try:
            specux.nn
        except AttributeError as error:  # names what it needs
            assert "needs torch" in str(error), error
        else:
            raise AssertionError("specux.nn without torch")
        assert not hasattr(specux, "nn") and not hasattr(specux, "no_such_name")
        for statement, needs in (("from specux import nn", "specux.nn"),
                                 ("import specux.nn", "specux.nn"),
                                 ("from specux.presets import torchaudio",
                                  "specux.presets.torchaudio")):  # fmt: skip
            try:
                exec(statement)
            except ImportError as error:  # names the module and what works without
                assert needs in str(error) and "needs torch" in str(error), error
                assert error.name == "torch"
            else:
                raise AssertionError(statement + " without torch")
        from specux.presets import librosa as sl  # works without torch

        assert sl.stft(x, n_fft=256).shape == (2, 129, 63)
        assert "torch" not in sys.modules
        print("OK")
        """
    )
    path = tmp_path / "no_torch.py"
    path.write_text(f"ROUNDTRIP64 = {TOLERANCES['roundtrip64']!r}\n" + script)
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("SPECUX_DETERMINISTIC", None)
    done = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("OK")


# ---------------------------------------------------------------------------------------------
# deterministic mode


def test_absurdly_large_integers_are_out_of_range(x):
    """Integer parameters past 2**48 raise ValueError naming them (they were OverflowErrors
    from numpy's strides, or "pad_width must be of integral type")."""
    for f, kw in ((specux.stft, dict(n_fft=256, hop_length=2**60)),
                  (specux.fft, dict(n=10**30)),
                  (specux.melspectrogram, dict(sr=16000, hop_length=2**60)),
                  (specux.cqt, dict(sr=16000, hop_length=2**50))):  # fmt: skip
        name = next(iter(k for k in kw if k in ("hop_length", "n")))
        _raises(ValueError, rf"{name}=\d+ is out of range: must be within \+-2\*\*48", f, x,
                **kw)  # fmt: skip


# the route decision itself (conftest pins numpy inputs to the CPU in every unmarked test)
_NUMPY_RUNS_ON_CUDA = specux.transport.numpy_runs_on_cuda


def test_numpy_on_a_machine_whose_gpu_cannot_run_warns_once(monkeypatch):
    """A driver but no usable CUDA backend (e.g. no NVRTC): numpy inputs under
    backend="auto" run on the CPU, as seed-backends says, but not silently: one warning
    a reason. backend="cpu" asks for the CPU and does not warn."""
    import warnings

    import specux.transport as transport
    from specux import routing

    monkeypatch.setattr(transport, "numpy_runs_on_cuda", _NUMPY_RUNS_ON_CUDA)
    monkeypatch.setattr(routing, "cuda_driver_reason", lambda: None)
    reason = routing.backend_unavailable_reason
    monkeypatch.setattr(routing, "backend_unavailable_reason", lambda backend, family=None: (
        "NVRTC was not found (test)" if backend == "cuda" else reason(backend, family)))
    transport._warn_numpy_on_cpu.cache_clear()
    x = np.random.default_rng(0).standard_normal(2000)
    with pytest.warns(UserWarning, match=r"CUDA backend cannot run \(NVRTC was not found"):
        first = specux.stft(x, n_fft=256)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = specux.stft(x, n_fft=256)
        explicit = specux.stft(x, n_fft=256, backend="cpu")
    assert isinstance(first, np.ndarray) and np.array_equal(first, again)
    assert np.array_equal(first, explicit)
    transport._warn_numpy_on_cpu.cache_clear()


def test_environment_switches_read_on_and_off_spellings(monkeypatch):
    """SPECUX_DETERMINISTIC / _TENSOR_CORES / _DISK_CACHE: 1 / true / yes / on and
    0 / false / no / off in any case; unset or empty is the default; another value warns
    and keeps the default (SPECUX_DETERMINISTIC=false once turned the mode on)."""
    from specux import options

    for value, expected in (("1", True), ("TRUE", True), (" yes ", True), ("On", True),
                            ("0", False), ("false", False), ("No", False), ("off", False)):
        monkeypatch.setenv("SPECUX_X", value)
        assert options.env_flag("SPECUX_X", not expected) is expected, value
    for default in (True, False):
        monkeypatch.setenv("SPECUX_X", "")
        assert options.env_flag("SPECUX_X", default) is default
        monkeypatch.delenv("SPECUX_X")
        assert options.env_flag("SPECUX_X", default) is default
        monkeypatch.setenv("SPECUX_X", "maybe")
        with pytest.warns(UserWarning, match="SPECUX_X='maybe' is not an on / off value"):
            assert options.env_flag("SPECUX_X", default) is default
    monkeypatch.setenv("SPECUX_DISK_CACHE", "false")
    monkeypatch.setenv("SPECUX_TENSOR_CORES", "off")
    assert not options.disk_cache_enabled() and not options.tensor_cores_enabled()
    script = "import specux.options as o; print(o.is_deterministic())"
    env = dict(os.environ, SPECUX_DETERMINISTIC="false")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr


@pytest.fixture
def restore_determinism():
    from specux import options

    ours = options._deterministic
    if torch is None:
        yield
        specux.deterministic(ours)
        return
    torch_on = torch.are_deterministic_algorithms_enabled()
    torch_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    yield
    torch.use_deterministic_algorithms(torch_on, warn_only=torch_warn)
    specux.deterministic(ours)


def test_deterministic_setter(restore_determinism):
    torch.use_deterministic_algorithms(False)
    specux.deterministic(False)
    assert specux.is_deterministic() is False
    specux.deterministic(True)
    assert specux.is_deterministic() is True
    specux.deterministic(False)
    assert specux.is_deterministic() is False


def test_deterministic_context_manager(restore_determinism):
    torch.use_deterministic_algorithms(False)
    specux.deterministic(False)
    with specux.deterministic(True):
        assert specux.is_deterministic() is True
        with specux.deterministic(False):
            assert specux.is_deterministic() is False
        assert specux.is_deterministic() is True
    assert specux.is_deterministic() is False
    specux.deterministic(True)
    with specux.deterministic(False):
        assert specux.is_deterministic() is False
    assert specux.is_deterministic() is True


def test_deterministic_restored_after_exception(restore_determinism):
    specux.deterministic(False)
    torch.use_deterministic_algorithms(False)
    with pytest.raises(RuntimeError):
        with specux.deterministic(True):
            raise RuntimeError("boom")
    assert specux.is_deterministic() is False


def test_torch_deterministic_turns_it_on(restore_determinism):
    specux.deterministic(False)
    torch.use_deterministic_algorithms(False)
    assert specux.is_deterministic() is False
    torch.use_deterministic_algorithms(True)
    assert specux.is_deterministic() is True
    torch.use_deterministic_algorithms(False)
    assert specux.is_deterministic() is False


def test_deterministic_flag_type(restore_determinism):
    with pytest.raises(TypeError, match="flag"):
        specux.deterministic(1)
    with pytest.raises(TypeError, match="flag"):
        specux.deterministic("yes")
    specux.deterministic(np.True_)  # numpy booleans are booleans
    assert specux.is_deterministic() is True


def test_istft_nonfinite(x):
    S = specux.stft(x[0], n_fft=N_FFT)
    S[3, 10] = np.nan
    y = specux.istft(S, n_fft=N_FFT)
    hop = N_FFT // 4
    start = 10 * hop - N_FFT // 2  # frame 10 covers [start, start + n_fft) of the output
    # the FFT library may skip products with exact-zero twiddles, so not every sample of the
    # frame need be NaN (scipy / numpy leave 2 of 256 finite here); outside it all is finite
    assert np.any(np.isnan(y[start : start + N_FFT]))
    assert np.all(np.isfinite(y[: start])) and np.all(np.isfinite(y[start + N_FFT :]))


def test_cupy_arrays_raise_a_clear_error(monkeypatch):
    """A cupy array (faked: no cupy here) is refused with BackendUnavailableError, not a
    KeyError from inside specux."""
    import sys
    import types

    fake = types.ModuleType("cupy")

    class ndarray:  # noqa: N801 - cupy's name
        shape = (4, 100)
        dtype = np.dtype(np.float32)

    fake.ndarray = ndarray
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with pytest.raises(specux.BackendUnavailableError, match="cupy"):
        specux.fft(ndarray())


def test_numpy_chroma_tuning_estimate_stays_on_the_host(monkeypatch):
    """On a CUDA machine numpy inputs run on the GPU, except a call that reads its data back
    to the host (chroma's tuning estimate): it stays on the CPU instead of raising."""
    import specux.transport as transport

    monkeypatch.setattr(transport, "numpy_runs_on_cuda", lambda backend: True)
    staged = []
    # either route (through torch, or torch-free) would stage it
    monkeypatch.setattr(transport, "_through_torch", lambda *a: staged.append(a) or "staged")
    monkeypatch.setattr(transport, "_through_native", lambda *a: staged.append(a) or "staged")
    x = np.random.default_rng(0).standard_normal(8000).astype(np.float32)
    estimated = specux.chroma(x, sr=16000, tuning=None)
    assert isinstance(estimated, np.ndarray) and not staged
    assert specux.chroma(x, sr=16000) == "staged" and len(staged) == 1


# ---------------------------------------------------------------------------------------------
# feature and FFT-family parameters: the message names the caller's own parameters


def test_cepstrum_sizes_name_the_callers_parameters(x):
    _raises(ValueError, r"n_mfcc=40 is out of range: .*20 input bands \(n_mels=20\)",
            specux.mfcc, x, sr=16000, n_fft=512, n_mels=20, n_mfcc=40)  # fmt: skip
    _raises(ValueError, r"n_lfcc=50 is out of range: .*40 input bands \(n_filter=40\)",
            specux.lfcc, x, sr=16000, n_fft=512, n_filter=40, n_lfcc=50)  # fmt: skip
    _raises(ValueError, r"n_mels=1 is out of range: dct_type=1 needs at least 2 bands",
            specux.mfcc, x, sr=16000, n_fft=512, n_mels=1, n_mfcc=1, dct_type=1)  # fmt: skip
    _raises(ValueError, r"n_filter=1 is out of range: dct_type=1 needs at least 2 bands",
            specux.lfcc, x, sr=16000, n_fft=512, n_filter=1, n_lfcc=1, dct_type=1)  # fmt: skip
    _raises(ValueError, r"dct_type=5 is not supported: use 1, 2, 3 or 4",
            specux.mfcc, x, sr=16000, n_fft=512, dct_type=5)  # fmt: skip
    _raises(ValueError, r"norm='unitary' is not supported for the DCT",
            specux.lfcc, x, sr=16000, n_fft=512, norm="unitary")  # fmt: skip
    if torch is not None:
        from specux import nn

        _raises(ValueError, r"n_lfcc=50 .*\(n_filter=40\)", nn.LFCC, sr=16000, n_fft=512,
                n_filter=40, n_lfcc=50)  # fmt: skip


def test_chroma_cqt_parameters_are_named_and_never_replaced(x):
    # fmin=0 was once replaced by the default C1 (an `or`); cqt_norm's error said `norm`
    for fmin in (0, 0.0, -5.0):
        _raises(ValueError, rf"fmin={float(fmin)} is out of range: must be > 0",
                specux.chroma, x, sr=16000, source="cqt", fmin=fmin)  # fmt: skip
    _raises(ValueError, r"cqt_norm=-1 is out of range: use None, np.inf, -np.inf, 0 or a real "
            r"p > 0", specux.chroma, x, sr=16000, source="cqt", cqt_norm=-1)  # fmt: skip
    _raises(specux.ParameterError, r"cqt_norm must be a real number",
            specux.chroma, x, sr=16000, source="cqt", cqt_norm="l2")  # fmt: skip
    # n_fft belongs to the stft source: given to the cqt source it would be ignored
    _raises(ValueError, r"n_fft=1024 is a parameter of chroma\(source='stft'\) only",
            specux.chroma, x, sr=16000, source="cqt", n_fft=1024)  # fmt: skip
    _raises(ValueError, r"n_fft=1024 is a parameter of chroma\(source='stft'\) only",
            specux.Chroma, sr=16000, source="cqt", n_fft=1024)  # fmt: skip
    assert specux.chroma(x, sr=16000, source="cqt", n_fft=np.int64(2048)).shape == (
        specux.chroma(x, sr=16000, source="cqt").shape)


def test_nd_transform_of_too_few_dimensions(x):
    """The default axes outside the input: an AxisError, so a ValueError and (as numpy.fft
    and torch.fft raise) an IndexError."""
    _raises(specux.AxisError, r"x has 1 dimension\(s\): this transform needs at least 2",
            specux.fft2, x[0])  # fmt: skip
    _raises(specux.AxisError, r"s=\(2, 2, 2\) has more entries than x has dimensions \(2\)",
            specux.fftn, x, s=(2, 2, 2))  # fmt: skip
    _raises(specux.AxisError, r"x has 0 dimensions: this transform needs at least 1",
            specux.rfft, np.array(1.0))  # fmt: skip
    for fn in (specux.rfft2, specux.irfft2, specux.ifft2):
        with pytest.raises(IndexError, match="this transform needs at least 2"):
            fn(x[0] if fn is specux.rfft2 else x[0].astype(np.complex128))


def test_fftconvolve_dim_from_the_front():
    """A dim counted from the front is ambiguous for inputs of different dimensions (the
    advice: a negative dim); one past both inputs' axes is out of range, as it says."""
    _raises(ValueError, r"dim=0 counts from the front, which is ambiguous for inputs of 2 and 1",
            specux.fftconvolve, np.ones((2, 10)), np.ones(5), dim=0)  # fmt: skip
    _raises(ValueError, r"dim=2 counts from the front",
            specux.fftconvolve, np.ones((3, 2, 10)), np.ones(5), dim=2)  # fmt: skip
    _raises(ValueError, r"dim=2 is out of range for an input with 2 dimensions",
            specux.fftconvolve, np.ones((2, 10)), np.ones(5), dim=2)  # fmt: skip
    assert specux.fftconvolve(np.ones((2, 10)), np.ones((2, 5)), dim=1).shape == (2, 14)


def test_fftconvolve_other_axes_must_broadcast():
    _raises(ValueError, r"broadcast along the axes other than dim=-1: x has \(3,\), y has \(2,\)",
            specux.fftconvolve, np.ones((3, 10)), np.ones((2, 5)))  # fmt: skip
    _raises(ValueError, r"dim=-2: x has \(2, 3\), y has \(4,\)",
            specux.fftconvolve, np.ones((2, 10, 3)), np.ones((5, 4)), dim=-2)  # fmt: skip


@pytest.mark.parametrize("bad", [None, [0.0, 1.0], "abc"])
def test_librosa_preset_signals_and_spectrograms_are_checked(bad):
    from specux.presets import librosa as sl

    for name in ("stft", "melspectrogram", "mfcc", "chroma_stft", "cqt", "vqt"):
        _raises(TypeError, r"^y must be a numpy.ndarray, torch.Tensor or cupy.ndarray",
                getattr(sl, name), bad)  # fmt: skip
    if not isinstance(bad, list):  # librosa's dB conversions take array-likes
        for name in ("power_to_db", "amplitude_to_db"):
            _raises(TypeError, r"^S must be a numeric array", getattr(sl, name), bad)


@pytest.mark.parametrize("fn", ["fft2", "ifft2", "rfft2", "irfft2"])
def test_2d_transform_sizes_must_match_its_two_axes(fn, x):
    """fft2 and its kin transform the last two axes whatever ``s`` holds: an ``s`` of one
    entry raises (as numpy's and torch's do) instead of transforming the last axis alone."""
    _raises(ValueError, r"s=\(4,\) and dim=\(0, 1\) must have the same length",
            getattr(specux, fn), x, s=(4,))  # fmt: skip
    assert getattr(specux, fn)(x, s=(2, 8)).shape[0] == 2


@pytest.mark.parametrize("value", ["False", 1, None])
def test_htk_and_base_c_are_booleans(value, x):
    """htk / base_c are checked like the other flags (``htk="False"`` once meant HTK)."""
    _raises(specux.ParameterError, "htk", specux.melspectrogram, x, sr=16000, n_fft=N_FFT,
            htk=value)  # fmt: skip
    _raises(specux.ParameterError, "htk", specux.filters.mel, sr=16000, n_fft=N_FFT, htk=value)
    _raises(specux.ParameterError, "htk", specux.filters.hz_to_mel, 440.0, htk=value)
    _raises(specux.ParameterError, "htk", specux.filters.mel_to_hz, 10.0, htk=value)
    _raises(specux.ParameterError, "base_c", specux.chroma, x, sr=16000, n_fft=N_FFT,
            base_c=value)  # fmt: skip
    _raises(specux.ParameterError, "base_c", specux.filters.cq_to_chroma, 84, base_c=value)


def test_filters_import_under_their_public_name():
    # API.md's `specux.filters` is importable as a module too, the same one
    import specux.filters
    from specux.filters import mel

    assert specux.filters is sys.modules["specux.filters"]
    assert mel is specux.filters.mel is specux.meta.filters.mel


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_cpu_ops_refuse_half_tensors_by_name():
    # The public functions widen half inputs on the CPU before an op runs; a direct op call
    # with one gets a TypeError naming the argument, not numpy's "complex32 not understood".
    x = torch.randn(2, 600)
    _raises(TypeError, r"specux::r2c on the CPU takes float32 / float64 tensors, got x of "
            r"dtype torch.float16", torch.ops.specux.r2c, x.half(), [-1], "backward")  # fmt: skip
    _raises(TypeError, r"specux::stft on the CPU .* got window of dtype torch.bfloat16",
            torch.ops.specux.stft, x, torch.ones(256, dtype=torch.bfloat16), "array", 256, 64,
            256, True, "constant", False, True, "power", 1e-10)  # fmt: skip
    assert specux.rfft(x.half()).dtype == torch.complex32  # the function: the storage rule


def test_top_db_needs_db_output():
    # API.md: top_db clips dB values; with power output it is refused, naming both values
    x = np.zeros((2, 4000))
    _raises(ValueError, r"top_db=80.0 is a dB range: it needs output='db', got output='power'",
            specux.melspectrogram, x, sr=16000, top_db=80.0)  # fmt: skip
    assert specux.melspectrogram(x, sr=16000, top_db=80.0, output="db").shape == (2, 128, 8)


def test_chroma_cqt_nyquist_error_names_n_octaves():
    # the CQT's Nyquist check names its n_bins; chroma(source="cqt") takes n_octaves
    _raises(ValueError, r"exceed the Nyquist.*n_bins = n_octaves \* bins_per_octave = 9 \* 36: "
            r"reduce n_octaves=9", specux.chroma, np.zeros(22050), sr=22050, source="cqt",
            n_octaves=9)  # fmt: skip


@pytest.mark.parametrize("call, name", [
    (lambda x: specux.stft(x, n_fft=2**45), "n_fft"),
    (lambda x: specux.STFT(n_fft=2**45), "n_fft"),
    (lambda x: specux.fft(x, n=2**45), "n"),
    (lambda x: specux.fftn(x, s=(2**45,)), "s"),
    (lambda x: specux.rfftn(x[None].repeat(4, 0), s=(2**23, 2**23)), "s"),
    (lambda x: specux.istft(specux.stft(x, n_fft=64), n_fft=64, length=2**45), "length"),
    # the overlap-add spans every frame whatever the length (it took 126 GiB there)
    (lambda x: specux.istft(specux.stft(x, n_fft=64), n_fft=64, hop_length=2**40), "hop_length"),
    (lambda x: specux.istft(specux.stft(x, n_fft=64), n_fft=64, hop_length=2**28, length=100),
     "hop_length"),
    (lambda x: specux.melspectrogram(x, sr=22050, n_mels=2**36), "n_mels"),
    (lambda x: specux.filters.mel(sr=22050, n_fft=2048, n_mels=2**30), "n_mels"),
    (lambda x: specux.lfcc(x, sr=22050, n_filter=2**40), "n_filter"),
    (lambda x: specux.chroma(x, sr=22050, n_chroma=2**40), "n_chroma"),
    (lambda x: specux.filters.dct(2**22, 2**22), "n_filters"),
    (lambda x: specux.get_window("hann", 2**45), "n"),
])  # fmt: skip
def test_sizes_past_the_machines_memory_are_refused_by_name(call, name):
    # The brief: never a MemoryError (or the kernel's OOM killer) from a silly allocation.
    # A size whose array would exceed 1/8 of physical memory is a ValueError naming it,
    # raised before anything is allocated (an n_mels=10**6 mel bank got the process killed).
    x = np.zeros(1000)
    _raises(ValueError, rf"{name}=.* is out of range: .* would take .*; specux refuses arrays "
            r"above 1/8 of this machine's", call, x)  # fmt: skip


def test_the_memory_bound_follows_the_machine(monkeypatch):
    from specux.meta import params

    monkeypatch.setattr(params, "HOST_MEMORY", 2**30)  # a 1 GiB machine: 128 MiB an array
    _raises(ValueError, r"n_fft=33554432 is out of range: the n_fft-sample window would take "
            r"256.0 MiB; specux refuses arrays above 1/8 of this machine's 1.0 GiB of memory",
            specux.stft, np.zeros(1000), n_fft=2**25)  # fmt: skip
    assert specux.stft(np.zeros(1000), n_fft=2**12).shape == (2049, 1)
    # cqt's bank: 12 filters of up to ~7.6 million taps at fmin=0.05 (1.4 GB of complex128)
    _raises(ValueError, r"fmin=0.05 is out of range: the 12 filters of up to \d+ taps that "
            r"fmin, bins_per_octave and filter_scale ask for would take", specux.cqt,
            np.zeros(1000), sr=22050, fmin=0.05, n_bins=12)  # fmt: skip
    monkeypatch.setattr(params, "HOST_MEMORY", None)  # the OS did not say: no bound
    assert specux.get_window("hann", 2**21).shape == (2**21,)


def test_cqt_nyquist_is_checked_before_the_centres_overflow():
    # n_bins=10**6 overflowed the centre frequencies (a NaN cutoff skipped the Nyquist
    # check, and the error spoke of "filters of nan samples")
    _raises(ValueError, r"Wavelet basis with max frequency=inf would exceed the Nyquist "
            r"frequency=11025.0: reduce fmin=.* or n_bins=1000000", specux.cqt, np.zeros(1000),
            sr=22050, n_bins=10**6)  # fmt: skip


def test_cached_filters_cannot_be_made_writeable():
    # The filters are the caches' own arrays: a writeable flag set back on poisoned every
    # later call (a zeroed mel bank, a zeroed cqt)
    q, lengths = specux.filters.constant_q(sr=22050, fmin=100.0, n_bins=12)
    for a in (specux.filters.mel(sr=22050, n_fft=512, n_mels=40), q, lengths,
              specux.filters.chroma(sr=22050, n_fft=512), specux.filters.dct(20, 40),
              specux.filters.linear(sr=16000, n_fft=512, n_filter=20)):  # fmt: skip
        with pytest.raises(ValueError, match="cannot set WRITEABLE flag"):
            a.flags.writeable = True
        with pytest.raises(ValueError, match="read-only"):
            a[0] = 1.0


def test_a_non_positive_fmax_is_named():
    # fmax=0 or -0.0 was reported as fmin's fault ("fmin=0.0 ... < fmax = -0.0")
    for fmax in (0.0, -0.0, -100.0):
        _raises(ValueError, rf"fmax={fmax} is out of range: must satisfy fmin < fmax <= sr/2",
                specux.melspectrogram, np.zeros(1000), sr=16000, fmax=fmax)  # fmt: skip


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_sparse_tensors_are_refused_by_name():
    _raises(TypeError, r"x is a torch tensor of layout torch.sparse_coo: specux takes dense",
            specux.stft, torch.zeros(2, 1000).to_sparse(), n_fft=64)  # fmt: skip
    _raises(TypeError, r"y is a torch tensor of layout torch.sparse_coo",
            specux.fftconvolve, torch.zeros(2, 100), torch.zeros(2, 10).to_sparse())  # fmt: skip
