"""Exceptions raised by specux (a leaf module: everything may import it)."""

from __future__ import annotations


class BackendUnavailableError(RuntimeError):
    """The requested backend is absent, or does not match where the input lives.

    Raised instead of silently copying data between devices: an explicit ``backend=`` is strict.
    """


__all__ = ["BackendUnavailableError"]
