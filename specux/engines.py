"""Per-library execution: the same primitive calls on numpy arrays (the CPU kernels directly)
or on torch tensors (the ``torch.ops.specux`` custom ops, so autograd and compile see them).

The public API is written once against this interface; library differences live here only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specux.compat.arrays import NATIVE, NUMPY, TORCH, dtype_name, numpy_name
from specux.compat.torch_compat import compiling, torch_module
from specux.errors import BackendUnavailableError
from specux.kernels.cpu import conv as cpu_conv
from specux.kernels.cpu import cqt as cpu_cqt
from specux.kernels.cpu import features as cpu_features
from specux.kernels.cpu import fft as cpu_fft
from specux.kernels.cpu import stft as cpu_stft
from specux.meta import matrices
from specux.meta.cqt_params import ConstantQSpec
from specux.meta.matrices import MatrixSpec
from specux.meta.params import StftParams

_torch = torch_module()
if _torch is not None:
    from specux import ops as _torch_ops


class NumpyEngine:
    library = NUMPY

    @staticmethod
    def cast(x: np.ndarray, dtype: str) -> np.ndarray:
        # native byte order too: kernels allocate results like their input
        return x if numpy_name(x.dtype) == dtype and x.dtype.isnative else x.astype(dtype)

    @staticmethod
    def resize(x: np.ndarray, axis: int, size: int) -> np.ndarray:
        """Trim or zero-pad ``axis`` to ``size`` (numpy.fft's ``n`` / ``s``)."""
        have = x.shape[axis]
        if have == size:
            return x
        if have > size:
            return x[(slice(None),) * axis + (slice(0, size),)]
        widths = [(0, 0)] * x.ndim
        widths[axis] = (0, size - have)
        return np.pad(x, widths)

    @staticmethod
    def conj(x: np.ndarray) -> np.ndarray:
        return np.conj(x)

    @staticmethod
    def c2c(x, dims, forward, norm):
        return cpu_fft.c2c(x, dims, forward, norm)

    @staticmethod
    def r2c(x, dims, norm):
        return cpu_fft.r2c(x, dims, norm)

    @staticmethod
    def c2r(x, dims, last_size, norm):
        return cpu_fft.c2r(x, dims, last_size, norm)

    @staticmethod
    def stft(x, window, p: StftParams, output: str, eps: float):
        return cpu_stft.stft(x, window, p, output, eps)

    @staticmethod
    def istft(spec, window, p: StftParams, length: int | None, nola: str = "raise"):
        return cpu_stft.istft(spec, window, p, length, nola)

    @staticmethod
    def bank_spectrogram(x, window, p: StftParams, power, bank: MatrixSpec, output, eps):
        plan = cpu_features.named_bank_plan(bank, numpy_name(x.dtype))
        return cpu_features.bank_spectrogram(x, window, p, power, plan, output, eps)

    @staticmethod
    def project(x, spec: MatrixSpec, top_db: float | None = None):
        if top_db is not None:
            x = cpu_features.clip_top_db(x, top_db)
        return cpu_features.project(x, matrices.matrix(spec, x.dtype))

    @staticmethod
    def fftconvolve(x, y):
        return cpu_conv.fftconvolve_full(x, y)

    @staticmethod
    def cqt(x, spec: ConstantQSpec, pad_mode: str, output: str, eps: float):
        return cpu_cqt.cqt(x, spec, pad_mode, output, eps)

    @staticmethod
    def db(values, factor: float, eps: float):
        return cpu_features.db(values, factor, eps)

    clip_top_db = staticmethod(cpu_features.clip_top_db)

    @staticmethod
    def normalize(values, norm: float, axis: int):
        """librosa's util.normalize: unit ``norm`` along ``axis``; tiny slices left as they are."""
        magnitude = np.abs(values)
        if norm == np.inf:
            length = magnitude.max(axis=axis, keepdims=True)
        elif norm == -np.inf:
            length = magnitude.min(axis=axis, keepdims=True)
        elif norm == 0:  # the count of nonzero values
            length = (magnitude > 0).sum(axis=axis, keepdims=True, dtype=values.dtype)
        elif norm == 1:
            length = magnitude.sum(axis=axis, keepdims=True)
        else:  # peak * ||magnitude / peak||_p: |x| ** p neither overflows nor underflows
            peak = magnitude.max(axis=axis, keepdims=True)
            scaled = magnitude / np.where(peak > 0, peak, values.dtype.type(1))
            length = peak * (scaled**norm).sum(axis=axis, keepdims=True) ** (1.0 / norm)
        tiny = np.finfo(values.dtype).tiny
        return values / np.where(length < tiny, values.dtype.type(1), length)

    @staticmethod
    def moveaxis(x, source: int, destination: int):
        return np.moveaxis(x, source, destination)

    @staticmethod
    def host(x) -> np.ndarray:
        """The values as a numpy array (for host-side, non-differentiable decisions)."""
        return np.asarray(x)

    @staticmethod
    def threshold(values, level: float):
        """Values below ``level`` set to 0 (librosa's chroma_cqt threshold)."""
        return np.where(values < level, values.dtype.type(0), values)

    @staticmethod
    def narrow(x, axis: int, start: int, length: int):
        index = [slice(None)] * x.ndim
        index[axis] = slice(start, start + length)
        return x[tuple(index)]


class TorchEngine:
    library = TORCH

    @staticmethod
    def cast(x, dtype: str):
        target = getattr(_torch, dtype)
        return x if x.dtype == target else x.to(target)

    @staticmethod
    def resize(x, axis: int, size: int):
        have = x.shape[axis]
        if compiling() or not (type(have) is int and type(size) is int):  # no branch on them
            # (a negative pad crops, as torch.fft resizes: its guards would pin the length)
            pad = [0, 0] * (x.dim() - 1 - axis % x.dim()) + [0, size - have]
            return _torch.constant_pad_nd(x, pad)
        if have == size:
            return x
        if have > size:
            return x.narrow(axis, 0, size)
        shape = list(x.shape)
        shape[axis] = size - have
        return _torch.cat([x, x.new_zeros(shape)], dim=axis)

    @staticmethod
    def conj(x):
        return x.conj()

    @staticmethod
    def c2c(x, dims, forward, norm):
        return _torch_ops.fft.c2c(x, dims, forward, norm)

    @staticmethod
    def r2c(x, dims, norm):
        return _torch_ops.fft.r2c(x, dims, norm)

    @staticmethod
    def c2r(x, dims, last_size, norm):
        return _torch_ops.fft.c2r(x, dims, last_size, norm)

    @staticmethod
    def stft(x, window, p: StftParams, output: str, eps: float):
        return _torch_ops.stft.stft(
            x, window, p.window.as_key(), p.n_fft, p.hop_length, p.win_length, p.center,
            p.pad_mode, p.normalized, p.onesided, output, eps,
        )  # fmt: skip

    @staticmethod
    def istft(spec, window, p: StftParams, length: int | None, nola: str = "raise"):
        return _torch_ops.stft.istft(
            spec, window, p.window.as_key(), p.n_fft, p.hop_length, p.win_length, p.center,
            p.normalized, p.onesided, -1 if length is None else length, nola,
        )  # fmt: skip

    @staticmethod
    def bank_spectrogram(x, window, p: StftParams, power, bank: MatrixSpec, output, eps):
        return _torch_ops.features.bank_spectrogram(
            x, window, p.window.as_key(), p.n_fft, p.hop_length, p.win_length, p.center,
            p.pad_mode, power, None, bank.as_key(), output, eps,
        )  # fmt: skip

    @staticmethod
    def project(x, spec: MatrixSpec, top_db: float | None = None):
        return _torch_ops.features.project(x, None, spec.as_key(), top_db)

    @staticmethod
    def fftconvolve(x, y):
        return _torch_ops.conv.fftconvolve(x, y)

    @staticmethod
    def cqt(x, spec: ConstantQSpec, pad_mode: str, output: str, eps: float):
        return _torch_ops.cqt.cqt(x, spec.as_key(), pad_mode, output, eps)

    @staticmethod
    def db(values, factor: float, eps: float):
        return factor * _torch.log10(values.clamp_min(eps))

    @staticmethod
    def clip_top_db(values, top_db: float):
        return _torch_ops.features.clip_top_db(values, top_db)

    @staticmethod
    def normalize(values, norm: float, axis: int):
        magnitude = values.abs()
        if norm == float("inf"):
            length = magnitude.amax(dim=axis, keepdim=True)
        elif norm == -float("inf"):
            length = magnitude.amin(dim=axis, keepdim=True)
        elif norm == 0:  # the count of nonzero values
            length = (magnitude > 0).sum(dim=axis, keepdim=True, dtype=values.dtype)
        elif norm == 1:
            length = magnitude.sum(dim=axis, keepdim=True)
        else:  # peak * ||magnitude / peak||_p, as NumpyEngine.normalize
            peak = magnitude.amax(dim=axis, keepdim=True)
            scaled = magnitude / _torch.where(peak > 0, peak, _torch.ones_like(peak))
            total = (scaled**norm).sum(dim=axis, keepdim=True)  # >= 1 unless the slice is 0
            # an all-zero slice's total is 0, whose 1/p-th power has an infinite derivative
            # (0 * inf: NaN gradients for silent frames); its length is 0 either way
            length = peak * _torch.where(total > 0, total, _torch.ones_like(total)) ** (1.0 / norm)
        tiny = _torch.finfo(values.dtype).tiny
        return values / _torch.where(length < tiny, _torch.ones_like(length), length)

    @staticmethod
    def moveaxis(x, source: int, destination: int):
        return x.movedim(source, destination)

    @staticmethod
    def threshold(values, level: float):
        return _torch.where(values < level, _torch.zeros_like(values), values)

    @staticmethod
    def host(x) -> np.ndarray:
        if x.device.type != "cpu":
            raise BackendUnavailableError(
                f"this step reads values back to the host and specux does not copy from "
                f"{x.device} silently"
            )
        return x.detach().numpy()

    # a slice, as for numpy arrays: Tensor.narrow's bounds check guards on its symbolic
    # start and length, which torch.export could not prove for fftconvolve's "same" crop
    # with a dynamic kernel length ((K - 1) // 2 <= K - 1)
    narrow = NumpyEngine.narrow


ENGINES = {NUMPY: NumpyEngine, TORCH: TorchEngine}


def engine_for(library: str):
    if library == NATIVE and NATIVE not in ENGINES:  # loaded on the first torch-free CUDA call
        from specux.kernels.native import NativeEngine

        ENGINES[NATIVE] = NativeEngine
    return ENGINES[library]


def dtype_of(x: Any, library: str) -> str:
    return dtype_name(x, library)
