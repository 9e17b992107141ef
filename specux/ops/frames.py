"""frame / overlap_add ops: padding + framing and its exact adjoint (overlap-add + fold).

Each is the other's adjoint, so each one's backward is the other op.
"""

from __future__ import annotations

import torch

from specux.kernels.cpu import frames as cpu_frames
from specux.meta import shapes
from specux.ops._declare import call, declare, from_numpy, to_numpy


def _frame_fake(x, frame_length, hop_length, pad, pad_mode):
    return x.new_empty(shapes.frame_shape(x.shape, frame_length, hop_length, pad))


def _frame_cpu(x, frame_length, hop_length, pad, pad_mode):
    out = cpu_frames.frame(to_numpy(x), frame_length, hop_length, pad, pad_mode)
    return from_numpy(out)


def _frame_cuda(x, frame_length, hop_length, pad, pad_mode):
    from specux.kernels.cuda import transforms

    return transforms.frame(x, frame_length, hop_length, pad, pad_mode)


def _frame_setup(ctx, inputs, output):
    x, ctx.frame_length, ctx.hop_length, ctx.pad, ctx.pad_mode = inputs
    ctx.length = x.shape[-1]


def _frame_backward(ctx, grad):
    return (
        overlap_add(grad, ctx.length, ctx.hop_length, ctx.pad, ctx.pad_mode),
        None,
        None,
        None,
        None,
    )


declare(
    "frame",
    "(Tensor x, int frame_length, int hop_length, int pad, str pad_mode) -> Tensor",
    fake=_frame_fake,
    kernels={"cpu": _frame_cpu, "cuda": _frame_cuda},
    backward=_frame_backward,
    setup_context=_frame_setup,
)


def frame(x: torch.Tensor, frame_length: int, hop_length: int, pad: int, pad_mode: str):
    """``(..., L) -> (..., n_frames, frame_length)`` of the signal padded by ``pad`` per side."""
    return call("frame", x, frame_length, hop_length, pad, pad_mode)


def _overlap_add_fake(frames, length, hop_length, pad, pad_mode):
    return frames.new_empty(shapes.overlap_add_shape(frames.shape, length))


def _overlap_add_cpu(frames, length, hop_length, pad, pad_mode):
    out = cpu_frames.overlap_add_padded(to_numpy(frames), length, hop_length, pad, pad_mode)
    return from_numpy(out)


def _overlap_add_cuda(frames, length, hop_length, pad, pad_mode):
    from specux.kernels.cuda import transforms

    return transforms.overlap_add(frames, length, hop_length, pad, pad_mode)


def _overlap_add_setup(ctx, inputs, output):
    frames, _, ctx.hop_length, ctx.pad, ctx.pad_mode = inputs
    ctx.frame_length = frames.shape[-1]


def _overlap_add_backward(ctx, grad):
    return (
        frame(grad, ctx.frame_length, ctx.hop_length, ctx.pad, ctx.pad_mode),
        None,
        None,
        None,
        None,
    )


declare(
    "overlap_add",
    "(Tensor frames, SymInt length, int hop_length, int pad, str pad_mode) -> Tensor",
    fake=_overlap_add_fake,
    kernels={"cpu": _overlap_add_cpu, "cuda": _overlap_add_cuda},
    backward=_overlap_add_backward,
    setup_context=_overlap_add_setup,
)


def overlap_add(frames: torch.Tensor, length: int, hop_length: int, pad: int, pad_mode: str):
    """Adjoint of :func:`frame`: ``(..., n_frames, frame_length) -> (..., length)``."""
    return call("overlap_add", frames, length, hop_length, pad, pad_mode)
