"""Render the gather kernels around the FFTs: framing, overlap-add, the istft's windowed
overlap-add, filterbank reduces.

Every output element is computed by one thread that reads all of its inputs (a gather), so
each is written once, in a fixed order: no atomics, and results are bitwise reproducible
(the deterministic mode of the overlap-add adjoints costs nothing). Sizes arrive as launch
arguments; one compiled kernel serves every size of its kind, storage and precision.

Kinds (``GatherSpec.kind``), rows ``r`` being independent signals:
- ``frame``: ``out[r, t, j] = x[r, t * hop + j - pad]`` through the padding (the frame op).
  Option ``pairs`` (constant padding): frames ``f = r * count + t`` interleaved two by two,
  ``out[f // 2, j, f % 2]``, as the real and imaginary parts of complex rows (a zero frame
  after the last when ``rows * count`` is odd; with an odd ``count`` pairs straddle rows):
  two real transforms as one complex one.
- ``ola``: ``out[r, i] = sum_t frames[r, t, i + pad - t * hop]`` (overlap-add read back at
  the unpadded samples: the direct part of the frame op's adjoint); option ``window``
  multiplies each frame by the real window ``table_a`` first.
- ``fold``: ``out[r, target[q]] += sum over the padded positions p of row q of the fold table
  of the overlap-add at p`` (the padding's adjoint; each target is one thread, launched after
  ``ola`` on the same stream). Option ``edges``: the overlap-add at p read from rows of
  ``2 pad`` sums (``in``, the compute precision: p < pad, then p - sig_len), which the fused
  adjoint's overlap-add and its ``seam`` gather left there.
- ``istft``: ``out[r, i] = sum_t (frames * window)[r, t, p - t * hop] * inv[i]`` with
  ``p = i + start`` below ``stop``, else 0 (``inv``: the window envelope's reciprocals).
- ``seam``: the seams of the istft's overlap-add block kernel (codegen.block._overlap_add):
  ``count`` seams per row r, ``hop`` positions apart, each of ``frame_len`` sums before it
  and ``frame_len`` after (``in``: the compute precision; the first seam has none before,
  the last none after); position ``p`` of seam g is ``g * hop + j``, its value the two
  added, then times ``factor`` (the inverse FFT's scale) and ``table_a[i]`` (the envelope's
  reciprocal) for ``i = p - start`` below ``sig_len``
  outputs, 0 from ``stop`` on; the ``size - count * frame_len`` positions after the last
  seam, which no frame reaches, get 0. Option ``x4``: four positions a thread (:func:`_seam`);
  ``flat`` (alone or after ``x4``): no envelope (the stft adjoint's seams: times ``factor``
  only); ``edges`` (after ``flat``): the positions outside the signal (``i < 0`` or
  ``i >= sig_len``, ``pad`` a side) go to ``table_b``, rows of ``2 pad`` values, for the
  ``fold`` gather's option ``edges``.
- ``bank``: ``out[r, m] = sum_k weight[m, k] * v(x[r, lo_m + k])`` over band m's extent,
  ``v`` the identity or ``x ** exponent``; stored as is or in dB
  (``factor * log10(max(s, eps))``).

The array kinds (elementwise steps: all of the torch-free engine's, :mod:`specux.kernels.native`,
and the torch route's fftconvolve product and unfused stft mapping, so both give one result):
- ``convert``: ``out[i] = src[view(i)]`` (``option`` ``"<src dtype>><dst dtype>"``, ``~``
  appended to conjugate): a strided view (``table_a``: int64 ndim, out shape, view shape,
  view strides; ``start``: the view's offset) copied into a contiguous array of ``size``
  elements with a dtype cast, zeros where ``out`` is larger than the view (zero padding).
- ``map``: ``size`` values per row, ``option`` ``clip`` (``max(x, table_a[r] - factor)``,
  the floor rounded to the storage first),
  ``threshold`` (``x < factor ? 0 : x``), ``db`` (``factor * log10(max(x, eps))``) or
  ``window`` (``x * table_a[i % size]``).
- ``value``: complex ``x`` (of the precision) -> ``magnitude`` | ``power`` | ``db``
  (``option``), stored in the storage.
- ``cmul``: ``out[i] = x[i] * table_a[i]``, complex.
- ``rowmax``: ``out[r * count + c] = max x[r, k]`` over chunk ``c`` of row ``r``, ``k`` from
  ``c * frame_len`` to ``min(size, (c + 1) * frame_len)`` (every chunk holds a value): a
  block kernel of ROWMAX_THREADS threads a chunk, each striding over it (coalesced, four
  loads in flight), then a tree in shared memory. A second launch over the ``(rows,
  count)`` partials gives the rows' maxima. NaN propagates (numpy's and torch's max).
- ``colnorm``: ``x`` as (rows, count, size) normalized along ``count`` (one thread per
  (row, column)): ``option`` ``inf`` (the peak) | ``min`` (the smallest magnitude) |
  ``count`` (of nonzero values) | ``1`` | ``p`` (``exponent``), lengths below ``eps`` left
  as they are (librosa's ``util.normalize``).
- ``correlate``: ``out[r, t, pad + c] = sum_j x[r, start + t * hop + j] * table_a[j, c]``
  for ``c < size``, ``j < frame_len`` (rows of ``sig_len`` in, of ``stop`` out): the
  constant-Q kernels of one octave group. A tiled block kernel (``option``
  ``"c<lanes>n<n>m<m>"``, the tile: see :func:`correlate_tile`); kernels longer than
  ``CORRELATE_SPLIT`` taps write one partial sum per split (``(splits, rows * count,
  size)``) instead. Option ``"w<n>m<m>"`` (float32): the tensor-core tile
  (:func:`_tiled_mma`), its own splits (:func:`mma_splits`) into the same partials layout;
  and
- ``correlate_clip``: ``correlate`` (SIMT tiles) of each signal's values clipped from below
  first, ``max(x, table_b[r] - factor)`` with torch.maximum's NaN rule (a NaN in either
  stays): mfcc's per-signal top_db clip read into its DCT (``table_b`` each signal's peak,
  ``factor`` top_db), so the clipped values are never stored;
- ``partsum`` adds them up in split order: ``out[q, pad + c] = sum_s in[s, q, c]`` over
  ``count`` splits, ``rows`` frames of ``stop`` outputs.
- ``correlate_t``: the transpose of ``correlate`` (the constant-Q adjoint), tiled too:
  ``out[r, start + t * hop + j] += sum_c x[r, t, pad + c] * kernel[j, c]`` for the
  ``count`` frames of rows of ``stop`` values in, rows of ``sig_len`` out, with ``table_a``
  the kernel regrouped hop by hop (see ``_tiled_transpose``); each output sample is one
  thread's sum over its frames and columns (no atomics), added to what ``out`` holds.
  The tiled kinds are the ones whose threads share memory.
- ``project``: ``out[q, c] = sum_k table_a[k * size + c] * x[q, k]`` for ``rows``
  contiguous rows of ``frame_len`` values and ``c < size``: a dense matrix (mfcc's DCT)
  applied to every row. A block kernel (:func:`_project`; ``option`` ``"i<n_in>o<n_out>"``,
  the matrix's shape compiled in: ``frame_len`` and ``size`` must equal it); and
- ``project_clip``: ``project`` of each signal's values clipped from below first, ``max(x,
  table_b[q / count] - factor)`` with torch.maximum's NaN rule (``count`` rows a signal):
  mfcc's per-signal top_db clip read into its DCT, the clipped values never stored.
- ``fold_product`` / ``fold_idft``: cqt's spectral path (block kinds; see the comment above
  :data:`FOLD_THREADS`).
"""

from __future__ import annotations

import dataclasses
import re

from specux.kernels.codegen.block import BAND_RECORD, db_of
from specux.kernels.codegen.dialects import Dialect
from specux.kernels.codegen.fft import _REAL, _REAL_STORAGE, _types

GATHER_NAME = "specux_gather"
GATHER_THREADS = 256  # per block, for the one-thread-per-output kinds

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

KINDS = ("frame", "ola", "fold", "istft", "seam", "bank", "convert", "map", "value", "cmul",
         "rowmax", "colnorm", "correlate", "correlate_clip", "correlate_t", "partsum",
         "project", "project_clip", "fold_product", "fold_idft")  # fmt: skip
# dtype name -> storage type of the array kinds
_ARRAY_TYPES = {"float16": "unsigned short", "bfloat16": "specux_b16", "float32": "float",
                "float64": "double",
                "complex32": "specux_c16", "complex64": "specux_c32",
                "complex128": "specux_c64"}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class GatherSpec:
    """One gather kernel: ``kind`` (see the module), real ``storage`` of input and output
    (float16 / bfloat16 / float32 / float64), ``precision`` of the arithmetic, and ``option``:
    ``frame``: the padding (``constant`` | ``indexed``), or ``pairs`` (constant, the frames
    interleaved in pairs); ``ola``: ``window`` to weight the
    frames; ``bank``: ``power`` | ``db``, with ``pow`` appended when the input is raised to
    ``exponent`` first."""

    kind: str
    storage: str
    precision: str
    option: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r} is not one of {KINDS}")
        if self.kind == "fold_product" and fold_mma_tile(self.option) is not None:
            if self.precision != "float32":
                raise ValueError(f"the tensor-core fold_product option={self.option!r} is "
                                 f"float32, not {self.precision}")  # fmt: skip
        elif self.kind == "fold_product":
            fold_tile(self.option)  # raises for a malformed tile
        if self.kind in PROJECT_KINDS:
            project_option(*project_shape(self.option), self.precision)  # raises where unfit
        if self.tiled:
            correlate_tile(self.option)  # raises for a malformed tile
            if mma_tile(self.option) is not None and (self.kind, self.precision) != (
                    "correlate", "float32"):  # fmt: skip
                raise ValueError(f"the tensor-core tile option={self.option!r} is for kind "
                                 f"'correlate' in float32, not {self.kind!r} in "
                                 f"{self.precision}")  # fmt: skip

    @property
    def tiled(self) -> bool:
        """A tiled correlation: launched as ``(blocks, CORRELATE_THREADS, shared bytes)``."""
        return self.kind in TILED_KINDS

    @property
    def block(self) -> bool:
        """A block kernel (threads of a block share memory and barriers: the tiled kinds and
        ``rowmax``) rather than one thread per output."""
        return self.tiled or self.kind in ("rowmax", "fold_product", "fold_idft", *PROJECT_KINDS)

    @property
    def threads(self) -> int:
        """Threads a block (the kernel's launch bound)."""
        if self.kind in ("fold_product", "fold_idft"):
            return FOLD_THREADS
        if self.kind in PROJECT_KINDS:
            return project_threads(self.option)
        return ROWMAX_THREADS if self.kind == "rowmax" else CORRELATE_THREADS

    @property
    def min_blocks(self) -> int:
        """The kernel's register bound as blocks an SM (its launch bounds; 0: none)."""
        if self.kind != "fold_product":
            return 0
        if fold_mma_tile(self.option) is not None:
            return FOLD_MMA_MIN_BLOCKS
        return FOLD_MIN_BLOCKS[self.precision]

    @property
    def mma(self) -> bool:
        """Whether the kernel runs its products on the tensor cores (the dialect's
        ``mma_prelude``): the correlation's ``"w<n>m<m>"`` tiles, fold_product's ``"t<nb>"``."""
        if self.kind == "fold_product":
            return fold_mma_tile(self.option) is not None
        return self.tiled and mma_tile(self.option) is not None


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


FRAME_OUTPUTS = 4  # samples of a frame a ``frame`` thread copies (a quarter frame apart)
SEAM_POSITIONS = 4  # a thread's positions in the seam kind's option "x4"
SEAM_VECTORS = True  # whether "x4" stores aligned positions as one vector (tests turn it off)


def _seam(spec: GatherSpec) -> str:
    """The ``seam`` kind: option ``x4`` takes four consecutive positions a thread (``size``
    positions a row in ``ceil(size / 4)`` threads; ``frame_len`` a multiple of 4, so the
    four lie in one seam and its two halves load as vectors), else one. With ``x4``, four
    positions inside the output row and before ``stop`` whose output (and envelope) are
    aligned to four values (16 bytes in float32, 32 in float64) store (and load) as one
    vector, storage in the compute precision."""
    per = SEAM_POSITIONS if spec.option.startswith("x4") else 1
    gain = "" if "flat" in spec.option else " * ((const real_t*)table_a)[i]"
    edged = spec.option.endswith("edges")
    lines = [
        f"    const long long slots = (size + {per - 1}) / {per};  // threads a row",
        "    if (gid >= rows * slots) return;",
        "    long long r, k0;  // row, first position: 32-bit division when the launch allows",
        "    if (rows * slots <= 0xffffffffLL) {",
        "        const unsigned g32 = (unsigned)gid, s32 = (unsigned)slots, r32 = g32 / s32;",
        f"        r = r32; k0 = (long long)(g32 - r32 * s32) * {per};",
        "    } else {",
        f"        r = gid / slots; k0 = (gid - r * slots) * {per};",
        "    }",
        "    const long long points = count * frame_len;",
        f"    real_t left[{per}], right[{per}];",
        "    long long p0 = (count - 1) * hop + frame_len + (k0 - points);  // past the seams",
        f"    for (int w = 0; w < {per}; ++w) left[w] = right[w] = (real_t)0;",
        *([f"    struct alignas({per} * sizeof(real_t)) pack_t {{ real_t v[{per}]; }};"]
          if per > 1 else []),
        "    if (k0 < points) {  // below 2 ** 31 (transform_exec.istft_fusable)",
        "        const long long g = (unsigned)k0 / (unsigned)frame_len, j = k0 - g * frame_len;",
        "        const real_t* seam = (const real_t*)in_ptr + (r * count + g) * 2 * frame_len + j;",
        "        p0 = g * hop + j;",
    ]
    if per > 1:
        lines += [
            "        if (g > 0) { const pack_t a = *(const pack_t*)seam;"
            f" for (int w = 0; w < {per}; ++w) left[w] = a.v[w]; }}",
            "        if (g < count - 1) { const pack_t b = *(const pack_t*)(seam + frame_len);"
            f" for (int w = 0; w < {per}; ++w) right[w] = b.v[w]; }}",
        ]
    else:
        lines += [
            "        if (g > 0) left[0] = seam[0];",
            "        if (g < count - 1) right[0] = seam[frame_len];",
        ]
    lines += [
        "    }",
        "    storage_t* out = (storage_t*)out_ptr + r * sig_len;",
    ]
    if per > 1 and spec.storage == spec.precision and SEAM_VECTORS:
        # four positions inside the output and before ``stop``, aligned to their size (and
        # their envelope): one vector store (and load) instead of four, the same arithmetic
        envelope = "flat" not in spec.option
        env = "(const real_t*)table_a + i0"
        aligned = " && ".join(f"(unsigned long long)({p}) % sizeof(pack_t) == 0"
                              for p in ["out + i0"] + ([env] if envelope else []))  # fmt: skip
        lines += [
            "    {",
            "        const long long i0 = p0 - start;",
            f"        if (k0 + {per - 1} < size && i0 >= 0 && i0 + {per - 1} < sig_len"
            f" && p0 + {per - 1} < stop && {aligned}) {{",
            *([f"            const pack_t e = *(const pack_t*)({env});"] if envelope else []),
            "            pack_t o;",
            f"            for (int w = 0; w < {per}; ++w)",
            "                o.v[w] = ((real_t)0 + left[w] + right[w]) * (real_t)factor"
            + (" * e.v[w];" if envelope else ";"),
            "            *(pack_t*)(out + i0) = o;",
            "            return;",
            "        }",
            "    }",
        ]
    lines += [
        f"    for (int w = 0; w < {per}; ++w) {{",
        "        const long long p = p0 + w, i = p - start;",
        f"        if (k0 + w >= size{'' if edged else ' || i < 0 || i >= sig_len'}) continue;",
        "        const real_t acc = (real_t)0 + left[w] + right[w];",
    ]
    if edged:  # a padded position: its sum for the fold
        lines += [
            "        if (i < 0 || i >= sig_len) {",
            "            const long long e = i < 0 ? i + pad : i - sig_len + pad;",
            "            if (e >= 0 && e < 2 * pad)",
            "                ((real_t*)table_b)[r * 2 * pad + e] = acc * (real_t)factor;",
            "            continue;",
            "        }",
        ]
    lines += [
        f"        put(&out[i], p < stop ? acc * (real_t)factor{gain} : (real_t)0);",
        "    }",
    ]
    return "\n".join(lines)


def _body(spec: GatherSpec) -> str:
    kind = spec.kind
    if kind == "frame":  # FRAME_OUTPUTS samples of a frame a thread, ``slots`` apart
        pairs = spec.option == "pairs"
        lines = [
            f"    const long long slots = (frame_len + {FRAME_OUTPUTS - 1}) / {FRAME_OUTPUTS};",
            "    const long long frames = rows * count;",
            # pairs: a zero frame completes an odd count's last pair
            f"    const long long launched = {'(frames + 1) / 2 * 2' if pairs else 'frames'};",
            "    if (gid >= launched * slots) return;",
            "    long long f, t, r, j0;  // frame, its index and row, first sample",
            "    if (launched * slots <= 0xffffffffLL) {  // 32-bit divisions",
            "        const unsigned g32 = (unsigned)gid, s32 = (unsigned)slots;",
            "        const unsigned f32 = g32 / s32, c32 = (unsigned)count, r32 = f32 / c32;",
            "        f = f32; j0 = g32 - f32 * s32; r = r32; t = f32 - r32 * c32;",
            "    } else {",
            "        f = gid / slots; j0 = gid - f * slots; r = f / count; t = f - r * count;",
            "    }",
            "    const storage_t* in = (const storage_t*)in_ptr + r * sig_len;",
            ("    storage_t* out = (storage_t*)out_ptr + (f >> 1) * 2 * frame_len + (f & 1);"
             if pairs else "    storage_t* out = (storage_t*)out_ptr + f * frame_len;"),
            # all loads before the stores: out may alias in for the compiler, which would
            # otherwise wait for each load's round trip in turn
            f"    real_t v[{FRAME_OUTPUTS}];",
            "    #pragma unroll",
            f"    for (int u = 0; u < {FRAME_OUTPUTS}; ++u) {{",
            "        const long long j = j0 + u * slots;  // a warp's lanes: adjacent samples",
            "        long long pos = t * hop + j - pad;",
        ]
        if spec.option == "indexed":
            lines += [
                "        const long long* sources = (const long long*)table_a;",
                "        if (j >= frame_len) { v[u] = (real_t)0; continue; }",
                "        if (pos < 0) pos = sources[pos + pad];",
                "        else if (pos >= sig_len) pos = sources[pad + pos - sig_len];",
                "        v[u] = to_real(in[pos]);",
            ]
        else:
            inside = "f < frames && pos >= 0 && pos < sig_len" if pairs else \
                "pos >= 0 && pos < sig_len"
            lines += [
                f"        v[u] = j < frame_len && {inside} ? to_real(in[pos]) : (real_t)0;",
            ]
        lines += [
            "    }",
            "    #pragma unroll",
            f"    for (int u = 0; u < {FRAME_OUTPUTS}; ++u) {{",
            "        const long long j = j0 + u * slots;",
            f"        if (j < frame_len) put(&out[{'2 * j' if pairs else 'j'}], v[u]);",
            "    }",
        ]
        return "\n".join(lines)
    if kind == "ola":
        return "\n".join([
            _ola_sum(spec.option == "window"),
            "    if (gid >= rows * sig_len) return;",
            "    const long long i = gid % sig_len, r = gid / sig_len;",
            "    put(&((storage_t*)out_ptr)[gid], ola_at(r, i + pad));",
        ])  # fmt: skip
    if kind == "fold" and spec.option == "edges":
        return "\n".join([
            "    if (gid >= rows * size) return;",
            "    const long long q = gid % size, r = gid / size;",
            "    const long long* targets = (const long long*)table_a;",
            "    const long long* positions = (const long long*)table_c;",
            "    const real_t* edge = (const real_t*)in_ptr + r * 2 * pad;",
            "    storage_t* out = (storage_t*)out_ptr + r * sig_len + targets[q];",
            "    real_t acc = to_real(*out);",
            "    const long long* offsets = (const long long*)table_b;",
            "    for (long long k = offsets[q]; k < offsets[q + 1]; ++k) {",
            "        const long long p = positions[k];",
            "        acc += edge[p < pad ? p : p - sig_len];",
            "    }",
            "    put(out, acc);",
        ])  # fmt: skip
    if kind == "fold":
        return "\n".join([
            _ola_sum(False),
            "    if (gid >= rows * size) return;",
            "    const long long q = gid % size, r = gid / size;",
            "    const long long* targets = (const long long*)table_a;",
            "    const long long* offsets = (const long long*)table_b;",
            "    const long long* positions = (const long long*)table_c;",
            "    storage_t* out = (storage_t*)out_ptr + r * sig_len + targets[q];",
            "    real_t acc = to_real(*out);",
            "    for (long long k = offsets[q]; k < offsets[q + 1]; ++k) {",
            "        acc += ola_at(r, positions[k]);",
            "    }",
            "    put(out, acc);",
        ])  # fmt: skip
    if kind == "istft":
        return "\n".join([
            _ola_sum(True),
            "    if (gid >= rows * size) return;",
            "    const long long i = gid % size, r = gid / size;",
            "    const long long p = i + start;",
            "    real_t v = (real_t)0;",
            "    if (p < stop) v = ola_at(r, p) * ((const real_t*)table_b)[i];",
            "    put(&((storage_t*)out_ptr)[gid], v);",
        ])  # fmt: skip
    if kind == "seam":
        return _seam(spec)
    if kind in _ARRAY_BODIES:
        return _ARRAY_BODIES[kind](spec)
    # bank
    # options "power" | "db", with "pow" appended when the input is raised first ("power"
    # itself contains "pow": a substring test made every bank gather call pow())
    value = "pow(x, (real_t)exponent)" if spec.option.endswith("pow") else "x"
    lines = [
        "    if (gid >= rows * size) return;",
        "    const long long m = gid % size, r = gid / size;",
        "    const storage_t* in = (const storage_t*)in_ptr + r * frame_len;",
        f"    {BAND_RECORD}",
        "    const band_t band = ((const band_t*)table_a)[m];",
        "    const real_t* weight = (const real_t*)table_b + m;  // bin-major: stride size",
        "    real_t acc = (real_t)0;",
        "    for (int k = 0; k < band.count; ++k) {",
        "        const real_t x = to_real(in[band.first + k]);",
        f"        acc += weight[k * size] * {value};",
        "    }",
    ]
    if spec.option.startswith("db"):
        lines.append(f"    acc = {db_of('(real_t)factor', 'acc')};")
    lines.append("    put(&((storage_t*)out_ptr)[gid], acc);")
    return "\n".join(lines)


def _convert(spec: GatherSpec) -> str:
    src, dst = spec.option.rstrip("~").split(">")
    conj = spec.option.endswith("~")
    lines = [
        "    if (gid >= size) return;",
        "    const long long* t = (const long long*)table_a;  // ndim, out, view shape, strides",
        "    const long long nd = t[0];",
        "    long long rem = gid, off = start;",
        "    bool inside = true;",
        "    for (long long d = nd - 1; d >= 0; --d) {",
        "        const long long c = rem % t[1 + d];",
        "        rem /= t[1 + d];",
        "        if (c >= t[1 + nd + d]) inside = false;",
        "        off += c * t[1 + 2 * nd + d];",
        "    }",
        f"    const {_ARRAY_TYPES[src]}* in = (const {_ARRAY_TYPES[src]}*)in_ptr;",
        f"    {_ARRAY_TYPES[dst]}* out = ({_ARRAY_TYPES[dst]}*)out_ptr;",
    ]
    if dst.startswith("complex"):
        load = "to_cpx(in[off])" if src.startswith("complex") else "{to_real(in[off]), (real_t)0}"
        lines += ["    cpx v = {(real_t)0, (real_t)0};",
                  f"    if (inside) {{ const cpx s = {load}; v = s; }}"]  # fmt: skip
        if conj:
            lines.append("    v.im = -v.im;")
    else:
        load = "to_cpx(in[off]).re" if src.startswith("complex") else "to_real(in[off])"
        lines.append(f"    const real_t v = inside ? {load} : (real_t)0;")
    lines.append("    put(&out[gid], v);")
    return "\n".join(lines)


def _below_floor(value: str, floor: str) -> str:
    """Whether ``max(value, floor)`` is ``floor`` under torch.maximum's (and numpy's) rule:
    a NaN in either propagates, so a NaN floor wins too (every clip of the kernels renders
    through here: the ``clip`` map, ``correlate_clip`` and ``project_clip``)."""
    return f"({value} < {floor} || {floor} != {floor})"


# A row q's floor in the clipped correlation: its signal's peak (table_b, one a signal of
# ``count`` rows) minus top_db (project_clip takes the peak as a maximum of ``hop`` values)
_SIGNAL_FLOOR = "((const real_t*)table_b)[q / count] - (real_t)factor"


_MAPS = {
    # The floor is rounded to the storage first, as an elementwise ``peak - top_db`` would be.
    # A NaN, in the value or the floor, propagates (numpy's and torch's maximum); so does the
    # dB's (block.db_of).
    "clip": "storage_t floor_s; put(&floor_s, to_real(((const storage_t*)table_a)[gid / size])"
            " - (real_t)factor); const real_t floor = to_real(floor_s);"
            f" v = {_below_floor('v', 'floor')} ? floor : v;",
    "threshold": "if (v < (real_t)factor) v = (real_t)0;",
    "db": f"v = {db_of('(real_t)factor', 'v')};",
    "window": "v *= ((const real_t*)table_a)[gid % size];",
}


def _map(spec: GatherSpec) -> str:
    return "\n".join([
        "    if (gid >= rows * size) return;",
        "    real_t v = to_real(((const storage_t*)in_ptr)[gid]);",
        f"    {_MAPS[spec.option]}",
        "    put(&((storage_t*)out_ptr)[gid], v);",
    ])  # fmt: skip


def _value(spec: GatherSpec) -> str:
    lines = [
        "    if (gid >= rows * size) return;",
        f"    const cpx z = to_cpx(((const {_COMPLEX_OF[spec.precision]}*)in_ptr)[gid]);",
        "    real_t v = z.re * z.re + z.im * z.im;",
    ]
    if spec.option == "magnitude":
        lines.append("    v = sqrt(v);")
    elif spec.option == "db":
        lines.append(f"    v = {db_of('(real_t)10', 'v')};")
    lines.append("    put(&((storage_t*)out_ptr)[gid], v);")
    return "\n".join(lines)


def _cmul(spec: GatherSpec) -> str:
    ctype = _COMPLEX_OF[spec.storage]
    return "\n".join([
        "    if (gid >= rows * size) return;",
        f"    const cpx a = to_cpx(((const {ctype}*)in_ptr)[gid]);",
        f"    const cpx b = to_cpx(((const {ctype}*)table_a)[gid]);",
        f"    put(&(({ctype}*)out_ptr)[gid], cmul(a, b));",
    ])  # fmt: skip


ROWMAX_THREADS = 256  # a power of two: the tree halves it
ROWMAX_LOADS = 8  # a rowmax thread's loads in flight (a power of two)


def _rowmax(barrier: str) -> str:
    """The ``rowmax`` block kernel: block ``b`` reduces chunk ``b % count`` of row
    ``b / count``; ROWMAX_LOADS running maxima a thread, each round's loads predicated
    rather than left to a tail loop, so that many loads are in flight until the chunk's
    end (four and a one-load tail took twice the round trips: 8.8 us for mfcc's 12.8 MB
    under ncu on an H200)."""
    t, u = ROWMAX_THREADS, ROWMAX_LOADS
    return "\n".join([
        "    auto larger = [](real_t m, real_t v) -> real_t {",
        "        return (v > m || v != v) ? v : m;  // a NaN, once met, stays",
        "    };",
        "    const long long chunks = count > 0 ? count : 1;",
        "    const long long r = block / chunks, lo = (block - r * chunks) * frame_len;",
        "    const long long hi = lo + frame_len < size ? lo + frame_len : size;",
        "    const storage_t* in = (const storage_t*)in_ptr + r * size;",
        f"    real_t m[{u}];",
        f"    for (int j = 0; j < {u}; ++j) m[j] = to_real(in[lo]);  // the chunk's first value",
        f"    for (long long k = lo + tid; k < hi; k += {u * t})",
        f"        for (int j = 0; j < {u}; ++j)",
        f"            if (k + j * {t} < hi) m[j] = larger(m[j], to_real(in[k + j * {t}]));",
        f"    for (int w = {u // 2}; w > 0; w >>= 1)",
        "        for (int j = 0; j < w; ++j) m[j] = larger(m[j], m[j + w]);",
        "    real_t* tree = (real_t*)specux_shared;",
        "    tree[tid] = m[0];",
        f"    {barrier}",
        f"    for (int w = {t // 2}; w > 0; w >>= 1) {{",
        "        if (tid < w) tree[tid] = larger(tree[tid], tree[tid + w]);",
        f"        {barrier}",
        "    }",
        "    if (tid == 0) put(&((storage_t*)out_ptr)[block], tree[0]);",
    ])  # fmt: skip


def _colnorm(spec: GatherSpec) -> str:
    peak = [  # the p-norm as peak * ||a / peak||_p: a ** p neither overflows nor underflows
        "    real_t peak = (real_t)0;",
        "    for (long long k = 0; k < count; ++k) {",
        "        const real_t a = fabs(to_real(in[k * size]));",
        "        peak = a > peak ? a : peak;",
        "    }",
        "    const real_t unit = peak > (real_t)0 ? peak : (real_t)1;",
    ] if spec.option == "p" else []  # fmt: skip
    accumulate = {
        # a NaN is taken and then kept (numpy's max / min and torch's propagate it)
        "inf": "length = (a > length || a != a) ? a : length;",
        "min": "length = (k == 0 || a < length || a != a) ? a : length;",
        "count": "length += a > (real_t)0 ? (real_t)1 : (real_t)0;",
        "1": "length += a;",
        "p": "length += pow(a / unit, (real_t)exponent);",
    }[spec.option]
    finish = "length = peak * pow(length, (real_t)1 / (real_t)exponent);" \
        if spec.option == "p" else ""  # fmt: skip
    return "\n".join([
        "    if (gid >= rows * size) return;",
        "    const long long c = gid % size, r = gid / size;",
        "    const storage_t* in = (const storage_t*)in_ptr + r * count * size + c;",
        "    storage_t* out = (storage_t*)out_ptr + r * count * size + c;",
        *peak,
        "    real_t length = (real_t)0;",
        "    for (long long k = 0; k < count; ++k) {",
        "        const real_t a = fabs(to_real(in[k * size]));",
        f"        {accumulate}",
        "    }",
        f"    {finish}",
        "    if (length < (real_t)eps) length = (real_t)1;",
        "    for (long long k = 0; k < count; ++k)",
        "        put(&out[k * size], to_real(in[k * size]) / length);",
    ])  # fmt: skip


# The dense projection (kinds ``project`` / ``project_clip``): mfcc's and lfcc's DCT, and
# its transpose in their backward, over every row of a frame-major dB spectrogram. The
# matrix's shape is compiled in (``option`` ``"i<n_in>o<n_out>"``: :func:`project_shape`),
# so every loop bound, stride and division is a constant. A block takes
# :func:`project_rows` consecutive rows -- 32 times the rows a lane computes:
# PROJECT_LANE_ROWS where the block's shared memory allows, else one -- one contiguous
# stretch of memory, staged into shared memory by coalesced loads (16-byte vectors, up to
# _PROJECT_LOADS a thread in flight at once, for a whole block of aligned rows whose
# length is a multiple of a vector; and clipped there, each value once) beside the matrix
# transposed, its columns padded to a multiple of 4 with zeros. Warp w computes columns
# 4 w .. 4 w + 3 of its lane rows, lane l rows l, l + 32, ...: per k, one value of each
# row and four of the matrix, the same four for the whole warp (a broadcast, read once for
# all of a lane's rows). So a block has one warp
# per four columns (mfcc's 20 coefficients: 5 warps, 626 blocks of 64 rows for PERF.md's
# 40064 frames), and a thread keeps 4 sums a row. The sums go back through shared memory
# and leave as the block's contiguous rows of output (coalesced). Each output sums over
# ascending k in one accumulator, as the bank gather does: the same bits.
PROJECT_KINDS = ("project", "project_clip")
PROJECT_LANE_ROWS = 2  # rows a lane computes where a block's shared memory allows
PROJECT_MAX_OUT = 128  # columns: 4 a warp, at most 32 warps (1024 threads) a block
PROJECT_SHARED = 48 * 1024  # a block's shared memory at most (no opt-in needed)
_PROJECT_VECTOR = 16  # bytes of a staged load or store of whole blocks of rows
_PROJECT_LOADS = 8  # a thread's vector loads in flight (registers: 4 each in float32)
# the most values a signal's clip peak is the maximum of (``hop`` of them, read at once:
# transform_exec.clip_peaks hands the kernel row_max's chunk maxima)
PROJECT_PEAK_CHUNKS = 8


def project_shape(option: str) -> tuple[int, int]:
    """``(n_in, n_out)`` of a ``project`` kernel, from its option ``"i<n_in>o<n_out>"``;
    raises for a malformed one (:func:`project_option` checks that the shape fits)."""
    match = re.fullmatch(r"i([0-9]+)o([0-9]+)", option)
    if match is None:
        raise ValueError(f"project option={option!r} is not 'i<n_in>o<n_out>'")
    return int(match.group(1)), int(match.group(2))


def _project_stride(n_in: int, precision: str) -> int:
    """The staged rows' stride in shared memory (values): at least ``n_in``, so that lane l's
    row starts at a word offset whose 16-byte reads from 8 lanes at a time fall in distinct
    banks (4 words mod 8 apart in float32, 2 values mod 4 in float64)."""
    step, rest = (8, 4) if precision != "float64" else (4, 2)
    return n_in + (rest - n_in) % step


def _project_layout(n_in: int, n_out: int, precision: str,
                    lane_rows: int) -> tuple[int, int, int]:  # fmt: skip
    """(row stride, padded columns, shared bytes) of a ``project`` block of ``lane_rows``
    rows a lane."""
    itemsize = 8 if precision == "float64" else 4
    stride, columns = _project_stride(n_in, precision), -(-n_out // 4) * 4
    rows = 32 * lane_rows
    rows_area = rows * max(stride, n_out)  # the rows, then the outputs
    return stride, columns, (rows_area + n_in * columns + rows) * itemsize


def _project_lane_rows(n_in: int, n_out: int, precision: str) -> int:
    """Rows a lane of a ``project`` block computes: PROJECT_LANE_ROWS where that block's
    shared memory fits PROJECT_SHARED, else one."""
    wide = _project_layout(n_in, n_out, precision, PROJECT_LANE_ROWS)[2] <= PROJECT_SHARED
    return PROJECT_LANE_ROWS if wide else 1


def project_fits(n_in: int, n_out: int, precision: str) -> bool:
    """Whether the ``project`` kernel takes an ``(n_out, n_in)`` matrix: at most
    PROJECT_MAX_OUT columns and a block of one row a lane within PROJECT_SHARED bytes of
    shared memory."""
    return (1 <= n_out <= PROJECT_MAX_OUT and n_in >= 1
            and _project_layout(n_in, n_out, precision, 1)[2] <= PROJECT_SHARED)  # fmt: skip


def project_option(n_in: int, n_out: int, precision: str) -> str:
    """The ``project`` option of an ``(n_out, n_in)`` matrix; raises where it does not fit."""
    if not project_fits(n_in, n_out, precision):
        raise ValueError(f"a {n_out} x {n_in} matrix does not fit the project kernel in "
                         f"{precision} (at most {PROJECT_MAX_OUT} outputs and "
                         f"{PROJECT_SHARED} bytes of shared memory)")  # fmt: skip
    return f"i{n_in}o{n_out}"


def project_threads(option: str) -> int:
    """A ``project`` block's threads: a warp per four columns."""
    return 32 * -(-project_shape(option)[1] // 4)


def project_rows(option: str, precision: str) -> int:
    """Rows a ``project`` block takes: 32 lanes' rows."""
    return 32 * _project_lane_rows(*project_shape(option), precision)


def project_shared_bytes(option: str, precision: str) -> int:
    """Dynamic shared memory of a ``project`` block: the rows (then the outputs), the matrix
    transposed, each row's clip floor."""
    n_in, n_out = project_shape(option)
    return _project_layout(n_in, n_out, precision, _project_lane_rows(n_in, n_out, precision))[2]


def _project(spec: GatherSpec, barrier: str) -> str:
    n_in, n_out = project_shape(spec.option)
    lane_rows = _project_lane_rows(n_in, n_out, spec.precision)
    stride, columns, _ = _project_layout(n_in, n_out, spec.precision, lane_rows)
    rows_, threads = 32 * lane_rows, project_threads(spec.option)
    if spec.storage != spec.precision:
        raise ValueError("the project kernel stores rows in the compute precision")
    clip = spec.kind == "project_clip"
    floors = []
    if clip:
        floors = [
            # torch.maximum(x, floor): a NaN in either is the result
            "    auto clipped = [](real_t v, real_t floor) -> real_t {",
            f"        return {_below_floor('v', 'floor')} ? floor : v;",
            "    };",
            "    auto larger = [](real_t m, real_t v) -> real_t {",
            "        return (v > m || v != v) ? v : m;  // a NaN, once met, stays (rowmax's)",
            "    };",
            f"    for (int r = tid; r < {rows_}; r += {threads}) {{",
            "        const long long q = q0 + r;",
            "        real_t floor = (real_t)0;",
            "        if (q < rows) {  // its signal's peak: the maximum of hop values",
            "            const real_t* p = (const real_t*)table_b + (q / count) * hop;",
            f"            real_t v[{PROJECT_PEAK_CHUNKS}];",
            f"            for (int c = 0; c < {PROJECT_PEAK_CHUNKS}; ++c)",
            "                v[c] = p[c < hop ? c : 0];  // every load in flight at once",
            "            real_t m = v[0];",
            f"            for (int c = 1; c < {PROJECT_PEAK_CHUNKS}; ++c) m = larger(m, v[c]);",
            "            floor = m - (real_t)factor;",
            "        }",
            "        fl[r] = floor;",
            "    }",
            f"    {barrier}",
        ]  # fmt: skip

    def read(value: str, row: str) -> str:
        return f"clipped({value}, fl[{row}])" if clip else value

    # the whole block's rows as 16-byte vectors, every load issued before any is stored
    per = _PROJECT_VECTOR // (8 if spec.precision == "float64" else 4)  # values a vector
    vectors = rows_ * n_in // per
    staged = []
    if n_in % per == 0:
        loads = min(-(-vectors // threads), _PROJECT_LOADS)  # a thread's loads a round
        rounds = -(-vectors // (loads * threads))
        guard = rounds * loads * threads != vectors
        index = f"tid + (g * {loads} + j) * {threads}"
        staged = [
            f"    if (n_rows == {rows_} && (unsigned long long)(in + q0 * {n_in})"
            f" % {_PROJECT_VECTOR} == 0) {{",
            f"        const vec_t* src = (const vec_t*)(in + q0 * {n_in});",
            f"        for (int g = 0; g < {rounds}; ++g) {{",
            f"            vec_t v[{loads}];  // every load of the round issued, then every store",
            "            #pragma unroll",
            f"            for (int j = 0; j < {loads}; ++j)",
            f"                {f'if ({index} < {vectors}) ' if guard else ''}v[j] = src[{index}];",
            "            #pragma unroll",
            f"            for (int j = 0; j < {loads}; ++j) {{",
            f"                const int i = {index};",
            *([f"                if (i >= {vectors}) break;"] if guard else []),
            f"                const int r = i / {n_in // per};",
            f"                const int c = (i - r * {n_in // per}) * {per};",
            *([f"                for (int t = 0; t < {per}; ++t) v[j].v[t] = "
               f"{read('v[j].v[t]', 'r')};"] if clip else []),
            f"                *(vec_t*)(xs + r * {stride} + c) = v[j];",
            "            }",
            "        }",
            "    } else",
        ]  # fmt: skip
    lanes = range(lane_rows)
    acc = [[f"acc{j}_{c}" for c in range(4)] for j in lanes]
    stores = []
    for j in lanes:
        row = f"(lane + {32 * j})" if j else "lane"
        if n_out % 4 == 0:
            stores.append(f"    ((quad_t*)(xs + {row} * {n_out}))[w] = "
                          f"quad_t{{{{{', '.join(acc[j])}}}}};")  # fmt: skip
        else:
            stores += [f"    if (4 * w + {c} < {n_out}) xs[{row} * {n_out} + 4 * w + {c}] = "
                       f"{acc[j][c]};" for c in range(4)]  # fmt: skip
    out_vectors = rows_ * n_out // per  # a whole block's outputs (rows_: a multiple of 32)
    return "\n".join([
        f"    const long long q0 = block * {rows_}LL;  // the block's first row",
        f"    const int n_rows = rows - q0 < {rows_} ? (int)(rows - q0) : {rows_};",
        "    const storage_t* in = (const storage_t*)in_ptr;",
        "    const real_t* right = (const real_t*)table_a;  // the matrix transposed",
        "    real_t* xs = (real_t*)specux_shared;  // the rows, then the outputs",
        f"    real_t* ds = xs + {rows_ * max(stride, n_out)};  // the matrix, {columns} columns",
        f"    real_t* fl = ds + {n_in * columns};  // each row's clip floor",
        f"    struct alignas({_PROJECT_VECTOR}) vec_t {{ real_t v[{per}]; }};",
        *floors,
        f"    for (int i = tid; i < {n_in * columns}; i += {threads}) {{",
        f"        const int k = i / {columns}, c = i - k * {columns};",
        f"        ds[i] = c < {n_out} ? right[k * {n_out} + c] : (real_t)0;",
        "    }",
        *staged,
        f"    for (int e = tid; e < n_rows * {n_in}; e += {threads}) {{  // coalesced",
        f"        const int r = e / {n_in};",
        f"        xs[r * {stride} + (e - r * {n_in})] = "
        f"{read(f'to_real(in[q0 * {n_in} + e])', 'r')};",
        "    }",
        f"    {barrier}",
        "    const int lane = tid % 32, w = tid / 32;",
        # a row's values 4 at a time: lane l's row starts 4 words mod 8 (float32) apart
        # from lane l + 1's, so a 16-byte read of 8 lanes meets 8 distinct groups of banks
        # (_project_stride), where reads of one value each would meet 4 lanes a bank
        "    struct alignas(16) quad_t { real_t v[4]; };",
        *[f"    const quad_t* x{j} = (const quad_t*)(xs + (lane + {32 * j}) * {stride});"
          for j in lanes],
        "    const real_t* d = ds + 4 * w;  // this warp's 4 columns, row k at k * "
        f"{columns}",
        *[f"    real_t {a} = (real_t)0;" for row in acc for a in row],
        "    #pragma unroll 2",
        f"    for (int kq = 0; kq < {n_in // 4}; ++kq) {{",
        *[f"        const quad_t v{j} = x{j}[kq];" for j in lanes],
        f"        const real_t* dk = d + kq * {4 * columns};",
        *[f"        {acc[j][c]} += v{j}.v[{i}] * dk[{i * columns + c}];"
          for i in range(4) for c in range(4) for j in lanes],
        "    }",
        *[f"    {acc[j][c]} += xs[(lane + {32 * j}) * {stride} + {k}] * d[{k * columns + c}];"
          for k in range(n_in // 4 * 4, n_in) for c in range(4) for j in lanes],  # n_in % 4
        f"    {barrier}  // every row read: the outputs go where the rows were",
        *stores,
        f"    {barrier}",
        "    storage_t* out = (storage_t*)out_ptr + q0 * " + str(n_out) + ";",
        f"    if (n_rows == {rows_} && (unsigned long long)out % {_PROJECT_VECTOR} == 0) {{",
        "        #pragma unroll",
        f"        for (int j = 0; j < {-(-out_vectors // threads)}; ++j) {{",
        f"            const int i = tid + j * {threads};",
        *([f"            if (i >= {out_vectors}) break;"] if out_vectors % threads else []),
        "            ((vec_t*)out)[i] = ((const vec_t*)xs)[i];",
        "        }",
        "    } else",
        f"    for (int e = tid; e < n_rows * {n_out}; e += {threads}) put(&out[e], xs[e]);",
    ])  # fmt: skip


# The tiled correlations: GEMMs whose left operand is read in place from an array with
# overlapping (or shifted) rows, one block of CORRELATE_THREADS threads per output tile of
# (threads / lanes) * m rows by lanes * n columns; thread (tx, ty) = (tid % lanes,
# tid / lanes) keeps the m * n sums of rows ty * m + i and columns tx * n + k in registers.
# CORRELATE_TAPS reduction steps of both operands are staged in shared memory at a time (the
# left one step-major, rows padded by one slot so a warp's stores hit distinct banks), loaded
# into registers first (one tile of steps ahead in the forward kind: :func:`_staged_steps`). Every
# sum runs over its reduction range in ascending order in one accumulator, whatever the tile:
# the result depends on the operands alone.
# - correlate: rows are the frames of every signal (``rows * count``), columns the kernel's
#   ``size`` columns, the reduction the taps: A[f, j] = x[r, start + t * hop + j], B = the
#   kernel (taps, size). A kernel longer than CORRELATE_SPLIT taps is cut into splits (one
#   block per split), each split's sums written to a partials array that ``partsum`` adds
#   up in split order.
# - correlate_t, its transpose (the cqt adjoint): xbar[r, start + b * hop + u] += sum over
#   (q, c) of G[r, b - q, pad + c] * KT[q * size + c, u] for the ``count + Q - 1`` hop-wide
#   sample blocks b of each signal (Q = ceil(frame_len / hop)), columns u < hop, the
#   reduction over the Q * size pairs (q, c); KT[q * size + c, u] = kernel[q * hop + u, c]
#   (zero past the taps). Each sample is one thread's: no atomics.
CORRELATE_THREADS = 128
CORRELATE_TAPS = 32  # divides CORRELATE_THREADS: a thread stages one step of several rows
CORRELATE_SPLIT = 256  # a multiple of CORRELATE_TAPS
CORRELATE_LANES = (1, 2, 4, 8)  # column lanes a tile may have
TILED_KINDS = ("correlate", "correlate_clip", "correlate_t")
_MMA_ROWS = 16 * CORRELATE_THREADS // 32  # rows of a tensor-core tile per m: 16 a warp
MMA_WINDOW = 32  # hop-steps a tensor-core block sums at most (its window: rows + 31 frames)
MMA_CAPABILITY = (8, 0)  # mma.sync on tf32 and cvt.rna.tf32 (PTX): sm_80 and later


def correlate_tile(option: str) -> tuple[int, int, int]:
    """(lanes, n, m) of a tiled kind's option ``"c<lanes>n<n>m<m>"``: a block's tile is
    ``(CORRELATE_THREADS // lanes) * m`` rows by ``lanes * n`` columns. A tensor-core tile
    ``"w<n>m<m>"`` (:func:`mma_tile`) reads as ``(0, n, m)``."""
    if mma_tile(option) is not None:
        n, m = mma_tile(option)
        return 0, n, m
    match = re.fullmatch(r"c([1248])n([1-8])m([1-8])", option)
    if match is None:
        raise ValueError(f"correlate option={option!r} is not 'c<1|2|4|8>n<1..8>m<1..8>' "
                         "(or a tensor-core tile 'w<1..4>m<1..2>')")  # fmt: skip
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def mma_tile(option: str) -> tuple[int, int] | None:
    """(n, m) of a tensor-core tile ``"w<n>m<m>"`` (forward correlation, float32 only): each
    of the block's 4 warps computes m 16-row by n 8-column products (mma.sync m16n8k8 in
    three tf32 passes: :func:`_tiled_mma`), a block ``64 m`` rows by ``8 n`` columns; None
    for the other options."""
    match = re.fullmatch(r"w([1-4])m([12])", option)
    return None if match is None else (int(match.group(1)), int(match.group(2)))


def correlate_frames(option: str) -> int:
    """Rows of a tiled block's tile."""
    lanes, _, m = correlate_tile(option)
    return _MMA_ROWS * m if lanes == 0 else CORRELATE_THREADS // lanes * m


def correlate_columns(option: str) -> int:
    """Columns of a tiled block's tile."""
    lanes, n, _ = correlate_tile(option)
    return 8 * n if lanes == 0 else lanes * n


def _mma_strides(option: str) -> tuple[int, int]:
    """Shared row strides of a tensor-core tile's staged operands, in floats: the left
    operand row-major (its fragment loads, 8 rows by 4 steps a warp, and its stores, 32
    steps of one row, each hit 32 distinct banks), the right one step-major with its rows
    padded to 8 or 24 modulo 32 (the fragment loads, 4 steps by 8 columns, hit distinct
    banks)."""
    columns = correlate_columns(option)
    return CORRELATE_TAPS + 4, columns + (8 if columns % 32 in (0, 16) else 0)


def correlate_shared_bytes(option: str, precision: str) -> int:
    """Dynamic shared memory of a tiled block: two int64 per tile row (where its operand
    row starts, and its block index for correlate_t), the left operand's staged steps
    (rows padded by one slot) and the right one's; a tensor-core tile: its window of
    ``rows + MMA_WINDOW - 1`` frame starts and one hop-step of the right operand, at
    :func:`_mma_strides`."""
    tm = correlate_frames(option)
    if mma_tile(option) is not None:
        stride_a, stride_b = _mma_strides(option)
        return ((tm + MMA_WINDOW - 1) * stride_a + CORRELATE_TAPS * stride_b) * 4
    itemsize = 8 if precision == "float64" else 4
    columns = correlate_columns(option)
    return 16 * tm + (CORRELATE_TAPS * (tm + 1) + CORRELATE_TAPS * columns) * itemsize


def _tiled_forward(tm: int, clip: bool = False) -> dict:
    """The forward correlation's parts; ``clip`` (kind ``correlate_clip``): each staged
    value clipped at its signal's floor, ``table_b[r] - factor``, which a tile row keeps in
    the slot that holds the transposed kind's block index (``rs``; unused here). The clip
    applies as a tile is stored to shared memory (``stage``), not as it loads: a load's
    value is then first needed after the products of the tile before, which its latency
    hides behind (clipped as they loaded, mfcc's DCT waited on each tile's loads: 31.8 us
    under ncu on an H200, 14.6 unclipped; docs/benchmarks.md)."""
    split = CORRELATE_SPLIT
    row = "rb[f] = q < n_rows ? (q / count) * sig_len + start + (q % count) * hop : -1;"
    left = "to_real(in[rb[f] + k])"
    setup, stage, row_read = [], "pa[s]", None
    if clip:
        row += f"\n        fl[f] = q < n_rows ? {_SIGNAL_FLOOR} : (real_t)0;"
        # the loaded values only: padding steps stay 0; a row past the frames holds 0s and
        # its floor is 0, which leaves them 0. A thread's floors are read into registers
        # before it stages a value, and the step's test is a select, not a branch around
        # each read, so the reads issue together (mfcc's clipped DCT 0.0245 -> 0.0233 ms on
        # an H100, the same bits; docs/benchmarks.md).
        row_read = "fl[f]"  # into rv[s] (_staged_steps)
        stage = "clipped(pa[s], rv[s], k < k_hi)"
        setup = [
            "    real_t* const fl = (real_t*)((long long*)specux_shared + TM);  // floors",
            # torch.maximum(x, floor): a NaN in either is the result
            "    auto clipped = [](real_t v, real_t floor, bool loaded) -> real_t {",
            f"        return loaded && {_below_floor('v', 'floor')} ? floor : v;",
            "    };",
        ]
    return {
        "setup": [
            "    const long long n_rows = rows * count, n_cols = size;",
            f"    const long long splits = (frame_len + {split - 1}) / {split};",
            "    const long long n_mt = (n_rows + TM - 1) / TM, n_ct = (n_cols + TN - 1) / TN;",
            "    const long long mt = block % n_mt, ct = (block / n_mt) % n_ct;",
            "    const long long split = block / (n_mt * n_ct);",
            f"    const long long k_lo = split * {split};",
            f"    const long long k_hi = frame_len - k_lo < {split} ? frame_len : k_lo + {split};",
            "    const storage_t* in = (const storage_t*)in_ptr;",
            "    const real_t* right = (const real_t*)table_a;",
            *setup,
        ],
        # row f of the tile: its frame's first sample, or -1 past the frames
        "row": row,
        "step": "",
        "left": f"rb[f] >= 0 ? {left} : (real_t)0",
        "stage": stage,
        "row_read": row_read,
        "right": "right[k * size + c]",
        "store": [
            "            if (splits > 1) put(&out[(split * n_rows + q) * size + c], acc[i][k]);",
            "            else put(&out[q * stop + pad + c], acc[i][k]);",
        ],
    }


def _tiled_transpose(tm: int) -> dict:
    return {
        "setup": [
            "    const long long taps_q = (frame_len + hop - 1) / hop;  // Q",
            "    const long long n_blocks = count + taps_q - 1;  // sample blocks a signal",
            "    const long long n_rows = rows * n_blocks, n_cols = hop;",
            "    const long long n_mt = (n_rows + TM - 1) / TM, n_ct = (n_cols + TN - 1) / TN;",
            "    const long long mt = block % n_mt, ct = block / n_mt;",
            "    const long long k_lo = 0, k_hi = taps_q * size;",
            "    const long long reach = (count - 1) * hop + frame_len;  // samples written",
            "    const storage_t* in = (const storage_t*)in_ptr;",
            "    const real_t* right = (const real_t*)table_a;",
        ],
        # row f of the tile: G's row of frame b (rb), and b (rs), or -1 past the blocks
        "row": "const long long r = q / n_blocks, bq = q % n_blocks;\n"
               "        rb[f] = q < n_rows ? (r * count + bq) * stop + pad : -1;\n"
               "        rs[f] = q < n_rows ? bq : -1;",
        # this thread's reduction step k = (hop kq, column kc), the same for all its rows
        "step": "const long long kq = k / size, kc = k % size;",
        "left": "(rs[f] >= kq && rs[f] - kq < count)"
                " ? to_real(in[rb[f] - kq * stop + kc]) : (real_t)0",
        "right": "right[k * hop + c]",
        "store": [
            "            const long long r = q / n_blocks, bq = q % n_blocks;",
            "            if (bq * hop + c >= reach) continue;",
            "            real_t* o = &out[r * sig_len + start + bq * hop + c];",
            "            put(o, to_real(*o) + acc[i][k]);",
        ],
    }


def _fetch(parts: dict, tm: int, tn: int, k0: str, indent: str) -> list[str]:
    """Load reduction steps ``k0 .. k0 + TK`` of both operands into registers ``pa`` / ``pb``:
    each thread one step (tid % TK) of every (threads / TK)-th row of the left operand, and
    every threads-th element of the right one."""
    tk, threads = CORRELATE_TAPS, CORRELATE_THREADS
    return [indent + line for line in [
        "{",
        f"    const long long k = {k0} + tid % {tk};",
        f"    {parts['step']}",
        f"    for (int s = 0; s < {tm * tk // threads}; ++s) {{",
        f"        const int f = tid / {tk} + s * {threads // tk};",
        f"        pa[s] = k < k_hi ? {parts['left']} : (real_t)0;",
        "    }",
        "}",
        f"for (int s = 0; s < {-(-tk * tn // threads)}; ++s) {{",
        f"    const int i = tid + s * {threads};",
        f"    const long long k = {k0} + i / {tn}, c = c0 + i % {tn};",
        f"    pb[s] = i < {tk * tn} && k < k_hi && c < n_cols ? {parts['right']} : (real_t)0;",
        "}",
    ] if line.strip()]  # fmt: skip


def _staged_steps(parts: dict, tm: int, tn: int, barrier: str, ahead: bool) -> list[str]:
    """The reduction loop's head: the tile of steps ``k0 .. k0 + TK`` of both operands in
    shared memory. ``ahead`` (the forward kind): loaded into registers one tile early -- the
    next tile's global loads issue after the barrier, before this tile's products, so their
    latency hides behind them (before, 39% of a warp's cycles between instructions were
    waits on these loads: ncu on an H200, docs/benchmarks.md). Otherwise (the transposed
    kind, not timed loading ahead; loading into registers first took it from 80 to 96
    registers a thread) each thread stores what it loads, one tile at a time."""
    tk, threads = CORRELATE_TAPS, CORRELATE_THREADS
    assert tm * tk % threads == 0, "a tile's rows split evenly over the loading threads"
    loop = f"    for (long long k0 = k_lo; k0 < k_hi; k0 += {tk}) {{"
    if not ahead:
        return [
            loop,
            "        {",
            f"            const int kk = tid % {tk};",
            "            const long long k = k0 + kk;",
            f"            {parts['step']}",
            f"            for (int f = tid / {tk}; f < {tm}; f += {threads // tk})",
            f"                xs[kk * {tm + 1} + f] = k < k_hi ? {parts['left']} : (real_t)0;",
            "        }",
            f"        for (int i = tid; i < {tk * tn}; i += {threads}) {{",
            f"            const long long k = k0 + i / {tn}, c = c0 + i % {tn};",
            f"            ks[i] = k < k_hi && c < n_cols ? {parts['right']} : (real_t)0;",
            "        }",
            f"        {barrier}",
        ]  # fmt: skip
    # ``row_read``: a value of each staged row, read for all of this thread's rows into
    # ``rv`` before it stages any (the stage reads ``rv[s]``), so the reads issue together
    reads = [] if parts.get("row_read") is None else [
        f"        real_t rv[{tm * tk // threads}];",
        f"        for (int s = 0; s < {tm * tk // threads}; ++s) {{",
        f"            const int f = tid / {tk} + s * {threads // tk};",
        f"            rv[s] = {parts['row_read']};",
        "        }",
    ]  # fmt: skip
    return [
        f"    real_t pa[{tm * tk // threads}], pb[{-(-tk * tn // threads)}];",
        *_fetch(parts, tm, tn, "k_lo", "    "),
        loop,
        *reads,
        f"        for (int s = 0; s < {tm * tk // threads}; ++s) {{",
        f"            const int f = tid / {tk} + s * {threads // tk};",
        *([f"            const long long k = k0 + tid % {tk};"]
          if parts["stage"] != "pa[s]" else []),
        f"            xs[(tid % {tk}) * {tm + 1} + f] = {parts['stage']};",
        "        }",
        f"        for (int s = 0; s < {-(-tk * tn // threads)}; ++s)",
        f"            if (tid + s * {threads} < {tk * tn}) ks[tid + s * {threads}] = pb[s];",
        f"        {barrier}",
        f"        if (k0 + {tk} < k_hi) {{",
        *_fetch(parts, tm, tn, f"(k0 + {tk})", "            "),
        "        }",
    ]  # fmt: skip


def mma_splits(taps: int, hop: int) -> int:
    """Blocks a tensor-core correlation cuts each output tile's sum into (the rule
    :func:`_tiled_mma` renders): ``Q = ceil(taps / hop)`` hop-steps of 32-sample chunks of a
    hop's ``min(hop, taps)`` samples; with ``Q > 1`` every (chunk, group of up to
    ``MMA_WINDOW`` hop-steps) is a block, else a block sums all of its chunks."""
    steps = -(-taps // hop)
    chunks = -(-min(hop, taps) // CORRELATE_TAPS)
    per = 1 if steps > 1 else chunks
    return -(-chunks // per) * -(-steps // MMA_WINDOW)


def _tiled_mma(spec: GatherSpec, barrier: str) -> str:
    """The forward correlation on the tensor cores (option ``"w<n>m<m>"``, float32).

    Taps as (hop-step s, sample u): tap ``j = s * hop + u`` of frame t reads sample
    ``(t + s) * hop + u`` -- the sample frame t + s reads at tap u. A block takes ``TM``
    consecutive frames of one signal and one 32-sample chunk of u: it stages a window of
    ``TM + S - 1`` frame starts by 32 samples once (S the block's hop-steps, at most
    ``MMA_WINDOW``), and each hop-step's left operand is that window shifted by one row:
    each sample is loaded once a block instead of once for every frame that reads it (23
    times for cqt's lowest octave at hop 512). The right operand (the kernel rows of one
    hop-step) is loaded ahead into registers as in :func:`_staged_steps`. Blocks split the
    sum as :func:`mma_splits` (partial sums added by ``partsum``, as the SIMT tiles' splits).

    Products: each warp's ``m`` x ``n`` fragments by mma.sync m16n8k8 in tf32 three times
    -- ``a = ah + al``, ``b = bh + bl`` split into tf32 high and low parts, ``d += al bh + ah
    bl + ah bh`` (the "3xTF32" scheme: the dropped ``al bl`` and the parts' rounding are
    2**-21 or less of each product, about float32's own rounding), split as the fragments
    are loaded (splitting once as they are staged instead, in shared memory twice the size
    with 16 hop-steps a window, ran cqt's octaves 5-30% slower on the H200). Each hop-step's
    32 samples accumulate in fresh tensor-core sums, added to the float32 totals once a step.
    Not the bits of the SIMT tiles (those sum in one ascending chain), within float32
    rounding of them; every tensor-core tile gives the same bits (an output's sum does not
    depend on the tile)."""
    n, m = mma_tile(spec.option)
    tm, tn = correlate_frames(spec.option), correlate_columns(spec.option)
    tk, threads, window = CORRELATE_TAPS, CORRELATE_THREADS, MMA_WINDOW
    stride_a, stride_b = _mma_strides(spec.option)
    n_b = -(-tk * tn // threads)

    def fetch_b(step: str, indent: str) -> list[str]:
        """The kernel rows of hop-step ``step`` (32 samples of u) into registers ``pb``."""
        return [indent + line for line in [
            f"for (int s = 0; s < {n_b}; ++s) {{",
            f"    const int i = tid + s * {threads};",
            f"    const long long u = u0 + i / {tn}, j = {step} * hop + u, c = c0 + i % {tn};",
            f"    pb[s] = i < {tk * tn} && u < u_hi && j < frame_len && c < n_cols"
            " ? right[j * size + c] : 0.0f;",
            "}",
        ]]  # fmt: skip

    rows_a = f"warp * {16 * m} + i * 16 + g + 8 * (j & 1) + (int)(step - s_lo)"
    slot_b = "i" if stride_b == tn else f"i / {tn} * {stride_b} + i % {tn}"
    return "\n".join([
        f"    const long long TM = {tm}, TN = {tn};",
        "    const long long n_rows = rows * count, n_cols = size;",
        "    const long long taps_s = (frame_len + hop - 1) / hop;  // hop-steps",
        "    const long long width = hop < frame_len ? hop : frame_len;  // samples a step",
        f"    const long long chunks = (width + {tk - 1}) / {tk};",
        "    const long long per = taps_s > 1 ? 1 : chunks;  // chunks a block",
        f"    const long long groups = (taps_s + {window - 1}) / {window};",
        "    const long long splits = (chunks + per - 1) / per * groups;",
        "    const long long tiles = (count + TM - 1) / TM;  // row tiles a signal",
        "    const long long n_mt = rows * tiles, n_ct = (n_cols + TN - 1) / TN;",
        "    const long long mt = block % n_mt, ct = (block / n_mt) % n_ct;",
        "    const long long split = block / (n_mt * n_ct);",
        "    const long long t0 = (mt % tiles) * TM, c0 = ct * TN;",
        f"    const long long s_lo = split % groups * {window};",
        f"    const long long s_hi = taps_s - s_lo < {window} ? taps_s : s_lo + {window};",
        f"    const long long u_lo = split / groups * per * {tk};",
        f"    const long long u_hi = width - u_lo < per * {tk} ? width : u_lo + per * {tk};",
        "    const storage_t* in = (const storage_t*)in_ptr + mt / tiles * sig_len;",
        "    const float* right = (const float*)table_a;",
        "    const int warp = tid / 32, g = (tid % 32) / 4, r = tid % 4;",
        "    float* xs = (float*)specux_shared;  // the window",
        f"    float* ks = xs + {(tm + window - 1) * stride_a};  // a hop-step's kernel rows",
        f"    float acc[{m}][{n}][4];",
        "    #pragma unroll",
        f"    for (int i = 0; i < {m}; ++i)",
        f"        for (int k = 0; k < {n}; ++k)",
        "            for (int j = 0; j < 4; ++j) acc[i][k][j] = 0.0f;",
        f"    for (long long u0 = u_lo; u0 < u_hi; u0 += {tk}) {{",
        f"        for (int w = tid / {tk}; w < TM + s_hi - s_lo - 1; w += {threads // tk}) {{",
        f"            const long long u = u0 + tid % {tk};",
        "            const long long p = start + (t0 + s_lo + w) * hop + u;",
        f"            xs[w * {stride_a} + tid % {tk}] ="
        " u < u_hi && p < sig_len ? to_real(in[p]) : 0.0f;",
        "        }",
        f"        float pb[{n_b}];",
        "        {",
        "            const long long step = s_lo;",
        *fetch_b("step", "            "),
        "        }",
        "        for (long long step = s_lo; step < s_hi; ++step) {",
        f"            for (int s = 0; s < {n_b}; ++s) {{",
        f"                const int i = tid + s * {threads};",
        f"                if (i < {tk * tn}) ks[{slot_b}] = pb[s];",
        "            }",
        f"            {barrier}",
        "            if (step + 1 < s_hi) {",
        "                const long long step_next = step + 1;",
        *fetch_b("step_next", "                "),
        "            }",
        f"            float d[{m}][{n}][4];",
        "            #pragma unroll",
        f"            for (int i = 0; i < {m}; ++i)",
        f"                for (int k = 0; k < {n}; ++k)",
        "                    for (int j = 0; j < 4; ++j) d[i][k][j] = 0.0f;",
        "            #pragma unroll",
        f"            for (int kk = 0; kk < {tk}; kk += 8) {{",
        f"                float ah[{m}][4], al[{m}][4], bh[{n}][2], bl[{n}][2];",
        "                #pragma unroll",
        f"                for (int i = 0; i < {m}; ++i)",
        "                    for (int j = 0; j < 4; ++j) {",
        f"                        const float v = xs[({rows_a}) * {stride_a}"
        " + kk + r + 4 * (j >> 1)];",
        "                        ah[i][j] = specux_tf32(v);",
        "                        al[i][j] = specux_tf32(v - ah[i][j]);",
        "                    }",
        "                #pragma unroll",
        f"                for (int k = 0; k < {n}; ++k)",
        "                    for (int j = 0; j < 2; ++j) {",
        f"                        const float v = ks[(kk + r + 4 * j) * {stride_b} + k * 8 + g];",
        "                        bh[k][j] = specux_tf32(v);",
        "                        bl[k][j] = specux_tf32(v - bh[k][j]);",
        "                    }",
        "                #pragma unroll",
        f"                for (int i = 0; i < {m}; ++i)",
        f"                    for (int k = 0; k < {n}; ++k) {{",
        "                        SPECUX_MMA_TF32(d[i][k], al[i], bh[k]);",
        "                        SPECUX_MMA_TF32(d[i][k], ah[i], bl[k]);",
        "                        SPECUX_MMA_TF32(d[i][k], ah[i], bh[k]);",
        "                    }",
        "            }",
        "            #pragma unroll",
        f"            for (int i = 0; i < {m}; ++i)",
        f"                for (int k = 0; k < {n}; ++k)",
        "                    for (int j = 0; j < 4; ++j) acc[i][k][j] += d[i][k][j];",
        f"            {barrier}",
        "        }",
        "    }",
        "    storage_t* out = (storage_t*)out_ptr;",
        "    #pragma unroll",
        f"    for (int i = 0; i < {m}; ++i)",
        f"        for (int k = 0; k < {n}; ++k)",
        "            for (int j = 0; j < 4; ++j) {",
        f"                const long long t = t0 + warp * {16 * m} + i * 16 + g + 8 * (j >> 1);",
        "                const long long c = c0 + k * 8 + 2 * r + (j & 1);",
        "                if (t >= count || c >= n_cols) continue;",
        "                const long long q = mt / tiles * count + t;",
        "                const real_t v = acc[i][k][j];",
        "                if (splits > 1) put(&out[(split * n_rows + q) * size + c], v);",
        "                else put(&out[q * stop + pad + c], v);",
        "            }",
    ])  # fmt: skip


def _tiled(spec: GatherSpec, barrier: str) -> str:
    lanes, n, m = correlate_tile(spec.option)
    tm, tn = correlate_frames(spec.option), lanes * n
    tk, threads = CORRELATE_TAPS, CORRELATE_THREADS
    if spec.kind == "correlate_t":
        parts = _tiled_transpose(tm)
    else:
        parts = _tiled_forward(tm, clip=spec.kind == "correlate_clip")
    return "\n".join([
        f"    const long long TM = {tm}, TN = {tn};",
        *parts["setup"],
        "    const long long m0 = mt * TM, c0 = ct * TN;",
        f"    const int tx = tid % {lanes}, ty = tid / {lanes};",
        "    long long* rb = (long long*)specux_shared;",
        f"    long long* rs = rb + {tm};",
        f"    real_t* xs = (real_t*)(rs + {tm});",
        f"    real_t* ks = xs + {tk * (tm + 1)};",
        f"    for (int f = tid; f < {tm}; f += {threads}) {{",
        "        const long long q = m0 + f;",
        f"        {parts['row']}",
        "    }",
        f"    real_t acc[{m}][{n}];",
        f"    for (int i = 0; i < {m}; ++i)",
        f"        for (int k = 0; k < {n}; ++k) acc[i][k] = (real_t)0;",
        f"    {barrier}",
        *_staged_steps(parts, tm, tn, barrier, ahead=spec.kind != "correlate_t"),
        f"        const int steps = k_hi - k0 < {tk} ? (int)(k_hi - k0) : {tk};",
        "        for (int j = 0; j < steps; ++j) {",
        f"            real_t a[{m}], b[{n}];",
        f"            for (int i = 0; i < {m}; ++i) a[i] = xs[j * {tm + 1} + ty * {m} + i];",
        f"            for (int k = 0; k < {n}; ++k) b[k] = ks[j * {tn} + tx * {n} + k];",
        f"            for (int i = 0; i < {m}; ++i)",
        f"                for (int k = 0; k < {n}; ++k) acc[i][k] += a[i] * b[k];",
        "        }",
        f"        {barrier}",
        "    }",
        "    storage_t* out = (storage_t*)out_ptr;",
        f"    for (int i = 0; i < {m}; ++i)",
        f"        for (int k = 0; k < {n}; ++k) {{",
        f"            const long long q = m0 + ty * {m} + i, c = c0 + tx * {n} + k;",
        "            if (q >= n_rows || c >= n_cols) continue;",
        *parts["store"],
        "        }",
    ])  # fmt: skip


def _partsum(spec: GatherSpec) -> str:
    return "\n".join([
        "    if (gid >= rows * size) return;",
        "    const long long c = gid % size, q = gid / size;",
        "    const real_t* in = (const real_t*)in_ptr;",
        "    real_t acc = in[q * size + c];",
        "    for (long long s = 1; s < count; ++s) acc += in[(s * rows + q) * size + c];",
        "    put(&((storage_t*)out_ptr)[q * stop + pad + c], acc);",
    ])  # fmt: skip


# The spectral constant-Q path (transform_exec.cqt_spectral): with the spectra Z of
# F-point blocks of the padded signal and the kernels' spectra K (F = M Q), the correlation
# sampled every hop is an M-point inverse DFT of the spectrum product folded modulo M:
# - fold_product: ``Y[s, m, c, b] = sum_q Z[c, m + q M] K[m, q, b]`` over split s's terms q
#   (``start`` of the ``hop`` = Q terms a split, ``stop`` splits), ``Z[c]`` the spectrum of
#   block c, untangled from the F-point spectrum P of the pair c // 2 (the frame kind's
#   ``pairs``: blocks 2 p and 2 p + 1 as real and imaginary parts; rows of ``sig_len``
#   complex): ``Z[2 p, f] = (P[f] + conj P[-f]) / 2``, ``Z[2 p + 1, f] = (P[f] - conj
#   P[-f]) / 2i`` (indices mod F), as a step's terms are staged; ``K`` the table
#   ``table_a`` ([m][q][b], complex), for ``rows`` columns c (signal blocks), ``count`` = M
#   residues m, ``size`` bins b, ``frame_len`` = F. A block takes FOLD_RESIDUES residues and a
#   tile of bins by columns (option ``"p<nb>x<nc>"``: each thread nb bins by nc columns of
#   one residue); the terms are staged FOLD_TERMS at a time in shared memory.
# - fold_idft: ``out[r, t, pad + 2 b + (0, 1)] = sum_m (sum_s Y[s, m, c, b]) W[(m tau) mod M]``
#   (re, im) for block c = r * sig_len + beta of signal r, t = beta * frame_len + tau below
#   ``count`` frames, ``W = table_b`` (M complex roots exp(2 pi i k / M), ``hop`` = M),
#   ``start`` splits, rows of ``stop`` real outputs. A block takes one column and
#   :func:`fold_bins` bins.
# Both sum in a fixed order: the same bits on every run.
FOLD_THREADS = 256
FOLD_RESIDUES = 2  # residues a fold_product block: FOLD_THREADS / FOLD_RESIDUES threads each
FOLD_LANES = (8, 16)  # a residue's threads: bin lanes by column lanes
# terms staged a step: 4 (8 ran float64 cqt 0.403 ms against 0.331 on the H200, float32
# the same 0.203; 16 in float32 ran fold_product 81 us against 8's 65, 31st session)
FOLD_TERMS = 4
FOLD_BINS = 8  # bins a fold_idft block in float32 (half as many in float64)
# fold_product's register bound as blocks an SM (0: none): float32 at three (80 registers
# instead of 100, 396 blocks: transform_exec._FOLD_BLOCKS) ran cqt 6% faster on the
# H200; float64 (142 registers) spilled and ran slower under any bound
FOLD_MIN_BLOCKS = {"float32": 3, "float64": 0}


# The tensor-core fold_product (float32, option ``"t<nb>"``): a block takes a residue pair
# (m, M - m) -- a real block's spectrum has Z(-f) = conj Z(f), and -(m + q M) = (M - m) +
# (Q - 1 - q) M mod F, so the loads of residue m's terms give the partner's too -- by
# FOLD_MMA_COLUMNS columns by ``8 nb`` bins, and its 8 warps each 2 m16 fragments of
# columns by ``nb`` n8 fragments of one residue's (re, im) outputs (mma.sync m16n8k8, 3xTF32
# as the tensor-core correlation); the terms staged FOLD_MMA_TERMS at a time, the next
# step's loaded into registers while a step's products run.
FOLD_MMA_COLUMNS = 64
FOLD_MMA_MAX_NB = 8  # n8 fragments a warp at most: a tile of up to 8 * 8 = 64 bins
FOLD_MMA_TERMS = 8  # 16 real rows of the product: two k8 fragments a step
# its register bound as blocks an SM: none (NVRTC 13, sm_90: t8 takes 127 registers and
# spills nothing, so two blocks an SM fit; bounded to two, it spilled 16 bytes)
FOLD_MMA_MIN_BLOCKS = 0
_FOLD_MMA_Z = 2 * FOLD_MMA_TERMS + 4  # shared row stride (floats) of the staged spectra


def fold_mma_tile(option: str) -> int | None:
    """``nb`` of a tensor-core ``fold_product`` option ``"t<nb>"`` (1..8: a block's ``8 nb``
    bins, each warp's ``nb`` n8 fragments); None for the SIMT tiles."""
    match = re.fullmatch(r"t(\d)", option)
    nb = None if match is None else int(match.group(1))
    return nb if nb is not None and 1 <= nb <= FOLD_MMA_MAX_NB else None


def fold_tile(option: str) -> tuple[int, int]:
    """(nb, nc) of a ``fold_product`` option ``"p<nb>x<nc>"``: a thread's bins and columns
    of one residue; a block's tile is ``8 nb`` bins by ``16 nc`` columns."""
    match = re.fullmatch(r"p([1-6])x([1-5])", option)
    if match is None:
        raise ValueError(f"fold_product option={option!r} is not 'p<1..6>x<1..5>' (or a "
                         "tensor-core tile 't<1..8>')")  # fmt: skip
    return int(match.group(1)), int(match.group(2))


def fold_bins(precision: str) -> int:
    """Bins a fold_idft block transforms (its shared memory stays under 48 KiB)."""
    return FOLD_BINS // 2 if precision == "float64" else FOLD_BINS


def fold_shared_bytes(kind: str, option: str, residues: int, precision: str) -> int:
    """Dynamic shared memory of a fold block: the staged kernel and spectrum terms
    (fold_product), or a column's residues for :func:`fold_bins` bins, their first-stage
    sums and the M roots (fold_idft)."""
    complex_size = 16 if precision == "float64" else 8
    if kind == "fold_product" and fold_mma_tile(option) is not None:
        # the fragments (16 bytes a lane, tf32 high and low parts) of the left operand's
        # 4 m16 and the right one's 4 nb n8 tiles by 2 k8 steps, and the staged spectra
        left, right = 2 * 4 * 2 * 32 * 16, 4 * fold_mma_tile(option) * 2 * 32 * 16
        return left + right + FOLD_MMA_COLUMNS * _FOLD_MMA_Z * 4
    if kind == "fold_product":
        nb, nc = fold_tile(option)
        lanes_b, lanes_c = FOLD_LANES
        return FOLD_RESIDUES * FOLD_TERMS * (lanes_b * nb + lanes_c * nc) * complex_size
    return residues * (2 * fold_bins(precision) + 1) * complex_size


# A pair's two real blocks from its complex spectrum P (the frame kind's ``pairs``):
# Z_2p(f) = (P(f) + conj P(-f)) / 2, Z_2p+1(f) = (P(f) - conj P(-f)) / 2i, as (re, im)
# expressions of fr + i fi = P(f) and gr + i gi = P(-f) (:func:`_mirrored_loads`).
_UNTANGLE = (("fr + gr", "fi - gi"), ("fi + gi", "gr - fr"))


def _mirrored_loads() -> list[str]:
    """``fr, fi`` = P(f) and ``gr, gi`` = P(-f) (index mod F) of the pair spectrum at
    ``z + 2 row`` for ``ok``, zeros otherwise (both fold_product kinds)."""
    return [
        "const int i = ok ? row + f : 0, i2 = ok ? row + (f ? F - f : 0) : 0;  // -f mod F",
        "const real_t fr = ok ? z[2 * i] : (real_t)0, fi = ok ? z[2 * i + 1] : (real_t)0;",
        "const real_t gr = ok ? z[2 * i2] : (real_t)0;",
        "const real_t gi = ok ? z[2 * i2 + 1] : (real_t)0;",
    ]


def _fold_product(spec: GatherSpec, barrier: str) -> str:
    """The ``fold_product`` kind: a step's FOLD_TERMS terms of the kernels' spectra and of
    the blocks' spectra are loaded into registers, stored to shared memory, and summed
    (the term loop not unrolled: unrolled, or with the next step's terms loaded ahead, the
    kernel took more registers and ran 5-11% slower on the H200)."""
    nb, nc = fold_tile(spec.option)
    lanes_b, lanes_c = FOLD_LANES
    bt, ct, qc, res = lanes_b * nb, lanes_c * nc, FOLD_TERMS, FOLD_RESIDUES
    per, threads = FOLD_THREADS // res, FOLD_THREADS
    even, odd = _UNTANGLE
    n_k, n_z = -(-res * qc * bt // threads), -(-res * qc * ct // threads)

    def fetch(step: str, indent: str) -> list[str]:
        """Step ``step``'s kernel terms into ``pk``, its spectrum terms into ``pz``."""
        return [indent + line for line in [
            "#pragma unroll",
            f"for (int s = 0; s < {n_k}; ++s) {{",
            f"    const int e = tid + s * {threads};",
            f"    const int m = m0 + e / {qc * bt}, q = {step} + e / {bt} % {qc};",
            f"    const int b = b0 + e % {bt};",
            f"    const bool ok = e < {res * qc * bt} && m < M && q < q_hi && b < B;",
            "    const int i = ok ? (m * Q + q) * B + b : 0;",
            "    pk[2 * s] = ok ? kt[2 * i] : (real_t)0;",
            "    pk[2 * s + 1] = ok ? kt[2 * i + 1] : (real_t)0;",
            "}",
            "#pragma unroll",
            f"for (int s = 0; s < {n_z}; ++s) {{",
            f"    const int e = tid + s * {threads};",
            f"    const int r = e % {res}, k = e / {res} % {ct}, j = e / {res * ct};",
            f"    const int m = m0 + r, q = {step} + j, c = c0 + k;",
            f"    const bool ok = e < {res * qc * ct} && m < M && q < q_hi && c < C;",
            "    const int f = m + q * M, row = (c >> 1) * R;",
            *("    " + line for line in _mirrored_loads()),
            "    const bool odd = c & 1;  // the pair's imaginary block",
            f"    pz[2 * s] = (real_t)0.5 * (odd ? {odd[0]} : {even[0]});",
            f"    pz[2 * s + 1] = (real_t)0.5 * (odd ? {odd[1]} : {even[1]});",
            "}",
        ]]  # fmt: skip

    return "\n".join([
        # 32-bit indices: fold_product (transform_exec) keeps every one below 2 ** 31
        "    const int M = (int)count, Q = (int)hop, B = (int)size, C = (int)rows;",
        "    const int F = (int)frame_len, R = (int)sig_len, per_split = (int)start;",
        f"    const int n_mp = (M + {res - 1}) / {res};",
        f"    const int n_bt = (B + {bt - 1}) / {bt}, n_ct = (C + {ct - 1}) / {ct};",
        "    const int blk = (int)block;",
        "    const int mp = blk % n_mp, bt = blk / n_mp % n_bt;",
        "    const int ct = blk / (n_mp * n_bt) % n_ct;",
        "    const int split = blk / (n_mp * n_bt * n_ct);",
        f"    const int m0 = mp * {res}, b0 = bt * {bt}, c0 = ct * {ct};",
        "    const int q_lo = split * per_split;",
        "    const int q_hi = Q - q_lo < per_split ? Q : q_lo + per_split;",
        f"    const int mi = tid / {per}, lb = tid % {per} % {lanes_b};",
        f"    const int lc = tid % {per} / {lanes_b};",
        "    const real_t* z = (const real_t*)in_ptr;",
        "    const real_t* kt = (const real_t*)table_a;",
        "    real_t* ks = (real_t*)specux_shared;  // [residue][term][bin] complex",
        f"    real_t* zs = ks + {2 * res * qc * bt};  // [residue][term][column] complex",
        f"    real_t ar[{nb}][{nc}], ai[{nb}][{nc}];",
        "    #pragma unroll",
        f"    for (int i = 0; i < {nb}; ++i)",
        "        #pragma unroll",
        f"        for (int k = 0; k < {nc}; ++k) ar[i][k] = ai[i][k] = (real_t)0;",
        f"    for (int q0 = q_lo; q0 < q_hi; q0 += {qc}) {{",
        f"        real_t pk[{2 * n_k}], pz[{2 * n_z}];",
        *fetch("q0", "        "),
        "        #pragma unroll",
        f"        for (int s = 0; s < {n_k}; ++s) {{",
        f"            const int e = tid + s * {threads};",
        f"            if (e >= {res * qc * bt}) continue;",
        "            ks[2 * e] = pk[2 * s];",
        "            ks[2 * e + 1] = pk[2 * s + 1];",
        "        }",
        "        #pragma unroll",
        f"        for (int s = 0; s < {n_z}; ++s) {{",
        f"            const int e = tid + s * {threads};",
        f"            if (e >= {res * qc * ct}) continue;",
        f"            const int slot = (e % {res} * {qc} + e / {res * ct}) * {ct}"
        f" + e / {res} % {ct};",
        "            zs[2 * slot] = pz[2 * s];",
        "            zs[2 * slot + 1] = pz[2 * s + 1];",
        "        }",
        f"        {barrier}",
        "        #pragma unroll 1",
        f"        for (int j = 0; j < {qc}; ++j) {{  // not unrolled: registers",
        f"            const real_t* ka = ks + 2 * ((mi * {qc} + j) * {bt} + lb);",
        f"            const real_t* za = zs + 2 * ((mi * {qc} + j) * {ct} + lc);",
        f"            real_t kr[{nb}], ki[{nb}], zr[{nc}], zi[{nc}];",
        "            #pragma unroll",
        f"            for (int i = 0; i < {nb}; ++i) {{ kr[i] = ka[{2 * lanes_b} * i];"
        f" ki[i] = ka[{2 * lanes_b} * i + 1]; }}",
        "            #pragma unroll",
        f"            for (int k = 0; k < {nc}; ++k) {{ zr[k] = za[{2 * lanes_c} * k];"
        f" zi[k] = za[{2 * lanes_c} * k + 1]; }}",
        "            #pragma unroll",
        f"            for (int i = 0; i < {nb}; ++i)",
        "                #pragma unroll",
        f"                for (int k = 0; k < {nc}; ++k) {{",
        "                    ar[i][k] += kr[i] * zr[k];  // four fused multiply-adds",
        "                    ar[i][k] -= ki[i] * zi[k];",
        "                    ai[i][k] += kr[i] * zi[k];",
        "                    ai[i][k] += ki[i] * zr[k];",
        "                }",
        "        }",
        f"        {barrier}",
        "    }",
        "    const int m = m0 + mi;",
        "    if (m >= M) return;",
        "    real_t* y = (real_t*)out_ptr;",
        "    #pragma unroll",
        f"    for (int i = 0; i < {nb}; ++i)",
        "        #pragma unroll",
        f"        for (int k = 0; k < {nc}; ++k) {{",
        f"            const int b = b0 + lb + {lanes_b} * i, c = c0 + lc + {lanes_c} * k;",
        "            if (b >= B || c >= C) continue;",
        "            const int o = ((split * M + m) * C + c) * B + b;",
        "            y[2 * o] = ar[i][k];",
        "            y[2 * o + 1] = ai[i][k];",
        "        }",
    ])  # fmt: skip


def _fold_product_mma(spec: GatherSpec, barrier: str) -> str:
    """The tensor-core ``fold_product`` (option ``"t<nb>"``, float32; see FOLD_MMA_COLUMNS).

    A step takes terms ``q0 .. q0 + 8`` of residue m (partner M - m: terms ``Q - 1 - q``).
    Left operand ``[column][k]`` (k = 2 j + s): the untangled spectrum of each block,
    interleaved (re, im) -- the partner's is its conjugate, folded into the right operand
    instead, so both residues share it. Right operand ``[k][n]`` (n = 2 b + t, t re or im;
    the partner's columns after m's): rows ``2 j`` and ``2 j + 1`` of term j are ``(K_r,
    K_i)`` and ``(-K_i, K_r)`` for m, ``(K_r, K_i)`` and ``(K_i, -K_r)`` for the partner
    (``Z K`` and ``conj(Z) K`` as real products). Residue 0 and M / 2 are their own
    partners: their blocks compute m alone.

    Both operands are staged in shared memory as mma fragments, one 16-byte slot a lane
    (tf32 high parts, then low: ``al bh + ah bl + ah bh``, 3xTF32 as the tensor-core
    correlation), so a warp reads each with one 16-byte load a lane, conflict-free, and
    splits nothing: the right operand's slots straight from the table (a lane loads the two
    values of its slot), the left one's from the spectra staged first as ``[column][k]``
    (loaded as column pairs, untangled once). The next step's values are loaded into
    registers while a step's products run; the float32 sums run in the tensor cores'
    accumulators, in the same term order on every run."""
    nb = fold_mma_tile(spec.option)
    terms, cols, threads = FOLD_MMA_TERMS, FOLD_MMA_COLUMNS, FOLD_THREADS
    bt, sz = 8 * nb, _FOLD_MMA_Z
    even, odd = _UNTANGLE
    assert threads == cols // 2 * terms == 4 * 2 * 32  # a pair's term, a left slot a thread

    def fetch(step: str, indent: str) -> list[str]:
        """Step ``step``'s spectrum terms of the thread's column pair into ``pa``, the
        values of its right-operand slots into ``pb``."""
        return [indent + line for line in [
            "{",
            f"    const int q = {step} + a_j, pc = c0 / 2 + a_cp;",
            "    const bool ok = q < q_hi && 2 * pc < C;",
            "    const int f = m0 + q * M, row = pc * R;",
            *("    " + line for line in _mirrored_loads()),
            "    pa[0] = fr;",
            "    pa[1] = fi;",
            "    pa[2] = gr;",
            "    pa[3] = gi;",
            "}",
            "#pragma unroll",
            "for (int j = 0; j < 2; ++j) {",
            f"    const int q = {step} + b_kb * 4 + (r >> 1) + 2 * j;",
            "    const bool ok = q < q_hi && b_on;",
            "    const float* row = kt + 2 * (b_base + b_dir * q) + b_part;",
            "    #pragma unroll",
            f"    for (int s = 0; s < {nb}; ++s)",
            "        pb[2 * s + j] = ok && b_bin + 4 * s < B ? b_sign * row[8 * s] : 0.0f;",
            "}",
        ]]  # fmt: skip

    return "\n".join([
        # 32-bit indices: fold_product (transform_exec) keeps every one below 2 ** 31
        "    const int M = (int)count, Q = (int)hop, B = (int)size, C = (int)rows;",
        "    const int F = (int)frame_len, R = (int)sig_len, per_split = (int)start;",
        "    const int n_pr = M / 2 + 1;  // residue pairs (m, M - m), m <= M / 2",
        f"    const int n_bt = (B + {bt - 1}) / {bt}, n_ct = (C + {cols - 1}) / {cols};",
        "    const int blk = (int)block;",
        "    const int pr = blk % n_pr, bti = blk / n_pr % n_bt;",
        "    const int cti = blk / (n_pr * n_bt) % n_ct, split = blk / (n_pr * n_bt * n_ct);",
        "    const int m0 = pr, m1 = M - pr;",
        "    const bool two = pr != 0 && 2 * pr != M;  // M - pr another residue",
        f"    const int b0 = bti * {bt}, c0 = cti * {cols};",
        "    const int q_lo = split * per_split;",
        "    const int q_hi = Q - q_lo < per_split ? Q : q_lo + per_split;",
        "    const int lane = tid % 32, warp = tid / 32, g = lane / 4, r = lane % 4;",
        "    const int wc = warp & 1, wn = warp >> 1, slot = wn >> 1;",
        f"    const int a_cp = tid / {terms}, a_j = tid % {terms};",
        "    // the thread's right slots: n8 tiles (tid / 64) nb + s, s < nb, k8 step b_kb, of",
        "    // residue slot b_sl: bins b_bin + 4 s, part K_i or K_r, sign and direction in q",
        "    const int b_kb = tid / 32 % 2, b_sl = tid / 128;",
        f"    const int b_bin = b0 + tid / 64 % 2 * {4 * nb} + g / 2;",
        "    const bool b_on = b_sl == 0 || two;",
        "    const float b_sign = (r & 1) && b_sl == (g & 1) ? -1.0f : 1.0f;",
        "    const int b_dir = b_sl ? -B : B;",
        "    const int b_base = b_on ? ((b_sl ? m1 * Q + Q - 1 : m0 * Q) * B + b_bin) : 0;",
        "    const int b_part = (r & 1) != (g & 1);  // K_i, else K_r",
        "    const float* z = (const float*)in_ptr;",
        "    const float* kt = (const float*)table_a;",
        "    struct alignas(16) frag_t { float v[4]; };  // a lane's slot",
        "    // [tf32 high, low][m16 tile][k8 step][lane], [n8 tile][k8 step][lane] (high, high,",
        "    // low, low), and the spectra [column][2 term + (re, im)]",
        "    frag_t* fa = (frag_t*)specux_shared;",
        "    frag_t* fb = fa + 512;",
        f"    float* zs = (float*)(fb + {4 * nb * 64});",
        f"    float acc[2][{nb}][4];",
        "    #pragma unroll",
        "    for (int i = 0; i < 2; ++i)",
        "        #pragma unroll",
        f"        for (int k = 0; k < {nb}; ++k)",
        "            #pragma unroll",
        "            for (int j = 0; j < 4; ++j) acc[i][k][j] = 0.0f;",
        f"    float pa[4], pb[{2 * nb}];",
        *fetch("q_lo", "    "),
        "    #pragma unroll 1",
        f"    for (int q0 = q_lo; q0 < q_hi; q0 += {terms}) {{",
        "        {  // blocks 2 p, 2 p + 1 of the pair's spectrum P (_UNTANGLE)",
        "            const float fr = pa[0], fi = pa[1], gr = pa[2], gi = pa[3];",
        f"            float* row = zs + 2 * a_cp * {sz} + 2 * a_j;",
        f"            row[0] = 0.5f * ({even[0]});",
        f"            row[1] = 0.5f * ({even[1]});",
        f"            row[{sz}] = 0.5f * ({odd[0]});",
        f"            row[{sz} + 1] = 0.5f * ({odd[1]});",
        "        }",
        "        #pragma unroll",
        f"        for (int s = 0; s < {nb}; ++s) {{",
        "            frag_t v;",
        "            #pragma unroll",
        "            for (int j = 0; j < 2; ++j) {",
        "                v.v[j] = specux_tf32(pb[2 * s + j]);",
        "                v.v[2 + j] = specux_tf32(pb[2 * s + j] - v.v[j]);",
        "            }",
        f"            fb[(tid / 64 * {nb} + s) * 64 + tid % 64] = v;",
        "        }",
        f"        {barrier}",
        "        {  // the thread's left slot: m16 tile tid / 64, k8 step tid / 32 % 2",
        "            const int mt = tid / 64, kb = tid / 32 % 2;",
        "            frag_t hi, lo;",
        "            #pragma unroll",
        "            for (int j = 0; j < 4; ++j) {",
        f"                const float v = zs[(mt * 16 + g + 8 * (j & 1)) * {sz} + kb * 8 + r"
        " + 4 * (j >> 1)];",
        "                hi.v[j] = specux_tf32(v);",
        "                lo.v[j] = specux_tf32(v - hi.v[j]);",
        "            }",
        "            fa[tid] = hi;",
        "            fa[256 + tid] = lo;",
        "        }",
        f"        {barrier}",
        f"        if (q0 + {terms} < q_hi) {{",
        f"            const int q_next = q0 + {terms};",
        *fetch("q_next", "            "),
        "        }",
        "        #pragma unroll",
        "        for (int kb = 0; kb < 2; ++kb) {",
        "            frag_t ah[2], al[2];",
        "            #pragma unroll",
        "            for (int i = 0; i < 2; ++i) {",
        "                ah[i] = fa[((wc * 2 + i) * 2 + kb) * 32 + lane];",
        "                al[i] = fa[256 + ((wc * 2 + i) * 2 + kb) * 32 + lane];",
        "            }",
        "            #pragma unroll",
        f"            for (int k = 0; k < {nb}; ++k) {{",
        f"                const frag_t bv = fb[((wn * {nb} + k) * 2 + kb) * 32 + lane];",
        "                #pragma unroll",
        "                for (int i = 0; i < 2; ++i) {",
        "                    SPECUX_MMA_TF32(acc[i][k], al[i].v, bv.v);",
        "                    SPECUX_MMA_TF32(acc[i][k], ah[i].v, bv.v + 2);",
        "                    SPECUX_MMA_TF32(acc[i][k], ah[i].v, bv.v);",
        "                }",
        "            }",
        "        }",
        f"        {barrier}",
        "    }",
        "    if (slot == 1 && !two) return;",
        "    const int m = slot ? m1 : m0;",
        "    float* y = (float*)out_ptr;",
        "    #pragma unroll",
        "    for (int i = 0; i < 2; ++i)",
        "        #pragma unroll",
        f"        for (int k = 0; k < {nb}; ++k)",
        "            #pragma unroll",
        "            for (int h = 0; h < 2; ++h) {",
        "                const int c = c0 + wc * 32 + i * 16 + g + 8 * h;",
        f"                const int b = b0 + (wn & 1) * {4 * nb} + k * 4 + r;",
        "                if (c >= C || b >= B) continue;",
        "                const int o = ((split * M + m) * C + c) * B + b;",
        "                y[2 * o] = acc[i][k][2 * h];",
        "                y[2 * o + 1] = acc[i][k][2 * h + 1];",
        "            }",
    ])  # fmt: skip


FOLD_OUTPUTS = 4  # consecutive frames a fold_idft thread sums (four independent chains)


def _fold_idft(spec: GatherSpec, barrier: str) -> str:
    """The ``fold_idft`` kind: the M-point inverse DFT in two stages, M = M1 M2 (M1 the
    largest divisor of M up to its square root): ``S[m1, r] = sum_m2 Y[m1 + M1 m2]
    W^(M1 m2 r)`` for r < M2, then ``y[tau] = sum_m1 W^(m1 tau) S[m1, tau mod M2]`` -- M (M2
    + T / M2) products a bin instead of M T (W^(M1 M2 tau) = 1). A prime M is one stage."""
    w, per = fold_bins(spec.precision), FOLD_OUTPUTS
    return "\n".join([
        f"    const long long n_bc = (size + {w - 1}) / {w};",
        f"    const long long c = block / n_bc, b0 = block % n_bc * {w};",
        "    const long long n_cols = rows * sig_len;",
        "    const long long r = c / sig_len, beta = c % sig_len;",
        "    const int M = (int)hop;",
        "    int M1 = 1;",
        "    for (int d = 2; d * d <= M; ++d)",
        "        if (M % d == 0) M1 = d;",
        "    const int M2 = M / M1;",
        "    const real_t* y = (const real_t*)in_ptr;",
        "    real_t* ys = (real_t*)specux_shared;  // [residue][bin] complex",
        f"    real_t* ss = ys + 2 * M * {w};  // [m1][r][bin] complex: the first stage",
        f"    real_t* ws = ss + 2 * M * {w};  // the M roots",
        f"    for (int e = tid; e < M * {w}; e += {FOLD_THREADS}) {{",
        f"        const int m = e / {w};",
        f"        const long long b = b0 + e % {w};",
        "        real_t re = (real_t)0, im = (real_t)0;",
        "        if (b < size)",
        "            for (long long s = 0; s < start; ++s) {",
        "                const long long i = ((s * M + m) * n_cols + c) * size + b;",
        "                re += y[2 * i];",
        "                im += y[2 * i + 1];",
        "            }",
        "        ys[2 * e] = re;",
        "        ys[2 * e + 1] = im;",
        "    }",
        f"    for (int e = tid; e < 2 * M; e += {FOLD_THREADS})",
        "        ws[e] = ((const real_t*)table_b)[e];",
        f"    {barrier}",
        f"    for (int e = tid; e < M * {w}; e += {FOLD_THREADS}) {{  // e = (m1 M2 + q) w + bb",
        f"        const int bb = e % {w}, q = e / {w} % M2, m1 = e / {w} / M2;",
        "        const int step = M1 * q % M;  // W^(M1 m2 q): k advances by M1 q a term",
        "        real_t re = (real_t)0, im = (real_t)0;",
        "        int k = 0;",
        "        for (int m2 = 0; m2 < M2; ++m2) {",
        f"            const int i = (m1 + M1 * m2) * {w} + bb;",
        "            const real_t yr = ys[2 * i], yi = ys[2 * i + 1];",
        "            const real_t wr = ws[2 * k], wi = ws[2 * k + 1];",
        "            re += yr * wr;  // four fused multiply-adds",
        "            re -= yi * wi;",
        "            im += yr * wi;",
        "            im += yi * wr;",
        "            k += step;",
        "            if (k >= M) k -= M;",
        "        }",
        "        ss[2 * e] = re;",
        "        ss[2 * e + 1] = im;",
        "    }",
        f"    {barrier}",
        "    storage_t* out = (storage_t*)out_ptr;",
        f"    const int groups = ((int)frame_len + {per - 1}) / {per};",
        f"    for (int e = tid; e < groups * {w}; e += {FOLD_THREADS}) {{",
        f"        const int tau0 = e / {w} * {per}, bb = e % {w};",
        "        const long long b = b0 + bb;",
        "        if (b >= size) continue;",
        f"        real_t re[{per}], im[{per}];",
        f"        int k[{per}], q[{per}];  // (m1 tau) mod M, tau mod M2",
        "        #pragma unroll",
        f"        for (int j = 0; j < {per}; ++j) {{",
        "            re[j] = im[j] = (real_t)0;",
        "            k[j] = 0;",
        "            q[j] = (tau0 + j) % M2;",
        "        }",
        "        for (int m1 = 0; m1 < M1; ++m1) {",
        "            #pragma unroll",
        f"            for (int j = 0; j < {per}; ++j) {{",
        f"                const int i = (m1 * M2 + q[j]) * {w} + bb;",
        "                const real_t sr = ss[2 * i], si = ss[2 * i + 1];",
        "                const real_t wr = ws[2 * k[j]], wi = ws[2 * k[j] + 1];",
        "                re[j] += sr * wr;",
        "                re[j] -= si * wi;",
        "                im[j] += sr * wi;",
        "                im[j] += si * wr;",
        "                k[j] += tau0 + j;",
        "                if (k[j] >= M) k[j] -= M;",
        "            }",
        "        }",
        "        #pragma unroll",
        f"        for (int j = 0; j < {per}; ++j) {{",
        "            const long long t = beta * frame_len + tau0 + j;",
        "            if (tau0 + j >= frame_len || t >= count) continue;",
        "            const long long o = (r * count + t) * stop + pad + 2 * b;",
        "            put(&out[o], re[j]);",
        "            put(&out[o + 1], im[j]);",
        "        }",
        "    }",
    ])  # fmt: skip


_COMPLEX_OF = {"float16": "specux_c16", "float32": "specux_c32", "float64": "specux_c64"}
_ARRAY_BODIES = {"convert": _convert, "map": _map, "value": _value, "cmul": _cmul,
                 "colnorm": _colnorm, "partsum": _partsum}  # fmt: skip


def render_gather(spec: GatherSpec, dialect: Dialect) -> str:
    """Kernel source of ``spec``: entry point ``specux_gather`` with :data:`GATHER_PARAMS`,
    one thread per output element (a block kernel of :attr:`GatherSpec.threads` threads for
    the block kinds, :attr:`GatherSpec.block`)."""
    params = ", ".join(f"{t} {name}" for t, name in GATHER_PARAMS)
    args = ", ".join(name for _, name in GATHER_PARAMS)
    mma = spec.mma
    if spec.block:
        if spec.kind == "rowmax":
            body = _rowmax(dialect.barrier)
        elif spec.kind == "fold_product" and mma:
            body = _fold_product_mma(spec, dialect.barrier)
        elif spec.kind == "fold_product":
            body = _fold_product(spec, dialect.barrier)
        elif spec.kind == "fold_idft":
            body = _fold_idft(spec, dialect.barrier)
        elif spec.kind in PROJECT_KINDS:
            body = _project(spec, dialect.barrier)
        else:
            body = (_tiled_mma if mma else _tiled)(spec, dialect.barrier)
        open_, close = dialect.block_open, dialect.block_close
    else:
        open_, body, close = dialect.kernel_open, _body(spec), dialect.kernel_close
    source = [
        f"// specux gather kernel: {spec.kind} storage={spec.storage} "
        f"precision={spec.precision} option={spec.option or '-'}",
        dialect.prelude + (dialect.mma_prelude if mma else ""),
        f"typedef {_REAL[spec.precision]} real_t;",
        _types(dialect.function),  # to_real / put for every storage, as the FFT kernels use
        f"typedef {_REAL_STORAGE[spec.storage]} storage_t;",
        open_.format(name=GATHER_NAME, params=params, threads=spec.threads,
                     min_blocks=f", {spec.min_blocks}" if spec.min_blocks else ""),
        body,
        close.format(name=GATHER_NAME, params=params, args=args),
    ]
    return "\n".join(source)


__all__ = ["CORRELATE_LANES", "CORRELATE_SPLIT", "CORRELATE_TAPS", "CORRELATE_THREADS",
           "FRAME_OUTPUTS", "GATHER_NAME", "GATHER_PARAMS", "GATHER_THREADS", "ROWMAX_THREADS",
           "SEAM_POSITIONS",
           "TILED_KINDS",
           "GatherSpec",
           "correlate_columns", "correlate_frames", "correlate_shared_bytes", "correlate_tile",
           "FOLD_BINS", "FOLD_LANES", "FOLD_OUTPUTS", "FOLD_RESIDUES", "FOLD_TERMS", "FOLD_THREADS",
           "FOLD_MMA_COLUMNS", "FOLD_MMA_TERMS", "fold_bins", "fold_mma_tile",
           "fold_shared_bytes", "fold_tile",
           "MMA_CAPABILITY", "MMA_WINDOW", "mma_splits", "mma_tile",
           "PROJECT_KINDS", "PROJECT_LANE_ROWS", "PROJECT_MAX_OUT", "PROJECT_PEAK_CHUNKS",
           "project_fits",
           "project_option", "project_rows", "project_shape", "project_shared_bytes",
           "project_threads",
           "render_gather"]  # fmt: skip
