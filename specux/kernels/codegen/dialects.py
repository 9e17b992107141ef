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
    # A barrier among the threads of one warp (32 threads; a SIMD group) that orders their
    # shared-memory accesses: the stage exchanges of transforms whose threads never span two
    # warps (codegen.block.warp_local). The emulation gives each warp's 32 host threads a
    # barrier of their own, so its warps run between block barriers as independently as the
    # GPU's (a read of another warp's writes ordered only by a warp barrier is a data race
    # there too: ThreadSanitizer reports it when the emulated kernel is built with it).
    warp_barrier: str
    # ``tid`` read anew: a value the compiler cannot equate with ``tid``, so the index
    # arithmetic of a later phase of a kernel (the fused adjoint's inverse stages) is not
    # shared with -- and kept live since -- an earlier phase's identical expressions.
    fresh_tid: str
    # The warp matrix product of the tensor-core tiles (sm_80 and later), included only by the
    # kernels that use it: ``specux_tf32(x)`` rounds a float to tf32 (10 mantissa bits, to
    # nearest, ties away from zero: PTX cvt.rna.tf32.f32) and ``SPECUX_MMA_TF32(d, a, b)``
    # is mma.sync.m16n8k8.row.col f32 += tf32 x tf32: ``d`` the 4 accumulators, ``a`` the 4
    # and ``b`` the 2 tf32 operands of this lane, in PTX's fragment layout (lane = 4 g + r:
    # a[j] = A[g + 8 (j & 1), r + 4 (j >> 1)], b[j] = B[r + 4 j, g],
    # d[j] = D[g + 8 (j >> 1), 2 r + (j & 1)]). Every thread of the block calls it together.
    mma_prelude: str


_CUDA_MMA = r"""
__device__ __forceinline__ float specux_tf32(float x) {
    unsigned int u; asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x)); return __uint_as_float(u);
}
#define SPECUX_MMA_TF32(d, a, b) asm( \
    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 " \
    "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" \
    : "+f"((d)[0]), "+f"((d)[1]), "+f"((d)[2]), "+f"((d)[3]) \
    : "r"(__float_as_uint((a)[0])), "r"(__float_as_uint((a)[1])), \
      "r"(__float_as_uint((a)[2])), "r"(__float_as_uint((a)[3])), \
      "r"(__float_as_uint((b)[0])), "r"(__float_as_uint((b)[1])))
"""

# The emulation exchanges the warp's fragments through ``specux_exchange`` (10 floats a
# thread) between two block barriers; the products are summed in double and rounded once
# (the tensor cores' own rounding of the sum differs: tests compare within tolerance).
_CPP_MMA = r"""
static inline float specux_tf32(float x) {
    std::uint32_t u; std::memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
    float y; std::memcpy(&y, &u, 4); return y;
}
static inline void specux_mma_emulate(int tid, float* exchange, std::barrier<>* barrier,
                                      float* d, const float* a, const float* b) {
    float* mine = exchange + tid * 10;
    for (int j = 0; j < 4; ++j) { mine[j] = a[j]; mine[4 + j] = d[j]; }
    mine[8] = b[0]; mine[9] = b[1];
    barrier->arrive_and_wait();
    const float* warp = exchange + (tid - tid % 32) * 10;
    const int g = (tid % 32) / 4, r = tid % 4;
    float out[4];
    for (int j = 0; j < 4; ++j) {
        const int row = g + 8 * (j >> 1), col = 2 * r + (j & 1);
        double sum = warp[(g * 4 + col / 2) * 10 + 4 + (col & 1) + 2 * (row / 8)];
        for (int k = 0; k < 8; ++k)
            sum += (double)warp[(g * 4 + k % 4) * 10 + row / 8 + 2 * (k / 4)]
                 * (double)warp[(col * 4 + k % 4) * 10 + 8 + k / 4];
        out[j] = (float)sum;
    }
    barrier->arrive_and_wait();
    for (int j = 0; j < 4; ++j) d[j] = out[j];
}
#define SPECUX_MMA_TF32(d, a, b) \
    specux_mma_emulate(tid, specux_exchange, specux_barrier, (d), (a), (b))
"""


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
#include <memory>
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
    warp_barrier="__syncwarp();",
    fresh_tid="specux_fresh_tid()",
    mma_prelude=_CUDA_MMA,
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
    # barrier and one for each warp's barrier; shared memory is handed in (filled with NaN
    # bytes, so reads of slots nobody wrote show up in the results); blocks run one after
    # another.
    block_open=(
        "static inline void {name}_lane(int tid, long long block, unsigned char* specux_shared,\n"
        "                               std::barrier<>* specux_barrier, float* specux_exchange,\n"
        "                               std::barrier<>* specux_warp, {params}) {{\n"
    ),
    block_close=(
        "}}\n"
        "extern \"C\" void {name}(long long blocks, long long threads, long long shared,\n"
        "                         {params}) {{\n"
        "    std::vector<unsigned char> memory(shared + 16);\n"
        "    for (long long block = 0; block < blocks; ++block) {{\n"
        "        std::fill(memory.begin(), memory.end(), (unsigned char)0xFF);\n"
        "        std::barrier<> barrier((std::ptrdiff_t)threads);\n"
        "        std::vector<float> exchange(threads * 10);\n"
        "        std::vector<std::unique_ptr<std::barrier<>>> warps;  // one a warp of 32\n"
        "        for (long long w = 0; 32 * w < threads; ++w)\n"
        "            warps.emplace_back(new std::barrier<>(\n"
        "                (std::ptrdiff_t)std::min(32LL, threads - 32 * w)));\n"
        "        std::vector<std::thread> lanes;\n"
        "        for (long long lane = 0; lane < threads; ++lane)\n"
        "            lanes.emplace_back([&, lane] {{\n"
        "                {name}_lane((int)lane, block, memory.data(), &barrier, exchange.data(),\n"
        "                           warps[lane / 32].get(), {args});\n"
        "            }});\n"
        "        for (auto& lane : lanes) lane.join();\n"
        "    }}\n"
        "}}\n"
    ),
    barrier="specux_barrier->arrive_and_wait();",
    warp_barrier="specux_warp->arrive_and_wait();",
    fresh_tid="tid",  # compiled at -O0: nothing is shared between phases
    mma_prelude=_CPP_MMA,
)

DIALECTS = {d.name: d for d in (CUDA, CPP)}
