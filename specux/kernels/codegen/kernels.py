"""Every FFT kernel family behind one interface, for the runtimes (CUDA, host emulation) and
the compile-only tests: which source a launch spec needs, and that source."""

from __future__ import annotations

from specux.kernels.codegen.block import BLOCK_NAME, BLOCK_PARAMS, block_source_key, render_block
from specux.kernels.codegen.dialects import Dialect
from specux.kernels.codegen.fft import KERNEL_NAME, PARAMS, render_pass
from specux.kernels.codegen.fft import source_key as pass_source_key
from specux.kernels.plan import BlockSpec, PassSpec


def source_key(spec: PassSpec | BlockSpec) -> PassSpec | BlockSpec:
    """The spec without its launch-time values: equal keys render identical source."""
    return block_source_key(spec) if isinstance(spec, BlockSpec) else pass_source_key(spec)


def render(spec: PassSpec | BlockSpec, dialect: Dialect) -> tuple[str, str, tuple]:
    """(source, entry point name, parameters) of the kernel that runs ``spec``."""
    if isinstance(spec, BlockSpec):
        return render_block(spec, dialect), BLOCK_NAME, BLOCK_PARAMS
    return render_pass(spec, dialect), KERNEL_NAME, PARAMS


__all__ = ["render", "source_key"]
