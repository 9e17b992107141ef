"""cqt / cqt_adjoint ops: the constant-Q (variable-Q) transform and its exact adjoint.

The transform (definition in :mod:`specux.kernels.cpu.cqt`) is real-linear in ``x`` for the
complex output, so the two ops are an adjoint pair, like frame / overlap_add:
- cqt: the output mode's chain rule (the complex transform recomputed through the op when
  output != "complex") gives a complex cotangent G (..., n_bins, n_frames);
  grad_x = cqt_adjoint(G) = Re(A^H G).
- cqt_adjoint: grad_G = cqt(grad, output="complex") = A grad.
Each backward is the other op, so every order of derivative is made of these two ops.

``spec`` is a :meth:`specux.meta.cqt_params.ConstantQSpec.as_key` string: the op schema carries
no arrays, and the kernels are built (and cached) from it inside the kernel, never in traced
code.
"""

from __future__ import annotations

import torch

from specux.kernels.cpu import cqt as cpu_cqt
from specux.meta.cqt_params import ConstantQSpec
from specux.meta.cqt_shapes import cqt_adjoint_shape, cqt_shape
from specux.ops._declare import COMPLEX_OF, REAL_OF, call, declare, from_numpy, to_numpy
from specux.ops.stft import output_cotangent

# eps is unused when the output is complex; any positive value does.
_COMPLEX_EPS = 1e-10


# ---------------------------------------------------------------------------------------------
# cqt


def _cqt_fake(x, spec, pad_mode, output, eps):
    s = ConstantQSpec.from_key(spec)
    *batch, n_bins, count = cqt_shape(x.shape, s.n_bins, s.hop_length)
    dtype = COMPLEX_OF[x.dtype] if output == "complex" else x.dtype
    # Frame-major in memory, like the kernel's result (each frame's bins are one store).
    return x.new_empty((*batch, count, n_bins), dtype=dtype).transpose(-1, -2)


def _cqt_cpu(x, spec, pad_mode, output, eps):
    out = cpu_cqt.cqt(to_numpy(x), ConstantQSpec.from_key(spec), pad_mode, output, eps)
    return from_numpy(out)


def _cqt_cuda(x, spec, pad_mode, output, eps):
    from specux.kernels.cuda import transforms

    if x.shape[-1] == 0 and pad_mode != "constant":
        raise ValueError(f"cqt: pad_mode={pad_mode!r} needs at least one sample")
    return transforms.cqt(x, ConstantQSpec.from_key(spec), pad_mode, output, eps)


def _cqt_setup(ctx, inputs, output):
    x, ctx.spec, ctx.pad_mode, ctx.output, ctx.eps = inputs
    ctx.length = x.shape[-1]
    if ctx.output != "complex":
        ctx.save_for_backward(x)


def _cqt_backward(ctx, grad):
    if ctx.output != "complex":
        (x,) = ctx.saved_tensors
        spectrum = cqt(x, ctx.spec, ctx.pad_mode, "complex", ctx.eps)
        grad = output_cotangent(spectrum, grad, ctx.output, ctx.eps)
    return cqt_adjoint(grad, ctx.spec, ctx.pad_mode, ctx.length), None, None, None, None


declare(
    "cqt",
    "(Tensor x, str spec, str pad_mode, str output, float eps) -> Tensor",
    fake=_cqt_fake,
    kernels={"cpu": _cqt_cpu, "cuda": _cqt_cuda},
    backward=_cqt_backward,
    setup_context=_cqt_setup,
)


def cqt(x: torch.Tensor, spec: str, pad_mode: str, output: str, eps: float) -> torch.Tensor:
    """``(..., L)`` real -> ``(..., n_bins, 1 + L // hop_length)``; ``spec`` a spec key."""
    return call("cqt", x, spec, pad_mode, output, eps)


# ---------------------------------------------------------------------------------------------
# cqt_adjoint


def _cqt_adjoint_fake(grad, spec, pad_mode, length):
    return grad.new_empty(cqt_adjoint_shape(grad.shape, length), dtype=REAL_OF[grad.dtype])


def _cqt_adjoint_cpu(grad, spec, pad_mode, length):
    s = ConstantQSpec.from_key(spec)
    return from_numpy(cpu_cqt.cqt_adjoint(to_numpy(grad), s, pad_mode, length))


def _cqt_adjoint_cuda(grad, spec, pad_mode, length):
    from specux.kernels.cuda import transforms

    s = ConstantQSpec.from_key(spec)
    return transforms.cqt_adjoint(grad, s, pad_mode, length)


def _cqt_adjoint_setup(ctx, inputs, output):
    _, ctx.spec, ctx.pad_mode, _ = inputs


def _cqt_adjoint_backward(ctx, grad):
    return cqt(grad, ctx.spec, ctx.pad_mode, "complex", _COMPLEX_EPS), None, None, None


declare(
    "cqt_adjoint",
    "(Tensor grad, str spec, str pad_mode, SymInt length) -> Tensor",
    fake=_cqt_adjoint_fake,
    kernels={"cpu": _cqt_adjoint_cpu, "cuda": _cqt_adjoint_cuda},
    backward=_cqt_adjoint_backward,
    setup_context=_cqt_adjoint_setup,
)


def cqt_adjoint(grad: torch.Tensor, spec: str, pad_mode: str, length: int) -> torch.Tensor:
    """Adjoint of :func:`cqt` (complex output): ``(..., n_bins, n_frames)`` -> ``(..., length)``."""
    return call("cqt_adjoint", grad, spec, pad_mode, length)
