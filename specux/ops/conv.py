"""fftconvolve op (full mode along the last axis; leading axes broadcast).

Backward: z = x * y (bilinear), so grad_x[n] = sum_k g[n + k] conj(y[k]): the full
convolution of g with conj(flip(y)), read from offset Ly - 1 for Lx samples, summed over the
axes x was broadcast along (and its real part when x is real). Likewise for y. The gradient
of a short real operand against a long real one is a correlation at a few lags of two long
rows; it runs by overlap-save frames (:func:`_framed_correlation`) instead of whole-length
transforms.
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


# The framed correlation's frame: the power of two >= _FRAME_LAGS x the lags, at least
# _MIN_FRAME samples; it runs when the long row spans at least _MIN_FRAMES frames and the
# frame is at most _MAX_FRAME samples; otherwise the gradient runs whole-length.
_FRAME_LAGS = 4
_MIN_FRAME = 256
_MIN_FRAMES = 2
_MAX_FRAME = 16384


def correlation_frame(lags: int, length: int) -> int | None:
    """The frame of :func:`_framed_correlation` for ``lags`` lags against a ``length``-sample
    row, or None where whole-length transforms serve (a row of few frames, many lags)."""
    # The frame is at least both bounds: where they already rule it out, decide by
    # comparisons alone (under torch.compile a symbolic length is then guarded by a range,
    # not fixed to its value as bit_length would: one graph for every signal length).
    if (_FRAME_LAGS * lags > _MAX_FRAME
            or length < _MIN_FRAMES * max(_MIN_FRAME, _FRAME_LAGS * lags)):  # fmt: skip
        return None
    frame = max(_MIN_FRAME, 1 << (_FRAME_LAGS * lags - 1).bit_length())
    if frame > _MAX_FRAME or length < _MIN_FRAMES * frame:
        return None
    return frame


def _framed_correlation(grad, other, target_shape, frame: int):
    """``r[j] = sum_n other[n] grad[n + j]`` for the ``j < lags = target_shape[-1]`` (real
    rows; ``grad`` has ``other``'s length + lags - 1 samples), summed to ``target_shape``, by
    overlap-save: ``other`` in segments of ``S = frame - lags + 1`` samples, each zero-padded
    to ``frame`` (an array window of S ones), against ``grad``'s ``frame`` samples from the
    same start, so each frame's circular correlation holds its segment's lags 0 .. lags - 1
    without wrapping. The frames' spectrum products are summed (over the frames and down to
    the target's leading axes) before one inverse transform. Built from the stft and c2r
    ops, it has their gradients (double backward)."""
    from specux.ops.fft import c2r
    from specux.ops.stft import stft

    lags = target_shape[-1]
    segment = frame - lags + 1
    count = -(-other.shape[-1] // segment)
    padded = (count - 1) * segment + frame  # the frames' span, >= both rows' lengths
    other = torch.nn.functional.pad(other, (0, padded - other.shape[-1]))
    grad = torch.nn.functional.pad(grad, (0, padded - grad.shape[-1]))
    window = torch.zeros(frame, dtype=grad.dtype, device=grad.device)
    window[:segment] = 1
    common = (frame, segment, frame, False, "constant", False, True, "complex", 0.0)
    segments = stft(other, window, "array", *common)  # (..., frame // 2 + 1, count)
    frames = stft(grad, None, "boxcar", *common)
    products = (segments.conj() * frames).sum(-1)
    products = products.sum_to_size((*target_shape[:-1], products.shape[-1]))
    return c2r(products, [-1], frame, "backward").narrow(-1, 0, lags)


def _one_grad(grad, other, target):
    length = target.shape[-1]
    if not (grad.is_complex() or other.is_complex() or target.is_complex()):
        frame = correlation_frame(length, other.shape[-1])
        if frame is not None:
            return _framed_correlation(grad, other.to(grad.dtype), target.shape, frame)
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
