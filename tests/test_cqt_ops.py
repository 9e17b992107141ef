"""cqt / vqt through torch: the ops ``specux::cqt`` and ``specux::cqt_adjoint`` (opcheck,
gradcheck, gradgradcheck, compile, export) and their agreement with the numpy engine. The
engine's own tests (numpy only) are tests/test_cqt.py."""

from __future__ import annotations

import numpy as np
import pytest
from tolerances import TOLERANCES

from specux.kernels.cpu import cqt as cpu_cqt
from specux.meta.cqt_params import cqt_spec

torch = pytest.importorskip("torch")
import specux.ops.cqt as ops_cqt  # noqa: E402 - registers specux::cqt and specux::cqt_adjoint

SMALL = cqt_spec(sr=2000, fmin=100, n_bins=12, hop_length=64)
# Long filters for a short hop: the automatic plan takes the polyphase path.
LONG = cqt_spec(sr=1000, fmin=15, n_bins=24, hop_length=8)


def _layouts(t):
    yield t
    yield torch.cat([t, t], dim=-1)[..., ::2]
    yield torch.cat([t[..., :1], t], dim=-1)[..., 1:]


OPCHECK_CASES = [
    ("complex-constant", SMALL, (2, 600), "constant", "complex"),
    ("magnitude-reflect", SMALL, (3, 257), "reflect", "magnitude"),
    (
        "power-replicate",
        cqt_spec(sr=4000, fmin=30, n_bins=30, hop_length=100, bins_per_octave=7, gamma=None),
        (2, 1, 450),
        "replicate",
        "power",
    ),
    ("db-circular", SMALL, (500,), "circular", "db"),
    ("polyphase", LONG, (2, 300), "reflect", "complex"),
    ("empty-batch", SMALL, (0, 300), "constant", "complex"),
]


@pytest.mark.parametrize(
    "label,spec,shape,pad_mode,output", OPCHECK_CASES, ids=[c[0] for c in OPCHECK_CASES]
)
def test_opcheck_cqt(label, spec, shape, pad_mode, output):
    x = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for t in _layouts(x):
        torch.library.opcheck(
            torch.ops.specux.cqt.default, (t, spec.as_key(), pad_mode, output, 1e-10)
        )


@pytest.mark.parametrize(
    "label,spec,shape,pad_mode,output", OPCHECK_CASES, ids=[c[0] for c in OPCHECK_CASES]
)
def test_opcheck_cqt_adjoint(label, spec, shape, pad_mode, output):
    length = shape[-1]
    g = torch.Generator().manual_seed(1)
    grad_shape = (*shape[:-1], spec.n_bins, 1 + length // spec.hop_length)
    grad = torch.complex(
        torch.randn(grad_shape, dtype=torch.float64, generator=g),
        torch.randn(grad_shape, dtype=torch.float64, generator=g),
    )
    for t in _layouts(grad):
        torch.library.opcheck(
            torch.ops.specux.cqt_adjoint.default, (t, spec.as_key(), pad_mode, length)
        )


def test_op_matches_engine_float32_and_float64():
    x = torch.randn(2, 3, 1000)
    for t in (x, x.double(), x[..., ::2]):
        got = ops_cqt.cqt(t, SMALL.as_key(), "reflect", "complex", 1e-10)
        ref = cpu_cqt.cqt(t.numpy(), SMALL, "reflect")
        assert (
            got.dtype == {torch.float32: torch.complex64, torch.float64: torch.complex128}[t.dtype]
        )
        np.testing.assert_array_equal(got.numpy(), ref)


GRAD_CASES = [
    ("complex", SMALL, 600, "constant", "complex", False),
    ("magnitude", SMALL, 600, "reflect", "magnitude", False),
    ("db", SMALL, 600, "replicate", "db", False),
    ("polyphase-complex", LONG, 200, "circular", "complex", True),
    ("polyphase-magnitude", LONG, 200, "reflect", "magnitude", True),
]


def _signal(length):
    return torch.randn(length, dtype=torch.float64, generator=torch.Generator().manual_seed(7))


@pytest.mark.parametrize(
    "label,spec,length,pad_mode,output,fast", GRAD_CASES, ids=[c[0] for c in GRAD_CASES]
)
def test_gradcheck_and_gradgradcheck(label, spec, length, pad_mode, output, fast):
    if fast:
        assert cpu_cqt.choose_plan(spec, 1 + length // spec.hop_length, 1)[0] > 0
    x = _signal(length).requires_grad_(True)
    key = spec.as_key()

    def fn(t):
        return ops_cqt.cqt(t, key, pad_mode, output, 1e-10)

    tol = dict(atol=TOLERANCES["gradcheck_atol"], rtol=TOLERANCES["gradcheck_rtol"])
    assert torch.autograd.gradcheck(fn, (x,), fast_mode=fast, **tol)
    assert torch.autograd.gradgradcheck(fn, (x,), fast_mode=fast, **tol)


def test_gradcheck_adjoint_op():
    length = 600
    g = torch.Generator().manual_seed(3)
    shape = (2, SMALL.n_bins, 1 + length // SMALL.hop_length)
    grad = torch.complex(
        torch.randn(shape, dtype=torch.float64, generator=g),
        torch.randn(shape, dtype=torch.float64, generator=g),
    )
    grad.requires_grad_(True)

    def fn(t):
        return ops_cqt.cqt_adjoint(t, SMALL.as_key(), "reflect", length)

    tol = dict(atol=TOLERANCES["gradcheck_atol"], rtol=TOLERANCES["gradcheck_rtol"])
    assert torch.autograd.gradcheck(fn, (grad,), **tol)
    assert torch.autograd.gradgradcheck(fn, (grad,), **tol)


def test_compile_forward_backward_and_export():
    torch._dynamo.reset()
    key = LONG.as_key()

    def f(x):
        return ops_cqt.cqt(x, key, "reflect", "magnitude", 1e-10).square().sum()

    x = _signal(300)
    xe, xc = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    f(xe).backward()
    torch.compile(f, fullgraph=True, backend="aot_eager")(xc).backward()
    tol = TOLERANCES["float64"]
    torch.testing.assert_close(xc.grad, xe.grad, rtol=tol, atol=tol)

    class Module(torch.nn.Module):
        def forward(self, x):
            return ops_cqt.cqt(x, SMALL.as_key(), "constant", "db", 1e-10)

    ep = torch.export.export(Module(), (torch.randn(2, 700),))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert "specux.cqt.default" in targets
