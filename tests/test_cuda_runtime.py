"""NVRTC compile, kernel cache and CUDA launch.

Without a GPU (CI): compile to CUBIN, compile errors, the cache (memory, disk, corruption,
unwritable folder, SPECUX_DISK_CACHE=0, threads), NVRTC discovery, argument packing. These skip
when cuda-bindings or NVRTC are absent (the cache tests need neither).
With a GPU (``pytest -m cuda``): launches on torch's streams, compared with torch.
"""

from __future__ import annotations

import ctypes
import gc
import importlib.metadata
import os
import subprocess
import sys
import threading
import time
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from tolerances import TOLERANCES

from specux.kernels import cache as cache_module
from specux.kernels.cache import MAGIC, KernelCache

# A templated saxpy instantiated for float, double and half. Half is a 16-bit struct converted
# with inline PTX, the way specux's CUDA dialect does it: no <cuda_fp16.h>, so a bare NVRTC
# wheel compiles it.
SAXPY = r"""
struct __align__(2) half_bits { unsigned short bits; };
__device__ __forceinline__ float to_acc(half_bits h) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits)); return f;
}
__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ double to_acc(double v) { return v; }
__device__ __forceinline__ void store(half_bits* p, float v) {
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(p->bits) : "f"(v));
}
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(double* p, double v) { *p = v; }
template <typename T> struct Acc { typedef T type; };
template <> struct Acc<half_bits> { typedef float type; };

template <typename T>
__device__ void saxpy(long long n, typename Acc<T>::type a, const T* __restrict__ x,
                      T* __restrict__ y) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) store(&y[i], a * to_acc(x[i]) + to_acc(y[i]));
}
extern "C" __global__ void saxpy_f32(long long n, float a, const float* x, float* y) {
    saxpy<float>(n, a, x, y);
}
extern "C" __global__ void saxpy_f64(long long n, double a, const double* x, double* y) {
    saxpy<double>(n, a, x, y);
}
extern "C" __global__ void saxpy_f16(long long n, float a, const half_bits* x, half_bits* y) {
    saxpy<half_bits>(n, a, x, y);
}
"""

# The same with the toolkit's half type: needs cuda_include_options() (NVRTC has no default
# include path).
SAXPY_CUDA_FP16 = r"""
#include <cuda_fp16.h>
extern "C" __global__ void saxpy_half(long long n, float a, const __half* x, __half* y) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half_rn(a * __half2float(x[i]) + __half2float(y[i]));
}
"""

# Reverses each block's slice through `floats_per_block` floats of dynamic shared memory.
SHARED_REVERSE = r"""
extern "C" __global__ void shared_reverse(const float* x, float* y, int floats_per_block) {
    extern __shared__ float buffer[];
    const float* src = x + (long long)blockIdx.x * floats_per_block;
    float* dst = y + (long long)blockIdx.x * floats_per_block;
    for (int i = threadIdx.x; i < floats_per_block; i += blockDim.x) buffer[i] = src[i];
    __syncthreads();
    for (int i = threadIdx.x; i < floats_per_block; i += blockDim.x)
        dst[i] = buffer[floats_per_block - 1 - i];
}
"""

EM_CUDA = 190  # ELF e_machine of NVIDIA CUBINs


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECUX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SPECUX_DISK_CACHE", raising=False)
    monkeypatch.delenv("SPECUX_DUMP_SOURCE", raising=False)


@pytest.fixture
def nvrtc_ready():
    """Skip unless cuda-bindings and an NVRTC library are present."""
    pytest.importorskip("cuda.bindings.nvrtc")
    from specux.compat import cuda

    path, how = cuda.nvrtc_location()
    if path is None:
        pytest.skip(f"NVRTC not found: {how}")
    return cuda


def _elf_arch(cubin: bytes) -> int:
    """SM number from a CUBIN's e_flags (newer ELF ABI: bits 8-15; older: bits 0-7)."""
    flags = int.from_bytes(cubin[48:52], "little")
    return (flags >> 8) & 0xFF if cubin[8] >= 8 else flags & 0xFF


# ---------------------------------------------------------------- compile (no GPU) -----------


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_compile_cubin_is_an_elf_for_the_arch(nvrtc_ready, arch):
    from specux.kernels.cuda.compiler import compile_cubin

    cubin = compile_cubin(SAXPY, name="saxpy", arch=arch)
    assert cubin[:4] == b"\x7fELF"
    assert int.from_bytes(cubin[18:20], "little") == EM_CUDA
    assert _elf_arch(cubin) == int(arch[3:])
    for kernel in (b"saxpy_f32", b"saxpy_f64", b"saxpy_f16"):
        assert kernel in cubin  # extern "C": unmangled symbol names


def test_compile_error_has_log_and_source_path(nvrtc_ready):
    from specux.kernels.cuda.compiler import CompileError, compile_cubin

    broken = 'extern "C" __global__ void broken(float* y) { y[0] = 1.0f +; }\n'
    with pytest.raises(CompileError) as info:
        compile_cubin(broken, name="broken", arch="sm_90")
    error = info.value
    assert "error" in error.log and "broken.cu" in error.log
    assert error.source_path and os.path.isfile(error.source_path)
    assert error.source_path in str(error) and error.log in str(error)
    with open(error.source_path, encoding="utf-8") as handle:
        assert handle.read().startswith(broken)
    os.remove(error.source_path)


def test_dump_source_writes_every_compiled_source(nvrtc_ready, tmp_path, monkeypatch):
    from specux.kernels.cuda.compiler import CompileError, compile_cubin

    dump = tmp_path / "dump"
    monkeypatch.setenv("SPECUX_DUMP_SOURCE", str(dump))
    compile_cubin(SAXPY, name="saxpy", arch="sm_90")
    with pytest.raises(CompileError) as info:
        compile_cubin("this is not C++", name="bad", arch="sm_90")
    names = sorted(os.listdir(dump))
    assert len(names) == 2 and names[0].startswith("bad.sm_90.") and names[1].startswith("saxpy")
    assert os.path.dirname(info.value.source_path) == str(dump)


def test_compile_refuses_fast_math_and_ptx_targets(nvrtc_ready):
    from specux.kernels.cuda.compiler import compile_cubin

    with pytest.raises(ValueError, match="accuracy"):
        compile_cubin(SAXPY, name="saxpy", arch="sm_90", options=("--use_fast_math",))
    with pytest.raises(ValueError, match="sm_90"):
        compile_cubin(SAXPY, name="saxpy", arch="compute_90")


def test_cuda_fp16_header_through_include_options(nvrtc_ready):
    from specux.errors import BackendUnavailableError
    from specux.kernels.cuda.compiler import compile_cubin, cuda_include_options

    try:
        include = cuda_include_options()
    except BackendUnavailableError as exc:
        pytest.skip(str(exc))
    cubin = compile_cubin(SAXPY_CUDA_FP16, name="saxpy_half", arch="sm_90", options=include)
    assert cubin[:4] == b"\x7fELF" and b"saxpy_half" in cubin


def test_nvrtc_location_and_version(nvrtc_ready):
    path, how = nvrtc_ready.nvrtc_location()
    assert "nvrtc" in os.path.basename(path).lower() and os.path.isfile(path)
    assert nvrtc_ready.nvrtc_version() >= (11, 2)
    wheels = set()
    for dist in ("nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu12", "nvidia-cuda-nvrtc-cu13"):
        try:
            files = importlib.metadata.files(dist) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        wheels |= {os.path.realpath(f.locate()) for f in files if "libnvrtc" in f.name}
    if os.path.realpath(path) in wheels:
        assert how == "nvidia-cuda-nvrtc wheel"


def test_nvrtc_location_without_pathfinder(nvrtc_ready, monkeypatch):
    # cuda-python < 12.8 has no cuda.pathfinder: the fallback search must find the same library.
    path, how = nvrtc_ready.nvrtc_location()
    monkeypatch.setitem(sys.modules, "cuda.pathfinder", None)
    nvrtc_ready.nvrtc_location.cache_clear()
    try:
        fallback_path, fallback_how = nvrtc_ready.nvrtc_location()
    finally:
        nvrtc_ready.nvrtc_location.cache_clear()
    assert fallback_path is not None and "nvrtc" in os.path.basename(fallback_path)
    if how == "nvidia-cuda-nvrtc wheel":
        assert (os.path.realpath(fallback_path), fallback_how) == (os.path.realpath(path), how)


def test_check_names_the_call_and_the_error(nvrtc_ready):
    from specux.compat import cuda

    nvrtc = cuda.nvrtc()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    assert cuda.check((ok,), "x") is None
    assert cuda.check((ok, 5), "x") == 5
    assert cuda.check((ok, 5, 6), "x") == (5, 6)
    with pytest.raises(RuntimeError, match="nvrtcFoo failed: NVRTC_ERROR_COMPILATION"):
        cuda.check((nvrtc.nvrtcResult.NVRTC_ERROR_COMPILATION,), "nvrtcFoo")
    # Driver errors are described even where libcuda is missing (cuGetErrorString fails).
    invalid = cuda.driver().CUresult.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(RuntimeError, match="cuFoo failed: CUDA_ERROR_INVALID_VALUE"):
        cuda.check((invalid,), "cuFoo")


def test_unavailable_reason_is_none_or_a_sentence(nvrtc_ready):
    reason = nvrtc_ready.unavailable_reason()
    assert reason is None or (isinstance(reason, str) and len(reason) > 10)


def test_importing_the_cuda_modules_does_not_import_cuda_python():
    # torch itself imports cuda.bindings, so block it: the check is about specux's own imports.
    code = (
        "import sys; sys.modules['torch'] = None; "
        "import specux, specux.compat.cuda, specux.kernels.cuda.runtime; "
        "bad = [m for m in sys.modules if m == 'cuda' or m.startswith('cuda.')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_compile_arch_picks_the_newest_compatible_target(nvrtc_ready, monkeypatch):
    from specux.kernels.cuda import runtime

    runtime.compile_arch.cache_clear()
    try:
        # A CUBIN for sm_90 runs on any 9.x device: an unknown sm_99 gets sm_90.
        monkeypatch.setattr(runtime, "compute_capability", lambda index: (9, 9))
        assert runtime.compile_arch(0) == "sm_90"
        runtime.compile_arch.cache_clear()
        monkeypatch.setattr(runtime, "compute_capability", lambda index: (8, 0))
        assert runtime.compile_arch(0) == "sm_80"
    finally:
        runtime.compile_arch.cache_clear()


def test_argument_buffer_layout():
    from specux.kernels.cuda.runtime import _ArgBuffer

    types = (ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_float, ctypes.c_uint16)
    buffer = _ArgBuffer(types)
    assert buffer.types is types
    for values in [(0xDEADBEEF000, -7, 0.1, 1.5, 0x3C00), (1, 2, 3.0, 4.0, 5)]:
        buffer.fill_values(values)  # refilling reuses the same memory
        pointers = (ctypes.c_void_p * len(types)).from_address(buffer.address)
        for pointer, ctype, value in zip(pointers, types, values):
            if ctype is ctypes.c_double:
                assert pointer % 8 == 0  # C alignment of each argument
            assert ctype.from_address(pointer).value == pytest.approx(value)
    with pytest.raises(TypeError, match="1 kernel arguments for 5 parameters"):
        buffer.fill_values([1])  # other count (other types: Kernel builds another buffer)
    empty = _ArgBuffer(())
    empty.fill_values(())
    assert empty.address == 0  # no parameters: NULL
    with pytest.raises(TypeError, match="ctypes"):
        _ArgBuffer((int,))


def test_argument_buffer_packed_and_slot_paths():
    """Scalars and pointers are written by one struct pack; what it refuses (None for a
    pointer) and struct-typed arguments go slot by slot, with ctypes' conversions and errors."""
    from specux.kernels.cuda.runtime import _ArgBuffer

    class Pair(ctypes.Structure):
        _fields_ = [("a", ctypes.c_int), ("b", ctypes.c_double)]

    def read(buffer, types):
        pointers = (ctypes.c_void_p * len(types)).from_address(buffer.address)
        return [t.from_address(p) for p, t in zip(pointers, types)]

    types = (ctypes.c_uint16, ctypes.c_double, ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong)
    buffer = _ArgBuffer(types)
    assert buffer._packer is not None
    buffer.fill_values((7, 2.5, 0xABC0, -3, -(2**40)))
    assert [c.value for c in read(buffer, types)] == [7, 2.5, 0xABC0, -3, -(2**40)]
    buffer.fill_values((1, 3, None, 4, 5))  # None: a NULL pointer, through the slots
    assert [c.value for c in read(buffer, types)] == [1, 3.0, None, 4, 5]
    with pytest.raises(TypeError):
        buffer.fill_values((1, 2.0, 0, 1.5, 5))  # a float for an int: ctypes' error
    with pytest.raises(TypeError, match="5 parameters"):
        buffer.fill_values((1, 2.0))
    mixed = (ctypes.c_int, Pair)
    buffer = _ArgBuffer(mixed)
    assert buffer._packer is None  # a struct argument: slot by slot
    buffer.fill_values((9, Pair(4, 0.25)))
    got = read(buffer, mixed)
    assert got[0].value == 9 and (got[1].a, got[1].b) == (4, 0.25)


class _FakeDriver:
    """Records the driver calls Kernel.launch makes (the launch logic, minus a GPU)."""

    CUresult = SimpleNamespace(CUDA_SUCCESS=0)  # noqa: N815

    def __init__(self, current: int) -> None:
        self.current = current
        self.calls: list[tuple] = []
        self.launch_result = 0

    def cuCtxGetCurrent(self):  # noqa: N802 - the driver API's names
        return (0, self.current)

    def cuCtxPushCurrent(self, ctx):  # noqa: N802
        self.calls.append(("push", int(ctx)))
        return (0,)

    def cuCtxPopCurrent(self):  # noqa: N802
        self.calls.append(("pop",))
        return (0, 0)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):  # noqa: N802
        pointers = (ctypes.c_void_p * 2).from_address(params)
        n = ctypes.c_longlong.from_address(pointers[0]).value
        a = ctypes.c_float.from_address(pointers[1]).value
        self.calls.append(("launch", f, (gx, gy, gz), (bx, by, bz), shared, stream, n, a, extra))
        return (self.launch_result,)


@pytest.mark.parametrize("current", [7, 0])
def test_launch_logic_with_a_fake_driver(monkeypatch, current):
    from specux.compat import cuda
    from specux.kernels.cuda.runtime import Kernel

    fake = _FakeDriver(current)
    monkeypatch.setattr(cuda, "driver", lambda: fake)
    kernel = Kernel("fn", "saxpy_f32", 0, SimpleNamespace(context=7))
    args = [(1000, ctypes.c_longlong), (0.5, ctypes.c_float)]
    kernel.launch((4,), (256, 1), 1024, 0xABC, args)
    kernel.launch((0,), (256,), 0, 0xABC, args)  # empty grid: nothing launched
    kernel.launch((4,), (256, 1), 1024, 0xABC, [(1000, ctypes.c_longlong), (0.5, ctypes.c_double)])
    launch = ("launch", "fn", (4, 1, 1), (256, 1, 1), 1024, 0xABC, 1000, 0.5, 0)
    launches = [call for call in fake.calls if call[0] == "launch"]
    assert launches[0] == launch and len(launches) == 2
    assert launches[1][7] != 0.5  # a double's bytes read as a float: the buffer was rebuilt
    if current == 7:  # torch already made our context current: no push/pop
        assert len(fake.calls) == 2
    else:  # another (or no) context: ours is pushed for each launch and popped after
        assert fake.calls[:3] == [("push", 7), launch, ("pop",)] and len(fake.calls) == 6
    fake.launch_result, fake.calls = 1, []
    with pytest.raises(RuntimeError, match=r"cuLaunchKernel\(saxpy_f32\) failed"):
        kernel.launch((1,), (32,), 0, 0, args)
    assert fake.calls[-1] == ("pop",) or current == 7
    # the generated kernels' path: values and one types tuple, a 1-D grid
    fake.launch_result, fake.calls = 0, []
    types = (ctypes.c_longlong, ctypes.c_float)
    kernel.launch_values(6, 128, 0, 0xDEF, (77, 0.25), types)
    kernel.launch_values(0, 128, 0, 0xDEF, (77, 0.25), types)  # empty grid: nothing
    launches = [call for call in fake.calls if call[0] == "launch"]
    assert launches == [("launch", "fn", (6, 1, 1), (128, 1, 1), 0, 0xDEF, 77, 0.25, 0)]


# ---------------------------------------------------------------- cache (no GPU) -------------


def _compiler(payload=b"binary", delay=0.0):
    calls = []

    def compile_fn():
        calls.append(1)
        time.sleep(delay)
        return payload

    return compile_fn, calls


def _entries(root) -> list[str]:
    return [os.path.join(d, f) for d, _, files in os.walk(root) for f in files]


def test_cache_memory_hit():
    cache = KernelCache("test")
    compile_fn, calls = _compiler()
    parts = ("compiler 1.0", "-O3", "sm_90", "source")
    assert cache.get_or_compile(parts, compile_fn) == b"binary"
    assert cache.get_or_compile(parts, compile_fn) == b"binary"
    assert (cache.hits, cache.misses, cache.disk_hits, cache.compiles) == (1, 1, 0, 1)
    assert len(calls) == 1
    cache.get_or_compile(("compiler 1.0", "-O3", "sm_80", "source"), compile_fn)
    assert cache.compiles == 2  # any part changes the key


def test_cache_key_is_unambiguous():
    cache = KernelCache("test")
    assert cache.key(("ab", "c")) != cache.key(("a", "bc"))
    assert cache.key(("a",)) != KernelCache("other").key(("a",))


def test_cache_disk_hit_in_a_fresh_instance(tmp_path):
    parts = ("v", "opts", "sm_90", "src")
    first = KernelCache("test")
    first.get_or_compile(parts, _compiler(b"\x7fELF payload")[0])
    key = first.key(parts)
    path = tmp_path / "cache" / "test" / key[:2] / f"{key}.bin"
    assert path.is_file() and path.read_bytes().startswith(MAGIC)
    assert _entries(tmp_path / "cache") == [str(path)]  # no temp file left behind
    second = KernelCache("test")
    compile_fn, calls = _compiler(b"never")
    assert second.get_or_compile(parts, compile_fn) == b"\x7fELF payload"
    assert (second.disk_hits, second.compiles, len(calls)) == (1, 0, 0)


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "old-magic"])
def test_cache_corrupt_file_is_recompiled(tmp_path, damage):
    parts = ("v", "opts", "sm_90", "src")
    KernelCache("test").get_or_compile(parts, _compiler(b"good binary" * 10)[0])
    key = KernelCache("test").key(parts)
    path = tmp_path / "cache" / "test" / key[:2] / f"{key}.bin"
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-3] ^= 0xFF
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "empty":
        data = bytearray()
    else:
        data[:8] = b"SPECUXK0"
    path.write_bytes(bytes(data))
    cache = KernelCache("test")
    compile_fn, calls = _compiler(b"good binary" * 10)
    assert cache.get_or_compile(parts, compile_fn) == b"good binary" * 10
    assert (cache.disk_hits, len(calls)) == (0, 1)
    assert KernelCache("test").get_or_compile(parts, _compiler(b"x")[0]) == b"good binary" * 10


def test_cache_unwritable_folder_warns_once_and_works(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SPECUX_CACHE_DIR", str(blocker / "cache"))  # mkdir under a file fails
    monkeypatch.setattr(cache_module, "_warned", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for index in range(3):
            cache = KernelCache("test")  # separate instances: still one warning per process
            assert cache.get_or_compile(("k", str(index)), _compiler(b"b%d" % index)[0]) == (
                b"b%d" % index
            )
            assert cache.get_or_compile(("k", str(index)), _compiler(b"x")[0]) == b"b%d" % index
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "not writable" in messages[0]


def test_cache_disabled_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECUX_DISK_CACHE", "0")
    cache = KernelCache("test")
    compile_fn, calls = _compiler()
    cache.get_or_compile(("a",), compile_fn)
    cache.get_or_compile(("a",), compile_fn)
    assert len(calls) == 1 and cache.hits == 1
    assert not (tmp_path / "cache").exists()
    assert KernelCache("test").get_or_compile(("a",), compile_fn) and len(calls) == 2


def test_cache_two_threads_compile_once():
    cache = KernelCache("test")
    compile_fn, calls = _compiler(b"slow", delay=0.2)
    start = threading.Barrier(8)
    results = []

    def worker():
        start.wait()
        results.append(cache.get_or_compile(("same key",), compile_fn))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [b"slow"] * 8
    assert len(calls) == 1 and cache.compiles == 1 and cache.hits + cache.misses == 8


def test_cache_compile_error_caches_nothing():
    cache = KernelCache("test")

    def failing():
        raise RuntimeError("bad source")

    with pytest.raises(RuntimeError, match="bad source"):
        cache.get_or_compile(("k",), failing)
    assert cache.get_or_compile(("k",), _compiler(b"ok")[0]) == b"ok"


def test_cache_clear_removes_memory_and_disk_entries_only(tmp_path):
    cache = KernelCache("test")
    compile_fn, calls = _compiler()
    cache.get_or_compile(("a",), compile_fn)
    cache.get_or_compile(("b",), compile_fn)
    other = tmp_path / "cache" / "test" / "notes.txt"
    other.write_text("someone else's file")
    cache.clear()
    assert _entries(tmp_path / "cache") == [str(other)]
    cache.get_or_compile(("a",), compile_fn)
    assert len(calls) == 3
    # clear_all: live caches' memory, and entries of every dialect on disk, used or not.
    KernelCache("other-dialect").get_or_compile(("c",), compile_fn)
    cache_module.clear_all()
    assert _entries(tmp_path / "cache") == [str(other)]
    cache.get_or_compile(("a",), compile_fn)
    assert len(calls) == 5


def test_cache_clear_leaves_a_shared_folders_empty_folders(tmp_path):
    """SPECUX_CACHE_DIR may point at a shared folder: clearing removes the entries and the
    shard / dialect folders they were in, not the user's empty folders (any name, even
    two-letter or hex ones), which clear_all once took for dialects and shards."""
    cache = KernelCache("test")
    cache.get_or_compile(("a",), _compiler()[0])
    root = tmp_path / "cache"
    mine = [root / "emptydir", root / "proj" / "ab", root / "proj" / "src", root / "test" / "cd",
            root / "ef"]  # fmt: skip
    for folder in mine:
        folder.mkdir(parents=True, exist_ok=True)
    (root / "proj" / "src" / "a.py").write_text("kept")
    cache_module.clear_all()
    assert all(folder.is_dir() for folder in mine)
    assert _entries(root) == [str(root / "proj" / "src" / "a.py")]
    assert not any(p.suffix == ".bin" for p in root.rglob("*"))


def test_clearing_an_unreadable_cache_folder_warns_and_clears_the_rest(tmp_path, monkeypatch):
    """specux.clear_cache() with a cache folder it cannot list (another user's, chmod 700)
    warns and leaves it; it raised PermissionError before, and before it had cleared the
    host caches."""
    import specux
    from specux.meta import windows

    cache = KernelCache("test")
    compile_fn, calls = _compiler()
    cache.get_or_compile(("a",), compile_fn)
    specux.get_window("hann", 64)
    assert windows._named_window.cache_info().currsize > 0
    monkeypatch.setattr(cache_module, "_warned", False)

    def unreadable(folder):
        raise PermissionError(13, "Permission denied", folder)

    with monkeypatch.context() as patched:  # (undo() would drop SPECUX_CACHE_DIR as well)
        patched.setattr(cache_module.os, "listdir", unreadable)
        with pytest.warns(RuntimeWarning, match="could not read the cache folder .*Permission"):
            specux.clear_cache()
    assert windows._named_window.cache_info().currsize == 0
    assert len(_entries(tmp_path / "cache")) == 1  # left as it was
    cache.get_or_compile(("a",), compile_fn)  # memory cleared: read back from disk
    assert len(calls) == 1


def test_cache_with_nvrtc_round_trips_a_cubin(nvrtc_ready):
    from specux.kernels.cuda.compiler import compile_cubin

    parts = ("nvrtc", "sm_90", SAXPY)
    first = KernelCache("cuda-test")
    cubin = first.get_or_compile(parts, lambda: compile_cubin(SAXPY, name="saxpy", arch="sm_90"))
    again = KernelCache("cuda-test").get_or_compile(parts, lambda: b"not compiled")
    assert again == cubin and cubin[:4] == b"\x7fELF"


# ---------------------------------------------------------------- GPU ------------------------


@pytest.fixture
def gpu():
    """(torch, device index) when a CUDA GPU and cuda-bindings are present, else skip."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    pytest.importorskip("cuda.bindings.driver")
    from specux.compat import cuda

    reason = cuda.unavailable_reason()
    assert reason is None, f"torch sees a GPU but specux cannot use it: {reason}"
    return torch, torch.cuda.current_device()


_SAXPY_CASES = {
    "float32": ("saxpy_f32", ctypes.c_float,
                dict(rtol=TOLERANCES["saxpy32"], atol=TOLERANCES["saxpy32"])),
    "float64": ("saxpy_f64", ctypes.c_double,
                dict(rtol=TOLERANCES["saxpy64"], atol=TOLERANCES["saxpy64"])),
    # Computed in float32, rounded once to half: within one half ulp of torch's result.
    "float16": ("saxpy_f16", ctypes.c_float,
                dict(rtol=TOLERANCES["saxpy16"], atol=TOLERANCES["saxpy16"])),
}


def _saxpy_args(n, a, x, y, scalar_type):
    return [
        (n, ctypes.c_longlong),
        (a, scalar_type),
        (x.data_ptr(), ctypes.c_void_p),
        (y.data_ptr(), ctypes.c_void_p),
    ]


@pytest.mark.cuda
@pytest.mark.parametrize("dtype_name", list(_SAXPY_CASES))
def test_saxpy_on_torch_current_stream(gpu, dtype_name):
    from specux.kernels.cuda.runtime import get_kernel

    torch, device = gpu
    name, scalar_type, tolerance = _SAXPY_CASES[dtype_name]
    dtype = getattr(torch, dtype_name)
    n, a = 10_007, 0.75  # not a multiple of the block: the bounds check matters
    generator = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(n, device="cuda", dtype=dtype, generator=generator)
    y = torch.randn(n, device="cuda", dtype=dtype, generator=generator)
    expected = (a * x.double() + y.double()).to(dtype)
    kernel = get_kernel(SAXPY, name, device)
    assert get_kernel(SAXPY, name, device) is kernel
    stream = torch.cuda.current_stream(device).cuda_stream
    kernel.launch(((n + 255) // 256,), (256,), 0, stream, _saxpy_args(n, a, x, y, scalar_type))
    torch.testing.assert_close(y, expected, **tolerance)
    assert torch.cuda.current_device() == device  # torch's view of the device is untouched


@pytest.mark.cuda
def test_saxpy_with_cuda_fp16_header(gpu):
    from specux.errors import BackendUnavailableError
    from specux.kernels.cuda.compiler import cuda_include_options
    from specux.kernels.cuda.runtime import get_kernel

    torch, device = gpu
    try:
        include = cuda_include_options()
    except BackendUnavailableError as exc:
        pytest.skip(str(exc))
    n, a = 4099, -1.25
    x = torch.randn(n, device="cuda", dtype=torch.float16)
    y = torch.randn(n, device="cuda", dtype=torch.float16)
    expected = (a * x.float() + y.float()).half()
    kernel = get_kernel(SAXPY_CUDA_FP16, "saxpy_half", device, options=include)
    stream = torch.cuda.current_stream(device).cuda_stream
    kernel.launch(((n + 127) // 128,), (128,), 0, stream, _saxpy_args(n, a, x, y, ctypes.c_float))
    torch.testing.assert_close(y, expected, rtol=TOLERANCES["saxpy16"], atol=TOLERANCES["saxpy16"])


@pytest.mark.cuda
def test_launch_on_a_non_default_stream(gpu):
    from specux.kernels.cuda.runtime import get_kernel

    torch, device = gpu
    n, a = 1 << 20, 2.0
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    y = torch.ones(n, device="cuda", dtype=torch.float32)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))  # x and y were written on the default
    kernel = get_kernel(SAXPY, "saxpy_f32", device)
    args = _saxpy_args(n, a, x, y, ctypes.c_float)
    for _ in range(3):  # y = 2x + (2x + (2x + 1))
        kernel.launch((n // 256,), (256,), 0, side.cuda_stream, args)
    side.synchronize()
    torch.testing.assert_close(y, 6 * x + 1)


@pytest.mark.cuda
def test_launch_from_a_thread_without_a_current_context(gpu):
    from specux.kernels.cuda.runtime import get_kernel

    torch, device = gpu
    n = 1000
    x = torch.ones(n, device="cuda")
    y = torch.zeros(n, device="cuda")
    torch.cuda.synchronize()
    kernel = get_kernel(SAXPY, "saxpy_f32", device)
    errors = []

    def worker():
        try:  # a fresh thread has no current context: launch pushes the primary one
            kernel.launch((4,), (256,), 0, 0, _saxpy_args(n, 3.0, x, y, ctypes.c_float))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert not errors, errors
    torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.full_like(y, 3.0))


@pytest.mark.cuda
def test_dynamic_shared_memory_above_48k(gpu):
    from specux.kernels.cuda.runtime import get_kernel, max_dynamic_shared_bytes

    torch, device = gpu
    nbytes = 96 * 1024
    if max_dynamic_shared_bytes(device) < nbytes:
        pytest.skip("this GPU has less than 96 KiB of shared memory per block")
    floats = nbytes // 4
    blocks = 3
    x = torch.randn(blocks * floats, device="cuda")
    y = torch.empty_like(x)
    stream = torch.cuda.current_stream(device).cuda_stream
    args = [
        (x.data_ptr(), ctypes.c_void_p),
        (y.data_ptr(), ctypes.c_void_p),
        (floats, ctypes.c_int),
    ]
    # A separately compiled copy (another option, so another module): launching it above 48 KiB
    # without the opt-in is refused.
    plain = get_kernel(SHARED_REVERSE, "shared_reverse", device, options=("-DUNUSED_FLAG=1",))
    with pytest.raises(RuntimeError, match="cuLaunchKernel"):
        plain.launch((blocks,), (256,), nbytes, stream, args)
    kernel = get_kernel(SHARED_REVERSE, "shared_reverse", device)
    kernel.set_max_dynamic_shared(nbytes)
    kernel.launch((blocks,), (256,), nbytes, stream, args)
    expected = x.view(blocks, floats).flip(1).reshape(-1)
    torch.testing.assert_close(y, expected, rtol=0, atol=0)


def test_primary_context_and_modules_are_made_once_per_device(monkeypatch):
    """Concurrent first calls retain a device's primary context and load a module once (the
    double-checked `once` the runtime and the torch-free device share), with a fake driver."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from specux.kernels.cuda import runtime

    retained = []
    gate = threading.Barrier(8)

    class Driver:
        def cuDevicePrimaryCtxRetain(self, device):  # noqa: N802 - the driver API's name
            retained.append(device)
            return (0, 1000 + device)

    monkeypatch.setattr(runtime._cuda, "driver", lambda: Driver())
    monkeypatch.setattr(runtime, "_device", lambda index: index)
    monkeypatch.setattr(runtime, "_contexts", {})
    monkeypatch.setattr(runtime, "_modules", {})
    loaded = []
    monkeypatch.setattr(runtime, "Module", lambda image, index: loaded.append(index) or object())

    def first_use(index):
        gate.wait()
        return runtime._primary_context(index), runtime.load_module(b"", index, "key")

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(first_use, [0, 1] * 4))
    assert sorted(retained) == [0, 1] and sorted(loaded) == [0, 1]
    assert {ctx for ctx, _ in results} == {1000, 1001}
    assert len({id(module) for _, module in results}) == 2


def test_the_native_device_loads_autotuned_winners_when_made(monkeypatch):
    """The torch-free device (numpy / cupy routes) looks up the autotuned winners of its GPU
    model when a call first meets it (runtime.load_winners, cached a device), as the torch
    backend does, when it is made (fake driver): the context no longer does (runtime._open),
    so this is the route's only lookup."""
    from specux.kernels.cuda import device as cuda_device
    from specux.kernels.cuda import runtime

    winners = []
    monkeypatch.setattr(cuda_device, "_constants", {})
    monkeypatch.setattr(runtime, "compute_capability", lambda index: (9, 0))
    monkeypatch.setattr(runtime, "load_winners", lambda index: winners.append(index))
    monkeypatch.setattr(cuda_device._cuda, "driver", lambda: object())
    cuda_device.CudaDevice(3, 0, "cupy")
    assert winners == [3]


def test_istft_window_envelope_is_kept_per_tensor_version_and_shape(monkeypatch):
    """istft with a window tensor on CUDA reads the window on the host (NOLA check, the
    envelope's reciprocals) once per tensor version and call shape, here for CPU tensors:
    kept, rebuilt after an in-place change, at most _ENVELOPES.limit shapes a window, dropped
    with the window, never kept for a window that needs a gradient; during CUDA graph capture
    a kept one is used and a missing one is a clear error."""
    torch = pytest.importorskip("torch")
    from specux.kernels.cpu import stft as cpu_stft
    from specux.kernels.cuda import transforms
    from specux.ops.stft import params_of

    capturing = [False]
    monkeypatch.setattr(transforms, "capturing", lambda t: capturing[0])
    p = params_of(16, 4, 16, "hann", True, "constant", False, True)
    w = torch.hann_window(16, dtype=torch.float64) + 0.5
    env, start, stop, out_length = transforms._window_envelope(None, w, p, 9, -1, "float64")
    want = 1.0 / cpu_stft.envelope(p, w.numpy(), 9)  # the kernels multiply by reciprocals
    assert (start, stop, out_length) == (8, 40, 32)
    assert np.array_equal(env.numpy(), want[start:stop])
    assert transforms._window_envelope(None, w, p, 9, -1, "float64")[0] is env  # kept
    capturing[0] = True
    assert transforms._window_envelope(None, w, p, 9, -1, "float64")[0] is env
    with pytest.raises(RuntimeError, match="before the capture"):
        transforms._window_envelope(None, w, p, 10, -1, "float64")  # a shape not seen
    capturing[0] = False
    w.mul_(2.0)  # a new version: rebuilt
    env2 = transforms._window_envelope(None, w, p, 9, -1, "float64")[0]
    assert np.allclose(env2.numpy(), env.numpy() / 4.0, rtol=TOLERANCES["envelope_rescale64"],
                       atol=0)  # fmt: skip
    for count in range(10, 10 + transforms._ENVELOPES.limit):
        transforms._window_envelope(None, w, p, count, -1, "float64")
    kept = transforms._ENVELOPES.keys_of(w)
    assert len(kept) == transforms._ENVELOPES.limit
    assert (p, 9, -1, "float64") not in kept  # the oldest, dropped
    learned = w.detach().clone().requires_grad_()  # written through .data: never kept
    first = transforms._window_envelope(None, learned, p, 9, -1, "float64")[0]
    assert transforms._window_envelope(None, learned, p, 9, -1, "float64")[0] is not first
    assert learned not in transforms._ENVELOPES
    capturing[0] = True
    with pytest.raises(RuntimeError, match="needs no gradient"):
        transforms._window_envelope(None, learned, p, 9, -1, "float64")
    capturing[0] = False
    del w
    gc.collect()
    assert not any(k.shape == (16,) for k in transforms._ENVELOPES.tensors())


def test_sparse_bank_tables_are_cached_per_tensor_and_version(monkeypatch):
    """The CUDA kernels' sparse tables of a user bank tensor (specux.nn's fb buffers), here
    built for CPU tensors: cached by identity, version and data pointer; none for a tensor
    that needs a gradient or a view; during CUDA graph capture the kept ones only (building
    reads the tensor on the host)."""
    torch = pytest.importorskip("torch")
    from specux.kernels.cuda import transforms

    capturing = [False]
    monkeypatch.setattr(transforms, "capturing", lambda t: capturing[0])
    bank = torch.zeros(3, 10)
    bank[0, 1:3], bank[1, 4:8], bank[2, 9] = 1.0, 2.0, 3.0
    bank[1, 5] = 0.0  # an interior zero stays inside the row's extent
    bands, weights = transforms._sparse_tables(bank, "float32")
    assert bands.tolist() == [[1, 2], [4, 4], [9, 1]]
    # bin-major: band m's k-th weight at k * bands + m, rows padded to the widest (4)
    assert weights.reshape(4, 3).T.tolist() == [[1, 1, 0, 0], [2, 0, 2, 2], [3, 0, 0, 0]]
    assert transforms._sparse_tables(bank, "float32")[0] is bands  # cached
    bank.mul_(2.0)  # a new version: rebuilt
    assert transforms._sparse_tables(bank, "float32")[1].max().item() == 6.0
    assert transforms._sparse_tables(bank.t().t(), "float32") is None  # a view
    assert transforms._sparse_tables(bank.clone().requires_grad_(), "float32") is None
    capturing[0] = True
    assert transforms._sparse_tables(bank.clone(), "float32") is None  # not built in a capture
    kept = transforms._sparse_tables(bank, "float32")  # built before it: used
    assert kept is not None and kept[1].max().item() == 6.0
    capturing[0] = False
    assert bank in transforms._SPARSE
    del bank  # the entry goes with its tensor
    gc.collect()
    assert len([k for k in transforms._SPARSE.tensors() if k.shape == (3, 10)]) == 0


def test_upload_copies_off_the_calling_thread(monkeypatch):
    """compat.torch_compat.upload makes the device copy on specux's upload thread, inside a
    side stream: CUDA graph trees route every allocation of the thread warming a graph up to
    the graph's pool, and a cache allocated there breaks torch.compile(mode="reduce-overhead").
    The caller's stream then waits for the side stream and the copy is marked as used by it.
    Checked against a stand-in torch.cuda (the H200 runs the real thing in
    tests/test_cuda_graphs.py)."""
    from specux.compat import torch_compat

    events = []

    class Stream:
        def __init__(self, device=None):
            self.device = device

        def wait_stream(self, other):
            events.append(("wait", self, other))

    current, active = Stream(0), []

    class StreamContext:
        def __init__(self, stream):
            self.stream = stream

        def __enter__(self):
            active.append(self.stream)

        def __exit__(self, *exc):
            active.pop()

    class Copy:
        def record_stream(self, stream):
            events.append(("record", stream))

    class Host:
        def to(self, device):
            events.append(("copy", threading.get_ident(), active[-1] if active else None,
                           str(device)))  # fmt: skip
            return Copy()

    class Device:
        def __init__(self, spec, index=None):
            self.type, _, number = str(spec).partition(":")
            self.index = int(number) if number else index

        def __str__(self):
            return f"{self.type}:{self.index}"

    cuda = SimpleNamespace(Stream=Stream, stream=StreamContext, current_device=lambda: 0,
                           current_stream=lambda index: current)  # fmt: skip
    monkeypatch.setattr(torch_compat, "torch_module", lambda: SimpleNamespace(device=Device,
                                                                              cuda=cuda))
    monkeypatch.setattr(torch_compat, "_UPLOAD_STREAMS", {})
    out = torch_compat.upload(Host(), "cuda")
    assert isinstance(out, Copy)
    (copy, wait, record) = events
    side = torch_compat._UPLOAD_STREAMS[0]
    assert copy[0] == "copy" and copy[1] != threading.get_ident()  # another thread
    assert copy[2] is side and copy[3] == "cuda:0"  # inside the side stream
    assert wait == ("wait", current, side) and record == ("record", current)


def test_a_device_that_cannot_be_named_still_opens(monkeypatch):
    """The autotuned winners are looked up by the GPU's model when a backend or a context
    first meets the device; a driver that cannot name it warns, and nothing else fails."""
    from specux.kernels.cuda import runtime

    def unnamed(index):
        raise AttributeError("'Driver' object has no attribute 'cuDeviceGetName'")

    activated = []
    monkeypatch.setattr(runtime, "gpu_model", unnamed)
    monkeypatch.setattr(runtime.tuning, "activate", activated.append)
    with pytest.warns(RuntimeWarning, match="cannot name CUDA device 3"):
        runtime.load_winners.__wrapped__(3)
    assert activated == []
    monkeypatch.setattr(runtime, "gpu_model", lambda index: "Model")
    runtime.load_winners.__wrapped__(3)
    assert activated == ["Model"]
