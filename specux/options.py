"""Process-wide runtime options (determinism, autotune), read by every backend.

Environment switches (:func:`env_flag`: 1 / true / yes / on, 0 / false / no / off):
``SPECUX_DETERMINISTIC=1`` starts with deterministic mode on; ``SPECUX_TENSOR_CORES=0`` keeps
float32 products off the tensor cores (see :func:`tensor_cores_enabled`);
``SPECUX_CQT_SPECTRAL=0`` keeps cqt's long filters off the spectral path
(:func:`cqt_spectral_enabled`);
``SPECUX_DISK_CACHE=0`` keeps compiled kernels (and autotune winners) in memory only;
``SPECUX_AUTOTUNE=1`` starts with autotuning on (``specux.autotune``).
"""

from __future__ import annotations

import os
import sys

import numpy as np

_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")


def env_flag(name: str, default: bool) -> bool:
    """An on / off environment switch: 1 / true / yes / on, 0 / false / no / off (any case);
    unset or empty gives ``default``, anything else warns and gives ``default`` too (a value
    such as "false" once counted as on for SPECUX_DETERMINISTIC)."""
    value = os.environ.get(name, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    if value:
        import warnings

        warnings.warn(f"{name}={os.environ[name]!r} is not an on / off value (1, true, yes, on "
                      f"/ 0, false, no, off): using the default, {'on' if default else 'off'}",
                      stacklevel=2)  # fmt: skip
    return default


# Process-wide like torch's own flag: autograd may run a backward on another thread.
_deterministic = env_flag("SPECUX_DETERMINISTIC", False)
# specux.autotune(flag): tune each new CUDA configuration's block kernels once (plans.py)
_autotune = env_flag("SPECUX_AUTOTUNE", False)


def is_autotuning() -> bool:
    """True when every new CUDA configuration is autotuned (``specux.autotune(True)``,
    ``SPECUX_AUTOTUNE=1``)."""
    return _autotune


def set_autotune(flag: bool) -> None:
    global _autotune
    _autotune = bool(flag)


def _torch_deterministic() -> bool:
    # Only ask torch if the user already imported it: specux must not import torch itself here.
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.are_deterministic_algorithms_enabled())
    except AttributeError:  # pragma: no cover - very old torch
        return False


def is_deterministic() -> bool:
    """True when kernels must be bitwise reproducible (specux's flag or torch's)."""
    return _deterministic or _torch_deterministic()


class deterministic:  # noqa: N801 - used as a function and as a context manager
    """Turn deterministic mode on or off.

    ``specux.deterministic(True)`` sets the process-wide flag; used as
    ``with specux.deterministic(True): ...`` it restores the previous value on exit.
    ``torch.use_deterministic_algorithms(True)`` turns it on as well.
    """

    def __init__(self, flag: bool) -> None:
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"deterministic(flag): flag must be a bool, got {flag!r}")
        global _deterministic
        self._previous = _deterministic
        _deterministic = bool(flag)

    def __enter__(self) -> deterministic:
        return self

    def __exit__(self, *exc: object) -> None:
        global _deterministic
        _deterministic = self._previous





def tensor_cores_enabled() -> bool:
    """Whether float32 correlations with filters longer than the hop (cqt / vqt octaves) may
    run on the tensor cores of a CUDA device that has them (compute capability 8.0 or
    later), as three tf32 products per step ("3xTF32": within float32 rounding of the SIMT
    kernels, not their bits); False when ``SPECUX_TENSOR_CORES=0`` (the float32 SIMT
    kernels then run; also false / no / off). Read at each call."""
    return env_flag("SPECUX_TENSOR_CORES", True)


def cqt_spectral_enabled() -> bool:
    """Whether cqt / vqt on CUDA may evaluate their longest filters by the spectral path
    (blocks' FFTs times the kernels' spectra, where its cost model prefers it: exact, but in
    float32 a frame's rounding error then scales with the loudest content of its pair of
    blocks of the same signal rather than with the frame itself); False when
    ``SPECUX_CQT_SPECTRAL=0`` (every octave then runs as a correlation). Read at each
    call."""
    return env_flag("SPECUX_CQT_SPECTRAL", True)


def cache_dir() -> str:
    """Where compiled kernels are cached: ``SPECUX_CACHE_DIR``, else the user cache folder."""
    configured = os.environ.get("SPECUX_CACHE_DIR")
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    if sys.platform == "darwin":
        base = os.path.expanduser("~/Library/Caches")
    elif sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA", os.path.expanduser("~\\AppData\\Local"))
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "specux")


def disk_cache_enabled() -> bool:
    """False when ``SPECUX_DISK_CACHE=0`` (or false / no / off)."""
    return env_flag("SPECUX_DISK_CACHE", True)
