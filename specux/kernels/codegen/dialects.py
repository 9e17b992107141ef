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
    prelude: str  # includes, float16 / bfloat16 conversions, sincospi
    function: str  # qualifier of helper functions
    restrict: str
    # The kernel: an entry point that runs ``body`` once per thread id ``gid``.
    kernel_open: str  # format fields: name, params
    kernel_close: str
    # The block kernel: ``tid`` (int), ``block`` (long long), dynamic shared memory
    # ``specux_shared`` (unsigned char*), and ``barrier`` between the block's threads.
    block_open: str  # format fields: name, params, threads
    block_close: str  # format fields: name, params, args
    barrier: str
    # ``tid`` read anew: a value the compiler cannot equate with ``tid``, so the index
    # arithmetic of a later phase of a kernel (the fused adjoint's inverse stages) is not
    # shared with -- and kept live since -- an earlier phase's identical expressions.
    fresh_tid: str


_CUDA_PRELUDE = r"""
// Half precision by inline PTX: no header, so NVRTC needs no CUDA toolkit include path.
__device__ __forceinline__ float specux_h2f(unsigned short h) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short specux_f2h(float f) {
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
// bfloat16: the upper half of a float32; stores round to nearest even (NaN -> 0x7FC0, as
// torch rounds), in integer arithmetic so every architecture compiles it.
__device__ __forceinline__ float specux_b2f(unsigned short b) {
    return __uint_as_float(((unsigned int)b) << 16);
}
__device__ __forceinline__ unsigned short specux_f2b(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}
// threadIdx.x by a volatile read (see Dialect.fresh_tid)
__device__ __forceinline__ int specux_fresh_tid() {
    int t; asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t)); return t;
}
__device__ __forceinline__ void specux_sincospi(double x, double* s, double* c) {
    sincospi(x, s, c);
}
"""

_CPP_PRELUDE = r"""
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <thread>
#include <cstring>
#include <vector>
static inline float specux_h2f(unsigned short h) {
    _Float16 v; std::memcpy(&v, &h, 2); return (float)v;
}
static inline unsigned short specux_f2h(float f) {
    _Float16 v = (_Float16)f; unsigned short h; std::memcpy(&h, &v, 2); return h;
}
static inline float specux_b2f(unsigned short b) {
    std::uint32_t u = (std::uint32_t)b << 16; float f; std::memcpy(&f, &u, 4); return f;
}
static inline unsigned short specux_f2b(float f) {
    std::uint32_t u; std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
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
    block_open=(
        'extern "C" __global__ void __launch_bounds__({threads}{min_blocks}) {name}({params}) {{\n'
        "    extern __shared__ __align__(16) unsigned char specux_shared[];\n"
        "    const int tid = threadIdx.x;\n"
        "    const long long block = blockIdx.x;\n"
    ),
    block_close="}}\n",
    barrier="__syncthreads();",
    fresh_tid="specux_fresh_tid()",
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
    # SIMT emulation: one host thread per GPU thread of a block, std::barrier for the block
    # barrier; shared memory is handed in (filled with NaN bytes, so reads of slots nobody wrote
    # show up in the results); blocks run one after another.
    block_open=(
        "static inline void {name}_lane(int tid, long long block, unsigned char* specux_shared,\n"
        "                               std::barrier<>* specux_barrier, {params}) {{\n"
    ),
    block_close=(
        "}}\n"
        "extern \"C\" void {name}(long long blocks, long long threads, long long shared,\n"
        "                         {params}) {{\n"
        "    std::vector<unsigned char> memory(shared + 16);\n"
        "    for (long long block = 0; block < blocks; ++block) {{\n"
        "        std::fill(memory.begin(), memory.end(), (unsigned char)0xFF);\n"
        "        std::barrier<> barrier((std::ptrdiff_t)threads);\n"
        "        std::vector<std::thread> lanes;\n"
        "        for (long long lane = 0; lane < threads; ++lane)\n"
        "            lanes.emplace_back([&, lane] {{\n"
        "                {name}_lane((int)lane, block, memory.data(), &barrier, {args});\n"
        "            }});\n"
        "        for (auto& lane : lanes) lane.join();\n"
        "    }}\n"
        "}}\n"
    ),
    barrier="specux_barrier->arrive_and_wait();",
    fresh_tid="tid",  # compiled at -O0: nothing is shared between phases
)

DIALECTS = {d.name: d for d in (CUDA, CPP)}
