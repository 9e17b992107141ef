"""Launch any generated kernel by its spec on a raw stream (no torch): the spec is rendered in
the CUDA dialect, compiled once (memory + disk cache) and looked up per device."""

from __future__ import annotations

import functools

from specux.kernels.codegen.dialects import CUDA
from specux.kernels.codegen.fft import arg_types
from specux.kernels.codegen.kernels import PARAMS_OF, Spec, render, source_key
from specux.kernels.cuda.runtime import Kernel, get_kernel
from specux.kernels.plan import BlockSpec

_DEFAULT_SHARED = 48 * 1024  # above this a kernel must opt in to more dynamic shared memory


@functools.cache
def _arg_types(family: type) -> tuple:
    return arg_types(PARAMS_OF[family])


@functools.lru_cache(maxsize=1024)
def _kernel_for_key(key: Spec, device_index: int) -> Kernel:
    source, name, _ = render(key, CUDA)
    kernel = get_kernel(source, name, device_index)
    if isinstance(key, BlockSpec) and key.shared_bytes > _DEFAULT_SHARED:
        kernel.set_max_dynamic_shared(key.shared_bytes)  # the opt-in, once per kernel
    return kernel


@functools.lru_cache(maxsize=4096)
def kernel(spec: Spec, device_index: int) -> Kernel:
    """The compiled kernel of ``spec`` on a device (keyed by the full spec too, so a repeated
    launch does not rebuild its source key)."""
    return _kernel_for_key(source_key(spec), device_index)


# (id(spec), device) -> (spec, kernel, parameter types): the planned programs launch the
# same spec objects call after call, and hashing a spec (nested frozen dataclasses) for the
# kernel cache costs ~2.5 us a launch on the development VM. The entry holds the spec, so its
# id cannot be reused while the entry exists; the identity check makes a stale id impossible
# to match.
_RESOLVED: dict[tuple[int, int], tuple[Spec, Kernel, tuple]] = {}
_RESOLVED_MAX = 4096


def launch(spec: Spec, device_index: int, stream: int, grid: int, block: int, shared: int,
           args: tuple) -> None:  # fmt: skip
    """Launch ``spec``'s kernel with its family's parameters ``args`` (values in order)."""
    entry = _RESOLVED.get((id(spec), device_index))
    if entry is None or entry[0] is not spec:
        entry = (spec, kernel(spec, device_index), _arg_types(type(spec)))
        if len(_RESOLVED) >= _RESOLVED_MAX:
            _RESOLVED.clear()
        _RESOLVED[(id(spec), device_index)] = entry
    entry[1].launch_values(grid, block, shared, stream, args, entry[2])


__all__ = ["kernel", "launch"]
