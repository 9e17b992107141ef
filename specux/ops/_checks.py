"""Argument checks of the raw ops (``torch.ops.specux.*``, docs/api.md): the values, and the
shapes that must agree (a cotangent and the output it belongs to, frames and a length).

The public functions check their parameters before they call an op. A direct call of an op
is checked here, in its fake kernel and in the kernels the dispatcher runs, so a bad argument
raises an error naming it -- not a wrong result (a ``c2c`` dim past the tensor's dimensions
once wrapped around, an ``istft`` of too few bins ran) or an internal error (a division by a
zero hop, a KeyError for an unknown pad mode). The public functions' own eager calls skip
these (``_declare.call`` runs the unchecked kernels): their arguments are checked already.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specux.compat.torch_compat import check
from specux.meta import matrices, shapes
from specux.meta.cqt_params import ConstantQSpec
from specux.meta.cqt_shapes import cqt_n_frames
from specux.meta.matrices import MatrixSpec
from specux.meta.params import (
    NOLA_RULES,
    NORMS,
    OUTPUTS,
    PAD_MODES,
    PARAMETRIC_WINDOWS,
    WINDOW_NAMES,
    as_float,
    as_int,
    axes,
    check_window_parameter,
    stft_params,
)


def _choice(op: str, name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"specux::{op}: {name}={value!r} is not one of {allowed}")


def _dims(op: str, x, dim) -> None:
    if not len(dim):
        raise ValueError(f"specux::{op}: dim must name at least one axis")
    axes("dim", dim, x.dim())  # in range, none repeated


def n_out(matrix, spec: str) -> int:
    """Rows of a project / filterbank matrix: the tensor's, or those its spec names."""
    return matrix.shape[0] if matrix is not None else matrices.shape(MatrixSpec.from_key(spec))[0]


def _stft_cotangent(op: str, x, n_fft, hop_length, center, grad, rows=None) -> tuple:
    """That ``grad`` has the shape of the (one-sided) stft of ``x`` -- with ``rows`` in
    place of its bins (a filterbank's bands); returns the stft's bins."""
    *batch, n_freq, count = shapes.stft_shape(
        x.shape, n_fft, hop_length, n_fft // 2 if center else 0, True
    )
    expected = (*batch, n_freq if rows is None else rows, count)
    what = "the stft's" if rows is None else "the filterbank spectrogram's"
    check(tuple(grad.shape) == expected,
          lambda: f"specux::{op}: grad of shape {tuple(grad.shape)}, {what} is {expected}")
    return n_freq


def _spec(op: str, name: str, key: str, parse: Callable) -> Any:
    try:
        return parse(key)
    except Exception as error:  # noqa: BLE001 - any malformed key: say which argument
        raise ValueError(f"specux::{op}: {name}={key!r} is not a valid key "
                         f"({type(error).__name__}: {error})") from None  # fmt: skip


def _stft(op: str, window, window_name: str, n_fft, hop_length, win_length, center,
          pad_mode: str | None = None) -> None:  # fmt: skip
    """The framing arguments the stft-based ops share; ``window`` a tensor of
    ``win_length`` values, or None and ``window_name`` a window's key."""
    p = stft_params(n_fft=n_fft, hop_length=hop_length, win_length=win_length, window="hann",
                    center=center)  # fmt: skip
    if pad_mode is not None:
        _choice(op, "pad_mode", pad_mode, PAD_MODES)
    if window is not None:
        if window.dim() != 1 or window.shape[0] != p.win_length:
            raise ValueError(f"specux::{op}: window has shape {tuple(window.shape)}, expected "
                             f"({p.win_length},) (win_length)")  # fmt: skip
        return
    name, _, parameter = window_name.partition(":")
    if name not in WINDOW_NAMES + PARAMETRIC_WINDOWS or (name in PARAMETRIC_WINDOWS) != bool(
            parameter):  # fmt: skip
        raise ValueError(f"specux::{op}: window_name={window_name!r} is not a window key "
                         f"(one of {WINDOW_NAMES}, or '<name>:<parameter>' for "
                         f"{PARAMETRIC_WINDOWS}) and no window tensor is given")  # fmt: skip
    if parameter:
        value = as_float("window parameter", _spec(op, "window_name", parameter, float))
        check_window_parameter(name, value, lambda: f"specux::{op}: window_name={window_name!r}")


def _eps(op: str, eps) -> None:
    """An eps (a floor of magnitudes before a log): >= 0 (the ops' own calls pass 0 where no
    log is taken)."""
    if not as_float("eps", eps) >= 0:
        raise ValueError(f"specux::{op}: eps={eps} is out of range: must be >= 0")


def _bank(op: str, bank, bank_spec: str, power) -> None:
    if not as_float("power", power) > 0:
        raise ValueError(f"specux::{op}: power={power} is out of range: must be > 0")
    if bank is None:  # (a bank tensor's width the op's own checks compare with n_fft)
        _spec(op, "bank_spec", bank_spec, MatrixSpec.from_key)


def c2c(x, dim, forward, norm) -> None:
    _dims("c2c", x, dim)
    _choice("c2c", "norm", norm, NORMS)


def r2c(x, dim, norm) -> None:
    _dims("r2c", x, dim)
    _choice("r2c", "norm", norm, NORMS)


def c2r(x, dim, last_size, norm) -> None:
    _dims("c2r", x, dim)
    _choice("c2r", "norm", norm, NORMS)
    as_int("last_size", last_size, minimum=1)
    check(x.shape[dim[-1]] == last_size // 2 + 1,
          lambda: f"specux::c2r: {x.shape[dim[-1]]} bins given for {last_size} output samples")


def frame(x, frame_length, hop_length, pad, pad_mode) -> None:
    as_int("frame_length", frame_length, minimum=1)
    as_int("hop_length", hop_length, minimum=1)
    as_int("pad", pad, minimum=0)
    _choice("frame", "pad_mode", pad_mode, PAD_MODES)


def overlap_add(frames, length, hop_length, pad, pad_mode) -> None:
    as_int("length", length, minimum=0)
    as_int("hop_length", hop_length, minimum=1)
    as_int("pad", pad, minimum=0)
    _choice("overlap_add", "pad_mode", pad_mode, PAD_MODES)
    expected = shapes.n_frames(length, frames.shape[-1], hop_length, pad)
    check(frames.shape[-2] == expected,
          lambda: f"specux::overlap_add: {frames.shape[-2]} frames given, {expected} cover "
          f"length={length} with pad={pad}")  # fmt: skip


def stft(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode,
         normalized, onesided, output, eps) -> None:  # fmt: skip
    _stft("stft", window, window_name, n_fft, hop_length, win_length, center, pad_mode)
    _choice("stft", "output", output, OUTPUTS)
    _eps("stft", eps)


def istft(spec, window, window_name, n_fft, hop_length, win_length, center, normalized,
          onesided, length, nola) -> None:  # fmt: skip
    _stft("istft", window, window_name, n_fft, hop_length, win_length, center)
    bins = n_fft // 2 + 1 if onesided else n_fft
    if spec.dim() < 2 or spec.shape[-2] != bins:
        raise ValueError(f"specux::istft: spec has shape {tuple(spec.shape)}; n_fft={n_fft} "
                         f"(onesided={onesided}) needs {bins} bins on axis -2")  # fmt: skip
    as_int("length", length, minimum=-1)
    _choice("istft", "nola", nola, NOLA_RULES)


def power_adjoint(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode,
                  normalized, power, grad) -> None:  # fmt: skip
    _stft("power_adjoint", window, window_name, n_fft, hop_length, win_length, center,
          pad_mode)  # fmt: skip
    as_float("power", power, positive=True)
    _stft_cotangent("power_adjoint", x, n_fft, hop_length, center, grad)


def bank_spectrogram(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode,
                     power, bank, bank_spec, output, eps) -> None:  # fmt: skip
    _stft("bank_spectrogram", window, window_name, n_fft, hop_length, win_length, center,
          pad_mode)  # fmt: skip
    _bank("bank_spectrogram", bank, bank_spec, power)
    if bank is not None:  # the kernels read n_fft // 2 + 1 values a band (fewer: read past it)
        n_freq = as_int("n_fft", n_fft) // 2 + 1
        check(bank.dim() == 2 and bank.shape[1] == n_freq,
              lambda: f"specux::bank_spectrogram: bank has shape {tuple(bank.shape)}, expected "
                      f"(n_bands, {n_freq}) for n_fft={n_fft}")  # fmt: skip
    _choice("bank_spectrogram", "output", output, ("power", "db"))
    _eps("bank_spectrogram", eps)


def bank_adjoint(x, window, window_name, n_fft, hop_length, win_length, center, pad_mode,
                 power, bank, bank_spec, grad) -> None:  # fmt: skip
    _stft("bank_adjoint", window, window_name, n_fft, hop_length, win_length, center,
          pad_mode)  # fmt: skip
    _bank("bank_adjoint", bank, bank_spec, power)
    n_freq = _stft_cotangent("bank_adjoint", x, n_fft, hop_length, center, grad,
                             n_out(bank, bank_spec))  # fmt: skip
    width = bank.shape[-1] if bank is not None else (
        matrices.shape(MatrixSpec.from_key(bank_spec))[1])  # fmt: skip
    check(width == n_freq,
          lambda: f"specux::bank_adjoint: the bank has {width} columns, the stft {n_freq} bins")


def project(x, matrix, spec, top_db) -> None:
    if matrix is None:
        _spec("project", "spec", spec, MatrixSpec.from_key)
    elif matrix.dim() != 2 or x.dim() < 2 or matrix.shape[1] != x.shape[-2]:
        raise ValueError(f"specux::project: matrix has shape {tuple(matrix.shape)}, expected "
                         f"(n_out, {x.shape[-2] if x.dim() >= 2 else '?'}) for x of shape "
                         f"{tuple(x.shape)}")  # fmt: skip
    if top_db is not None and not as_float("top_db", top_db) >= 0:
        raise ValueError(f"specux::project: top_db={top_db} is out of range: must be >= 0")


def cqt(x, spec, pad_mode, output, eps, op: str = "cqt") -> None:
    _spec(op, "spec", spec, ConstantQSpec.from_key)
    _choice(op, "pad_mode", pad_mode, PAD_MODES)
    _choice(op, "output", output, OUTPUTS)
    _eps(op, eps)


def cqt_adjoint(grad, spec, pad_mode, length, op: str = "cqt_adjoint") -> None:
    s = _spec(op, "spec", spec, ConstantQSpec.from_key)
    _choice(op, "pad_mode", pad_mode, PAD_MODES)
    as_int("length", length, minimum=1)
    expected = cqt_n_frames(length, s.hop_length)
    check(grad.shape[-2] == s.n_bins and grad.shape[-1] == expected,
          lambda: f"specux::{op}: got {tuple(grad.shape[-2:])} (bins, frames), expected "
          f"({s.n_bins}, {expected}) for length={length}")  # fmt: skip


def _cqt_kernel_tensor(op: str, kernel, spec, like, like_name: str) -> None:
    """``kernel`` is a real floating ``(spec.n_bins, 2 R, 2)`` (R >= 1) on ``like``'s device."""
    n_bins = spec.n_bins
    shape = tuple(kernel.shape)
    if len(shape) != 3 or shape[0] != n_bins or shape[2] != 2 or shape[1] < 2 or shape[1] % 2:
        raise ValueError(f"specux::{op}: kernel has shape {shape}, expected ({n_bins}, 2 R, 2): "
                         "each bin's taps over an even width, as (Re, Im) pairs")  # fmt: skip
    if kernel.is_complex() or not kernel.is_floating_point():
        raise TypeError(f"specux::{op}: kernel has dtype {kernel.dtype}, expected a real "
                        "floating dtype")  # fmt: skip
    if kernel.device != like.device:
        raise ValueError(f"specux::{op}: kernel is on {kernel.device} but {like_name} is on "
                         f"{like.device}: pass both on one device")  # fmt: skip


def cqt_kernel(x, kernel, spec, pad_mode, output, eps) -> None:
    cqt(x, spec, pad_mode, output, eps, op="cqt_kernel")
    if x.is_complex() or not x.is_floating_point():
        raise TypeError(f"specux::cqt_kernel: x has dtype {x.dtype}, expected a real floating "
                        "signal")  # fmt: skip
    if x.dim() < 1:
        raise ValueError("specux::cqt_kernel: x has 0 dimensions, expected (..., length)")
    _cqt_kernel_tensor("cqt_kernel", kernel, ConstantQSpec.from_key(spec), x, "x")


def cqt_kernel_adjoint(grad, kernel, spec, pad_mode, length) -> None:
    if not grad.is_complex():
        raise TypeError(f"specux::cqt_kernel_adjoint: grad has dtype {grad.dtype}, expected a "
                        "complex cotangent")  # fmt: skip
    if grad.dim() < 2:
        raise ValueError(f"specux::cqt_kernel_adjoint: grad has {grad.dim()} dimensions, "
                         "expected (..., n_bins, n_frames)")  # fmt: skip
    cqt_adjoint(grad, spec, pad_mode, length, op="cqt_kernel_adjoint")
    _cqt_kernel_tensor("cqt_kernel_adjoint", kernel, ConstantQSpec.from_key(spec), grad, "grad")
