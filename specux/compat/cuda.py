"""The one place that imports cuda-python (driver and NVRTC bindings).

cuda-python moved its modules between releases: 12.6+ and 13.x ship ``cuda.bindings.driver`` /
``cuda.bindings.nvrtc``; older releases had ``from cuda import cuda, nvrtc``. Every other specux
module asks :func:`driver` / :func:`nvrtc` for the module and :func:`check` for the result, so the
layout difference lives here only.

Importing this module imports nothing from cuda-python: ``import specux`` must work without it.
"""

from __future__ import annotations

import functools
import glob
import importlib
import os
import sys
from types import ModuleType
from typing import Any

from specux.errors import BackendUnavailableError

_INSTALL_HINT = "pip install 'specux[cuda13]' (or 'specux[cuda12]' for a CUDA 12 driver)"


def _import_first(*names: str) -> ModuleType:
    error: ImportError | None = None
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            error = error or exc  # report the current layout's error, not the fallback's
    raise BackendUnavailableError(
        f"cuda-python is not installed ({error}): {_INSTALL_HINT}"
    ) from error


@functools.cache
def driver() -> ModuleType:
    """The CUDA driver API bindings (``cuda.bindings.driver``, or ``cuda.cuda`` before 12.6).

    Raises BackendUnavailableError when cuda-python is not installed.
    """
    return _import_first("cuda.bindings.driver", "cuda.cuda")


@functools.cache
def nvrtc() -> ModuleType:
    """The NVRTC bindings (``cuda.bindings.nvrtc``, or ``cuda.nvrtc`` before 12.6)."""
    return _import_first("cuda.bindings.nvrtc", "cuda.nvrtc")


def _error_text(err: Any) -> str:
    """'NAME: description' for a CUresult or nvrtcResult, never raising itself."""
    name = getattr(err, "name", None) or str(err)
    kind = type(err).__name__
    try:
        if kind == "nvrtcResult":
            status, text = nvrtc().nvrtcGetErrorString(err)
        else:
            # cuGetErrorString needs libcuda; without a driver we still have the enum name.
            status, text = driver().cuGetErrorString(err)
        if int(getattr(status, "value", status)) == 0 and text:
            text = text.decode() if isinstance(text, bytes) else str(text)
            return name if text == name else f"{name}: {text}"
    except Exception:  # noqa: BLE001 - describing an error must not raise another
        pass
    return name


def check(result: Any, what: str) -> Any:
    """Unpack a cuda-python ``(err, *values)`` return, raising on any error.

    Returns None for ``(err,)``, the value for ``(err, value)``, else the tuple of values.
    Raises RuntimeError("<what> failed: CUDA_ERROR_X: description").
    """
    if not isinstance(result, tuple):  # a few calls return the status alone
        result = (result,)
    err, values = result[0], result[1:]
    if int(getattr(err, "value", err)) != 0:
        raise RuntimeError(f"{what} failed: {_error_text(err)}")
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _describe_location(path: str, found_via: str | None) -> str:
    """Human wording for how libnvrtc was found (shown by ``python -m specux info``)."""
    norm = os.path.normpath(path)
    parts = norm.split(os.sep)
    if "torch" in parts and "lib" in parts:
        return "torch's bundled libraries"
    if "site-packages" in parts or "dist-packages" in parts or found_via == "site-packages":
        if "nvidia" in parts:
            return "nvidia-cuda-nvrtc wheel"
        return f"Python package ({found_via or 'site-packages'})"
    if found_via == "conda":
        return f"conda environment (CONDA_PREFIX={os.environ.get('CONDA_PREFIX', '?')})"
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and norm.startswith(os.path.normpath(root) + os.sep):
            return f"CUDA toolkit ({var}={root})"
    if found_via in ("CUDA_PATH", "system-ctk-root") or "cuda" in os.path.basename(
        os.path.dirname(os.path.dirname(norm))
    ):
        return f"CUDA toolkit ({os.path.dirname(os.path.dirname(norm))})"
    return "system library path"


def _nvrtc_candidates() -> list[tuple[str, str | None]]:
    """Where libnvrtc may be when cuda.pathfinder is missing (older cuda-python releases)."""
    # torch builds that bundle NVRTC name it with a hash: torch/lib/libnvrtc-672ee683.so.12.
    names = ("nvrtc64_*.dll",) if sys.platform == "win32" else ("libnvrtc.so*", "libnvrtc-*.so*")
    roots: list[tuple[str, str | None]] = []
    for site in sys.path:
        for sub in ("lib", "bin"):  # nvidia/cu13/lib, nvidia/cuda_nvrtc/lib (cu12), .../bin
            pattern = os.path.join(site, "nvidia", "*", sub)
            roots += [(d, "site-packages") for d in glob.glob(pattern)]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            for sub in ("lib64", "lib", "bin"):
                roots.append((os.path.join(os.environ[var], sub), "CUDA_PATH"))
    for site in sys.path:
        roots.append((os.path.join(site, "torch", "lib"), "site-packages"))
    found = []
    for root, via in roots:
        for pattern in names:
            hits = sorted(p for p in glob.glob(os.path.join(root, pattern)) if "builtins" not in p)
            found += [(hit, via) for hit in hits]
    return found


@functools.cache
def nvrtc_location() -> tuple[str | None, str]:
    """(absolute path of libnvrtc or None, how it was found).

    How: "nvidia-cuda-nvrtc wheel", "CUDA toolkit (CUDA_HOME=...)", "torch's bundled
    libraries", "system library path", or why it was not found. Uses cuda.pathfinder (the
    loader cuda-bindings itself uses) when it is installed, so the path is the one NVRTC
    compiles with.
    """
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
    except ImportError:
        load_nvidia_dynamic_lib = None
    if load_nvidia_dynamic_lib is not None:
        try:
            loaded = load_nvidia_dynamic_lib("nvrtc")
        except Exception as exc:  # noqa: BLE001 - pathfinder raises several error types
            return None, f"not found ({type(exc).__name__}: {exc})"
        path = loaded.abs_path
        if path is None:
            return None, f"loaded, path unknown ({loaded.found_via})"
        return path, _describe_location(path, loaded.found_via)
    candidates = _nvrtc_candidates()
    if candidates:
        path, via = candidates[0]
        return path, _describe_location(path, via)
    import ctypes.util

    name = ctypes.util.find_library("nvrtc")
    if name:
        return name, "system library path"
    return None, "not found (no nvidia-cuda-nvrtc wheel, CUDA_HOME or system library)"


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC library in use, e.g. (13, 5)."""
    major, minor = check(nvrtc().nvrtcVersion(), "nvrtcVersion")
    return int(major), int(minor)


def nvrtc_summary() -> str:
    """One line for ``python -m specux info``: "NVRTC 13.5 at <path> (nvidia-cuda-nvrtc wheel)"."""
    try:
        nvrtc()
    except BackendUnavailableError as exc:
        return str(exc)
    path, how = nvrtc_location()
    if path is None:
        return f"NVRTC {how}"
    try:
        version = ".".join(map(str, nvrtc_version()))
    except Exception as exc:  # noqa: BLE001 - report, do not crash `info`
        return f"NVRTC at {path} ({how}) does not work: {exc}"
    return f"NVRTC {version} at {path} ({how})"


@functools.cache
def driver_version() -> tuple[int, int]:
    """(major, minor) of the CUDA version the installed driver supports, e.g. (13, 0)."""
    version = int(check(driver().cuDriverGetVersion(), "cuDriverGetVersion"))
    return version // 1000, (version % 1000) // 10


_initialized = False


def init_driver() -> None:
    """cuInit(0) once per process (raises RuntimeError with the driver's error)."""
    global _initialized
    if not _initialized:
        check(driver().cuInit(0), "cuInit")
        _initialized = True


@functools.cache
def unavailable_reason() -> str | None:
    """None when NVRTC kernels can compile and run here, else a sentence saying why not.

    Checks, in order: cuda-python installed, libnvrtc found, the driver initializes (cuInit),
    the driver is new enough for CUBINs from this NVRTC, at least one device is visible.
    Note: this calls cuInit, so call it after any fork, as for torch.cuda.
    """
    try:
        driver()
        nvrtc()
    except BackendUnavailableError as exc:
        return str(exc)
    path, how = nvrtc_location()
    if path is None:
        return f"the NVRTC library (libnvrtc) was not found: {how}; pip install nvidia-cuda-nvrtc"
    try:
        nvrtc_major, nvrtc_minor = nvrtc_version()
    except Exception as exc:  # noqa: BLE001 - a broken libnvrtc is a reason, not a crash
        return f"NVRTC at {path} does not work: {exc}"
    try:
        init_driver()
    except Exception as exc:  # noqa: BLE001 - no libcuda raises DynamicLibNotFoundError etc.
        return f"the NVIDIA driver could not be initialized ({exc})"
    try:
        driver_major, driver_minor = driver_version()
        count = int(check(driver().cuDeviceGetCount(), "cuDeviceGetCount"))
    except Exception as exc:  # noqa: BLE001
        return f"the NVIDIA driver does not answer ({exc})"
    # A CUBIN runs on drivers of the same major CUDA version (minor-version compatibility),
    # never on an older major one.
    if driver_major < nvrtc_major:
        return (
            f"the NVIDIA driver supports CUDA {driver_major}.{driver_minor} but NVRTC is "
            f"{nvrtc_major}.{nvrtc_minor}: pip install 'specux[cuda{driver_major}]' or update "
            "the driver"
        )
    if count == 0:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        suffix = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
        return f"no CUDA device is visible{suffix}"
    return None


__all__ = [
    "check",
    "driver",
    "driver_version",
    "init_driver",
    "nvrtc",
    "nvrtc_location",
    "nvrtc_summary",
    "nvrtc_version",
    "unavailable_reason",
]
