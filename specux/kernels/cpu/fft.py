"""FFT primitives on numpy arrays: complex-to-complex, real-to-complex, complex-to-real."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from specux.meta import dtypes

try:  # scipy.fft keeps float32 in float32 and runs batches on several threads.
    import scipy.fft as _scipy_fft
except ImportError:  # pragma: no cover - exercised in the torch-less/scipy-less CI job
    _scipy_fft = None

try:  # Intel MKL's FFT (the `mkl` extra): x86 batches in about half pocketfft's time.
    import mkl as _mkl_service  # mkl-service: MKL's thread count per calling thread
    import mkl_fft as _mkl_fft
except ImportError:
    _mkl_fft = _mkl_service = None

WORKERS = max(1, os.cpu_count() or 1)

# Which library computes the CPU FFTs: SPECUX_CPU_FFT = auto (the default: mkl_fft when it is
# installed, else scipy.fft, else numpy.fft), mkl, scipy or numpy. Every provider gives the
# same transform to rounding; the choice is read once, at the first CPU FFT.
PROVIDERS = ("mkl", "scipy", "numpy")
_AVAILABLE = {"mkl": _mkl_fft is not None, "scipy": _scipy_fft is not None, "numpy": True}
_MISSING = {"mkl": "mkl_fft and mkl-service are not installed (pip install -e '.[mkl]')",
            "scipy": "scipy is not installed (pip install scipy)"}  # fmt: skip


def choose_provider(requested: str | None) -> str:
    """The provider for a ``SPECUX_CPU_FFT`` value (None or "" or "auto": the fastest present).

    Raises ValueError for an unknown name and for a provider that is not installed: a
    requested provider is never silently replaced by another."""
    name = (requested or "auto").strip().lower()
    if name == "auto":
        return next(p for p in PROVIDERS if _AVAILABLE[p])
    if name not in PROVIDERS:
        raise ValueError(f"SPECUX_CPU_FFT={requested!r}: expected one of auto, "
                         f"{', '.join(PROVIDERS)}")  # fmt: skip
    if not _AVAILABLE[name]:
        raise ValueError(f"SPECUX_CPU_FFT={requested!r}: {_MISSING[name]}")
    return name


def provider() -> str:
    """The library computing the CPU backend's FFTs (``SPECUX_CPU_FFT``, read on first use; a
    bad value raises ValueError here and at every CPU FFT, it is never replaced)."""
    global _provider
    if _provider is None:
        _provider = choose_provider(os.environ.get("SPECUX_CPU_FFT"))
    return _provider


def set_provider(name: str) -> str:
    """Switch the CPU FFT library (as :func:`choose_provider` resolves ``name``); returns the
    previous one. For tests and benchmarks that compare providers."""
    global _provider
    previous = provider()
    _provider = choose_provider(name)
    return previous


_provider: str | None = None


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_thread = threading.local()


def _mark_pool_thread() -> None:
    _thread.in_pool = True


def executor() -> ThreadPoolExecutor:
    """The CPU backend's worker threads (one per core), shared by every kernel."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="specux",
                                       initializer=_mark_pool_thread)  # fmt: skip
        return _pool


def _forget_pool_in_child() -> None:
    """A forked child (multiprocessing's default start on Linux, torch DataLoader workers)
    inherits the pool object but none of its threads: work submitted there would wait for
    ever. It starts its own pool on first use instead (and a fresh lock: the parent's may
    have been held by another thread at the fork)."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):  # (POSIX; Windows has no fork)
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def _in_pool() -> bool:
    """True on one of :func:`executor`'s threads, which must not wait on the pool."""
    return getattr(_thread, "in_pool", False)


def thread_workers() -> int:
    """Threads an FFT call may use from here: one on a pool thread (the pool already runs
    one task a core), every core on any other thread."""
    return 1 if _in_pool() else WORKERS


def run_blocks(work: Callable[[Any], None], items: Sequence[Any], parallel: bool = True) -> None:
    """``work(item)`` for every item: on the pool when ``parallel`` and there are several
    items and several workers, else (and always when called from a pool thread, which must
    not wait on the pool) one after another on the calling thread."""
    if not parallel or len(items) <= 1 or WORKERS == 1 or _in_pool():
        for item in items:
            work(item)
        return
    for _ in executor().map(work, items):
        pass


def _mkl_call(f: Callable, *args, **kw):
    """``f`` (an mkl_fft function) on one MKL thread, the calling one. MKL's own OpenMP
    workers would spin for 200 ms after every call (KMP_BLOCKTIME), taking the cores from
    the next kernel's threads; specux parallelizes over rows itself. The limit is MKL's
    thread-local one, so other threads' MKL calls keep their settings."""
    previous = _mkl_service.set_num_threads_local(1)
    try:
        return f(*args, **kw)
    finally:
        _mkl_service.set_num_threads_local(previous)


_MKL_1D = {("c2c", True): "fft", ("c2c", False): "ifft", ("r2c", True): "rfft",
           ("c2r", False): "irfft"}  # fmt: skip
# Elements per pool task: a bulk transform smaller than two of these runs on the calling thread.
_MKL_SPLIT_ELEMENTS = 1 << 16


def _engine(x: np.ndarray, dims: tuple[int, ...], size: int | None = None) -> str:
    """The library that computes a transform of ``x`` over ``dims`` (``size``: its length,
    default the axis's): the provider, except that mkl_fft computes only transforms over
    the last axis of at most :data:`MKL_MAX_LENGTH` points; others run on pocketfft
    (scipy.fft, else numpy.fft). Off the last axis or over several axes, mkl_fft's n-D
    functions were not measured for accuracy; longer transforms lost it (measured with
    mkl_fft 2.3.2 / oneMKL 2026.2, batches of float32 rows against pocketfft, relative L2:
    2**20 points 4.2e-6 where pocketfft has 1.6e-7, 2**21 points 2.1e-6). See
    :func:`_mkl_transform` for its single transforms."""
    engine = provider()
    if engine == "mkl":
        last = len(dims) == 1 and dims[0] % x.ndim == x.ndim - 1
        if not (last and (x.shape[-1] if size is None else size) <= MKL_MAX_LENGTH):
            return "scipy" if _AVAILABLE["scipy"] else "numpy"
    return engine


# The longest transform mkl_fft computes (see _engine); a lone row of at most this many points
# runs as a batch of two (see _mkl_transform).
MKL_MAX_LENGTH = 1 << 18


def _mkl_transform(kind: str, x: np.ndarray, forward: bool, norm: str, n: int,
                   out_dtype: np.dtype) -> np.ndarray:  # fmt: skip
    """``kind`` ("c2c", "r2c", "c2r") of length ``n`` by mkl_fft over the last axis of
    ``x``, as 1-D transforms of row blocks on the pool.

    Every call transforms at least two rows: oneMKL computes a single transform another way,
    far less accurately (measured with mkl_fft 2.3.2 / oneMKL 2026.2 against pocketfft, one
    row, maximum error relative to the peak: float32 c2r of even lengths from about 8200 up
    off by 1-6 %, float32 c2c / r2c up to 500 times pocketfft's error, float64 up to 1e-12;
    batches of two and three rows of 2 to 2**18 points, relative L2: float32 within 1.7
    times pocketfft's error, float64 up to 2.8e-14 where pocketfft has 5e-16, on lengths with
    a large prime factor), so a lone row is transformed beside a copy of itself, and the
    pool's blocks hold two rows or more. A row then gets the same bits alone as in any
    batch.
    Its DFTI descriptors refuse some layouts (zero strides, as in an expanded gradient:
    "Inconsistent configuration parameters"), so the input is made C-contiguous first
    (pocketfft copies rows anyway)."""
    f = getattr(_mkl_fft, _MKL_1D[(kind, forward)])
    width = n // 2 + 1 if kind == "r2c" else n
    rows = x.reshape(-1, x.shape[-1])
    single = rows.shape[0] == 1
    rows = np.repeat(rows, 2, axis=0) if single else np.ascontiguousarray(rows)
    out = np.empty((rows.shape[0], width), dtype=out_dtype)
    extra = {"n": n} if kind == "c2r" else {}
    # blocks of rows for the pool; one call on a pool thread, which runs them one after
    # another anyway (a descriptor is planned for each batch size: 20- and 21-row halves
    # replanned at every call, 30 % slower overlap-save chunks)
    blocks = 1 if _in_pool() else min(WORKERS, max(1, rows.size // _MKL_SPLIT_ELEMENTS),
                                      rows.shape[0] // 2)  # fmt: skip
    bounds = np.linspace(0, rows.shape[0], blocks + 1).astype(int)

    def work(i: int) -> None:
        a, b = bounds[i], bounds[i + 1]
        _mkl_call(f, rows[a:b], norm=norm, out=out[a:b], **extra)

    run_blocks(work, range(blocks))
    return (out[:1] if single else out).reshape(*x.shape[:-1], width)


# pocketfft's binding in scipy takes an output array (scipy.fft's public functions do not):
# the framewise kernels transform each block of frames straight into the result or into a
# reused buffer, saving an allocation and a copy per block. It is private, so it is used only
# after checking, once, that it gives scipy.fft's answer; otherwise the copy is made.
_FORWARD_INORM = {"backward": 0, "ortho": 1, "forward": 2}


def _private_pocketfft():
    try:
        from scipy.fft._pocketfft import pypocketfft as binding

        x = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)[::2, 1:] ** 0.5
        out = np.empty((4, 3), dtype=np.complex64)
        binding.r2c(x, (1,), True, 1, out, 1)
        if not np.allclose(out, _scipy_fft.rfft(x, norm="ortho"), rtol=1e-5, atol=1e-5):
            return None
        z = np.ascontiguousarray(out[:, ::-1])
        out2 = np.empty_like(z)
        binding.c2c(z, (1,), True, 0, out2, 1)
        if not np.allclose(out2, _scipy_fft.fft(z), rtol=1e-5, atol=1e-5):
            return None
        return binding
    except Exception:  # pragma: no cover - any other scipy layout: fall back to a copy
        return None


_pocketfft = _private_pocketfft() if _scipy_fft is not None else None


@functools.lru_cache(maxsize=64)
def complex_dtype(real_dtype: np.dtype) -> np.dtype:
    """The complex dtype of a real one (cached: every block of a CPU transform asks)."""
    return np.dtype(dtypes.complex_of(np.dtype(real_dtype).name))


@functools.lru_cache(maxsize=64)
def real_dtype(complex_dtype_: np.dtype) -> np.dtype:
    return np.dtype(dtypes.real_of(np.dtype(complex_dtype_).name))


def _fresh(result: np.ndarray, source: np.ndarray, dtype: np.dtype) -> np.ndarray:
    # Older numpy computes float32 FFTs in float64; the result must keep the input's precision
    # and must never alias the input (torch custom ops may not return views of their inputs).
    result = result.astype(dtype, copy=False)
    if np.shares_memory(result, source):
        result = result.copy()
    return result


def c2c(x: np.ndarray, dims: Sequence[int], forward: bool, norm: str, *,
        workers: int = WORKERS) -> np.ndarray:  # fmt: skip
    """Complex FFT (``forward``) or inverse FFT over ``dims`` with numpy's ``norm``."""
    dims = tuple(dims)
    if x.size == 0 or not dims:
        return np.array(x, dtype=x.dtype, copy=True)
    engine = _engine(x, dims)
    if engine == "mkl":
        out = _mkl_transform("c2c", x, forward, norm, x.shape[-1], x.dtype)
    elif engine == "scipy":
        f = _scipy_fft.fftn if forward else _scipy_fft.ifftn
        out = f(x, axes=dims, norm=norm, workers=workers)
    else:
        f = np.fft.fftn if forward else np.fft.ifftn
        out = f(x, axes=dims, norm=norm)
    return _fresh(out, x, x.dtype)


def r2c(x: np.ndarray, dims: Sequence[int], norm: str, *, workers: int = WORKERS) -> np.ndarray:
    """Real FFT over ``dims``; the last of them keeps ``n // 2 + 1`` bins."""
    dims = tuple(dims)
    out_dtype = complex_dtype(x.dtype)
    if x.size == 0:
        shape = list(x.shape)
        shape[dims[-1]] = x.shape[dims[-1]] // 2 + 1
        return np.zeros(shape, dtype=out_dtype)
    engine = _engine(x, dims)
    if engine == "mkl":
        out = _mkl_transform("r2c", x, True, norm, x.shape[-1], out_dtype)
    elif engine == "scipy":
        out = _scipy_fft.rfftn(x, axes=dims, norm=norm, workers=workers)
    else:
        out = np.fft.rfftn(x, axes=dims, norm=norm)
    return _fresh(out, x, out_dtype)


def c2r(x: np.ndarray, dims: Sequence[int], last_size: int, norm: str, *,
        workers: int = WORKERS) -> np.ndarray:  # fmt: skip
    """Inverse real FFT over ``dims`` giving ``last_size`` samples on the last of them.

    The imaginary parts of the DC bin (and of the Nyquist bin for even sizes) are ignored.
    """
    dims = tuple(dims)
    out_dtype = real_dtype(x.dtype)
    sizes = [x.shape[d] for d in dims[:-1]] + [last_size]
    if x.size == 0:
        shape = list(x.shape)
        shape[dims[-1]] = last_size
        return np.zeros(shape, dtype=out_dtype)
    engine = _engine(x, dims, last_size)
    if engine == "mkl":
        out = _mkl_transform("c2r", x, False, norm, last_size, out_dtype)
    elif engine == "scipy":
        out = _scipy_fft.irfftn(x, s=sizes, axes=dims, norm=norm, workers=workers)
    else:
        out = np.fft.irfftn(x, s=sizes, axes=dims, norm=norm)
    return _fresh(out, x, out_dtype)


def forward_into(x: np.ndarray, out: np.ndarray, norm: str, real: bool) -> np.ndarray:
    """Forward FFT of ``x`` over its last axis written into ``out`` (C-contiguous, complex of
    ``x``'s precision, ``n // 2 + 1`` bins when ``real``); one thread. Returns ``out``."""
    kinds = (np.float32, np.float64) if real else (np.complex64, np.complex128)
    fits = (x.dtype in kinds and out.flags.c_contiguous
            and out.dtype == (complex_dtype(x.dtype) if real else x.dtype))  # fmt: skip
    engine = _engine(x, (x.ndim - 1,)) if fits else None
    if engine == "mkl" and x.flags.c_contiguous and x.size >= 2 * x.shape[-1]:
        # mkl_fft's 1-D functions normalize right and write into ``out`` (two rows or more:
        # :func:`_mkl_transform` says why)
        _mkl_call(_mkl_fft.rfft if real else _mkl_fft.fft, x, norm=norm, out=out)
        return out
    if engine == "scipy" and _pocketfft is not None and norm in _FORWARD_INORM:
        f = _pocketfft.r2c if real else _pocketfft.c2c
        f(x, (x.ndim - 1,), True, _FORWARD_INORM[norm], out, 1)
        return out
    out[...] = r2c(x, (-1,), norm, workers=1) if real else c2c(x, (-1,), True, norm, workers=1)
    return out
