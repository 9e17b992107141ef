"""The torch-free CUDA route's engine without a GPU (issue 6): the public functions on
DeviceArrays of the host-emulation Device run the route's exact code (views, conversions,
elementwise kernels, launch sequences) on the emulated kernels, compared with the CPU backend.

The CUDA side of the same engine (cupy by pointer, numpy staged by the runtime) is tested on
a GPU in tests/test_routes_cuda.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tolerances import CQT_TOLERANCES, TOLERANCES, rel_peak

import specux
from specux import routing
from specux.compat.arrays import NATIVE, library_of
from specux.kernels import emulate, native, transform_exec
from specux.meta.params import StftParams, WindowSpec

if emulate.compiler() is None:
    pytest.skip("no C++ compiler for the host emulation", allow_module_level=True)

# the CPU backend's and the emulated kernels' results, relative to the output's peak
PEAK = {"float32": TOLERANCES["float32_peak"], "float64": TOLERANCES["float64_peak"]}


@pytest.fixture(autouse=True)
def _device_route(monkeypatch):
    """DeviceArrays route to the "cuda" backend; here its driver probe is skipped (the
    emulated Device launches on the host)."""
    monkeypatch.setattr(routing, "_cuda_reason", lambda: None)


def _on_device(fn, *arrays, **kwargs):
    """``fn`` on DeviceArray copies of ``arrays`` (numpy); the result read back as numpy."""
    device = emulate.HostDevice()

    def enter(a):
        if not isinstance(a, np.ndarray):
            return a
        if a.base is not None and a.ndim == 2 and a.strides[1] == 2 * a.itemsize:
            return device.upload(a.base).view(a.shape, (a.base.shape[1], 2))  # a[:, ::2]
        return device.upload(a)

    out = fn(*map(enter, arrays), **{k: enter(v) for k, v in kwargs.items()})
    assert library_of(out) == NATIVE
    return device.download(native.dense(out)), out.dtype


def _check(fn, *arrays, precision="float64", **kwargs):
    got, dtype = _on_device(fn, *arrays, **kwargs)
    ref = fn(*arrays, **kwargs)
    assert got.shape == ref.shape and dtype == ref.dtype.name, (got.shape, dtype, ref.dtype)
    assert rel_peak(got, ref) <= PEAK[precision], rel_peak(got, ref)
    return got, ref


def _signal(shape, dtype="float64", seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_convert_views_casts_pads_and_conjugates():
    device = emulate.HostDevice()
    x = (_signal((3, 5)) + 1j * _signal((3, 5), seed=1)).astype(np.complex128)
    a = device.upload(x)
    flipped = a.view((3, 5), (5, -1), offset=4)  # x[:, ::-1]
    got = device.download(native.convert(flipped.swapaxes(0, 1), "complex64", (7, 4),
                                         conj=True))  # fmt: skip
    ref = np.zeros((7, 4), np.complex64)
    ref[:5, :3] = np.conj(x[:, ::-1].T)
    assert np.array_equal(got, ref)
    half = device.download(native.convert(device.upload(_signal(9, "float16")), "float32"))
    assert np.array_equal(half, _signal(9, "float16").astype(np.float32))
    real = device.download(native.convert(a, "float32"))
    assert np.array_equal(real, x.real.astype(np.float32))


def test_convert_keeps_view_tables(monkeypatch):
    """A repeated conversion uploads nothing (its view's geometry table is kept per device);
    past the bound, tables are uploaded per call and the results stay right."""
    device = emulate.HostDevice()
    x = device.upload(_signal((4, 6)))
    uploads = []
    copy_in = device.copy_in
    monkeypatch.setattr(device, "copy_in", lambda ptr, host: (uploads.append(host.nbytes),
                                                               copy_in(ptr, host)))  # fmt: skip
    first = device.download(native.convert(x.swapaxes(0, 1), "float64"))
    assert len(uploads) == 1  # the table, once
    again = device.download(native.convert(x.swapaxes(0, 1), "float64"))
    assert len(uploads) == 1 and np.array_equal(first, again)
    monkeypatch.setattr(native, "VIEW_TABLES", 1)
    for _ in range(2):  # another geometry past the bound: uploaded each time, not kept
        got = device.download(native.convert(x.view((4, 3), (6, 2)), "float64"))
        assert np.array_equal(got, _signal((4, 6))[:, ::2])
    assert len(uploads) == 3 and len(device.constants["view tables"]) == 1


@pytest.mark.parametrize("name, kwargs", [
    ("fft", {}), ("ifft", {"norm": "ortho"}), ("fft", {"n": 12}), ("rfft", {}),
    ("irfft", {"n": 14}), ("hfft", {}), ("ihfft", {}), ("fft2", {}), ("rfftn", {}),
    ("irfftn", {}), ("ifftn", {"axes": (0,)}),
])  # fmt: skip
def test_fft_family(name, kwargs):
    fn = getattr(specux, name)
    x = _signal((4, 10))
    if name in ("ifft", "fft", "fft2", "irfft", "hfft", "irfftn", "ifftn"):
        x = x + 1j * _signal((4, 10), seed=2)
    _check(fn, x, **kwargs)


@pytest.mark.parametrize("output", ["complex", "magnitude", "power", "db"])
@pytest.mark.parametrize("pad_mode", ["constant", "reflect"])
def test_stft(output, pad_mode):
    x = _signal((2, 90))
    kw = dict(n_fft=16, hop_length=5, pad_mode=pad_mode, output=output)
    if output == "db":
        got, _ = _on_device(specux.stft, x, **kw)
        assert np.max(np.abs(got - specux.stft(x, **kw))) <= TOLERANCES["db_abs64"]
    else:
        _check(specux.stft, x, **kw)


def test_empty_time_axis_gives_zero_frames(monkeypatch):
    """Signals of 0 samples (the ops take them; the public functions refuse them): constant
    padding makes every frame zeros, so the frame and stft kernels must run over each row
    (they were launched for no rows and left the output uninitialized)."""
    allocate = emulate.HostDevice.allocate

    def poisoned(self, nbytes):  # fresh memory holds NaNs, as a GPU's may hold anything
        buffer = allocate(self, nbytes)
        buffer.memory[:] = 0xFF
        return buffer

    monkeypatch.setattr(emulate.HostDevice, "allocate", poisoned)
    device = emulate.HostDevice()
    x = device.upload(np.zeros((2, 3, 0)))
    frames = device.download(native.dense(native.frame(x, 16, 4, 8, "constant")))
    assert frames.shape == (2, 3, 1, 16) and not np.any(frames)
    p = StftParams(n_fft=16, hop_length=4, win_length=16, window=WindowSpec.from_key("hann"),
                   center=True, pad_mode="constant", normalized=False, onesided=True)
    for value in ("complex", "power"):
        out = native.stft_frames(device.upload(np.zeros((2, 0))), None, p, value, 0.0)
        got = device.download(native.dense(out))
        assert got.shape == (2, 1, 9) and not np.any(got), value


def test_stft_float32_strided_and_array_window():
    x = _signal((2, 200), "float32")[:, ::2]
    window = np.hanning(12).astype(np.float32)
    _check(specux.stft, x, n_fft=16, hop_length=4, win_length=12, window=window,
           precision="float32")  # fmt: skip


def test_stft_beyond_a_block(monkeypatch):
    """The frame + window + FFT + output-mapping path (n_fft beyond one block's points),
    forced at a small size."""
    from specux.kernels import transform_exec

    monkeypatch.setattr(native.transform_exec, "stft_fusable", lambda *a: False)
    assert transform_exec.stft_fusable is not None
    x = _signal((2, 60))
    for output in ("complex", "power"):
        _check(specux.stft, x, n_fft=16, hop_length=5, output=output)
    _check(specux.stft, x, n_fft=16, hop_length=5, onesided=False)
    _check(specux.melspectrogram, x, sr=1000, n_fft=16, hop_length=5, n_mels=4)


def test_float16_storage_beyond_a_block_and_in_fftconvolve(monkeypatch):
    """Half storage through the output mapping of the unfused stft and through fftconvolve's
    complex32 product (the kernels must read and write half, computing in float32)."""
    monkeypatch.setattr(native.transform_exec, "stft_fusable", lambda *a: False)
    x = _signal((2, 64), "float16")
    wide = x.astype(np.float32)
    for output in ("power", "complex"):
        got, dtype = _on_device(specux.stft, x, n_fft=16, hop_length=4, output=output)
        assert dtype == ("float16" if output == "power" else "complex64")
        ref = specux.stft(wide, n_fft=16, hop_length=4, output=output)
        assert rel_peak(got, ref) <= TOLERANCES["float16_storage"]
    got, dtype = _on_device(specux.fftconvolve, x, x[:, :9].copy())
    assert dtype == "float16"
    ref = specux.fftconvolve(wide, wide[:, :9])
    assert rel_peak(got, ref) <= TOLERANCES["float16_storage"]


def test_float16_input_gives_complex64():
    x = _signal((2, 64), "float16")
    got, dtype = _on_device(specux.stft, x, n_fft=16, hop_length=4)
    assert dtype == "complex64"
    ref = specux.stft(x, n_fft=16, hop_length=4)
    assert rel_peak(got, ref) <= TOLERANCES["float16_storage"]


@pytest.mark.parametrize("length", [None, 70])
def test_istft(length):
    x = _signal((2, 80))
    S = specux.stft(x, n_fft=16, hop_length=4)
    _check(specux.istft, S, n_fft=16, hop_length=4, length=length)
    window = np.hanning(16) ** 0.5
    _check(specux.istft, S, n_fft=16, hop_length=4, window=window)
    # nola="keep" (librosa's rule) where the envelope vanishes: the uncentred hann's zero at
    # sample 0, and the gaps between frames 20 apart (the reciprocal table holds 1 there)
    uncentred = specux.stft(x, n_fft=16, hop_length=4, center=False)
    got, _ = _check(specux.istft, uncentred, n_fft=16, hop_length=4, center=False, nola="keep")
    assert (got[..., 0] == 0).all()
    gapped = specux.stft(x, n_fft=16, hop_length=20)
    _check(specux.istft, gapped, n_fft=16, hop_length=20, length=length, nola="keep")
    _check(specux.istft, gapped, n_fft=16, hop_length=20, window=window, nola="keep")


def test_istft_refuses_a_window_without_overlap():
    S = specux.stft(_signal(64), n_fft=16, hop_length=16, window="boxcar")
    device = emulate.HostDevice()
    with pytest.raises(ValueError, match="NOLA"):
        specux.istft(device.upload(S), n_fft=16, hop_length=16,
                     window=device.upload(np.zeros(16)), center=False)  # fmt: skip


@pytest.mark.parametrize("top_db", [None, 30.0])
def test_melspectrogram(top_db):
    x = _signal((3, 120))
    kw = dict(sr=1000, n_fft=16, hop_length=4, n_mels=5)
    _check(specux.melspectrogram, x, **kw)
    got, _ = _on_device(specux.melspectrogram, x, output="db", top_db=top_db, **kw)
    ref = specux.melspectrogram(x, output="db", top_db=top_db, **kw)
    assert np.max(np.abs(got - ref)) <= TOLERANCES["db_abs64"]


def test_melspectrogram_top_db_clips_each_signal_alone():
    x = _signal((2, 120))
    x[1] *= 1e-3  # 60 dB quieter: a batch-wide clip would flatten it
    kw = dict(sr=1000, n_fft=16, hop_length=4, n_mels=5, output="db", top_db=20.0)
    got, _ = _on_device(specux.melspectrogram, x, **kw)
    ref = specux.melspectrogram(x, **kw)
    assert np.max(np.abs(got - ref)) <= TOLERANCES["db_abs64"]


@pytest.mark.parametrize("chunk, cap", [(transform_exec.ROWMAX_CHUNK, transform_exec.ROWMAX_CHUNKS),
                                        (300, transform_exec.ROWMAX_CHUNKS), (1, 64), (2, 3)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_row_max(dtype, chunk, cap, monkeypatch):
    """native.row_max (transform_exec.row_max: the rowmax block kernel over chunks of each
    row, then over the chunks' maxima; small chunks and caps forced here, down to one value
    a chunk): np.max of each row, NaN where the row holds one, rows shorter and longer than
    a block's threads (and its rounds of ROWMAX_LOADS loads) and a chunk and not a multiple
    of them."""
    monkeypatch.setattr(transform_exec, "ROWMAX_CHUNK", chunk)
    monkeypatch.setattr(transform_exec, "ROWMAX_CHUNKS", cap)
    rng = np.random.default_rng(3)
    device = emulate.HostDevice()
    for rows, size in ((3, 1), (2, 40), (2, 255), (4, 256), (3, 1000), (2, 5003)):
        if rows * min(-(-size // chunk), cap) > 128:
            continue  # the emulation runs a block's threads as host threads: slow
        x = (rng.standard_normal((rows, size)) * 100).astype(dtype)
        x[0, size // 2] = -np.inf
        if rows > 2:
            x[-1, size - 1] = np.nan  # the last value of a row: the last chunk's last step
        if size > 600:
            x[1, 517] = np.inf
        got = device.download(native.row_max(device.upload(x), rows, size))
        np.testing.assert_array_equal(got, x.max(axis=-1))


def test_row_max_chunks():
    """Every chunk holds a value, the chunks cover the row, and a row has at most
    ROWMAX_CHUNKS of them; size 0 raises."""
    for size in (1, 2, 255, 8191, 8192, 8193, 50080, 10**6, 10**8 + 7):
        chunks, length = transform_exec.row_max_chunks(size)
        assert 1 <= chunks <= transform_exec.ROWMAX_CHUNKS
        assert (chunks - 1) * length < size <= chunks * length
        assert length <= transform_exec.ROWMAX_CHUNK or chunks == transform_exec.ROWMAX_CHUNKS
    with pytest.raises(ValueError, match="no maximum"):
        transform_exec.row_max_chunks(0)


def test_top_db_clip_propagates_nan_like_the_cpu_backend():
    """A NaN in one signal makes that signal's peak NaN and so its whole clipped dB output
    NaN, as numpy's and torch's max do (the row maximum once skipped NaNs); the other signal
    is clipped at its own peak."""
    x = _signal((2, 120))
    x[1, 60] = np.nan
    kw = dict(sr=1000, n_fft=16, hop_length=4, n_mels=5, output="db", top_db=20.0)
    got, _ = _on_device(specux.melspectrogram, x, **kw)
    ref = specux.melspectrogram(x, **kw)
    assert np.isnan(ref[1]).all() and not np.isnan(ref[0]).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    assert np.max(np.abs(got[0] - ref[0])) <= TOLERANCES["db_abs64"]


def test_mfcc_and_lfcc():
    x = _signal((2, 120))
    _check(specux.mfcc, x, sr=1000, n_mfcc=4, n_fft=16, hop_length=4, n_mels=6)
    _check(specux.lfcc, x, sr=1000, n_lfcc=4, n_fft=16, hop_length=4, n_filter=6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mfcc_top_db_clip_read_by_the_dct(dtype):
    """The route's DCT reads the top_db clip (transform_exec.clip_peaks, then the projection
    kernel): each of 2 x 3 signals clipped at its own peak (a quieter signal among them;
    10 dB clips many values), as the CPU backend clips."""
    x = _signal((2, 3, 300), dtype)
    x[1, 2] *= 1e-3
    kw = dict(sr=1000, n_mfcc=5, n_fft=32, hop_length=8, n_mels=10, top_db=10.0)
    _check(specux.mfcc, x, precision=dtype, **kw)


@pytest.mark.parametrize("norm", [np.inf, -np.inf, 0, 1, 2, None])
def test_chroma_stft(norm):
    x = _signal((2, 160))
    _check(specux.chroma, x, sr=1000, n_fft=32, hop_length=8, tuning=0.0, norm=norm)


@pytest.mark.parametrize("scale", [3e4, 1e-15])
def test_chroma_p_norm_of_float32_at_extreme_scales(scale):
    """The colnorm kernel's p-norm factors the peak out: |x| ** 8 of float32 neither
    overflows nor underflows (it did, as the engines' sums once did)."""
    x = _signal((2, 160), "float32") * np.float32(scale)
    got, ref = _check(specux.chroma, x, precision="float32", sr=1000, n_fft=32, hop_length=8,
                      tuning=0.0, norm=8)  # fmt: skip
    assert np.all(ref.max(axis=-2) > 0.5)


def test_chroma_tuning_estimate_refuses_the_device():
    device = emulate.HostDevice()
    with pytest.raises(specux.BackendUnavailableError, match="host"):
        specux.chroma(device.upload(_signal(160)), sr=1000, n_fft=32, hop_length=8, tuning=None)
    for fn in (specux.cqt, specux.vqt):  # their tuning=None estimate too
        with pytest.raises(specux.BackendUnavailableError, match="host"):
            fn(device.upload(_signal(400)), sr=1000, hop_length=32, fmin=60.0, n_bins=12,
               bins_per_octave=6, tuning=None)  # fmt: skip


@pytest.mark.parametrize("output", ["complex", "magnitude", "db"])
def test_cqt(output):
    x = _signal((2, 400))
    kw = dict(sr=1000, hop_length=32, fmin=60.0, n_bins=12, bins_per_octave=6, output=output)
    if output == "db":
        got, _ = _on_device(specux.cqt, x, **kw)
        assert np.max(np.abs(got - specux.cqt(x, **kw))) <= TOLERANCES["db_abs64"]
    else:
        _check(specux.cqt, x, **kw)


@pytest.mark.parametrize("norm", [-np.inf, 0, 3.5])
def test_filter_norms_on_the_device_route(norm):
    """The filter norms librosa's util.normalize takes (-inf: the smallest magnitude, 0: the
    count of nonzero values) shape host-built filters: the device route equals the CPU's."""
    x = _signal((2, 400))
    _check(specux.melspectrogram, x, sr=1000, n_fft=32, hop_length=8, n_mels=6, norm=norm)
    _check(specux.cqt, x, sr=1000, hop_length=32, fmin=60.0, n_bins=12, bins_per_octave=6,
           norm=norm)  # fmt: skip


def test_cqt_filters_longer_than_a_split():
    """Low fmin: filters of thousands of taps, summed in splits (the partial sums' launch)."""
    from specux.kernels import transform_exec
    from specux.kernels.codegen.gather import CORRELATE_SPLIT
    from specux.meta.cqt_params import cqt_arguments

    kw = dict(sr=1000, hop_length=64, fmin=2.5, n_bins=6, bins_per_octave=6)
    spec = cqt_arguments(**kw, pad_mode="constant", output="complex", eps=1e-10)[0]
    plan, _, _ = transform_exec.cqt_plan(spec, "float64", 700, 1)
    assert max(g.frame_length for g in plan.frames) > 2 * CORRELATE_SPLIT
    _check(specux.cqt, _signal((2, 700)), **kw)


def test_vqt_and_chroma_cqt():
    x = _signal(400)
    _check(specux.vqt, x, sr=1000, hop_length=32, fmin=60.0, n_bins=12, bins_per_octave=6,
           gamma=5.0)  # fmt: skip
    _check(specux.chroma, x, sr=1000, hop_length=32, source="cqt", tuning=0.0, n_chroma=12,
           fmin=60.0, n_octaves=2)  # fmt: skip


def _record_options(monkeypatch, device, kind):
    """The options of ``kind``'s launches on ``device`` (an emulated backend's class), from
    now on, in launch order."""
    options = []
    launch = device.launch

    def recording(self, spec, *args):
        if getattr(spec, "kind", "") == kind:
            options.append(spec.option)
        return launch(self, spec, *args)

    monkeypatch.setattr(device, "launch", recording)
    return options


def _cqt_groups(spec, precision, length, count, spectral, tensor_cores=False):
    """The emulated kernels' constant-Q output of ``count`` noise signals, interleaved
    ``(count, n_frames, 2 n_bins)``, with ``spectral`` leading groups on the spectral path,
    and the CPU backend's float64 result in the same layout (``tensor_cores``: the float32
    products on the tensor-core tiles' emulation)."""
    x = _signal((count, length), seed=count)
    plan, n_frames, pad = transform_exec.cqt_plan(spec, precision, length, count)
    xp = np.pad(x.astype(precision), ((0, 0), (pad, pad)))
    out = np.zeros((count, n_frames, 2 * spec.n_bins), dtype=precision)
    backend = emulate.HostBackend()
    backend.tensor_cores = tensor_cores
    transform_exec.cqt_correlate(backend, xp, out, spec, plan, count=count,
                                 n_frames=n_frames, row_len=length + 2 * pad, pad=pad,
                                 precision=precision, spectral=spectral)  # fmt: skip
    ref = specux.cqt(x, sr=spec.sr, hop_length=spec.hop_length, fmin=spec.fmin,
                     n_bins=spec.n_bins, bins_per_octave=spec.bins_per_octave)  # fmt: skip
    ref = np.stack([ref.real, ref.imag], -1).transpose(0, 2, 1, 3).reshape(out.shape)
    return out, ref, plan


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize(("hop", "length", "count", "groups"),
                         [(32, 1500, 2, 1), (32, 1500, 2, 2), (33, 3000, 3, 2),
                          (8, 900, 1, 1), (3, 900, 1, 1)])  # fmt: skip
def test_cqt_spectral_path_equals_the_direct_one(precision, hop, length, count, groups):
    """The spectral path of the leading octave groups (blocks' FFTs two a complex
    transform, the product folded modulo M, M-point inverse DFTs) is an exact identity: it
    equals the CPU backend to the precision's rounding. The cases cover several blocks a
    signal (hop 33: odd F, whose mirrored bins differ), several signals, term splits (8 and
    9 of 4 terms at hops 32 and 33, 2 at hop 8), a hop under one staging step (3) and the
    most residues (256, at hop 3)."""
    from specux.meta.cqt_params import cqt_spec

    spec = cqt_spec(sr=8000, hop_length=hop, fmin=200.0, n_bins=30, bins_per_octave=12)
    out, ref, plan = _cqt_groups(spec, precision, length, count, groups)
    sc = transform_exec.cqt_spectral(spec, plan, out.shape[1], count, precision, False,
                                     groups)  # fmt: skip
    assert sc is not None and sc.groups == groups
    assert sc.size == sc.residues * hop and sc.frames >= 1
    if hop == 33:
        assert sc.size % 2 == 1 and -(-out.shape[1] // sc.frames) > 1
    assert rel_peak(out, ref) <= PEAK[precision], rel_peak(out, ref)
    direct, _, _ = _cqt_groups(spec, precision, length, count, 0)
    assert rel_peak(out, direct) <= PEAK[precision]


@pytest.mark.parametrize(("hop", "length", "count", "groups", "residues", "bins"),
                         [(32, 1500, 2, 1, 45, 30), (33, 3000, 3, 2, 36, 30),
                          (8, 900, 1, 1, 144, 30), (16, 2300, 3, 1, 113, 60),
                          (16, 1500, 1, 1, 136, 72)])  # fmt: skip
def test_cqt_spectral_tensor_cores_equal_the_cpu_backend(monkeypatch, hop, length, count, groups,
                                                         residues, bins):  # fmt: skip
    """The tensor-core fold_product (float32, a block a residue pair (m, M - m) sharing the
    loads of m's terms; 3xTF32 fragments) against the CPU backend: odd M (residue 0 its own
    partner), even M (M / 2 too; at hop 8 in one step of 8 terms), term splits (the
    partner's mirrored; not at hop 8, nor for 72 bins, whose 138 blocks leave no room), 60
    bins of one group (a t8 tile) and 90 blocks (two column tiles), 72 bins (two t5 tiles of
    40, the second partial): the kernel's widest tiles, which fold_grid picks with
    ``FOLD_MMA_TILE_NB`` = 8 (its default 4 takes t1..t4). Its launches are the "t" tiles,
    taken here whatever the cost model prefers; without ``_FOLD_TENSOR_CORES`` the same call
    takes the SIMT tiles, within float32 rounding of it."""
    from specux.meta.cqt_params import cqt_spec

    monkeypatch.setattr(transform_exec, "FOLD_MMA_TILE_NB", 8)
    monkeypatch.setattr(transform_exec, "fold_on_tensor_cores",
                        lambda sc, n_frames, count, precision, mma:
                        transform_exec.fold_tensor_cores(mma))  # fmt: skip
    transform_exec.fold_grid.cache_clear()  # its choices are cached, not the tile bound

    if hop == 16:  # one octave of ``bins`` bins
        spec = cqt_spec(sr=8000, hop_length=16, fmin=400.0, n_bins=bins, bins_per_octave=bins)
    else:
        spec = cqt_spec(sr=8000, hop_length=hop, fmin=200.0, n_bins=30, bins_per_octave=12)
    plan, n_frames, _ = transform_exec.cqt_plan(spec, "float32", length, count)
    lead = plan.frames[:groups]
    base = min(g.offset for g in lead)
    span = max(g.offset - base + g.frame_length for g in lead)
    assert residues * hop >= span + 3 * hop  # a block holds frames
    sc = transform_exec.SpectralCqt(groups, lead[-1].stop, residues * hop, residues,
                                    (residues * hop - span) // hop + 1)  # fmt: skip
    monkeypatch.setattr(transform_exec, "cqt_spectral", lambda *args: sc)
    monkeypatch.setattr(transform_exec, "_FOLD_TENSOR_CORES", True)
    grid = transform_exec.fold_grid(residues, sc.bins, count * sc.blocks(n_frames), hop,
                                    "float32", True)  # fmt: skip
    assert grid.option.startswith("t") and (grid.splits > 1) == (hop in (32, 33, 16) and
                                                                bins < 72)  # fmt: skip
    options = _record_options(monkeypatch, emulate.HostBackend, "fold_product")
    out, ref, _ = _cqt_groups(spec, "float32", length, count, None, tensor_cores=True)
    assert options == [grid.option]
    assert rel_peak(out, ref) <= PEAK["float32"], rel_peak(out, ref)
    if bins == 60:
        assert grid.option == "t8" and grid.columns == 128
    if bins == 72:
        assert grid.option == "t5" and grid.bins == 80 and sc.bins == 72
    monkeypatch.setattr(transform_exec, "_FOLD_TENSOR_CORES", False)
    del options[:]
    simt, _, _ = _cqt_groups(spec, "float32", length, count, None, tensor_cores=True)
    assert options == [transform_exec.fold_grid(residues, sc.bins, count * sc.blocks(n_frames),
                                                hop, "float32").option]  # fmt: skip
    assert rel_peak(out, simt) <= PEAK["float32"]
    transform_exec.fold_grid.cache_clear()


def test_cqt_spectral_pairs_stay_within_a_signal(monkeypatch):
    """The blocks go two to a complex FFT, and a signal's blocks are rounded up to an even
    count, so no pair holds two signals: a NaN in one signal leaves the other signals'
    frames finite and equal to the CPU backend (a block length that needs an odd count, 3
    blocks of 19 frames for 47, so the rounding is what keeps them apart)."""
    from specux.meta.cqt_params import cqt_spec

    spec = cqt_spec(sr=8000, hop_length=32, fmin=200.0, n_bins=30, bins_per_octave=12)
    plan, n_frames, pad = transform_exec.cqt_plan(spec, "float32", 1500, 3)
    lead = plan.frames[:2]
    base = min(g.offset for g in lead)
    span = max(g.offset - base + g.frame_length for g in lead)
    sc = transform_exec.SpectralCqt(2, lead[-1].stop, 40 * 32, 40, (40 * 32 - span) // 32 + 1)
    assert -(-n_frames // sc.frames) == 3 and sc.blocks(n_frames) == 4, (sc, n_frames)
    monkeypatch.setattr(transform_exec, "cqt_spectral", lambda *args: sc)
    x = _signal((3, 1500), seed=5).astype(np.float32)
    clean = x.copy()
    x[1, 700] = np.nan  # inside signal 1's first block
    xp = np.pad(x, ((0, 0), (pad, pad)))
    out = np.zeros((3, n_frames, 2 * spec.n_bins), dtype=np.float32)
    transform_exec.cqt_correlate(emulate.HostBackend(), xp, out, spec, plan, count=3,
                                 n_frames=n_frames, row_len=1500 + 2 * pad, pad=pad,
                                 precision="float32")  # fmt: skip
    ref = specux.cqt(clean.astype(np.float64), sr=8000, hop_length=32, fmin=200.0, n_bins=30,
                     bins_per_octave=12)  # fmt: skip
    ref = np.stack([ref.real, ref.imag], -1).transpose(0, 2, 1, 3).reshape(out.shape)
    assert np.isnan(out[1]).any()
    for r in (0, 2):
        assert np.isfinite(out[r]).all(), r
        assert rel_peak(out[r], ref[r]) <= PEAK["float32"], (r, rel_peak(out[r], ref[r]))


def test_cqt_spectral_tiles_bins_and_columns(monkeypatch):
    """More bins than one fold_product tile holds (48) and more blocks than its columns (80):
    several bin and column tiles (blocks of the fewest whole hops that hold a frame, so many
    blocks a signal), against the CPU backend."""
    from specux.meta.cqt_params import cqt_spec

    spec = cqt_spec(sr=8000, hop_length=16, fmin=400.0, n_bins=60, bins_per_octave=60)
    plan, n_frames, _ = transform_exec.cqt_plan(spec, "float64", 2300, 3)
    g = plan.frames[0]
    residues = -(-g.frame_length // 16) + 4
    sc = transform_exec.SpectralCqt(1, g.stop, 16 * residues, residues,
                                    (16 * residues - g.frame_length) // 16 + 1)  # fmt: skip
    assert sc.bins == 60 and 3 * sc.blocks(n_frames) > 80, (sc, n_frames)
    monkeypatch.setattr(transform_exec, "cqt_spectral", lambda *args: sc)
    out, ref, _ = _cqt_groups(spec, "float64", 2300, 3, None)
    assert rel_peak(out, ref) <= PEAK["float64"]


def test_cqt_spectral_cost_model(monkeypatch):
    """The cost model: the PERF.md workload's five lowest octaves take the spectral path, in
    blocks of 130 hops (measured on an H200 as graph replays, 32nd session: 0.206 ms
    against 0.424 all direct; 4 / 6 / 7 groups 0.234 / 0.212 / 0.222, blocks of 240 hops
    0.232-0.235, docs/benchmarks.md); filters no longer than the hop or ``groups=0`` stay
    direct; the block holds whole frames and its length is a smooth multiple of the hop."""
    from specux.kernels.plan import factorize
    from specux.meta.cqt_params import cqt_spec

    spec = cqt_spec(sr=22050, hop_length=512, fmin=32.70, n_bins=84)
    plan, n_frames, _ = transform_exec.cqt_plan(spec, "float32", 220500, 16)
    sc = transform_exec.cqt_spectral(spec, plan, n_frames, 16, "float32", True)
    assert sc is not None and (sc.groups, sc.bins, sc.residues) == (5, 60, 130)
    span = max(g.offset + g.frame_length for g in plan.frames[:5]) - plan.frames[0].offset
    assert (sc.frames - 1) * 512 + span <= sc.size < sc.frames * 512 + span
    assert factorize(sc.size) is not None and sc.residues <= transform_exec.SPECTRAL_MAX_RESIDUES
    assert transform_exec.cqt_spectral(spec, plan, n_frames, 16, "float32", True, 0) is None
    # the tensor-core product is modeled as it ran (78.1 us against the SIMT tiles' 97.5 on
    # an H200): cheaper here, so it runs there, and still spectral
    slow = transform_exec._spectral_us(sc, n_frames, 16, "float32")
    fast = transform_exec._spectral_us(sc, n_frames, 16, "float32", True)
    assert 15 < slow - fast < 30, (slow, fast)
    assert transform_exec.fold_on_tensor_cores(sc, n_frames, 16, "float32", True)
    assert not transform_exec.fold_on_tensor_cores(sc, n_frames, 16, "float32", False)
    # with two signals its 64-column tiles would be mostly padding: the SIMT tiles
    two = transform_exec.cqt_spectral(spec, *transform_exec.cqt_plan(spec, "float32", 11025,
                                                                     2)[:2], 2, "float32",
                                      True)  # fmt: skip
    assert two is not None
    assert not transform_exec.fold_on_tensor_cores(two, 22, 2, "float32", True)
    monkeypatch.setattr(transform_exec, "_FOLD_TENSOR_CORES", True)
    transform_exec.cqt_spectral.cache_clear()  # its choices are cached: not the flag
    try:
        assert transform_exec.cqt_spectral(spec, plan, n_frames, 16, "float32", True) is not None
        assert transform_exec.cqt_spectral(spec, plan, n_frames, 16, "float32", False) == sc
    finally:
        transform_exec.cqt_spectral.cache_clear()
    # its scratch (blocks, spectra, partial sums) is bounded: larger batches stay direct
    assert transform_exec._spectral_scratch(sc, n_frames, 16, 512, "float32") < 64 << 20
    plan, n_frames, _ = transform_exec.cqt_plan(spec, "float32", 220500, 1000)
    assert transform_exec.cqt_spectral(spec, plan, n_frames, 1000, "float32", True) is None
    short = cqt_spec(sr=22050, hop_length=512, fmin=1000.0, n_bins=24)
    plan, n_frames, _ = transform_exec.cqt_plan(short, "float32", 220500, 16)
    assert max(g.frame_length for g in plan.frames) <= 512
    assert transform_exec.cqt_spectral(short, plan, n_frames, 16, "float32", True) is None
    # a span of more than SPECTRAL_MAX_RESIDUES hops: no block length
    tiny = cqt_spec(sr=8000, hop_length=1, fmin=200.0, n_bins=30)
    plan, n_frames, _ = transform_exec.cqt_plan(tiny, "float64", 1000, 1)
    assert transform_exec.cqt_spectral(tiny, plan, n_frames, 1, "float64", False, 1) is None


def test_cqt_spectra_table_is_the_kernels_dft():
    """``cqt_spectra``: K_b(f) = sum_j k_b[j] e^(2 pi i f (d_g + j) / F) / F laid out
    [m][q][b] for f = m + q M, from the float64 kernels."""
    from specux.kernels.cpu import cqt as cpu_cqt
    from specux.meta.cqt_params import cqt_spec

    spec = cqt_spec(sr=8000, hop_length=32, fmin=200.0, n_bins=30, bins_per_octave=12)
    plan, n_frames, _ = transform_exec.cqt_plan(spec, "float64", 1500, 2)
    sc = transform_exec.cqt_spectral(spec, plan, n_frames, 2, "float64", False, 2)
    table = transform_exec.cqt_spectra(spec, sc)
    assert table.shape == (sc.residues, 32, sc.bins) and not table.flags.writeable
    groups = cpu_cqt.kernel_plan(spec, np.float64, 1, 1, (0, 0)).frames[:2]
    g, i = groups[1], 3  # the second group's fourth bin
    k = g.kernel[:, 2 * i] + 1j * g.kernel[:, 2 * i + 1]
    d = g.offset - groups[0].offset
    f = np.arange(sc.size)
    want = np.exp(2j * np.pi * np.outer(f, d + np.arange(k.size)) / sc.size) @ k / sc.size
    got = table[:, :, g.start + i].T.reshape(-1)  # [q][m] -> f = m + q M
    bound = CQT_TOLERANCES["spectra_table64"] * np.max(np.abs(want)) * sc.size
    assert np.max(np.abs(got - want)) <= bound


def test_cqt_spectral_path_switch_and_table_budget(monkeypatch):
    """The torch-free route takes the spectral path for long filters (fold launches) unless
    ``SPECUX_CQT_SPECTRAL=0``, or unless the device's kernel-spectra tables would pass their
    budget (tables stay on the device for the process: many signal lengths would each add
    one); both fall back to the correlations, with the same result within rounding."""
    kinds = []
    launch = emulate.HostDevice.launch

    def recording(self, spec, *args):
        kinds.append(getattr(spec, "kind", ""))
        return launch(self, spec, *args)

    monkeypatch.setattr(emulate.HostDevice, "launch", recording)
    model = transform_exec.cqt_spectral  # at this size the model keeps the correlations:
    monkeypatch.setattr(transform_exec, "cqt_spectral",  # one group unless 0 are asked for
                        lambda *args: None if args[-1] == 0 else model(*args[:-1], 1))
    x = _signal((2, 700))
    kw = dict(sr=1000, hop_length=64, fmin=2.5, n_bins=6, bins_per_octave=6)
    runs = {}
    for label, env, budget in (("spectral", "1", 1 << 29), ("off", "0", 1 << 29),
                               ("budget", "1", 0)):  # fmt: skip
        monkeypatch.setenv("SPECUX_CQT_SPECTRAL", env)
        monkeypatch.setattr(transform_exec, "_SPECTRA_BUDGET", budget)
        monkeypatch.setattr(transform_exec, "_spectra_made", {})
        del kinds[:]
        runs[label], _ = _on_device(specux.cqt, x, **kw)
        assert ("fold_product" in kinds) == (label == "spectral"), (label, kinds)
        assert ("correlate" in kinds) == (label != "spectral"), (label, kinds)
    assert len(transform_exec._spectra_made) == 0  # the refused table was not counted
    ref = specux.cqt(x, **kw)
    for label, got in runs.items():
        assert rel_peak(got, ref) <= PEAK["float64"], label
    monkeypatch.setenv("SPECUX_CQT_SPECTRAL", "1")
    monkeypatch.setattr(transform_exec, "_SPECTRA_BUDGET", 1 << 29)
    for _ in range(2):  # a table is counted once however often it is used
        _on_device(specux.cqt, x, **kw)
    assert len(transform_exec._spectra_made) == 1


def test_backend_tables_take_a_builder_called_for_new_keys_only():
    """``backend.table(key, builder, precision)``: the cqt path's kernel spectra (tens of MB,
    an FFT a bin on the host) are built only when the key is new on the device, so specs that
    alternate do not rebuild them; arrays work as before."""
    calls = []

    def builder():
        calls.append(1)
        return np.arange(4) * (1 + 1j)

    device = emulate.HostDevice()
    for _ in range(3):
        got = device.download(device.table(("builder test",), builder, "float32"))
    assert len(calls) == 1 and got.dtype == np.complex64
    assert np.array_equal(got, np.arange(4) * (1 + 1j))
    same = device.download(device.table(("array test",), np.arange(4) * (1 + 1j), "float64"))
    assert same.dtype == np.complex128 and np.array_equal(same, got)
    torch = pytest.importorskip("torch")
    from specux.kernels.cuda.fft import TorchCudaBackend

    backend = TorchCudaBackend.__new__(TorchCudaBackend)  # the table cache alone, on the CPU
    backend.device, backend.index = torch.device("cpu"), -7
    del calls[:]
    for _ in range(3):
        table = backend.table(("builder test",), builder, "float64")
    assert len(calls) == 1 and table.dtype == torch.complex128
    assert np.array_equal(table.numpy(), np.arange(4) * (1 + 1j))


def test_fold_tile_is_validated(monkeypatch):
    from specux.kernels.codegen.gather import GatherSpec, fold_shared_bytes

    for bad in ("p7x1", "p1x6", "p0x1", "x", ""):
        with pytest.raises(ValueError, match="fold_product option"):
            GatherSpec("fold_product", "float32", "float32", bad)
    # as few tiles as 6 bins and 5 columns a thread allow, then the fewest that cover them
    assert transform_exec.fold_option(48, 80) == "p6x5"
    assert transform_exec.fold_option(60, 64) == "p4x4"  # 2 x 32 bins, not 48 + 12
    assert transform_exec.fold_option(12, 2) == "p2x1"
    assert transform_exec.fold_option(100, 200) == "p5x5"  # 3 x 40 bins, 3 x 80 columns
    # the tensor-core tiles: float32 only, 1..8 n8 fragments a warp
    with pytest.raises(ValueError, match="tensor-core fold_product option='t4' is float32"):
        GatherSpec("fold_product", "float64", "float64", "t4")
    with pytest.raises(ValueError, match="fold_product option"):
        GatherSpec("fold_product", "float32", "float32", "t9")
    with pytest.raises(ValueError, match="tensor-core fold_product is float32"):
        transform_exec.fold_grid(130, 60, 64, 512, "float64", True)
    # as few tiles of up to 8 FOLD_MMA_TILE_NB = 32 bins as cover them, 64 columns a tile,
    # a block a residue pair (m, M - m), splits of 8 terms for at most two blocks an H200 SM
    grid = transform_exec.fold_grid(130, 60, 64, 512, "float32", True)
    assert (grid.option, grid.bins, grid.columns, grid.splits) == ("t4", 64, 64, 2)
    assert grid.blocks == 66 * 2 * 2 <= 2 * 132 and grid.per % 8 == 0
    assert transform_exec.fold_grid(130, 72, 64, 512, "float32", True).option == "t3"  # 3 x 24
    with monkeypatch.context() as patch:  # the kernel's widest tiles, up to 64 bins
        patch.setattr(transform_exec, "FOLD_MMA_TILE_NB", 8)
        transform_exec.fold_grid.cache_clear()
        grid = transform_exec.fold_grid(130, 60, 64, 512, "float32", True)
        assert (grid.option, grid.bins, grid.columns, grid.splits) == ("t8", 64, 64, 4)
        assert transform_exec.fold_grid(130, 100, 64, 512, "float32", True).option == "t7"
    transform_exec.fold_grid.cache_clear()
    assert fold_shared_bytes("fold_product", "t8", 0, "float32") <= 48 * 1024
    for precision in ("float32", "float64"):  # the largest tile fits 48 KiB
        assert fold_shared_bytes("fold_product", "p6x5", 0, precision) <= 48 * 1024
        assert fold_shared_bytes("fold_idft", "", transform_exec.SPECTRAL_MAX_RESIDUES,
                                 precision) <= 48 * 1024  # fmt: skip
    # its kernel indexes in 32 bits: a launch whose spectra reach 2**31 values is refused
    # before it runs (the path's scratch bound keeps the cost model's choices far below)
    grid = transform_exec.fold_grid(130, 60, 70000, 512, "float32")
    with pytest.raises(ValueError, match=r"indices past 2\*\*31"):
        transform_exec.fold_product(None, None, None, None, grid, columns=70000, residues=130,
                                    bins=60, size=66560, row=66560,
                                    precision="float32")  # fmt: skip
    # it reads full spectra of the block pairs: a one-sided row is refused
    with pytest.raises(ValueError, match="row=33 is shorter"):
        transform_exec.fold_product(None, None, None, None, grid, columns=4, residues=4,
                                    bins=60, size=64, row=33, precision="float32")  # fmt: skip
    # float32's kernel is register-bound to three blocks an SM, float64's unbounded
    from specux.kernels.codegen.dialects import CUDA
    from specux.kernels.codegen.gather import render_gather

    for precision, bounds in (("float32", "__launch_bounds__(256, 3)"),
                              ("float64", "__launch_bounds__(256)")):  # fmt: skip
        assert bounds in render_gather(GatherSpec("fold_product", precision, precision, "p4x4"),
                                       CUDA)  # fmt: skip
    assert GatherSpec("fold_idft", "float32", "float32").min_blocks == 0
    tensor = GatherSpec("fold_product", "float32", "float32", "t8")  # 127 registers: unbounded
    assert tensor.mma and tensor.min_blocks == 0
    assert "__launch_bounds__(256)" in render_gather(tensor, CUDA)
    assert "mma.sync" in render_gather(tensor, CUDA)
    assert not GatherSpec("fold_product", "float32", "float32", "p4x4").mma
    # the launch grid: float32's blocks at most three an H200 SM, float64's two
    assert transform_exec.fold_grid(130, 60, 64, 512, "float32").blocks <= 3 * 132
    assert transform_exec.fold_grid(130, 60, 64, 512, "float64").blocks <= 2 * 132


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize(("rows", "count", "columns", "taps", "hop"),
                         [(2, 37, 24, 70, 5), (1, 5, 3, 33, 1), (3, 20, 40, 31, 7),
                          (2, 3, 5, 2100, 40)])  # fmt: skip
def test_correlate_kernel_is_tile_independent(precision, rows, count, columns, taps, hop):
    """The tiled correlation kernel (cqt's products on both CUDA routes) against a numpy
    product, and every tile (partial tiles of frames, columns and taps; the planner's choice
    among them) gives the same bits, the columns outside its window untouched; 2100 taps
    take several splits (CORRELATE_SPLIT) and the partial sums' launch."""
    _check_correlate_tiles(rows, count, columns, taps, hop, precision,
                           (None, "c1n1m1", "c2n3m2", "c8n5m4", "c4n8m1"), emulate.HostBackend())


def _check_correlate_tiles(rows, count, columns, taps, hop, precision, tiles, backend):
    """transform_exec.correlate on ``backend`` with each of ``tiles`` against a float64
    product: the same bits for every tile, the columns outside the window untouched (NaN)."""
    from specux.kernels import transform_exec

    rng = np.random.default_rng(columns)
    row_len, start, column, width = (count - 1) * hop + taps + 11, 4, 3, columns + 6
    x = rng.standard_normal((rows, row_len)).astype(precision)
    kernel = rng.standard_normal((taps, columns)).astype(precision)
    reference = np.full((rows, count, width), np.nan)
    for t in range(count):
        frames = x[:, start + t * hop : start + t * hop + taps].astype(np.float64)
        reference[:, t, column : column + columns] = frames @ kernel.astype(np.float64)
    results = []
    for option in tiles:
        out = np.full((rows, count, width), np.nan, precision)
        transform_exec.correlate(backend, x, out, kernel, rows=rows, count=count,
                                 columns=columns, taps=taps, hop=hop, row_len=row_len,
                                 start=start, out_width=width, column=column,
                                 precision=precision, option=option)  # fmt: skip
        results.append(out)
    for out in results[1:]:
        assert np.array_equal(out, results[0], equal_nan=True)
    assert np.array_equal(np.isnan(results[0]), np.isnan(reference))
    assert rel_peak(np.nan_to_num(results[0]), np.nan_to_num(reference)) <= PEAK[precision]


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize(("rows", "count", "columns", "taps", "hop"),
                         [(2, 7, 24, 70, 16), (1, 3, 3, 5, 4), (3, 5, 6, 40, 3),
                          (2, 4, 5, 300, 64)])  # fmt: skip
def test_correlate_t_kernel_is_the_transpose(precision, rows, count, columns, taps, hop):
    """The transposed correlation (cqt's adjoint on CUDA) adds sum_c G[t, c] K[j, c] at
    sample start + t * hop + j to what the output holds, the same bits for every tile
    (partial tiles of sample blocks and of the hop; taps not a multiple of the hop)."""
    from specux.kernels import transform_exec

    rng = np.random.default_rng(taps)
    width, column, start = columns + 6, 4, 3
    row_len = start + (count - 1) * hop + taps + 5
    grad = rng.standard_normal((rows, count, width)).astype(precision)
    kernel = rng.standard_normal((taps, columns)).astype(precision)
    reference = np.full((rows, row_len), 0.5)
    for t in range(count):
        part = grad[:, t, column : column + columns].astype(np.float64) @ kernel.T
        reference[:, start + t * hop : start + t * hop + taps] += part
    results = []
    for option in (None, "c8n1m1", "c8n4m2", "c2n3m1", "c4n2m4"):
        out = np.full((rows, row_len), 0.5, precision)
        transform_exec.correlate_t(emulate.HostBackend(), grad, out,
                                   transform_exec.hop_major(kernel, hop), rows=rows,
                                   count=count, columns=columns, taps=taps, hop=hop,
                                   row_len=row_len, start=start, in_width=width,
                                   column=column, precision=precision,
                                   option=option)  # fmt: skip
        results.append(out)
    for out in results[1:]:
        assert np.array_equal(out, results[0])
    assert rel_peak(results[0], reference) <= PEAK[precision]


def test_cqt_adjoint_kernels_equal_the_cpu_adjoint():
    """transform_exec.cqt_correlate_t (the CUDA cqt adjoint's launches) on a real plan, the
    constant padding's fold being a crop, against the CPU backend's exact adjoint."""
    from specux.kernels import transform_exec
    from specux.kernels.cpu import cqt as cpu_cqt
    from specux.meta.cqt_params import cqt_arguments

    kw = dict(sr=1000, hop_length=32, fmin=30.0, n_bins=12, bins_per_octave=6)
    spec = cqt_arguments(**kw, pad_mode="constant", output="complex", eps=1e-10)[0]
    count, length = 2, 500
    plan, n_frames, pad = transform_exec.cqt_plan(spec, "float64", length, count)
    rng = np.random.default_rng(3)
    grad = rng.standard_normal((count, 12, n_frames)) + 1j * rng.standard_normal(
        (count, 12, n_frames))  # fmt: skip
    real = np.ascontiguousarray(grad.swapaxes(-1, -2)).view(np.float64)  # (count, T, 24)
    xbar = np.zeros((count, length + 2 * pad))
    transform_exec.cqt_correlate_t(emulate.HostBackend(), real, xbar, spec, plan, count=count,
                                   n_frames=n_frames, row_len=length + 2 * pad, pad=pad,
                                   precision="float64")  # fmt: skip
    reference = cpu_cqt.cqt_adjoint(grad, spec, "constant", length)
    assert rel_peak(xbar[:, pad : pad + length], reference) <= PEAK["float64"]


_TILES = ("c1n1m1", "c2n3m2", "c8n3m1", "c4n2m4", "c8n1m2")


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 3), count=st.integers(1, 40), columns=st.integers(1, 30),
       taps=st.integers(1, 600), hop=st.integers(1, 70), tile=st.sampled_from(_TILES))  # fmt: skip
def test_tiled_correlations_are_transposes(rows, count, columns, taps, hop, tile):
    """For random shapes (taps below, at and above the hop; several splits; one frame; one
    column) and tiles: correlate equals a float64 product, and correlate_t is its exact
    transpose: <correlate(x), g> == <x, correlate_t(g)> to rounding."""
    from specux.kernels import transform_exec

    rng = np.random.default_rng(rows * 1000 + count * 31 + taps)
    start, column, width = 2, 1, columns + 3
    row_len = start + (count - 1) * hop + taps + 4
    x = rng.standard_normal((rows, row_len))
    kernel = rng.standard_normal((taps, columns))
    grad = rng.standard_normal((rows, count, width))
    backend = emulate.HostBackend()
    out = np.zeros((rows, count, width))
    transform_exec.correlate(backend, x, out, kernel, rows=rows, count=count, columns=columns,
                             taps=taps, hop=hop, row_len=row_len, start=start,
                             out_width=width, column=column, precision="float64",
                             option=tile)  # fmt: skip
    frames = np.stack([x[:, start + t * hop : start + t * hop + taps] for t in range(count)], 1)
    product = frames @ kernel
    assert rel_peak(out[..., column : column + columns], product) <= CQT_TOLERANCES["correlate64"]
    assert not out[..., :column].any() and not out[..., column + columns :].any()
    xbar = np.zeros((rows, row_len))
    transform_exec.correlate_t(backend, grad, xbar, transform_exec.hop_major(kernel, hop),
                               rows=rows, count=count, columns=columns, taps=taps, hop=hop,
                               row_len=row_len, start=start, in_width=width, column=column,
                               precision="float64", option=tile)  # fmt: skip
    lhs = np.sum(out[..., column : column + columns] * grad[..., column : column + columns])
    rhs = np.sum(x * xbar)
    # relative to |correlate(x)| |g|, as the cqt adjoint's identity (Cauchy-Schwarz bounds lhs)
    scale = (np.linalg.norm(out[..., column : column + columns])
             * np.linalg.norm(grad[..., column : column + columns]))  # fmt: skip
    assert abs(lhs - rhs) <= CQT_TOLERANCES["adjoint64"] * scale, (abs(lhs - rhs), scale)
    assert not xbar[:, :start].any() and not xbar[:, start + (count - 1) * hop + taps :].any()


@pytest.mark.parametrize(("rows", "count", "columns", "taps", "hop"),
                         [(2, 37, 24, 70, 5), (1, 5, 3, 33, 1), (3, 20, 40, 31, 7),
                          (2, 3, 5, 600, 40), (2, 70, 10, 200, 5), (2, 130, 24, 300, 64)])
def test_tensor_core_correlate_tiles(rows, count, columns, taps, hop):
    """The tensor-core tiles (float32: three tf32 products a step, mma.sync emulated with the
    warp's fragments exchanged between block barriers) against a float64 product, the
    columns outside the window untouched. Partial tiles of frames (70, 130: two or three
    row tiles a signal), columns (5 of 8; 40 in two column tiles), hop-steps (taps not a
    multiple of the hop) and 32-sample chunks (hops of 1, 5, 7, 40, 64); splits: two
    chunks a hop (40, 64), 40 hop-steps in two windows (200 taps at hop 5). Each output is
    its row's and column's own sum whatever the tile: every tensor-core tile gives the same
    bits."""
    backend = emulate.HostBackend()
    backend.tensor_cores = True
    _check_correlate_tiles(rows, count, columns, taps, hop, "float32",
                           ("w1m1", "w3m2", "w4m1", "w2m2"), backend)  # fmt: skip


_MMA_PROBE = r"""
extern "C" void probe(const void* a_in, const void* b_in, const void* c_in, void* d_out,
                      const void* x_in, void* t_out) {
    const float *A = (const float*)a_in, *B = (const float*)b_in, *C = (const float*)c_in;
    const float* X = (const float*)x_in;
    float *D = (float*)d_out, *T = (float*)t_out;
    std::barrier<> barrier(32);
    std::vector<float> exchange(32 * 10);
    std::vector<std::thread> lanes;
    for (int tid = 0; tid < 32; ++tid)
        lanes.emplace_back([&, tid] {
            std::barrier<>* specux_barrier = &barrier;
            float* specux_exchange = exchange.data();
            const int g = tid / 4, r = tid % 4;  // PTX ISA, mma.m16n8k8 .tf32 fragments
            float a[4], b[2], d[4];
            for (int j = 0; j < 4; ++j) {
                a[j] = A[(g + 8 * (j & 1)) * 8 + r + 4 * (j >> 1)];
                d[j] = C[(g + 8 * (j >> 1)) * 8 + 2 * r + (j & 1)];
            }
            for (int j = 0; j < 2; ++j) b[j] = B[(r + 4 * j) * 8 + g];
            SPECUX_MMA_TF32(d, a, b);
            for (int j = 0; j < 4; ++j) D[(g + 8 * (j >> 1)) * 8 + 2 * r + (j & 1)] = d[j];
            T[tid] = specux_tf32(X[tid]);
        });
    for (auto& lane : lanes) lane.join();
}
"""


def test_emulated_mma_follows_the_ptx_fragment_layout():
    """The host dialect's mma.sync (SPECUX_MMA_TF32) on one warp whose lanes hold PTX's
    m16n8k8 tf32 fragments (written here from the ISA's layout, not from the emulator's):
    D = A B + C exactly on values tf32 holds, and specux_tf32 rounds to 10 mantissa bits, to
    nearest with ties away from zero (cvt.rna.tf32.f32)."""
    from specux.kernels.codegen.dialects import CPP

    params = tuple(("const void*" if i in (0, 1, 2, 4) else "void*", f"p{i}") for i in range(6))
    lib = emulate._build(CPP.prelude + CPP.mma_prelude + _MMA_PROBE, "probe", params, 0)
    rng = np.random.default_rng(5)
    a = rng.integers(-64, 64, (16, 8)).astype(np.float32) / 4
    b = rng.integers(-64, 64, (8, 8)).astype(np.float32) / 8
    c = rng.integers(-64, 64, (16, 8)).astype(np.float32)
    d = np.zeros((16, 8), np.float32)
    ulp = 2.0**-10  # tf32's spacing at 1
    x = np.zeros(32, np.float32)
    x[:8] = [1 + ulp / 2, 1 + ulp / 4, 1 + 3 * ulp / 4, -(1 + ulp / 2), 3 + ulp, 0.0, -0.0,
             1 + ulp / 2 - 2.0**-23]
    rounded = [1 + ulp, 1.0, 1 + ulp, -(1 + ulp), 3.0 + 2 * ulp, 0.0, -0.0, 1.0]
    t = np.zeros(32, np.float32)
    lib.probe(*(arr.ctypes.data for arr in (a, b, c, d, x, t)))
    assert np.array_equal(d, a.astype(np.float64) @ b + c)
    assert np.array_equal(t[:8], np.array(rounded, np.float32))
    assert np.signbit(t[6])


def test_tensor_core_tiles_are_chosen_for_float32_only(monkeypatch):
    """The planner picks a tensor-core tile when the backend has tensor cores, in float32,
    unless SPECUX_TENSOR_CORES=0; never for float64 (refused if asked)."""
    from specux.kernels import transform_exec
    from specux.kernels.codegen.gather import mma_tile

    backend = emulate.HostBackend()
    assert not transform_exec.tensor_cores(backend, "float32")  # the emulation's default
    backend.tensor_cores = True
    monkeypatch.delenv("SPECUX_TENSOR_CORES", raising=False)
    assert transform_exec.tensor_cores(backend, "float32")
    assert not transform_exec.tensor_cores(backend, "float64")
    monkeypatch.setenv("SPECUX_TENSOR_CORES", "0")
    assert not transform_exec.tensor_cores(backend, "float32")
    option = transform_exec.correlate_option
    # cqt's octaves on the PERF.md workload: 24 columns, 16 signals of 431 frames, hop 512
    assert option(16, 431, 24, 11687, 512, "float32", True) == "w3m2"
    assert option(16, 431, 24, 730, 512, "float32", True) == "w3m2"
    assert option(2, 431, 24, 730, 512, "float32", True) == "w3m1"  # w3m2: 128 blocks < 264
    assert option(16, 4000, 40, 1000, 512, "float32", True) == "w4m1"
    assert mma_tile(option(16, 431, 24, 730, 512, "float32")) is None
    # one hop-step (cqt's octaves of 183 and 365 taps at hop 512, mfcc's DCT: 80 taps at a
    # hop of 80): no sample to share between frames, the SIMT tiles
    assert mma_tile(option(16, 431, 24, 365, 512, "float32", True)) is None
    assert mma_tile(option(1, 5008, 20, 80, 80, "float32", True)) is None
    # a hop of 5 samples would fill 5 of each 32-sample chunk: the SIMT tiles
    assert mma_tile(option(2, 37, 24, 70, 5, "float32", True)) is None
    with pytest.raises(ValueError, match="float32"):
        option(16, 431, 24, 183, 512, "float64", True)


def test_cqt_and_vqt_on_the_tensor_core_tiles(monkeypatch):
    """The torch-free route with a device that has tensor cores: float32 cqt and vqt (their
    octaves' correlations, filters of several hops) on the emulated tensor-core tiles,
    against the CPU backend in float64 (the spectral path of the longest filters off, so
    every octave takes a correlation)."""
    from specux.kernels.codegen.gather import mma_tile

    monkeypatch.setattr(transform_exec, "cqt_spectral", lambda *args: None)
    monkeypatch.setattr(emulate.HostDevice, "tensor_cores", True)
    monkeypatch.delenv("SPECUX_TENSOR_CORES", raising=False)
    tiles = _record_options(monkeypatch, emulate.HostDevice, "correlate")
    x = _signal((2, 700))
    for fn, kw in ((specux.cqt, dict(sr=1000, hop_length=64, fmin=2.5, n_bins=6,
                                     bins_per_octave=6)),
                   (specux.vqt, dict(sr=1000, hop_length=32, fmin=20.0, n_bins=12,
                                     bins_per_octave=6, gamma=5.0))):  # fmt: skip
        del tiles[:]
        got, dtype = _on_device(fn, x.astype(np.float32), **kw)
        ref = fn(x, **kw)
        assert dtype == fn(x.astype(np.float32), **kw).dtype.name
        assert rel_peak(got, ref) <= PEAK["float32"], (fn.__name__, rel_peak(got, ref))
        assert tiles and all(mma_tile(option) for option in tiles), tiles


def test_correlate_tile_is_validated():
    from specux.kernels.codegen.gather import GatherSpec

    with pytest.raises(ValueError, match="correlate option"):
        GatherSpec("correlate", "float32", "float32", "c3n1m1")
    with pytest.raises(ValueError, match="correlate option"):
        GatherSpec("correlate", "float32", "float32")
    with pytest.raises(ValueError, match="correlate option"):
        GatherSpec("correlate", "float32", "float32", "w5m1")
    with pytest.raises(ValueError, match="tensor-core tile"):
        GatherSpec("correlate", "float64", "float64", "w3m2")
    with pytest.raises(ValueError, match="tensor-core tile"):
        GatherSpec("correlate_t", "float32", "float32", "w3m2")
    from specux.kernels import transform_exec

    x = np.zeros((1, 600), np.float64)
    with pytest.raises(ValueError, match="48 KiB"):  # 1024 frames a tile: refused, not launched
        transform_exec.correlate(emulate.HostBackend(), x, np.zeros((1, 4, 2)), np.zeros((9, 2)),
                                 rows=1, count=4, columns=2, taps=9, hop=1, row_len=600,
                                 start=0, out_width=2, column=0, precision="float64",
                                 option="c1n1m8")  # fmt: skip


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_fftconvolve_broadcasts(mode):
    x = _signal((3, 1, 40))
    k = _signal((2, 9), seed=3)
    _check(specux.fftconvolve, x, k, mode=mode)
    z = x + 1j * _signal((3, 1, 40), seed=4)
    _check(specux.fftconvolve, z, k, mode=mode)


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("shapes", [((3, 1, 600), (2, 33)), ((2, 33), (3, 1, 600)),
                                    ((1, 1000), (2, 130))])  # fmt: skip
def test_fftconvolve_by_overlap_save(shapes, precision, monkeypatch):
    """Real operands whose shorter one is at most half a block FFT and whose output is
    longer than the block run by transform_exec.overlap_save (256-point blocks for 33 taps,
    1024 for 130), in any operand order, broadcast."""
    from specux.kernels import transform_exec

    calls = []
    original = transform_exec.overlap_save
    monkeypatch.setattr(transform_exec, "overlap_save",
                        lambda *a, **k: calls.append(k["block"]) or original(*a, **k))  # fmt: skip
    x = _signal(shapes[0]).astype(precision)
    k = _signal(shapes[1], seed=3).astype(precision)
    for mode in ("full", "same", "valid"):
        _check(specux.fftconvolve, x, k, precision=precision, mode=mode)
    assert calls == [256 if 33 in shapes[0] + shapes[1] else 1024] * 3


def test_explicit_cpu_backend_is_strict():
    device = emulate.HostDevice()
    with pytest.raises(specux.BackendUnavailableError, match="cpu"):
        specux.fft(device.upload(_signal(8)), backend="cpu")


@pytest.mark.parametrize("shape", [(0, 100), (2, 0, 100)])
def test_empty_batches(shape):
    x = np.zeros(shape)
    for fn, kwargs in ((specux.stft, dict(n_fft=16)), (specux.rfft, {}),
                       (specux.mfcc, dict(sr=1000, n_fft=16, n_mels=6, n_mfcc=3))):  # fmt: skip
        got, dtype = _on_device(fn, x, **kwargs)
        ref = fn(x, **kwargs)
        assert got.shape == ref.shape and dtype == ref.dtype.name


def test_istft_of_the_device_stft_view():
    """The stft's result is a transposed view of frame-major memory; istft reads it as is."""
    x = _signal((2, 80))
    device = emulate.HostDevice()
    S = specux.stft(device.upload(x), n_fft=16, hop_length=4)
    assert not S.is_contiguous
    y = device.download(native.dense(specux.istft(S, n_fft=16, hop_length=4, length=80)))
    assert rel_peak(y, x) <= PEAK["float64"]


_CONVERSIONS = [("float32", "float32", False), ("float32", "complex64", False),
                ("complex128", "complex64", True), ("float16", "float32", False),
                ("complex64", "complex64", True), ("float64", "float32", False)]  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_convert_matches_numpy_for_any_view(data):
    """convert (the torch-free route's view -> contiguous copy) on random views: permuted
    axes, steps (negative too), a trailing zero pad, every cast the engine makes."""
    src, dst, conj = data.draw(st.sampled_from(_CONVERSIONS), label="conversion")
    shape = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=4), label="shape")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    base = rng.standard_normal(shape)
    if src.startswith("complex"):
        base = base + 1j * rng.standard_normal(shape)
    base = base.astype(src)
    device = emulate.HostDevice()
    array = device.upload(base)
    view, expected = array, base
    order = data.draw(st.permutations(range(len(shape))), label="axes")
    view = view.view([view.shape[i] for i in order], [view.strides[i] for i in order])
    expected = expected.transpose(order)
    axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
    if data.draw(st.booleans(), label="flip"):  # a negative stride along `axis`
        n = view.shape[axis]
        strides = list(view.strides)
        strides[axis] = -strides[axis]
        view = view.view(view.shape, strides, view.offset + (n - 1) * view.strides[axis])
        expected = np.flip(expected, axis)
    pad = data.draw(st.integers(0, 3), label="pad")
    out_shape = list(view.shape)
    out_shape[-1] += pad
    got = device.download(native.convert(view, dst, out_shape, conj=conj))
    want = np.zeros(out_shape, dtype=dst)
    values = np.conj(expected) if conj else expected
    want[..., : view.shape[-1]] = values if dst.startswith("complex") else values.real
    assert got.dtype == np.dtype(dst) and np.array_equal(got, want)


def test_bluestein_tables_are_reused_by_a_device():
    """A prime length runs Bluestein: its chirp tables are uploaded once per device and the
    second call reads the cached ones (same values)."""
    device = emulate.HostDevice()
    x = _signal((3, 17)) + 1j * _signal((3, 17), seed=5)
    first = device.download(specux.fft(device.upload(x)))
    tables = len(device.constants)
    second = device.download(specux.fft(device.upload(x)))
    assert tables and len(device.constants) == tables
    assert np.array_equal(first, second) and rel_peak(first, np.fft.fft(x)) <= PEAK["float64"]


def test_constant_builders_run_once_per_key():
    """A constant given as a function (a host table that costs time to build: the cqt
    adjoint's regrouped kernels, cast FFT tables) is built only when its key is new."""
    device = emulate.HostDevice()
    builds = []

    def build():
        builds.append(1)
        return np.arange(6.0)

    first = device.constant(("test", 1), build)
    again = device.constant(("test", 1), build)
    assert again is first and len(builds) == 1
    assert np.array_equal(device.download(first), np.arange(6.0))
    device.constant(("test", 2), build)
    assert len(builds) == 2


@pytest.mark.parametrize("norm", [np.inf, -np.inf, 0, 1, 2])
def test_colnorm_as_the_engines_with_nan_and_silence(norm):
    """The colnorm kernel against NumpyEngine.normalize (librosa's util.normalize): a NaN
    anywhere in a column makes it NaN for the max, min, 1 and p norms as numpy's reductions
    do (the max and min once kept a NaN only in a column's first row), none for the count;
    silent columns stay as they are."""
    from specux.engines import NumpyEngine

    device = emulate.HostDevice()
    values = _signal((2, 5, 6))
    values[0, 0, 0] = values[0, 2, 1] = values[1, 4, 2] = np.nan
    values[1, :, 3] = 0.0
    values[1, 1:, 4] = 0.0
    ref = NumpyEngine.normalize(values, norm, -2)
    got = device.download(native.dense(native.NativeEngine.normalize(device.upload(values),
                                                                     norm, -2)))  # fmt: skip
    np.testing.assert_allclose(got, ref, rtol=TOLERANCES["colnorm64"], atol=0, equal_nan=True)
