"""Periodic analysis windows, built in float64 (scipy's ``get_window(..., fftbins=True)``)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from specux.meta.params import WindowSpec, as_size, window_spec


def _cosine_sum(n: int, coefficients: tuple[float, ...]) -> np.ndarray:
    # Periodic: the phase runs over n points of an (n+1)-point symmetric window, so the
    # last sample of the symmetric window is the one dropped (fftbins=True).
    phase = 2.0 * np.pi * np.arange(n, dtype=np.float64) / n
    out = np.zeros(n, dtype=np.float64)
    for k, a in enumerate(coefficients):
        out += (-1) ** k * a * np.cos(k * phase)
    return out


def _symmetric_then_truncate(n: int, build) -> np.ndarray:
    # Windows defined for a symmetric length m: the periodic n-point window is the
    # (n+1)-point symmetric one without its last sample.
    m = n + 1
    return build(np.arange(m, dtype=np.float64), m)[:n]


@functools.lru_cache(maxsize=256)
def _named_window(spec: WindowSpec, n: int) -> np.ndarray:
    if n == 1:
        # Every window of one sample is [1.0] (scipy's length guard).
        out = np.ones(1)
    elif spec.name == "hann":
        out = _cosine_sum(n, (0.5, 0.5))
    elif spec.name == "hamming":
        out = _cosine_sum(n, (0.54, 0.46))
    elif spec.name == "blackman":
        out = _cosine_sum(n, (0.42, 0.50, 0.08))
    elif spec.name == "boxcar":
        out = np.ones(n)
    elif spec.name == "bartlett":
        out = _symmetric_then_truncate(
            n,
            lambda k, m: np.where(k <= (m - 1) / 2.0, 2.0 * k / (m - 1), 2.0 - 2.0 * k / (m - 1)),
        )
    elif spec.name == "kaiser":
        beta = spec.parameter
        out = _symmetric_then_truncate(
            n,
            lambda k, m: np.i0(beta * np.sqrt(np.clip(1.0 - (2.0 * k / (m - 1) - 1.0) ** 2, 0, 1)))
            / np.i0(beta),
        )
    elif spec.name == "gaussian":
        std = spec.parameter
        out = _symmetric_then_truncate(
            n, lambda k, m: np.exp(-0.5 * ((k - (m - 1) / 2.0) / std) ** 2)
        )
    else:  # pragma: no cover - window_spec() only lets known names through
        raise ValueError(f"unknown window {spec.name!r}")
    out.flags.writeable = False
    return out


def named_window(spec: WindowSpec, n: int, dtype: Any = np.float64) -> np.ndarray:
    """The window ``spec`` (not an array spec) of ``n`` samples, cached, read-only."""
    window = _named_window(spec, n)
    return window if np.dtype(dtype) == np.float64 else _cast(spec, n, np.dtype(dtype).name)


@functools.lru_cache(maxsize=256)
def _cast(spec: WindowSpec, n: int, dtype: str) -> np.ndarray:
    out = _named_window(spec, n).astype(dtype)
    out.flags.writeable = False
    return out


def get_window(window: Any, n: int, dtype: Any = np.float64) -> np.ndarray:
    """A periodic window of ``n`` samples as a numpy array (float64 unless ``dtype``).

    ``window`` is a name (``"hann"``, ``"hamming"``, ``"blackman"``, ``"bartlett"``,
    ``"boxcar"``) or a ``(name, parameter)`` tuple (``("kaiser", beta)``,
    ``("gaussian", std)``); equal to ``scipy.signal.get_window(window, n, fftbins=True)``.
    """
    n = as_size("n", n, what="the window")
    spec = window_spec(window, arrays=False)
    if spec.is_array:
        raise ValueError(
            f"get_window: window must be a name or a (name, parameter) tuple, got {type(window)}"
        )
    return np.array(named_window(spec, n, dtype))


def centered_offset(win_length: int, n_fft: int) -> int:
    """Where a window shorter than ``n_fft`` starts once zero-padded on both sides."""
    return (n_fft - win_length) // 2
