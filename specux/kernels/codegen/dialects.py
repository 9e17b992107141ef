"""Dialects: everything that differs between the languages the generator writes.

Emitters never test which backend they write for; they read these fields. ``cuda`` is
compiled by NVRTC; ``cpp`` is the host-emulation dialect (the same kernel bodies as C++,
one loop iteration per GPU thread) that runs the generated numerics on any machine.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    name: str
    prelude: str  # includes, half conversions, sincospi
    function: str  # qualifier of helper functions
    restrict: str
    # The kernel: an entry point that runs ``body`` once per thread id ``gid``.
    kernel_open: str  # format fields: name, params
    kernel_close: str
    # The fused (one block per transform) kernel: shared memory, block and thread ids, barrier.
    fused_open: str  # format fields: name, params
    fused_close: str  # format fields: name, params, args
    barrier: str


_CUDA_PRELUDE = r"""
// Half precision by inline PTX: no header, so NVRTC needs no CUDA toolkit include path.
__device__ __forceinline__ float specux_h2f(unsigned short h) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short specux_f2h(float f) {
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ void specux_sincospi(double x, double* s, double* c) {
    sincospi(x, s, c);
}
"""

_CPP_PRELUDE = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
static inline float specux_h2f(unsigned short h) {
    _Float16 v; std::memcpy(&v, &h, 2); return (float)v;
}
static inline unsigned short specux_f2h(float f) {
    _Float16 v = (_Float16)f; unsigned short h; std::memcpy(&h, &v, 2); return h;
}
static inline void specux_sincospi(double x, double* s, double* c) {
    // Reduce to [-1/4, 1/4] turns around the nearest quarter so the result is exact at
    // multiples of 1/2 (as CUDA's sincospi is) and accurate to an ulp elsewhere.
    double q = std::nearbyint(2.0 * x);
    double r = x - 0.5 * q;
    double sr = std::sin(M_PI * r), cr = std::cos(M_PI * r);
    long long quadrant = ((long long)q % 4 + 4) % 4;
    double sv[4] = {sr, cr, -sr, -cr};
    double cv[4] = {cr, -sr, -cr, sr};
    *s = sv[quadrant]; *c = cv[quadrant];
}
"""

CUDA = Dialect(
    name="cuda",
    prelude=_CUDA_PRELUDE,
    function="__device__ __forceinline__",
    restrict="__restrict__",
    kernel_open=(
        'extern "C" __global__ void {name}({params}) {{\n'
        "    const long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    ),
    kernel_close="}}\n",
    fused_open=(
        'extern "C" __global__ void {name}({params}) {{\n'
        "    extern __shared__ __align__(16) unsigned char specux_shared[];\n"
        "    cpx* smem = (cpx*)specux_shared;\n"
        "    const long long b = blockIdx.x;\n"
        "    const long long tid = threadIdx.x, nthreads = blockDim.x;\n"
    ),
    fused_close="}}\n",
    barrier="__syncthreads();",
)

CPP = Dialect(
    name="cpp",
    prelude=_CPP_PRELUDE,
    function="static inline",
    restrict="__restrict__",
    kernel_open=(
        "static inline void {name}_thread(long long gid, {params}) {{\n"
    ),
    kernel_close=(
        "}}\n"
        'extern "C" void {name}(long long threads, {params}) {{\n'
        "    for (long long gid = 0; gid < threads; ++gid) {name}_thread(gid, {args});\n"
        "}}\n"
    ),
    # One host thread runs each block: every loop over `tid` covers all work items in turn,
    # so the phases between barriers run in order and the barrier itself is empty.
    fused_open=(
        "static inline void {name}_block(long long b, {params}) {{\n"
        "    std::vector<cpx> specux_shared(2 * n + 1);\n"
        "    cpx* smem = specux_shared.data();\n"
        "    const long long tid = 0, nthreads = 1;\n"
    ),
    fused_close=(
        "}}\n"
        'extern "C" void {name}(long long blocks, {params}) {{\n'
        "    for (long long b = 0; b < blocks; ++b) {name}_block(b, {args});\n"
        "}}\n"
    ),
    barrier="",
)

DIALECTS = {d.name: d for d in (CUDA, CPP)}
