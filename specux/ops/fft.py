"""FFT primitive ops: c2c, r2c, c2r. The FFT family of the public API is built on them.

Adjoints (torch's convention for complex gradients: grad = A^H g for a complex-linear A):
- c2c(forward, norm)^H   = c2c(inverse, dual(norm))
- r2c(norm)^H g          = c2r(g * [1, 1/2, ..., 1/2, (1)], dual(norm))   (Re of a zero-padded
  inverse transform: the half-weights undo c2r's Hermitian doubling)
- c2r(norm)^H g          = r2c(g, dual(norm)) * [1, 2, ..., 2, (1)]
where the last weight in brackets applies to the Nyquist bin of even sizes.
"""

from __future__ import annotations

import torch

from specux.compat.torch_compat import plain_eager
from specux.kernels.cpu import fft as cpu_fft
from specux.meta import shapes
from specux.meta.params import dual_norm
from specux.ops._declare import COMPLEX_OF, REAL_OF, call, declare, from_numpy, to_numpy

# ---------------------------------------------------------------------------------------------
# c2c


def _c2c_fake(x, dim, forward, norm):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _c2c_cpu(x, dim, forward, norm):
    return from_numpy(cpu_fft.c2c(to_numpy(x), dim, forward, norm))


def _c2c_cuda(x, dim, forward, norm):
    from specux.kernels.cuda import fft as cuda_fft

    return cuda_fft.c2c(x, _axes(x, dim), forward, norm)


def _axes(x, dim) -> list[int]:
    return [d % x.dim() for d in dim]


def _c2c_setup(ctx, inputs, output):
    _, ctx.dim, ctx.forward, ctx.norm = inputs


def _c2c_backward(ctx, grad):
    return c2c(grad, ctx.dim, not ctx.forward, dual_norm(ctx.norm)), None, None, None


declare(
    "c2c",
    "(Tensor x, int[] dim, bool forward, str norm) -> Tensor",
    fake=_c2c_fake,
    kernels={"cpu": _c2c_cpu, "cuda": _c2c_cuda},
    backward=_c2c_backward,
    setup_context=_c2c_setup,
)


def c2c(x: torch.Tensor, dim, forward: bool, norm: str) -> torch.Tensor:
    return call("c2c", x, list(dim), forward, norm)


# ---------------------------------------------------------------------------------------------
# r2c


def _r2c_fake(x, dim, norm):
    return x.new_empty(shapes.r2c_shape(x.shape, dim), dtype=COMPLEX_OF[x.dtype])


def _r2c_cpu(x, dim, norm):
    return from_numpy(cpu_fft.r2c(to_numpy(x), dim, norm))


def _r2c_cuda(x, dim, norm):
    from specux.kernels.cuda import fft as cuda_fft

    return cuda_fft.r2c(x, _axes(x, dim), norm)


def _r2c_setup(ctx, inputs, output):
    x, ctx.dim, ctx.norm = inputs
    ctx.last_size = x.shape[ctx.dim[-1]]


def _r2c_backward(ctx, grad):
    return r2c_adjoint(grad, ctx.dim, ctx.last_size, ctx.norm), None, None


declare(
    "r2c",
    "(Tensor x, int[] dim, str norm) -> Tensor",
    fake=_r2c_fake,
    kernels={"cpu": _r2c_cpu, "cuda": _r2c_cuda},
    backward=_r2c_backward,
    setup_context=_r2c_setup,
)


def r2c(x: torch.Tensor, dim, norm: str) -> torch.Tensor:
    return call("r2c", x, list(dim), norm)


# ---------------------------------------------------------------------------------------------
# c2r


def _c2r_fake(x, dim, last_size, norm):  # (the bins' count: _checks.c2r)
    return x.new_empty(shapes.c2r_shape(x.shape, dim, last_size), dtype=REAL_OF[x.dtype])


def _c2r_cpu(x, dim, last_size, norm):
    return from_numpy(cpu_fft.c2r(to_numpy(x), dim, last_size, norm))


def _c2r_cuda(x, dim, last_size, norm):
    from specux.kernels.cuda import fft as cuda_fft

    return cuda_fft.c2r(x, _axes(x, dim), last_size, norm)


def _c2r_setup(ctx, inputs, output):
    _, ctx.dim, ctx.last_size, ctx.norm = inputs


def _c2r_backward(ctx, grad):
    return c2r_adjoint(grad, ctx.dim, ctx.norm), None, None, None


declare(
    "c2r",
    "(Tensor x, int[] dim, SymInt last_size, str norm) -> Tensor",
    fake=_c2r_fake,
    kernels={"cpu": _c2r_cpu, "cuda": _c2r_cuda},
    backward=_c2r_backward,
    setup_context=_c2r_setup,
)


def c2r(x: torch.Tensor, dim, last_size: int, norm: str) -> torch.Tensor:
    return call("c2r", x, list(dim), last_size, norm)


# ---------------------------------------------------------------------------------------------
# adjoints shared with the stft / istft backward


# Eager calls reuse the weights per (size, dtype, device): built on the device they cost
# several small launches and host work on every backward.
_WEIGHTS: dict[tuple, torch.Tensor] = {}


def _hermitian_weights(grad: torch.Tensor, axis: int, last_size: int, middle: float):
    """Weights along ``axis`` of a half spectrum: 1 at DC and (even sizes) Nyquist, else middle."""
    bins = grad.shape[axis]
    dtype = REAL_OF.get(grad.dtype, grad.dtype)
    # Traced code builds them in the graph; inference mode would cache an inference tensor.
    eager = plain_eager() and not torch.is_inference_mode_enabled()
    key = (bins, last_size, middle, dtype, grad.device)
    weights = _WEIGHTS.get(key) if eager else None
    if weights is None:
        k = torch.arange(bins, device=grad.device)
        edge = (k == 0) | ((k == last_size // 2) & (last_size % 2 == 0))
        weights = torch.where(edge, 1.0, middle).to(dtype)
        if eager:
            weights = _WEIGHTS.setdefault(key, weights)
    return weights.reshape((bins,) + (1,) * (grad.dim() - 1 - axis % grad.dim()))


def r2c_adjoint(grad: torch.Tensor, dim, last_size: int, norm: str) -> torch.Tensor:
    """A^H of ``r2c(x, dim, norm)`` for a real x with ``last_size`` samples on ``dim[-1]``."""
    weighted = grad * _hermitian_weights(grad, dim[-1], last_size, 0.5)
    return c2r(weighted, dim, last_size, dual_norm(norm))


def c2r_adjoint(grad: torch.Tensor, dim, norm: str) -> torch.Tensor:
    """A^H of ``c2r(x, dim, last_size, norm)``; ``last_size`` is ``grad``'s size on dim[-1]."""
    last_size = grad.shape[dim[-1]]
    spectrum = r2c(grad, dim, dual_norm(norm))
    return spectrum * _hermitian_weights(spectrum, dim[-1], last_size, 2.0)
