"""Exceptions raised by specux (a leaf module: everything may import it)."""

from __future__ import annotations


class BackendUnavailableError(RuntimeError):
    """The requested backend is absent, or does not match where the input lives.

    Raised instead of silently copying data between devices: an explicit ``backend=`` is strict.
    """


class AxisError(ValueError, IndexError):
    """An axis (``dim`` / ``axis`` / ``axes``) outside the input's dimensions.

    A ValueError, as API.md's errors are, and an IndexError, as numpy.fft and torch.fft raise
    for it (numpy's own AxisError is both too), so code written against either catches it.
    """


__all__ = ["AxisError", "BackendUnavailableError"]
