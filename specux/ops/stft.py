"""stft / istft ops.

Backward (analytic adjoints, made of specux ops so they differentiate again):
- stft: the output mode's chain rule gives a complex cotangent G (..., n_freq, n_frames); each
  frame's cotangent is inverse-transformed (the r2c adjoint), Y (..., n_frames, n_fft); then
  grad_x = overlap_add(Y * w) folded through the padding, grad_w = sum_t frame(x) * Y.
  A one-sided magnitude / power / dB stft whose window needs no gradient goes through the
  power_adjoint op instead (the same chain, one op: on CUDA the spectrum is never stored).
- istft: y = crop(ola(f * w) / env), env = ola(w**2), f = c2r(S); with g_env = pad(g) / env,
  grad_S = c2r^H(frame(g_env) * w) and
  grad_w = sum_t frame(g_env) * f - 2 w sum_t frame(g_env * ola(f * w) / env).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from specux.compat.torch_compat import dtype_name, plain_eager
from specux.kernels.cpu import stft as cpu_stft
from specux.meta import shapes
from specux.meta.params import StftParams, WindowSpec, dual_norm
from specux.meta.windows import centered_offset
from specux.ops._declare import (
    COMPLEX_OF,
    REAL_OF,
    call,
    declare,
    from_numpy,
    numpy_dtype,
    to_numpy,
)
from specux.ops.fft import c2c, c2r, c2r_adjoint, r2c_adjoint
from specux.ops.frames import frame, overlap_add


def params_of(n_fft, hop_length, win_length, window_name, center, pad_mode, normalized, onesided):
    return StftParams(
        n_fft=n_fft,
        hop_length=hop_length,
        win_length=win_length,
        window=WindowSpec.from_key(window_name),
        center=center,
        pad_mode=pad_mode,
        normalized=normalized,
        onesided=onesided,
    )


def _device_window(window: WindowSpec, win_length: int, n_fft: int, dtype,
                   device) -> torch.Tensor:  # fmt: skip
    """The CUDA kernels' copy of a named n_fft-sample window (uploaded once per device, shared
    with the forward kernels: an upload from pageable memory waits for the device's queue,
    which stalled every backward). Never hand it to code that may write to it."""
    from specux.kernels.cuda import transforms
    from specux.kernels.cuda.fft import TorchCudaBackend

    return transforms.named_window(TorchCudaBackend(device), window, win_length, n_fft,
                                   dtype_name(dtype))  # fmt: skip


def _named_window_fake(like, window_name, win_length, n_fft, dtype):
    return like.new_empty(n_fft, dtype=dtype)


def _named_window_cpu(like, window_name, win_length, n_fft, dtype):
    named = cpu_stft.named_full_window(WindowSpec.from_key(window_name), win_length, n_fft,
                                       dtype_name(dtype))  # fmt: skip
    return torch.from_numpy(np.array(named))


def _named_window_cuda(like, window_name, win_length, n_fft, dtype):
    return _device_window(WindowSpec.from_key(window_name), win_length, n_fft, dtype,
                          like.device).clone()  # fmt: skip


# The named window as an op, for traced backward formulas: built on the host and copied, it
# would be a host constant of the compiled graph plus a copy to the device in it. The op
# hands every call a fresh tensor (on CUDA a device copy of the cached window), so a graph
# holds no constant and no tensor outlives its run (CUDA graph trees, torch.compile's
# mode="reduce-overhead", require that of every tensor allocated while a graph warms up). Not
# differentiable (``like`` gives only the device). Not in OPS (the gradcheck tables): test_ops
# opchecks it apart.
NAMED_WINDOW = "specux::named_window"
torch.library.define(NAMED_WINDOW, "(Tensor like, str window_name, int win_length, int n_fft, "
                     "ScalarType dtype) -> Tensor")  # fmt: skip
torch.library.register_fake(NAMED_WINDOW, _named_window_fake)
torch.library.impl(NAMED_WINDOW, "cpu", _named_window_cpu)
torch.library.impl(NAMED_WINDOW, "cuda", _named_window_cuda)


def full_window_tensor(p: StftParams, window, dtype, like: torch.Tensor) -> torch.Tensor:
    """The n_fft-sample window as a tensor on ``like``'s device (differentiable when
    ``window`` is a tensor; a named one in ``dtype``)."""
    if window is not None:
        left = centered_offset(p.win_length, p.n_fft)
        return torch.nn.functional.pad(window, (left, p.n_fft - p.win_length - left))
    if not plain_eager():  # traced: an op, not a host constant (above)
        return torch.ops.specux.named_window(like, p.window.as_key(), p.win_length, p.n_fft,
                                             dtype)  # fmt: skip
    device = like.device
    # the CUDA kernels' cache (not in inference mode: an inference tensor must not reach
    # autograd); a fresh copy on other devices (cpu, meta)
    if device.type != "cuda" or torch.is_inference_mode_enabled():
        named = cpu_stft.full_window(p, None, numpy_dtype(dtype))
        return torch.from_numpy(np.array(named)).to(device)
    return _device_window(p.window, p.win_length, p.n_fft, dtype, device)


def _window_grad(p: StftParams, full_grad: torch.Tensor) -> torch.Tensor:
    left = centered_offset(p.win_length, p.n_fft)
    return full_grad[left : left + p.win_length]


def _sum_to_frame(t: torch.Tensor) -> torch.Tensor:
    """Sum over every axis but the last: (..., n_frames, n_fft) -> (n_fft,)."""
    return t.reshape(-1, t.shape[-1]).sum(0)


# ---------------------------------------------------------------------------------------------
# stft

_STFT_SCHEMA = (
    "(Tensor x, Tensor? window, str window_name, int n_fft, int hop_length, int win_length, "
    "bool center, str pad_mode, bool normalized, bool onesided, str output, float eps) -> Tensor"
)


def _stft_fake(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode,
               normalized, onesided, output, eps):  # fmt: skip
    *batch, n_freq, count = shapes.stft_shape(
        x.shape, n_fft, hop_length, n_fft // 2 if center else 0, onesided
    )
    dtype = COMPLEX_OF[x.dtype] if output == "complex" else x.dtype
    # Frame-major in memory, like torch.stft: each frame's spectrum is one contiguous store.
    return x.new_empty((*batch, count, n_freq), dtype=dtype).transpose(-1, -2)


def _stft_cpu(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode,
              normalized, onesided, output, eps):  # fmt: skip
    p = params_of(n_fft, hop_length, win_length, window_name, center, pad_mode, normalized,
                  onesided)  # fmt: skip
    w = None if window is None else to_numpy(window)
    return from_numpy(cpu_stft.stft(to_numpy(x), w, p, output, eps))


def _stft_cuda(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode,
               normalized, onesided, output, eps):  # fmt: skip
    from specux.kernels.cuda import transforms

    p = params_of(n_fft, hop_length, win_length, window_name, center, pad_mode, normalized,
                  onesided)  # fmt: skip
    return transforms.stft(x, window, p, output, eps)


def _stft_setup(ctx, inputs, output):
    x, window, window_name, *rest = inputs
    ctx.args = (window_name, *rest)
    ctx.save_for_backward(x, window, kept_db(rest[-2], output))


def _slope(magnitude, coefficient: float, exponent: float):
    """``coefficient * magnitude ** exponent``, zero where the magnitude is zero (the limit the
    derivatives of |X| ** p take there for p > 1, and the choice made for p <= 1)."""
    nonzero = magnitude > 0
    safe = torch.where(nonzero, magnitude, torch.ones_like(magnitude))
    return torch.where(nonzero, coefficient * safe**exponent, torch.zeros_like(safe))


def spectrum_cotangent(spectrum, grad, power: float):
    """Cotangent of the complex spectrum X for a real cotangent ``grad`` of ``|X| ** power``."""
    if power == 2.0:
        return 2.0 * grad * spectrum
    if power == 1.0:
        return grad * spectrum.sgn()
    # d|X|^p/dX* = p |X|^(p-2) X
    return (grad * _slope(spectrum.abs(), power, power - 2.0)) * spectrum


def db_cotangent(values, grad, factor: float, eps: float):
    """Cotangent of ``values`` for ``factor * log10(max(values, eps))``, in float64 for
    float64 values (a Python float times a bool mask would be float32) and at least float32
    for half-precision ones (1 / values overflows float16)."""
    if values.dtype in (torch.float16, torch.bfloat16):
        values = values.float()
    scale = (factor / math.log(10.0)) / values.clamp_min(eps)
    return torch.where(values >= eps, grad * scale, torch.zeros_like(scale))


# Outputs kept for the dB backward: values = 10 ** (db / factor) is within a few float32 ulps
# of the values the dB came from (float16 / bfloat16 outputs are not: the backward
# recomputes the values instead).
_DB_KEPT = frozenset({torch.float32, torch.float64})
# dB outputs within this many ulps of the floor factor * log10(eps) count as the floor (the
# kernels' log10 may round it an ulp or two either way)
_DB_FLOOR_ULPS = 8


def kept_db(output_kind: str, output: torch.Tensor):
    """What a dB op keeps for its backward: its output (float32 / float64), else None."""
    return output if output_kind == "db" and output.dtype in _DB_KEPT else None


def db_output_cotangent(db, grad, factor: float, eps: float):
    """:func:`db_cotangent` from the dB output itself: the backward does not recompute the
    values (a second forward transform). ``values = 10 ** (db / factor)`` where ``db`` is above
    its floor, relative error ~|db / factor| * 2.3 ulps (1.4e-6 at -100 dB in float32); at the
    floor (values <= eps) and within :data:`_DB_FLOOR_ULPS` ulps of it (values within ~1e-5
    relative of eps in float32) the cotangent is zero."""
    floor = factor * math.log10(eps) if eps > 0 else -math.inf
    margin = _DB_FLOOR_ULPS * torch.finfo(db.dtype).eps * max(abs(floor), 1.0)
    ln10 = math.log(10.0)
    scale = (factor / ln10) * torch.exp(db * (-ln10 / factor))  # factor / (ln 10 values)
    return torch.where(db > floor + margin, grad * scale, torch.zeros_like(grad))


def output_cotangent(spectrum, grad, output: str, eps: float):
    """Chain rule from magnitude / power / dB back to the complex spectrum."""
    if output == "magnitude":
        return spectrum_cotangent(spectrum, grad, 1.0)
    if output == "db":
        power = spectrum.real**2 + spectrum.imag**2
        grad = db_cotangent(power, grad, 10.0, eps)
    return spectrum_cotangent(spectrum, grad, 2.0)


def complex_adjoint(grad, x, window, p: StftParams, needs_x: bool, needs_window: bool):
    """(grad_x, grad_window) of the complex stft for a complex cotangent (..., n_freq, n_frames)."""
    columns = grad.transpose(-1, -2)  # (..., n_frames, n_freq)
    if p.onesided:
        y = r2c_adjoint(columns, [-1], p.n_fft, p.fft_norm)
    else:
        y = c2c(columns, [-1], False, dual_norm(p.fft_norm)).real
    grad_x = grad_w = None
    if needs_x:
        w = full_window_tensor(p, window, y.dtype, y)  # y: the compute precision
        grad_x = overlap_add(y * w, x.shape[-1], p.hop_length, p.pad, p.pad_mode)
    if window is not None and needs_window:
        frames = frame(x, p.n_fft, p.hop_length, p.pad, p.pad_mode)
        grad_w = _window_grad(p, _sum_to_frame(frames * y))
    return grad_x, grad_w


def _stft_backward(ctx, grad):
    x, window, db = ctx.saved_tensors
    window_name, n_fft, hop, win_length, center, pad_mode, normalized, onesided, output, eps = (
        ctx.args
    )
    p = params_of(n_fft, hop, win_length, window_name, center, pad_mode, normalized, onesided)
    if output != "complex" and onesided and not ctx.needs_input_grad[1]:
        power = 1.0 if output == "magnitude" else 2.0
        if output == "db" and db is not None:
            grad = db_output_cotangent(db, grad, 10.0, eps)
        elif output == "db":
            values = stft(x, window, window_name, n_fft, hop, win_length, center, pad_mode,
                          normalized, True, "power", eps)  # fmt: skip
            grad = db_cotangent(values, grad, 10.0, eps)
        grad_x = power_adjoint(x, window, window_name, n_fft, hop, win_length, center,
                               pad_mode, normalized, power, grad)  # fmt: skip
        return (grad_x,) + (None,) * 11
    if output != "complex":
        spectrum = stft(x, window, window_name, n_fft, hop, win_length, center, pad_mode,
                        normalized, onesided, "complex", eps)  # fmt: skip
        grad = output_cotangent(spectrum, grad, output, eps)
    grad_x, grad_w = complex_adjoint(
        grad, x, window, p, ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    )
    return (grad_x, grad_w) + (None,) * 10


declare(
    "stft",
    _STFT_SCHEMA,
    fake=_stft_fake,
    kernels={"cpu": _stft_cpu, "cuda": _stft_cuda},
    backward=_stft_backward,
    setup_context=_stft_setup,
)


def stft(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode, normalized,
         onesided, output, eps):  # fmt: skip
    return call("stft", x, window, window_name, n_fft, hop_length, win_length, center,
                                 pad_mode, normalized, onesided, output, eps)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# power_adjoint: the input gradient of |stft(x)| ** power (one-sided) for a real cotangent,
# the backward of the magnitude / power / dB stft and of the filterbank spectrograms. One op,
# so a device runs it as one chain (on CUDA the spectrum is never stored: the stft kernel
# stores the cotangent). With Y = stft(x), psi(Y) = e |Y| ** (e - 2) Y and u the cotangent
# of the result: grad_grad = Re(conj(psi(Y)) stft(u)), grad_x = A^H(grad * psi'(Y)[stft(u)])
# with psi'(Y)[V] = e |Y| ** (e - 2) V + e (e - 2) |Y| ** (e - 4) Re(conj(Y) V) Y (zero where
# Y is), A^H the complex stft's adjoint.

_POWER_ADJOINT_SCHEMA = (
    "(Tensor x, Tensor? window, str window_name, int n_fft, int hop_length, int win_length, "
    "bool center, str pad_mode, bool normalized, float power, Tensor grad) -> Tensor"
)


def _power_adjoint_fake(x, window, window_name, n_fft, hop_length, win_length, center,
                        pad_mode, normalized, power, grad):  # fmt: skip
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _power_adjoint_cpu(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode,
                       normalized, power, grad):  # fmt: skip
    p = params_of(n_fft, hop_length, win_length, window_name, center, pad_mode, normalized, True)
    w = None if window is None else to_numpy(window)
    return from_numpy(cpu_stft.power_adjoint(to_numpy(x), w, p, power, to_numpy(grad)))


def _power_adjoint_cuda(x, window, window_name, n_fft, hop_length, win_length, center,
                        pad_mode, normalized, power, grad):  # fmt: skip
    from specux.kernels.cuda import transforms

    p = params_of(n_fft, hop_length, win_length, window_name, center, pad_mode, normalized, True)
    if transforms.power_adjoint_fused(x, p):
        return transforms.power_adjoint(x, window, p, power, grad)
    # Beyond a block: the spectrum in memory (compute precision), its cotangent, the adjoint.
    xc = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    spectrum = stft(xc, window, window_name, n_fft, hop_length, win_length, center, pad_mode,
                    normalized, True, "complex", 0.0)  # fmt: skip
    cotangent = spectrum_cotangent(spectrum, grad.to(xc.dtype), power)
    grad_x, _ = complex_adjoint(cotangent, xc, window, p, True, False)
    return grad_x.to(x.dtype)


def _power_adjoint_setup(ctx, inputs, output):
    x, window, *rest = inputs
    ctx.args = tuple(rest[:-1])
    ctx.save_for_backward(x, window, rest[-1])


def _power_adjoint_backward(ctx, u):
    x, window, grad = ctx.saved_tensors
    if ctx.needs_input_grad[1]:
        raise RuntimeError(
            "specux::power_adjoint has no gradient with respect to the window "
            "(the stft backward differentiates a window tensor another way)"
        )
    grad_x, grad_grad = power_adjoint_vjp(x, window, ctx.args, grad, u, ctx.needs_input_grad[0],
                                          ctx.needs_input_grad[10])  # fmt: skip
    return (grad_x,) + (None,) * 9 + (grad_grad,)


def power_adjoint_vjp(x, window, args: tuple, grad, u, needs_x: bool, needs_grad: bool):
    """(grad_x, grad_grad): power_adjoint's vector-Jacobian product for the cotangent ``u``
    of its result, with respect to ``x`` and to its ``grad`` argument (None where not
    needed); ``args`` its (window_name, n_fft, hop_length, win_length, center, pad_mode,
    normalized, power)."""
    window_name, n_fft, hop, win_length, center, pad_mode, normalized, power = args
    p = params_of(n_fft, hop, win_length, window_name, center, pad_mode, normalized, True)
    args = (window, window_name, n_fft, hop, win_length, center, pad_mode, normalized, True,
            "complex", 0.0)  # fmt: skip
    y = stft(x, *args)
    v = stft(u, *args)
    magnitude = y.abs()
    if power == 2.0:  # psi(Y) = 2 Y, also where Y is zero
        scale = torch.full_like(magnitude, 2.0)
    else:
        scale = _slope(magnitude, power, power - 2.0)
    along = (y.conj() * v).real  # Re(conj(Y) V)
    grad_grad = scale * along if needs_grad else None
    grad_x = None
    if needs_x:
        cotangent = grad * scale * v
        if power != 2.0:
            curve = _slope(magnitude, power * (power - 2.0), power - 4.0)
            cotangent = cotangent + (grad * curve * along) * y
        grad_x, _ = complex_adjoint(cotangent, x, None if window is None else window.detach(),
                                    p, True, False)  # fmt: skip
    return grad_x, grad_grad


declare(
    "power_adjoint",
    _POWER_ADJOINT_SCHEMA,
    fake=_power_adjoint_fake,
    kernels={"cpu": _power_adjoint_cpu, "cuda": _power_adjoint_cuda},
    backward=_power_adjoint_backward,
    setup_context=_power_adjoint_setup,
)


def power_adjoint(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode,
                  normalized, power, grad):  # fmt: skip
    return call("power_adjoint", x, window, window_name, n_fft, hop_length, win_length, center,
                pad_mode, normalized, power, grad)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# istft

_ISTFT_SCHEMA = (
    "(Tensor spec, Tensor? window, str window_name, int n_fft, int hop_length, int win_length, "
    "bool center, bool normalized, bool onesided, SymInt length, str nola) -> Tensor"
)


def _istft_fake(spec, window, window_name, n_fft, hop_length, win_length, center, normalized,
                onesided, length, nola):  # fmt: skip
    shape = shapes.istft_shape(
        spec.shape, n_fft, hop_length, n_fft // 2 if center else 0, None if length < 0 else length
    )
    return spec.new_empty(shape, dtype=REAL_OF[spec.dtype])


def _istft_cpu(spec, window, window_name, n_fft, hop_length, win_length, center, normalized,
               onesided, length, nola):  # fmt: skip
    p = params_of(n_fft, hop_length, win_length, window_name, center, "constant", normalized,
                  onesided)  # fmt: skip
    w = None if window is None else to_numpy(window)
    out = cpu_stft.istft(to_numpy(spec), w, p, None if length < 0 else length, nola)
    return from_numpy(out)


def _istft_cuda(spec, window, window_name, n_fft, hop_length, win_length, center, normalized,
                onesided, length, nola):  # fmt: skip
    from specux.kernels.cuda import transforms

    p = params_of(n_fft, hop_length, win_length, window_name, center, "constant", normalized,
                  onesided)  # fmt: skip
    return transforms.istft(spec, window, p, length, nola)


def _istft_setup(ctx, inputs, output):
    spec, window, *rest = inputs
    ctx.args = tuple(rest)
    ctx.save_for_backward(spec, window)


def _istft_backward(ctx, grad):
    spec, window = ctx.saved_tensors
    window_name, n_fft, hop, win_length, center, normalized, onesided, length, nola = ctx.args
    p = params_of(n_fft, hop, win_length, window_name, center, "constant", normalized, onesided)
    count = spec.shape[-1]
    span = shapes.ola_length(count, n_fft, hop)
    start, stop, _ = cpu_stft.istft_bounds(p, count, None if length < 0 else length)
    rdtype = REAL_OF[spec.dtype]
    w = full_window_tensor(p, window, rdtype, spec)
    # The envelope is recomputed from w with specux ops so the window gradient sees it.
    env = overlap_add((w * w).expand(count, n_fft), span, hop, 0, "constant")
    # the forward's divisor (cpu.stft.envelope_divisor): with nola="raise" it raised where
    # the envelope is at most NOLA_THRESHOLD inside the output; with "keep" it divided by 1
    # where the envelope is at most the dtype's smallest normal number
    floor = cpu_stft.NOLA_THRESHOLD if nola == "raise" else torch.finfo(rdtype).tiny
    safe_env = torch.where(env > floor, env, torch.ones_like(env))
    grad_span = torch.nn.functional.pad(grad[..., : stop - start], (start, span - stop))
    grad_env = grad_span / safe_env
    grad_frames = frame(grad_env, n_fft, hop, 0, "constant")  # (..., n_frames, n_fft)
    windowed = grad_frames * w
    if onesided:
        grad_spec = c2r_adjoint(windowed, [-1], p.fft_norm)
    else:
        grad_spec = c2c(windowed.to(spec.dtype), [-1], True, dual_norm(p.fft_norm))
    grad_spec = grad_spec.transpose(-1, -2)
    grad_w = None
    if window is not None and ctx.needs_input_grad[1]:
        columns = spec.transpose(-1, -2)
        if onesided:
            raw = c2r(columns, [-1], n_fft, p.fft_norm)
        else:
            raw = c2c(columns, [-1], False, p.fft_norm).real
        summed = overlap_add(raw * w, span, hop, 0, "constant")
        correction = frame(grad_env * summed / safe_env, n_fft, hop, 0, "constant")
        full = _sum_to_frame(grad_frames * raw) - 2.0 * w * _sum_to_frame(correction)
        grad_w = _window_grad(p, full)
    return (grad_spec, grad_w) + (None,) * 9


declare(
    "istft",
    _ISTFT_SCHEMA,
    fake=_istft_fake,
    kernels={"cpu": _istft_cpu, "cuda": _istft_cuda},
    backward=_istft_backward,
    setup_context=_istft_setup,
)


def istft(spec, window, window_name, n_fft, hop_length, win_length, center, normalized,
          onesided, length, nola):  # fmt: skip
    return call("istft", spec, window, window_name, n_fft, hop_length, win_length,
                                  center, normalized, onesided, length, nola)  # fmt: skip
