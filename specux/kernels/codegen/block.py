"""Render a block FFT kernel (plan.BlockSpec): whole transforms inside one thread block.

Each thread owns a few butterflies per stage. A stage reads its inputs (from global memory
with the prologue for the first stage, else from shared memory), applies table twiddles,
runs a straight-line butterfly (codegen.butterfly) in registers and writes the outputs back
to shared memory in Stockham order (to global memory, with the epilogue, for the last stage),
so one launch reads and writes each element once. Sizes are compile-time constants: every
index in the block is 32-bit arithmetic with constant divisors; only the row base of a
transform is 64-bit (computed once per thread).

Shared memory holds complex values with index ``j`` at ``j + (j >> spec.shift)`` of the
transform's slot of ``spec.slot_size`` points (plan.SKEW, or plan.shared_layout's choice for
lengths other than powers of two), which keeps the strides of the stage writes off a single
bank. Staged transfers
(``load_staged`` / ``store_staged``) move whole blocks between global and shared memory with
the block's transforms interleaved, so columns (strided transforms, the four-step passes) are
read and written in contiguous runs.
"""

from __future__ import annotations

import dataclasses
import functools

from specux.kernels.codegen.butterfly import Code, small_dft
from specux.kernels.codegen.dialects import Dialect
from specux.kernels.codegen.fft import _REAL, LAYOUT_PARAMS, _storage_type, _types
from specux.kernels.plan import (
    EXPAND_UNROLLED,
    INVERSE_VALUES,
    USER,
    BlockSpec,
    loads_walk,
    stores_walk,
    untangle_slots,
)

BLOCK_NAME = "specux_fft_block"
# a band of the filterbank tables (transform_exec.bank_tables): its first input, its inputs
BAND_RECORD = "struct alignas(8) band_t { int first, count; };"

BLOCK_PARAMS = (
    ("const void*", "in_ptr"),
    ("void*", "out_ptr"),
    ("const void*", "twiddles"),
    ("const void*", "load_table"),
    ("const void*", "store_table"),
    ("long long", "batch"),
    ("double", "scale"),
    *LAYOUT_PARAMS,
    # transform b is column c = b % cols of user row u = b / cols; element j of it is logical
    # index c * cmul + j * jmul of that row (cols 1, cmul 0, jmul 1 for a plain transform)
    ("long long", "cols"),
    ("long long", "in_cmul"),
    ("long long", "in_jmul"),
    ("long long", "out_cmul"),
    ("long long", "out_jmul"),
    ("long long", "load_valid"),
    ("long long", "store_valid"),
    ("long long", "logical"),
    ("long long", "total"),  # the four-step length (twist modulus)
    # BlockSpec.twist: the float64 roots W_total^(J q), q < total / J (J = spec.threads: the
    # staged store's step in j), which the stores multiply onto each thread's W^(c j0)
    ("const void*", "twists"),
    # framing (LoadSpec.frames): the signal's length, the padding before it, the padded
    # samples' source indices (int64: pad left, then pad right), the real window of n points
    ("long long", "sig_len"),
    ("long long", "pad"),
    ("const void*", "pad_table"),
    ("const void*", "window"),
    ("double", "eps"),  # the dB floor of StoreSpec.value "db" and of reduce "bank_db"
    # StoreSpec.reduce: int32 (first bin, bins) per band (BAND_RECORD), the weights, the
    # band count, the dB factor, the exponent of StoreSpec.value "pow"; StoreSpec.value
    # "cotangent" / "adjoint": the real factors, the exponent, the adjoint's inverse scale in
    # ``factor`` (with StoreSpec.expand: rows of n_bands values to expand through the bank
    # tables)
    ("const void*", "bands"),
    ("const void*", "weights"),
    ("const void*", "factors"),
    ("long long", "n_bands"),
    ("double", "factor"),
    ("double", "exponent"),
    # StoreSpec.ola_hop: frames per signal (the transforms are signal b / cols's frame
    # b % cols, live below ``frames``: cols rounds them up to whole blocks), the output's
    # length and its first and stop padded positions, the envelope's reciprocals (the compute
    # precision, stop - start values) and the seams' scratch (see _overlap_add)
    ("long long", "frames"),
    ("long long", "out_len"),
    ("long long", "start"),
    ("long long", "stop"),
    ("const void*", "envelope"),
    ("void*", "seams"),
    # the adjoint's sums at the padded positions of an indexed padding (2 pad a signal, the
    # compute precision: pad before the signal, then pad after), for the fold gather
    ("void*", "edges"),
)


def _frame_load_lambda(spec: BlockSpec) -> str:
    """Element ``g`` of the frame starting at sample ``org`` (padding and window applied)."""
    load = spec.load
    in_t = _storage_type(load.storage, "real")
    step = "" if spec.unit_in else " * in_elem_stride"
    lines = [
        "    auto load = [&](long long base, long long org, long long g) -> cpx {",
        f"        const {in_t}* in = (const {in_t}*)in_ptr;",
        "        cpx v = {0, 0};",
    ]
    if load.valid:
        lines.append("        if (g >= load_valid) return v;  // zero padding")
    lines.append("        long long pos = org + g;")
    if load.frames == "indexed":
        lines += [
            "        const long long* sources = (const long long*)pad_table;",
            "        if (pos < 0) pos = sources[pos + pad];",
            "        else if (pos >= sig_len) pos = sources[pad + pos - sig_len];",
        ]
    else:
        lines.append("        if (pos < 0 || pos >= sig_len) return v;")
    lines.append(f"        v.re = to_real(in[base + pos{step}]);")
    if load.window:
        lines.append("        v.re *= ((const real_t*)window)[g];")
    if load.table:
        lines.append("        v = cmul(v, ((const cpx*)load_table)[g]);")
    lines += ["        return v;", "    };"]
    return "\n".join(lines + _pair_lambda(spec))


def _paired(spec: BlockSpec) -> bool:
    """Whether the r2c kernel reads its real samples 2j, 2j + 1 by one vector load when its
    row (and window) are aligned for it and every sample is inside the signal (decided per
    transform at run time, one branch around the first stage's loads): signals stored in the
    compute precision, unit stride, no load table."""
    load = spec.load
    return (spec.pack == "r2c" and load.storage == spec.precision and spec.unit_in
            and not load.table and (bool(load.frames) or load.mode == "real"))  # fmt: skip


def _pair_lambda(spec: BlockSpec) -> list[str]:
    """``load_pair(base, org, j)``: samples 2j, 2j + 1 from sample ``org`` of the row at
    ``base`` (and the window's pair for frames): the same products as two calls of load()."""
    if not _paired(spec):
        return []
    lines = [
        "    struct alignas(2 * sizeof(real_t)) pair_t { real_t a, b; };",
        "    auto load_pair = [&](long long base, long long org, int j) -> cpx {",
        "        const pair_t x = ((const pair_t*)((const real_t*)in_ptr + base + org))[j];",
        "        cpx v = {x.a, x.b};",
    ]
    if spec.load.window:
        lines += [
            "        const pair_t w = ((const pair_t*)window)[j];",
            "        v.re *= w.a; v.im *= w.b;",
        ]
    return lines + ["        return v;", "    };"]


def _pair_condition(spec: BlockSpec, p: str) -> list[str]:
    """The slot's ``pair`` flag (see :func:`_paired`)."""
    if not _paired(spec):
        return []
    span = 2 * spec.n  # the transform's real samples
    valid = f" && load_valid >= {span}" if spec.load.valid else ""
    if spec.load.frames:  # inside the signal, window aligned too
        org = f"in_org{p}"
        inside = f" && {org} >= 0 && {org} + {span} <= sig_len"
        window = " | (unsigned long long)window"
    else:
        org, inside, window = f"in_g{p}", "", ""
    return [
        f"    const bool pair{p} = live{p}{inside}{valid}"
        f" && ((unsigned long long)((const real_t*)in_ptr + in_base{p} + {org}){window})"
        " % (2 * sizeof(real_t)) == 0;"
    ]


def _load_lambda(spec: BlockSpec) -> str:
    load = spec.load
    if load.frames:
        return _frame_load_lambda(spec)
    in_t = _storage_type(load.storage, load.mode)
    lines = [
        "    auto load = [&](long long base, long long g) -> cpx {",
        f"        const {in_t}* in = (const {in_t}*)in_ptr;",
        "        cpx v = {0, 0};",
    ]
    if load.valid:
        lines.append("        if (g >= load_valid) return v;  // zero padding")
    step = "" if spec.unit_in else " * in_elem_stride"
    if load.mode in ("complex", "real"):
        lines += _load_value(spec, f"base + g{step}")
    else:  # hermitian: the half spectrum of a load_valid-point real signal
        lines += [
            "        const bool mirrored = 2 * g > load_valid;",
            "        const long long source = mirrored ? load_valid - g : g;",
            f"        v = to_cpx(in[base + source{step}]);",
            "        if (mirrored) v.im = -v.im;",
            "        if (source == 0 || 2 * source == load_valid) v.im = (real_t)0;",
        ]
    if load.table:
        lines.append("        v = cmul(v, ((const cpx*)load_table)[g]);")
    lines += ["        return v;", "    };"]
    if (spec.load_staged or spec.interleave) and loads_walk(spec.load):  # element g at ``off``
        lines += [
            "    auto load_at = [&](long long off, long long g) -> cpx {",
            f"        const {in_t}* in = (const {in_t}*)in_ptr;",
            "        cpx v = {0, 0};",
            *(["        if (g >= load_valid) return v;  // zero padding"] if load.valid else []),
            *_load_value(spec, "off"),
            *(["        v = cmul(v, ((const cpx*)load_table)[g]);"] if load.table else []),
            "        return v;",
            "    };",
        ]
    return "\n".join(lines + _pair_lambda(spec))


def _load_value(spec: BlockSpec, offset: str) -> list[str]:
    """The load lambdas' read of a complex or real element at ``offset`` into ``v``."""
    if spec.load.mode == "complex":
        return [f"        v = to_cpx(in[{offset}]);"]
    return [f"        v.re = to_real(in[{offset}]);"]


def db_of(factor: str, value: str) -> str:
    """``factor * log10(max(value, eps))`` as the kernels write it: ``value < eps ? eps :
    value``, which keeps a NaN value a NaN (numpy's, torch's and librosa's maximum; ``value >
    eps ? value : eps`` turned it into the floor). Every dB step of the block and gather
    kernels renders through here."""
    return f"{factor} * log10({value} < (real_t)eps ? (real_t)eps : {value})"


def _store_lambda(spec: BlockSpec) -> str:
    store = spec.store
    value = store.value
    if value in INVERSE_VALUES:
        return _adjoint_store_lambda(spec)
    out_t = _storage_type(store.storage, store.mode if value in _COMPLEX_VALUES else "real")
    target = _out_element(spec, "out")
    reduce_bound = []
    if store.reduce:  # the slot's reduce values in shared memory (base: the slot's offset)
        target = "(pw + base + g)[o]"
        if spec.pack != "r2c" or store.bins <= spec.n:  # the packed kernel stores 0 .. n
            reduce_bound = [f"        if (at >= {store.bins}) return;"]
    steps = []  # the value's lines from v
    if value == "complex":
        result = "v.re" if store.mode == "real" else "v"
    elif value == "cotangent":
        # the bin is g + o (g alone is the row of a constant offset o)
        steps = _cotangent(_out_element(spec, "((const real_t*)factors + base)"), "at")
        result = "v"
    else:
        steps = ["        const real_t power = v.re * v.re + v.im * v.im;"]
        result = {
            "power": "power",
            "magnitude": "sqrt(power)",
            "db": db_of("(real_t)10", "power"),
            "pow": "pow(power, (real_t)(0.5 * exponent))",
        }[value]
    if spec.reduce_in_slot:
        # The last stage holds each bin's value (reduce_value) until the slot's reads are
        # done, then writes it (store_value: _untangled_last_stage). The value's steps take
        # v alone (a scale; plan gives no stored table a slot); the bounds go with ``at``.
        return "\n".join([
            "    auto reduce_value = [&](cpx v) -> real_t {",
            *_store_steps(spec),
            *steps,
            f"        return {result};",
            "    };",
            "    auto store_value = [&](long long base, long long g, real_t value, int o) {",
            "        const long long at = g + o;",
            *_store_bounds(spec),
            *reduce_bound,
            f"        {target} = value;",
            "    };",
        ])  # fmt: skip
    lines = [  # element g + o of the row at base (o: a constant offset, _final_store)
        "    auto store = [&](long long base, long long g, cpx v, int o) {",
        f"        {out_t}* const out = ({out_t}*)out_ptr + base;  // the row",
        "        const long long at = g + o;",
        *_store_checks(spec),
        *reduce_bound,
        *steps,
        f"        {target} = {result};" if store.reduce else f"        put(&{target}, {result});",
        "    };",
    ]
    if (spec.store_staged or spec.interleave) and stores_walk(spec.store):  # ``at`` at ``off``
        lines += [
            "    auto store_at = [&](long long off, long long at, cpx v) {",
            *_store_checks(spec),
            f"        put(&(({out_t}*)out_ptr)[off], {result});",
            "    };",
        ]
    return "\n".join(lines)


def _store_checks(spec: BlockSpec) -> list[str]:
    """The store lambdas' lines before the value: element ``at``'s bounds
    (:func:`_store_bounds`), then its table and scale (:func:`_store_steps`)."""
    return _store_bounds(spec) + _store_steps(spec)


def _store_bounds(spec: BlockSpec) -> list[str]:
    """The store lambdas' returns for an element ``at`` not stored."""
    store, lines = spec.store, []
    if store.valid:
        lines.append("        if (at >= store_valid) return;")
    # The packed r2c kernels untangle bins 0 .. n of the 2n-point transform only (logical is
    # 2n, fft_exec._block), so they need no check of the half.
    if store.mode == "half" and spec.pack != "r2c":
        lines.append("        if (2 * at > logical) return;  // bins 0 .. logical / 2")
    return lines


def _store_steps(spec: BlockSpec) -> list[str]:
    """The store lambdas' changes of the value ``v`` of element ``at``: its table, scale."""
    store, lines = spec.store, []
    if store.table:
        lines.append("        v = cmul(v, ((const cpx*)store_table)[at]);")
    if store.scaled:
        lines.append("        v.re *= (real_t)scale; v.im *= (real_t)scale;")
    return lines


_COMPLEX_VALUES = ("complex", "cotangent")


def _out_element(spec: BlockSpec, row: str) -> str:
    """The store's element ``g + o`` of the output row ``row`` (the cotangent's factors are
    laid out alike). With unit strides the constant ``o`` is a separate index, which the
    compiler folds into the address (``row[g + o]`` it computes anew for every store)."""
    return f"({row} + g)[o]" if spec.unit_out else f"{row}[at * out_elem_stride]"


def _cotangent(factor: str, g: str) -> list[str]:
    """``v`` (bin ``g`` of X) -> the r2c adjoint's input for a real cotangent F of ``|X| ** e``:
    ``F d|X|^e / dX* = F e |X|^(e - 2) X`` (zero where X is, for e < 2), halved off DC and
    Nyquist (the one-sided spectrum's Hermitian weights). F is the expression ``factor``
    (read from the ``factors`` argument); ``exponent`` is e."""
    return [
        f"        real_t f = {factor};",
        f"        if (2 * {g} != 0 && 2 * {g} != logical) f *= (real_t)0.5;",
        "        if (exponent != 2.0) {",
        "            const real_t m = sqrt(v.re * v.re + v.im * v.im);",
        "            f = m > (real_t)0 ? f * (real_t)exponent * pow(m, (real_t)(exponent - 2.0))"
        " : (real_t)0;",
        "        } else {",
        "            f *= (real_t)2;",
        "        }",
        "        v.re *= f; v.im *= f;",
    ]


def _adjoint_store_lambda(spec: BlockSpec) -> str:
    """The store of the fused adjoint (StoreSpec.value ``adjoint``, :func:`_adjoint`): real
    sample g of the inverse transform, scaled by ``factor`` and weighted by the window. The
    convolution's (value ``convolve``) has no window and stores the frame's samples below
    ``store_limit`` only (set per transform after its slot: :func:`_convolve_limit`)."""
    out_t = _storage_type(spec.store.storage, "real")
    convolve = spec.store.value == "convolve"
    return "\n".join([
        *(["    long long store_limit = 0;"] if convolve else []),
        "    auto store = [&](long long base, long long g, cpx v, int o) {",
        f"        {out_t}* const out = ({out_t}*)out_ptr + base;  // the row",
        "        const long long at = g + o;",
        *(["        if (at >= store_limit) return;"] if convolve else []),
        "        const real_t y = v.re * (real_t)factor;",
        f"        put(&{_out_element(spec, 'out')}, "
        + ("y);" if convolve else "y * ((const real_t*)window)[at]);"),
        "    };",
    ])  # fmt: skip


def _convolve_limit(spec: BlockSpec) -> list[str]:
    """The overlap-save convolution's outputs of the thread's frame (StoreSpec.value
    ``convolve``): its first ``store_valid`` samples (the hop), fewer where the row of
    ``out_len`` outputs ends (the frame is b - sig * cols, ``in_cmul`` samples apart)."""
    if spec.store.value != "convolve":
        return []
    return [
        "    if (live) {",
        "        const long long left = out_len - (b - sig * cols) * in_cmul;",
        "        store_limit = left < store_valid ? left : store_valid;",
        "    }",
    ]


def _unpack_lambda(spec: BlockSpec) -> list[str]:
    """The c2r kernel's reads of the row's half spectrum of n + 1 bins X (the Hermitian
    load's mirror of a 2n-point signal, whose logical length is always 2n here, with the
    indices known): ``tangle(a, b, w)``, point k of the packed transform from a = X[k] and
    b = conj X[n - k] (:func:`_tangle_lines`; b = X[n] for k = 0, DC's and Nyquist's
    imaginary parts dropped) and its root w = W^k, and for the loads of the first stage
    ``unpack(base, g0, k)``, which reads them. Staged loads read a bin pair once for both
    its points instead (:func:`_c2r_staged_loads`)."""
    if spec.split or spec.load.valid or spec.load.table or spec.load.mode != "hermitian":
        raise ValueError("a c2r kernel reads a whole half spectrum")
    lines = [
        "    auto tangle = [&](const cpx a, const cpx b, const cpx w) -> cpx {",
        *[f"        {line}" for line in _tangle_lines("w")],
        "        return z;",
        "    };",
    ]
    if spec.load_staged:
        return lines
    in_t = _storage_type(spec.load.storage, "complex")
    step = "" if spec.unit_in else " * in_elem_stride"
    return lines + [
        "    auto unpack = [&](long long base, long long g0, int k) -> cpx {",
        f"        const {in_t}* const row = (const {in_t}*)in_ptr + base + g0{step};",
        f"        cpx a = to_cpx(row[(long long)k{step}]);",
        f"        cpx b = to_cpx(row[(long long)({spec.n} - k){step}]);",
        "        if (k == 0) { a.im = (real_t)0; b.im = (real_t)0; } else { b.im = -b.im; }",
        "        return tangle(a, b, tw(k, 0));",
        "    };",
    ]


def _c2r_staged_loads(spec: BlockSpec) -> list[str]:
    """The staged loads of a c2r kernel (into ``xfer``, :func:`render_block`): job k of a
    slot reads bins p = X[k] and q = X[n - k] once and stores points k (a = p, b = conj q)
    and n - k (a = q, b = conj p) of the packed transform; job 0 points 0 (X[0], X[n], their
    imaginary parts dropped) and, for an even n, n / 2 (X[n / 2] and its conjugate). The
    values are :func:`_unpack_lambda`'s, from half the global reads; a dead slot's are 0.
    Point n - k's root W^(n - k) = -conj W^k is turned from point k's (exact: the table's
    symmetry, fft_exec._roots)."""
    n, per_block, threads = spec.n, spec.per_block, spec.block_threads
    jobs = (n + 1) // 2
    in_t = _storage_type(spec.load.storage, "complex")
    step = "" if spec.unit_in else " * in_elem_stride"
    lines = [
        f"    const {in_t}* const row2 = (const {in_t}*)in_ptr + in_base2 + in_g2{step};",
        f"    for (int r = 0; r < {-(-jobs * per_block // threads)}; ++r) {{",
        f"        const int k = (tid + r * {threads}) / {per_block};",
    ]
    if jobs * per_block % threads:
        lines.append(f"        if (k >= {jobs}) break;")
    lines += [
        "        cpx p = {0, 0}, q = {0, 0};",
        f"        if (live2) {{ p = to_cpx(row2[(long long)k{step}]); "
        f"q = to_cpx(row2[(long long)({n} - k){step}]); }}",
        "        if (k == 0) {",
        "            p.im = (real_t)0; q.im = (real_t)0;",
        "            xfer[skew(0)] = tangle(p, q, tw(0, 0));",
    ]
    if n % 2 == 0:
        lines += [
            f"            const cpx h = live2 ? to_cpx(row2[{n // 2}LL{step}]) : cpx{{0, 0}};",
            f"            xfer[skew({n // 2})] = tangle(h, cpx{{h.re, -h.im}}, tw({n // 2}, 0));",
        ]
    return lines + [
        "        } else {",
        "            const cpx wk = tw(k, 0);",
        "            xfer[skew(k)] = tangle(p, cpx{q.re, -q.im}, wk);",
        f"            xfer[skew({n} - k)] = tangle(q, cpx{{p.re, -p.im}}, "
        f"{_turned('wk', 2, True)});",
        "        }",
        "    }",
    ]


def _user_row(spec: BlockSpec, b: str) -> str:
    """The user row (of the layout arguments) of block transform ``b``: the transform itself
    (a frame of a signal, a plain row), or for a four-step column its row ``b / cols``."""
    return f"{b} / cols" if spec.split and not spec.load.frames else b


def _ola_block(spec: BlockSpec) -> list[str]:
    """The signal ``bsig`` and the first frame ``c0`` of an overlap-add kernel's block (its
    frames are one signal's; ``cols``, the frames a signal, rounded up to whole blocks),
    ``bpos`` its place among the signal's blocks: a 32-bit division (blocks, and each
    signal's frames times the hop, stay below 2 ** 31: transform_exec.istft_fusable)."""
    return [
        f"    const unsigned per_sig = (unsigned)(cols / {spec.per_block});  // blocks a signal",
        "    const unsigned bpos = (unsigned)block % per_sig;",
        "    const long long bsig = (unsigned)block / per_sig;",
        f"    const long long c0 = (long long)bpos * {spec.per_block};",
    ]


def _slot(prefix: str, slot: str, spec: BlockSpec) -> list[str]:
    """Row bases and logical offsets of the transform in block slot ``slot``."""
    p = prefix
    lines = [f"    const long long b{p} = block * {spec.per_block}LL + {slot};"]
    if spec.store.ola_hop:  # frame c of signal sig: the block's (_ola_block)
        lines += [
            f"    const long long sig{p} = bsig, c{p} = c0 + {slot};",
            f"    const bool live{p} = b{p} < batch && c{p} < frames;",
        ]
        if spec.load.frames:  # the adjoint: the frame's samples start at c * hop - pad
            return lines + [
                f"    const long long in_org{p} = c{p} * in_cmul - pad;",
                f"    const long long in_base{p} = live{p} ? row_base(sig{p}, in_inner, "
                "in_outer_stride, in_inner_stride) : 0;",
                *_pair_condition(spec, p),
            ]
        return lines + [
            f"    const long long in_base{p} = live{p} ? row_base(sig{p} * frames + c{p}, "
            "in_inner, in_outer_stride, in_inner_stride) : 0;",
            f"    const long long in_g{p} = 0;",
        ]
    lines.append(f"    const bool live{p} = b{p} < batch;")
    if spec.load.frames:  # frame c of signal s: its samples start at c * hop - pad
        lines += [
            f"    const long long sig{p} = b{p} / cols;",
            f"    const long long u{p} = {_user_row(spec, f'b{p}')};",
            f"    const long long c{p} = 0;",
            f"    const long long in_org{p} = (b{p} - sig{p} * cols) * in_cmul - pad;",
            f"    const long long in_base{p} = live{p} ? row_base(sig{p}, in_inner, "
            "in_outer_stride, in_inner_stride) : 0;",
        ]
    elif spec.split:
        lines += [
            f"    const long long u{p} = {_user_row(spec, f'b{p}')};",
            f"    const long long c{p} = b{p} - u{p} * cols;",
        ]
    else:
        lines += [f"    const long long u{p} = {_user_row(spec, f'b{p}')};",
                  f"    const long long c{p} = 0;"]  # fmt: skip
    if not spec.load.frames:
        lines.append(
            f"    const long long in_base{p} = live{p} ? row_base(u{p}, in_inner, "
            "in_outer_stride, in_inner_stride) : 0;"
        )
    # With a reduce, out_base is the slot's values in shared memory (the reduce finds the
    # output rows of the block's transforms itself).
    if spec.store.reduce:
        lines.append(f"    const long long out_base{p} = (long long){slot} * {spec.reduce_stride};")
    else:
        lines.append(
            f"    const long long out_base{p} = live{p} ? row_base(u{p}, out_inner, "
            "out_outer_stride, out_inner_stride) : 0;"
        )
    lines += [
        f"    const long long in_g{p} = c{p} * in_cmul;",
        f"    const long long out_g{p} = c{p} * out_cmul;",
    ]
    return lines + _pair_condition(spec, p)


def _global_load(spec: BlockSpec, j: str, p: str = "", paired: bool = False) -> str:
    """The value of element ``j`` (an int expression) of the slot's transform, from global
    (``paired``: by the vector loads of :func:`_paired`)."""
    if paired:
        org = f"in_org{p}" if spec.load.frames else f"in_g{p}"
        return f"load_pair(in_base{p}, {org}, {j})"
    if spec.load.frames:
        if spec.pack == "r2c":
            return (f"cpx{{load(in_base{p}, in_org{p}, 2LL * ({j})).re, "
                    f"load(in_base{p}, in_org{p}, 2LL * ({j}) + 1).re}}")  # fmt: skip
        return f"load(in_base{p}, in_org{p}, (long long)({j}))"
    jmul = "" if spec.unit_in else " * in_jmul"
    g = f"in_g{p} + (long long)({j}){jmul}"
    if spec.pack == "r2c":  # even / odd real samples as re / im
        g2 = f"in_g{p} + 2LL * ({j}){jmul}"
        step = "1" if spec.unit_in else "in_jmul"
        return f"cpx{{load(in_base{p}, {g2}).re, load(in_base{p}, {g2} + {step}).re}}"
    if spec.pack == "c2r":
        return f"unpack(in_base{p}, in_g{p}, {j})"
    return f"load(in_base{p}, {g})"


def _final_store(spec: BlockSpec, j: str, value: str, p: str = "", offset: int = 0,
                 root: str = "", call: str = "store") -> list[str]:  # fmt: skip
    """Store element ``j`` + ``offset`` (a constant) of the slot's transform (the epilogue),
    as statements calling ``call`` (the store lambda; ``store_value`` takes a held reduce
    value: :class:`_Held`); with unit output strides the offset reaches the store separately
    (:func:`_out_element`). A four-step twist kernel multiplies by its twiddle ``root``
    (:func:`_twist_rows`)."""
    jmul = "" if spec.unit_out else " * out_jmul"
    if offset and (spec.pack == "c2r" or spec.twist):
        raise ValueError("a constant store offset is for the plain stores")
    if spec.twist and not root:
        raise ValueError("a four-step twist store needs its root (the staged store's)")
    if spec.pack == "c2r":  # z[m] = x[2m] + i x[2m+1]
        g = f"out_g{p} + 2LL * ({j}){jmul}"
        step = "1" if spec.unit_out else "out_jmul"
        return [
            f"{call}(out_base{p}, {g}, cpx{{{value}.re, 0}}, 0);",
            f"{call}(out_base{p}, {g} + {step}, cpx{{{value}.im, 0}}, 0);",
        ]
    g = f"out_g{p} + (long long)({j}){jmul}"
    if offset and not spec.unit_out:
        g, offset = f"{g} + {offset}LL{jmul}", 0
    if spec.twist:  # the four-step twiddle of (column, element)
        return [f"{{ const cpx w = {root}; "
                f"{call}(out_base{p}, {g}, cmul({value}, w), 0); }}"]
    return [f"{call}(out_base{p}, {g}, {value}, {offset});"]


# The four-step twist kernel's stores (staged, or interleaved: _interleaved_stores) read
# this many twiddles (``twisted(r)``) at once, into registers, before storing them (0: each
# as its store needs it; timed with the staged stores, below). Read in turn,
# behind stores the compiler may not pass (a store may alias the table), each of a
# thread's 16 table reads was an L2 round trip of its own: complex64 2 ** 24's first pass
# took 193.5 us under ncu on an H100 where the second, with the same transforms and no
# twist, took 121.2. Eight (16 spilled at the 64-register bound of 1024 threads), on an
# H100 (`bench/fft.py --graph`, two rounds): fft_big 0.319 -> 0.306-0.308 ms, fft_prime
# 0.086 -> 0.079-0.080, the same errors. Four since the interleaved stores (H100,
# `tools/ab.py --rounds 2`, two calls, the same bits): fft_big 0.2868 -> 0.2812-0.2820 ms
# against 8; 2, 3 and 6 took 0.2822-0.2841, 0 took 0.2941 and 16 0.3301; fft_prime
# within 1% of 8 at 3, 4 and 6 (2: 0.0747 against 0.0767, in one call; its radix-4 last
# stage now reads in rounds of 2: _interleaved_stores).
TWIST_READS = 4


def _walk(spec: BlockSpec, side: str, j0: str = "j0", step: int = 0, p: str = "2") -> list[str]:
    """The staged transfers' walk over one side's elements (``side``: in or out): thread tid
    moves element j = tid / per_block + r * threads of its transfer slot's transform in
    transfer r, whose logical index ``{side}_at`` (that of _global_load / _final_store) and
    element offset ``{side}_off`` step by constants (an interleaved kernel's first and last
    stages walk their butterfly's points: ``j0`` its first, ``step`` apart, slot suffix
    ``p`` ""). Computed anew for each transfer, the 64-bit index products were most of the
    four-step passes' load and store instructions (ncu, H100, complex64 2 ** 24, staged: the
    twist pass 64.6M -> 54.7M warp instructions, the row pass 47.1M -> 40.4M, their times
    unchanged, as they wait on memory; fft_prime's passes, graph replays: 0.080 -> 0.075
    ms)."""
    return [
        f"    long long {side}_at = {side}_g{p} + (long long)({j0}) * {side}_jmul;",
        f"    long long {side}_off = {side}_base{p} + {side}_at * {side}_elem_stride;",
        f"    const long long {side}_at_step = {step or spec.threads}LL * {side}_jmul;",
        f"    const long long {side}_off_step = {side}_at_step * {side}_elem_stride;",
    ]


def _staged_loads(spec: BlockSpec, transfers: int) -> list[str]:
    """The staged loads: each transfer's element of the transfer slot's transform from
    global memory into shared memory."""
    lines = [f"    for (int r = 0; r < {transfers}; ++r) {{"]
    if loads_walk(spec.load):
        lines = [*_walk(spec, "in"), *lines,
                 f"        const int j = j0 + r * {spec.threads};",
                 "        const cpx v = live2 ? load_at(in_off, in_at) : cpx{0, 0};",
                 "        in_at += in_at_step; in_off += in_off_step;"]  # fmt: skip
    else:
        load = _global_load(spec, "j", "2")
        lines += [f"        const int j = (tid + r * {spec.block_threads}) / {spec.per_block};",
                  f"        const cpx v = live2 ? {load} : cpx{{0, 0}};"]  # fmt: skip
    return [*lines, "        xfer[skew(j)] = v;", "    }"]


def _staged_store(spec: BlockSpec, root: str, indent: str) -> list[str]:
    """The staged store of transfer ``r`` (a loop variable of the caller; the transfers in
    order, after :func:`_walk` where plan.stores_walk): its element of the transfer slot's
    transform from shared memory to the output, times ``root`` in a twist kernel; the lines
    indented by ``indent`` beyond the loop body's four spaces."""
    if stores_walk(spec.store):
        value = f"cmul(v, {root})" if spec.twist else "v"
        lines = [
            f"    const int j = j0 + r * {spec.threads};",
            "    const cpx v = xfer[skew(j)];",
            f"    if (live2) store_at(out_off, out_at, {value});",
            "    out_at += out_at_step; out_off += out_off_step;",
        ]
    else:
        lines = [
            f"    const int j = (tid + r * {spec.block_threads}) / {spec.per_block};",
            "    const cpx v = xfer[skew(j)];",
            "    if (live2) {",
            *[f"        {stmt}" for stmt in _final_store(spec, "j", "v", "2", root=root)],
            "    }",
        ]
    return [f"{indent}    {line}" for line in lines]


def _twist_rows(spec: BlockSpec, column: str = "c2", first: str = "") -> list[str]:
    """The four-step twiddles W^(c j) (W = exp(sign 2 pi i / total)) of the staged store's
    elements: a thread stores j = j0 + r J of one column c (J = spec.threads, r below the
    first radix), so W^(c j) = W^(c j0) W^(c J r): the first from a float64 sincospi once a
    thread, the second entry c r of the float64 table ``twists`` (W^(J q), q < total / J,
    which c r is below); their product in float64, rounded once (``twisted(r)``). Each
    element took a sincospi, a 64-bit remainder and a division before. ``column``: the
    column's variable (an interleaved kernel's own slot's ``c``), ``first``: j0 (the staged
    store's tid / per_block, an interleaved kernel's t)."""
    first = first or f"tid / {spec.per_block}"
    sign = "" if spec.sign > 0 else "-"
    conj = "-" if spec.sign > 0 else ""  # the table holds exp(-2 pi i J q / total)
    return [
        "    struct alignas(16) root_d { double re, im; };",
        "    const root_d* const twist_table = (const root_d*)twists;",
        "    double base_re, base_im;  // W^(c j0)",
        f"    specux_sincospi(2.0 * (double)(({column} * ({first})) % total)"
        " / (double)total, &base_im, &base_re);",
        f"    base_im = {sign}base_im;",
        "    auto twisted = [&](int r) -> cpx {",
        f"        const root_d u = twist_table[(long long)r * {column}];",
        f"        const double ur = u.re, ui = {conj}u.im;",
        "        return cpx{(real_t)(base_re * ur - base_im * ui),"
        " (real_t)(base_re * ui + base_im * ur)};",
        "    };",
    ]


def _lanes(spec: BlockSpec) -> int:
    """The distance in shared memory between a transform's consecutive (skewed) points:
    per_block in an interleaved kernel (its transforms' points alternate), else 1."""
    return spec.per_block if spec.interleave else 1


def _interleaved_stores(spec: BlockSpec, m: int, quarter: int, radix: int) -> list[str]:
    """An interleaved kernel's last stage stores butterfly ``i`` (= t + m threads, in scope)
    outputs v{m}_q, points i + q quarter of its own column, to global memory: their offsets
    walk (:func:`_walk`); a twist kernel's twiddles W^(c (t + r threads)), r = m + q quarter
    / threads (``interleaves``: threads divides quarter), read in rounds of TWIST_READS
    before their stores, as the staged store's (:data:`TWIST_READS`) -- or of half the
    butterfly's stores where one round would hold all of them, from radix 4 up, so that
    the second half's reads overlap the first half's stores. H100, `tools/ab.py --rounds 3`,
    the same bits: fft_prime, whose twist kernel's last stage is radix 4 (1024-point
    columns), 0.0752 -> 0.0732 ms with rounds of 2 instead of 4 (H200: 0.0692 -> 0.0681);
    fft_big's radix 16 kept rounds of 4 (2: 0.2827 -> 0.2841)."""
    lines = _walk(spec, "out", "i", quarter, "")
    group = min(radix, TWIST_READS) if spec.twist and TWIST_READS else 1
    if spec.twist and 4 <= radix <= group:
        group = radix // 2
    for q0 in range(0, radix, group):
        round_ = range(q0, min(radix, q0 + group))
        if spec.twist:
            lines += [f"    const cpx w{q} = twisted({m + q * (quarter // spec.threads)});"
                      for q in round_]  # fmt: skip
        for q in round_:
            value = f"cmul(v{m}_{q}, w{q})" if spec.twist else f"v{m}_{q}"
            lines.append(f"    store_at(out_off, out_at, {value});")
            if q < radix - 1:
                lines.append("    out_at += out_at_step; out_off += out_off_step;")
    return lines


def _mod(i: str, m: int) -> str:
    """``i % m`` of a non-negative int ``i`` (unsigned: a mask or a multiply, no sign fix)."""
    return f"(int)((unsigned){i} % {m}u)"


def _skew_step(spec: BlockSpec, stride: int, span: int) -> int | None:
    """The distance in shared memory between slot elements j + q stride and j + (q + 1)
    stride of a group, when it is the same for every q and every group (the stage's shared
    accesses then take one address and constant offsets), else None. A group lies inside an
    aligned run of ``span`` elements (span = radix x stride: a stage's write group, which
    starts at a multiple of span plus k < stride; span = n: a read group, i + q n / radix).
    The skew adds j >> shift: with stride a multiple of 2 ** shift that grows by stride >>
    shift a step; with span dividing 2 ** shift it stays put within the group."""
    unit = 1 << spec.shift
    if stride % unit == 0:
        return stride + stride // unit
    if unit % span == 0:
        return stride
    return None


def _butterfly(spec: BlockSpec, index: int, stride: int, tag: str,
               twiddles: tuple[str, ...] = ()) -> tuple[Code, list[str]]:  # fmt: skip
    """Statements computing butterfly ``i`` (an int in scope) of stage ``index`` from its
    inputs (global memory for the first stage, unless staged; else the slot's shared
    values) with the stage's twiddles (input q's read from the table, or ``twiddles[q - 1]``
    where given); returns them and the names of its outputs."""
    radix = (spec.radices or (1,))[index]
    quarter = spec.n // radix
    offset = spec.stage_offsets[index]
    code = Code(tag)
    inputs = [f"u{q}" for q in range(radix)]
    j = [f"i + {q * quarter}" for q in range(radix)]
    direct = index == 0 and not spec.load_staged
    if direct and _paired(spec):
        code.append(f"cpx {', '.join(inputs)};")
        code.append("if (pair) {")
        code += [f"    u{q} = {_global_load(spec, j[q], paired=True)};" for q in range(radix)]
        code.append("} else {")
        code += [f"    u{q} = live ? {_global_load(spec, j[q])} : cpx{{0, 0}};"
                 for q in range(radix)]  # fmt: skip
        code.append("}")
    elif direct and spec.interleave:  # the points' offsets walk (_walk)
        code += [line[4:] for line in _walk(spec, "in", "i", quarter, "")]
        for q in range(radix):
            code.append(f"cpx u{q} = live ? load_at(in_off, in_at) : cpx{{0, 0}};")
            if q < radix - 1:
                code.append("in_at += in_at_step; in_off += in_off_step;")
    elif direct:
        code += [f"cpx u{q} = live ? {_global_load(spec, j[q])} : cpx{{0, 0}};"
                 for q in range(radix)]  # fmt: skip
    else:
        step = _skew_step(spec, quarter, spec.n)
        if step is None:
            code += [f"cpx u{q} = my[skew({j[q]})];" for q in range(radix)]
        else:  # one address, constant offsets
            code.append("const cpx* const row = my + skew(i);")
            code += [f"cpx u{q} = row[{q * step * _lanes(spec)}];" for q in range(radix)]
    if stride > 1:  # the stage's own roots (BlockSpec.twiddle_index)
        code.append(f"const int k = {_mod('i', stride)};")
        for q in range(1, radix):
            given = twiddles[q - 1] if twiddles else ""
            code.append(f"u{q} = cmul(u{q}, {given or f'tw(k, {offset + (q - 1) * stride})'});")
    return code, small_dft(inputs, spec.sign, code)


def _untangle_lines(root: str = "tw(bin, 0)") -> tuple[str, ...]:
    """X[bin] (``x``) of the 2n-point half spectrum from ``za`` = Z[bin mod n] and ``zb`` =
    Z[(n - bin) mod n] of the n-point transform Z of the packed samples:
    X[k] = (Z[k] + conj Z[n-k]) / 2 - i W^k (Z[k] - conj Z[n-k]) / 2, W = exp(-2 pi i / 2n);
    ``root`` reads W^bin (``tw(row, offset)`` with row + offset = bin)."""
    return (
        "const cpx zc = {zb.re, -zb.im};",
        "const cpx e = {(real_t)0.5 * (za.re + zc.re), (real_t)0.5 * (za.im + zc.im)};",
        "const cpx d = {(real_t)0.5 * (za.re - zc.re), (real_t)0.5 * (za.im - zc.im)};",
        f"const cpx wd = cmul({root}, d);",
        "const cpx x = {e.re + wd.im, e.im - wd.re};",
    )


def _tangle_lines(root: str = "tw(k, 0)") -> tuple[str, ...]:
    """The inverse of :func:`_untangle_lines` (c2r's load): Z[k] (``z``) of the packed n-point
    transform from ``a`` = X[k] and ``b`` = conj X[n - k] (X[n] for k = 0; DC's and
    Nyquist's imaginary parts dropped): Z[k] = (a + b) + i W^k (a - b), W = exp(+2 pi i / 2n);
    ``root`` reads W^k (``tw`` of an inverse kernel)."""
    return (
        f"const cpx d = cmul({root}, csub(a, b));",
        "cpx z = {a.re + b.re - d.im, a.im + b.im + d.re};",
    )


def _untangle(spec: BlockSpec, k: str, za: str, zb: str, offset: int = 0,
              root: str = "", held: _Held | None = None, guard: str = "") -> list[str]:  # fmt: skip
    """Bin ``k + offset`` of the 2n-point half spectrum (:func:`_untangle_lines`), stored (its
    root ``root``, else read at the constant ``offset`` from row ``k``: the rows of a
    thread's bins are shared), or its reduce value kept in a register of ``held`` (stored
    later where ``guard`` holds: :func:`_untangled_last_stage`)."""
    bin_ = f"{k} + {offset}" if offset else k
    root = root or f"tw({k}, {offset})"
    if held is None:
        stores = [f"    if (live) {stmt}" for stmt in _final_store(spec, k, "x", offset=offset)]
    else:
        stores = [f"    {held.keep(k, offset, guard)} = reduce_value(x);"]
    return [
        "{",
        f"    const int bin = {bin_};",
        f"    const cpx za = {za}, zb = {zb};",
        *[f"    {line}" for line in _untangle_lines(root)],
        *stores,
        "}",
    ]


class _Held:
    """The reduce values an untangled last stage keeps in registers (BlockSpec.reduce_in_slot)
    until its slot's reads are done: per butterfly slot ``m`` of the thread, each value's
    register, bin (``k``, ``offset``) and the condition under which it was computed."""

    def __init__(self) -> None:
        self.values: list[tuple[int, str, str, int, str]] = []
        self.m = 0

    def keep(self, k: str, offset: int, guard: str) -> str:
        name = f"h{len(self.values)}"
        self.values.append((self.m, name, k, offset, guard))
        return name

    def declaration(self) -> str:
        return "    real_t " + ", ".join(f"{v[1]} = 0" for v in self.values) + ";"

    def stores(self, spec: BlockSpec, m: int) -> list[str]:
        """Slot m's values into the slot's reduce values (``store_value``)."""
        lines = []
        for _, name, k, offset, guard in (v for v in self.values if v[0] == m):
            cond = f"live && {guard}" if guard else "live"
            for stmt in _final_store(spec, k, name, offset=offset, call="store_value"):
                lines.append(f"        if ({cond}) {stmt}")
        return lines


def _held_butterfly(spec: BlockSpec, index: int, stride: int, tag: str, i: str,
                    names: list[str], guard: str = "",
                    twiddles: tuple[str, ...] = ()) -> list[str]:  # fmt: skip
    """Butterfly ``i`` of stage ``index`` in its own scope, its outputs assigned to ``names``
    (declared by the caller), under ``guard`` (``twiddles``: :func:`_butterfly`'s)."""
    code, outputs = _butterfly(spec, index, stride, tag, twiddles)
    code += [f"{names[q]} = {outputs[q]};" for q in range(len(names))]
    return [f"        {guard}{{", f"            const int i = {i};  // butterfly {tag}",
            *[f"            {line}" for line in code], "        }"]  # fmt: skip


def _turned(value: str, quarters: int, conjugate: bool) -> str:
    """(-i) ** quarters times ``value`` (a cpx name; ``conjugate``: its conjugate): its parts
    swapped and negated, exact."""
    re, im = (f"{value}.re", f"-{value}.im") if conjugate else (f"{value}.re", f"{value}.im")
    turned = [(re, im), (im, f"-{re}"), (f"-{re}", f"-{im}"), (f"-{im}", re)]
    parts = (v[2:] if v.startswith("--") else v for v in turned[quarters % 4])
    return "cpx{" + ", ".join(parts) + "}"


def _derived_root(spec: BlockSpec, bin_: int, mirrored: bool) -> str:
    """``tw`` of bin_ + p (``mirrored``: bin_ - p) of the 2n-point roots from ``wp`` = tw of
    p, when bin_ is a multiple of n / 2 (a power of W^(n/2) = -i, whose conjugate an inverse
    kernel's tw turns by; the table's symmetry makes it exact: fft_exec._roots), else ""
    (read from the table)."""
    n = spec.n
    if n % 2 or bin_ % (n // 2):
        return ""
    return _turned("wp", -spec.sign * (bin_ // (n // 2)), mirrored)


def _untangled_last_stage(spec: BlockSpec, index: int, stride: int,
                          local: str = "") -> list[str]:  # fmt: skip
    """The last stage of an r2c kernel with the untangling done in registers: slot p holds
    butterflies A = p and B = s - p (s: the stage's butterfly count; slot 0 holds 0 and,
    for an even s, s / 2), whose outputs A + q s and B + (r - 1 - q) s are each other's
    mirrors n - j (slot 0: A's outputs mirror each other, and so do B's), so
    every bin is computed from values the thread holds: no write of the transform back to
    shared memory, no barrier, no second read (the exchange path reads two values a bin).
    The arithmetic is the exchange path's, so the bits are the same. Of a slot's roots,
    W^p is read and those of the bins p + j n / 2 and j n / 2 - p are turned from it
    (:func:`_derived_root`; all four of a radix-2 last stage), the same values as the
    table's.

    With the reduce's values in the slot (BlockSpec.reduce_in_slot), every bin's value
    waits in a register (:class:`_Held`) until ``local``, the barrier after the stage's
    last reads of the slot, then goes into it."""
    n, threads = spec.n, spec.threads
    radix = (spec.radices or (1,))[index]
    s = n // radix
    offset = spec.stage_offsets[index]
    slots = untangle_slots(spec)
    reps = -(-slots // threads)
    a = [f"a{q}" for q in range(radix)]
    b = [f"b{q}" for q in range(radix)]
    held = _Held() if spec.reduce_in_slot else None
    if held is not None and not local:  # (render_block checks the reduce)
        raise ValueError("reduce values in the slot need the stage's barrier (local)")
    lines = [f"    {{  // stage {index}: radix {radix}, stride {stride}, untangled in registers"]
    conds = []
    for m in range(reps):
        cond = "" if slots % threads == 0 or m < reps - 1 else f"if (t + {m * threads} < {slots}) "
        conds.append(cond)
        if held is not None:
            held.m = m
        lines.append(f"    {cond}{{")
        lines.append(f"        const int p = t + {m * threads};")
        lines.append(f"        cpx {', '.join(a + b)};")
        # B = s - p's stage roots W_n^(q (s - p)) = W_radix^q conj W_n^(q p), of A's for a
        # W_radix^q that is a power of -i (all of radix 2 and 4); slot 0's B is s / 2
        turns = [q for q in range(1, radix) if 4 * q % radix == 0] if stride > 1 else []
        if turns:
            lines.append("        const cpx " + ", ".join(
                f"ta{q} = tw(p, {offset + (q - 1) * stride})" for q in turns) + ";")
        tw_a = tuple(f"ta{q}" if q in turns else "" for q in range(1, radix))
        tw_b = [_turned(f"ta{q}", -spec.sign * 4 * q // radix, True) if q in turns else ""
                for q in range(1, radix)]  # fmt: skip
        pair = functools.partial(_held_butterfly, spec, index, stride)
        lines += pair(f"_{m}A", "p", a, "", tw_a)
        if s % 2:  # slot 0 holds butterfly 0 only
            lines += pair(f"_{m}B", f"{s} - p", b, "if (p != 0) ", tuple(tw_b))
        else:
            if m == 0:
                tw_b = [t and f"(p == 0 ? tw(k, {offset + q * stride}) : {t})"
                        for q, t in enumerate(tw_b)]  # fmt: skip
            lines += pair(f"_{m}B", f"p == 0 ? {s // 2} : {s} - p", b, "", tuple(tw_b))
        roots_a = [_derived_root(spec, q * s, False) for q in range(radix)]
        roots_b = [_derived_root(spec, (q + 1) * s, True) for q in range(radix)]
        if any(roots_a + roots_b):
            lines.append("        const cpx wp = tw(p, 0);  // W^p: the roots it turns into")
        body_pair = []  # p >= 1: A + q s mirrors B + (r - 1 - q) s
        apart = "p != 0" if m == 0 and s % 2 else ""  # (the else of slot 0's branch below)
        for q in range(radix) if m or s % 2 else ():  # (slot 0's own form below: s even)
            body_pair += _untangle(spec, "p", a[q], b[radix - 1 - q], q * s, roots_a[q],
                                   held, apart)  # fmt: skip
            body_pair += _untangle(spec, f"{s} - p", b[q], a[radix - 1 - q], q * s,
                                   roots_b[q], held, apart)  # fmt: skip
        if m == 0 and s % 2 == 0:
            # Slot 0 in the same instructions (a branch of its own would diverge: its warp
            # would issue both bodies): its mirrors are chosen by selects, B's row is s / 2,
            # and the Nyquist bin is its one extra.
            lines.append(f"        const int row = p == 0 ? {s // 2} : {s} - p;  // B's")
            for q in range(radix):
                mirror_a = f"(p == 0 ? {a[(radix - q) % radix]} : {b[radix - 1 - q]})"
                mirror_b = f"(p == 0 ? {b[radix - 1 - q]} : {a[radix - 1 - q]})"
                # B's row s / 2 of slot 0 is no mirror of p = 0: its root read
                root_b = roots_b[q] and f"(p == 0 ? tw(row, {q * s}) : {roots_b[q]})"
                both = (_untangle(spec, "p", a[q], mirror_a, q * s, roots_a[q], held)
                        + _untangle(spec, "row", b[q], mirror_b, q * s, root_b, held))  # fmt: skip
                lines += [f"        {line}" for line in both]
            lines.append("        if (p == 0) {")
            nyquist = _untangle(spec, f"{n}", a[0], a[0], held=held, guard="p == 0")
            lines += [f"            {line}" for line in nyquist]
            lines.append("        }")
        elif m == 0:  # only thread 0's first slot is slot 0
            body_zero = []  # A = 0: q s mirrors (r - q) s; B = s / 2: mirrors within B
            for q in range(radix):
                body_zero += _untangle(spec, f"{q * s}", a[q], a[(radix - q) % radix],
                                       held=held, guard="p == 0")  # fmt: skip
            body_zero += _untangle(spec, f"{n}", a[0], a[0], held=held,
                                   guard="p == 0")  # the Nyquist bin
            lines.append("        if (p == 0) {")
            lines += [f"            {line}" for line in body_zero]
            lines.append("        } else {")
            lines += [f"            {line}" for line in body_pair]
            lines.append("        }")
        else:
            lines += [f"        {line}" for line in body_pair]
        lines.append("    }")
    if held is not None:  # every read of the slot done: the values go into it
        lines.insert(1, held.declaration())
        lines.append(f"    {local}  // every read of the slot is done: its values go into it")
        for m in range(reps):
            lines.append(f"    {conds[m]}{{")
            lines.append(f"        const int p = t + {m * threads};")
            if m == 0 and s % 2 == 0:
                lines.append(f"        const int row = p == 0 ? {s // 2} : {s} - p;  // B's")
            lines += held.stores(spec, m)
            lines.append("    }")
    lines.append("    }")
    return lines


WARP = 32


def warp_local(spec: BlockSpec) -> bool:
    """Whether every transform's threads lie in one warp (``threads`` divides 32 and the
    block is whole warps): then its stage exchanges, which touch only its own slot of
    shared memory, need only the warp's barrier (Dialect.warp_barrier), and a warp runs its
    stages without waiting for the block's other warps. The forward stft kernels of n_fft
    1024 (a 512-point transform of radices 16, 16, 2: 32 threads) are such."""
    if spec.interleave:  # a transform's threads are every per_block-th lane of the block
        return False
    return spec.threads <= WARP and WARP % spec.threads == 0 and spec.block_threads % WARP == 0


def _local_barrier(spec: BlockSpec, dialect: Dialect) -> str:
    """The barrier for exchanges within a transform's own slot: the warp's where
    :func:`warp_local`, else the block's."""
    return dialect.warp_barrier if warp_local(spec) else dialect.barrier


def _stages(spec: BlockSpec, barrier: str, local: str = "") -> list[str]:
    """The transform's stages (butterflies in registers, shared memory between stages).
    ``local``: the barrier between stages (a warp's, where :func:`warp_local`); the block's
    ``barrier`` follows the last stage's writes, which other threads may read next."""
    local = local or barrier
    n, threads = spec.n, spec.threads
    radices = spec.radices or (1,)
    direct_load = not spec.load_staged
    direct_store = not spec.store_staged and spec.pack != "r2c" and not spec.store.ola_hop
    lines: list[str] = []
    stride = 1
    for index, radix in enumerate(radices):
        first, last = index == 0, index == len(radices) - 1
        if last and untangle_slots(spec):
            return lines + _untangled_last_stage(spec, index, stride, local)
        quarter = n // radix
        reps = -(-quarter // threads)
        exact = quarter % threads == 0
        lines.append(f"    {{  // stage {index}: radix {radix}, stride {stride}")
        for m in range(reps):
            names = [f"v{m}_{q}" for q in range(radix)]
            lines.append(f"    cpx {', '.join(names)};")
            cond = "" if exact else f"if (t + {m * threads} < {quarter}) "
            lines += _held_butterfly(spec, index, stride, f"_{m}", f"t + {m * threads}", names,
                                     cond)  # fmt: skip
        if not (first and direct_load) and not (last and direct_store):
            # (a direct last stage writes no shared memory after its reads)
            lines.append(f"    {local}  // every read of this stage is done")
        for m in range(reps):
            cond = "" if exact else f"if (t + {m * threads} < {quarter}) "
            if last and direct_store:
                guard = "live" if exact else f"live && t + {m * threads} < {quarter}"
                lines.append(f"    if ({guard}) {{")
                lines.append(f"        const int i = t + {m * threads};")
                if spec.interleave:
                    lines += [f"    {line}" for line in _interleaved_stores(spec, m, quarter,
                                                                            radix)]  # fmt: skip
                    lines.append("    }")
                    continue
                for q in range(radix):
                    for stmt in _final_store(spec, f"i + {q * quarter}", f"v{m}_{q}"):
                        lines.append(f"        {stmt}")
                lines.append("    }")
                continue
            lines.append(f"    {cond}{{")
            lines.append(f"        const int i = t + {m * threads};")
            lines.append(f"        const int k = {_mod('i', stride)};" if stride > 1 else
                         "        const int k = 0;")  # fmt: skip
            lines.append(f"        const int j0 = (i - k) * {radix} + k;")
            step = _skew_step(spec, stride, radix * stride)
            if step is None:
                lines += [f"        my[skew(j0 + {q * stride})] = v{m}_{q};" for q in range(radix)]
            else:  # one address, constant offsets
                lines.append("        cpx* const row = my + skew(j0);")
                lines += [f"        row[{q * step * _lanes(spec)}] = v{m}_{q};"
                          for q in range(radix)]  # fmt: skip
            lines.append("    }")
        if not (last and direct_store):
            lines.append(f"    {barrier if last else local}  // every write of this stage is done")
        lines.append("    }")
        stride *= radix
    return lines


def _adjoint_factor(spec: BlockSpec, row: str) -> list[str]:
    """The fused adjoint's ``factor_of(g)``: bin g's real factor, from the transform's ``row``
    of ``factors`` (n + 1 values), or with StoreSpec.expand the bank's transpose applied to
    its row of ``n_bands`` values."""
    n = spec.n
    if spec.store.expand:  # F[g] = sum_k bank[lo + k, g] G[lo + k]: the bank's transpose
        # (up to EXPAND_UNROLLED terms as straight-line code: the loads of a pair's two bins
        # issue together; the same sums in the same order as the loop and the bank gather)
        if spec.store.expand <= EXPAND_UNROLLED:
            terms = [f"        if (band.count > {k}) acc += weight[{k * (n + 1)}] * row[{k}];"
                     for k in range(spec.store.expand)]  # fmt: skip
        else:
            terms = [f"        for (int k = 0; k < band.count; ++k) acc += weight[k * {n + 1}LL]"
                     " * row[k];"]  # fmt: skip
        factor = [
            "    const real_t* const grow = (const real_t*)factors"
            f" + (live ? {row} * n_bands : 0);  // the transform's row of G",
            "    auto factor_of = [&](int g) -> real_t {",
            f"        {BAND_RECORD}",
            "        const band_t band = ((const band_t*)bands)[g];",
            f"        const real_t* const weight = (const real_t*)weights + g;  // stride {n + 1}",
            "        const real_t* const row = grow + band.first;",
            "        real_t acc = (real_t)0;",
            *terms,
            "        return acc;",
            "    };",
        ]
    else:
        factor = [
            "    const real_t* const grow = (const real_t*)factors"
            f" + (live ? {row} * {n + 1}LL : 0);  // the transform's factors",
            "    auto factor_of = [&](int g) -> real_t { return grow[g]; };",
        ]
    return factor


def _adjoint(spec: BlockSpec, dialect: Dialect) -> list[str]:
    """The fused adjoint of ``|stft(x)| ** e`` (StoreSpec.value ``adjoint``; an r2c kernel)
    after its forward stages (which leave Z, the packed transform, in shared memory): the
    thread of pair j (bins j and n - j, j = 0 .. n / 2; j = 0 pairs DC with Nyquist)
    untangles X[j] and X[n - j] (:func:`_untangle_lines`) from the Z values at j and n - j, forms
    each bin's cotangent (:func:`_cotangent`; its factor from ``factors``, n + 1 per
    transform, or with StoreSpec.expand the bank's transpose applied to the transform's
    row of ``n_bands`` values there, summed as the bank gather kernel sums) and tangles the
    two back (:func:`_tangle_lines`, the c2r kernel's load) into the same two slots, in place;
    then the inverse stages (conjugate roots) run on them and store the real samples through
    the window (:func:`_adjoint_store_lambda`), or with StoreSpec.ola_hop leave them in the
    slot for :func:`_overlap_add` (the frame's row of factors is then its signal's frame
    c). The spectrum never leaves the block, and
    every operation is the one the stft kernel's cotangent store and the c2r kernel do, in
    their order.

    The overlap-save convolution (StoreSpec.value ``convolve``) runs the same kernel with
    another pointwise step: each bin times the signal's kernel spectrum (``factors``, n + 1
    complex values a signal) and the rotation's phase (``store_table``, n + 1), the product
    cmul chain's order; its store keeps the frame's first outputs (:func:`_convolve_limit`).

    The inverse stages take the thread's index anew (Dialect.fresh_tid): sharing the
    forward stages' identical index arithmetic, the compiler kept it live through the whole
    kernel (n_fft 1024: 146 registers under ncu, 74-80 with the index read anew).
    Untangling in the last stage's registers (as the r2c kernels do) was measured slower
    here: the tangled values must be held until every thread has read that stage's inputs
    (docs/benchmarks.md)."""
    n, threads, barrier = spec.n, spec.threads, dialect.barrier
    local = _local_barrier(spec, dialect)
    pairs = n // 2 + 1
    fresh = dialect.fresh_tid if spec.per_block == 1 else f"{dialect.fresh_tid} % {threads}"
    if spec.store.value == "convolve":  # times the signal's kernel spectrum and the phase
        factor = [
            "    const cpx* const kernel = (const cpx*)factors"
            f" + (live ? sig * {n + 1}LL : 0);  // the signal's kernel spectrum",
        ]
        step = [
            "    auto pointwise = [&](long long g, cpx v) -> cpx {",
            "        return cmul(cmul(v, kernel[g]), ((const cpx*)store_table)[g]);",
            "    };",
        ]
    else:  # the adjoint: each bin's cotangent with its factor
        # the transform's row of factors (frame-major): with the overlap-add, frame c of
        # signal sig
        factor = _adjoint_factor(spec, "(sig * frames + c)" if spec.store.ola_hop else "b")
        scale = "        v.re *= (real_t)scale; v.im *= (real_t)scale;" if spec.store.scaled else ""
        step = [  # the pointwise step: bin g's value of the inverse transform's input
            "    auto pointwise = [&](long long g, cpx v) -> cpx {",
            scale,
            *[f"    {line}" for line in _cotangent("factor_of(g)", "g")],
            "        return v;",
            "    };",
        ]
    lines = [
        *factor,
        "    auto untangled = [&](cpx w, cpx za, cpx zb) -> cpx {",
        *[f"        {line}" for line in _untangle_lines("w")],
        "        return x;",
        "    };",
        *step,
        "    auto itw = [&](int k, int offset) -> cpx {",
        "        cpx w = (tw_table + k)[offset]; w.im = -w.im; return w;",
        "    };",
        "    auto tangled = [&](cpx w, cpx a, cpx b) -> cpx {",
        # W^bin read once a bin (``w``): the untangle's root, conjugated the tangle's
        *[f"        {line}" for line in _tangle_lines("cpx{w.re, -w.im}")],
        "        return z;",
        "    };",
        f"    for (int r = 0; r < {-(-pairs // threads)}; ++r) {{  // pair j: slots j and n - j",
        f"        const int j = t + r * {threads};",
        f"        if (!live || j >= {pairs}) continue;",
        f"        const int m = {n} - j, jm = j == 0 ? 0 : m;",
        "        const cpx za = my[skew(j)], zb = my[skew(jm)];",
        # W^m = W^(n - j) = -conj W^j (exact: the table's symmetry, fft_exec._roots)
        "        const cpx wj = tw_table[j], wm = cpx{-wj.re, wj.im};",
        "        const cpx gj = pointwise(j, untangled(wj, za, zb));",
        "        const cpx gm = pointwise(m, untangled(wm, zb, za));",
        "        if (j == 0) {  // DC and Nyquist: real parts only",
        "            my[skew(0)] = tangled(wj, cpx{gj.re, 0}, cpx{gm.re, 0});",
        "        } else {",
        "            my[skew(j)] = tangled(wj, gj, cpx{gm.re, -gm.im});",
        "            my[skew(m)] = tangled(wm, gm, cpx{gj.re, -gj.im});",
        "        }",
        "    }",
        f"    {local}  // every pair is tangled",
        "    {  // the inverse transform (conjugate roots), stored as real samples",
        "    auto tw = itw;",
        f"    const int t = {fresh};",
        *_stages(dataclasses.replace(spec, sign=1, pack="c2r", load_staged=True), barrier,
                 local),
        "    }",
    ]
    return [line for line in lines if line]


def reduce_frames(per_block: int) -> int:
    """The transforms one thread of the filterbank reduce sums a band of at once: the
    largest divisor of ``per_block`` up to 8 that leaves the block two groups or more (so
    twice the bands' threads work: the mel workload's 8 transforms a block as 2 groups of 4
    ran 6% faster on an H200 than as 1 of 8, docs/benchmarks.md; with plan.FRAMED_THREADS
    it holds 4, as 2 groups of 2), else the largest divisor up to 8."""
    divisors = [f for f in range(1, min(per_block, 8) + 1) if per_block % f == 0]
    return max([f for f in divisors if f >= 2 and per_block // f >= 2] or divisors)


def _reduce(spec: BlockSpec, barrier: str) -> list[str]:
    """The filterbank epilogue: band m of every transform of the block from its values in
    ``pw``.

    A thread takes band m of a group of :func:`reduce_frames` transforms. The block's
    threads walk the (band, group) pairs band-major (consecutive threads the groups of one
    band, then of the next), starting ``pairs % threads`` pairs in where the pairs outnumber
    the threads, so the pass only some threads make takes the first bands -- the narrowest
    of a mel or linear bank -- and the widest do not add a second pass to one warp's (mel,
    80 bands of 2 groups on 128 threads: the widest warp's iterations 43 -> 37, all warps'
    111 -> 79; mel 0.0842 -> 0.0782 ms and mfcc 0.1109 -> 0.1046 on an H100, the same bits,
    docs/benchmarks.md). Each
    weight, loaded once, multiplies that bin of each transform of the group, whose values
    lie at fixed offsets from each other, into an accumulator per transform. The weights
    are the same for every transform of a block, so this reads each once per group instead
    of once per transform, and the loop's index arithmetic is shared as well; the kernel
    is bound by its instruction issue (ncu, docs/benchmarks.md). Each band's bins are
    summed in order, as the bank gather kernel sums them. The band count is compiled in
    (``StoreSpec.bands``): the loop's bounds and the bin-major weights' stride are
    constants, so the unrolled weight loads take immediate offsets from one pointer."""
    out_t = _storage_type(spec.store.storage, "real")
    frames = reduce_frames(spec.per_block)
    groups = spec.per_block // frames
    stride = spec.reduce_stride  # between the transforms' values in pw
    n_bands = spec.store.bands
    if n_bands < 1:
        raise ValueError(f"a filterbank reduce needs its band count (store.bands), got {n_bands}")
    pairs, threads = groups * n_bands, spec.block_threads
    start = pairs % threads if pairs > threads else 0  # the last, partial pass: bands 0, 1..
    pair = f"i + {start} < {pairs} ? i + {start} : i - {pairs - start}" if start else "i"
    lines = [
        f"    {barrier}  // every value of the block is in shared memory",
        f"    for (int i = tid; i < {pairs}; i += {threads}) {{",
        f"        const int p = {pair};  // the (band, group) pair, band-major",
        f"        const int m = p / {groups}, c = p - m * {groups};  // band, group",
        f"        {BAND_RECORD}",
        "        const band_t band = ((const band_t*)bands)[m];",
        "        const real_t* weight = (const real_t*)weights + m;  // bin-major: k at k * bands",
        f"        const real_t* values = pw + c * {frames * stride} + band.first;",
        *[f"        real_t acc{f} = (real_t)0;" for f in range(frames)],
        f"        for (int k = 0; k < band.count; ++k, weight += {n_bands}) {{",
        "            const real_t w = *weight;",
        *[f"            acc{f} += w * values[k + {f * stride}];" for f in range(frames)],
        "        }",
    ]
    for f in range(frames):
        lines += [
            f"        {{  // transform c * {frames} + {f} of the block",
            f"            const long long b = block * {spec.per_block}LL + c * {frames} + {f};",
            f"            real_t acc = acc{f};",
        ]
        if spec.store.reduce == "bank_db":
            lines.append(f"            acc = {db_of('(real_t)factor', 'acc')};")
        lines += [
            f"            if (b < batch) put(&(({out_t}*)out_ptr)[row_base({_user_row(spec, 'b')}, "
            "out_inner, "
            "out_outer_stride, out_inner_stride) + m], acc);",
            "        }",
        ]
    return lines + ["    }"]


def _overlap_add(spec: BlockSpec) -> list[str]:
    """The overlap-add of the block's frames (StoreSpec.ola_hop; a c2r kernel or the fused
    adjoint, whose last stage left each frame's real samples in its slot, sample o at complex
    point o / 2).

    The block holds frames c0 .. c0 + F - 1 of one signal (F = per_block), which cover
    the padded positions c0 hop + q for q < F hop + n_fft - hop. Thread by thread, position q
    sums its frames' windowed samples in ascending frame order: frame f = q / hop - k holds
    it at o = q % hop + k hop, k < ceil(n_fft / hop), so each term's shared and window reads
    sit at constant offsets from the thread's own (unrolled, a predicate per term; with an
    even hop, a thread sums positions q and q + 1 from one complex point and window pair a
    term). Positions q >= n_fft - hop and q < F hop have all their frames here: their sums
    times the inverse FFT's scale and the envelope's reciprocal (``envelope``) are stored
    (0 at and past ``stop``). The first n_fft - hop positions (frames of the block before
    overlap them too) and the last n_fft - hop (the next block's) go to the signal's seams
    instead: per block boundary g (g = 0 .. cols / F), n_fft - hop sums of the frames before
    it, then n_fft - hop of those after, which the ``seam`` gather adds up and scales
    (plan.ola_frames keeps every position within two blocks).

    The istft's sums are scaled by ``scale``; the adjoint's (StoreSpec.value ``adjoint``:
    the stft's frames, padded positions [start, stop) the signal's samples) by ``factor``,
    the inverse FFT's scale, with no envelope: the gradient w.r.t. the signal. Its padded
    positions are dropped (the constant padding's adjoint), or with an indexed padding
    (LoadSpec.frames) kept in ``edges`` for the fold gather (``start`` = pad positions a
    side)."""
    n_fft, hop, frames, slot = 2 * spec.n, spec.store.ola_hop, spec.per_block, spec.slot_size
    overlap, span = n_fft - hop, frames * hop
    width = span + overlap
    terms = -(-n_fft // hop)
    out_t = _storage_type(spec.store.storage, "real")
    adjoint = spec.store.value == "adjoint"
    if adjoint:  # each sum's scale (once, not a term's)
        scale = " * (real_t)factor"
    else:
        scale = " * (real_t)scale" if spec.store.scaled else ""
    value = (f"acc{scale}" if adjoint
             else f"(unsigned)i < divided ? acc{scale} * env[i] : (real_t)0")  # fmt: skip
    edged = adjoint and spec.load.frames == "indexed"
    # sample o = r + k hop of frame seg - k: point (r >> 1) + k hop / 2 of the slot, half r & 1
    step = _skew_step(spec, hop // 2, n_fft // 2) if hop % 2 == 0 else None
    paired = step is not None  # positions q, q + 1 (q even) from one complex point a term
    # (32-bit positions: a signal's frames times the hop and its output stay below 2 ** 31)
    lines = [
        "    {  // the overlap-add of the block's frames",
        "    real_t* const seam = (real_t*)seams"
        f" + (bsig * (per_sig + 1) + bpos) * {2 * overlap}LL;  // the seam before the block",
        f"    {out_t}* const out = ({out_t}*)out_ptr + bsig * out_len;",
        f"    const int origin = (int)(bpos * {frames * hop}u) - (int)start;  // output of q = 0",
        "    const unsigned length = (unsigned)out_len;",
    ]
    if not adjoint:
        lines += [
            "    const real_t* const env = (const real_t*)envelope;",
            "    const unsigned divided = (unsigned)(stop - start);  // the envelope's reciprocals",
        ]
    if edged:
        lines.append("    real_t* const edge = (real_t*)edges + bsig * 2 * start;")
    lines += [
        "    auto put_sum = [&](int q, real_t acc) {",
        f"        if (q < {overlap}) {{  // seam g, after it",
        f"            seam[{overlap} + q] = acc;",
        f"        }} else if (q >= {span}) {{  // seam g + 1, before it",
        f"            seam[{2 * overlap - span} + q] = acc;",
        "        } else {",
        "            const int i = origin + q;  // an output where 0 <= i < out_len",
        "            if ((unsigned)i < length)",
        f"                put(&out[i], {value});",
    ]
    if edged:  # origin + q >= -start; the positions past the padding hold no frame
        lines += [
            "            else {",
            "                const int e = i < 0 ? i + (int)start : i - (int)length + (int)start;",
            f"                if (e < 2 * (int)start) edge[e] = {value};",
            "            }",
        ]
    lines += [
        "        }",
        "    };",
    ]
    per = 2 if paired else 1
    lines += [
        f"    for (int q = {per} * tid; q < {width}; q += {per * spec.block_threads}) {{",
        f"        const int seg = q / {hop}, r = q - seg * {hop};",
    ]
    guards = []
    for k in reversed(range(terms)):  # frames ascending
        guard = [f"seg >= {k}" if k else "", f"seg < {frames + k}"]
        if k * hop + hop > n_fft:  # the last term of a hop that does not divide n_fft
            guard.append(f"r < {n_fft - k * hop}")
        guards.append((k, " && ".join(g for g in guard if g)))
    if paired:
        lines += [
            "        const cpx* const x = smem + seg * " + f"{slot} + skew(r >> 1);",
            "        const cpx* const w = (const cpx*)window + (r >> 1);  // a pair of samples",
            "        real_t acc0 = (real_t)0, acc1 = (real_t)0;",
        ]
        for k, cond in guards:
            lines += [
                f"        if ({cond}) {{",
                f"            const cpx v = x[{k * step - k * slot}], wk = w[{k * hop // 2}];",
                "            acc0 += v.re * wk.re;",
                "            acc1 += v.im * wk.im;",
                "        }",
            ]
        lines += ["        put_sum(q, acc0);", "        put_sum(q + 1, acc1);"]
    else:
        lines += [
            "        const real_t* const w = (const real_t*)window + r;",
            "        real_t acc = (real_t)0;",
        ]
        for k, cond in guards:
            sample = (f"((const real_t*)(smem + (seg - {k}) * {slot} + skew((r + {k * hop}) >> 1)))"
                      f"[(r + {k * hop}) & 1]")  # fmt: skip
            lines.append(f"        if ({cond}) acc += {sample} * w[{k * hop}];")
        lines.append("        put_sum(q, acc);")
    return lines + ["    }", "    }"]


def render_block(spec: BlockSpec, dialect: Dialect) -> str:
    """Kernel source of ``spec``; entry point ``specux_fft_block`` with :data:`BLOCK_PARAMS`,
    launched with ``spec.block_threads`` threads and ``spec.shared_bytes`` of shared memory
    per block, ``ceil(batch / spec.per_block)`` blocks."""
    spec = block_source_key(spec)
    n, threads, per_block = spec.n, spec.threads, spec.per_block
    if spec.reduce_in_slot and not (spec.store.reduce and untangle_slots(spec)):
        raise ValueError("reduce values in the slot need a reduce whose last stage untangles "
                         "in registers (plan.untangle_slots)")  # fmt: skip
    skew = f"j + (j >> {spec.shift})"
    if spec.interleave:  # the block's transforms' points alternate (BlockSpec.interleave)
        skew = f"({skew}) * {per_block}"
    params = ", ".join(f"{t} {name}" for t, name in BLOCK_PARAMS)
    args = ", ".join(name for _, name in BLOCK_PARAMS)
    barrier = dialect.barrier
    conj = "" if spec.sign < 0 else " w.im = -w.im;"
    body = [
        "    cpx* const smem = (cpx*)specux_shared;",
        "    real_t* const pw = (real_t*)smem;  // the reduce's values: in the slots"
        if spec.reduce_in_slot else
        f"    real_t* const pw = (real_t*)(smem + {per_block * spec.slot_size});",
        "    const cpx* const tw_table = (const cpx*)twiddles;",
        # root k + offset: the row k shared by a butterfly's roots, offset a constant
        "    auto tw = [&](int k, int offset) -> cpx {",
        f"        cpx w = (tw_table + k)[offset];{conj} return w;",
        "    };",
        f"    auto skew = [](int j) -> int {{ return {skew}; }};",
        "    auto row_base = [](long long u, long long inner, long long outer,"
        " long long istride) -> long long {",
        "        if (inner == 1) return u * outer;",
        "        const long long q = u / inner;",
        "        return q * outer + (u - q * inner) * istride;",
        "    };",
    ]
    if spec.pack == "c2r":  # its loads read the half spectrum themselves (_unpack_lambda)
        body += _unpack_lambda(spec)
    else:
        body.append(_load_lambda(spec))
    if not spec.store.ola_hop:  # the overlap-add stores no values itself
        body.append(_store_lambda(spec))
    if per_block == 1:
        body += ["    const int t = tid;", "    const int s = 0;"]
    elif spec.interleave:
        body += [f"    const int t = tid / {per_block};", f"    const int s = tid % {per_block};"]
    else:
        body += [f"    const int t = tid % {threads};", f"    const int s = tid / {threads};"]
    if spec.store.ola_hop:
        body += _ola_block(spec)
    body += _slot("", "s", spec)
    body += _convolve_limit(spec)
    slots = spec.slot_size
    body.append(f"    cpx* const my = smem + s{'' if spec.interleave else f' * {slots}'};")
    staged = spec.load_staged or spec.store_staged
    if staged:  # the transfer slot: consecutive threads walk consecutive transforms
        body += [f"    const int s2 = tid % {per_block};"]
        body += _slot("2", "s2", spec)
        body.append(f"    cpx* const xfer = smem + s2 * {slots};")
        transfers = n * per_block // spec.block_threads  # block_threads divides n * per_block
        # transfer r's element: j = (tid + r * block_threads) / per_block = j0 + r * threads
        body.append(f"    const int j0 = tid / {per_block};")
    if spec.load_staged and spec.pack == "c2r":
        body += _c2r_staged_loads(spec)
        body.append(f"    {barrier}")
    elif spec.load_staged:
        body.append("    {")
        body += _staged_loads(spec, transfers)
        body.append("    }")
        body.append(f"    {barrier}")
    if spec.interleave and spec.twist:  # (the last stage stores: _interleaved_stores)
        body += _twist_rows(spec, "c", "t")
    body += _stages(spec, barrier, _local_barrier(spec, dialect))
    if spec.store_staged and stores_walk(spec.store):
        body += _walk(spec, "out")
    if spec.store_staged and spec.twist and TWIST_READS:
        # the twiddles of a round of stores, read before any of its stores: a store may alias
        # the table for the compiler, which otherwise waits for each table read in turn
        body += _twist_rows(spec)
        group = min(transfers, TWIST_READS)
        body.append(f"    for (int r0 = 0; r0 < {transfers}; r0 += {group}) {{")
        body.append(f"        cpx roots[{group}];")
        body.append("        #pragma unroll")
        body.append(f"        for (int i = 0; i < {group}; ++i)")
        body.append(f"            roots[i] = r0 + i < {transfers} ? twisted(r0 + i) : cpx{{0, 0}};")
        body.append("        #pragma unroll")
        body.append(f"        for (int i = 0; i < {group}; ++i) {{")
        body.append("            const int r = r0 + i;")
        if transfers % group:
            body.append(f"            if (r >= {transfers}) break;")
        body += _staged_store(spec, "roots[i]", "    ")
        body.append("        }")
        body.append("    }")
    elif spec.store_staged:
        if spec.twist:
            body += _twist_rows(spec)
        body.append(f"    for (int r = 0; r < {transfers}; ++r) {{")
        body += _staged_store(spec, "twisted(r)" if spec.twist else "", "")
        body.append("    }")
    if spec.store.value in INVERSE_VALUES:
        body += _adjoint(spec, dialect)
    elif spec.pack == "r2c" and not untangle_slots(spec):
        # bins k = 0 .. n from the transform in shared memory (Z[n] is Z[0])
        reps = -(-(n + 1) // threads)
        body.append(f"    for (int r = 0; r < {reps}; ++r) {{")
        body.append(f"        const int k = t + r * {threads};")
        body.append(f"        if (!live || k > {n}) continue;")
        body.append(f"        const int ka = k == {n} ? 0 : k, kc = k == 0 ? 0 : {n} - k;")
        body += [f"        {line}" for line in _untangle(spec, "k", "my[skew(ka)]", "my[skew(kc)]")]
        body.append("    }")
    if spec.store.reduce:
        body += _reduce(spec, barrier)
    if spec.store.ola_hop:
        body += _overlap_add(spec)
    source = [
        f"// specux block FFT: n={n} radices={spec.radices} sign={spec.sign} "
        f"precision={spec.precision} threads={threads}x{per_block} pack={spec.pack or '-'}",
        dialect.prelude,
        f"typedef {_REAL[spec.precision]} real_t;",
        _types(dialect.function),
        dialect.block_open.format(name=BLOCK_NAME, params=params, threads=spec.block_threads,
                                  min_blocks=f", {spec.min_blocks}" if spec.min_blocks > 1 else ""),
        "\n".join(body),
        dialect.block_close.format(name=BLOCK_NAME, params=params, args=args),
    ]
    return "\n".join(source)


def block_source_key(spec: BlockSpec) -> BlockSpec:
    """The spec without what arrives at launch time (valid counts, logical length, layout):
    equal keys render identical source."""
    return dataclasses.replace(
        spec,
        load=dataclasses.replace(spec.load, layout=USER, valid=min(spec.load.valid, 1)),
        store=dataclasses.replace(spec.store, layout=USER, valid=min(spec.store.valid, 1),
                                  logical=0),
    )


def block_launch_sizes(spec: BlockSpec, batch: int) -> tuple[int, int, int]:
    """(blocks, threads per block, shared bytes) of a launch over ``batch`` transforms."""
    return -(-batch // spec.per_block), spec.block_threads, spec.shared_bytes


__all__ = ["BLOCK_NAME", "BLOCK_PARAMS", "block_launch_sizes", "block_source_key", "render_block"]
