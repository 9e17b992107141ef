"""The numpy CPU backend: every transform on plain numpy arrays (scipy.fft when present).

Functions here take and return numpy arrays in the caller's precision (float32 stays float32)
and never import torch; the torch ops call them on zero-copy numpy views of CPU tensors.
"""
