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


class _Spectrogram(torch.nn.Module):
    def forward(self, x):
        return specux.stft(x, 128, 32, output="db")


def test_export_gives_specux_nodes():
    ep = torch.export.export(_Spectrogram(), (torch.randn(2, 1000),))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert "specux.stft.default" in targets
    x = torch.randn(2, 1000)
    torch.testing.assert_close(ep.module()(x), _Spectrogram()(x))
