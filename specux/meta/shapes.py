"""Output shapes: the one module fake kernels, real kernels and the numpy path all use."""

from __future__ import annotations

from collections.abc import Sequence

Shape = tuple[int, ...]


def n_frames(length: int, n_fft: int, hop_length: int, pad: int) -> int:
    """Frames of ``n_fft`` samples every ``hop_length`` over a signal padded by ``pad`` per side."""
    return 1 + (length + 2 * pad - n_fft) // hop_length


def frame_shape(shape: Shape, frame_length: int, hop_length: int, pad: int) -> Shape:
    """``(..., L)`` -> ``(..., n_frames, frame_length)``."""
    return (*shape[:-1], n_frames(shape[-1], frame_length, hop_length, pad), frame_length)


def overlap_add_shape(shape: Shape, length: int) -> Shape:
    """``(..., n_frames, frame_length)`` -> ``(..., length)``."""
    return (*shape[:-2], length)


def ola_length(n_frames_: int, frame_length: int, hop_length: int) -> int:
    """Samples covered by ``n_frames_`` overlapping frames."""
    return frame_length + hop_length * (n_frames_ - 1)


def stft_shape(shape: Shape, n_fft: int, hop_length: int, pad: int, onesided: bool) -> Shape:
    """``(..., L)`` -> ``(..., n_freq, n_frames)``."""
    n_freq = n_fft // 2 + 1 if onesided else n_fft
    return (*shape[:-1], n_freq, n_frames(shape[-1], n_fft, hop_length, pad))


def istft_natural_length(n_frames_: int, n_fft: int, hop_length: int, pad: int) -> int:
    """istft's output length when ``length`` is not given: the span minus the padding."""
    return ola_length(n_frames_, n_fft, hop_length) - 2 * pad


def istft_shape(shape: Shape, n_fft: int, hop_length: int, pad: int, length: int | None) -> Shape:
    """``(..., n_freq, n_frames)`` -> ``(..., length)``."""
    if length is None or length < 0:
        length = istft_natural_length(shape[-1], n_fft, hop_length, pad)
    return (*shape[:-2], length)


def r2c_shape(shape: Shape, dims: Sequence[int]) -> Shape:
    """A real FFT over ``dims`` halves the last of them: ``n -> n // 2 + 1``."""
    out = list(shape)
    out[dims[-1]] = shape[dims[-1]] // 2 + 1
    return tuple(out)


def c2r_shape(shape: Shape, dims: Sequence[int], last_size: int) -> Shape:
    """The inverse real FFT over ``dims`` restores ``last_size`` samples on the last of them."""
    out = list(shape)
    out[dims[-1]] = last_size
    return tuple(out)


def transform_size(shape: Shape, dims: Sequence[int]) -> int:
    """Number of points of an FFT over ``dims`` (the normalization's N)."""
    size = 1
    for d in dims:
        size *= shape[d]
    return size
