"""Values derived from a tensor's contents, kept per tensor version (imports torch).

The CUDA kernels keep a filterbank's sparse tables and an istft window's envelope this way,
and the ``cqt_kernel`` ops whether a kernel tensor holds a spec's own taps: each is built by
reading the tensor on the host (for a CUDA tensor, a wait for the device), once per contents.
"""

from __future__ import annotations

import torch
from torch.utils.weak import WeakIdKeyDictionary


class PerVersion:
    """Values built from a tensor's contents (reading it on the host waits for the device),
    kept per tensor and key while the tensor keeps its version and data pointer, at most
    ``limit`` keys a tensor (the oldest dropped), dropped with the tensor. For tensors that
    hold fixed values only (:func:`fixed_values`): a tensor that needs a gradient may change
    through ``.data`` without a new version (gradcheck, optimizers), and a view may be new on
    every call."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._entries = WeakIdKeyDictionary()  # tensor -> ((version, data pointer), {key: value})

    @staticmethod
    def _state(tensor: torch.Tensor) -> tuple[int, int]:
        # An inference tensor (made under torch.inference_mode) has no version counter: it is
        # kept by its data pointer alone, so an in-place change made to it (which only
        # inference mode allows) is not seen; docs/api.md says so.
        if tensor.is_inference():
            return -1, tensor.data_ptr()
        return tensor._version, tensor.data_ptr()

    def get(self, tensor: torch.Tensor, key):
        entry = self._entries.get(tensor)
        if entry is None or entry[0] != self._state(tensor):
            return None
        return entry[1].get(key)

    def put(self, tensor: torch.Tensor, key, value) -> None:
        entry = self._entries.get(tensor)
        if entry is None or entry[0] != self._state(tensor):
            entry = self._entries[tensor] = (self._state(tensor), {})
        if len(entry[1]) >= self.limit:
            entry[1].pop(next(iter(entry[1])))
        entry[1][key] = value

    def keys_of(self, tensor: torch.Tensor) -> list:
        """The keys kept for ``tensor``'s current contents."""
        entry = self._entries.get(tensor)
        return [] if entry is None or entry[0] != self._state(tensor) else list(entry[1])

    def tensors(self) -> list:
        return list(self._entries.keys())

    def __contains__(self, tensor: torch.Tensor) -> bool:  # by identity
        return tensor in self._entries


def fixed_values(t: torch.Tensor) -> bool:
    """Whether ``t`` may be kept in a :class:`PerVersion` cache: it needs no gradient and is
    not a view."""
    return not t.requires_grad and t._base is None


def capturing(t: torch.Tensor) -> bool:
    """Whether a CUDA graph is being captured on ``t``'s device's current stream."""
    return t.is_cuda and torch.cuda.is_current_stream_capturing()
