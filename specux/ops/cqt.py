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

import math

import torch

from specux.compat.tensor_cache import PerVersion, capturing, fixed_values
from specux.kernels.cpu import cqt as cpu_cqt
from specux.kernels.cpu.stft import apply_output
from specux.meta.cqt_params import ConstantQSpec
from specux.meta.cqt_shapes import cqt_adjoint_shape, cqt_n_frames, cqt_shape
from specux.ops._declare import (
    COMPLEX_OF,
    REAL_OF,
    call,
    declare,
    from_numpy,
    full_width,
    to_numpy,
)
from specux.ops.frames import frame, overlap_add
from specux.ops.stft import output_cotangent

# eps is unused when the output is complex; any positive value does.
_COMPLEX_EPS = 1e-10


# ---------------------------------------------------------------------------------------------
# cqt


def _cqt_fake(x, spec, pad_mode, output, eps):
    s = ConstantQSpec.from_key(spec)
    *batch, n_bins, count = cqt_shape(x.shape, s.n_bins, s.hop_length)
    dtype = _result_dtype(x, output)
    # Frame-major in memory, like the kernel's result (each frame's bins are one store).
    return x.new_empty((*batch, count, n_bins), dtype=dtype).transpose(-1, -2)


def _cqt_cpu(x, spec, pad_mode, output, eps):
    out = cpu_cqt.cqt(to_numpy(x), ConstantQSpec.from_key(spec), pad_mode, output, eps)
    return from_numpy(out)


def _declared(out: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A CUDA result in the dtype the fake kernel declares: the constant-Q kernels compute a
    float16 / bfloat16 input in float32, and the result is stored back in half precision
    (complex32 for float16's complex output), as the other ops store theirs."""
    return out if out.dtype == dtype else out.to(dtype)


def _result_dtype(x: torch.Tensor, output: str) -> torch.dtype:
    """The dtype the ops declare for ``x``'s transform (the fake kernels' and the kernels')."""
    return COMPLEX_OF[x.dtype] if output == "complex" else x.dtype


def _cqt_cuda(x, spec, pad_mode, output, eps):
    from specux.kernels.cuda import transforms

    if x.shape[-1] == 0 and pad_mode != "constant":
        raise ValueError(f"cqt: pad_mode={pad_mode!r} needs at least one sample")
    out = transforms.cqt(x, ConstantQSpec.from_key(spec), pad_mode, output, eps)
    return _declared(out, _result_dtype(x, output))


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
    return _declared(transforms.cqt_adjoint(grad, s, pad_mode, length), REAL_OF[grad.dtype])


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


# ---------------------------------------------------------------------------------------------
# cqt_kernel / cqt_kernel_adjoint: the transform with its taps passed as a tensor
#
# ``kernel`` is (n_bins, 2 R, 2), real, on x's device: the complex taps as (Re, Im) pairs
# (``torch.view_as_complex(kernel)``), tap i of bin k applied to the padded sample
# ``t * hop_length - R + i`` (:func:`specux.kernels.cpu.cqt.correlation_kernel` lays out a
# spec's own taps so), rounded to x's dtype where they are wider. This is specux.nn.CQT's
# ``kernel`` buffer: one that still holds the spec's taps, in x's dtype or in float64, runs
# the spec's kernels (the ``cqt`` op's, the same values); a changed, loaded or learned one,
# or one narrower than x (a float32 buffer for a float64 signal: its float32 values), runs
# the dense correlation below (frames of 2 R samples times the taps). Both ops are
# differentiable in ``kernel`` as well as in the signal / cotangent.

# kernel tensor -> {spec key: whether it holds that spec's taps}, per tensor version
_SPEC_TAPS = PerVersion(4)


def holds_spec_taps(kernel: torch.Tensor, spec: str) -> bool:
    """Whether ``kernel`` holds ``spec``'s own taps, rounded to its dtype: read once per tensor
    and version (for a CUDA tensor, one wait for the device); a kernel that needs a gradient
    or is a view is not kept (it may change without a new version), nor is one first seen
    while a CUDA graph is captured: those run the dense correlation."""
    s = ConstantQSpec.from_key(spec)
    if tuple(kernel.shape) != cpu_cqt.correlation_kernel_shape(s) or not fixed_values(kernel):
        return False
    found = _SPEC_TAPS.get(kernel, spec)
    if found is None:
        if capturing(kernel):
            return False
        # the top bin's few taps first: a kernel that differs there (learned, rounded to
        # half precision) is told apart without building every bin's (141 MB for chroma's)
        first, taps = cpu_cqt.correlation_taps(s)
        start = int(first[-1]) + kernel.shape[1] // 2
        top = torch.view_as_real(torch.from_numpy(taps[-1].copy()))
        found = bool(torch.equal(kernel[-1, start : start + top.shape[0]],
                                 top.to(kernel.device, kernel.dtype)))  # fmt: skip
        if found:
            reference = torch.from_numpy(cpu_cqt.correlation_kernel(s))
            found = bool(torch.equal(kernel, reference.to(kernel.device, kernel.dtype)))
        _SPEC_TAPS.put(kernel, spec, found)
    return found


def _spec_path(kernel: torch.Tensor, dtype: torch.dtype, spec: str) -> bool:
    """Whether the spec's kernels give this kernel's transform of a ``dtype`` signal: it holds
    the spec's taps, in the dtype the signal computes in or wider (float64, rounded to it
    as the spec's are)."""
    compute = full_width(dtype)
    return kernel.dtype in (compute, torch.float64) and holds_spec_taps(kernel, spec)


def _taps_matrix(kernel: torch.Tensor) -> torch.Tensor:
    """``(2 R, 2 n_bins)``: column ``2 k + c`` is part ``c`` (Re, Im) of bin k's taps."""
    return kernel.permute(1, 0, 2).reshape(kernel.shape[1], 2 * kernel.shape[0])


# frame samples a dense call holds at once (64 MB in float32): signals are taken in groups
# (the default CQT's frames are 2 R = 23376 samples every hop: 40 MB a 5 s signal)
_FRAME_SAMPLES = 1 << 24


def _groups(count: int, n_frames: int, width: int) -> list[slice]:
    step = max(1, _FRAME_SAMPLES // max(1, n_frames * width))
    return [slice(i, i + step) for i in range(0, count, step)]


def _correlate(x: torch.Tensor, kernel: torch.Tensor, hop_length: int, pad_mode: str):
    """The dense transform: complex ``(..., n_frames, n_bins)``, frame-major (no autograd:
    a kernel's; a group of signals' frames at a time)."""
    *batch, length = x.shape
    n_bins, width, _ = kernel.shape
    n_frames = cqt_n_frames(length, hop_length)
    flat = x.reshape(math.prod(batch), length)
    taps = _taps_matrix(kernel)
    parts = [frame(flat[g], width, hop_length, width // 2, pad_mode) @ taps
             for g in _groups(flat.shape[0], n_frames, width)]  # fmt: skip
    pairs = torch.cat(parts) if parts else x.new_empty((0, n_frames, 2 * n_bins))
    return torch.view_as_complex(pairs.unflatten(-1, (n_bins, 2))).reshape(*batch, n_frames,
                                                                           n_bins)  # fmt: skip


def _pairs(grad: torch.Tensor) -> torch.Tensor:
    """A complex cotangent ``(..., n_bins, n_frames)`` as real ``(..., n_frames, 2 n_bins)``
    (a conjugate view resolved first: ``loss(y.conj())``'s cotangent is one)."""
    return torch.view_as_real(grad.resolve_conj().transpose(-1, -2)).flatten(-2)


def _correlate_adjoint(grad, kernel, hop_length: int, pad_mode: str, length: int):
    """The dense transform's adjoint ``Re(A^H G)``: ``(..., n_bins, n_frames) -> (..., length)``
    (no autograd: a kernel's; a group of signals' frames at a time)."""
    *batch, n_bins, n_frames = grad.shape
    width = kernel.shape[1]
    pairs = _pairs(grad).reshape(-1, n_frames, 2 * n_bins)
    taps = _taps_matrix(kernel).transpose(0, 1)
    parts = [overlap_add(pairs[g] @ taps, length, hop_length, width // 2, pad_mode)
             for g in _groups(pairs.shape[0], n_frames, width)]  # fmt: skip
    out = torch.cat(parts) if parts else grad.new_zeros((0, length), dtype=REAL_OF[grad.dtype])
    return out.reshape(*batch, length)


def _kernel_grad(signal, grad, kernel_shape, hop_length: int, pad_mode: str, dtype):
    """``d <G, A_K signal> / dK`` in the kernel's layout: every signal's frames against its
    cotangent, summed over batch and frames (a group of signals' frames at a time).
    ``signal`` is the forward's input (``cqt_kernel``) or the cotangent of the adjoint's
    output (``cqt_kernel_adjoint``); in the kernel's ``dtype``."""
    n_bins, width, _ = kernel_shape
    n_frames = grad.shape[-1]
    signals = signal.reshape(math.prod(signal.shape[:-1]), signal.shape[-1])
    pairs = _pairs(grad).reshape(-1, n_frames, 2 * n_bins)  # the same signals
    total = None
    for g in _groups(signals.shape[0], n_frames, width):  # a group's frames at a time
        frames = frame(signals[g], width, hop_length, width // 2, pad_mode)
        part = frames.reshape(-1, width).transpose(0, 1) @ pairs[g].reshape(-1, 2 * n_bins)
        total = part if total is None else total + part
    if total is None:  # no signals
        total = grad.new_zeros((width, 2 * n_bins), dtype=REAL_OF[grad.dtype])
    return total.reshape(width, n_bins, 2).permute(1, 0, 2).to(dtype)


def _cqt_kernel_fake(x, kernel, spec, pad_mode, output, eps):
    *batch, n_bins, count = cqt_shape(x.shape, kernel.shape[0],
                                      ConstantQSpec.from_key(spec).hop_length)  # fmt: skip
    dtype = _result_dtype(x, output)
    return x.new_empty((*batch, count, n_bins), dtype=dtype).transpose(-1, -2)


def _cqt_kernel_run(x, kernel, spec, pad_mode, output, eps, fast, value):
    if _spec_path(kernel, x.dtype, spec):
        return fast(x, spec, pad_mode, output, eps)
    if x.shape[-1] == 0 and pad_mode != "constant":
        raise ValueError(f"cqt: pad_mode={pad_mode!r} needs at least one sample")
    hop = ConstantQSpec.from_key(spec).hop_length
    xc = x.to(full_width(x.dtype))  # (half precision: CUDA only)
    spectrum = _correlate(xc, kernel.to(xc.dtype), hop, pad_mode)
    out = value(spectrum, output, eps).transpose(-1, -2)
    return _declared(out, _result_dtype(x, output))


def _value_cpu(spectrum, output, eps):
    return from_numpy(apply_output(to_numpy(spectrum), output, eps))


def _value_cuda(spectrum, output, eps):
    from specux.kernels.cuda import transforms

    return transforms.apply_value(spectrum, output, eps)


def _cqt_kernel_cpu(x, kernel, spec, pad_mode, output, eps):
    return _cqt_kernel_run(x, kernel, spec, pad_mode, output, eps, _cqt_cpu, _value_cpu)


def _cqt_kernel_cuda(x, kernel, spec, pad_mode, output, eps):
    return _cqt_kernel_run(x, kernel, spec, pad_mode, output, eps, _cqt_cuda, _value_cuda)


def _cqt_kernel_setup(ctx, inputs, output):
    x, kernel, ctx.spec, ctx.pad_mode, ctx.output, ctx.eps = inputs
    ctx.length = x.shape[-1]
    ctx.save_for_backward(x, kernel)


def _cqt_kernel_backward(ctx, grad):
    x, kernel = ctx.saved_tensors
    if ctx.output != "complex":
        spectrum = cqt_kernel(x, kernel, ctx.spec, ctx.pad_mode, "complex", ctx.eps)
        grad = output_cotangent(spectrum, grad, ctx.output, ctx.eps)
    grad_x = grad_kernel = None
    if ctx.needs_input_grad[0]:
        grad_x = cqt_kernel_adjoint(grad, kernel, ctx.spec, ctx.pad_mode, ctx.length)
    if ctx.needs_input_grad[1]:
        hop = ConstantQSpec.from_key(ctx.spec).hop_length
        grad_kernel = _kernel_grad(x, grad, kernel.shape, hop, ctx.pad_mode, kernel.dtype)
    return grad_x, grad_kernel, None, None, None, None


declare(
    "cqt_kernel",
    "(Tensor x, Tensor kernel, str spec, str pad_mode, str output, float eps) -> Tensor",
    fake=_cqt_kernel_fake,
    kernels={"cpu": _cqt_kernel_cpu, "cuda": _cqt_kernel_cuda},
    backward=_cqt_kernel_backward,
    setup_context=_cqt_kernel_setup,
)


def cqt_kernel(x, kernel, spec: str, pad_mode: str, output: str, eps: float) -> torch.Tensor:
    """:func:`cqt` with the taps given as ``kernel`` (``(n_bins, 2 R, 2)``)."""
    return call("cqt_kernel", x, kernel, spec, pad_mode, output, eps)


def _cqt_kernel_adjoint_fake(grad, kernel, spec, pad_mode, length):
    return grad.new_empty(cqt_adjoint_shape(grad.shape, length), dtype=REAL_OF[grad.dtype])


def _cqt_kernel_adjoint_run(grad, kernel, spec, pad_mode, length, fast):
    real = REAL_OF[grad.dtype]
    if _spec_path(kernel, real, spec):
        return fast(grad, spec, pad_mode, length)
    hop = ConstantQSpec.from_key(spec).hop_length
    gc = grad.to(full_width(grad.dtype))  # (half precision: CUDA only)
    out = _correlate_adjoint(gc, kernel.to(REAL_OF[gc.dtype]), hop, pad_mode, length)
    return _declared(out, real)


def _cqt_kernel_adjoint_cpu(grad, kernel, spec, pad_mode, length):
    return _cqt_kernel_adjoint_run(grad, kernel, spec, pad_mode, length, _cqt_adjoint_cpu)


def _cqt_kernel_adjoint_cuda(grad, kernel, spec, pad_mode, length):
    return _cqt_kernel_adjoint_run(grad, kernel, spec, pad_mode, length, _cqt_adjoint_cuda)


def _cqt_kernel_adjoint_setup(ctx, inputs, output):
    grad, kernel, ctx.spec, ctx.pad_mode, _ = inputs
    ctx.save_for_backward(grad, kernel)


def _cqt_kernel_adjoint_backward(ctx, cotangent):
    grad, kernel = ctx.saved_tensors
    grad_grad = grad_kernel = None
    if ctx.needs_input_grad[0]:
        grad_grad = cqt_kernel(cotangent, kernel, ctx.spec, ctx.pad_mode, "complex",
                               _COMPLEX_EPS)  # fmt: skip
    if ctx.needs_input_grad[1]:
        hop = ConstantQSpec.from_key(ctx.spec).hop_length
        grad_kernel = _kernel_grad(cotangent, grad, kernel.shape, hop, ctx.pad_mode,
                                   kernel.dtype)  # fmt: skip
    return grad_grad, grad_kernel, None, None, None


declare(
    "cqt_kernel_adjoint",
    "(Tensor grad, Tensor kernel, str spec, str pad_mode, SymInt length) -> Tensor",
    fake=_cqt_kernel_adjoint_fake,
    kernels={"cpu": _cqt_kernel_adjoint_cpu, "cuda": _cqt_kernel_adjoint_cuda},
    backward=_cqt_kernel_adjoint_backward,
    setup_context=_cqt_kernel_adjoint_setup,
)


def cqt_kernel_adjoint(grad, kernel, spec: str, pad_mode: str, length: int) -> torch.Tensor:
    """Adjoint of :func:`cqt_kernel` (complex output) in the signal: ``Re(A_K^H G)``."""
    return call("cqt_kernel_adjoint", grad, kernel, spec, pad_mode, length)
