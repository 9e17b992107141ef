"""Drop-in presets: other libraries' names and defaults, computed by specux.

- :mod:`specux.presets.librosa`: functions named and defaulted like librosa's
  (``stft``, ``istft``, ``melspectrogram``, ``mfcc``, ``chroma_stft``, ``chroma_cqt``,
  ``cqt``, ``vqt``, ``power_to_db``, ``amplitude_to_db``; ``feature.*`` and ``filters.mel`` /
  ``filters.chroma`` where librosa has them); numpy, torch or cupy signals.
- :mod:`specux.presets.torchaudio`: modules named and defaulted like ``torchaudio.transforms``
  (``Spectrogram``, ``InverseSpectrogram``, ``MelScale``, ``MelSpectrogram``, ``MFCC``, ``LFCC``,
  ``AmplitudeToDB``) and some of ``torchaudio.functional``, also under ``transforms`` /
  ``functional``; needs torch.

Import the one you use: ``from specux.presets import librosa as sl``. Presets are built on the
public API (``specux.*`` functions and ``specux.nn`` modules) only.
"""

import sys
import types
from collections.abc import Callable, Iterable

__all__ = ["librosa", "torchaudio"]


def namespace(preset: str, name: str, members: Iterable[Callable], doc: str) -> types.ModuleType:
    """A submodule ``preset.name`` holding ``members`` under their own names (the preset's
    functions, not copies), registered in ``sys.modules`` so that ``import preset.name`` and
    ``from preset.name import member`` work as they do for the library it mirrors."""
    module = types.ModuleType(f"{preset}.{name}", doc)
    for member in members:
        setattr(module, member.__name__, member)
    module.__all__ = sorted(member.__name__ for member in members)
    sys.modules[module.__name__] = module
    return module
