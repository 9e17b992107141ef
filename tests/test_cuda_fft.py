"""The FFT family on CUDA tensors (generated NVRTC kernels) against float64 references and
cuFFT (torch.fft). Run on a GPU machine: ``python -m pytest -q tests -m cuda``."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tolerances import TOLERANCES, rel_l2  # noqa: E402

import specux  # noqa: E402

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

# float32 error may be at most this many times cuFFT's on the same data (issue 4).
VS_CUFFT = TOLERANCES["float32_vs_cufft"]
# float64 against numpy.fft, relative L2.
F64_CUDA = TOLERANCES["float64_cuda_fft"]


def _data(shape, seed=0, dtype=torch.complex64):
    g = torch.Generator().manual_seed(seed)
    x = torch.complex(torch.randn(shape, generator=g, dtype=torch.float64),
                      torch.randn(shape, generator=g, dtype=torch.float64))  # fmt: skip
    return x.to(dtype)


def _check_f32(x32_gpu, ours, ref_fn, cufft):
    ref = ref_fn(x32_gpu.cpu().to(torch.complex128).numpy())
    ours_err = rel_l2(ours.cpu().numpy(), ref)
    cufft_err = rel_l2(cufft.cpu().numpy(), ref)
    floor = TOLERANCES["float32_floor"]
    assert ours_err <= VS_CUFFT * max(cufft_err, floor), (ours_err, cufft_err)


SMALL = list(range(1, 4097))


def _precompile(sizes):
    """Every length is its own kernel: compile a sweep chunk's kernels on all cores first.
    Per chunk, so that a part of the sweeps (``-k every_prime``) compiles only its own
    lengths' kernels and fits one call of a time-limited GPU machine."""
    from specux.kernels.cuda.fft import precompile

    return precompile(sizes)


@pytest.mark.parametrize("chunk", range(0, 4096, 256))
def test_every_size_up_to_4096_float32(chunk):
    _precompile(SMALL[chunk : chunk + 256])
    for n in SMALL[chunk : chunk + 256]:
        x = _data((3, n), seed=n).cuda()
        _check_f32(x, specux.fft(x), np.fft.fft, torch.fft.fft(x))


def _primes(limit):
    sieve = np.ones(limit, dtype=bool)
    sieve[:2] = False
    for p in range(2, int(limit**0.5) + 1):
        if sieve[p]:
            sieve[p * p :: p] = False
    return np.nonzero(sieve)[0].tolist()


PRIMES = _primes(5000)


@pytest.mark.parametrize("chunk", range(0, len(PRIMES), 168))
def test_every_prime_below_5000_forward_and_inverse(chunk):
    _precompile(PRIMES[chunk : chunk + 168])
    for p in PRIMES[chunk : chunk + 168]:
        x = _data((2, p), seed=p).cuda()
        _check_f32(x, specux.fft(x), np.fft.fft, torch.fft.fft(x))
        _check_f32(x, specux.ifft(x), np.fft.ifft, torch.fft.ifft(x))


@pytest.mark.parametrize("n", [2**20, 3**12, 5**8, 2**24, 1000003, 2**27])
def test_large_sizes(n):
    x = _data((n,), seed=1).cuda()
    _check_f32(x, specux.fft(x), np.fft.fft, torch.fft.fft(x))


@pytest.mark.parametrize("n", [2**25, 5**11])
def test_three_pass_lengths(n):
    """Three column passes (plan.column_split: 256 x 256 x 512, 125 x 625 x 625), forward and
    inverse, from a strided view, into rows; float64 at 2 ** 25."""
    x = _data((2, n), seed=2).cuda()
    _check_f32(x, specux.fft(x), np.fft.fft, torch.fft.fft(x))
    view = x.T.contiguous().T  # column-major: element stride 2
    _check_f32(view, specux.ifft(view, norm="ortho"), lambda a: np.fft.ifft(a, norm="ortho"),
               torch.fft.ifft(view, norm="ortho"))  # fmt: skip
    if n == 2**25:
        x64 = x[:1].to(torch.complex128)
        ref = np.fft.fft(x64.cpu().numpy())
        assert rel_l2(specux.fft(x64).cpu().numpy(), ref) <= F64_CUDA


@pytest.mark.parametrize("n", [1, 7, 64, 97, 1000, 1031, 4096, 65537])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_float64_all_norms(n, norm):
    x = _data((4, n), seed=n, dtype=torch.complex128).cuda()
    xr = x.real.contiguous()
    xn = x.cpu().numpy()
    assert rel_l2(specux.fft(x, norm=norm).cpu(), np.fft.fft(xn, norm=norm)) <= F64_CUDA
    assert rel_l2(specux.ifft(x, norm=norm).cpu(), np.fft.ifft(xn, norm=norm)) <= F64_CUDA
    assert rel_l2(specux.rfft(xr, norm=norm).cpu(), np.fft.rfft(xn.real, norm=norm)) <= F64_CUDA
    half = np.fft.rfft(xn.real)
    got = specux.irfft(torch.from_numpy(half).cuda(), n=n, norm=norm).cpu()
    assert rel_l2(got, np.fft.irfft(half, n, norm=norm)) <= F64_CUDA
    got = specux.hfft(torch.from_numpy(half).cuda(), n=n, norm=norm).cpu()
    assert rel_l2(got, np.fft.hfft(half, n, norm=norm)) <= F64_CUDA


@pytest.mark.parametrize("n", [8, 1000, 1031, 4096])
def test_float16_storage(n):
    xr = torch.randn(4, n, generator=torch.Generator().manual_seed(n)).half().cuda()
    out = specux.rfft(xr)
    assert out.dtype == torch.complex32
    ref = np.fft.rfft(xr.cpu().double().numpy())
    bound = TOLERANCES["float16_fft_l2"]
    assert rel_l2(out.cpu().to(torch.complex64).numpy(), ref) <= bound
    back = specux.irfft(out, n=n)
    assert back.dtype == torch.float16
    assert rel_l2(back.cpu().double().numpy(), xr.cpu().double().numpy()) <= bound


def test_batched_strided_and_nd():
    x = _data((6, 40, 30), seed=3, dtype=torch.complex128).cuda()
    view = x[:, ::2, 1:]  # non-contiguous, offset
    xn = view.cpu().numpy()
    assert rel_l2(specux.fft(view, dim=1).cpu(), np.fft.fft(xn, axis=1)) <= F64_CUDA
    assert rel_l2(specux.fft2(view).cpu(), np.fft.fft2(xn)) <= F64_CUDA
    assert rel_l2(specux.fftn(view).cpu(), np.fft.fftn(xn)) <= F64_CUDA
    assert rel_l2(specux.ifftn(view, s=(5, 17, 12)).cpu(),
                  np.fft.ifftn(xn, s=(5, 17, 12))) <= F64_CUDA  # fmt: skip
    real = view.real
    assert rel_l2(specux.rfftn(real).cpu(), np.fft.rfftn(real.cpu().numpy())) <= F64_CUDA
    spec = np.fft.rfft2(real.cpu().numpy())
    got = specux.irfft2(torch.from_numpy(spec).cuda(), s=real.shape[-2:]).cpu()
    assert rel_l2(got, np.fft.irfft2(spec, s=real.shape[-2:])) <= F64_CUDA


def test_result_stays_on_device_and_current_stream():
    x = _data((8, 1024), seed=5).cuda()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        y = specux.fft(x)
    stream.synchronize()
    assert y.device == x.device
    _check_f32(x, y, np.fft.fft, torch.fft.fft(x))


@pytest.mark.parametrize("fn", ["fft", "ifft", "rfft", "irfft", "fft2", "rfftn"])
def test_gradients_match_cpu(fn):
    real_input = fn in ("rfft", "rfftn")
    base = _data((3, 6, 10), seed=9, dtype=torch.complex128)
    x_cpu = (base.real if real_input else base).clone().requires_grad_(True)
    x_gpu = x_cpu.detach().cuda().requires_grad_(True)
    out_cpu = getattr(specux, fn)(x_cpu)
    out_gpu = getattr(specux, fn)(x_gpu)
    weight = _data(out_cpu.shape, seed=10, dtype=out_cpu.dtype) if out_cpu.is_complex() \
        else torch.randn(out_cpu.shape, dtype=out_cpu.dtype)  # fmt: skip
    (out_cpu * weight).real.sum().backward()
    (out_gpu * weight.cuda()).real.sum().backward()
    assert rel_l2(x_gpu.grad.cpu().numpy(), x_cpu.grad.numpy()) <= TOLERANCES["float64"]


def test_gradcheck_on_cuda():
    x = _data((2, 12), seed=4, dtype=torch.complex128).cuda().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: specux.fft(t, norm="ortho"), (x,))
    r = torch.randn(2, 11, dtype=torch.float64, device="cuda", requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: specux.rfft(t), (r,))
