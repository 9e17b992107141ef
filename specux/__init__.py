"""specux: differentiable spectral transforms for numpy, torch and cupy arrays.

``import specux`` needs numpy only. When torch is installed it is imported too and the
``torch.ops.specux.*`` custom ops are registered (fake kernels, CPU kernels, analytic backward).
"""

from specux._version import __version__
from specux.api import (
    ParameterError,
    fft,
    fft2,
    fftn,
    hfft,
    ifft,
    ifft2,
    ifftn,
    ihfft,
    irfft,
    irfft2,
    irfftn,
    istft,
    rfft,
    rfft2,
    rfftn,
    stft,
)
from specux.compat.torch_compat import torch_module as _torch_module
from specux.errors import BackendUnavailableError
from specux.meta.windows import get_window
from specux.options import deterministic, is_deterministic

if _torch_module() is not None:
    import specux.ops  # noqa: F401 - registers torch.ops.specux.*

__all__ = [
    "BackendUnavailableError",
    "ParameterError",
    "__version__",
    "deterministic",
    "fft",
    "fft2",
    "fftn",
    "get_window",
    "hfft",
    "ifft",
    "ifft2",
    "ifftn",
    "ihfft",
    "irfft",
    "irfft2",
    "irfftn",
    "is_deterministic",
    "istft",
    "rfft",
    "rfft2",
    "rfftn",
    "stft",
]
