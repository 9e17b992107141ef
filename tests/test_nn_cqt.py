"""specux.nn.CQT / VQT: the ``kernel`` buffer (the constant-Q taps) and the ``cqt_kernel`` ops.

A module whose buffer holds the taps it was built with runs the function's kernels (equal bits);
a changed, loaded or learned kernel runs the dense correlation, which must give the function's
values for the same taps (float64 round-off) and reach the kernel in backward.
"""

from __future__ import annotations

import numpy as np
import pytest
from tolerances import TOLERANCES, rel_peak

import specux

torch = pytest.importorskip("torch")
from specux import nn  # noqa: E402 - needs torch
from specux.kernels.cpu.cqt import correlation_kernel, correlation_taps  # noqa: E402
from specux.meta.cqt_params import cqt_spec  # noqa: E402
from specux.ops import cqt as ops_cqt  # noqa: E402

# 24 bins from 100 Hz at 8 kHz: the lowest filter spans 1345 samples (R = 673), 2 octaves.
PARAMS = {
    "CQT": dict(sr=8000, fmin=100.0, n_bins=24, hop_length=64),
    "VQT": dict(sr=8000, fmin=100.0, n_bins=24, hop_length=64, gamma=None),
}
# Short filters (filter_scale 1/4) for gradcheck: 4 x 54 x 2 kernel entries.
TINY = dict(sr=1000, fmin=100.0, n_bins=4, hop_length=16, filter_scale=0.25)


def _signal(shape=(2, 1500), dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)


def _function(name):
    return getattr(specux, name.lower())


@pytest.mark.parametrize("name", sorted(PARAMS))
@pytest.mark.parametrize("output", ["complex", "magnitude", "db"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_module_equals_function(name, output, dtype):
    kwargs = dict(PARAMS[name], output=output, pad_mode="reflect")
    module = getattr(nn, name)(**kwargs, dtype=dtype)
    x = _signal(dtype=dtype)
    got, ref = module(x), _function(name)(x, **kwargs)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert torch.equal(got, ref)


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_kernel_buffer_holds_the_taps(name):
    module = getattr(nn, name)(**PARAMS[name])
    spec = cqt_spec(**{"gamma": 0.0, **PARAMS[name]})
    first, taps = correlation_taps(spec)
    reach = module.kernel.shape[1] // 2
    assert module.kernel.shape == (24, 2 * reach, 2) and module.kernel.dtype == torch.float32
    assert list(module.state_dict()) == ["kernel"] and list(module.parameters()) == []
    assert reach == max(-int(first.min()), max(int(f) + len(t) for f, t in zip(first, taps)))
    complex_taps = torch.view_as_complex(module.double().kernel)
    for k, (start, values) in enumerate(zip(first.tolist(), taps)):
        row = complex_taps[k].numpy()
        np.testing.assert_array_equal(row[start + reach : start + reach + len(values)], values)
        assert not row[: start + reach].any() and not row[start + reach + len(values) :].any()


def test_kernel_layout_defines_the_transform():
    """X[k, t] = sum_i xp[t * hop - R + i] * kernel[k, i], xp the padded signal."""
    spec = cqt_spec(**TINY)
    kernel = correlation_kernel(spec)
    taps = kernel[..., 0] + 1j * kernel[..., 1]
    reach = kernel.shape[1] // 2
    x = _signal((300,)).numpy()
    xp = np.pad(x, reach, mode="reflect")
    direct = np.stack([xp[t * 16 : t * 16 + 2 * reach] @ taps.T for t in range(1 + 300 // 16)])
    got = specux.cqt(x, **TINY, pad_mode="reflect")
    assert rel_peak(got, direct.T) < TOLERANCES["float64"]


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_learned_kernel_runs_the_dense_path_and_gets_gradients(name):
    kwargs = dict(PARAMS[name], output="magnitude")
    module = getattr(nn, name)(**kwargs, dtype=torch.float64)
    module.kernel = torch.nn.Parameter(module.kernel.clone())
    x = _signal().requires_grad_(True)
    out = module(x)
    ref_x = x.detach().clone().requires_grad_(True)
    ref = _function(name)(ref_x, **kwargs)
    assert rel_peak(out.detach(), ref.detach()) < TOLERANCES["float64"]
    weights = torch.linspace(-1.0, 1.0, out.numel(), dtype=torch.float64).reshape(out.shape)
    (out * weights).sum().backward()
    (ref * weights).sum().backward()
    assert rel_peak(x.grad, ref_x.grad) < TOLERANCES["float64"]
    grad = module.kernel.grad
    assert grad is not None and grad.shape == module.kernel.shape and grad.abs().max() > 0


def test_kernel_changed_in_place_loaded_or_restored():
    """The buffer's contents decide the path, read again after each change: scaled in place,
    the output scales; loaded into a fresh module, it carries over; copied back, the module
    equals the function again, bit for bit."""
    kwargs = PARAMS["CQT"]
    module = nn.CQT(**kwargs, dtype=torch.float64)
    x = _signal()
    ref = specux.cqt(x, **kwargs)
    original = module.kernel.clone()
    assert ops_cqt.holds_spec_taps(module.kernel, module._key)
    with torch.no_grad():
        module.kernel.mul_(2.0)
    assert not ops_cqt.holds_spec_taps(module.kernel, module._key)
    doubled = module(x)
    assert rel_peak(doubled, 2.0 * ref) < TOLERANCES["float64"]
    fresh = nn.CQT(**kwargs, dtype=torch.float64)
    fresh.load_state_dict(module.state_dict())
    torch.testing.assert_close(fresh(x), doubled, rtol=0, atol=0)
    with torch.no_grad():
        module.kernel.copy_(original)
    assert torch.equal(module(x), ref)


def test_dtype_changes_rebuild_the_pristine_kernel():
    kwargs = PARAMS["VQT"]
    module = nn.VQT(**kwargs)  # float32 buffer
    x = _signal()
    assert torch.equal(module.double()(x), specux.vqt(x, **kwargs))
    # a float32 buffer given float64 input: the float32-rounded taps in float64 (dense path)
    single = nn.VQT(**kwargs)
    got = single(x)
    assert got.dtype == torch.complex128
    error = rel_peak(got, specux.vqt(x, **kwargs))
    assert 0 < error < TOLERANCES["float32_peak"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_inputs_like_the_function(dtype):
    kwargs = dict(PARAMS["CQT"], output="magnitude")
    x = _signal(dtype=getattr(torch, dtype))
    got, ref = nn.CQT(**kwargs)(x), specux.cqt(x, **kwargs)
    assert got.dtype == ref.dtype == x.dtype and torch.equal(got, ref)
    complex_out = nn.CQT(**PARAMS["CQT"])(x)
    assert complex_out.dtype == specux.cqt(x, **PARAMS["CQT"]).dtype


def test_tuning_none_holds_no_kernel():
    kwargs = dict(PARAMS["CQT"], tuning=None)
    module = nn.CQT(**kwargs)
    assert list(module.buffers()) == []
    x = _signal()
    assert torch.equal(module(x), specux.cqt(x, **kwargs))


def test_errors_name_the_kernel_and_the_signal():
    module = nn.CQT(**PARAMS["CQT"], dtype=torch.float64)
    x = _signal()
    with pytest.raises(ValueError, match=r"kernel has shape \(3, 4, 2\)"):
        module.kernel = torch.zeros(3, 4, 2, dtype=torch.float64)
        module(x)
    module = nn.CQT(**PARAMS["CQT"], dtype=torch.float64)
    with torch.no_grad():
        module.kernel = torch.zeros(24, 5, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="even width"):
        module(x)
    with pytest.raises(ValueError, match="empty time axis"):
        nn.CQT(**PARAMS["CQT"])(torch.zeros(2, 0))
    with pytest.raises(TypeError, match="torch.Tensor"):
        nn.CQT(**PARAMS["CQT"])(np.zeros(100))
    with pytest.raises(TypeError, match="dtype"):
        nn.CQT(**PARAMS["CQT"])(torch.zeros(100, dtype=torch.complex64))


@pytest.mark.parametrize("pad_mode", ["constant", "reflect", "circular"])
def test_gradcheck_signal_and_kernel(pad_mode):
    module = nn.CQT(**TINY, pad_mode=pad_mode, output="power", dtype=torch.float64)
    x = _signal((2, 90)).requires_grad_(True)
    # the spec's own taps (the cqt kernels), signal only
    assert torch.autograd.gradcheck(module, (x,), atol=TOLERANCES["gradcheck_atol"],
                                    rtol=TOLERANCES["gradcheck_rtol"])  # fmt: skip
    kernel = module.kernel.clone().requires_grad_(True)

    def run(signal, taps):
        module.kernel = taps
        return module(signal)

    assert torch.autograd.gradcheck(run, (x, kernel), atol=TOLERANCES["gradcheck_atol"],
                                    rtol=TOLERANCES["gradcheck_rtol"])  # fmt: skip
    assert torch.autograd.gradgradcheck(run, (x, kernel), atol=TOLERANCES["gradcheck_atol"],
                                        rtol=TOLERANCES["gradcheck_rtol"])  # fmt: skip


@pytest.mark.parametrize("learned", [False, True])
def test_compile_fullgraph_equals_eager(learned):
    torch._dynamo.reset()
    module = nn.CQT(**PARAMS["CQT"], output="magnitude")
    if learned:
        module.kernel = torch.nn.Parameter(module.kernel.clone())
    compiled = torch.compile(module, fullgraph=True, backend="aot_eager")
    x = _signal(dtype=torch.float32)

    def run(fn):
        xx = x.clone().requires_grad_(True)
        out = fn(xx)
        out.square().mean().backward()
        grads = [xx.grad] + ([module.kernel.grad.clone()] if learned else [])
        if learned:
            module.kernel.grad = None
        return [out.detach(), *grads]

    for got, ref in zip(run(compiled), run(module)):
        torch.testing.assert_close(got, ref, rtol=0, atol=0)


def test_optimizer_steps_change_the_output():
    """A learned kernel, stepped by an optimizer (writes through .data-like in-place ops),
    is read afresh on every call: the loss decreases."""
    module = nn.CQT(**TINY, output="power", dtype=torch.float64)
    module.kernel = torch.nn.Parameter(module.kernel.clone())
    optimizer = torch.optim.SGD(module.parameters(), lr=1e-3)
    x = _signal((2, 200))
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = module(x).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[0] > losses[1] > losses[2]


# chroma(source="cqt"): buffers kernel (the CQT's taps) and fb (the fold into chroma)
CHROMA = [
    dict(sr=8000, source="cqt", fmin=100.0, n_octaves=2, bins_per_octave=24, hop_length=64),
    dict(sr=8000, source="cqt", fmin=110.0, n_octaves=2, bins_per_octave=12, hop_length=100,
         n_chroma=6, threshold=0.05, norm=2.0, pad_mode="reflect", cqt_norm=None),
]  # fmt: skip


@pytest.mark.parametrize("kwargs", CHROMA)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_chroma_cqt_module_equals_function(kwargs, dtype):
    module = nn.Chroma(**kwargs, dtype=dtype)
    n_bins = kwargs["n_octaves"] * kwargs["bins_per_octave"]
    shapes = {k: tuple(v.shape) for k, v in module.named_buffers()}
    assert shapes["fb"] == (kwargs.get("n_chroma", 12), n_bins) and set(shapes) == {"kernel", "fb"}
    assert shapes["kernel"][0] == n_bins and set(module.state_dict()) == {"kernel", "fb"}
    x = _signal(dtype=dtype)
    got, ref = module(x), specux.chroma(x, **kwargs)
    assert got.dtype == ref.dtype and torch.equal(got, ref)


def test_chroma_cqt_module_learns_its_kernel_and_fold():
    kwargs = CHROMA[0]
    module = nn.Chroma(**kwargs, dtype=torch.float64)
    module.kernel = torch.nn.Parameter(module.kernel.clone())
    module.fb = torch.nn.Parameter(module.fb.clone())
    x = _signal()
    out = module(x)
    assert rel_peak(out.detach(), specux.chroma(x, **kwargs)) < TOLERANCES["float64"]
    out.square().sum().backward()
    assert module.kernel.grad.abs().max() > 0 and module.fb.grad.abs().max() > 0


def test_chroma_cqt_module_errors_and_estimated_tuning():
    # the CQT's Nyquist error says which chroma parameters set its n_bins, at construction
    with pytest.raises(ValueError, match="n_octaves=7"):
        nn.Chroma(sr=8000, source="cqt")
    kwargs = dict(CHROMA[0], tuning=None)
    module = nn.Chroma(**kwargs)
    assert list(module.buffers()) == []
    x = _signal(dtype=torch.float32)
    assert torch.equal(module(x), specux.chroma(x, **kwargs))
    with pytest.raises(ValueError, match="empty time axis"):
        nn.Chroma(**CHROMA[0])(torch.zeros(3, 0))


def test_copies_and_pickles_keep_the_kernel():
    """The module keeps what builds its float64 taps, not a second copy of them: deepcopy and
    torch.save / load work, and a copy's .double() rebuilds the taps exactly."""
    import copy
    import io

    kwargs = PARAMS["CQT"]
    module = nn.CQT(**kwargs)
    x = _signal(dtype=torch.float32)
    buffer = io.BytesIO()
    torch.save(module, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    copied = copy.deepcopy(module)
    assert torch.equal(loaded(x), module(x)) and torch.equal(copied(x), module(x))
    assert torch.equal(copied.double()(x.double()), specux.cqt(x.double(), **kwargs))


def test_dense_path_takes_signals_in_groups(monkeypatch):
    """The dense correlation frames a group of signals at a time (bounded memory): a bound of
    one signal's frames gives the same values as one group, forward and adjoint."""
    kwargs = PARAMS["CQT"]
    module = nn.CQT(**kwargs, dtype=torch.float64)
    with torch.no_grad():
        module.kernel.mul_(-1.0)  # not the spec's taps: the dense path (negation is exact)
    learned = nn.CQT(**kwargs, dtype=torch.float64)
    learned.kernel = torch.nn.Parameter(module.kernel.clone())
    x = _signal((2, 3, 1500)).requires_grad_(True)

    def run():
        out, taps = module(x), learned(x)
        return (out, *torch.autograd.grad(out.abs().sum() + taps.abs().sum(),
                                          (x, learned.kernel)))  # fmt: skip

    whole = run()
    monkeypatch.setattr(ops_cqt, "_FRAME_SAMPLES", 1)  # one signal a group
    grouped = run()
    # the same sums; BLAS may block a product of fewer rows differently, and the kernel's
    # gradient adds the groups' products: float64 round-off
    for got, ref in zip(grouped, whole):
        assert rel_peak(got.detach(), ref.detach()) < TOLERANCES["float64"]
    whole = whole[0]
    assert rel_peak(whole.detach(), -specux.cqt(x.detach(), **kwargs)) < TOLERANCES["float64"]


def test_inference_mode_modules_and_buffers():
    """Modules built or run under torch.inference_mode (their buffers then have no version
    counter: kept by data pointer) equal the function, inside and outside it; a float32
    buffer given float64 input there too (it once raised "Inference tensors do not track
    version counter"). A mel module's converted bank likewise."""
    kwargs = PARAMS["CQT"]
    x = _signal()
    with torch.inference_mode():
        built = nn.CQT(**kwargs, dtype=torch.float64)
        inside = built(x)
        chroma = nn.Chroma(**CHROMA[0], dtype=torch.float64)
        assert torch.equal(chroma(x), specux.chroma(x, **CHROMA[0]))
        single = nn.CQT(**kwargs)(x)  # float32 buffer, float64 input: the dense path
    assert torch.equal(inside, specux.cqt(x, **kwargs)) and torch.equal(built(x), inside)
    assert rel_peak(single, inside) < TOLERANCES["float32_peak"]
    with torch.inference_mode():
        mel = nn.MelSpectrogram(sr=8000, n_fft=256, n_mels=20)  # float32 bank, float64 input
    mel_ref = specux.melspectrogram(x, sr=8000, n_fft=256, n_mels=20)
    assert mel(x).dtype == torch.float64
    assert rel_peak(mel(x), mel_ref) < TOLERANCES["float32_peak"]


def test_float64_buffer_runs_the_spec_kernels_for_float32_signals():
    """A float64 buffer that holds its taps gives a float32 signal the function's result, bit
    for bit (the spec's taps rounded to float32 are the buffer's), with no conversion a call."""
    kwargs = dict(PARAMS["VQT"], output="db")
    module = nn.VQT(**kwargs, dtype=torch.float64)
    x = _signal(dtype=torch.float32)
    assert torch.equal(module(x), specux.vqt(x, **kwargs))
    assert ops_cqt.holds_spec_taps(module.kernel, module._key)


def test_conjugate_cotangents_reach_both_paths():
    """A loss of y.conj() hands backward a conjugate-view cotangent: the dense path's
    gradients (signal and kernel) equal the spec path's and the function's."""
    kwargs = PARAMS["CQT"]
    grads = []
    for learned in (False, True):
        module = nn.CQT(**kwargs, dtype=torch.float64)
        if learned:
            module.kernel = torch.nn.Parameter(module.kernel.clone())
        x = _signal().requires_grad_(True)
        y = module(x)
        weights = torch.linspace(-1, 1, y.shape[-1], dtype=torch.float64)
        (y.conj() * weights).real.sum().backward()
        grads.append(x.grad)
        if learned:  # the same loss without the conjugate view (Re(conj(y)) w = Re(y) w)
            plain = nn.CQT(**kwargs, dtype=torch.float64)
            plain.kernel = torch.nn.Parameter(module.kernel.detach().clone())
            (plain(_signal()) * weights).real.sum().backward()
            tol = TOLERANCES["float64"]
            torch.testing.assert_close(module.kernel.grad, plain.kernel.grad, rtol=tol, atol=tol)
    x = _signal().requires_grad_(True)
    y = specux.cqt(x, **kwargs)
    (y.conj() * torch.linspace(-1, 1, y.shape[-1], dtype=torch.float64)).real.sum().backward()
    assert torch.equal(grads[0], x.grad)
    assert rel_peak(grads[1], x.grad) < TOLERANCES["float64"]


def test_dtype_changes_compare_only_changed_buffers(monkeypatch):
    """.to(device) / .float() of a float32 module build no float64 taps; .double() builds them
    once (to see that the buffer held them) and rounds afresh."""
    import specux.nn as nn_module

    calls = []
    real = nn_module._built
    monkeypatch.setattr(nn_module, "_built", lambda build: calls.append(1) or real(build))
    module = nn.CQT(**PARAMS["CQT"])
    calls.clear()
    module.to("cpu").float().cpu()
    assert calls == []
    module.double()
    assert len(calls) == 1  # compared with, then rounded from, one build
    x = _signal()
    assert torch.equal(module(x), specux.cqt(x, **PARAMS["CQT"]))


def test_holds_spec_taps_reads_the_top_bin_then_every_bin():
    """The check compares the top bin's taps first (a learned or half-precision kernel
    differs there, without building every bin's), then all of them."""
    spec = cqt_spec(**{"gamma": 0.0, **PARAMS["CQT"]})
    key = spec.as_key()
    kernel = torch.from_numpy(correlation_kernel(spec))
    assert ops_cqt.holds_spec_taps(kernel, key)
    low = kernel.clone()
    low[0, low.shape[1] // 2, 0] += 1.0  # the lowest bin's centre tap
    assert not ops_cqt.holds_spec_taps(low, key)
    top = kernel.clone()
    top[-1] *= 1.0 + 2.0**-40
    assert not ops_cqt.holds_spec_taps(top, key)
    assert not ops_cqt.holds_spec_taps(kernel.half().double(), key)
