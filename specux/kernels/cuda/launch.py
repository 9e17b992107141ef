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


def launch(spec: Spec, device_index: int, stream: int, grid: int, block: int, shared: int,
           args: tuple) -> None:  # fmt: skip
    """Launch ``spec``'s kernel with its family's parameters ``args`` (values in order)."""
    types = _arg_types(type(spec))
    kernel(spec, device_index).launch((grid,), (block,), shared, stream, tuple(zip(args, types)))


__all__ = ["kernel", "launch"]
