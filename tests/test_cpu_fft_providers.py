"""The CPU backend's FFT providers (mkl_fft, scipy.fft, numpy.fft): each one, forced, gives the
reference transform; the choice is explicit and a bad choice is an error, never a substitute."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from tolerances import TOLERANCES, float32_bound, rel_l2, rel_peak

import specux
from specux.kernels.cpu import fft as cpu_fft

INSTALLED = [p for p in cpu_fft.PROVIDERS if cpu_fft._AVAILABLE[p]]


@pytest.fixture(params=cpu_fft.PROVIDERS)
def provider(request):
    name = request.param
    if name not in INSTALLED:
        pytest.skip(f"{name} is not installed here")
    previous = cpu_fft.set_provider(name)
    yield name
    cpu_fft.set_provider(previous)


def _check(actual, expected64, expected32=None):
    if expected32 is None:
        assert rel_l2(actual, expected64) <= TOLERANCES["float64"]
    else:
        assert rel_l2(actual, expected64) <= float32_bound(rel_l2(expected32, expected64))


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 7, 64, 1000, 1024, 4099])
def test_each_provider_matches_numpy_in_float64(provider, precision, n, rng):
    x = rng.standard_normal((3, n)).astype(precision)
    z = (rng.standard_normal((3, n)) + 1j * rng.standard_normal((3, n))).astype(
        cpu_fft.complex_dtype(x.dtype))
    half = z[:, : n // 2 + 1]
    x64, z64, half64 = x.astype(np.float64), z.astype(np.complex128), half.astype(np.complex128)
    f32 = precision == "float32"
    cases = [
        (cpu_fft.r2c(x, [-1], "ortho"), np.fft.rfft(x64, norm="ortho"),
         np.fft.rfft(x, norm="ortho") if f32 else None),
        (cpu_fft.c2c(z, [-1], True, "backward"), np.fft.fft(z64),
         np.fft.fft(z) if f32 else None),
        (cpu_fft.c2c(z, [-1], False, "forward"), np.fft.ifft(z64, norm="forward"),
         np.fft.ifft(z, norm="forward") if f32 else None),
        (cpu_fft.c2r(half, [-1], n, "backward"), np.fft.irfft(half64, n=n),
         np.fft.irfft(half, n=n) if f32 else None),
    ]  # fmt: skip
    for actual, expected64, expected32 in cases:
        assert actual.dtype in (x.dtype, cpu_fft.complex_dtype(x.dtype))
        _check(actual, expected64, expected32)


@pytest.mark.parametrize("real", [True, False])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_forward_into_writes_the_transform_into_the_given_rows(provider, real, norm, rng):
    x = rng.standard_normal((5, 512)).astype(np.float64)
    if not real:
        x = x + 1j * rng.standard_normal((5, 512))
    out = np.full((9, 257 if real else 512), np.nan, dtype=np.complex128)
    cpu_fft.forward_into(x, out[2:7], norm, real)
    expected = (np.fft.rfft if real else np.fft.fft)(x, norm=norm)
    assert rel_l2(out[2:7], expected) <= TOLERANCES["float64"]
    assert np.isnan(out[:2]).all() and np.isnan(out[7:]).all()  # nothing else written


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_large_batches_split_over_the_pool_and_nested_calls(provider, norm, rng):
    # Enough rows that the MKL path transforms blocks of rows on the worker threads; the same
    # call made from a worker thread runs inline (a worker never waits on its own pool).
    x = rng.standard_normal((2, 150, 1000))
    z = x[:, :, :501] + 1j * x[:, :, 499:]
    cases = [
        (lambda: cpu_fft.r2c(x, [-1], norm), np.fft.rfft(x, norm=norm)),
        (lambda: cpu_fft.c2c(z, [-1], False, norm), np.fft.ifft(z, norm=norm)),
        (lambda: cpu_fft.c2r(z, [-1], 1000, norm), np.fft.irfft(z, n=1000, norm=norm)),
    ]
    for run, expected in cases:
        assert rel_l2(run(), expected) <= TOLERANCES["float64"]
        nested = cpu_fft.executor().submit(run).result(timeout=60)
        assert rel_l2(nested, expected) <= TOLERANCES["float64"]


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("n", [8318, 11000])
def test_single_transforms_and_one_row_blocks(provider, precision, n, rng):
    # oneMKL's single transforms were off by up to 6 % of the peak (float32 c2r of even
    # lengths from about 8200 up): one row alone, a (n, 1) column over axis 0, a batch whose
    # pool split could leave a block of one row, and the one-row forward_into
    real = np.dtype(precision)
    x = rng.standard_normal((3, n * 8)).astype(real)[:, ::8]  # strided rows
    half = np.fft.rfft(x.astype(np.float64))
    z = (half[:, :-1] + 1j * rng.standard_normal(half[:, :-1].shape))
    zc = z.astype(cpu_fft.complex_dtype(real))
    hc = half.astype(zc.dtype)
    f32 = precision == "float32"

    def check(actual, expected64, expected32):
        _check(actual, expected64, expected32 if f32 else None)

    for rows in (slice(0, 1), slice(0, 3)):
        check(cpu_fft.c2r(hc[rows], [-1], n, "backward"), np.fft.irfft(half[rows], n=n),
              np.fft.irfft(hc[rows], n=n))  # fmt: skip
        check(cpu_fft.r2c(x[rows], [-1], "ortho"), np.fft.rfft(x[rows].astype(np.float64),
              norm="ortho"), np.fft.rfft(x[rows], norm="ortho"))  # fmt: skip
        check(cpu_fft.c2c(zc[rows], [-1], False, "forward"), np.fft.ifft(
            z[rows], norm="forward"), np.fft.ifft(zc[rows], norm="forward"))  # fmt: skip
    check(cpu_fft.c2r(hc[:1].T, [0], n, "backward"), np.fft.irfft(half[:1].T, n=n, axis=0),
          np.fft.irfft(hc[:1].T, n=n, axis=0))  # fmt: skip
    out = np.empty((1, n // 2 + 1), dtype=zc.dtype)
    cpu_fft.forward_into(np.ascontiguousarray(x[:1]), out, "backward", True)
    check(out, np.fft.rfft(x[:1].astype(np.float64)), np.fft.rfft(x[:1]))
    # three long rows: the pool's blocks hold two rows or more, each row right
    long = rng.standard_normal((3, 87404)).astype(real)
    spectrum = np.fft.rfft(long.astype(np.float64))
    check(cpu_fft.c2r(spectrum.astype(zc.dtype), [-1], 87404, "backward"), long,
          np.fft.irfft(spectrum.astype(zc.dtype), n=87404))  # fmt: skip


def test_long_transforms_stay_accurate(provider, rng):
    # oneMKL's batches of 2**20 float32 points had 26 times pocketfft's error (4.2e-6)
    n = 1 << 20
    x = rng.standard_normal((2, n)).astype(np.float32)
    spectrum = np.fft.rfft(x.astype(np.float64))
    _check(cpu_fft.r2c(x, [-1], "backward"), spectrum, np.fft.rfft(x))
    half = spectrum.astype(np.complex64)
    _check(cpu_fft.c2r(half, [-1], n, "backward"), np.fft.irfft(spectrum, n=n),
           np.fft.irfft(half, n=n))  # fmt: skip


def test_c2r_ignores_the_imaginary_parts_of_dc_and_nyquist(provider, rng):
    half = rng.standard_normal(9) + 1j * rng.standard_normal(9)
    clean = half.copy()
    clean[0], clean[-1] = clean[0].real, clean[-1].real
    bound = TOLERANCES["float64"]
    assert rel_l2(cpu_fft.c2r(half, [-1], 16, "backward"), np.fft.irfft(clean, n=16)) <= bound


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_multi_axis_transforms_over_some_axes(provider, norm, rng):
    # a subset of the axes, with every norm (pocketfft computes these for every provider:
    # mkl_fft 2.3 scaled them by the size of the whole array for "ortho" and "forward")
    x = rng.standard_normal((4, 6, 10))
    z = x + 1j * rng.standard_normal((4, 6, 10))
    bound = TOLERANCES["float64"]
    assert rel_l2(cpu_fft.r2c(x, [0, 2], norm), np.fft.rfftn(x, axes=(0, 2), norm=norm)) <= bound
    assert rel_l2(cpu_fft.c2c(z, [1], True, norm), np.fft.fft(z, axis=1, norm=norm)) <= bound
    assert rel_l2(cpu_fft.c2c(z, [0, 1], False, norm),
                  np.fft.ifftn(z, axes=(0, 1), norm=norm)) <= bound  # fmt: skip
    spectrum = np.fft.rfftn(x, axes=(0, 2), norm=norm)
    assert rel_l2(cpu_fft.c2r(spectrum, [0, 2], 10, norm), x) <= TOLERANCES["roundtrip64"]


def test_noncontiguous_inputs(provider, rng):
    bound = TOLERANCES["float64"]
    y = rng.standard_normal((6, 128))[::2, ::3]
    assert rel_l2(cpu_fft.r2c(y, [-1], "ortho"), np.fft.rfft(y, norm="ortho")) <= bound
    z = y[:, :22] + 1j * y[:, 21::-1]
    assert rel_l2(cpu_fft.c2c(z, [-1], False, "ortho"), np.fft.ifft(z, norm="ortho")) <= bound
    # zero strides (an expanded gradient) and reversed rows
    b = np.broadcast_to(rng.standard_normal(40), (3, 40))
    assert rel_l2(cpu_fft.r2c(b, [-1], "backward"), np.fft.rfft(b)) <= bound
    assert rel_l2(cpu_fft.c2r(z[::-1], [-1], 42, "forward"),
                  np.fft.irfft(z[::-1], n=42, norm="forward")) <= bound  # fmt: skip


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_spectrograms_agree_across_providers(provider, precision, rng):
    # The framewise kernels (blocks on a thread pool, the FFT written into the result) under
    # each provider against the float64 result of the float64 reference provider (numpy).
    x = rng.standard_normal((3, 20000)).astype(precision)
    kw = dict(n_fft=512, hop_length=128)
    got = {
        "complex": specux.stft(x, **kw),
        "power": specux.stft(x, output="power", **kw),
        "mel": specux.melspectrogram(x, sr=16000, n_mels=40, **kw),
    }
    previous = cpu_fft.set_provider("numpy")
    try:
        x64 = x.astype(np.float64)
        want = {
            "complex": specux.stft(x64, **kw),
            "power": specux.stft(x64, output="power", **kw),
            "mel": specux.melspectrogram(x64, sr=16000, n_mels=40, **kw),
        }
    finally:
        cpu_fft.set_provider(previous)
    bound = TOLERANCES["float64"] if precision == "float64" else TOLERANCES["float32_peak"]
    for name in got:
        assert got[name].dtype == (cpu_fft.complex_dtype(x.dtype) if name == "complex" else x.dtype)
        assert rel_peak(got[name], want[name]) <= bound, name


def test_choose_provider_resolves_and_refuses():
    assert cpu_fft.choose_provider(None) == INSTALLED[0]
    assert cpu_fft.choose_provider("auto") == INSTALLED[0]
    assert cpu_fft.choose_provider(" NumPy ") == "numpy"  # case and spaces do not matter
    with pytest.raises(ValueError, match=r"SPECUX_CPU_FFT='fftw': expected one of auto, mkl"):
        cpu_fft.choose_provider("fftw")


def test_a_missing_provider_is_an_error_not_a_substitute(monkeypatch):
    monkeypatch.setitem(cpu_fft._AVAILABLE, "mkl", False)
    message = r"SPECUX_CPU_FFT='mkl': mkl_fft and mkl-service are not installed"
    with pytest.raises(ValueError, match=message):
        cpu_fft.choose_provider("mkl")
    assert cpu_fft.choose_provider("auto") != "mkl"


def _run(code: str, value: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, SPECUX_CPU_FFT=value)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)


def test_the_environment_variable_picks_the_provider_on_first_use():
    code = ("import numpy as np, specux\nfrom specux.kernels.cpu import fft\n"
            "specux.stft(np.ones(2048, np.float32))\nprint(fft.provider())")  # fmt: skip
    done = _run(code, "numpy")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "numpy"
    bad = _run(code, "fftw")
    assert bad.returncode != 0
    assert "SPECUX_CPU_FFT='fftw': expected one of auto, mkl, scipy, numpy" in bad.stderr
    # import alone does not read it, so `python -m specux info` can report the error
    assert _run("import specux", "fftw").returncode == 0


def test_a_rows_spectrum_does_not_depend_on_its_batch(provider, rng):
    # The framewise kernels transform blocks whose size and alignment vary; the CPU backend is
    # bitwise reproducible only if every provider gives a row the same bits in any batch.
    x = rng.standard_normal((64, 1024)).astype(np.float32)
    whole = np.empty((64, 513), np.complex64)
    cpu_fft.forward_into(x, whole, "backward", True)
    for start, stop in [(0, 1), (5, 8), (17, 30), (31, 64), (40, 42)]:
        part = np.empty((stop - start, 513), np.complex64)
        cpu_fft.forward_into(np.ascontiguousarray(x[start:stop]), part, "backward", True)
        assert np.array_equal(part, whole[start:stop]), (start, stop)


def test_single_threaded_blas_limits_and_restores():
    """The CPU kernels' GEMMs run with every BLAS library on one thread; the libraries'
    thread counts are what they were afterwards (and inside nested uses)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from specux.kernels.cpu import stft

    libraries = threadpoolctl.ThreadpoolController().select(user_api="blas").lib_controllers
    before = [lib.get_num_threads() for lib in libraries]
    with stft.single_threaded_blas():
        assert all(lib.get_num_threads() == 1 for lib in libraries)
        with stft.single_threaded_blas():
            assert all(lib.get_num_threads() == 1 for lib in libraries)
        assert all(lib.get_num_threads() == 1 for lib in libraries)
    assert [lib.get_num_threads() for lib in libraries] == before
