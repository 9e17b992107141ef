"""Render a Stockham FFT pass (plan.PassSpec) as kernel source in any dialect.

Butterfly constants are computed in float64 on the host and printed with full precision;
twiddles come from a float64 sincospi of an exactly reduced integer ratio (no recurrences).
"""

from __future__ import annotations

import ctypes
import dataclasses
import decimal
import functools

from specux.kernels.codegen.dialects import Dialect
from specux.kernels.plan import RADICES, RADIX_CODE, FusedSpec, LoadSpec, PassSpec, StoreSpec

KERNEL_NAME = "specux_fft_pass"
FUSED_NAME = "specux_fft_fused"

PARAMS = (
    ("const void*", "in_ptr"),
    ("void*", "out_ptr"),
    ("const void*", "load_table"),
    ("const void*", "store_table"),
    ("long long", "batch"),
    ("double", "scale"),
    ("long long", "in_inner"),
    ("long long", "in_outer_stride"),
    ("long long", "in_inner_stride"),
    ("long long", "in_elem_stride"),
    ("long long", "out_inner"),
    ("long long", "out_outer_stride"),
    ("long long", "out_inner_stride"),
    ("long long", "out_elem_stride"),
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
_REAL_STORAGE = {"float16": "unsigned short", "float32": "float", "float64": "double"}


def _literal(value: float) -> str:
    """A double literal with every digit (repr round-trips exactly)."""
    if value == 0.0:
        return "0.0"
    text = repr(float(value))
    return text if ("e" in text or "." in text) else text + ".0"


_PI = decimal.Decimal("3.14159265358979323846264338327950288419716939937510582097494459")


@functools.cache
def unit_root(numerator: int, denominator: int) -> tuple[float, float]:
    """(cos, sin) of 2 pi numerator / denominator, correctly rounded to float64.

    Evaluated in 60-digit decimal arithmetic after reducing to the nearest quarter turn, so
    exact values (0, +-1, +-1/2) come out exact and the rest within half an ulp.
    """
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        numerator %= denominator
        quarter = round(4 * numerator / denominator)
        rest = decimal.Decimal(numerator) / denominator - decimal.Decimal(quarter) / 4
        angle = 2 * _PI * rest  # |angle| <= pi / 4
        sin_sum, cos_sum = decimal.Decimal(0), decimal.Decimal(0)
        power, k = decimal.Decimal(1), 0
        while True:  # Taylor series of cos and sin together
            cos_term = power if k % 4 == 0 else (-power if k % 4 == 2 else 0)
            sin_term = power if k % 4 == 1 else (-power if k % 4 == 3 else 0)
            cos_sum += cos_term
            sin_sum += sin_term
            k += 1
            power = power * angle / k
            if abs(power) < decimal.Decimal(10) ** -55:
                break
        c, s = float(cos_sum), float(sin_sum)
    rotate = quarter % 4  # multiply by i ** rotate, exactly
    return [(c, s), (-s, c), (-c, -s), (s, -c)][rotate]


def _types(fn: str) -> str:
    return f"""
struct cpx {{ real_t re, im; }};
struct specux_c16 {{ unsigned short re, im; }};
struct specux_c32 {{ float re, im; }};
struct specux_c64 {{ double re, im; }};
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
{fn} real_t to_real(float v) {{ return (real_t)v; }}
{fn} real_t to_real(double v) {{ return (real_t)v; }}
{fn} void put(cpx* p, cpx v) {{ *p = v; }}
{fn} void put(specux_c16* p, cpx v) {{
    specux_c16 r = {{specux_f2h((float)v.re), specux_f2h((float)v.im)}}; *p = r;
}}
{fn} void put(specux_c32* p, cpx v) {{ specux_c32 r = {{(float)v.re, (float)v.im}}; *p = r; }}
{fn} void put(specux_c64* p, cpx v) {{ specux_c64 r = {{(double)v.re, (double)v.im}}; *p = r; }}
{fn} void put(unsigned short* p, real_t v) {{ *p = specux_f2h((float)v); }}
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
    return _REAL_STORAGE[storage] if mode == "real" else _COMPLEX_STORAGE[storage]


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
    """v[k] = sum_r u[r] exp(sign 2 pi i r k / radix), unrolled with literal constants."""
    if radix == 1:
        return ["    cpx v0 = u0;"]
    if radix == 2:
        return ["    cpx v0 = cadd(u0, u1);", "    cpx v1 = csub(u0, u1);"]
    if radix == 4:
        # (u1 - u3) times sign*i, exactly.
        rot = "{-d.im, d.re}" if sign > 0 else "{d.im, -d.re}"
        return [
            "    cpx a = cadd(u0, u2), c = csub(u0, u2), e = cadd(u1, u3), d = csub(u1, u3);",
            f"    cpx t = {rot};",
            "    cpx v0 = cadd(a, e);",
            "    cpx v2 = csub(a, e);",
            "    cpx v1 = cadd(c, t);",
            "    cpx v3 = csub(c, t);",
        ]
    lines = []
    for k in range(radix):
        re_terms, im_terms = [], []
        for r in range(radix):
            turn = (r * k) % radix
            c, s = unit_root(turn, radix)
            s = sign * s
            if turn == 0:
                re_terms.append(f"u{r}.re")
                im_terms.append(f"u{r}.im")
                continue
            # (a + ib)(c + is) = (ac - bs) + i(as + bc)
            re_terms.append(f"({_literal(c)} * u{r}.re - {_literal(s)} * u{r}.im)")
            im_terms.append(f"({_literal(s)} * u{r}.re + {_literal(c)} * u{r}.im)")
        real, imag = " + ".join(re_terms), " + ".join(im_terms)
        lines.append(f"    cpx v{k} = {{(real_t)({real}), (real_t)({imag})}};")
    return lines


def _support(spec: PassSpec | FusedSpec, dialect: Dialect, params: str) -> list[str]:
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


FUSED_PARAMS = PARAMS + (("long long", "radix_code"), ("long long", "npasses"))


def _butterfly_fn(fn: str, radix: int, sign: int) -> str:
    """One radix-``radix`` Stockham butterfly between shared-memory buffers."""
    lines = [
        f"{fn} void butterfly{radix}(const cpx* src, cpx* dst, long long n, long long stride,",
        "                              long long i) {",
        f"    const long long quarter = n / {radix}LL;",
        "    const long long k = i % stride;",
    ]
    lines += [f"    cpx u{r} = src[i + {r}LL * quarter];" for r in range(radix)]
    if radix > 1:
        lines.append("    if (stride > 1) {")
        lines += [f"        u{r} = cmul(u{r}, twiddle({r}LL * k, stride * {radix}LL));"
                  for r in range(1, radix)]  # fmt: skip
        lines.append("    }")
    lines += _butterfly(radix, sign)
    lines.append(f"    const long long j0 = (i - k) * {radix}LL + k;")
    lines += [f"    dst[j0 + {r}LL * stride] = v{r};" for r in range(radix)]
    lines.append("}")
    return "\n".join(lines) + "\n"


def fused_source_key(spec: FusedSpec) -> FusedSpec:
    """The spec without its launch-time sizes (n, radices, valid, logical)."""
    return dataclasses.replace(
        spec, n=0, radices=(),
        load=dataclasses.replace(spec.load, valid=0),
        store=dataclasses.replace(spec.store, valid=0, logical=0),
    )  # fmt: skip


def fused_launch_args(spec: FusedSpec) -> tuple[int, ...]:
    """(n, stride, load_valid, store_valid, logical, radix_code, npasses) of a fused launch."""
    n = spec.n
    return (n, 1, spec.load.valid or n, spec.store.valid or n, spec.store.logical or n,
            spec.radix_code, len(spec.radices))  # fmt: skip


def render_fused(spec: FusedSpec, dialect: Dialect) -> str:
    """One block per transform: load into shared memory, all passes there, store.

    Entry point ``specux_fft_fused`` with :data:`FUSED_PARAMS`; dynamic shared memory of
    ``spec.shared_bytes``. The radix of each pass is read from ``radix_code`` at run time, so
    one compiled kernel serves every length that fits a block.
    """
    spec = fused_source_key(spec)
    fn = dialect.function
    params = ", ".join(f"{t} {n}" for t, n in FUSED_PARAMS)
    args = ", ".join(n for _, n in FUSED_PARAMS)
    cases = []
    for radix in sorted(set(RADICES)):
        cases.append(
            f"            case {RADIX_CODE[radix]}:\n"
            f"                for (long long i = tid; i < n / {radix}LL; i += nthreads)\n"
            f"                    butterfly{radix}(src, dst, n, span, i);\n"
            f"                radix = {radix};\n"
            "                break;"
        )
    body = f"""
    cpx* src = smem;
    cpx* dst = smem + n;
    for (long long j = tid; j < n; j += nthreads) src[j] = load(b, j, {args});
    {dialect.barrier}
    long long span = 1;  // product of the radices done so far (the passes' stride)
    for (long long pass = 0; pass < npasses; ++pass) {{
        long long radix = 1;
        switch ((int)((radix_code >> (4 * pass)) & 15)) {{
{chr(10).join(cases)}
            default:
                break;
        }}
        {dialect.barrier}
        span *= radix;
        cpx* swap = src; src = dst; dst = swap;
    }}
    for (long long j = tid; j < n; j += nthreads) store(b, j, src[j], {args});
"""
    source = [
        f"// specux fused FFT: sign={spec.sign} precision={spec.precision}",
        *_support(spec, dialect, params),
        *(_butterfly_fn(fn, radix, spec.sign) for radix in sorted(set(RADICES))),
        dialect.fused_open.format(name=FUSED_NAME, params=params),
        body,
        dialect.fused_close.format(name=FUSED_NAME, params=params, args=args),
    ]
    return "\n".join(source)
