"""specux: differentiable spectral transforms for numpy, torch and cupy arrays.

``import specux`` needs numpy only. When torch is installed it is imported too and the
``torch.ops.specux.*`` custom ops are registered (fake kernels, CPU kernels, analytic backward).
"""

import sys as _sys

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
from specux.errors import AxisError, BackendUnavailableError
from specux.features import chroma, cqt, fftconvolve, lfcc, melspectrogram, mfcc, vqt
from specux.meta import filters
from specux.meta.filters import hz_to_mel, mel_to_hz
from specux.meta.windows import get_window
from specux.options import deterministic, is_deterministic
from specux.plans import Plan, autotune, plan
from specux.twins import CQT, ISTFT, LFCC, MFCC, STFT, VQT, Chroma, FFTConvolve, MelSpectrogram

# `specux.filters` is specux.meta.filters: importable under its public name too
# (`from specux.filters import mel`), as the same module object
_sys.modules.setdefault(__name__ + ".filters", filters)


def clear_cache() -> None:
    """Forget compiled kernels and autotuned winners (in memory and in the disk cache,
    SPECUX_CACHE_DIR), and the host arrays cached by parameters: windows, filters and
    padding maps (a window of a large n_fft alone is tens of MB; the caches count
    entries, not bytes). Arrays a caller still holds stay valid: the caches only drop
    their references."""
    from specux.kernels import tuning
    from specux.kernels.cache import clear_all
    from specux.kernels.cpu import frames, stft
    from specux.meta import matrices, windows

    for cached in (windows._named_window, windows._cast, matrices._build,
                   stft.named_full_window, frames.pad_sources, *filters.CACHES):  # fmt: skip
        cached.cache_clear()
    clear_all()  # (the disk's last: a folder it cannot read warns and is left)
    tuning.clear()


if _torch_module() is not None:
    import specux.ops  # noqa: F401 - registers torch.ops.specux.*


def __getattr__(name: str):
    """``specux.nn`` on first use: it needs torch, and ``import specux`` must not."""
    if name == "nn":
        if _torch_module() is None:
            raise AttributeError("specux.nn holds torch.nn.Module versions of the transforms "
                                 "and needs torch, which is not installed (the functions "
                                 "and twins work without it)")  # fmt: skip
        import importlib

        return importlib.import_module("specux.nn")
    raise AttributeError(f"module 'specux' has no attribute {name!r}")

__all__ = [
    "ISTFT",
    "LFCC",
    "MFCC",
    "STFT",
    "AxisError",
    "BackendUnavailableError",
    "Chroma",
    "FFTConvolve",
    "MelSpectrogram",
    "clear_cache",
    "ParameterError",
    "__version__",
    "CQT",
    "VQT",
    "chroma",
    "cqt",
    "fftconvolve",
    "vqt",
    "filters",
    "hz_to_mel",
    "lfcc",
    "mel_to_hz",
    "melspectrogram",
    "mfcc",
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
    "plan",
    "Plan",
    "autotune",
    "rfft",
    "rfft2",
    "rfftn",
    "stft",
]
