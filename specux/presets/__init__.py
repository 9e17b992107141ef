"""Drop-in presets: other libraries' names and defaults, computed by specux.

- :mod:`specux.presets.librosa`: functions named and defaulted like librosa's
  (``stft``, ``istft``, ``melspectrogram``, ``mfcc``, ``chroma_stft``, ``chroma_cqt``,
  ``cqt``, ``vqt``, ``power_to_db``, ``amplitude_to_db``); numpy, torch or cupy signals.
- :mod:`specux.presets.torchaudio`: modules named and defaulted like ``torchaudio.transforms``
  (``Spectrogram``, ``InverseSpectrogram``, ``MelScale``, ``MelSpectrogram``, ``MFCC``, ``LFCC``,
  ``AmplitudeToDB``); needs torch.

Import the one you use: ``from specux.presets import librosa as sl``. Presets are built on the
public API (``specux.*`` functions and ``specux.nn`` modules) only.
"""

__all__ = ["librosa", "torchaudio"]
