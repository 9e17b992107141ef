"""torch import and version shims. Importing this module does not import torch."""

from __future__ import annotations

import functools
import sys
from types import ModuleType


@functools.cache
def torch_module() -> ModuleType | None:
    """torch if it can be imported, else None (a broken install counts as absent)."""
    try:
        import torch
    except Exception:  # noqa: BLE001 - a broken torch must not break specux
        return None
    return torch


def torch_loaded() -> ModuleType | None:
    """torch only if the user's program already imported it (never imports it)."""
    return sys.modules.get("torch")


def torch_version() -> tuple[int, int]:
    torch = torch_module()
    if torch is None:
        return (0, 0)
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def dtype_name(dtype) -> str:
    """A torch dtype's plain name (``torch.float32`` -> ``"float32"``), as numpy spells it."""
    return str(dtype).removeprefix("torch.")
