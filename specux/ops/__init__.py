"""torch.library custom ops: ``torch.ops.specux.*``.

Each op is declared in one place with its schema, fake (meta) kernel, per-device kernels and
analytic backward; the backward is itself built from specux ops, so double backward works and
``torch.compile`` traces forward and backward with no graph break. Importing this package
imports torch; ``specux`` imports it only when torch is installed.
"""

from specux.ops import conv, cqt, features, fft, frames, stft  # noqa: F401 - registration side effects
from specux.ops._declare import OPS

__all__ = ["OPS"]
