"""Process-wide runtime options (determinism, autotune), read by every backend.

Environment switches: ``SPECUX_DETERMINISTIC=1`` starts with deterministic mode on;
``SPECUX_TENSOR_CORES=0`` keeps float32 products off the tensor cores (see
:func:`tensor_cores_enabled`).
"""

from __future__ import annotations

import os
import sys

import numpy as np

# Process-wide like torch's own flag: autograd may run a backward on another thread.
_deterministic = os.environ.get("SPECUX_DETERMINISTIC", "0").strip() not in ("", "0")


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
    kernels then run). Read at each call."""
    return os.environ.get("SPECUX_TENSOR_CORES", "1").strip() != "0"


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
    """False when ``SPECUX_DISK_CACHE=0``."""
    return os.environ.get("SPECUX_DISK_CACHE", "1").strip() != "0"
