"""torch.compile(fullgraph=True) and torch.export over specux ops."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tolerances import TOLERANCES  # noqa: E402

import specux  # noqa: E402


def _roundtrip(x, window):
    S = specux.stft(x, 64, 16, window=window, pad_mode="reflect")
    P = specux.stft(x, 64, 16, output="power")
    y = specux.istft(S, 64, 16, window=window, length=x.shape[-1])
    return y, P


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_compile_stft_istft_forward_backward(backend):
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 500, dtype=torch.float64, generator=g)
    w = torch.rand(64, dtype=torch.float64, generator=g) + 0.5
    compiled = torch.compile(_roundtrip, fullgraph=True, backend=backend)

    def run(fn):
        xx = x.clone().requires_grad_(True)
        ww = w.clone().requires_grad_(True)
        y, P = fn(xx, ww)
        (y.square().sum() + P.sum() * 1e-3).backward()
        return y.detach(), P.detach(), xx.grad, ww.grad

    eager, comp = run(_roundtrip), run(compiled)
    for a, b in zip(eager, comp):
        torch.testing.assert_close(b, a, rtol=TOLERANCES["float64"], atol=TOLERANCES["float64"])


def test_compile_fft_family():
    torch._dynamo.reset()

    def f(x):
        spec = specux.rfft(x, n=30, norm="ortho")
        full = specux.fftn(specux.irfft(spec, n=30).reshape(5, 6))
        return specux.ifft2(full).real.sum() + specux.hfft(spec[:8]).sum()

    x = torch.randn(30, dtype=torch.float64, requires_grad=True)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    (ge,) = torch.autograd.grad(f(x), x)
    (gc,) = torch.autograd.grad(compiled(x), x)
    torch.testing.assert_close(gc, ge)


def _dynamic_cases():
    return {
        "stft_istft": lambda x: specux.istft(specux.stft(x, n_fft=64, hop_length=16), n_fft=64,
                                             hop_length=16, length=x.shape[-1]),
        "power": lambda x: specux.stft(x, n_fft=64, hop_length=16, output="power"),
        "conv": lambda x: specux.fftconvolve(x, x[..., :20]),
        "rfft": lambda x: specux.irfft(specux.rfft(x), n=x.shape[-1]),
        "mel": lambda x: specux.melspectrogram(x, sr=16000, n_fft=128, n_mels=16),
        "mfcc": lambda x: specux.mfcc(x, sr=16000, n_fft=128, n_mels=16, n_mfcc=6, top_db=80.0),
        "lfcc": lambda x: specux.lfcc(x, sr=16000, n_fft=128, n_filter=16, n_lfcc=6),
        "cqt": lambda x: specux.cqt(x, sr=8000, hop_length=64, fmin=200.0, n_bins=12).abs(),
        "vqt": lambda x: specux.vqt(x, sr=8000, hop_length=64, fmin=200.0, n_bins=12).abs(),
        "chroma": lambda x: specux.chroma(x, sr=16000, n_fft=128),
        "kaiser": lambda x: specux.stft(x, n_fft=64, window=("kaiser", 6.0), output="power"),
    }  # fmt: skip


def _same_as_eager(fn, compiled, lengths):
    for n in lengths:
        x = torch.randn(2, n, dtype=torch.float64, requires_grad=True)
        y, ref = compiled(x), fn(x)
        (gx,) = torch.autograd.grad(y.sum(), x)
        (gr,) = torch.autograd.grad(ref.sum(), x)
        torch.testing.assert_close(y, ref, rtol=TOLERANCES["float64"], atol=TOLERANCES["float64"])
        torch.testing.assert_close(gx, gr, rtol=TOLERANCES["float64"], atol=TOLERANCES["float64"])


@pytest.mark.parametrize("name", list(_dynamic_cases()) + ["stft_complex", "cqt_grad"])
def test_compile_with_symbolic_lengths(name):
    """torch.compile(dynamic=True) with torch's defaults: one graph for every signal length,
    forward and backward (counted: the backward's guards recompile the frame too), equal to
    eager. Dynamo leaves specux's float defaults symbolic there; the parameters that name a
    filterbank or window become values (a guard) before their keys are built: the filterbank
    transforms and a kaiser window stopped with "sort with non-constant keys" or a
    string-building error. As_float's finiteness test is a comparison: math.isfinite cannot
    be traced on a symbolic float. The ops' lengths are SymInt (an ``int`` in the istft,
    overlap-add and cqt-adjoint schemas pinned each length: a graph a length with a
    gradient, and fftconvolve's backward pinned it choosing its frame). The real FFT's
    backward guards the length's parity (the Hermitian weights): two graphs."""
    torch._dynamo.reset()
    cases = _dynamic_cases()
    cases["stft_complex"] = lambda x: specux.stft(x, n_fft=64, hop_length=16).abs()
    cases["cqt_grad"] = lambda x: specux.cqt(x, sr=2000, fmin=100.0, n_bins=12,
                                             hop_length=64).abs()  # fmt: skip
    from torch._dynamo.testing import CompileCounterWithBackend

    fn = cases[name]
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(fn, dynamic=True, fullgraph=True, backend=counter)
    _same_as_eager(fn, compiled, (1500,))
    first = counter.frame_count  # the first length's compiles
    _same_as_eager(fn, compiled, (1700, 2101, 1900))
    assert counter.frame_count - first == (1 if name == "rfft" else 0)


def _argument_cases():
    """(function, first arguments, second arguments): parameters passed to the compiled
    function, which Dynamo traces as symbols under dynamic=True (and, after a change, under
    automatic dynamic), floats and ints both."""
    S = specux
    return {
        "mel": (lambda x, sr, fmin, power, n_mels: S.melspectrogram(
            x, sr=sr, n_fft=256, fmin=fmin, power=power, n_mels=n_mels),
            (16000.0, 30.0, 1.5, 20), (22050.0, 10.0, 2.0, 24)),
        "mel_db": (lambda x, eps, top_db: S.melspectrogram(
            x, sr=16000, n_fft=256, n_mels=16, output="db", eps=eps, top_db=top_db),
            (1e-8, 60.0), (1e-6, 40.0)),
        "kaiser": (lambda x, beta, n: S.stft(x, n_fft=n, window=("kaiser", beta), output="power"),
                   (8.0, 128), (5.0, 96)),
        "mfcc": (lambda x, lifter: S.mfcc(x, sr=16000, n_fft=256, n_mels=16, n_mfcc=8,
                                          lifter=lifter), (0.0,), (22.0,)),
        "lfcc": (lambda x, fmax: S.lfcc(x, sr=16000, n_fft=256, n_filter=16, n_lfcc=8,
                                        fmax=fmax), (7000.0,), (6000.0,)),
        "chroma": (lambda x, tuning: S.chroma(x, sr=16000, n_fft=256, tuning=tuning),
                   (0.1,), (-0.2,)),
        "vqt": (lambda x, gamma, fmin, bpo: S.vqt(x, sr=8000, hop_length=64, fmin=fmin, n_bins=12,
                                                  gamma=gamma, bins_per_octave=bpo).abs(),
                (None, 200.0, 12), (3.0, 150.0, 24)),
        "chroma_cqt": (lambda x, sr: S.chroma(x, sr=sr, source="cqt", hop_length=64, fmin=100.0,
                                              n_octaves=3), (8000.0,), (9000.0,)),
    }  # fmt: skip


@pytest.mark.parametrize("dynamic", [True, None])
@pytest.mark.parametrize("name", list(_argument_cases()))
def test_compile_with_parameters_as_arguments(name, dynamic):
    """Parameters given to the compiled function, then changed, then given back: each call
    equals eager, forward and backward (a changed filterbank parameter recompiles)."""
    torch._dynamo.reset()
    fn, first, second = _argument_cases()[name]
    compiled = torch.compile(fn, dynamic=dynamic, fullgraph=True, backend="aot_eager")
    tol = TOLERANCES["float64"]
    for args in (first, second, first):
        for n in (1500, 1700):
            x = torch.randn(2, n, dtype=torch.float64, requires_grad=True)
            y, ref = compiled(x, *args), fn(x, *args)
            (gx,) = torch.autograd.grad(y.sum(), x)
            (gr,) = torch.autograd.grad(ref.sum(), x)
            torch.testing.assert_close(y, ref, rtol=tol, atol=tol)
            torch.testing.assert_close(gx, gr, rtol=tol, atol=tol)


@pytest.mark.parametrize("module", ["MelSpectrogram", "MFCC", "LFCC", "Chroma", "CQT"])
def test_compile_modules_with_symbolic_lengths(module):
    """specux.nn's filterbank modules trace under dynamic=True with torch's defaults (CQT /
    VQT call the functions, whose parameters become values before their keys are built)."""
    import specux.nn as snn

    torch._dynamo.reset()
    kwargs = {"MelSpectrogram": dict(sr=16000, n_fft=128, n_mels=16),
              "MFCC": dict(sr=16000, n_mfcc=6, n_fft=128, n_mels=16),
              "LFCC": dict(sr=16000, n_lfcc=6, n_fft=128, n_filter=16),
              "Chroma": dict(sr=16000, n_fft=128),
              "CQT": dict(sr=8000, hop_length=64, fmin=200.0, n_bins=12)}[module]  # fmt: skip
    m = getattr(snn, module)(dtype=torch.float64, **kwargs)
    fn = (lambda x: m(x).abs()) if module == "CQT" else m
    compiled = torch.compile(fn, dynamic=True, fullgraph=True, backend="aot_eager")
    _same_as_eager(fn, compiled, (1500, 1700, 2101))


def test_compile_automatic_dynamic_lengths():
    """torch's default (dynamic=None): the second length recompiles with a symbolic length
    (automatic dynamic shapes), floats stay constants, and mel works unchanged."""
    torch._dynamo.reset()
    fn = lambda x: specux.melspectrogram(x, sr=16000, n_fft=128, n_mels=16)  # noqa: E731
    _same_as_eager(fn, torch.compile(fn, fullgraph=True, backend="aot_eager"), (1500, 1700, 2101))


def _fft_size_cases(fft):
    """FFT-family calls whose n / s come from the signal's length (``fft``: specux or
    torch.fft)."""
    return {
        "fft": lambda x: fft.fft(x, n=2 * x.shape[-1]),
        "ifft": lambda x: fft.ifft(x, n=x.shape[-1] - 3),
        "rfft": lambda x: fft.rfft(x, n=x.shape[-1] + 5),
        "irfft": lambda x: fft.irfft(fft.rfft(x), n=x.shape[-1]),
        "hfft": lambda x: fft.hfft(fft.rfft(x), n=x.shape[-1]),
        "ihfft": lambda x: fft.ihfft(x, n=x.shape[-1] + 1),
        "fft2": lambda x: fft.fft2(x, s=(3, x.shape[-1] // 2)),
        "fftn-keep": lambda x: fft.fftn(x, s=(-1, x.shape[-1] // 2)),
        "irfftn": lambda x: fft.irfftn(fft.rfftn(x), s=(2, x.shape[-1])),
    }


class _Call(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


@pytest.mark.parametrize("name", list(_fft_size_cases(torch.fft)))
def test_fft_sizes_from_symbolic_lengths(name):
    """n / s computed from a traced length stay symbolic, as in torch.fft: torch.export with
    a dynamic length exports (the length was pinned: "Constraints violated") and runs other
    lengths; torch.compile(dynamic=True) makes one graph for every length (it made 2-3)."""
    fn, ref = _fft_size_cases(specux)[name], _fft_size_cases(torch.fft)[name]
    lengths = (40, 41, 64, 100)
    ep = torch.export.export(_Call(fn), (torch.randn(2, 64, dtype=torch.float64),),
                             dynamic_shapes=({1: torch.export.Dim("L", min=8, max=4096)},))
    torch._dynamo.reset()
    graphs = []

    def counting(gm, inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(fn, dynamic=True, fullgraph=True, backend=counting)
    for n in lengths:
        x = torch.randn(2, n, dtype=torch.float64)
        expected = ref(x)
        for got in (ep.module()(x), compiled(x)):
            torch.testing.assert_close(got, expected, rtol=TOLERANCES["float64"],
                                       atol=TOLERANCES["float64"])  # fmt: skip
    assert len(graphs) == 1


def test_export_istft_to_the_signals_length():
    """stft -> istft(length=x.shape[-1]) exports with a dynamic length and runs others (the
    istft schema's ``int length`` pinned it: "Constraints violated"); the nn modules too."""
    import specux.nn as snn

    fn = _dynamic_cases()["stft_istft"]
    stft, istft = snn.STFT(n_fft=64, hop_length=16, dtype=torch.float64), snn.ISTFT(
        n_fft=64, hop_length=16, dtype=torch.float64)  # fmt: skip

    def modules(x):
        return istft(stft(x), length=x.shape[-1])

    dims = ({1: torch.export.Dim("L", min=600, max=8192)},)
    for f in (fn, modules):
        ep = torch.export.export(_Call(f), (torch.randn(2, 1000, dtype=torch.float64),),
                                 dynamic_shapes=dims)  # fmt: skip
        for n in (700, 1333):
            x = torch.randn(2, n, dtype=torch.float64)
            torch.testing.assert_close(ep.module()(x), f(x), rtol=TOLERANCES["float64"],
                                       atol=TOLERANCES["float64"])  # fmt: skip


class _Conv(torch.nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode

    def forward(self, x, h):
        return specux.fftconvolve(x, h, mode=self.mode)


def test_export_fftconvolve_with_dynamic_lengths_in_every_mode():
    """Both lengths dynamic: the "same" crop narrowed with a guard torch.export could not
    prove ((K - 1) // 2 <= K - 1, "Constraints violated (K)"); it is a slice now."""
    dims = ({1: torch.export.Dim("T", min=100, max=5000)},
            {1: torch.export.Dim("K", min=2, max=99)})  # fmt: skip
    x, h = torch.randn(2, 300, dtype=torch.float64), torch.randn(2, 17, dtype=torch.float64)
    for mode in ("full", "same", "valid"):
        conv = _Conv(mode)
        ep = torch.export.export(conv, (x, h), dynamic_shapes=dims)
        for n, k in ((1001, 40), (257, 2), (4000, 99)):
            a = torch.randn(2, n, dtype=torch.float64)
            b = torch.randn(2, k, dtype=torch.float64)
            torch.testing.assert_close(ep.module()(a, b), conv(a, b), rtol=TOLERANCES["float64"],
                                       atol=TOLERANCES["float64"])  # fmt: skip


class _Spectrogram(torch.nn.Module):
    def forward(self, x):
        return specux.stft(x, 128, 32, output="db")


def test_export_gives_specux_nodes():
    ep = torch.export.export(_Spectrogram(), (torch.randn(2, 1000),))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert "specux.stft.default" in targets
    x = torch.randn(2, 1000)
    torch.testing.assert_close(ep.module()(x), _Spectrogram()(x))


def test_compile_the_librosa_presets_batched_mfcc():
    """The librosa preset's mfcc of several signals (its whole-array top_db clip, then the
    DCT) under fullgraph: its DCT matrix was built with numpy inside the traced function,
    which Dynamo cannot trace ("ndarray attribute access"); it goes through the project op
    with the matrix named now, equal to eager, gradients too."""
    from specux.presets import librosa as sl

    def fn(y):
        return sl.mfcc(y, sr=16000, n_fft=256, n_mels=20, n_mfcc=8, lifter=10.0)

    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    _same_as_eager(fn, compiled, (3000,))
