"""Per-library execution: the same primitive calls on numpy arrays (the CPU kernels directly)
or on torch tensors (the ``torch.ops.specux`` custom ops, so autograd and compile see them).

The public API is written once against this interface; library differences live here only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specux.compat.arrays import NUMPY, TORCH, dtype_name
from specux.compat.torch_compat import torch_module
from specux.kernels.cpu import fft as cpu_fft
from specux.kernels.cpu import stft as cpu_stft
from specux.meta.params import StftParams

_torch = torch_module()
if _torch is not None:
    from specux import ops as _torch_ops


class NumpyEngine:
    library = NUMPY

    @staticmethod
    def cast(x: np.ndarray, dtype: str) -> np.ndarray:
        return x if x.dtype.name == dtype else x.astype(dtype)

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
    def istft(spec, window, p: StftParams, length: int | None):
        return cpu_stft.istft(spec, window, p, length)


class TorchEngine:
    library = TORCH

    @staticmethod
    def cast(x, dtype: str):
        target = getattr(_torch, dtype)
        return x if x.dtype == target else x.to(target)

    @staticmethod
    def resize(x, axis: int, size: int):
        have = x.shape[axis]
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
    def istft(spec, window, p: StftParams, length: int | None):
        return _torch_ops.stft.istft(
            spec, window, p.window.as_key(), p.n_fft, p.hop_length, p.win_length, p.center,
            p.normalized, p.onesided, -1 if length is None else length,
        )  # fmt: skip


ENGINES = {NUMPY: NumpyEngine, TORCH: TorchEngine}


def engine_for(library: str):
    return ENGINES[library]


def dtype_of(x: Any, library: str) -> str:
    return dtype_name(x, library)
