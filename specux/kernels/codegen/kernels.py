"""Every kernel family behind one interface, for the runtimes (CUDA, host emulation) and the
compile-only tests: which source a launch spec needs, and that source."""

from __future__ import annotations

from specux.kernels.codegen.block import BLOCK_NAME, BLOCK_PARAMS, block_source_key, render_block
from specux.kernels.codegen.dialects import Dialect
from specux.kernels.codegen.fft import KERNEL_NAME, PARAMS, render_pass
from specux.kernels.codegen.fft import source_key as pass_source_key
from specux.kernels.codegen.gather import GATHER_NAME, GATHER_PARAMS, GatherSpec, render_gather
from specux.kernels.plan import BlockSpec, PassSpec

Spec = PassSpec | BlockSpec | GatherSpec


def source_key(spec: Spec) -> Spec:
    """The spec without its launch-time values: equal keys render identical source."""
    if isinstance(spec, BlockSpec):
        return block_source_key(spec)
    if isinstance(spec, GatherSpec):
        return spec
    return pass_source_key(spec)


def render(spec: Spec, dialect: Dialect) -> tuple[str, str, tuple]:
    """(source, entry point name, parameters) of the kernel that runs ``spec``."""
    if isinstance(spec, BlockSpec):
        return render_block(spec, dialect), BLOCK_NAME, BLOCK_PARAMS
    if isinstance(spec, GatherSpec):
        return render_gather(spec, dialect), GATHER_NAME, GATHER_PARAMS
    return render_pass(spec, dialect), KERNEL_NAME, PARAMS


def is_block(spec: Spec) -> bool:
    """Whether ``spec``'s threads cooperate in a block (shared memory, barriers): the block
    FFTs and the block gather kinds. The host emulation runs those one host thread a lane."""
    return isinstance(spec, BlockSpec) or (isinstance(spec, GatherSpec) and spec.block)


# The kernel parameters (type, name) of each family, by spec type.
PARAMS_OF = {BlockSpec: BLOCK_PARAMS, GatherSpec: GATHER_PARAMS, PassSpec: PARAMS}


__all__ = ["PARAMS_OF", "Spec", "is_block", "render", "source_key"]
