"""The spectral transforms' generated kernels without a GPU: the framing FFT kernels (stft)
and the gather kernels (frame, overlap-add and its fold, istft, filterbank) run through the
host emulation on numpy buffers and are compared with the CPU backend."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from tolerances import TOLERANCES

from specux.kernels import emulate, plan, transform_exec
from specux.kernels.cpu import features as cpu_features
from specux.kernels.cpu import frames as cpu_frames
from specux.kernels.cpu import stft as cpu_stft
from specux.meta import filters
from specux.meta.params import StftParams, WindowSpec, axis_scale, dual_norm

if emulate.compiler() is None:
    pytest.skip("no C++ compiler for the host emulation", allow_module_level=True)

_PRECISION = {np.float32: "float32", np.float64: "float64"}


def _params(n_fft, hop, center, mode, onesided=True, normalized=False, win_length=None):
    return StftParams(n_fft=n_fft, hop_length=hop, win_length=win_length or n_fft,
                      window=WindowSpec.from_key("hann"), center=center, pad_mode=mode,
                      normalized=normalized, onesided=onesided)  # fmt: skip


def _peak_error(got, ref) -> float:
    return float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-300))


def _stft(x, p: StftParams, value: str):
    """The emulated fused stft of ``x`` (2-D), as the CPU backend lays it out."""
    dtype = x.dtype.type
    precision = _PRECISION[dtype]
    count = 1 + (x.shape[-1] + 2 * p.pad - p.n_fft) // p.hop_length
    out_dtype = np.result_type(dtype, np.complex64) if value == "complex" else dtype
    out = np.zeros((x.shape[0], count, p.n_freq), dtype=out_dtype)
    window = np.array(cpu_stft.full_window(p, None, dtype))
    transform_exec.stft(emulate.HostBackend(), x, out, window, signals=x.shape[0],
                        sig_len=x.shape[-1], n_fft=p.n_fft, hop=p.hop_length, pad=p.pad,
                        mode=p.pad_mode, onesided=p.onesided, value=value, eps=1e-10,
                        scale=p.n_fft**-0.5 if p.normalized else 1.0, precision=precision,
                        src_storage=precision, dst_storage=precision)  # fmt: skip
    return out.swapaxes(-1, -2)


# n_fft: packed even (16), odd smooth (15), Bluestein (17); hops that do not divide n_fft;
# a signal shorter than the padding (9 samples, n_fft 12: reflect repeats).
STFT_CASES = [
    (16, 4, 50, True, "reflect", True, "complex"),
    (16, 5, 50, True, "constant", True, "power"),
    (17, 5, 50, True, "reflect", True, "complex"),
    (17, 5, 50, False, "constant", False, "magnitude"),
    (12, 5, 9, True, "reflect", True, "power"),
    (15, 4, 40, True, "circular", True, "complex"),
    (16, 3, 40, True, "replicate", False, "complex"),
]


@pytest.mark.parametrize("case", STFT_CASES, ids=lambda c: "-".join(map(str, c)))
def test_emulated_stft_float64(case, rng):
    n_fft, hop, length, center, mode, onesided, value = case
    p = _params(n_fft, hop, center, mode, onesided)
    x = rng.standard_normal((2, length))
    ref = cpu_stft.stft(x, None, p, value, 1e-10)
    assert _peak_error(_stft(x, p, value), ref) <= TOLERANCES["float64"]


def test_emulated_stft_with_more_frames_reads_zeros_past_the_end(rng):
    """transform_exec.stft's ``frames`` (overlap-save's frames): frame f holds samples
    f * hop - pad .. of the signal, zeros outside it, past its end too."""
    n, hop, pad, length, frames = 32, 23, 9, 100, 6  # 1 + (100 + 18 - 32) // 23 = 4 natural
    x = rng.standard_normal((2, length))
    out = np.zeros((2, frames, n // 2 + 1), dtype=np.complex128)
    transform_exec.stft(emulate.HostBackend(), x, out, np.ones(n), signals=2, sig_len=length,
                        n_fft=n, hop=hop, pad=pad, mode="constant", onesided=True,
                        value="complex", eps=0.0, scale=1.0, precision="float64",
                        src_storage="float64", dst_storage="float64",
                        frames=frames)  # fmt: skip
    padded = np.zeros((2, pad + frames * hop + n))
    padded[:, pad : pad + length] = x
    ref = np.stack([np.fft.rfft(padded[:, f * hop : f * hop + n]) for f in range(frames)], 1)
    assert _peak_error(out, ref) <= TOLERANCES["float64"]


# (block, kernel taps, signal length), hop = block - taps + 1: 48 outputs, two whole hops of
# 24; 108 outputs, a partial last frame; the longest kernel a 32-point block takes (2 * 15
# <= 32), 92 outputs by hops of 17; one (partial) frame only; a 2-tap kernel, 62 = 2 * 31
# outputs; 64-point blocks.
OVERLAP_SAVE_CASES = [(32, 9, 40), (32, 9, 100), (32, 16, 77), (32, 9, 10), (32, 2, 61),
                      (64, 20, 300)]  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", OVERLAP_SAVE_CASES)
def test_emulated_overlap_save_equals_the_direct_convolution(case, dtype, rng):
    """transform_exec.overlap_save (both CUDA routes' fftconvolve of real operands): the
    taps' spectra by the stft kernel, then one kernel a frame (fft_exec.convolve_1d: forward
    transform, product with the rotated kernel's spectrum, inverse transform, the frame's
    first hop outputs stored, fewer for a row's last frame)."""
    _check_overlap_save(*case, dtype, rng)


@pytest.mark.parametrize("dtype,block", [(np.float32, 16384), (np.float64, 8192)])
def test_emulated_overlap_save_at_the_largest_blocks(dtype, block, rng):
    """The blocks of PERF.md's conv workload (4096 taps: the largest a block kernel holds,
    512 and 256 threads a frame), three frames a signal, the last partial."""
    _check_overlap_save(block, 4096, 30000, dtype, rng)


def _check_overlap_save(block, short, length, dtype, rng):
    precision = _PRECISION[dtype]
    x = rng.standard_normal((3, length)).astype(dtype)
    h = rng.standard_normal((3, short)).astype(dtype)
    size = 3 * (length + short - 1)
    buffer = np.full(size + block, np.nan, dtype=dtype)  # a tail no store may reach
    out = buffer[:size].reshape(3, -1)  # every output is written

    class Recorder(emulate.HostBackend):
        def launch(self, spec, *args):
            launched.append(spec)
            super().launch(spec, *args)

    launched = []
    transform_exec.overlap_save(Recorder(), x, h, out, signals=3, sig_len=length, short=short,
                                block=block, precision=precision,
                                storage=precision)  # fmt: skip
    ref = np.stack([np.convolve(x[r].astype(np.float64), h[r].astype(np.float64))
                    for r in range(3)])  # fmt: skip
    assert _peak_error(out, ref) <= TOLERANCES[f"{precision}_peak" if dtype == np.float32
                                               else precision]  # fmt: skip
    assert np.isnan(buffer[size:]).all()
    # two block kernels: the taps' spectra, then the frames' (no spectrum in global memory)
    assert [(s.store.value, s.pack) for s in launched] == [("complex", "r2c"),
                                                           ("convolve", "r2c")]  # fmt: skip


def test_overlap_save_length():
    """A power of two near four kernel lengths, at least twice the kernel's tail, below the
    output length, one block kernel; else 0 (whole-length FFTs)."""
    length = transform_exec.overlap_save_length
    assert length(164095, 4096, "float32") == 16384  # PERF.md's conv
    assert length(164095, 4096, "float64") == 8192  # float64 blocks hold half the points
    assert length(1000, 9, "float32") == 256  # the shortest block
    assert length(1000, 129, "float32") == 512
    assert length(256, 9, "float32") == 0  # the output fits one block
    assert length(10**6, 8193, "float32") == 16384  # a tail of 8192: half the block
    assert length(10**6, 8194, "float32") == 0  # a tail of 8193 > half of 16384
    assert length(10**6, 1, "float32") == 0
    operands = transform_exec.overlap_save_operands  # both CUDA routes' one decision
    assert operands("float32", 160000, 4096) == (False, 16384)
    assert operands("float64", 4096, 160000) == (True, 8192)  # the longer one is framed
    assert operands("float16", 160000, 4096) == (False, 0)  # half storage: whole length
    assert operands("complex64", 160000, 4096) == (False, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_paired_frame_loads_equal_the_scalar_loads(dtype, rng):
    """The packed framing kernel reads an interior frame's sample pairs by vector loads when
    its row is aligned for them (codegen.block._paired); the same signal one element
    off that alignment takes the scalar loads everywhere: the results must be bit-identical."""
    p = _params(16, 4, True, "reflect")
    x = rng.standard_normal((2, 70)).astype(dtype)
    buffer = np.zeros(x.size + 1, dtype=dtype)
    shifted = buffer[1:].reshape(x.shape)  # every row start off the pair alignment
    shifted[:] = x
    assert x.ctypes.data % (2 * x.itemsize) == 0 and shifted.ctypes.data % (2 * x.itemsize)
    for value in ("complex", "power"):
        np.testing.assert_array_equal(_stft(x, p, value), _stft(shifted, p, value))


@pytest.mark.parametrize("value", ["complex", "magnitude", "power"])
def test_emulated_stft_float32_normalized(value, rng):
    p = _params(16, 6, True, "reflect", normalized=True, win_length=12)
    x = rng.standard_normal((2, 70))
    ref = cpu_stft.stft(x, None, p, value, 1e-10)
    got = _stft(x.astype(np.float32), p, value)
    assert _peak_error(got, ref) <= TOLERANCES["float32_peak"]


def test_emulated_stft_db(rng):
    p = _params(16, 4, True, "constant")
    x = rng.standard_normal((1, 40))
    ref = cpu_stft.stft(x, None, p, "db", 1e-10)
    assert np.max(np.abs(_stft(x, p, "db") - ref)) <= TOLERANCES["db_abs64"]


@pytest.mark.parametrize("exponent", [2.0, 1.0, 1.5])
@pytest.mark.parametrize("case", [(16, 4, 50, "reflect"), (15, 4, 40, "constant"),
                                  (17, 5, 50, "replicate")], ids=str)  # fmt: skip
def test_emulated_cotangent_store(case, exponent, rng):
    """The stft kernel's cotangent store (power_adjoint's first kernel): each bin's
    ``F e |X| ** (e - 2) X``, halved off DC and Nyquist, vs the same from the CPU stft."""
    n_fft, hop, length, mode = case
    p = _params(n_fft, hop, True, mode)
    x = rng.standard_normal((2, length))
    spectrum = np.swapaxes(cpu_stft.stft(x, None, p, "complex", 1e-10), -1, -2)
    factors = rng.standard_normal(spectrum.shape)
    magnitude = np.abs(spectrum)
    half = np.full(p.n_freq, 0.5)
    half[0] = 1.0
    if n_fft % 2 == 0:
        half[-1] = 1.0
    ref = factors * exponent * magnitude ** (exponent - 2.0) * spectrum * half
    got = np.zeros_like(spectrum)
    window = np.array(cpu_stft.full_window(p, None, np.float64))
    transform_exec.stft(emulate.HostBackend(), x, got, window, signals=2, sig_len=length,
                        n_fft=n_fft, hop=hop, pad=p.pad, mode=mode, onesided=True,
                        value="cotangent", eps=0.0, scale=1.0, precision="float64",
                        src_storage="float64", dst_storage="float64", factors=factors,
                        exponent=exponent)  # fmt: skip
    assert _peak_error(got, ref) <= TOLERANCES["float64"]


def _adjoint_chain(x, p: StftParams, factors, exponent: float):
    """(fused, chain): the emulated frames of the fused adjoint kernel (stft value
    "adjoint") and of the two-kernel chain it replaces (the cotangent store, then a c2r
    kernel, then the window)."""
    from specux.kernels.fft_exec import Strides, transform_1d

    precision = _PRECISION[x.dtype.type]
    signals, length = x.shape
    count, n_fft = factors.shape[1], p.n_fft
    backend = emulate.HostBackend()
    window = np.array(cpu_stft.full_window(p, None, x.dtype))
    inverse = axis_scale(n_fft, dual_norm(p.fft_norm), True)
    common = dict(signals=signals, sig_len=length, n_fft=n_fft, hop=p.hop_length, pad=p.pad,
                  mode=p.pad_mode, onesided=True, eps=0.0,
                  scale=axis_scale(n_fft, p.fft_norm, False), precision=precision,
                  src_storage=precision, dst_storage=precision, factors=factors,
                  exponent=exponent)  # fmt: skip
    fused = np.zeros((signals, count, n_fft), dtype=x.dtype)
    transform_exec.stft(backend, x, fused, window, value="adjoint", inverse_scale=inverse,
                        **common)  # fmt: skip
    cotangent = np.zeros(factors.shape, dtype=np.result_type(x.dtype, np.complex64))
    transform_exec.stft(backend, x, cotangent, window, value="cotangent", **common)
    frames = np.zeros_like(fused)
    transform_1d(backend, cotangent, frames, n=n_fft, kind="c2r", sign=1, scale=inverse,
                 precision=precision, batch=signals * count, src_storage=precision,
                 dst_storage=precision, src_strides=Strides(1, n_fft // 2 + 1, 0, 1),
                 dst_strides=Strides(1, n_fft, 0, 1))  # fmt: skip
    return fused, frames * window


# n_fft (half: one point, radix 3, 8, 15 = one stage, 200 = 10 x 10 x 2, 512 = 16 x 16 x 2
# with pairs > threads, 128 in float64, 256 = 16 x 16), hop, length, pad mode, exponent,
# dtype, normalized
ADJOINT_CASES = [
    (2, 1, 7, "reflect", 2.0, np.float64, False),
    (6, 2, 20, "constant", 1.0, np.float64, True),
    (16, 5, 50, "reflect", 1.5, np.float64, False),
    (30, 7, 90, "replicate", 2.0, np.float32, True),
    (400, 160, 900, "reflect", 2.0, np.float32, False),
    (1024, 256, 2000, "constant", 1.0, np.float32, False),
    (256, 64, 600, "circular", 2.0, np.float64, True),
    (512, 128, 1500, "reflect", 2.0, np.float32, False),
]


@pytest.mark.parametrize("case", ADJOINT_CASES, ids=lambda c: "-".join(map(str, c[:6])))
def test_emulated_fused_adjoint_is_the_chain_bit_for_bit(case, rng):
    """The fused adjoint kernel (forward FFT, cotangent, inverse FFT and window in one block)
    does the cotangent store's and the c2r kernel's operations in their order: the same
    bits as the chain, in float32 and float64."""
    n_fft, hop, length, mode, exponent, dtype, normalized = case
    p = _params(n_fft, hop, True, mode, normalized=normalized)
    x = rng.standard_normal((2, length)).astype(dtype)
    count = 1 + (length + 2 * p.pad - n_fft) // hop
    factors = rng.standard_normal((2, count, p.n_freq)).astype(dtype)
    fused, chain = _adjoint_chain(x, p, factors, exponent)
    assert np.array_equal(fused, chain)
    if dtype is np.float64:  # and the whole adjoint is the CPU backend's
        grad_x = np.zeros_like(x)
        transform_exec.overlap_add(emulate.HostBackend(), fused, grad_x, rows=2,
                                   sig_len=length, frame_len=n_fft, hop=hop, pad=p.pad,
                                   mode=mode, count=count, storage="float64",
                                   precision="float64")  # fmt: skip
        ref = cpu_stft.power_adjoint(x, None, p, exponent, np.swapaxes(factors, -1, -2))
        assert _peak_error(grad_x, ref) <= TOLERANCES["float64"]


@pytest.mark.parametrize("case", [(64, 16, 300, "reflect", 2.0, np.float64, 10),
                                  (400, 160, 900, "constant", 1.0, np.float32, 24)],
                         ids=lambda c: "-".join(map(str, c[:6])))  # fmt: skip
def test_emulated_fused_bank_adjoint_is_the_gather_then_the_adjoint(case, rng):
    """With a filterbank's cotangent G (expand_width), the fused adjoint forms each bin's
    factor as the bank gather kernel forms bank^T G (the same terms in the same order): the
    same bits as that gather (the project op's kernel) followed by the fused adjoint."""
    n_fft, hop, length, mode, exponent, dtype, n_mels = case
    p = _params(n_fft, hop, True, mode)
    precision = _PRECISION[dtype]
    x = rng.standard_normal((2, length)).astype(dtype)
    count = 1 + (length + 2 * p.pad - n_fft) // hop
    grad = rng.standard_normal((2, count, n_mels)).astype(dtype)  # frame-major
    bands, weights, _ = transform_exec.sparse_tables(
        filters.mel(sr=16000, n_fft=n_fft, n_mels=n_mels).T, precision
    )
    backend = emulate.HostBackend()
    factors = np.zeros((2, count, p.n_freq), dtype=dtype)
    transform_exec.bank(backend, grad, factors, bands, weights, rows=2 * count, n_in=n_mels,
                        n_out=p.n_freq, exponent=1.0, db_factor=None, eps=0.0,
                        storage=precision, precision=precision)  # fmt: skip
    window = np.array(cpu_stft.full_window(p, None, dtype))
    common = dict(signals=2, sig_len=length, n_fft=n_fft, hop=hop, pad=p.pad, mode=mode,
                  onesided=True, eps=0.0, scale=1.0, precision=precision,
                  src_storage=precision, dst_storage=precision, exponent=exponent,
                  value="adjoint", inverse_scale=1.0)  # fmt: skip
    chain = np.zeros((2, count, n_fft), dtype=dtype)
    transform_exec.stft(backend, x, chain, window, factors=factors, **common)
    width = weights.size // p.n_freq  # the most terms a bin: unrolled, or a loop (0: unknown)
    for terms in (width, 0):
        fused = np.zeros_like(chain)
        transform_exec.stft(backend, x, fused, window, factors=grad, bands=bands,
                            weights=weights, expand_width=n_mels, expand_terms=terms,
                            **common)  # fmt: skip
        assert np.array_equal(fused, chain) and np.abs(chain).max() > 0, terms


# n_fft, hop, length, center, pad mode, exponent, dtype, normalized, mel bands (0: factors
# given): hops that divide n_fft (sample pairs a thread) and odd ones (one sample) that do
# not, one partial block (3 frames) and several blocks, no padding in reflect mode, paddings
# that fold back (within the first / last seam, and for hops past n_fft / 2 inside a block),
# padded positions past the last frame
OLA_ADJOINT_CASES = [
    (16, 4, 50, True, "constant", 2.0, np.float64, False, 0),
    (16, 5, 61, True, "constant", 1.5, np.float64, True, 0),
    (32, 6, 300, False, "reflect", 1.0, np.float64, False, 0),
    (18, 6, 20, True, "constant", 2.0, np.float32, False, 0),
    (64, 16, 700, True, "constant", 2.0, np.float32, False, 10),
    (64, 12, 900, True, "constant", 2.0, np.float64, False, 10),
    (16, 4, 50, True, "reflect", 2.0, np.float64, False, 0),
    (16, 5, 61, True, "replicate", 1.5, np.float64, False, 0),
    (16, 12, 100, True, "reflect", 2.0, np.float64, True, 0),
    (18, 7, 11, True, "circular", 1.0, np.float64, False, 0),
    (64, 16, 700, True, "reflect", 2.0, np.float32, False, 10),
    (32, 10, 333, True, "reflect", 2.0, np.float32, False, 0),
]


@pytest.mark.parametrize("case", OLA_ADJOINT_CASES, ids=lambda c: "-".join(map(str, c[:7])))
def test_emulated_fused_adjoint_overlap_add(case, rng):
    """The fused adjoint with the overlap-add in its kernel (and the seam gather) against the
    CPU backend's adjoint and against the fused adjoint's frames + the overlap-add gather
    (which scales each frame rather than each sum, and sums two blocks' frames in one
    order); with a filterbank's cotangent G, F = bank^T G formed in the kernel."""
    n_fft, hop, length, center, mode, exponent, dtype, normalized, n_mels = case
    p = _params(n_fft, hop, center, mode, normalized=normalized)
    precision = _PRECISION[dtype]
    x = rng.standard_normal((2, length)).astype(dtype)
    count = 1 + (length + 2 * p.pad - n_fft) // hop
    assert transform_exec.adjoint_ola_fusable(n_fft, hop, p.pad, precision, count, length)
    backend = emulate.HostBackend()
    tables = {}
    if n_mels:
        bank = filters.mel(sr=16000, n_fft=n_fft, n_mels=n_mels)
        grad = rng.standard_normal((2, count, n_mels)).astype(dtype)  # frame-major
        bands, weights, _ = transform_exec.sparse_tables(bank.T, precision)
        tables = dict(factors=grad, bands=bands, weights=weights, expand_width=n_mels,
                      expand_terms=weights.size // p.n_freq)  # fmt: skip
        factors64 = grad.astype(np.float64) @ bank
    else:
        factors = rng.standard_normal((2, count, p.n_freq)).astype(dtype)
        tables = dict(factors=factors)
        factors64 = factors.astype(np.float64)
    window = np.array(cpu_stft.full_window(p, None, dtype))
    common = dict(signals=2, sig_len=length, n_fft=n_fft, hop=hop, pad=p.pad, mode=mode,
                  onesided=True, eps=0.0, scale=axis_scale(n_fft, p.fft_norm, False),
                  precision=precision, src_storage=precision, dst_storage=precision,
                  exponent=exponent, value="adjoint",
                  inverse_scale=axis_scale(n_fft, dual_norm(p.fft_norm), True))  # fmt: skip
    got = np.full((2, length), np.nan, dtype=dtype)
    transform_exec.stft(backend, x, got, window, overlap_add=True, **common, **tables)
    ref = cpu_stft.power_adjoint(x.astype(np.float64), None, p, exponent,
                                 np.swapaxes(factors64, -1, -2))  # fmt: skip
    tolerance = TOLERANCES["float64" if dtype is np.float64 else "float32_peak"]
    assert _peak_error(got, ref) <= tolerance
    frames = np.zeros((2, count, n_fft), dtype=dtype)
    transform_exec.stft(backend, x, frames, window, **common, **tables)
    chain = np.zeros_like(got)
    transform_exec.overlap_add(backend, frames, chain, rows=2, sig_len=length, frame_len=n_fft,
                               hop=hop, pad=p.pad, mode=mode, count=count, storage=precision,
                               precision=precision)  # fmt: skip
    assert _peak_error(got, chain) <= tolerance


def test_fused_adjoint_overlap_add_needs_a_block_of_frames():
    """The overlap-add goes into the adjoint's kernel where a block holds enough frames (any
    padding); the others keep the frames and the gathers."""
    fusable = transform_exec.adjoint_ola_fusable
    assert fusable(1024, 256, 512, "float32", 626, 160000)
    assert fusable(1024, 256, 0, "float32", 622, 160000)
    assert not fusable(1024, 32, 512, "float32", 5001, 160000)  # 31 frames of 64 threads
    assert not fusable(1023, 256, 511, "float32", 626, 160000)  # no packed kernel
    assert not fusable(1024, 256, 512, "float32", 2**23, 2**31)  # seam indices past 2 ** 31
    # the float32 adjoint kernel keeps registers for 3 blocks of 512 threads an SM (a reflect
    # padding's took 46 registers, 2 blocks, unbounded); the istft's (greedy radices 16, 16,
    # 2: one warp a frame) for 4 of 256 threads, as the plain radix-16 kernels
    from specux.kernels import fft_exec
    from specux.kernels.fft_exec import _adjoint_ola_spec, _ola_spec

    adjoint = _adjoint_ola_spec(1024, 256, "float32", "float32", "float32", True, False,
                                "indexed", 2)  # fmt: skip
    assert (adjoint.block_threads, adjoint.min_blocks) == (512, 3)
    small = _adjoint_ola_spec(64, 16, "float32", "float32", "float32", True, False, "indexed", 2)
    assert small.block_threads < 256 and small.min_blocks == 1
    istft = _ola_spec(1024, 256, "float32", "float32", "float32", True, True)
    assert (istft.radices, istft.block_threads, istft.min_blocks) == ((16, 16, 2), 256, 4)
    assert adjoint.radices == (8, 8, 8)  # even_radices: the cotangent + c2r chain's bits
    # shorter (blocks of 16 threads ran slower) and float64 istfts keep even_radices
    assert _ola_spec(64, 16, "float32", "float32", "float32", True, True).radices == (8, 4)
    istft64 = _ola_spec(1024, 256, "float64", "float64", "float64", True, True)
    assert (istft64.radices, istft64.min_blocks) == ((8, 8, 8), 1)
    # one condition (fft_exec.ola_fusable) for both kernels: the same frames a block, though
    # the istft's radices (so its threads a frame) may differ from the adjoint's
    for n_fft, hop, precision in [(1024, 256, "float32"), (1024, 61, "float32"),
                                  (1024, 60, "float32"), (16, 5, "float64"), (400, 7, "float64"),
                                  (512, 128, "float64"), (18, 7, "float32")]:  # fmt: skip
        args = (n_fft, hop, precision, precision, precision, True, False)
        try:
            frames = _adjoint_ola_spec(*args, "constant", 0).per_block
        except ValueError:
            frames = None
        if fft_exec.ola_fusable(n_fft, hop, precision):
            assert frames == _ola_spec(*args).per_block, (n_fft, hop)
        else:
            assert frames is None, (n_fft, hop)
    with pytest.raises(ValueError, match="does not overlap-add in its kernel"):
        transform_exec.stft(emulate.HostBackend(), np.zeros((1, 2000)), np.zeros((1, 2000)),
                            np.ones(1024), signals=1, sig_len=2000, n_fft=1024, hop=32,
                            pad=512, mode="reflect", onesided=True, value="adjoint", eps=0.0,
                            scale=1.0, precision="float64", src_storage="float64",
                            dst_storage="float64", factors=np.zeros((1, 63, 513)),
                            overlap_add=True)  # fmt: skip


def test_fused_adjoint_needs_a_packed_even_length():
    from specux.kernels.fft_exec import adjoint_fusable

    assert adjoint_fusable(1024, "float32") and adjoint_fusable(16384, "float32")
    assert not adjoint_fusable(1023, "float32")  # odd: no packed transform
    assert not adjoint_fusable(2 * 17, "float32")  # a prime above 13: Bluestein
    assert not adjoint_fusable(32768, "float64")  # half does not fit a block
    with pytest.raises(ValueError, match="adjoint of a 15-point stft"):
        transform_exec.stft(emulate.HostBackend(), np.zeros((1, 40)), np.zeros((1, 5, 15)),
                            np.ones(15), signals=1, sig_len=40, n_fft=15, hop=8, pad=0,
                            mode="constant", onesided=True, value="adjoint", eps=0.0,
                            scale=1.0, precision="float64", src_storage="float64",
                            dst_storage="float64", factors=np.zeros((1, 5, 8)))  # fmt: skip


FRAME_CASES = [
    (50, 16, 4, 8, "reflect"),
    (9, 12, 5, 6, "reflect"),  # shorter than the padding
    (40, 15, 4, 7, "circular"),
    (40, 16, 3, 8, "replicate"),
    (40, 16, 3, 8, "constant"),
    (30, 8, 8, 0, "constant"),
    (40, 6, 9, 0, "constant"),  # hop > frame: samples no frame covers
]


@pytest.mark.parametrize("case", FRAME_CASES, ids=lambda c: "-".join(map(str, c)))
def test_emulated_frame_and_its_adjoint(case, rng):
    length, frame_len, hop, pad, mode = case
    x = rng.standard_normal((3, length))
    ref = cpu_frames.frame(x, frame_len, hop, pad, mode)
    got = np.zeros_like(ref)
    common = dict(rows=3, sig_len=length, frame_len=frame_len, hop=hop, pad=pad, mode=mode,
                  count=ref.shape[1], storage="float64", precision="float64")  # fmt: skip
    backend = emulate.HostBackend()
    transform_exec.frame(backend, x, got, **common)
    assert np.array_equal(got, ref)  # a gather: the same samples
    grad = rng.standard_normal(ref.shape)
    ref_adjoint = cpu_frames.overlap_add_padded(grad, length, hop, pad, mode)
    adjoint = np.zeros((3, length))
    transform_exec.overlap_add(backend, grad, adjoint, **common)
    assert _peak_error(adjoint, ref_adjoint) <= TOLERANCES["float64"]
    window = rng.uniform(0.5, 1.5, frame_len)
    if transform_exec.folds(pad, mode):  # the windowed overlap-add folds nothing
        with pytest.raises(ValueError, match="folds no padding"):
            transform_exec.overlap_add(backend, grad, adjoint, window=window, **common)
        return
    ref_weighted = cpu_frames.overlap_add_padded(grad * window, length, hop, pad, mode)
    transform_exec.overlap_add(backend, grad, adjoint, window=window, **common)
    assert _peak_error(adjoint, ref_weighted) <= TOLERANCES["float64"]


@pytest.mark.parametrize("rows, count", [(3, 3), (2, 2), (1, 1)])
def test_emulated_frames_in_pairs(rows, count, rng):
    """frame's ``pairs``: frames interleaved two by two as complex rows, a zero frame after
    an odd count's last, a negative pad (frames starting inside the signal) and frames that
    run past its end reading zeros; a small launch, so the 32-bit index path runs."""
    length, frame_len, hop, pad = 30, 12, 9, -3
    x = rng.standard_normal((rows, length)).astype(np.float32)
    padded = np.zeros((rows, max(length, 3 + count * hop + frame_len)), dtype=np.float32)
    padded[:, :length] = x
    ref = np.stack([padded[:, 3 + t * hop : 3 + t * hop + frame_len] for t in range(count)],
                   axis=1).reshape(rows * count, frame_len)  # fmt: skip
    pairs = -(-rows * count // 2)
    got = np.full((pairs, frame_len, 2), np.nan, dtype=np.float32)
    transform_exec.frame(emulate.HostBackend(), x, got, rows=rows, sig_len=length,
                         frame_len=frame_len, hop=hop, pad=pad, mode="constant", count=count,
                         storage="float32", precision="float32", pairs=True)  # fmt: skip
    want = np.zeros((2 * pairs, frame_len), dtype=np.float32)
    want[: rows * count] = ref
    assert np.array_equal(got.transpose(0, 2, 1).reshape(2 * pairs, frame_len), want)
    with pytest.raises(ValueError, match="constant padding, not mode='reflect'"):
        transform_exec.frame(emulate.HostBackend(), x, got, rows=rows, sig_len=length,
                             frame_len=frame_len, hop=hop, pad=3, mode="reflect", count=count,
                             storage="float32", precision="float32", pairs=True)  # fmt: skip


def test_fold_table_is_the_padding_adjoint():
    for length, pad, mode in ((9, 6, "reflect"), (5, 7, "circular"), (4, 3, "replicate")):
        targets, offsets, positions = transform_exec.fold_table(length, pad, mode)
        sources = transform_exec.pad_sources(length, pad, mode)
        padded_position = np.concatenate([np.arange(pad), pad + length + np.arange(pad)])
        for q, target in enumerate(targets):
            mine = set(positions[offsets[q] : offsets[q + 1]].tolist())
            assert mine == set(padded_position[sources == target].tolist())
        assert offsets[-1] == 2 * pad


def test_pad_sources_are_numpy_pads_at_every_length():
    """The closed-form source map (O(pad) memory) is numpy.pad's, for pads longer than the
    signal too (repeated reflections, several wraps)."""
    numpy_mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}
    for mode, np_mode in numpy_mode.items():
        for length in range(1, 24):
            for pad in range(0, 60, 3):
                index = np.pad(np.arange(length), pad, mode=np_mode)
                left, right = cpu_frames.pad_sources(length, pad, mode)
                assert np.array_equal(left, index[:pad]), (mode, length, pad)
                assert np.array_equal(right, index[pad + length :]), (mode, length, pad)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_index_tables_of_signals_past_two_to_the_31(mode):
    """A signal of 2**31 + 2 samples: its pad sources and fold positions pass 2**31 - 1 and
    must not wrap (int32 tables made the kernels read and write ~8 GiB before the signal)."""
    length, pad = 2**31 + 2, 4
    sources = transform_exec.pad_sources(length, pad, mode)
    expected_right = {
        "reflect": length - 2 - np.arange(pad),
        "replicate": np.full(pad, length - 1),
        "circular": np.arange(pad),
    }[mode]
    expected_left = {
        "reflect": pad - np.arange(pad),
        "replicate": np.zeros(pad),
        "circular": length - pad + np.arange(pad),
    }[mode]
    assert sources.dtype == np.int64
    assert np.array_equal(sources, np.concatenate([expected_left, expected_right]))
    targets, offsets, positions = transform_exec.fold_table(length, pad, mode)
    assert {targets.dtype, offsets.dtype, positions.dtype} == {np.dtype(np.int64)}
    assert set(targets.tolist()) == set(sources.tolist())
    assert positions.max() == pad + length + pad - 1


@pytest.mark.parametrize("length", [None, 80, 30])
def test_emulated_istft_overlap_add(length, rng):
    p = _params(16, 5, True, "constant")
    spectrum = cpu_stft.stft(rng.standard_normal((2, 60)), None, p)
    ref = cpu_stft.istft(spectrum, None, p, length)
    frames = np.ascontiguousarray(np.fft.irfft(spectrum.swapaxes(-1, -2), n=16, axis=-1))
    window = np.array(cpu_stft.full_window(p, None, np.float64))
    count = spectrum.shape[-1]
    env = cpu_stft.envelope(p, window, count)
    start, stop, out_length = cpu_stft.istft_bounds(p, count, length)
    got = np.zeros((2, out_length))
    transform_exec.istft_overlap_add(emulate.HostBackend(), frames, got, window,
                                     np.ascontiguousarray(1 / env[start:stop]), rows=2,
                                     count=count,
                                     frame_len=16, hop=5, start=start, stop=stop,
                                     out_len=out_length, storage="float64",
                                     precision="float64")  # fmt: skip
    assert _peak_error(got, ref) <= TOLERANCES["float64"]


# (n_fft, hop, frames, length): hops that do not divide n_fft, a few frames of one block, many
# blocks, a hop that needs more frames a block (n_fft / hop = 16: 15), output past the frames,
# and n_fft 1024, whose float32 frames take a warp each (radices 16, 16, 2: warp barriers
# between the stages, the block's around the staged loads and the overlap-add).
FUSED_ISTFT_CASES = [(16, 4, 50, None), (16, 5, 61, 290), (16, 5, 61, 400), (18, 6, 3, None),
                     (64, 4, 76, None), (32, 12, 40, 500), (1024, 256, 19, None)]  # fmt: skip


@pytest.mark.parametrize("case", FUSED_ISTFT_CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["bins-major", "frame-major"])
def test_emulated_fused_istft(case, dtype, layout, rng):
    """The c2r kernel with the overlap-add in it (and its seam gather) against the CPU
    backend and against the inverse FFT's frames + the istft gather (which scales each frame
    rather than each sum, and sums two blocks' frames in one order)."""
    n_fft, hop, count, length = case
    precision = _PRECISION[dtype]
    p = _params(n_fft, hop, True, "constant")
    cdtype = np.complex128 if dtype is np.float64 else np.complex64
    spectrum = (rng.standard_normal((2, 3, p.n_freq, count))
                + 1j * rng.standard_normal((2, 3, p.n_freq, count))).astype(cdtype)
    ref = cpu_stft.istft(spectrum.astype(np.complex128), None, p, length)
    if layout == "frame-major":
        spectrum = np.ascontiguousarray(spectrum.swapaxes(-1, -2)).swapaxes(-1, -2)
    w64 = np.array(cpu_stft.full_window(p, None, np.float64))
    env = cpu_stft.envelope(p, w64, count)
    start, stop, out_len = cpu_stft.istft_bounds(p, count, length)
    envelope = np.ascontiguousarray((1 / env[start:stop]).astype(dtype))
    window = w64.astype(dtype)
    assert transform_exec.istft_fusable(n_fft, hop, precision, True, count, out_len)
    got = np.full((2, 3, out_len), np.nan, dtype=dtype)
    strides = tuple(s // spectrum.itemsize for s in spectrum.strides[1:])
    transform_exec.istft(emulate.HostBackend(), spectrum, got, window, envelope, signals=6,
                         strides=strides, count=count, n_fft=n_fft,
                         hop=hop, start=start, stop=stop, out_len=out_len, scale=1 / n_fft,
                         storage=precision, precision=precision)  # fmt: skip
    tolerance = TOLERANCES["float64" if dtype is np.float64 else "float32_peak"]
    assert _peak_error(got, ref) <= tolerance
    frames = emulate.fft_1d(np.ascontiguousarray(spectrum.swapaxes(-1, -2)), "c2r", n_fft,
                            sign=1, scale=1 / n_fft)  # fmt: skip
    chain = np.zeros_like(got)
    transform_exec.istft_overlap_add(emulate.HostBackend(), frames, chain, window, envelope,
                                     rows=6, count=count, frame_len=n_fft, hop=hop,
                                     start=start, stop=stop, out_len=out_len,
                                     storage=precision, precision=precision)  # fmt: skip
    assert _peak_error(got, chain) <= tolerance


def _at_offset(shape, dtype, offset: int) -> np.ndarray:
    """A zeroed array whose data starts ``offset`` bytes past a 64-byte boundary."""
    itemsize, n = np.dtype(dtype).itemsize, int(np.prod(shape))
    buf = np.zeros(n + 64 // itemsize, dtype)
    skip = (offset - buf.ctypes.data) % 64 // itemsize
    out = buf[skip:skip + n].reshape(shape)
    assert out.ctypes.data % 64 == offset
    return out


@pytest.mark.parametrize("offset", [0, 8, 16])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_emulated_seam_vectors_keep_the_bits(dtype, offset, monkeypatch, rng):
    """The seam gather's vector stores (four aligned positions at once, gather.SEAM_VECTORS)
    give the scalar stores' bits: the istft (an envelope) on rows whose alignment alternates
    (an odd length), the stft adjoint (no envelope) with a folding padding of a multiple of
    four and of none (groups of four across the padding's edge); outputs and envelope at
    pinned offsets from a 64-byte boundary, whatever numpy's allocator does: each of the
    three kernels takes the vector stores at one offset at least and only scalar stores at
    another, in both precisions (checked by marking the vector stores)."""
    from specux.kernels.codegen import gather

    n_fft, hop, count, length = 16, 4, 50, 203
    precision = _PRECISION[dtype]
    p = _params(n_fft, hop, True, "constant")
    cdtype = np.complex128 if dtype is np.float64 else np.complex64
    spectrum = (rng.standard_normal((3, p.n_freq, count))
                + 1j * rng.standard_normal((3, p.n_freq, count))).astype(cdtype)
    w64 = np.array(cpu_stft.full_window(p, None, np.float64))
    env = cpu_stft.envelope(p, w64, count)
    start, stop, out_len = cpu_stft.istft_bounds(p, count, length)
    envelope = _at_offset((stop - start,), dtype, offset)
    envelope[:] = 1 / env[start:stop]
    x = rng.standard_normal((2, 700)).astype(dtype)
    adjoints = [(64, 16), (36, 8)]  # padding 32 and 18: 18 is no multiple of four
    factors = {n: rng.standard_normal((2, 1 + 700 // h, n // 2 + 1)).astype(dtype)
               for n, h in adjoints}  # frame-major

    def run():
        emulate.entry.cache_clear()
        emulate._entry_for_key.cache_clear()
        got = _at_offset((3, out_len), dtype, offset)
        transform_exec.istft(emulate.HostBackend(), spectrum, got, w64.astype(dtype),
                             envelope, signals=3, strides=(p.n_freq * count, count, 1),
                             count=count, n_fft=n_fft, hop=hop, start=start, stop=stop,
                             out_len=out_len, scale=1 / n_fft, storage=precision,
                             precision=precision)  # fmt: skip
        outs = [got]
        for n, h in adjoints:
            grad = _at_offset(x.shape, dtype, offset)
            transform_exec.stft(emulate.HostBackend(), x, grad,
                                np.hanning(n + 1)[:-1].astype(dtype), signals=2, sig_len=700,
                                n_fft=n, hop=h, pad=n // 2, mode="reflect", onesided=True,
                                value="adjoint", eps=0.0, scale=1.0, precision=precision,
                                src_storage=precision, dst_storage=precision, exponent=2.0,
                                inverse_scale=1 / n, factors=factors[n],
                                overlap_add=True)  # fmt: skip
            outs.append(grad)
        return outs

    vectors = run()
    monkeypatch.setattr(gather, "SEAM_VECTORS", False)
    scalars = run()
    monkeypatch.undo()
    emulate.entry.cache_clear()
    emulate._entry_for_key.cache_clear()
    bits = np.uint64 if dtype is np.float64 else np.uint32
    for a, b in zip(vectors, scalars):
        assert np.isfinite(a).all() and np.abs(a).max() > 0
        np.testing.assert_array_equal(a.view(bits), b.view(bits))


def test_ola_frames():
    """At least OLA_FRAMES frames a block, and enough that two blocks' frames at most overlap
    any sample; none past a block's threads and shared memory, or for hops past n_fft."""
    for n_fft, hop in [(1024, 256), (1024, 64), (16, 5), (1000, 333), (64, 4)]:
        frames = plan.ola_frames(n_fft, hop, 1, "float32")
        assert frames >= plan.OLA_FRAMES and frames * hop >= n_fft - hop
    assert plan.ola_frames(1024, 256, 64, "float32") == plan.OLA_FRAMES
    assert plan.ola_frames(1024, 32, 64, "float32") is None  # 31 frames of 64 threads
    assert plan.ola_frames(1024, 1025, 1, "float32") is None
    assert plan.ola_frames(17, 4, 1, "float32") is None  # odd: no packed c2r
    assert not transform_exec.istft_fusable(1024, 256, "float32", False, 626, 160000)
    assert not transform_exec.istft_fusable(1025, 256, "float32", True, 626, 160000)
    assert transform_exec.istft_fusable(1024, 64, "float32", True, 2501, 160000)
    assert not transform_exec.istft_fusable(1024, 256, "float32", True, 2**23, 2**31)
    # frames up to 2 ** 31 and a short length: the last block's positions would pass 2 ** 31
    assert not transform_exec.istft_fusable(1024, 1000, "float32", True, 2147481, 600)
    assert transform_exec.istft_fusable(1024, 1000, "float32", True, 2147000, 600)


@pytest.mark.parametrize("power, db", [(2.0, False), (1.0, True), (1.5, False)])
def test_emulated_sparse_bank(power, db, rng):
    p = _params(64, 16, True, "constant")
    x = rng.standard_normal((2, 300))
    mel = filters.mel(sr=8000, n_fft=64, n_mels=10)
    spectrum = np.ascontiguousarray(
        _stft(x, p, "power" if power == 2.0 else "magnitude").swapaxes(-1, -2)
    )
    sparse = filters.sparse_bank(mel)
    bands, weights = transform_exec.bank_tables(sparse.starts, sparse.stops, sparse.weights)
    out = np.zeros((2, spectrum.shape[1], 10))
    transform_exec.bank(emulate.HostBackend(), spectrum, out, bands, weights, rows=out.size // 10,
                        n_in=33, n_out=10, exponent=1.0 if power in (1.0, 2.0) else power,
                        db_factor=20.0 / power if db else None, eps=1e-10, storage="float64",
                        precision="float64")  # fmt: skip
    # and fused: the reduce in the stft kernel's epilogue (n_fft 64 packed, 63 plain, 61
    # Bluestein)
    fused = {}
    for n_fft in (64, 63, 61):
        q = _params(n_fft, 16, True, "constant")
        bank = filters.mel(sr=8000, n_fft=n_fft, n_mels=10)
        sparse = filters.sparse_bank(bank)
        bands, weights = transform_exec.bank_tables(sparse.starts, sparse.stops, sparse.weights)
        count = 1 + 300 // 16
        fused[n_fft] = np.zeros((2, count, 10))
        transform_exec.stft(emulate.HostBackend(), x, fused[n_fft],
                            np.array(cpu_stft.full_window(q, None, np.float64)), signals=2,
                            sig_len=300, n_fft=n_fft, hop=16, pad=q.pad, mode="constant",
                            onesided=True, value="power", eps=1e-10, scale=1.0,
                            precision="float64", src_storage="float64", dst_storage="float64",
                            bank=transform_exec.BankReduce(10, power, 20.0 / power if db else None),
                            bands=bands, weights=weights)  # fmt: skip
    for n_fft, values in [(64, out), *fused.items()]:
        q = _params(n_fft, 16, True, "constant")
        bank = filters.mel(sr=8000, n_fft=n_fft, n_mels=10)
        ref = cpu_features.bank_spectrogram(x, None, q, power, bank, "db" if db else "power",
                                            1e-10)  # fmt: skip
        got = values.swapaxes(-1, -2)
        if db:
            assert np.max(np.abs(got - ref)) <= TOLERANCES["db_abs64"], n_fft
        else:
            assert _peak_error(got, ref) <= TOLERANCES["float64"], n_fft


# The fused reduce's groups of transforms (plan.FRAMED_THREADS): n_fft 128 (32 transforms a
# block: 4 groups of 8, and with 200 bands several (group, band) pairs per thread), 400 (6: 2
# groups of 3), 250 (5: one group of 5), 1000 (2: one group of 2), 1024 (4: 2 groups of 2,
# the mel workload's).
REDUCE_CASES = [(128, 24, 8, 20), (128, 24, 8, 200), (400, 120, 3, 40), (250, 60, 5, 40),
                (1000, 300, 2, 80), (1024, 256, 2, 80)]


@pytest.mark.parametrize("n_fft, hop, frames, n_bands", REDUCE_CASES)
def test_fused_reduce_groups(n_fft, hop, frames, n_bands, rng):
    """The fused filterbank stft (float32, the reduce summing a band of a group of
    transforms per thread) equals the CPU backend, in dB too, and gives the same bits with a
    sparse bank's tables as with the dense tables of the same matrix (each band's terms in
    bin order, the dropped ones exact zeros)."""
    from specux.kernels import plan
    from specux.kernels.codegen.block import reduce_frames

    p = _params(n_fft, hop, True, "reflect")
    load = plan.LoadSpec(plan.USER, "real", "float32", frames="constant", window=True)
    store = plan.StoreSpec(plan.USER, "half", "float32", logical=n_fft, value="power",
                           reduce="bank", bins=p.n_freq, bands=n_bands)  # fmt: skip
    spec = plan.block(n_fft // 2, -1, "float32", load, store, pack="r2c")
    assert reduce_frames(spec.per_block) == frames
    x = rng.standard_normal((2, 3 * n_fft)).astype(np.float32)
    if n_bands <= 80:
        bank = filters.mel(sr=16000, n_fft=n_fft, n_mels=n_bands)
    else:  # more bands than bins: overlapping random bands
        bank = np.zeros((n_bands, p.n_freq))
        for m in range(n_bands):
            start = m * (p.n_freq - 8) // n_bands
            bank[m, start:start + 1 + m % 8] = rng.uniform(0.1, 1.0, 1 + m % 8)
    sparse = filters.sparse_bank(bank)
    tables = {
        "sparse": transform_exec.bank_tables(sparse.starts, sparse.stops,
                                             sparse.weights.astype(np.float32)),
        "dense": (transform_exec.dense_bands(n_bands, p.n_freq),
                  np.ascontiguousarray(bank.T, np.float32).ravel()),
    }  # fmt: skip
    window = np.array(cpu_stft.full_window(p, None, np.float32))
    count = 1 + (x.shape[-1] + 2 * p.pad - n_fft) // hop
    for db in (None, 10.0):
        got = {}
        for name, (bands, weights) in tables.items():
            got[name] = np.zeros((2, count, n_bands), np.float32)
            transform_exec.stft(emulate.HostBackend(), x, got[name], window, signals=2,
                                sig_len=x.shape[-1], n_fft=n_fft, hop=hop, pad=p.pad,
                                mode="reflect", onesided=True, value="power", eps=1e-10,
                                scale=1.0, precision="float32", src_storage="float32",
                                dst_storage="float32",
                                bank=transform_exec.BankReduce(n_bands, 2.0, db), bands=bands,
                                weights=weights)  # fmt: skip
        np.testing.assert_array_equal(got["sparse"], got["dense"])
        ref = cpu_features.bank_spectrogram(x.astype(np.float64), None, p, 2.0, bank,
                                            "db" if db else "power", 1e-10)  # fmt: skip
        value = got["sparse"].swapaxes(-1, -2)
        if db:
            assert np.max(np.abs(value - ref)) <= TOLERANCES["db_abs32"]
        else:
            assert _peak_error(value, ref) <= TOLERANCES["float32_peak"]


# n_fft of the fused reduce's untangled last stages: 16 (one radix-8 stage), 36 (9 x 2:
# slot 0 alone, s odd; a partial pass of slots), 40 (10 x 2: s even, partial), 128 (16 x 4)
# and the mel workload's 1024 (16 x 16 x 2)
IN_SLOT_CASES = [16, 36, 40, 128, 1024]


@pytest.mark.parametrize("n_fft", IN_SLOT_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_emulated_reduce_in_slot_gives_the_same_bits(n_fft, dtype, monkeypatch, rng):
    """plan.REDUCE_IN_SLOT: the fused filterbank stft's reduce values in each transform's
    own slot (held in registers until the last stage's reads are done) give the same bits
    as in an area of their own -- power, its dB, magnitude and a power of 1.5, float32 and
    float64 -- and a block then takes no shared memory for them. The bank's bands cover
    every bin, DC and Nyquist too (slot 0's values, stored under their own condition)."""
    from specux.kernels import tuning

    def forget():  # the programs planned and kernels built under the other setting
        tuning._clear_plans()
        emulate.entry.cache_clear()
        emulate._entry_for_key.cache_clear()

    precision = np.dtype(dtype).name
    hop, n_bands = max(1, n_fft // 4), 6
    p = _params(n_fft, hop, True, "reflect")
    x = rng.standard_normal((2, 3 * n_fft + 5)).astype(dtype)
    bank = np.zeros((n_bands, p.n_freq))
    edges = np.linspace(0, p.n_freq, n_bands + 1).astype(int)
    for m in range(n_bands):  # overlapping bands over every bin
        start, stop = max(0, edges[m] - 1), min(p.n_freq, edges[m + 1] + 1)
        bank[m, start:stop] = rng.uniform(0.1, 1.0, stop - start)
    sparse = filters.sparse_bank(bank)
    bands, weights = transform_exec.bank_tables(sparse.starts, sparse.stops,
                                                sparse.weights.astype(dtype))  # fmt: skip
    window = np.array(cpu_stft.full_window(p, None, dtype))
    count = 1 + (x.shape[-1] + 2 * p.pad - n_fft) // hop
    load = plan.LoadSpec(plan.USER, "real", precision, frames="reflect", window=True)
    store = plan.StoreSpec(plan.USER, "half", precision, logical=n_fft, value="power",
                           reduce="bank", bins=p.n_freq, bands=n_bands)  # fmt: skip
    got = {}
    for in_slot in (False, True):
        monkeypatch.setattr(plan, "REDUCE_IN_SLOT", in_slot)
        forget()
        spec = plan.block(n_fft // 2, -1, precision, load, store, pack="r2c")
        assert spec.reduce_in_slot == in_slot
        assert spec.shared_bytes == spec.per_block * (plan.skewed(n_fft // 2, precision)
                                                      + spec.slot_extra) * 2 * x.itemsize + (
            0 if in_slot else spec.per_block * p.n_freq * x.itemsize)  # fmt: skip
        got[in_slot] = []
        for value, power, db in (("power", 2.0, None), ("power", 2.0, 10.0),
                                 ("magnitude", 1.0, None), ("pow", 1.5, None)):  # fmt: skip
            out = np.zeros((2, count, n_bands), dtype)
            transform_exec.stft(emulate.HostBackend(), x, out, window, signals=2,
                                sig_len=x.shape[-1], n_fft=n_fft, hop=hop, pad=p.pad,
                                mode="reflect", onesided=True, value=value, eps=1e-10,
                                scale=1.0, precision=precision, src_storage=precision,
                                dst_storage=precision,
                                bank=transform_exec.BankReduce(n_bands, power, db),
                                bands=bands, weights=weights, exponent=power)  # fmt: skip
            got[in_slot].append(out)
    forget()
    for a, b in zip(got[False], got[True]):
        np.testing.assert_array_equal(a, b)
    from specux.kernels.codegen.block import render_block
    from specux.kernels.codegen.dialects import CUDA

    with pytest.raises(ValueError, match="untangles in registers"):  # the exchange path
        render_block(dataclasses.replace(spec, store=plan.StoreSpec()), CUDA)
    ref = cpu_features.bank_spectrogram(x.astype(np.float64), None, p, 2.0, bank, "power",
                                        1e-10)  # fmt: skip
    bound = TOLERANCES["float32_peak" if dtype == np.float32 else "float64"]
    assert _peak_error(got[True][0].swapaxes(-1, -2), ref) <= bound


# --------------------------------------------------------------------------------------------
# bfloat16 storage: the kernels load and store bfloat16 themselves and compute in float32.
# numpy has no bfloat16, so the buffers here hold its bits as uint16.


def _to_bfloat16(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, rounded to nearest even (as torch and the kernels round)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _from_bfloat16(bits: np.ndarray) -> np.ndarray:
    return (np.ascontiguousarray(bits).astype(np.uint32) << 16).view(np.float32)


def test_bfloat16_helpers_round_like_torch():
    torch = pytest.importorskip("torch")
    values = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5e-3, 3.4e38, 1e-40], np.float32)
    want = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(_to_bfloat16(values), want)
    assert np.array_equal(_from_bfloat16(want), torch.from_numpy(want.view(np.int16))
                          .view(torch.bfloat16).float().numpy())  # fmt: skip


@pytest.mark.parametrize("value", ["complex", "magnitude", "power"])
@pytest.mark.parametrize("n_fft", [16, 15, 17])  # packed, plain, Bluestein
def test_emulated_stft_bfloat16_storage(n_fft, value, rng):
    """A bfloat16 signal in, complex64 (complex) or bfloat16 (real values) out."""
    p = _params(n_fft, 4, True, "reflect")
    bits = _to_bfloat16(rng.standard_normal((2, 50)))
    x = _from_bfloat16(bits).astype(np.float64)  # exactly the samples the kernel reads
    count = 1 + (50 + 2 * p.pad - n_fft) // 4
    complex_out = value == "complex"
    out = np.zeros((2, count, p.n_freq), np.complex64 if complex_out else np.uint16)
    transform_exec.stft(emulate.HostBackend(), bits, out,
                        np.array(cpu_stft.full_window(p, None, np.float32)), signals=2,
                        sig_len=50, n_fft=n_fft, hop=4, pad=p.pad, mode="reflect", onesided=True,
                        value=value, eps=1e-10, scale=1.0, precision="float32",
                        src_storage="bfloat16",
                        dst_storage="float32" if complex_out else "bfloat16")  # fmt: skip
    got = (out if complex_out else _from_bfloat16(out)).swapaxes(-1, -2)
    ref = cpu_stft.stft(x, None, p, value, 1e-10)
    bound = TOLERANCES["float32_peak"] if complex_out else TOLERANCES["bfloat16_store"]
    assert _peak_error(got, ref) <= bound


def test_emulated_bfloat16_bank_frames_and_projection(rng):
    """The fused filterbank (bfloat16 in and out), the frame gather (bit-exact) and the
    projection gather (the DCT of mfcc) on bfloat16 buffers."""
    p = _params(64, 16, True, "constant")
    bits = _to_bfloat16(rng.standard_normal((2, 300)))
    x = _from_bfloat16(bits).astype(np.float64)
    bank = filters.mel(sr=8000, n_fft=64, n_mels=10)
    sparse = filters.sparse_bank(bank)
    bands, weights = transform_exec.bank_tables(sparse.starts, sparse.stops,
                                                sparse.weights.astype(np.float32))  # fmt: skip
    count = 1 + 300 // 16
    fused = np.zeros((2, count, 10), np.uint16)
    transform_exec.stft(emulate.HostBackend(), bits, fused,
                        np.array(cpu_stft.full_window(p, None, np.float32)), signals=2,
                        sig_len=300, n_fft=64, hop=16, pad=p.pad, mode="constant", onesided=True,
                        value="power", eps=1e-10, scale=1.0, precision="float32",
                        src_storage="bfloat16", dst_storage="bfloat16",
                        bank=transform_exec.BankReduce(10, 2.0), bands=bands,
                        weights=weights)  # fmt: skip
    ref = cpu_features.bank_spectrogram(x, None, p, 2.0, bank, "power", 1e-10)
    got = _from_bfloat16(fused).swapaxes(-1, -2)
    assert _peak_error(got, ref) <= TOLERANCES["bfloat16_store"]

    q = _params(16, 5, True, "reflect")
    framed = np.zeros((2, 1 + (300 + 2 * q.pad - 16) // 5, 16), np.uint16)
    transform_exec.frame(emulate.HostBackend(), bits, framed, rows=2, sig_len=300, frame_len=16,
                         hop=5, pad=q.pad, mode="reflect", count=framed.shape[1],
                         storage="bfloat16", precision="float32")  # fmt: skip
    want = cpu_frames.frame(x, 16, 5, q.pad, "reflect")
    assert np.array_equal(_from_bfloat16(framed), want)  # a gather moves the bits unchanged

    # the projection (mfcc's DCT): rows of 10 features -> 4 outputs, dense bands
    features = _to_bfloat16(rng.standard_normal((2, count, 10)))
    matrix = filters.dct(4, 10, dct_type=2, norm="ortho")
    dense = transform_exec.dense_bands(4, 10)
    projected = np.zeros((2, count, 4), np.uint16)
    transform_exec.bank(emulate.HostBackend(), features, projected, dense,
                        np.ascontiguousarray(matrix.T, np.float32).ravel(), rows=2 * count,
                        n_in=10, n_out=4, exponent=1.0, db_factor=None, eps=0.0,
                        storage="bfloat16", precision="float32")  # fmt: skip
    ref = _from_bfloat16(features).astype(np.float64) @ matrix.T
    assert _peak_error(_from_bfloat16(projected), ref) <= TOLERANCES["bfloat16_store"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_emulated_dense_projection_is_the_gathers_bits(dtype, rng):
    """A dense matrix (mfcc's DCT) runs as the projection kernel (transform_exec.project),
    which sums each output over ascending k in one accumulator as the bank gather does: the
    same bits, for row counts that leave partial blocks; a sparse matrix (a mel bank) keeps
    the gather."""
    from specux.kernels import emulate
    from specux.meta import matrices
    from specux.meta.matrices import MatrixSpec

    precision = np.dtype(dtype).name
    key = matrices.dct_spec(n_out=13, n_in=40, dct_type=2, norm="ortho", lifter=0.0).as_key()
    assert transform_exec.named_dense(key, precision)
    bands, weights, n_in = transform_exec.sparse_bank(key, precision)
    mel = filters.sparse_bank(filters.mel(sr=8000, n_fft=64, n_mels=10))
    mel_bands, _ = transform_exec.bank_tables(mel.starts, mel.stops, mel.weights)
    assert not transform_exec.is_dense(mel_bands, 33)
    for rows in (1, 37, 300):
        x = rng.standard_normal((rows, n_in)).astype(dtype)
        outs = []
        for dense in (True, False):
            out = np.zeros((rows, 13), dtype)
            transform_exec.project(emulate.HostBackend(), x, out, bands, weights, rows=rows,
                                   n_in=n_in, n_out=13, storage=precision,
                                   precision=precision, dense=dense)  # fmt: skip
            outs.append(out)
        np.testing.assert_array_equal(outs[0], outs[1])
        dct = matrices.matrix(MatrixSpec.from_key(key), np.dtype("float64"))
        ref = x.astype(np.float64) @ dct.T
        assert _peak_error(outs[0], ref) <= TOLERANCES[f"{precision}_peak"]


@pytest.mark.parametrize("n_out, n_in", [
    (20, 80),  # mfcc's DCT: 5 warps
    (80, 20),  # its transpose (mfcc's backward): 20 warps, outputs wider than the rows
    (13, 9),  # a partial warp of columns, a row stride padded from 9
    (128, 3),  # the most columns: 32 warps
    (4, 128),  # one warp: its staged vector loads in eight rounds of eight
    (1, 1),
])  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_emulated_projection_kernel_gives_the_gathers_bits(dtype, n_out, n_in, rng):
    """transform_exec.dense_project (the ``project`` kernel: 32 or 64 rows a block, a warp
    per four columns) gives the bank gather's bits for a dense matrix, writes nothing past its
    rows, and is the float64 product to the precision's tolerance."""
    from specux.kernels import emulate

    precision = np.dtype(dtype).name
    matrix = rng.standard_normal((n_out, n_in)).astype(dtype)
    weights = np.ascontiguousarray(matrix.T)
    bands = transform_exec.dense_bands(n_out, n_in)
    rows = 67  # two or three blocks of rows (64 or 32 a block), the last holding 3
    x = rng.standard_normal((rows, n_in)).astype(dtype)
    got = np.full((rows + 1, n_out), 7.0, dtype)  # a row past the output: untouched
    transform_exec.dense_project(emulate.HostBackend(), x, got, weights, rows=rows,
                                 n_in=n_in, n_out=n_out, precision=precision)  # fmt: skip
    ref = np.zeros((rows, n_out), dtype)
    transform_exec.bank(emulate.HostBackend(), x, ref, bands, weights, rows=rows, n_in=n_in,
                        n_out=n_out, exponent=1.0, db_factor=None, eps=0.0, storage=precision,
                        precision=precision)  # fmt: skip
    np.testing.assert_array_equal(got[:rows], ref)
    assert (got[rows] == 7.0).all()
    exact = x.astype(np.float64) @ matrix.T.astype(np.float64)
    assert _peak_error(got[:rows], exact) <= TOLERANCES[f"{precision}_peak"]


@pytest.mark.parametrize("clip", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_emulated_projection_stages_unaligned_rows_as_aligned_ones(dtype, clip, rng):
    """The project kernel stages a whole block of rows whose start is 16-byte aligned as
    vectors (every load in flight), else value by value: rows one value past an aligned
    start, and a last partial block, give the aligned rows' bits, clipped or not, with
    two rows a lane (float32, 64-row blocks) and one (float64 n_in 80: 32-row blocks,
    the shared memory of 64 would pass PROJECT_SHARED)."""
    from specux.kernels import emulate
    from specux.kernels.codegen import gather

    precision = np.dtype(dtype).name
    n_in, n_out = 80, 20
    option = gather.project_option(n_in, n_out, precision)
    block_rows = gather.project_rows(option, precision)
    assert block_rows == (64 if dtype == np.float32 else 32)
    rows, signals = 2 * block_rows + 5, 1
    weights = np.ascontiguousarray(rng.standard_normal((n_out, n_in)).astype(dtype).T)
    values = rng.standard_normal((rows, n_in)).astype(dtype)
    peaks = np.array([values.max() - 0.5], dtype) if clip else None
    outs = []
    for start in (0, 1):  # numpy's buffers are 16-byte aligned: start 1 is not
        x = np.zeros(rows * n_in + 1, dtype)[start:start + rows * n_in].reshape(rows, n_in)
        x[...] = values
        assert (x.ctypes.data % 16 == 0) == (start == 0)
        out = np.zeros((rows, n_out), dtype)
        transform_exec.dense_project(emulate.HostBackend(), x, out, weights, rows=rows,
                                     n_in=n_in, n_out=n_out, precision=precision,
                                     count=rows // signals, peaks=peaks,
                                     top_db=1.0)  # fmt: skip
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    floor = peaks[0] - dtype(1.0) if clip else -np.inf
    exact = np.maximum(values, floor).astype(np.float64) @ weights.astype(np.float64)
    assert _peak_error(outs[0], exact) <= TOLERANCES[f"{precision}_peak"]


def test_projection_kernel_vector_staging_is_rendered_where_rows_are_whole_vectors():
    """The vector staging is rendered only where a row is a whole number of 16-byte
    vectors (n_in a multiple of 4 in float32, of 2 in float64)."""
    from specux.kernels.codegen.dialects import CUDA
    from specux.kernels.codegen.gather import GatherSpec, render_gather

    def vector(n_in: int, precision: str) -> bool:
        spec = GatherSpec("project", precision, precision, f"i{n_in}o20")
        return "const vec_t* src" in render_gather(spec, CUDA)

    assert vector(80, "float32") and not vector(82, "float32")
    assert vector(82, "float64") and not vector(81, "float64")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_emulated_projection_routes_agree(dtype, rng, monkeypatch):
    """transform_exec.project on the projection kernel (``_PROJECT_KERNEL`` on), on the
    tiled correlation and, unclipped, on the bank gather gives the same bits: a DCT
    clipped at each signal's peak minus top_db, and its transpose (mfcc's backward)."""
    from specux.kernels import emulate
    from specux.meta import matrices

    precision = np.dtype(dtype).name
    signals, frames = 2, 45
    for n_out, n_in, transpose in ((13, 40, False), (40, 13, True)):
        spec = matrices.dct_spec(n_out=n_out if not transpose else n_in,
                                 n_in=n_in if not transpose else n_out, dct_type=2,
                                 norm="ortho", lifter=0.0)  # fmt: skip
        key = spec.transposed().as_key() if transpose else spec.as_key()
        bands, weights, width = transform_exec.sparse_bank(key, precision)
        assert width == n_in and transform_exec.is_dense(bands, n_in)
        x = rng.standard_normal((signals * frames, n_in)).astype(dtype)
        x[frames:] -= 3.0  # the second signal's floor differs
        peaks = np.array([x[:frames].max(), x[frames:].max()], dtype)
        outs = {}
        for route in ("project", "correlate", "gather"):
            monkeypatch.setattr(transform_exec, "_PROJECT_KERNEL", route == "project")
            for clip in (True, False):
                if clip and route == "gather":
                    continue
                out = np.zeros((signals * frames, n_out), dtype)
                transform_exec.project(emulate.HostBackend(), x, out, bands, weights,
                                       rows=signals * frames, n_in=n_in, n_out=n_out,
                                       storage=precision, precision=precision,
                                       dense=route != "gather", signals=signals,
                                       peaks=peaks if clip else None, top_db=1.5)  # fmt: skip
                outs[route, clip] = out
        for route, clip in outs:
            np.testing.assert_array_equal(outs[route, clip], outs["correlate", clip])
        assert not np.array_equal(outs["project", True], outs["project", False])


def test_projection_kernel_shapes():
    """The projection kernel takes up to PROJECT_MAX_OUT outputs and a block's shared memory
    up to PROJECT_SHARED bytes (project, transform_exec, sends other dense matrices to the
    tiled correlation); malformed options and shapes it does not take are refused by name."""
    from specux.kernels.codegen import gather

    fits, project_option = gather.project_fits, gather.project_option
    PROJECT_MAX_OUT, GatherSpec = gather.PROJECT_MAX_OUT, gather.GatherSpec

    assert project_option(80, 20, "float32") == "i80o20"
    # shared memory: mfcc's DCT of 128 mel bands in float32 (17 KB a block for 80), not in
    # float64 (54 KB) nor of 256 bands in float32
    assert fits(128, 20, "float32") and not fits(128, 20, "float64")
    assert not fits(256, 20, "float32")
    assert fits(1, PROJECT_MAX_OUT, "float64")
    assert not fits(1, PROJECT_MAX_OUT + 1, "float32") and not fits(0, 4, "float32")
    with pytest.raises(ValueError, match="does not fit the project kernel"):
        project_option(4, 129, "float32")
    for option in ("n20", "i80", "c8n3m4", "i4o0"):
        with pytest.raises(ValueError, match="project option|does not fit"):
            GatherSpec("project", "float32", "float32", option)


def _spy_launches(monkeypatch) -> list[str]:
    """The kinds the host emulation launches from now on, in order."""
    from specux.kernels import emulate

    launched = []
    launch = emulate.HostBackend.launch

    def spy(self, spec, *args):
        launched.append(spec.kind)
        return launch(self, spec, *args)

    monkeypatch.setattr(emulate.HostBackend, "launch", spy)
    return launched


@pytest.mark.parametrize("chunk, launches", [
    (100, ["rowmax", "project_clip"]),  # 8 chunks a signal: the kernel takes their maximum
    (50, ["rowmax", "rowmax", "project_clip"]),  # 16: more than PROJECT_PEAK_CHUNKS
    (10**6, ["rowmax", "project_clip"]),  # one chunk: its maximum is the peak
])  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_emulated_clip_peaks_hands_the_kernel_chunk_maxima(dtype, chunk, launches, rng,
                                                         monkeypatch):  # fmt: skip
    """transform_exec.clip_peaks (which project's ``clip`` calls) gives the projection kernel
    each signal's chunk maxima (row_max's first launch only) where a signal has at most
    PROJECT_PEAK_CHUNKS chunks, else the peaks themselves; the clipped projection is the
    bits of the projection with numpy's peaks either way, a NaN in a signal's last chunk
    makes all of that signal's outputs NaN, and the tiled correlation (the kernel off)
    always gets the peaks."""
    from specux.kernels import emulate
    from specux.meta import matrices

    assert transform_exec.PROJECT_PEAK_CHUNKS == 8
    monkeypatch.setattr(transform_exec, "ROWMAX_CHUNK", chunk)
    launched = _spy_launches(monkeypatch)
    precision = np.dtype(dtype).name
    key = matrices.dct_spec(n_out=13, n_in=40, dct_type=2, norm="ortho", lifter=0.0).as_key()
    bands, weights, n_in = transform_exec.sparse_bank(key, precision)
    signals, frames, top_db = 3, 20, 2.0  # 800 values a signal
    x = rng.standard_normal((signals * frames, n_in)).astype(dtype)
    x[frames:2 * frames] -= 3.0  # the second signal's floor differs
    x[3 * frames - 1, n_in - 1] = np.nan  # the last signal's last value

    def project(peaks, chunks, clip=False):
        out = np.zeros((signals * frames, 13), dtype)
        transform_exec.project(emulate.HostBackend(), x, out, bands, weights,
                               rows=signals * frames, n_in=n_in, n_out=13, storage=precision,
                               precision=precision, dense=True, signals=signals, clip=clip,
                               peaks=peaks, peak_chunks=chunks, top_db=top_db)  # fmt: skip
        return out

    with np.errstate(invalid="ignore"):
        ref = project(x.reshape(signals, -1).max(axis=1), 1)
    for kernel in (True, False):
        monkeypatch.setattr(transform_exec, "_PROJECT_KERNEL", kernel)
        launched.clear()
        peaks, chunks = transform_exec.clip_peaks(
            emulate.HostBackend(), x, signals=signals, size=frames * n_in, n_in=n_in,
            n_out=13, storage=precision, precision=precision, dense=True)  # fmt: skip
        got = project(peaks, chunks)
        expected = launches if kernel else ["rowmax"] * (1 + (chunk < 800)) + ["correlate_clip"]
        assert launched == expected
        assert chunks == (8 if kernel and chunk == 100 else 1)
        np.testing.assert_array_equal(got, ref)
        assert np.isnan(got[2 * frames:]).all() and np.isfinite(got[:2 * frames]).all()
        launched.clear()  # project's clip finds the same peaks itself, in the same launches
        got = project(None, 1, clip=True)
        assert launched == expected
        np.testing.assert_array_equal(got, ref)
    with pytest.raises(ValueError, match="peak_chunks"):  # the correlation takes peaks only
        project(peaks, 2)


def test_clipped_correlation_clips_where_it_stages_not_where_it_loads():
    """The clip of ``correlate_clip`` is applied as a tile is stored to shared memory: the
    loads of the next tile (issued before the products) leave their values untouched, so
    nothing waits on them until the tile after. Clipping as it loaded made mfcc's DCT
    wait on every tile's loads (31.8 vs 18.5 us under ncu on an H200). The floors a thread
    needs are read into registers before it stores a value, and the clip is a select on
    them, not a branch around each read: the reads then issue together (read one by one
    behind branches, the clipped DCT took 0.0245 ms on an H100, 0.0233 after)."""
    from specux.kernels.codegen.dialects import CUDA
    from specux.kernels.codegen.gather import GatherSpec, render_gather

    option = transform_exec.correlate_option(64, 626, 20, 80, 80, "float32")
    lines = render_gather(GatherSpec("correlate_clip", "float32", "float32", option),
                          CUDA).splitlines()  # fmt: skip
    loads = [line for line in lines if "pa[s] =" in line]
    stores = [i for i, line in enumerate(lines) if line.strip().startswith("xs[")]
    reads = [i for i, line in enumerate(lines) if line.strip() == "rv[s] = fl[f];"]
    assert len(loads) == 2 and not any("clipped(" in line for line in loads)
    assert len(stores) == 1 and "= clipped(pa[s], rv[s], k < k_hi);" in lines[stores[0]]
    assert len(reads) == 1 and reads[0] < stores[0]
    assert "?" not in lines[stores[0]]  # no branch around the floor in the store


@pytest.mark.parametrize("route", ["project", "correlate", "c4n4m2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_emulated_clipped_projection_is_clip_then_project(dtype, route, rng, monkeypatch):
    """transform_exec.project with ``peaks`` (mfcc's top_db clip read by its DCT: the kind
    ``project_clip``, or ``correlate_clip`` for a matrix the projection kernel does not
    take) gives the bits of the projection of the clipped rows, each signal clipped at its
    own peak minus top_db; a NaN in a signal (its peak NaN) makes that signal's outputs NaN,
    as torch.maximum would, and leaves the others alone; on the projection kernel, and on
    the correlation with the rule's tile and another (taller, more columns a thread)."""
    from specux.kernels import emulate
    from specux.kernels.cpu import features as cpu_features
    from specux.meta import matrices

    launched = _spy_launches(monkeypatch)
    monkeypatch.setattr(transform_exec, "_PROJECT_KERNEL", route == "project")
    if route == "c4n4m2":
        monkeypatch.setattr(transform_exec, "correlate_option", lambda *a, **k: route)

    precision = np.dtype(dtype).name
    key = matrices.dct_spec(n_out=13, n_in=40, dct_type=2, norm="ortho", lifter=0.0).as_key()
    bands, weights, n_in = transform_exec.sparse_bank(key, precision)
    assert transform_exec.projects_clipped(True, n_in, precision, precision)
    signals, frames, top_db = 3, 37, 2.0  # 111 rows: partial tiles, signals across them
    x = rng.standard_normal((signals, n_in, frames)).astype(dtype)
    x[1, 4, 5] = np.nan

    def project(values, peaks):
        rows = np.ascontiguousarray(values.swapaxes(-1, -2))  # frame-major, as the ops pass
        out = np.zeros((signals, frames, 13), dtype)
        transform_exec.project(emulate.HostBackend(), rows, out, bands, weights,
                               rows=signals * frames, n_in=n_in, n_out=13, storage=precision,
                               precision=precision, dense=True, signals=signals,
                               peaks=peaks, top_db=top_db)  # fmt: skip
        return out

    with np.errstate(invalid="ignore"):
        clipped = cpu_features.clip_top_db(x, top_db)
    peaks = np.array([np.max(s) for s in x], dtype)
    assert np.isnan(peaks[1]) and (clipped[0] == x[0].max() - dtype(top_db)).any()
    got, ref = project(x, peaks), project(clipped, None)
    kind = "project" if route == "project" else "correlate"
    assert launched == [f"{kind}_clip", kind]
    np.testing.assert_array_equal(got, ref)
    assert np.isnan(got[1]).all() and np.isfinite(got[[0, 2]]).all()
    with pytest.raises(ValueError, match="projects_clipped"):
        transform_exec.project(emulate.HostBackend(), x, x, bands, weights, rows=1,
                               n_in=n_in, n_out=13, storage=precision, precision=precision,
                               dense=False, peaks=peaks)  # fmt: skip
