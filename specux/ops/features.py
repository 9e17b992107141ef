"""Feature ops: ``bank_spectrogram`` (a filterbank applied to |stft|**power, optionally in dB)
and ``project`` (a constant matrix applied along the feature axis: DCT, chroma folds).

A bank or matrix is either given as a tensor (nn modules pass their buffers; gradients reach
it) or named by a :class:`~specux.meta.matrices.MatrixSpec` key and built inside the kernel.

Backward of bank_spectrogram: with M = |X|**power and S = bank @ M,
  grad_x = bank_adjoint(x, grad_S) = power_adjoint(x, bank^T grad_S) as one op (on CUDA one
  kernel for an even n_fft: neither the spectrum nor grad_M is stored); with a bank or window
  that needs a gradient, grad_M = bank^T grad_S, grad_X = spectrum_cotangent(X, grad_M,
  power), the complex stft adjoint, and grad_bank = sum over signals and frames of grad_S M^T.
"""

from __future__ import annotations

import numpy as np
import torch

from specux.compat.arrays import numpy_name
from specux.kernels.cpu import features as cpu_features
from specux.kernels.cpu import stft as cpu_stft
from specux.meta import matrices, shapes
from specux.meta.matrices import MatrixSpec
from specux.ops._checks import n_out
from specux.ops._declare import call, declare, from_numpy, numpy_dtype, to_numpy
from specux.ops.stft import (
    complex_adjoint,
    db_cotangent,
    db_output_cotangent,
    kept_db,
    params_of,
    power_adjoint,
    power_adjoint_vjp,
    spectrum_cotangent,
    stft,
)

# ---------------------------------------------------------------------------------------------
# bank_spectrogram

_BANK_SCHEMA = (
    "(Tensor x, Tensor? window, str window_name, int n_fft, int hop_length, int win_length, "
    "bool center, str pad_mode, float power, Tensor? bank, str bank_spec, str output, "
    "float eps) -> Tensor"
)


def _bank_fake(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode, power,
               bank, bank_spec, output, eps):  # fmt: skip
    *batch, _, count = shapes.stft_shape(
        x.shape, n_fft, hop_length, n_fft // 2 if center else 0, True
    )
    return x.new_empty((*batch, count, n_out(bank, bank_spec))).transpose(-1, -2)


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
    ctx.save_for_backward(x, window, bank, kept_db(rest[9], output))


def _full_precision(backward):
    """Run an op's backward with autocast off: its products stay in the gradient's precision
    (a backward called inside an autocast region would otherwise multiply in float16)."""

    def wrapper(ctx, grad):
        with torch.autocast(grad.device.type, enabled=False):
            return backward(ctx, grad)

    return wrapper


@_full_precision
def _bank_backward(ctx, grad):
    x, window, bank, db = ctx.saved_tensors
    (window_name, n_fft, hop, win_length, center, pad_mode, power, _, bank_spec, output,
     eps) = ctx.args  # fmt: skip
    p = params_of(n_fft, hop, win_length, window_name, center, pad_mode, False, True)
    if output == "db" and db is not None:
        grad = db_output_cotangent(db, grad, 20.0 / power, eps)
    elif output == "db":
        values = bank_spectrogram(x, window, window_name, n_fft, hop, win_length, center,
                                  pad_mode, power, bank, bank_spec, "power", eps)  # fmt: skip
        grad = db_cotangent(values, grad, 20.0 / power, eps)
    needs_bank = bank is not None and ctx.needs_input_grad[9]
    if not ctx.needs_input_grad[1] and not needs_bank:  # the spectrum is never stored
        grad_x = bank_adjoint(x, window, window_name, n_fft, hop, win_length, center, pad_mode,
                              power, bank, bank_spec, grad)  # fmt: skip
        return (grad_x,) + (None,) * 12
    grad_magnitude = _transpose_product(grad, bank, bank_spec)  # bank^T grad: (..., freq, T)
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
# bank_adjoint: the input gradient of bank @ |stft(x)| ** power for a cotangent G of it,
# power_adjoint(x, bank^T G) as one op, so that CUDA runs it in one kernel (the bank's
# transpose applied per bin inside the fused adjoint) for an even n_fft. Its own backward is
# power_adjoint's at bank^T G, with the gradient of G mapped back through the bank.

_BANK_ADJOINT_SCHEMA = (
    "(Tensor x, Tensor? window, str window_name, int n_fft, int hop_length, int win_length, "
    "bool center, str pad_mode, float power, Tensor? bank, str bank_spec, Tensor grad) "
    "-> Tensor"
)


def _bank_adjoint_fake(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode,
                       power, bank, bank_spec, grad):  # fmt: skip
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _bank_adjoint_cpu(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode,
                      power, bank, bank_spec, grad):  # fmt: skip
    p = params_of(n_fft, hop_length, win_length, window_name, center, pad_mode, False, True)
    dense = _dense(bank, bank_spec, x.dtype)
    factors = cpu_features.project(to_numpy(grad), dense.T)  # bank^T G: (..., n_freq, T)
    w = None if window is None else to_numpy(window)
    return from_numpy(cpu_stft.power_adjoint(to_numpy(x), w, p, power, factors))


def _bank_adjoint_cuda(x, window, window_name, n_fft, hop_length, win_length, center,
                       pad_mode, power, bank, bank_spec, grad):  # fmt: skip
    from specux.kernels.cuda import transforms

    p = params_of(n_fft, hop_length, win_length, window_name, center, pad_mode, False, True)
    if transforms.bank_adjoint_fused(x, p):
        return transforms.power_adjoint(x, window, p, power, grad, bank, bank_spec)
    factors = _transpose_product(grad, bank, bank_spec)  # odd / Bluestein / beyond a block
    return power_adjoint(x, window, window_name, n_fft, hop_length, win_length, center,
                         pad_mode, False, power, factors)  # fmt: skip


def _bank_adjoint_setup(ctx, inputs, output):
    x, window, *rest = inputs
    (window_name, n_fft, hop, win_length, center, pad_mode, power, bank, bank_spec,
     grad) = rest  # fmt: skip
    ctx.args = (window_name, n_fft, hop, win_length, center, pad_mode, False, power)
    ctx.bank_spec = bank_spec
    ctx.save_for_backward(x, window, bank, grad)


@_full_precision
def _bank_adjoint_backward(ctx, u):
    x, window, bank, grad = ctx.saved_tensors
    if ctx.needs_input_grad[1]:
        raise RuntimeError(
            "specux::bank_adjoint has no gradient with respect to the window "
            "(the filterbank backward differentiates a window tensor another way)"
        )
    needs_bank = bank is not None and ctx.needs_input_grad[9]
    needs_grad = ctx.needs_input_grad[11]
    factors = _transpose_product(grad, bank, ctx.bank_spec)  # F = bank^T G
    grad_x, grad_factors = power_adjoint_vjp(x, window, ctx.args, factors, u,
                                             ctx.needs_input_grad[0], needs_grad or needs_bank)
    grad_grad = project(grad_factors, bank, ctx.bank_spec) if needs_grad else None
    grad_bank = torch.einsum("...bt,...ft->bf", grad, grad_factors) if needs_bank else None
    return (grad_x,) + (None,) * 8 + (grad_bank, None, grad_grad)


declare(
    "bank_adjoint",
    _BANK_ADJOINT_SCHEMA,
    fake=_bank_adjoint_fake,
    kernels={"cpu": _bank_adjoint_cpu, "cuda": _bank_adjoint_cuda},
    backward=_bank_adjoint_backward,
    setup_context=_bank_adjoint_setup,
)


def bank_adjoint(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode, power,
                 bank, bank_spec, grad):  # fmt: skip
    return call("bank_adjoint", x, window, window_name, n_fft, hop_length, win_length, center,
                pad_mode, power, bank, bank_spec, grad)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# project


def _project_fake(x, matrix, spec, top_db):
    # Frame-major in memory, like the spectrograms it maps: each frame's features contiguous.
    return x.new_empty((*x.shape[:-2], x.shape[-1], n_out(matrix, spec))).transpose(-1, -2)


def _dense(matrix, spec: str, dtype: torch.dtype) -> np.ndarray:
    """The CPU kernels' matrix: a tensor argument's values, else the named one in ``dtype``."""
    if matrix is not None:
        return to_numpy(matrix)
    return matrices.matrix(MatrixSpec.from_key(spec), numpy_dtype(dtype))


def _project_cpu(x, matrix, spec, top_db):
    values = to_numpy(x)
    if top_db is not None:
        values = cpu_features.clip_top_db(values, top_db)
    out = cpu_features.project(values, _dense(matrix, spec, x.dtype))
    return from_numpy(np.ascontiguousarray(out.swapaxes(-1, -2))).transpose(-1, -2)


def _project_cuda(x, matrix, spec, top_db):
    from specux.kernels.cuda import transforms

    if top_db is not None and not transforms.projects_clipped(x, matrix, spec):
        x, top_db = clip_top_db(x, top_db), None  # the gather route reads a clipped copy
    return transforms.project(x, matrix, spec, top_db)


def _project_setup(ctx, inputs, output):
    x, matrix, ctx.spec, ctx.top_db = inputs
    ctx.save_for_backward(x, matrix)


def _transpose_product(grad, matrix, spec: str):
    """``matrix^T @ grad`` along the feature axis, as a project op (differentiable; on CUDA a
    sparse gather kernel, deterministic and free of cuBLAS)."""
    if matrix is not None:
        return project(grad, matrix.transpose(0, 1), "")
    return project(grad, None, matrices.transposed_key(spec))


def clip_top_db(values, top_db: float):
    """Per signal (leading index): ``max(S, max(S) - top_db)`` over the last two axes (the
    torch engine's clip, and the project op's where its kernel does not clip)."""
    if values.numel() == 0:
        return values
    return torch.maximum(values, values.amax(dim=(-2, -1), keepdim=True) - top_db)


def _clip_cotangent(x, grad, top_db: float):
    """The cotangent of ``x`` through ``max(x, amax(x) - top_db)`` (per signal: the peak over
    the last two axes) for the clipped values' cotangent ``grad``: the rules torch's own
    maximum and amax backwards apply (a tie with the floor splits its cotangent in halves;
    the floor's part goes to the signal's peaks, shared equally when several values tie)."""
    peak = x.amax(dim=(-2, -1), keepdim=True)
    floor = peak - top_db
    tie = x == floor
    half = torch.where(tie, grad / 2, grad)
    to_x = half.masked_fill(x < floor, 0)
    to_floor = half.masked_fill(x > floor, 0).sum(dim=(-2, -1), keepdim=True)
    at_peak = x == peak
    return to_x + to_floor * at_peak / at_peak.sum(dim=(-2, -1), keepdim=True)


@_full_precision
def _project_backward(ctx, grad):
    x, matrix = ctx.saved_tensors
    top_db = ctx.top_db
    grad_x = grad_matrix = None
    if ctx.needs_input_grad[0]:
        grad_x = _transpose_product(grad, matrix, ctx.spec)
        if top_db is not None and x.numel():
            grad_x = _clip_cotangent(x, grad_x, top_db)
    if matrix is not None and ctx.needs_input_grad[1]:
        if top_db is not None:
            x = clip_top_db(x, top_db)
        grad_matrix = torch.einsum("...ot,...it->oi", grad, x)
    return grad_x, grad_matrix, None, None


declare(
    "project",
    "(Tensor x, Tensor? matrix, str spec, float? top_db) -> Tensor",
    fake=_project_fake,
    kernels={"cpu": _project_cpu, "cuda": _project_cuda},
    backward=_project_backward,
    setup_context=_project_setup,
)


def project(x, matrix, spec: str, top_db: float | None = None):
    """``matrix @ x`` along the feature axis (``matrix`` None: the one ``spec`` names); with
    ``top_db``, of ``max(x, peak - top_db)``, each signal's peak over the last two axes (the
    cepstra's clip, read by the DCT's kernel as it loads)."""
    return call("project", x, matrix, spec, top_db)
