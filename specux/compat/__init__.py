"""Low-level shims: array libraries, torch versions, cuda-python imports.

Nothing here imports torch or cupy at module import time: ``import specux`` must work with
numpy alone.
"""
