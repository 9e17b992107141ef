"""Feature ops: ``bank_spectrogram`` (a filterbank applied to |stft|**power, optionally in dB)
and ``project`` (a constant matrix applied along the feature axis: DCT, chroma folds).

A bank or matrix is either given as a tensor (nn modules pass their buffers; gradients reach
it) or named by a :class:`~specux.meta.matrices.MatrixSpec` key and built inside the kernel.

Backward of bank_spectrogram: with M = |X|**power and S = bank @ M,
  grad_M = bank^T grad_S, then grad_x = power_adjoint(x, grad_M) (the spectrum is not stored);
  with a bank or window that needs a gradient, grad_X = spectrum_cotangent(X, grad_M, power),
  the complex stft adjoint, and grad_bank = sum over signals and frames of grad_S M^T.
"""

from __future__ import annotations

import numpy as np
import torch

from specux.compat.arrays import numpy_name
from specux.kernels.cpu import features as cpu_features
from specux.meta import matrices
from specux.meta.matrices import MatrixSpec
from specux.ops._declare import call, declare, from_numpy, numpy_dtype, to_numpy
from specux.ops.stft import (
    complex_adjoint,
    db_cotangent,
    params_of,
    power_adjoint,
    spectrum_cotangent,
    stft,
)


def _n_out(matrix, spec: str) -> int:
    return matrix.shape[0] if matrix is not None else matrices.shape(MatrixSpec.from_key(spec))[0]


# ---------------------------------------------------------------------------------------------
# bank_spectrogram

_BANK_SCHEMA = (
    "(Tensor x, Tensor? window, str window_name, int n_fft, int hop_length, int win_length, "
    "bool center, str pad_mode, float power, Tensor? bank, str bank_spec, str output, "
    "float eps) -> Tensor"
)


def _bank_fake(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode, power,
               bank, bank_spec, output, eps):  # fmt: skip
    from specux.meta import shapes

    *batch, _, count = shapes.stft_shape(
        x.shape, n_fft, hop_length, n_fft // 2 if center else 0, True
    )
    return x.new_empty((*batch, count, _n_out(bank, bank_spec))).transpose(-1, -2)


def _bank_cpu(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode, power,
              bank, bank_spec, output, eps):  # fmt: skip
    p = params_of(n_fft, hop_length, win_length, window_name, center, pad_mode, False, True)
    w = None if window is None else to_numpy(window)
    xn = to_numpy(x)
    plan = (
        to_numpy(bank) if bank is not None
        else cpu_features.named_bank_plan(MatrixSpec.from_key(bank_spec), numpy_name(xn.dtype))
    )  # fmt: skip
    out = cpu_features.bank_spectrogram(xn, w, p, power, plan, output, eps)
    return from_numpy(out)


def _bank_cuda(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode, power,
               bank, bank_spec, output, eps):  # fmt: skip
    from specux.kernels.cuda import transforms

    p = params_of(n_fft, hop_length, win_length, window_name, center, pad_mode, False, True)
    return transforms.bank_spectrogram(x, window, p, power, bank, bank_spec, output, eps)


def _bank_setup(ctx, inputs, output):
    x, window, *rest = inputs
    ctx.args = tuple(rest)
    bank = rest[7]
    ctx.save_for_backward(x, window, bank)


def _full_precision(backward):
    """Run an op's backward with autocast off: its products stay in the gradient's precision
    (a backward called inside an autocast region would otherwise multiply in float16)."""

    def wrapper(ctx, grad):
        with torch.autocast(grad.device.type, enabled=False):
            return backward(ctx, grad)

    return wrapper


@_full_precision
def _bank_backward(ctx, grad):
    x, window, bank = ctx.saved_tensors
    (window_name, n_fft, hop, win_length, center, pad_mode, power, _, bank_spec, output,
     eps) = ctx.args  # fmt: skip
    p = params_of(n_fft, hop, win_length, window_name, center, pad_mode, False, True)
    if output == "db":
        values = bank_spectrogram(x, window, window_name, n_fft, hop, win_length, center,
                                  pad_mode, power, bank, bank_spec, "power", eps)  # fmt: skip
        grad = db_cotangent(values, grad, 20.0 / power, eps)
    grad_magnitude = _transpose_product(grad, bank, bank_spec)  # bank^T grad: (..., freq, T)
    needs_bank = bank is not None and ctx.needs_input_grad[9]
    if not ctx.needs_input_grad[1] and not needs_bank:  # the spectrum is never stored
        grad_x = power_adjoint(x, window, window_name, n_fft, hop, win_length, center,
                               pad_mode, False, power, grad_magnitude)  # fmt: skip
        return (grad_x,) + (None,) * 12
    spectrum = stft(x, window, window_name, n_fft, hop, win_length, center, pad_mode, False,
                    True, "complex", eps)  # fmt: skip
    grad_spectrum = spectrum_cotangent(spectrum, grad_magnitude, power)
    grad_x, grad_w = complex_adjoint(
        grad_spectrum, x, window, p, ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    )
    grad_bank = None
    if needs_bank:
        magnitude = spectrum.abs() if power == 1.0 else spectrum.abs() ** power
        grad_bank = torch.einsum("...bt,...ft->bf", grad, magnitude)
    return (grad_x, grad_w) + (None,) * 7 + (grad_bank,) + (None,) * 3


declare(
    "bank_spectrogram",
    _BANK_SCHEMA,
    fake=_bank_fake,
    kernels={"cpu": _bank_cpu, "cuda": _bank_cuda},
    backward=_bank_backward,
    setup_context=_bank_setup,
)


def bank_spectrogram(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode,
                     power, bank, bank_spec, output, eps):  # fmt: skip
    return call("bank_spectrogram", x, window, window_name, n_fft, hop_length,
                                             win_length, center, pad_mode, power, bank,
                                             bank_spec, output, eps)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# project


def _project_fake(x, matrix, spec):
    # Frame-major in memory, like the spectrograms it maps: each frame's features contiguous.
    return x.new_empty((*x.shape[:-2], x.shape[-1], _n_out(matrix, spec))).transpose(-1, -2)


def _project_cpu(x, matrix, spec):
    dense = (
        to_numpy(matrix) if matrix is not None
        else matrices.matrix(MatrixSpec.from_key(spec), numpy_dtype(x.dtype))
    )  # fmt: skip
    out = cpu_features.project(to_numpy(x), dense)
    return from_numpy(np.ascontiguousarray(out.swapaxes(-1, -2))).transpose(-1, -2)


def _project_cuda(x, matrix, spec):
    from specux.kernels.cuda import transforms

    return transforms.project(x, matrix, spec)


def _project_setup(ctx, inputs, output):
    x, matrix, ctx.spec = inputs
    ctx.save_for_backward(x, matrix)


def _transpose_product(grad, matrix, spec: str):
    """``matrix^T @ grad`` along the feature axis, as a project op (differentiable; on CUDA a
    sparse gather kernel, deterministic and free of cuBLAS)."""
    if matrix is not None:
        return project(grad, matrix.transpose(0, 1), "")
    return project(grad, None, MatrixSpec.from_key(spec).transposed().as_key())


@_full_precision
def _project_backward(ctx, grad):
    x, matrix = ctx.saved_tensors
    grad_x = _transpose_product(grad, matrix, ctx.spec) if ctx.needs_input_grad[0] else None
    grad_matrix = None
    if matrix is not None and ctx.needs_input_grad[1]:
        grad_matrix = torch.einsum("...ot,...it->oi", grad, x)
    return grad_x, grad_matrix, None


declare(
    "project",
    "(Tensor x, Tensor? matrix, str spec) -> Tensor",
    fake=_project_fake,
    kernels={"cpu": _project_cpu, "cuda": _project_cuda},
    backward=_project_backward,
    setup_context=_project_setup,
)


def project(x, matrix, spec: str):
    return call("project", x, matrix, spec)
