"""Load CUBINs and launch kernels through the CUDA driver API (cuda-python).

specux runs in the device's *primary* context, the one the CUDA runtime (and so torch and CuPy)
uses: pointers from ``tensor.data_ptr()`` and streams from
``torch.cuda.current_stream(device).cuda_stream`` are valid in it, no copy or sync needed.

    kernel = get_kernel(source, "scale_f32", device_index=0)
    stream = torch.cuda.current_stream(0).cuda_stream
    kernel.launch((blocks,), (256,), 0, stream, [(n, c_int), (x.data_ptr(), c_void_p)])
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from specux.compat import cuda as _cuda
from specux.errors import BackendUnavailableError
from specux.kernels import tuning
from specux.kernels.cache import KernelCache
from specux.kernels.cuda.compiler import compile_cubin, default_options

# The process-wide cache of CUBINs (memory + disk), keyed by NVRTC version, options, arch, source.
CUBIN_CACHE = KernelCache("cuda")

# Reentrant: load_module holds it while Module() retains the primary context under it too.
_lock = threading.RLock()
_contexts: dict[int, Any] = {}  # device index -> retained primary CUcontext
_modules: dict[tuple[str, int], Module] = {}  # (cache key, device index) -> loaded module
_kernels: dict[tuple[str, str, int, tuple[str, ...]], Kernel] = {}  # get_kernel's memo


def _device(device_index: int) -> Any:
    _cuda.init_driver()
    return _cuda.check(_cuda.driver().cuDeviceGet(int(device_index)), "cuDeviceGet")


def device_attribute(device_index: int, name: str) -> int:
    """A ``CU_DEVICE_ATTRIBUTE_<NAME>`` of a device, e.g. ``"multiprocessor_count"``."""
    driver = _cuda.driver()
    attribute = getattr(driver.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name.upper()}")
    return int(
        _cuda.check(
            driver.cuDeviceGetAttribute(attribute, _device(device_index)), "cuDeviceGetAttribute"
        )
    )


@functools.cache
def compute_capability(device_index: int) -> tuple[int, int]:
    """(major, minor) compute capability, e.g. (9, 0) for an H100/H200."""
    return (
        device_attribute(device_index, "compute_capability_major"),
        device_attribute(device_index, "compute_capability_minor"),
    )


def device_arch(device_index: int) -> str:
    """The device's architecture as an NVRTC CUBIN target: ``"sm_90"`` for an H200."""
    major, minor = compute_capability(device_index)
    return f"sm_{major}{minor}"


@functools.cache
def compile_arch(device_index: int) -> str:
    """The CUBIN target to compile for a device: its own ``sm_XY`` when NVRTC supports it, else
    the newest supported ``sm_XZ`` with Z <= Y (a CUBIN runs on later minor revisions of its
    major architecture, never across majors)."""
    major, minor = compute_capability(device_index)
    try:
        supported = _cuda.check(_cuda.nvrtc().nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs")
    except Exception:  # noqa: BLE001 - very old NVRTC: try the device's own arch
        return device_arch(device_index)
    own = major * 10 + minor
    usable = [int(a) for a in supported if int(a) // 10 == major and int(a) <= own]
    if not usable:
        version = ".".join(map(str, _cuda.nvrtc_version()))
        raise BackendUnavailableError(
            f"NVRTC {version} cannot compile for this GPU (sm_{own}; it supports "
            f"{sorted(int(a) for a in supported)}): install a matching nvidia-cuda-nvrtc"
        )
    return f"sm_{max(usable)}"


def max_dynamic_shared_bytes(device_index: int) -> int:
    """Largest dynamic shared memory a block may opt in to (bytes; 232448 on an H200)."""
    return device_attribute(device_index, "max_shared_memory_per_block_optin")


def once(table: dict, key: Any, build: Callable[[], Any]) -> Any:
    """``table[key]``, built by ``build()`` the first time (under the module's reentrant
    lock, so concurrent first calls build it once; later calls take no lock)."""
    value = table.get(key)
    if value is None:
        with _lock:
            value = table.get(key)
            if value is None:
                value = table[key] = build()
    return value


def _primary_context(device_index: int) -> Any:
    # Retained once and never released: torch holds the same context for the process
    # lifetime, and a release could destroy it under torch's feet.
    return once(_contexts, device_index, lambda: _open(device_index))


def _open(device_index: int) -> Any:
    return _cuda.check(_cuda.driver().cuDevicePrimaryCtxRetain(_device(device_index)),
                       "cuDevicePrimaryCtxRetain")  # fmt: skip


@functools.cache
def load_winners(device_index: int) -> None:
    """Load the autotuned winners stored for this device's model (kernels.tuning), once: the
    backends call it when they first meet the device, before they plan anything."""
    try:
        model = gpu_model(device_index)
    except Exception as exc:  # noqa: BLE001 - the winners are an optimization: warn, go on
        import warnings

        warnings.warn(f"specux: cannot name CUDA device {device_index} ({exc}): its autotuned "
                      "kernels are not loaded", RuntimeWarning, stacklevel=2)  # fmt: skip
        return
    tuning.activate(model)


@functools.cache
def gpu_model(device_index: int) -> str:
    """The device's model as autotuning names it: name, architecture, SM count."""
    name = _cuda.check(_cuda.driver().cuDeviceGetName(256, _device(device_index)),
                       "cuDeviceGetName")  # fmt: skip
    name = bytes(name).split(b"\0", 1)[0].decode(errors="replace")
    return tuning.model_name(name, device_arch(device_index),
                             device_attribute(device_index, "multiprocessor_count"))


def context(device_index: int) -> Any:
    """Make the device's primary context current on this thread and return it (CUcontext).

    The primary context is the CUDA runtime's (torch's) context, so both share memory/streams.
    """
    ctx = _primary_context(device_index)
    _cuda.check(_cuda.driver().cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


@contextlib.contextmanager
def _current(ctx: Any, ctx_id: int) -> Iterator[None]:
    """Run the body with ``ctx`` current, restoring the caller's context after.

    Usually torch already made this context current and this costs one cuCtxGetCurrent;
    otherwise push/pop, so the runtime (torch) still sees its own current device afterwards.
    """
    driver = _cuda.driver()
    current = _cuda.check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if int(current) == ctx_id:
        yield
        return
    _cuda.check(driver.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
    try:
        yield
    finally:
        _cuda.check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")


class _ArgBuffer:
    """Kernel parameters for one argument signature, laid out once, refilled per launch.

    cuLaunchKernel reads ``void* params[n]``, each pointing at one argument's bytes. The slots
    (a ctypes Structure, so each argument gets its C alignment) and the pointer array are built
    once; a launch only writes the values and passes the array's address as an int, which every
    cuda-python version accepts as-is. (Passing ``((values), (ctypes types))`` makes cuda-python
    lay the block out again on every launch; slow in releases before 13.) Scalar and pointer
    arguments are written by one precompiled ``struct`` pack at the slots' offsets (the block
    kernels' 34 arguments: ~1 us on the development VM, ~5-8 us slot by slot); a value the
    pack refuses (None for a pointer, say) and struct-typed arguments take the slot-by-slot
    path, which converts or raises as ctypes does.
    """

    __slots__ = ("_structure", "_pointers", "_slots", "_packer", "address", "types")

    def __init__(self, types: tuple[type, ...]) -> None:
        for t in types:
            if not (isinstance(t, type) and issubclass(t, (ctypes._SimpleCData, ctypes.Structure))):
                raise TypeError(f"kernel argument types must be ctypes types, got {t!r}")
        self.types = types
        fields = [(f"a{i}", t) for i, t in enumerate(types)]
        layout = type("KernelArgs", (ctypes.Structure,), {"_fields_": fields})
        self._structure = layout()
        base = ctypes.addressof(self._structure)
        offsets = [getattr(layout, name).offset for name, _ in fields]
        self._pointers = (ctypes.c_void_p * max(1, len(types)))(*[base + o for o in offsets])
        self.address = ctypes.addressof(self._pointers) if types else 0
        # (ctypes view of the slot, its type, whether it is a struct copied by memmove)
        self._slots = [
            (t.from_address(base + o), t, issubclass(t, ctypes.Structure))
            for t, o in zip(types, offsets)
        ]
        self._packer = _packer(types, offsets)

    def fill_values(self, values: Sequence[Any]) -> None:
        """Write ``values`` (this buffer's signature, :attr:`types`, in order; a launch with
        other types builds another buffer). This runs on every launch."""
        if self._packer is not None:
            try:
                self._packer.pack_into(self._structure, 0, *values)
                return
            except struct.error:
                pass  # converted (or refused) slot by slot below
        if len(values) != len(self._slots):
            raise TypeError(f"{len(values)} kernel arguments for {len(self._slots)} parameters")
        for value, (slot, _, is_struct) in zip(values, self._slots):
            if is_struct:
                ctypes.memmove(ctypes.addressof(slot), ctypes.addressof(value), ctypes.sizeof(slot))
            else:
                slot.value = value


def _packer(types: Sequence[type], offsets: Sequence[int]) -> struct.Struct | None:
    """A native ``struct`` writing scalar / pointer ``types`` at ``offsets`` (pads explicit),
    or None when a type has no struct code (a Structure, a string pointer) or the layouts
    differ."""
    parts, position = ["@"], 0
    for t, offset in zip(types, offsets):
        code = getattr(t, "_type_", None)
        if issubclass(t, ctypes.Structure) or not isinstance(code, str) or code not in _CODES:
            return None
        if offset > position:
            parts.append(f"{offset - position}x")
        parts.append(code)
        position = offset + ctypes.sizeof(t)
    packer = struct.Struct("".join(parts))
    return packer if packer.size == position else None


_CODES = frozenset("bBhHiIlLqQfdP?")  # ctypes scalar codes that struct packs natively


def _dim3(dims: Sequence[int], what: str) -> tuple[int, int, int]:
    count = len(dims)
    if count == 1:
        return dims[0], 1, 1
    if count == 3:
        return dims[0], dims[1], dims[2]
    if count == 2:
        return dims[0], dims[1], 1
    raise ValueError(f"{what} must have 1 to 3 dimensions, got {dims!r}")


class Kernel:
    """One ``extern "C" __global__`` function of a loaded module, on one device."""

    def __init__(self, function: Any, name: str, device_index: int, module: Module) -> None:
        self.name = name
        self.device_index = device_index
        self.module = module  # keeps the module (and so the function) alive
        self._function = function
        self._ctx = module.context
        self._ctx_id = int(module.context)
        self._local = threading.local()  # per-thread argument buffers: launches may race
        self._launch_what = f"cuLaunchKernel({name})"
        self._driver = _cuda.driver()
        # Compared with ==: an int-like enum in cuda-bindings 13, an Enum member before.
        self._success = self._driver.CUresult.CUDA_SUCCESS

    def attribute(self, name: str) -> int:
        """A ``CU_FUNC_ATTRIBUTE_<NAME>``, e.g. ``"num_regs"``, ``"max_threads_per_block"``."""
        driver = _cuda.driver()
        attribute = getattr(driver.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name.upper()}")
        return int(
            _cuda.check(driver.cuFuncGetAttribute(attribute, self._function), "cuFuncGetAttribute")
        )

    def set_max_dynamic_shared(self, nbytes: int) -> None:
        """Allow launches with up to ``nbytes`` of dynamic shared memory per block.

        Needed above 48 KiB (the default limit); the device maximum is
        :func:`max_dynamic_shared_bytes` minus the kernel's static shared memory.
        """
        driver = _cuda.driver()
        attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        with _current(self._ctx, self._ctx_id):
            _cuda.check(
                driver.cuFuncSetAttribute(self._function, attribute, int(nbytes)),
                f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={nbytes}) for {self.name}",
            )

    def launch(
        self,
        grid: Sequence[int],
        block: Sequence[int],
        shared_bytes: int,
        stream: int,
        args: Sequence[tuple[Any, type]],
    ) -> None:
        """Launch asynchronously on ``stream`` (a raw CUstream handle; 0 = legacy default).

        ``grid``/``block``: 1 to 3 sizes (blocks per grid, threads per block). ``shared_bytes``:
        dynamic shared memory per block. ``args``: ``(value, ctypes type)`` per kernel parameter
        in order, e.g. ``(tensor.data_ptr(), ctypes.c_void_p)`` for a pointer,
        ``(n, ctypes.c_int)``, ``(0.5, ctypes.c_float)``, ``(bits, ctypes.c_uint16)`` for a half.
        An empty grid launches nothing.
        """
        gx, gy, gz = _dim3(grid, "grid")
        bx, by, bz = _dim3(block, "block")
        values = [value for value, _ in args]
        self._launch(gx, gy, gz, bx, by, bz, shared_bytes, stream, values,
                     tuple(ctype for _, ctype in args))  # fmt: skip

    def launch_values(self, blocks: int, threads: int, shared_bytes: int, stream: int,
                      values: Sequence[Any], types: tuple[type, ...]) -> None:  # fmt: skip
        """:meth:`launch` over a 1-D grid with the arguments as ``values`` and their ctypes
        ``types`` (the same tuple object on every launch of a kernel makes the check free):
        the generated kernels' path, no pairs built per launch."""
        self._launch(blocks, 1, 1, threads, 1, 1, shared_bytes, stream, values, types)

    def _launch(self, gx, gy, gz, bx, by, bz, shared_bytes, stream, values, types) -> None:
        if gx == 0 or gy == 0 or gz == 0:  # empty input: nothing to do, and a 0 grid is an error
            return
        # A C function has one signature, so each thread keeps one buffer per kernel; it is
        # rebuilt only when the argument types change.
        local = self._local
        buffer = getattr(local, "buffer", None)
        if buffer is None or (buffer.types is not types and buffer.types != types):
            buffer = local.buffer = _ArgBuffer(types)
        buffer.fill_values(values)
        driver = self._driver
        # Inline rather than `with _current(...)`: a generator context manager costs ~1 us,
        # a noticeable share of a launch.
        err, current = driver.cuCtxGetCurrent()
        if err != self._success:
            _cuda.check((err,), "cuCtxGetCurrent")
        pushed = int(current) != self._ctx_id
        if pushed:
            _cuda.check(driver.cuCtxPushCurrent(self._ctx), "cuCtxPushCurrent")
        try:
            result = driver.cuLaunchKernel(
                self._function, gx, gy, gz, bx, by, bz, shared_bytes, stream, buffer.address, 0
            )
        finally:
            if pushed:
                _cuda.check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
        if result[0] != self._success:
            _cuda.check(result, self._launch_what)

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, device={self.device_index})"


class Module:
    """A CUBIN loaded into one device's primary context (cuModuleLoadData)."""

    def __init__(self, image: bytes, device_index: int) -> None:
        self.device_index = device_index
        self.context = _primary_context(device_index)
        self._functions: dict[str, Kernel] = {}
        driver = _cuda.driver()
        with _current(self.context, int(self.context)):
            self.handle = _cuda.check(driver.cuModuleLoadData(image), "cuModuleLoadData")

    def function(self, name: str) -> Kernel:
        """The kernel called ``name`` (must be ``extern "C"``, so the name is not mangled)."""
        kernel = self._functions.get(name)
        if kernel is None:
            driver = _cuda.driver()
            result = driver.cuModuleGetFunction(self.handle, name.encode())
            try:
                function = _cuda.check(result, f"cuModuleGetFunction({name!r})")
            except RuntimeError as exc:
                raise RuntimeError(
                    f'{exc} (kernels must be declared extern "C" __global__)'
                ) from exc
            kernel = self._functions[name] = Kernel(function, name, self.device_index, self)
        return kernel


def load_module(image: bytes, device_index: int, key: str) -> Module:
    """The module for CUBIN ``image`` on a device, loaded once per (``key``, device)."""
    return once(_modules, (key, device_index), lambda: Module(image, device_index))


def get_kernel(source: str, name: str, device_index: int, options: tuple[str, ...] = ()) -> Kernel:
    """Compile (or fetch from the cache), load and look up kernel ``name`` of ``source``.

    The CUBIN targets the device's architecture (:func:`compile_arch`); the cache key holds
    the NVRTC version, all options, the arch and the full source. Repeated calls with the same
    arguments return the same Kernel object (cheap: a dict lookup). Compile errors raise
    :class:`specux.kernels.cuda.compiler.CompileError`.
    """
    memo = (source, name, int(device_index), tuple(options))
    kernel = _kernels.get(memo)
    if kernel is not None:
        return kernel
    arch = compile_arch(int(device_index))
    opts = tuple(options)
    major, minor = _cuda.nvrtc_version()
    key_parts = (f"nvrtc {major}.{minor}", "\0".join(default_options(arch) + opts), arch, source)
    cubin = CUBIN_CACHE.get_or_compile(
        key_parts, lambda: compile_cubin(source, name=name, arch=arch, options=opts)
    )
    module = load_module(cubin, int(device_index), CUBIN_CACHE.key(key_parts))
    kernel = _kernels[memo] = module.function(name)
    return kernel


__all__ = [
    "CUBIN_CACHE",
    "Kernel",
    "Module",
    "compile_arch",
    "compute_capability",
    "context",
    "device_arch",
    "device_attribute",
    "get_kernel",
    "load_module",
    "max_dynamic_shared_bytes",
]
