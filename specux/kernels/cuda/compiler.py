"""CUDA C source -> CUBIN bytes with NVRTC (``compile(src) -> bytes``, no state, no cache).

We compile to CUBIN (SASS for one ``sm_XX``), never PTX: a driver older than the NVRTC that
produced a PTX rejects it, while a CUBIN loads on any driver of the same major CUDA version.

Environment: ``SPECUX_DUMP_SOURCE=<dir>`` writes every compiled source there (and the failing
one on a compile error; without it, a failing source goes to a temporary file).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import tempfile
from collections.abc import Sequence

from specux import options as _options
from specux.compat import cuda as _cuda
from specux.errors import BackendUnavailableError

_ARCH = re.compile(r"^sm_[0-9]{2,3}[af]?$")
# Flags that trade accuracy for speed: the transforms' error budget has no room for them.
_FORBIDDEN = frozenset(
    f"{dash}{flag}"
    for dash in ("-", "--")
    for flag in ("use_fast_math", "ftz=true", "prec-div=false", "prec-sqrt=false")
)


class CompileError(RuntimeError):
    """NVRTC rejected a source. ``log`` is NVRTC's log; ``source_path`` holds the source."""

    def __init__(self, message: str, *, log: str, source_path: str | None) -> None:
        super().__init__(message)
        self.log = log
        self.source_path = source_path


def default_options(arch: str) -> tuple[str, ...]:
    """The NVRTC options every specux kernel is compiled with for ``arch`` ("sm_90")."""
    return (f"--gpu-architecture={arch}", "-std=c++17")


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:80] or "kernel"


def _write_source(source: str, name: str, arch: str, opts: Sequence[str], *, failed: bool) -> str:
    """Write the source to SPECUX_DUMP_SOURCE (or a temp file when a compile failed)."""
    dump_dir = os.environ.get("SPECUX_DUMP_SOURCE")
    # The options go last, as a comment, so NVRTC's line numbers still match the file.
    text = f"{source}\n// specux nvrtc options: {' '.join(opts)}\n"
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    stem = f"{_safe_name(name)}.{arch}.{digest}"
    if dump_dir:
        os.makedirs(dump_dir, exist_ok=True)
        path = os.path.join(dump_dir, stem + ".cu")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        return path
    if not failed:
        return ""
    fd, path = tempfile.mkstemp(prefix=f"specux-{stem}-", suffix=".cu")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def _program_log(nvrtc, program) -> str:
    size = _cuda.check(nvrtc.nvrtcGetProgramLogSize(program), "nvrtcGetProgramLogSize")
    buffer = b" " * int(size)
    _cuda.check(nvrtc.nvrtcGetProgramLog(program, buffer), "nvrtcGetProgramLog")
    return buffer.rstrip(b"\x00").decode(errors="replace").strip()


def compile_cubin(source: str, *, name: str, arch: str, options: tuple[str, ...] = ()) -> bytes:
    """Compile CUDA C++ ``source`` to a CUBIN (ELF) for ``arch`` ("sm_90", "sm_80", ...).

    ``name`` names the program in NVRTC's log and dumped files (use the kernel's name).
    ``options`` are extra NVRTC flags after :func:`default_options` (``-D...``, ``-I...``,
    ``--maxrregcount=N``); fast-math flags are refused. Kernels looked up by name later must be
    ``extern "C"`` (NVRTC does not mangle those). Raises CompileError with NVRTC's log and the
    path of the failing source, BackendUnavailableError when NVRTC is missing.
    """
    if not _ARCH.match(arch):
        raise ValueError(f"arch must look like 'sm_90' (a CUBIN target), got {arch!r}")
    bad = [flag for flag in options if flag.replace(" ", "") in _FORBIDDEN]
    if bad:
        raise ValueError(f"options {bad} trade accuracy for speed; specux never compiles with them")
    nvrtc = _cuda.nvrtc()
    opts = default_options(arch) + tuple(options)
    if os.environ.get("SPECUX_DUMP_SOURCE"):
        _write_source(source, name, arch, opts, failed=False)
    program = _cuda.check(
        nvrtc.nvrtcCreateProgram(source.encode(), f"{_safe_name(name)}.cu".encode(), 0, [], []),
        "nvrtcCreateProgram",
    )
    try:
        encoded = [flag.encode() for flag in opts]
        status = nvrtc.nvrtcCompileProgram(program, len(encoded), encoded)[0]
        if int(getattr(status, "value", status)) != 0:
            log = _program_log(nvrtc, program)
            path = _write_source(source, name, arch, opts, failed=True)
            raise CompileError(
                f"NVRTC {'.'.join(map(str, _cuda.nvrtc_version()))} could not compile {name!r} "
                f"for {arch} ({getattr(status, 'name', status)}); options: {' '.join(opts)}\n"
                f"source: {path}\n{log}",
                log=log,
                source_path=path,
            )
        size = _cuda.check(nvrtc.nvrtcGetCUBINSize(program), "nvrtcGetCUBINSize")
        cubin = bytearray(int(size))
        _cuda.check(nvrtc.nvrtcGetCUBIN(program, cubin), "nvrtcGetCUBIN")
        return bytes(cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(program)


def _user_id() -> str:
    # Per-user temp folder: another user's extraction could be stale or unwritable.
    return str(os.getuid()) if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")


def _bundled_header_dir() -> str | None:
    """Extract the headers NVRTC 13 carries in libnvrtc-builtins; None where it cannot."""
    try:
        nvrtc = _cuda.nvrtc()
        install = nvrtc.nvrtcInstallBundledHeaders  # NVRTC 13.x bindings only
        major, minor = _cuda.nvrtc_version()
    except Exception:  # noqa: BLE001 - old bindings, missing symbol: fall through
        return None
    version = f"{major}.{minor}"
    places = [os.path.join(tempfile.gettempdir(), f"specux-nvrtc-headers-{_user_id()}")]
    if _options.disk_cache_enabled():
        places.insert(0, os.path.join(_options.cache_dir(), "nvrtc-headers"))
    for place in places:
        target = os.path.join(place, version)
        try:
            # Flag 0 = skip if this version is installed; NVRTC locks against other processes.
            status = install(target.encode(), 0)[0]
        except Exception:  # noqa: BLE001 - a symbol missing from an older libnvrtc
            return None
        if int(getattr(status, "value", status)) == 0 and os.path.isfile(
            os.path.join(target, "cuda_fp16.h")
        ):
            return target
    return None


@functools.cache
def cuda_include_options() -> tuple[str, ...]:
    """``-I`` options under which NVRTC finds the CUDA headers (<cuda_fp16.h>, CCCL, ...).

    NVRTC has no default include path. In order: the headers bundled in NVRTC 13 (extracted
    once, ~26 MB, under the cache dir or the temp dir; they match the compiler exactly), then a
    CUDA toolkit or the nvidia-cuda-runtime / nvidia-cuda-cccl wheels found by cuda.pathfinder,
    then CUDA_HOME/include. specux's generated kernels need none of this: the CUDA dialect
    converts halves with inline PTX (``cvt.f32.f16`` / ``cvt.rn.f16.f32``), which a bare NVRTC
    of any version compiles.
    Raises BackendUnavailableError when no headers are found.
    """
    bundled = _bundled_header_dir()
    if bundled is not None:
        dirs = [bundled, os.path.join(bundled, "cccl")]
    else:
        dirs = []
        try:
            from cuda.pathfinder import find_nvidia_header_directory

            for lib in ("cudart", "cccl"):
                found = find_nvidia_header_directory(lib)
                if found:
                    dirs.append(found)
        except Exception:  # noqa: BLE001 - no pathfinder (cuda-python < 12.8) or a bad install
            pass
        home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
        if not dirs and home:
            dirs = [os.path.join(home, "include"), os.path.join(home, "include", "cccl")]
    dirs = [d for d in dirs if os.path.isdir(d)]
    if not any(os.path.isfile(os.path.join(d, "cuda_fp16.h")) for d in dirs):
        raise BackendUnavailableError(
            "CUDA headers (cuda_fp16.h) not found: use NVRTC >= 13 (nvidia-cuda-nvrtc), "
            "pip install nvidia-cuda-runtime, or set CUDA_HOME to a CUDA toolkit"
        )
    return tuple(f"-I{d}" for d in dirs)


__all__ = [
    "CompileError",
    "compile_cubin",
    "cuda_include_options",
    "default_options",
]
