"""Render the gather kernels around the FFTs: framing, overlap-add, the istft's windowed
overlap-add, filterbank reduces.

Every output element is computed by one thread that reads all of its inputs (a gather), so
each is written once, in a fixed order: no atomics, and results are bitwise reproducible
(the deterministic mode of the overlap-add adjoints costs nothing). Sizes arrive as launch
arguments; one compiled kernel serves every size of its kind, storage and precision.

Kinds (``GatherSpec.kind``), rows ``r`` being independent signals:
- ``frame``: ``out[r, t, j] = x[r, t * hop + j - pad]`` through the padding (the frame op).
- ``ola``: ``out[r, i] = sum_t frames[r, t, i + pad - t * hop]`` (overlap-add read back at
  the unpadded samples: the direct part of the frame op's adjoint).
- ``fold``: ``out[r, target[q]] += sum over the padded positions p of row q of the fold table
  of the overlap-add at p`` (the padding's adjoint; each target is one thread, launched after
  ``ola`` on the same stream).
- ``istft``: ``out[r, i] = sum_t (frames * window)[r, t, p - t * hop] / env[i]`` with
  ``p = i + start`` below ``stop``, else 0.
- ``bank``: ``out[r, m] = sum_k weight[m, k] * v(x[r, lo_m + k])`` over band m's extent,
  ``v`` the identity or ``x ** exponent``; stored as is or in dB
  (``factor * log10(max(s, eps))``).
"""

from __future__ import annotations

import dataclasses

from specux.kernels.codegen.dialects import Dialect
from specux.kernels.codegen.fft import _REAL, _REAL_STORAGE, _types

GATHER_NAME = "specux_gather"

GATHER_PARAMS = (
    ("const void*", "in_ptr"),
    ("void*", "out_ptr"),
    ("const void*", "table_a"),
    ("const void*", "table_b"),
    ("const void*", "table_c"),
    ("long long", "rows"),
    ("long long", "count"),  # frames per row
    ("long long", "size"),  # outputs per row
    ("long long", "frame_len"),
    ("long long", "hop"),
    ("long long", "pad"),
    ("long long", "sig_len"),
    ("long long", "start"),
    ("long long", "stop"),
    ("double", "eps"),
    ("double", "factor"),
    ("double", "exponent"),
)

KINDS = ("frame", "ola", "fold", "istft", "bank")


@dataclasses.dataclass(frozen=True)
class GatherSpec:
    """One gather kernel: ``kind`` (see the module), real ``storage`` of input and output
    (float16 / float32 / float64), ``precision`` of the arithmetic, and ``option``:
    ``frame``: the padding (``constant`` | ``indexed``); ``bank``: ``power`` | ``db``, with
    ``pow`` appended when the input is raised to ``exponent`` first."""

    kind: str
    storage: str
    precision: str
    option: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r} is not one of {KINDS}")


def _ola_sum(weighted: bool) -> str:
    """The overlap-add of row ``r``'s frames at padded position ``p`` (frames t ascending)."""
    term = "to_real(in[fbase + t * frame_len + o])"
    if weighted:
        term = f"{term} * ((const real_t*)table_a)[o]"
    return f"""
    auto ola_at = [&](long long r, long long p) -> real_t {{
        const storage_t* in = (const storage_t*)in_ptr;
        const long long fbase = r * count * frame_len;
        long long lo = p - frame_len + 1;
        lo = lo <= 0 ? 0 : (lo + hop - 1) / hop;
        long long hi = p / hop;
        if (hi > count - 1) hi = count - 1;
        real_t acc = (real_t)0;
        for (long long t = lo; t <= hi; ++t) {{
            const long long o = p - t * hop;
            acc += {term};
        }}
        return acc;
    }};"""


def _body(spec: GatherSpec) -> str:
    kind = spec.kind
    if kind == "frame":
        lines = [
            "    if (gid >= rows * count * frame_len) return;",
            "    const long long j = gid % frame_len;",
            "    const long long t = (gid / frame_len) % count;",
            "    const long long r = gid / (frame_len * count);",
            "    long long pos = t * hop + j - pad;",
            "    const storage_t* in = (const storage_t*)in_ptr;",
            "    storage_t* out = (storage_t*)out_ptr;",
        ]
        if spec.option == "indexed":
            lines += [
                "    if (pos < 0) pos = ((const int*)table_a)[pos + pad];",
                "    else if (pos >= sig_len) pos = ((const int*)table_a)[pad + pos - sig_len];",
            ]
        else:
            lines += [
                "    if (pos < 0 || pos >= sig_len) { put(&out[gid], (real_t)0); return; }",
            ]
        lines.append("    put(&out[gid], to_real(in[r * sig_len + pos]));")
        return "\n".join(lines)
    if kind == "ola":
        return "\n".join([
            _ola_sum(False),
            "    if (gid >= rows * sig_len) return;",
            "    const long long i = gid % sig_len, r = gid / sig_len;",
            "    put(&((storage_t*)out_ptr)[gid], ola_at(r, i + pad));",
        ])  # fmt: skip
    if kind == "fold":
        return "\n".join([
            _ola_sum(False),
            "    if (gid >= rows * size) return;",
            "    const long long q = gid % size, r = gid / size;",
            "    const int* targets = (const int*)table_a;",
            "    const int* offsets = (const int*)table_b;",
            "    const int* positions = (const int*)table_c;",
            "    storage_t* out = (storage_t*)out_ptr + r * sig_len + targets[q];",
            "    real_t acc = to_real(*out);",
            "    for (int k = offsets[q]; k < offsets[q + 1]; ++k) acc += ola_at(r, positions[k]);",
            "    put(out, acc);",
        ])  # fmt: skip
    if kind == "istft":
        return "\n".join([
            _ola_sum(True),
            "    if (gid >= rows * size) return;",
            "    const long long i = gid % size, r = gid / size;",
            "    const long long p = i + start;",
            "    real_t v = (real_t)0;",
            "    if (p < stop) v = ola_at(r, p) / ((const real_t*)table_b)[i];",
            "    put(&((storage_t*)out_ptr)[gid], v);",
        ])  # fmt: skip
    # bank
    value = "pow(x, (real_t)exponent)" if "pow" in spec.option else "x"
    lines = [
        "    if (gid >= rows * size) return;",
        "    const long long m = gid % size, r = gid / size;",
        "    const storage_t* in = (const storage_t*)in_ptr + r * frame_len;",
        "    const int* band = (const int*)table_a + 3 * m;  // first bin, bins, weight offset",
        "    const real_t* weight = (const real_t*)table_b + band[2];",
        "    real_t acc = (real_t)0;",
        "    for (int k = 0; k < band[1]; ++k) {",
        "        const real_t x = to_real(in[band[0] + k]);",
        f"        acc += weight[k] * {value};",
        "    }",
    ]
    if spec.option.startswith("db"):
        lines.append("    acc = (real_t)factor * log10(acc > (real_t)eps ? acc : (real_t)eps);")
    lines.append("    put(&((storage_t*)out_ptr)[gid], acc);")
    return "\n".join(lines)


def render_gather(spec: GatherSpec, dialect: Dialect) -> str:
    """Kernel source of ``spec``: entry point ``specux_gather`` with :data:`GATHER_PARAMS`,
    one thread per output element."""
    params = ", ".join(f"{t} {name}" for t, name in GATHER_PARAMS)
    args = ", ".join(name for _, name in GATHER_PARAMS)
    source = [
        f"// specux gather kernel: {spec.kind} storage={spec.storage} "
        f"precision={spec.precision} option={spec.option or '-'}",
        dialect.prelude,
        f"typedef {_REAL[spec.precision]} real_t;",
        _types(dialect.function),  # to_real / put for every storage, as the FFT kernels use
        f"typedef {_REAL_STORAGE[spec.storage]} storage_t;",
        dialect.kernel_open.format(name=GATHER_NAME, params=params),
        _body(spec),
        dialect.kernel_close.format(name=GATHER_NAME, params=params, args=args),
    ]
    return "\n".join(source)


__all__ = ["GATHER_NAME", "GATHER_PARAMS", "GatherSpec", "render_gather"]
