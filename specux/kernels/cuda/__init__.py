"""CUDA backend: CUDA C source -> CUBIN with NVRTC (compiler.py), cached on disk (../cache.py),
loaded and launched through the driver API on torch's streams (runtime.py).

Needs cuda-python (``cuda-bindings``) and an NVRTC library (the ``nvidia-cuda-nvrtc`` wheel, a
CUDA toolkit or torch's bundled copy); ``specux.compat.cuda.unavailable_reason()`` says what is
missing. Nothing here needs the CUDA toolkit's headers: kernels are self-contained source.
"""
