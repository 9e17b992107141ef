"""Every torch.ops.specux op: opcheck, gradcheck, gradgradcheck (auto-enrolled from OPS)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tolerances import TOLERANCES  # noqa: E402

import specux  # noqa: E402
from specux.ops import OPS  # noqa: E402

F64, C128 = torch.float64, torch.complex128


def _variants(t: torch.Tensor):
    """The layouts opcheck must see: ordinary, non-contiguous, offset view."""
    yield "plain", t
    wide = torch.cat([t, t], dim=-1)[..., ::2]
    assert not wide.is_contiguous() or wide.numel() <= 1
    yield "strided", wide
    padded = torch.cat([t[..., :1], t], dim=-1)[..., 1:]
    yield "offset", padded


def _make(shape, dtype, requires_grad=False):
    g = torch.Generator().manual_seed(hash(shape) % 1000)
    if dtype.is_complex:
        real = torch.randn(shape, generator=g, dtype=F64)
        imag = torch.randn(shape, generator=g, dtype=F64)
        t = torch.complex(real, imag).to(dtype)
    else:
        t = torch.randn(shape, generator=g, dtype=dtype)
    return t.requires_grad_(requires_grad)


# For each op: (label, make_args(dtype_real, dtype_complex)) -> args tuple. Tensors first.
def _samples(name):
    r, c = F64, C128
    if name == "c2c":
        return [
            ("1d", lambda: (_make((3, 8), c), [1], True, "backward")),
            ("2d-ortho", lambda: (_make((4, 6), c), [0, 1], False, "ortho")),
            ("odd-forward", lambda: (_make((2, 7), c), [-1], True, "forward")),
            ("empty-batch", lambda: (_make((0, 5), c), [1], True, "backward")),
        ]
    if name == "r2c":
        return [
            ("even", lambda: (_make((3, 8), r), [1], "backward")),
            ("odd-ortho", lambda: (_make((2, 9), r), [-1], "ortho")),
            ("2d", lambda: (_make((4, 6), r), [0, 1], "forward")),
            ("empty-batch", lambda: (_make((0, 5), r), [1], "backward")),
        ]
    if name == "c2r":
        return [
            ("even", lambda: (_make((3, 5), c), [1], 8, "backward")),
            ("odd-ortho", lambda: (_make((2, 5), c), [-1], 9, "ortho")),
            ("2d", lambda: (_make((4, 4), c), [0, 1], 6, "forward")),
        ]
    if name == "frame":
        return [
            ("reflect", lambda: (_make((2, 20), r), 8, 3, 4, "reflect")),
            ("short-reflect", lambda: (_make((2, 3), r), 8, 2, 4, "reflect")),
            ("constant", lambda: (_make((20,), r), 6, 6, 3, "constant")),
            ("replicate", lambda: (_make((2, 11), r), 5, 2, 2, "replicate")),
            ("circular", lambda: (_make((2, 11), r), 5, 7, 2, "circular")),
        ]
    if name == "overlap_add":
        return [
            ("reflect", lambda: (_make((2, 7, 8), r), 20, 3, 4, "reflect")),
            ("constant-nopad", lambda: (_make((5, 6), r), 18, 3, 0, "constant")),
            ("hop-gt-frame", lambda: (_make((2, 3, 4), r), 20, 7, 2, "circular")),
        ]
    if name == "stft":
        def stft_args(shape, win, win_name, n_fft, hop, wl, center, mode, norm, one, out):
            return lambda: (_make(shape, r), None if win is None else _make((wl,), r), win_name,
                            n_fft, hop, wl, center, mode, norm, one, out, 1e-10)  # fmt: skip
        return [
            ("complex", stft_args((2, 40), None, "hann", 16, 4, 16, True, "reflect", False,
                                  True, "complex")),  # fmt: skip
            ("array-window-odd", stft_args((3, 30), True, "array", 9, 4, 7, True, "constant",
                                           True, True, "complex")),  # fmt: skip
            ("power", stft_args((25,), True, "array", 8, 3, 8, False, "constant", False, True,
                                "power")),  # fmt: skip
            ("magnitude-full", stft_args((2, 24), None, "hamming", 8, 5, 6, True, "replicate",
                                         False, False, "magnitude")),  # fmt: skip
            ("db", stft_args((2, 24), True, "array", 8, 2, 8, True, "circular", False, True,
                             "db")),  # fmt: skip
            # a named window: the backward runs through power_adjoint
            ("magnitude-named", stft_args((2, 30), None, "hann", 9, 4, 9, True, "reflect", True,
                                          True, "magnitude")),  # fmt: skip
            ("db-named", stft_args((21,), None, "hamming", 8, 3, 6, True, "constant", False,
                                   True, "db")),  # fmt: skip
        ]
    if name == "power_adjoint":
        from specux.meta import shapes

        def adjoint_args(shape, win_name, n_fft, hop, center, mode, norm, power):
            def make():
                x = _make(shape, r)
                grad_shape = shapes.stft_shape(shape, n_fft, hop, n_fft // 2 if center else 0,
                                               True)  # fmt: skip
                return (x, None, win_name, n_fft, hop, n_fft, center, mode, norm, power,
                        _make(tuple(grad_shape), r))  # fmt: skip
            return make
        return [
            ("power", adjoint_args((2, 40), "hann", 16, 4, True, "reflect", False, 2.0)),
            ("magnitude-odd", adjoint_args((30,), "hamming", 9, 4, True, "constant", True,
                                           1.0)),  # fmt: skip
            ("p1.5-uncentered", adjoint_args((2, 25), "hann", 8, 3, False, "constant", False,
                                             1.5)),  # fmt: skip
            ("empty-batch", adjoint_args((0, 20), "hann", 8, 2, True, "replicate", False, 2.0)),
        ]
    if name == "istft":
        def istft_args(shape, win, win_name, n_fft, hop, wl, center, norm, one, length,
                       nola="raise"):  # fmt: skip
            def make():
                spec = _make(shape, c)
                window = None if win is None else (torch.rand((wl,), dtype=r) + 0.5)
                return (spec, window, win_name, n_fft, hop, wl, center, norm, one, length, nola)
            return make
        return [
            ("named", istft_args((2, 9, 6), None, "hann", 16, 4, 16, True, False, True, -1)),
            ("array-len", istft_args((9, 7), True, "array", 16, 5, 12, True, True, True, 30)),
            ("full-long", istft_args((2, 8, 5), True, "array", 8, 2, 8, True, False, False,
                                     40)),  # fmt: skip
            ("uncentered", istft_args((5, 6), True, "array", 8, 3, 8, False, False, True, -1)),
            # librosa's rule where the envelope vanishes: hann's zero at sample 0, a gap
            # between frames 10 apart
            ("keep-hann", istft_args((5, 6), None, "hann", 8, 3, 8, False, False, True, -1,
                                     "keep")),  # fmt: skip
            ("keep-gaps", istft_args((2, 5, 4), True, "array", 8, 10, 8, True, False, True,
                                     -1, "keep")),  # fmt: skip
        ]
    if name == "bank_spectrogram":
        mel = ('{"fmax": null, "fmin": 0.0, "htk": false, "kind": "mel", "n_fft": 16, '
               '"n_mels": 4, "norm": "slaney", "sr": 8000.0}')  # fmt: skip

        def bank_args(shape, win, n_fft, hop, center, mode, power, bank, output):
            def make():
                window = None if win is None else (torch.rand((n_fft,), dtype=r) + 0.5)
                weights = None if bank is None else torch.rand((3, n_fft // 2 + 1), dtype=r)
                return (_make(shape, r), window, "hann" if win is None else "array", n_fft,
                        hop, n_fft, center, mode, power, weights, mel if bank is None else "",
                        output, 1e-10)  # fmt: skip
            return make
        return [
            ("mel-power", bank_args((2, 40), None, 16, 4, True, "reflect", 2.0, None, "power")),
            ("mel-db-window", bank_args((30,), True, 16, 5, True, "constant", 2.0, None, "db")),
            # the named bank and window: the dB backward from the kept output, one adjoint op
            ("mel-db", bank_args((2, 40), None, 16, 4, True, "reflect", 2.0, None, "db")),
            ("bank-tensor-mag", bank_args((2, 33), True, 8, 3, False, "constant", 1.0, True,
                                          "power")),  # fmt: skip
            ("bank-tensor-p1.5-db", bank_args((20,), None, 8, 2, True, "replicate", 1.5, True,
                                              "db")),  # fmt: skip
        ]
    if name == "bank_adjoint":
        from specux.meta import shapes

        mel = ('{"fmax": null, "fmin": 0.0, "htk": false, "kind": "mel", "n_fft": 16, '
               '"n_mels": 4, "norm": "slaney", "sr": 8000.0}')  # fmt: skip

        def bank_adjoint_args(shape, n_fft, hop, center, mode, power, bands):
            def make():
                *batch, _, count = shapes.stft_shape(shape, n_fft, hop,
                                                     n_fft // 2 if center else 0, True)  # fmt: skip
                bank = None if bands is None else torch.rand((bands, n_fft // 2 + 1), dtype=r)
                n_out = 4 if bands is None else bands
                return (_make(shape, r), None, "hann", n_fft, hop, n_fft, center, mode, power,
                        bank, mel if bands is None else "", _make((*batch, n_out, count), r))
            return make
        return [
            ("mel-power", bank_adjoint_args((2, 40), 16, 4, True, "reflect", 2.0, None)),
            ("tensor-magnitude", bank_adjoint_args((30,), 8, 3, False, "constant", 1.0, 3)),
            ("mel-p1.5", bank_adjoint_args((2, 33), 16, 5, True, "replicate", 1.5, None)),
            ("empty-batch", bank_adjoint_args((0, 20), 16, 2, True, "constant", 2.0, None)),
        ]
    if name == "project":
        dct = ('{"dct_type": 2, "kind": "dct", "lifter": 22.0, "n_in": 6, "n_out": 4, '
               '"norm": "ortho"}')  # fmt: skip
        # top_db 3 clips about a sixth of the normal values (mfcc's clip, per signal)
        return [
            ("dct-spec", lambda: (_make((2, 6, 5), r), None, dct, None)),
            ("matrix", lambda: (_make((6, 7), r), torch.rand((3, 6), dtype=r), "", None)),
            ("dct-spec-top-db", lambda: (_make((2, 6, 5), r), None, dct, 3.0)),
            ("matrix-top-db", lambda: (_make((2, 6, 7), r), torch.rand((3, 6), dtype=r), "",
                                       3.0)),
            ("empty-top-db", lambda: (_make((0, 6, 5), r), None, dct, 3.0)),
        ]
    if name in ("cqt", "cqt_adjoint"):
        from specux.meta.cqt_params import cqt_spec

        small = cqt_spec(sr=2000, fmin=100, n_bins=12, hop_length=64).as_key()
        vqt = cqt_spec(
            sr=4000, fmin=30, n_bins=14, hop_length=100, bins_per_octave=7, gamma=None
        ).as_key()
        # Long filters for a short hop: the automatic plan takes the polyphase path.
        poly = cqt_spec(sr=1000, fmin=15, n_bins=12, hop_length=8).as_key()
    if name == "cqt":
        return [
            ("complex", lambda: (_make((2, 300), r), small, "constant", "complex", 1e-10)),
            ("magnitude", lambda: (_make((257,), r), small, "reflect", "magnitude", 1e-10)),
            ("db-vqt", lambda: (_make((2, 250), r), vqt, "replicate", "db", 1e-10)),
            ("polyphase", lambda: (_make((120,), r), poly, "circular", "complex", 1e-10)),
            ("empty-batch", lambda: (_make((0, 100), r), small, "constant", "power", 1e-10)),
        ]
    if name == "cqt_adjoint":
        # grad: (..., n_bins, 1 + length // hop_length)
        return [
            ("constant", lambda: (_make((2, 12, 5), c), small, "constant", 300)),
            ("reflect-1d", lambda: (_make((12, 5), c), small, "reflect", 257)),
            ("vqt", lambda: (_make((2, 14, 3), c), vqt, "replicate", 250)),
            ("polyphase", lambda: (_make((12, 16), c), poly, "circular", 120)),
        ]
    if name in ("cqt_kernel", "cqt_kernel_adjoint"):
        from specux.kernels.cpu.cqt import correlation_kernel
        from specux.meta.cqt_params import cqt_spec

        # Short filters (filter_scale 1/4: 6 x 54 x 2 taps) keep gradcheck's kernel
        # perturbations few. The spec's own taps run the cqt kernels; others the dense path.
        tiny = cqt_spec(sr=1000, fmin=100, n_bins=6, hop_length=16, filter_scale=0.25)
        key = tiny.as_key()

        def taps():
            return torch.from_numpy(correlation_kernel(tiny))
    if name == "cqt_kernel":
        return [
            ("spec-taps", lambda: (_make((2, 100), r), taps(), key, "reflect", "complex",
                                   1e-10)),  # fmt: skip
            ("learned-magnitude", lambda: (_make((130,), r), _make((6, 10, 2), r), key,
                                           "constant", "magnitude", 1e-10)),  # fmt: skip
            ("learned-db", lambda: (_make((2, 90), r), _make((6, 8, 2), r), key, "replicate",
                                    "db", 1e-10)),  # fmt: skip
            ("empty-batch", lambda: (_make((0, 50), r), _make((6, 4, 2), r), key, "constant",
                                     "power", 1e-10)),  # fmt: skip
            ("empty-length", lambda: (_make((2, 0), r), _make((6, 4, 2), r), key, "constant",
                                      "complex", 1e-10)),  # fmt: skip
        ]
    if name == "cqt_kernel_adjoint":
        # grad: (..., 6, 1 + length // 16)
        return [
            ("spec-taps", lambda: (_make((2, 6, 7), c), taps(), key, "constant", 100)),
            ("learned", lambda: (_make((6, 9), c), _make((6, 12, 2), r), key, "reflect", 130)),
        ]
    if name == "fftconvolve":
        return [
            ("real", lambda: (_make((3, 10), r), _make((1, 4), r))),
            ("broadcast", lambda: (_make((2, 1, 7), r), _make((3, 5), r))),
            ("complex", lambda: (_make((2, 6), c), _make((2, 3), r))),
        ]
    return []


CASES = [(name, label, make) for name in sorted(OPS) for label, make in _samples(name)]


def test_every_op_has_samples():
    missing = [name for name in OPS if not _samples(name)]
    assert not missing, f"ops without opcheck/gradcheck samples: {missing}"


def _layouts(args):
    first = args[0]
    for label, t in _variants(first.detach()):
        yield label, (t, *args[1:])


@pytest.mark.parametrize("name,label,make", CASES, ids=[f"{n}-{lbl}" for n, lbl, _ in CASES])
def test_opcheck(name, label, make):
    op = OPS[name].op
    for _, args in _layouts(make()):
        torch.library.opcheck(op, args)


def _on_cuda(args: tuple) -> tuple:
    return tuple(a.detach().to("cuda").requires_grad_(a.requires_grad)
                 if isinstance(a, torch.Tensor) else a for a in args)  # fmt: skip


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name,label,make", CASES, ids=[f"{n}-{lbl}" for n, lbl, _ in CASES])
def test_opcheck_on_cuda(name, label, make):
    """The same samples and layouts (made on the device) through opcheck with CUDA tensors:
    the CUDA kernels' registrations, fake kernels and autograd against the schema."""
    op = OPS[name].op
    for _, args in _layouts(_on_cuda(make())):
        torch.library.opcheck(op, args)


@pytest.mark.parametrize("name,label,make", CASES, ids=[f"{n}-{lbl}" for n, lbl, _ in CASES])
def test_outputs_are_not_views(name, label, make):
    """No op hands out a view (the frame-major results were transposes of the buffers the
    kernels fill): a custom op's view output may not be changed in place under autograd,
    so ``c -= c.mean(-1, keepdim=True)`` on an mfcc raised. Through the dispatcher and the
    eager path, with and without gradients."""
    from specux.ops._declare import call

    for args in (make(), _grad_inputs(make())):
        for out in (OPS[name].op(*args), call(name, *args)):
            for o in out if isinstance(out, tuple) else (out,):
                assert not o._is_view(), (name, label)


def test_features_change_in_place_under_autograd():
    """Cepstral mean normalization in place on an mfcc (and the other frame-major outputs)
    gives the values and gradients of the out-of-place expression."""
    transforms = {
        "mfcc": lambda x: specux.mfcc(x, sr=16000, n_mfcc=13),
        "lfcc": lambda x: specux.lfcc(x, sr=16000),
        "stft": lambda x: specux.stft(x, n_fft=256),
        "melspectrogram": lambda x: specux.melspectrogram(x, sr=16000),
        "cqt": lambda x: specux.cqt(x, sr=16000, n_bins=48, output="magnitude"),
        "chroma-cqt": lambda x: specux.chroma(x, sr=16000, source="cqt", norm=None),
    }
    for what, f in transforms.items():
        x = torch.randn(2, 4000, dtype=torch.float64, requires_grad=True)
        ref = f(x)
        ref = ref - ref.mean(-1, keepdim=True)
        got = f(x)
        got -= got.mean(-1, keepdim=True)
        assert torch.equal(got, ref), what
        grad_ref, = torch.autograd.grad(ref.abs().sum(), x)
        grad, = torch.autograd.grad(got.abs().sum(), x)
        assert torch.equal(grad, grad_ref), what


def test_kept_db_outputs_refuse_in_place_changes_under_autograd():
    """stft / melspectrogram in dB (no top_db) keep their output for the backward
    (docs/api.md): changed in place, the backward raises instead of using the changed
    values; out of place it gives the gradient of the recomputed expression. A clipped mel
    and the cqt in dB keep no output and may change in place."""
    kept = {
        "stft": lambda x: specux.stft(x, n_fft=256, output="db"),
        "melspectrogram": lambda x: specux.melspectrogram(x, sr=16000, output="db"),
    }
    free = {
        "mel top_db": lambda x: specux.melspectrogram(x, sr=16000, output="db", top_db=80.0),
        "cqt": lambda x: specux.cqt(x, sr=16000, n_bins=48, output="db"),
    }
    for what, f in {**kept, **free}.items():
        x = torch.randn(2, 4000, dtype=torch.float64, requires_grad=True)
        ref = f(x)
        ref = ref - ref.mean(-1, keepdim=True)
        grad_ref, = torch.autograd.grad(ref.abs().sum(), x)
        got = f(x)
        got -= got.mean(-1, keepdim=True)
        if what in kept:
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                torch.autograd.grad(got.abs().sum(), x)
        else:
            grad, = torch.autograd.grad(got.abs().sum(), x)
            assert torch.equal(grad, grad_ref), what


def _grad_inputs(args):
    return tuple(
        a.detach().clone().requires_grad_(True) if isinstance(a, torch.Tensor) else a
        for a in args
    )


def _differentiable(name, args):
    """Wrap the op so gradcheck varies only the tensor arguments."""
    op = OPS[name].op
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

    def fn(*tensors):
        full = list(args)
        for i, t in zip(positions, tensors):
            full[i] = t
        return op(*full)

    return fn, tuple(args[i] for i in positions)


@pytest.mark.parametrize("name,label,make", CASES, ids=[f"{n}-{lbl}" for n, lbl, _ in CASES])
def test_gradcheck(name, label, make):
    args = _grad_inputs(make())
    if args[0].numel() == 0:
        pytest.skip("nothing to differentiate")
    fn, tensors = _differentiable(name, args)
    assert torch.autograd.gradcheck(
        fn, tensors, atol=TOLERANCES["gradcheck_atol"], rtol=TOLERANCES["gradcheck_rtol"]
    )


@pytest.mark.parametrize("name,label,make", CASES, ids=[f"{n}-{lbl}" for n, lbl, _ in CASES])
def test_eager_autograd_matches_the_dispatcher(name, label, make):
    """ops._declare.call runs a plain eager call that needs a gradient through the op's eager
    autograd.Function (no dispatcher): gradcheck it, and its vector-Jacobian products must be
    the dispatcher route's, bit for bit (the same kernels and backward run on the same data)."""
    from specux.ops import _declare

    args = _grad_inputs(make())
    if args[0].numel() == 0:
        pytest.skip("nothing to differentiate")
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

    def eager(*tensors):
        full = list(args)
        for i, t in zip(positions, tensors):
            full[i] = t
        return _declare.call(name, *full)

    tensors = tuple(args[i] for i in positions)
    out = eager(*tensors)
    assert type(out.grad_fn).__name__ == f"SpecuxEager_{name}Backward"
    assert torch.autograd.gradcheck(
        eager, tensors, atol=TOLERANCES["gradcheck_atol"], rtol=TOLERANCES["gradcheck_rtol"]
    )
    fn, _ = _differentiable(name, args)
    ref = fn(*tensors)
    cotangent = _make(tuple(out.shape), out.dtype)
    wanted = [t for t in tensors if t.requires_grad]
    ours = torch.autograd.grad(out, wanted, cotangent, allow_unused=True)
    theirs = torch.autograd.grad(ref, wanted, cotangent, allow_unused=True)
    assert torch.equal(out, ref)
    for a, b in zip(ours, theirs):
        assert (a is None and b is None) or torch.equal(a, b)


@pytest.mark.parametrize("name,label,make", CASES, ids=[f"{n}-{lbl}" for n, lbl, _ in CASES])
def test_gradgradcheck(name, label, make):
    args = _grad_inputs(make())
    if args[0].numel() == 0:
        pytest.skip("nothing to differentiate")
    fn, tensors = _differentiable(name, args)
    assert torch.autograd.gradgradcheck(
        fn, tensors, atol=TOLERANCES["gradcheck_atol"], rtol=TOLERANCES["gradcheck_rtol"]
    )


def test_import_registers_ops():
    for name in ("c2c", "r2c", "c2r", "frame", "overlap_add", "stft", "istft"):
        assert hasattr(torch.ops.specux, name)


def test_backward_constants_are_cached_only_in_plain_eager_code():
    """The half-spectrum weights of the r2c / c2r adjoints are built once per size, dtype and
    device in eager code (they cost launches on every backward), never inside inference mode
    (an inference tensor would poison later autograd) or traced code."""
    from specux.ops import fft as ops_fft

    ops_fft._WEIGHTS.clear()
    grad = torch.zeros(3, 9, dtype=torch.complex64)
    with torch.inference_mode():
        ops_fft._hermitian_weights(grad, -1, 16, 0.5)
    assert not ops_fft._WEIGHTS
    first = ops_fft._hermitian_weights(grad, -1, 16, 0.5)
    again = ops_fft._hermitian_weights(grad, -1, 16, 0.5)
    assert first.data_ptr() == again.data_ptr() and len(ops_fft._WEIGHTS) == 1
    expected = torch.full((9,), 0.5)
    expected[0] = expected[8] = 1.0  # DC and Nyquist of 16 points
    assert torch.equal(first.reshape(-1), expected)
    odd = ops_fft._hermitian_weights(grad, -1, 17, 2.0).reshape(-1)  # no Nyquist bin
    assert odd[0] == 1.0 and torch.all(odd[1:] == 2.0)


@pytest.mark.parametrize("window,win_length,n_fft,dtype",
                         [("hann", 400, 512, torch.float32), ("kaiser:8.6", 7, 9, F64),
                          ("hamming", 16, 16, torch.float16)])  # fmt: skip
def test_named_window_op(window, win_length, n_fft, dtype):
    """specux::named_window (the window of traced backward formulas): opcheck, and the CPU
    backend's window, a fresh tensor every call."""
    from specux.kernels.cpu import stft as cpu_stft
    from specux.meta.params import WindowSpec

    op = torch.ops.specux.named_window.default
    like = torch.empty(0, dtype=C128)
    torch.library.opcheck(op, (like, window, win_length, n_fft, dtype))
    out = op(like, window, win_length, n_fft, dtype)
    expected = cpu_stft.named_full_window(WindowSpec.from_key(window), win_length, n_fft,
                                          str(dtype).removeprefix("torch."))  # fmt: skip
    assert out.dtype == dtype and torch.equal(out, torch.from_numpy(np.array(expected)))
    out.fill_(7.0)  # a fresh tensor: writing to it leaves the next call's alone
    assert torch.equal(op(like, window, win_length, n_fft, dtype),
                       torch.from_numpy(np.array(expected)))  # fmt: skip


def test_traced_backward_holds_no_host_constants():
    """Traced stft / istft backward formulas fetch a named window through specux::named_window,
    not as a host constant copied to the device inside the graph (a graph constant that CUDA
    graph trees cannot account for), and still give eager's gradient."""
    from torch._functorch.aot_autograd import aot_function

    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm

    def fn(x):
        S = specux.stft(x, n_fft=64, hop_length=16)
        return specux.istft(S * 0.5, n_fft=64, hop_length=16, length=x.shape[-1])

    x = _make((2, 400), F64, requires_grad=True)
    (traced,) = torch.autograd.grad(aot_function(fn, keep, keep)(x).sum(), [x])
    (eager,) = torch.autograd.grad(fn(x).sum(), [x])
    assert torch.equal(traced, eager)
    assert len(graphs) == 2  # forward, backward
    nodes = [n for gm in graphs for n in gm.graph.nodes]
    assert not [n.target for n in nodes if n.op == "get_attr"]
    windows = [n for n in nodes if n.target is torch.ops.specux.named_window.default]
    assert len(windows) == 2  # the stft's and the istft's backward


@pytest.mark.parametrize("bank", ["named", "tensor"])
def test_bank_adjoint_is_power_adjoint_of_the_banks_transpose(bank):
    """bank_adjoint(x, G) = power_adjoint(x, bank^T G), checks G's shape and the bank's
    width, refuses to differentiate the window; the filterbank spectrogram's backward runs
    through it (the same gradient as the composite chain with a window needing one)."""
    from specux.meta import matrices
    from specux.meta.matrices import MatrixSpec

    key = ('{"fmax": null, "fmin": 0.0, "htk": false, "kind": "mel", "n_fft": 32, '
           '"n_mels": 6, "norm": "slaney", "sr": 8000.0}')  # fmt: skip
    dense = torch.tensor(matrices.matrix(MatrixSpec.from_key(key), "float64"))  # a copy
    tensor, spec = (None, key) if bank == "named" else (dense.clone(), "")
    x = _make((2, 90), F64)
    g = _make((2, 6, 10), F64)
    args = (x, None, "hann", 32, 10, 32, True, "reflect", 1.5)
    got = torch.ops.specux.bank_adjoint(*args, tensor, spec, g)
    ref = torch.ops.specux.power_adjoint(*args[:8], False, 1.5, dense.T @ g)
    assert (got - ref).abs().max() <= TOLERANCES["float64"] * ref.abs().max()
    with pytest.raises(RuntimeError, match="grad of shape"):
        torch.ops.specux.bank_adjoint(*args, tensor, spec, g[..., :9])
    with pytest.raises(RuntimeError, match="columns"):
        torch.ops.specux.bank_adjoint(x, None, "hann", 30, 10, 30, True, "reflect", 1.5,
                                      tensor, spec, _make((2, 6, 10), F64))  # fmt: skip
    window = torch.hann_window(32, periodic=True, dtype=F64)
    y = torch.ops.specux.bank_adjoint(x, window.requires_grad_(True), "array", *args[3:],
                                      tensor, spec, g)  # fmt: skip
    with pytest.raises(RuntimeError, match="no gradient with respect to the window"):
        torch.autograd.grad(y.sum(), window)
    xg = x.clone().requires_grad_(True)
    grads = []
    for w in ("hann", torch.hann_window(32, periodic=True, dtype=F64).requires_grad_(True)):
        out = specux.melspectrogram(xg, sr=8000, n_fft=32, hop_length=10, n_mels=6, power=1.5,
                                    window=w, pad_mode="reflect")  # fmt: skip
        grads.append(torch.autograd.grad((out * g).sum(), xg)[0])
    err = (grads[0] - grads[1]).abs().max() / grads[1].abs().max()
    assert err <= TOLERANCES["float64"]


def test_power_adjoint_checks_its_gradient_and_matches_the_composite_backward():
    """power_adjoint raises for a cotangent not shaped like the stft, refuses to
    differentiate the window, and gives the gradient of the composite chain it replaces (the
    stft backward with a window tensor that needs a gradient still takes that chain)."""
    x = _make((2, 40), F64, requires_grad=True)
    op = torch.ops.specux.power_adjoint
    with pytest.raises(RuntimeError, match="grad of shape"):
        op(x.detach(), None, "hann", 16, 4, 16, True, "reflect", False, 2.0, torch.ones(2, 9, 5))
    window = torch.hann_window(16, periodic=True, dtype=F64)
    grads = []
    for w in (None, window.clone().requires_grad_(True)):
        out = specux.stft(x, n_fft=16, hop_length=4, window="hann" if w is None else w,
                          pad_mode="reflect", output="power")  # fmt: skip
        weight = _make(tuple(out.shape), F64)
        grads.append(torch.autograd.grad((out * weight).sum(), x)[0])
    err = (grads[0] - grads[1]).abs().max() / grads[1].abs().max()
    assert err <= TOLERANCES["float64"]
    g = _make((2, 9, 11), F64)
    y = op(x, window.requires_grad_(True), "array", 16, 4, 16, True, "reflect", False, 2.0, g)
    with pytest.raises(RuntimeError, match="no gradient with respect to the window"):
        torch.autograd.grad(y.sum(), window)


@pytest.mark.parametrize("which", ["melspectrogram", "stft"])
def test_db_backward_uses_the_kept_output(which, monkeypatch):
    """A dB output's backward takes the values from the output (10 ** (db / factor)) instead
    of a second forward transform: no forward kernel runs in the backward, and the gradient is
    the recomputing formula's in float64, zero where the values sit at or below eps (silent
    frames). float16 outputs are too coarse for that and keep recomputing."""
    from specux.ops import _declare
    from specux.ops import features as ops_features
    from specux.ops import stft as ops_stft

    op = "bank_spectrogram" if which == "melspectrogram" else "stft"

    def call(x):
        if which == "melspectrogram":
            return specux.melspectrogram(x, sr=8000, n_fft=64, hop_length=16, n_mels=8,
                                         output="db")  # fmt: skip
        return specux.stft(x, n_fft=64, hop_length=16, output="db")

    x = _make((2, 400), F64)
    x[1, 150:330] = 0.0  # silent frames: values below eps, the dB floor
    x.requires_grad_(True)
    y = call(x)
    assert (y == y.min()).any() and y.min() == 10.0 * np.log10(1e-10)  # some at the floor
    cotangent = _make(tuple(y.shape), F64)
    forward = _declare._KERNELS[op]["cpu"]
    runs = []

    def counted(*args):
        runs.append(args)
        return forward(*args)

    with monkeypatch.context() as patch:
        patch.setitem(_declare._KERNELS[op], "cpu", counted)
        (kept,) = torch.autograd.grad(y, [x], cotangent)
    assert not runs  # no second forward transform
    kept_db = ops_stft.kept_db
    with monkeypatch.context() as patch:  # the recomputing backward
        for module in (ops_stft, ops_features):
            patch.setattr(module, "kept_db", lambda kind, output: None)
        (recomputed,) = torch.autograd.grad(call(x), [x], cotangent)
    tol = TOLERANCES["db_kept_backward64"]
    assert torch.allclose(kept, recomputed, rtol=tol, atol=tol * recomputed.abs().max())
    assert kept_db("db", y.half()) is None and kept_db("power", y) is None and kept_db("db", y) is y


def test_db_cotangent_keeps_the_precision():
    """The dB derivative's scale in float64 for float64 values (it was float32: a Python float
    times a bool mask), float32 for half values (1 / values overflows float16), zero at and
    below eps."""
    from specux.ops import stft as ops_stft

    values = torch.tensor([3e-4, 1.0, 1e-10, 1e-12], dtype=F64)
    grad = torch.tensor([0.3, -2.0, 1.0, 1.0], dtype=F64)
    got = ops_stft.db_cotangent(values, grad, 10.0, 1e-10)
    exact = grad * (10.0 / np.log(10.0)) / values
    assert got.dtype == F64
    tol = TOLERANCES["db_cotangent64"]
    assert torch.allclose(got[:3], exact[:3], rtol=tol, atol=0) and got[3] == 0.0
    half = ops_stft.db_cotangent(torch.tensor([1e-6, 2.0], dtype=torch.float16),
                                 torch.ones(2, dtype=torch.float16), 10.0, 1e-10)  # fmt: skip
    assert half.dtype == torch.float32 and torch.isfinite(half).all()


def test_eager_calls_do_not_import_sympy():
    """An eager forward + backward of every transform leaves sympy unimported: torch._check
    imports torch.fx.experimental.symbolic_shapes (and sympy) on any condition, which made
    the first backward of a melspectrogram take 0.4 s here and 3.5 s on the H200 machine.
    The ops' checks go through compat.torch_compat.check. Run in a fresh interpreter (this
    one may have imported sympy already)."""
    import os
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import sys, torch, specux
        x = torch.randn(2, 4000, requires_grad=True)
        outs = [specux.melspectrogram(x, sr=16000, n_fft=256, n_mels=20),
                specux.mfcc(x, sr=16000, n_fft=256, n_mels=20, n_mfcc=8),
                specux.stft(x, n_fft=256, output="power"), specux.stft(x, n_fft=256).abs(),
                specux.istft(specux.stft(x, n_fft=256), n_fft=256, length=4000),
                specux.cqt(x, sr=22050, hop_length=512, n_bins=24).abs(),
                specux.fftconvolve(x, torch.randn(2, 50, requires_grad=True)),
                specux.irfft(specux.rfft(x), n=4000), specux.chroma(x, sr=16000, n_fft=256)]
        sum(o.sum() for o in outs).backward()
        print("sympy" in sys.modules)
    """)
    # a fresh process's environment: mkl-service, once imported here, sets
    # MKL_THREADING_LAYER=INTEL, which it then refuses in a child that loads torch's libgomp first
    env = {k: v for k, v in os.environ.items() if k != "MKL_THREADING_LAYER"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_check_raises_the_message_for_a_false_bool():
    from specux.compat.torch_compat import check

    check(True, lambda: "never built")
    with pytest.raises(RuntimeError, match="the bank has 3 columns"):
        check(False, lambda: "the bank has 3 columns")
    with pytest.raises(TypeError):  # neither a bool nor a SymBool: torch's own error
        check(1, lambda: "an int")


def _raw_cases():
    x = torch.randn(3, 64, dtype=F64)
    z = torch.randn(3, 10, dtype=torch.complex128)
    spec = torch.randn(2, 33, 9, dtype=torch.complex128)
    frames = torch.randn(2, 5, 16, dtype=F64)
    mel = ('{"fmax": null, "fmin": 0.0, "htk": false, "kind": "mel", "n_fft": 32, '
           '"n_mels": 6, "norm": "slaney", "sr": 8000.0}')  # fmt: skip
    ops = torch.ops.specux
    stft = (x, None, "hann", 64, 16, 64, True, "constant", False, True, "complex", 1e-10)
    return [
        (ops.c2c, (z, [5], True, "backward"), ValueError,
         "dim=5 is out of range for an input with 2 dimensions"),
        (ops.c2c, (z, [1, -1], True, "backward"), ValueError, r"dim=\(1, -1\) repeats an axis"),
        (ops.c2c, (z, [], True, "backward"), ValueError, "at least one axis"),
        (ops.r2c, (x, [1], "unitary"), ValueError, "norm='unitary' is not one of"),
        (ops.c2r, (z, [1], 30, "backward"), RuntimeError, "10 bins given for 30 output"),
        (ops.c2r, (z, [1], 0, "backward"), ValueError, "last_size=0"),
        (ops.frame, (x, 16, 0, 8, "reflect"), ValueError, "hop_length=0"),
        (ops.frame, (x, 16, 4, 8, "edge"), ValueError, "pad_mode='edge' is not one of"),
        (ops.overlap_add, (frames, 100, 4, -1, "constant"), ValueError, "pad=-1"),
        (ops.stft, (x, None, "hann", 0, *stft[4:]), ValueError, "n_fft=0"),
        (ops.stft, (*stft[:4], 0, *stft[5:]), ValueError, "hop_length=0"),
        (ops.stft, (*stft[:2], "hanning", *stft[3:]), ValueError, "window_name='hanning'"),
        (ops.stft, (*stft[:2], "kaiser", *stft[3:]), ValueError, "window_name='kaiser'"),
        # the window parameters window_spec refuses, through the op's key too
        (ops.stft, (*stft[:2], "kaiser:1000000.0", *stft[3:]), ValueError, "kaiser beta"),
        (ops.stft, (*stft[:2], "gaussian:-1.0", *stft[3:]), ValueError, "gaussian std"),
        (ops.stft, (x, torch.ones(60, dtype=F64), "array", *stft[3:]), ValueError,
         r"window has shape \(60,\), expected \(64,\)"),
        (ops.stft, (*stft[:7], "bogus", *stft[8:]), ValueError, "pad_mode='bogus'"),
        (ops.stft, (*stft[:10], "phase", 1e-10), ValueError, "output='phase'"),
        (ops.istft, (spec, None, "hann", 8, 2, 8, True, False, True, 10, "raise"), ValueError,
         r"n_fft=8 \(onesided=True\) needs 5 bins"),
        (ops.istft, (spec, None, "hann", 64, 16, 64, True, False, True, 10, "skip"), ValueError,
         "nola='skip' is not one of"),
        (ops.project, (torch.randn(2, 6, 9, dtype=F64), None, "{bad json", None), ValueError,
         "spec='{bad json' is not a valid key"),
        (ops.project, (torch.randn(2, 6, 9, dtype=F64), torch.randn(4, 5, dtype=F64), "", None),
         ValueError, r"matrix has shape \(4, 5\), expected \(n_out, 6\)"),
        (ops.bank_spectrogram, (*stft[:8], 0.0, None, mel, "power", 1e-10), ValueError,
         "power=0.0"),
        (ops.bank_spectrogram, (*stft[:8], 2.0, None, "nope", "power", 1e-10), ValueError,
         "bank_spec='nope'"),
        (ops.cqt, (x, "nope", "constant", "complex", 1e-10), ValueError, "spec='nope'"),
    ]


@pytest.mark.parametrize("case", range(len(_raw_cases())))
def test_raw_ops_check_their_arguments(case):
    """A direct torch.ops.specux call with a bad argument raises naming it (the public
    functions check before they call): c2c with a dim past the tensor's dimensions wrapped
    around, istft of too few bins ran, a zero hop divided by zero, a pad mode alias was a
    KeyError. The fake kernels check the same (torch.compile / export see the same error)."""
    op, args, error, match = _raw_cases()[case]
    with pytest.raises(error, match=match):
        op(*args)
    fake_args = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
    with pytest.raises(error, match=match):
        op(*fake_args)


def test_tensors_on_two_devices_are_refused():
    """A direct op call mixing devices is a ValueError naming the op: the dispatcher would
    pick one device's kernel (or the fake one for a meta tensor, which returned an
    uninitialised CPU tensor) and hand it the other device's tensor."""
    from specux.kernels.cpu.cqt import correlation_kernel
    from specux.meta.cqt_params import cqt_spec

    with pytest.raises(ValueError, match=r"specux::fftconvolve: tensors on cpu and meta"):
        torch.ops.specux.fftconvolve(torch.zeros(4, dtype=F64), torch.zeros(3, device="meta"))
    spec = cqt_spec(sr=1000, fmin=100, n_bins=4, hop_length=16, filter_scale=0.25)
    kernel = torch.from_numpy(correlation_kernel(spec)).to("meta")
    with pytest.raises(ValueError, match="one device"):
        torch.ops.specux.cqt_kernel(torch.zeros(50, dtype=F64), kernel, spec.as_key(),
                                    "constant", "complex", 1e-10)  # fmt: skip
