"""Render a Stockham FFT pass (plan.PassSpec) as kernel source in any dialect.

Butterfly constants are computed in float64 on the host and printed with full precision;
twiddles come from a float64 sincospi of an exactly reduced integer ratio (no recurrences).
"""

from __future__ import annotations

import ctypes
import dataclasses

from specux.kernels.codegen.butterfly import Code, small_dft
from specux.kernels.codegen.dialects import Dialect
from specux.kernels.plan import LoadSpec, PassSpec, StoreSpec

KERNEL_NAME = "specux_fft_pass"

# The user layouts of input and output (fft_exec.Strides), shared by every kernel family.
LAYOUT_PARAMS = tuple(
    ("long long", f"{side}_{field}")
    for side in ("in", "out")
    for field in ("inner", "outer_stride", "inner_stride", "elem_stride")
)

PARAMS = (
    ("const void*", "in_ptr"),
    ("void*", "out_ptr"),
    ("const void*", "load_table"),
    ("const void*", "store_table"),
    ("long long", "batch"),
    ("double", "scale"),
    *LAYOUT_PARAMS,
    # Sizes are launch arguments, not constants, so one compiled kernel serves every length
    # with the same radix, modes and precision (NVRTC time, not run time, bounds the tests).
    ("long long", "n"),
    ("long long", "stride"),
    ("long long", "load_valid"),
    ("long long", "store_valid"),
    ("long long", "logical"),
)

_REAL = {"float32": "float", "float64": "double"}
_COMPLEX_STORAGE = {"float16": "specux_c16", "float32": "specux_c32", "float64": "specux_c64"}
# bfloat16 is real storage only (torch has no bfloat16 complex type: spectra of bfloat16
# signals are complex64).
_REAL_STORAGE = {"float16": "unsigned short", "bfloat16": "specux_b16", "float32": "float",
                 "float64": "double"}  # fmt: skip


def _types(fn: str) -> str:
    return f"""
// Aligned to their size, so a complex value moves in one vector load / store.
struct alignas(2 * sizeof(real_t)) cpx {{ real_t re, im; }};
struct alignas(4) specux_c16 {{ unsigned short re, im; }};
struct alignas(2) specux_b16 {{ unsigned short bits; }};
struct alignas(8) specux_c32 {{ float re, im; }};
struct alignas(16) specux_c64 {{ double re, im; }};
{fn} cpx cadd(cpx a, cpx b) {{ cpx r = {{a.re + b.re, a.im + b.im}}; return r; }}
{fn} cpx csub(cpx a, cpx b) {{ cpx r = {{a.re - b.re, a.im - b.im}}; return r; }}
{fn} cpx cmul(cpx a, cpx b) {{
    cpx r = {{a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}}; return r;
}}
{fn} cpx to_cpx(cpx v) {{ return v; }}
{fn} cpx to_cpx(specux_c16 v) {{
    cpx r = {{(real_t)specux_h2f(v.re), (real_t)specux_h2f(v.im)}}; return r;
}}
{fn} cpx to_cpx(specux_c32 v) {{ cpx r = {{(real_t)v.re, (real_t)v.im}}; return r; }}
{fn} cpx to_cpx(specux_c64 v) {{ cpx r = {{(real_t)v.re, (real_t)v.im}}; return r; }}
{fn} real_t to_real(unsigned short v) {{ return (real_t)specux_h2f(v); }}
{fn} real_t to_real(specux_b16 v) {{ return (real_t)specux_b2f(v.bits); }}
{fn} real_t to_real(float v) {{ return (real_t)v; }}
{fn} real_t to_real(double v) {{ return (real_t)v; }}
{fn} void put(cpx* p, cpx v) {{ *p = v; }}
{fn} void put(specux_c16* p, cpx v) {{
    specux_c16 r = {{specux_f2h((float)v.re), specux_f2h((float)v.im)}}; *p = r;
}}
{fn} void put(specux_c32* p, cpx v) {{ specux_c32 r = {{(float)v.re, (float)v.im}}; *p = r; }}
{fn} void put(specux_c64* p, cpx v) {{ specux_c64 r = {{(double)v.re, (double)v.im}}; *p = r; }}
{fn} void put(unsigned short* p, real_t v) {{ *p = specux_f2h((float)v); }}
{fn} void put(specux_b16* p, real_t v) {{ p->bits = specux_f2b((float)v); }}
{fn} void put(float* p, real_t v) {{ *p = (float)v; }}
{fn} void put(double* p, real_t v) {{ *p = (double)v; }}
"""


def _twiddle(fn: str, sign: int) -> str:
    return f"""
// exp({'+' if sign > 0 else '-'}2 pi i num / den) for 0 <= num < den, from a float64 sincospi.
{fn} cpx twiddle(long long num, long long den) {{
    double s, c;
    specux_sincospi(2.0 * (double)num / (double)den, &s, &c);
    cpx r = {{(real_t)c, (real_t)({'' if sign > 0 else '-'}s)}};
    return r;
}}
"""


def _offset(prefix: str, canonical: bool, index: str = "j") -> str:
    """Element ``index`` of row ``b``: canonical scratch rows, or the launch's user strides."""
    if canonical:
        return f"b * n + {index}"
    return (
        f"(b / {prefix}_inner) * {prefix}_outer_stride + (b % {prefix}_inner) * "
        f"{prefix}_inner_stride + {index} * {prefix}_elem_stride"
    )


def _storage_type(storage: str, mode: str) -> str:
    if storage == "compute":
        return "cpx"
    if mode == "real":
        return _REAL_STORAGE[storage]
    if storage not in _COMPLEX_STORAGE:
        raise ValueError(f"no complex {storage} storage: complex values of {storage} signals "
                         "are stored as complex64")
    return _COMPLEX_STORAGE[storage]


def _load_fn(fn: str, spec: LoadSpec, params: str) -> str:
    in_t = _storage_type(spec.storage, spec.mode)
    offset = _offset("in", spec.layout.canonical)
    lines = [f"{fn} cpx load(long long b, long long j, {params}) {{"]
    lines.append(f"    const {in_t}* in = (const {in_t}*)in_ptr;")
    lines.append("    if (j >= load_valid) { cpx z = {0, 0}; return z; }  // zero padding")
    if spec.mode == "complex":
        lines.append(f"    cpx v = to_cpx(in[{offset}]);")
    elif spec.mode == "real":
        lines.append(f"    cpx v = {{to_real(in[{offset}]), (real_t)0}};")
    else:  # hermitian: the half spectrum of a load_valid-point real signal
        lines.append("    const bool mirrored = 2 * j > load_valid;")
        lines.append("    const long long source = mirrored ? load_valid - j : j;")
        lines.append(f"    cpx v = to_cpx(in[{_offset('in', spec.layout.canonical, 'source')}]);")
        lines.append("    if (mirrored) v.im = -v.im;")
        lines.append("    if (source == 0 || 2 * source == load_valid) v.im = (real_t)0;")
    if spec.table:
        lines.append("    v = cmul(v, ((const cpx*)load_table)[j]);")
    lines.append("    return v;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _store_fn(fn: str, spec: StoreSpec, params: str) -> str:
    out_t = _storage_type(spec.storage, spec.mode)
    offset = _offset("out", spec.layout.canonical)
    lines = [f"{fn} void store(long long b, long long j, cpx v, {params}) {{"]
    lines.append(f"    {out_t}* out = ({out_t}*)out_ptr;")
    lines.append("    if (j >= store_valid) return;")
    if spec.mode == "half":
        lines.append("    if (2 * j > logical) return;  // bins 0 .. logical / 2")
    if spec.table:
        lines.append("    v = cmul(v, ((const cpx*)store_table)[j]);")
    if spec.scaled:
        lines.append("    v.re *= (real_t)scale; v.im *= (real_t)scale;")
    if spec.mode == "real":
        lines.append(f"    put(&out[{offset}], v.re);")
    else:
        lines.append(f"    put(&out[{offset}], v);")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _butterfly(radix: int, sign: int) -> list[str]:
    """v[k] = sum_r u[r] exp(sign 2 pi i r k / radix), straight-line (codegen.butterfly)."""
    code = Code()
    outputs = small_dft([f"u{r}" for r in range(radix)], sign, code)
    return [f"    {line}" for line in code] + [
        f"    cpx v{k} = {name};" for k, name in enumerate(outputs)
    ]


def _support(spec: PassSpec, dialect: Dialect, params: str) -> list[str]:
    """What every kernel renders first: prelude, types, twiddle, the prologue and epilogue."""
    fn = dialect.function
    return [
        dialect.prelude,
        f"typedef {_REAL[spec.precision]} real_t;",
        _types(fn),
        _twiddle(fn, spec.sign),
        _load_fn(fn, spec.load, params),
        _store_fn(fn, spec.store, params),
    ]


# ctypes of the kernel parameters, for launchers that pack arguments themselves.
CTYPES = {
    "const void*": ctypes.c_void_p,
    "void*": ctypes.c_void_p,
    "long long": ctypes.c_longlong,
    "double": ctypes.c_double,
}


def arg_types(params) -> tuple:
    return tuple(CTYPES[t] for t, _ in params)


def source_key(spec: PassSpec) -> PassSpec:
    """The spec with its launch-time sizes zeroed: equal keys render identical source."""
    return dataclasses.replace(
        spec, n=0, stride=0,
        load=dataclasses.replace(spec.load, valid=0),
        store=dataclasses.replace(spec.store, valid=0, logical=0),
    )  # fmt: skip


def launch_sizes(spec: PassSpec) -> tuple[int, int, int, int, int]:
    """The size arguments (n, stride, load_valid, store_valid, logical) of a pass."""
    n = spec.n
    return n, spec.stride, spec.load.valid or n, spec.store.valid or n, spec.store.logical or n


def render_pass(spec: PassSpec, dialect: Dialect) -> str:
    """Kernel source for one pass; entry point ``specux_fft_pass`` with :data:`PARAMS`.

    The source depends only on :func:`source_key`; sizes arrive as launch arguments.
    """
    spec = source_key(spec)
    if spec.load.frames or spec.load.window or spec.store.value != "complex":
        raise ValueError("framing, windows and value outputs are block-kernel features")
    params = ", ".join(f"{t} {n}" for t, n in PARAMS)
    args = ", ".join(n for _, n in PARAMS)
    radix = spec.radix
    body = [
        f"    const long long quarter = n / {radix}LL;  // butterflies per transform",
        "    if (gid >= batch * quarter) return;",
        "    const long long b = gid / quarter;",
        "    const long long i = gid - b * quarter;",
        "    const long long k = i % stride;",
    ]
    for r in range(radix):
        body.append(f"    cpx u{r} = load(b, i + {r}LL * quarter, {args});")
    if radix > 1:
        body.append("    if (stride > 1) {")
        for r in range(1, radix):
            body.append(f"        u{r} = cmul(u{r}, twiddle({r}LL * k, stride * {radix}LL));")
        body.append("    }")
    body += _butterfly(radix, spec.sign)
    body.append(f"    const long long j0 = (i - k) * {radix}LL + k;")
    for r in range(radix):
        body.append(f"    store(b, j0 + {r}LL * stride, v{r}, {args});")
    source = [
        f"// specux FFT pass: radix={radix} sign={spec.sign} precision={spec.precision}",
        *_support(spec, dialect, params),
        dialect.kernel_open.format(name=KERNEL_NAME, params=params),
        "\n".join(body),
        dialect.kernel_close.format(name=KERNEL_NAME, params=params, args=args),
    ]
    return "\n".join(source)
