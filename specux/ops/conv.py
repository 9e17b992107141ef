"""fftconvolve op (full mode along the last axis; leading axes broadcast).

Backward: z = x * y (bilinear), so grad_x[n] = sum_k g[n + k] conj(y[k]): the full
convolution of g with conj(flip(y)), read from offset Ly - 1 for Lx samples, summed over the
axes x was broadcast along (and its real part when x is real). Likewise for y.
"""

from __future__ import annotations

import torch

from specux.kernels.cpu import conv as cpu_conv
from specux.ops._declare import call, declare, from_numpy, to_numpy


def _fake(x, y):
    batch = torch.broadcast_shapes(x.shape[:-1], y.shape[:-1])
    dtype = torch.promote_types(x.dtype, y.dtype)
    return x.new_empty((*batch, x.shape[-1] + y.shape[-1] - 1), dtype=dtype)


def _cpu(x, y):
    return from_numpy(cpu_conv.fftconvolve_full(to_numpy(x), to_numpy(y)))


def _cuda(x, y):
    from specux.kernels.cuda import transforms

    return transforms.fftconvolve(x, y)


def _setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _one_grad(grad, other, target):
    length = target.shape[-1]
    kernel = other.conj().flip(-1) if other.is_complex() else other.flip(-1)
    full = fftconvolve(grad, kernel)
    part = full.narrow(-1, other.shape[-1] - 1, length)
    if not target.is_complex() and part.is_complex():
        part = part.real
    return part.sum_to_size(target.shape)


def _backward(ctx, grad):
    x, y = ctx.saved_tensors
    grad_x = _one_grad(grad, y, x) if ctx.needs_input_grad[0] else None
    grad_y = _one_grad(grad, x, y) if ctx.needs_input_grad[1] else None
    return grad_x, grad_y


declare(
    "fftconvolve",
    "(Tensor x, Tensor y) -> Tensor",
    fake=_fake,
    kernels={"cpu": _cpu, "cuda": _cuda},
    backward=_backward,
    setup_context=_setup,
)


def fftconvolve(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return call("fftconvolve", x, y)
