"""Padding, framing and overlap-add on numpy arrays, and their exact adjoints.

Padding follows numpy.pad at every length (a signal shorter than the padding reflects
repeatedly); the adjoint of a padding is the scatter-add of the padded samples back onto
their sources, found from the same index map, so forward and adjoint can never disagree.
"""

from __future__ import annotations

import functools

import numpy as np

from specux.meta.shapes import n_frames, ola_length


@functools.lru_cache(maxsize=128)
def pad_sources(length: int, pad: int, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """int64 source index of every left-pad and right-pad sample of a ``mode`` padding:
    numpy.pad's (``reflect`` is periodic with period ``2 (length - 1)``, ``circular`` with
    ``length``, ``replicate`` clamps), found in O(pad) memory whatever the length."""
    if length < 1:
        raise ValueError(f"cannot pad an empty signal in mode {mode!r}")
    offsets = np.concatenate([np.arange(-pad, 0, dtype=np.int64),
                              np.arange(length, length + pad, dtype=np.int64)])  # fmt: skip
    if mode == "replicate":
        index = np.clip(offsets, 0, length - 1)
    elif mode == "circular":
        index = np.mod(offsets, length)
    elif mode == "reflect":
        period = 2 * (length - 1)
        if period == 0:  # a single sample reflects onto itself
            index = np.zeros_like(offsets)
        else:
            index = np.mod(offsets, period)
            index = np.where(index < length, index, period - index)
    else:
        raise ValueError(f"pad_mode={mode!r} has no source indices")
    left, right = index[:pad].copy(), index[pad:].copy()
    left.flags.writeable = right.flags.writeable = False
    return left, right


def pad_signal(x: np.ndarray, pad: int, mode: str) -> np.ndarray:
    """Pad the last axis by ``pad`` samples on each side (a new array)."""
    length = x.shape[-1]
    out = np.empty((*x.shape[:-1], length + 2 * pad), dtype=x.dtype)
    out[..., pad : pad + length] = x
    if pad == 0:
        return out
    if mode == "constant":
        out[..., :pad] = 0
        out[..., pad + length :] = 0
    else:
        left, right = pad_sources(length, pad, mode)
        out[..., :pad] = x[..., left]
        out[..., pad + length :] = x[..., right]
    return out


def padded_segment(x: np.ndarray, pad: int, mode: str, start: int, stop: int) -> np.ndarray:
    """Samples ``[start, stop)`` of ``pad_signal(x, pad, mode)`` for 2-D ``x``, without
    padding the whole signal (the same source indices, so the same values)."""
    length = x.shape[-1]
    index = np.arange(start, stop) - pad
    inside = (index >= 0) & (index < length)
    if mode == "constant":
        out = np.zeros((x.shape[0], stop - start), dtype=x.dtype)
        out[:, inside] = x[:, index[inside]]
        return out
    left, right = pad_sources(length, pad, mode)
    source = index.copy()
    source[index < 0] = left[index[index < 0] + pad]
    source[index >= length] = right[index[index >= length] - length]
    return x[:, source]


def pad_adjoint(xp: np.ndarray, pad: int, mode: str, length: int) -> np.ndarray:
    """Adjoint of :func:`pad_signal`: fold the padded samples back onto their sources."""
    out = np.array(xp[..., pad : pad + length], copy=True)
    if pad == 0 or mode == "constant":
        return out
    left, right = pad_sources(length, pad, mode)
    flat_out = out.reshape(-1, length)
    flat_xp = xp.reshape(-1, xp.shape[-1])
    # np.add.at accumulates repeated indices (short signals reflect onto a sample many times).
    np.add.at(flat_out, (slice(None), left), flat_xp[:, :pad])
    np.add.at(flat_out, (slice(None), right), flat_xp[:, pad + length :])
    return flat_out.reshape(out.shape)


def frame_view(xp: np.ndarray, frame_length: int, hop_length: int) -> np.ndarray:
    """Frames of an already padded signal as a strided view ``(..., n_frames, frame_length)``."""
    count = n_frames(xp.shape[-1], frame_length, hop_length, 0)
    stride = xp.strides[-1]
    return np.lib.stride_tricks.as_strided(
        xp,
        shape=(*xp.shape[:-1], count, frame_length),
        strides=(*xp.strides[:-1], stride * hop_length, stride),
        writeable=False,
    )


def frame(x: np.ndarray, frame_length: int, hop_length: int, pad: int, mode: str) -> np.ndarray:
    """Pad by ``pad`` per side, then cut frames: ``(..., L) -> (..., n_frames, frame_length)``."""
    xp = pad_signal(x, pad, mode) if pad else np.ascontiguousarray(x)
    return np.array(frame_view(xp, frame_length, hop_length), copy=True)


def overlap_add(frames: np.ndarray, hop_length: int) -> np.ndarray:
    """Sum frames ``(..., n_frames, frame_length)`` placed every ``hop_length`` samples.

    Deterministic by construction: the frame is cut into hop-sized chunks and chunk ``j`` of
    every frame is added in one vectorized slice, so no sample is accumulated out of order.
    """
    *batch, count, frame_length = frames.shape
    total = ola_length(count, frame_length, hop_length)
    chunks = -(-frame_length // hop_length)
    out = np.zeros((*batch, (count + chunks - 1) * hop_length), dtype=frames.dtype)
    if count == 0:
        return out[..., :total]
    # out as (..., blocks, hop): chunk j of frame t lands on block t + j (the last chunk may be
    # shorter than a hop); strided views are added block-wise, nothing is copied
    blocks = out.reshape(*batch, count + chunks - 1, hop_length)
    for j in range(chunks):
        part = frames[..., j * hop_length : (j + 1) * hop_length]
        blocks[..., j : j + count, : part.shape[-1]] += part
    return out[..., :total]


def overlap_add_padded(
    frames: np.ndarray, length: int, hop_length: int, pad: int, mode: str
) -> np.ndarray:
    """Adjoint of :func:`frame`: overlap-add into the padded signal, then fold the padding."""
    span = length + 2 * pad
    summed = overlap_add(frames, hop_length)
    xp = np.zeros((*frames.shape[:-2], span), dtype=frames.dtype)
    covered = min(summed.shape[-1], span)
    xp[..., :covered] = summed[..., :covered]
    return pad_adjoint(xp, pad, mode, length)
