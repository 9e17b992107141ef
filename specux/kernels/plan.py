"""FFT plans: frozen, hashable descriptions of every kernel launch of a transform.

A 1-D transform of ``n`` points runs as one block kernel (``BlockSpec``: whole transforms in a
thread block) when its points fit a block, as two or three of them (four-step: two when it
splits into two lengths that do, three for long ones, ``column_split``), else as a chain of
Stockham passes in global memory (``PassSpec``: one radix-R butterfly per thread, natural order
in and out, no bit reversal). Lengths with a prime factor above 13 run as
Bluestein's algorithm: a chirp-multiplied, zero-padded forward FFT of a smooth length
M >= 2n - 1, a pointwise product with the chirp filter's spectrum (fused into the inverse's
first load) and a chirp-multiplied inverse (fused into its last store). Loads and stores
carry the prologue / epilogue work: layouts, real and Hermitian inputs, half-spectrum and real
outputs, tables, scaling, storage precision.

Rendering a plan with a dialect gives source text (codegen/); the plan is the cache key.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

# Radices with a codelet, tried in this order (larger first: fewer passes over memory).
RADICES = (8, 4, 2, 3, 5, 7, 11, 13)
LARGEST_RADIX = 13


def factorize(n: int) -> tuple[int, ...] | None:
    """Split ``n`` into codelet radices (8s and 4s first), or None if a prime factor > 13."""
    if n < 1:
        raise ValueError(f"n={n} must be >= 1")
    factors: list[int] = []
    rest = n
    for radix in RADICES:
        while rest % radix == 0:
            factors.append(radix)
            rest //= radix
    return tuple(factors) if rest == 1 else None


def _is_smooth(m: int, primes=(2, 3, 5, 7)) -> bool:
    for p in primes:
        while m % p == 0:
            m //= p
    return m == 1


@functools.lru_cache(maxsize=1024)
def smooth_length(n: int) -> int:
    """The smallest even 2/3/5/7-smooth length >= n (1 for n <= 1): a transform length that
    runs without Bluestein and, being even, as a packed real transform. Cached: the search
    costs ~0.2 ms of host time for six-digit lengths, on every fftconvolve call."""
    if n <= 1:
        return 1
    m = n + n % 2
    while not _is_smooth(m):
        m += 2
    return m


# Bluestein convolves over a power of two where one is at most this factor longer than the
# smallest 2/3/5/7-smooth length: radix-16 and -8 stages cost fewer instructions a point than
# radix-3, -7 and -9 ones. On the H200 (CUDA graph replays, 2026-12-03), fft_prime (1000003
# points, complex64) ran in 0.133 ms at M = 2000376 = 2^3 3^6 7^3 and 0.0815 ms at
# M = 2^21 (4.8% longer), relative L2 error 2.86e-7 and 2.54e-7 (cuFFT: 3.76e-7).
BLUESTEIN_POW2_SLACK = 1.1


@functools.lru_cache(maxsize=1024)
def bluestein_length(n: int) -> int:
    """The convolution length M >= 2n - 1 of an n-point Bluestein transform: the smallest
    2/3/5/7-smooth one, or the next power of two where it is at most BLUESTEIN_POW2_SLACK
    times that."""
    m = 2 * n - 1
    while not _is_smooth(m):
        m += 1
    power = 1 << (2 * n - 2).bit_length()
    return power if power <= BLUESTEIN_POW2_SLACK * m else m


@dataclass(frozen=True)
class Layout:
    """Where element ``j`` of batch row ``b`` lives:
    ``(b // inner) * outer_stride + (b % inner) * inner_stride + j * elem_stride``
    (strides in elements, passed at launch time); ``canonical`` means a contiguous
    ``(batch, length)`` scratch buffer in the compute type."""

    canonical: bool


CANONICAL = Layout(True)
USER = Layout(False)


@dataclass(frozen=True)
class LoadSpec:
    """The prologue of a pass: what is read for logical element ``j`` of the transform.

    mode: ``complex`` (storage complex), ``real`` (imaginary part 0), ``hermitian`` (a half
    spectrum of ``valid`` bins; j > valid/2 reads conj(x[valid - j]); DC / Nyquist imaginary
    parts dropped). Elements ``j >= valid`` are zero (zero padding). ``table``: multiply by a
    per-element complex table (Bluestein chirp or filter spectrum).
    """

    layout: Layout = CANONICAL
    mode: str = "complex"
    storage: str = "compute"  # compute | float16 | float32 | float64
    valid: int = 0  # 0 means all
    table: bool = False
    # STFT framing (block kernels only): transform b is frame b % frames of signal b // frames
    # and element j reads sample t * hop + j - pad of it; "constant" pads with zeros, "indexed"
    # takes the source of each padded sample from a launch-time table (numpy.pad's modes).
    frames: str = ""  # "" | constant | indexed
    window: bool = False  # multiply element j by a real window table (frames only)


@dataclass(frozen=True)
class StoreSpec:
    """The epilogue: ``complex`` (all), ``half`` (bins j <= n/2 only), ``real`` (real part).

    Only ``j < valid`` is stored (0 means all); ``table`` multiplies by a per-element table;
    ``scaled`` multiplies by the launch's scale argument (the normalization; the planners
    set it only for a scale other than 1, whose product changes nothing).
    """

    layout: Layout = CANONICAL
    mode: str = "complex"
    storage: str = "compute"
    valid: int = 0
    table: bool = False
    scaled: bool = False
    logical: int = 0  # the transform length the half / real modes refer to (0: the pass's n)
    # What is stored of each (scaled) complex value: itself, or as a real value its magnitude,
    # power, power ** (exponent / 2) ("pow"), or dB (10 log10(max(power, eps))) -- block
    # kernels only -- or ``cotangent``: complex ``F e |X| ** (e - 2) X`` for a real ``F`` read
    # at the output's own index from the ``weights`` argument and ``e`` the ``exponent``
    # argument, halved off DC and Nyquist (the input of the one-sided stft's adjoint).
    # ``adjoint`` (packed r2c block kernels) runs that adjoint's inverse transform in the same
    # kernel; ``convolve`` (likewise) multiplies each bin by a kernel spectrum and a phase
    # instead, the overlap-save convolution in one kernel (codegen.block._adjoint).
    value: str = "complex"
    # reduce "bank" / "bank_db": the first ``bins`` values go to shared memory instead, and a
    # sparse filterbank (launch-time band table and weights) reduces them into the output
    # (in dB: factor * log10(max(s, eps))) -- block kernels only. ``bands``: the bank's band
    # count, compiled in (the launch argument n_bands must equal it): the loop's bounds and
    # the bin-major weights' stride are constants, so its unrolled weight loads address by
    # immediate offsets instead of a 64-bit add each.
    reduce: str = ""
    bins: int = 0
    bands: int = 0
    # value "adjoint" with ``expand`` > 0: the factors F are a filterbank's transpose applied
    # to launch-time rows G of ``n_bands`` values (F = bank^T G, through the bank tables of the
    # transpose), the backward of a filterbank spectrogram in one kernel. ``expand``: the most
    # terms of a bin (the tables' padded width), up to EXPAND_UNROLLED summed as straight-line
    # code; EXPAND_UNROLLED + 1 for more or an unknown count (a loop).
    expand: int = 0
    # ola_hop > 0 (c2r block kernels and the fused adjoint, value "adjoint"): the overlap-add
    # in the kernel. The block's transforms are consecutive frames of one signal (hop
    # ``ola_hop``); their real samples, windowed, are summed from shared memory, scaled (the
    # istft: and multiplied by the envelope's reciprocal) into the output, except where frames
    # of a neighbouring block overlap too: those sums go to a scratch of seams, which a gather
    # adds up (codegen.block._overlap_add).
    ola_hop: int = 0


@dataclass(frozen=True)
class PassSpec:
    """One Stockham pass: ``n`` points, radix ``radix``, ``stride`` = product of the radices
    of the passes before it; ``sign`` -1 forward, +1 inverse; ``precision`` float32 / float64
    (the register type; float16 storage computes in float32)."""

    n: int
    radix: int
    stride: int
    sign: int
    precision: str
    load: LoadSpec = LoadSpec()
    store: StoreSpec = StoreSpec()


def passes(n: int, sign: int, precision: str, load: LoadSpec, store: StoreSpec):
    """The Stockham passes of an ``n``-point transform with the given prologue / epilogue."""
    radices = factorize(n)
    if radices is None:
        raise ValueError(f"{n} has a prime factor above {LARGEST_RADIX}: use Bluestein")
    radices = radices or (1,)  # n = 1: one pass that only loads and stores
    out, stride = [], 1
    for index, radix in enumerate(radices):
        first, last = index == 0, index == len(radices) - 1
        out.append(
            PassSpec(
                n=n, radix=radix, stride=stride, sign=sign, precision=precision,
                load=load if first else LoadSpec(), store=store if last else StoreSpec(),
            )  # fmt: skip
        )
        stride *= radix
    return tuple(out)


# A block kernel keeps its transforms in shared memory (complex values, skewed: SKEW); one
# transform's points must fit this many bytes, so float32 runs up to 8192
# points in a block and float64 up to 4096. Longer lengths run as two block launches (four-step).
BLOCK_BYTES = 64 * 1024
_COMPLEX_BYTES = {"float32": 8, "float64": 16}
MAX_THREADS = 1024  # a CUDA thread block's limit
STAGE_RADIX_MAX = 16  # stage radices are products of prime factors up to this


def _primes(n: int) -> list[int] | None:
    out, rest = [], n
    for p in (2, 3, 5, 7, 11, 13):
        while rest % p == 0:
            out.append(p)
            rest //= p
    return out if rest == 1 else None


@functools.lru_cache(maxsize=1024)
def stage_radices(n: int) -> tuple[int, ...] | None:
    """``n``'s prime factors grouped into as few stage radices <= 16 as greedy packing finds
    (1024 -> 16, 16, 4; 1000 -> 10, 10, 10), or None if a prime factor is above 13."""
    primes = _primes(n)
    if primes is None:
        return None
    primes.sort(reverse=True)
    radices: list[int] = []
    while primes:
        radix = primes.pop(0)
        for p in sorted(primes, reverse=True):
            if radix * p <= STAGE_RADIX_MAX:
                radix *= p
                primes.remove(p)
        radices.append(radix)
    return tuple(sorted(radices, reverse=True))


@functools.lru_cache(maxsize=256)
def even_radices(n: int) -> tuple[int, ...] | None:
    """As many stages as :func:`stage_radices`, with the smallest widest radix among the
    ways to deal ``n``'s prime factors into that many radices <= 16 (ties: the most even),
    largest first; the greedy radices where no way lowers the widest one (512 -> 8, 8, 8
    where greedy packing gives 16, 16, 2; 1024 keeps 16, 16, 4). Fewer values a thread holds
    per butterfly: fewer registers, more threads a transform."""
    greedy = stage_radices(n)
    if greedy is None or len(greedy) <= 1:
        return greedy
    primes = sorted(_primes(n) or (), reverse=True)
    best: tuple[int, ...] = greedy

    def deal(i: int, stages: list[int]) -> None:
        nonlocal best
        if i == len(primes):
            if all(r > 1 for r in stages):
                found = tuple(sorted(stages, reverse=True))
                if found[0] < best[0] or (found[0] == best[0] and found[::-1] > best[::-1]):
                    best = found
            return
        tried = set()
        for j, radix in enumerate(stages):
            if radix in tried or radix * primes[i] > STAGE_RADIX_MAX:
                continue
            tried.add(radix)
            stages[j] *= primes[i]
            deal(i + 1, stages)
            stages[j] //= primes[i]

    deal(0, [1] * len(greedy))
    return best if best[0] < greedy[0] else greedy


# Shared memory holds complex values with index j at j + (j >> SKEW): one pad slot per 16
# complex64 (per 8 complex128), one bank sweep of a half (quarter) warp's 8 (16) byte accesses,
# so the power-of-two strides of the stage writes do not pile onto one bank. Other lengths
# may take another shift and pad slots after each transform (BlockSpec.skew_shift,
# slot_extra; see shared_layout).
SKEW = {"float32": 4, "float64": 3}


def skewed(n: int, precision: str, shift: int | None = None) -> int:
    """Shared-memory slots of an ``n``-point array stored with one pad slot every
    ``2 ** shift`` points (:data:`SKEW` by default)."""
    shift = SKEW[precision] if shift is None else shift
    return n + ((n - 1) >> shift) + 1 if n else 0


def _exchange_accesses(n: int, radices: tuple[int, ...], threads: int, per_block: int):
    """(slot, point index, access group) of every shared-memory access of the stage exchanges
    of a block kernel of two or more stages (the reads of every stage after the first, the
    writes of every stage before the last), one group per (instruction, warp)."""
    tid = np.arange(threads * per_block)
    slot, t, warp = tid // threads, tid % threads, tid // 32
    warps = -(-len(tid) // 32)
    slots, points, groups = [], [], []
    group = 0
    stride = 1
    for index, radix in enumerate(radices):
        quarter = n // radix
        for m in range(-(-quarter // threads)):
            i = t + m * threads
            live = i < quarter
            k = i % stride
            for q in range(radix):
                accesses = []
                if index > 0:
                    accesses.append(i + q * quarter)
                if index < len(radices) - 1:
                    accesses.append((i - k) * radix + k + q * stride)
                for j in accesses:
                    slots.append(slot[live])
                    points.append(j[live])
                    groups.append(group + warp[live])
                    group += warps
        stride *= radix
    return np.concatenate(slots), np.concatenate(points), np.concatenate(groups), group


def _wavefronts(accesses, n: int, precision: str, shift: int, extra: int) -> int:
    """Shared-memory wavefronts of ``accesses`` with layout (shift, extra): per access
    group, the most words any of the 32 four-byte banks serves (every access of a group is
    to a distinct point, so no two share a word)."""
    slots, points, groups, count = accesses
    words = _COMPLEX_BYTES[precision] // 4
    size = skewed(n, precision, shift) + extra
    word = (slots * size + points + (points >> shift)) * words
    bank = (word[:, None] + np.arange(words)) % 32
    key = (groups[:, None] * 32 + bank).ravel()
    return int(np.bincount(key, minlength=count * 32).reshape(count, 32).max(axis=1).sum())


def _transfer_accesses(n: int, threads: int, per_block: int):
    """(slot, point index, access group) of the staged transfers of a block kernel
    (codegen.block.render_block): in round r thread tid moves point (tid + r * block threads)
    / per_block of slot tid % per_block, one group per (round, warp)."""
    block_threads = threads * per_block
    tid = np.arange(block_threads)
    warps = -(-block_threads // 32)
    rounds = n * per_block // block_threads
    index = tid[None, :] + np.arange(rounds)[:, None] * block_threads
    groups = np.arange(rounds)[:, None] * warps + tid[None, :] // 32
    slots = np.broadcast_to(tid % per_block, index.shape)
    return slots.ravel(), (index // per_block).ravel(), groups.ravel(), rounds * warps


def _merged(*accesses):
    """Access lists of :func:`_exchange_accesses` / :func:`_transfer_accesses` as one, their
    groups kept apart."""
    slots, points, groups, count = [], [], [], 0
    for s, p, g, c in accesses:
        slots.append(s)
        points.append(p)
        groups.append(g + count)
        count += c
    return np.concatenate(slots), np.concatenate(points), np.concatenate(groups), count


@functools.lru_cache(maxsize=1024)
def staged_layout(n: int, radices: tuple[int, ...], threads: int, per_block: int,
                  precision: str) -> int:  # fmt: skip
    """The pad slots after each transform (``extra``; the shift stays :data:`SKEW`) of a
    kernel with staged transfers, which interleave the block's transforms: consecutive
    threads move the same point of consecutive slots, so with slots a multiple of 32 banks
    apart (the 512-point float32 transform's 544 complex values) the 8 slots of a warp's
    32 lanes share 8 banks (4x the wavefronts of a conflict-free access). The extra with the
    fewest modeled wavefronts of the transfers and the stage exchanges together
    (:func:`_wavefronts`), ties to the fewest."""
    if per_block == 1:
        return 0
    accesses = [_transfer_accesses(n, threads, per_block)]
    if len(radices) >= 2:
        accesses.append(_exchange_accesses(n, radices, threads, per_block))
    merged = _merged(*accesses)
    shift = SKEW[precision]
    return min(range(128 // _COMPLEX_BYTES[precision]),
               key=lambda extra: (_wavefronts(merged, n, precision, shift, extra), extra))


@functools.lru_cache(maxsize=1024)
def shared_layout(n: int, radices: tuple[int, ...], threads: int, per_block: int,
                  precision: str) -> tuple[int, int]:  # fmt: skip
    """(shift, extra) of a block kernel's shared memory: one pad slot every ``2 ** shift``
    points and ``extra`` pad slots after each transform, chosen to give the stage exchanges
    the fewest shared-memory wavefronts (bank conflicts) by a model of their accesses
    (:func:`_wavefronts`); the default (:data:`SKEW`, 0) unless another is better. Only
    shifts that pad no more than the default are tried, so no kernel needs more shared
    memory than before but ``extra`` slots per transform.

    Power-of-two lengths are conflict-free with the default and keep it. For the others the
    model counts 1.5-2.7x fewer wavefronts (float32: the 1000-point real FFT's 500-point
    kernel 1399 -> 876 a block, n_fft 400's 200-point kernel 1437 -> 869, 720 -> 1285 from
    3473); it reproduced the conflict share ncu measured on the 500-point kernel (64% of its
    shared stores; the model 66%). Timed on the H200 against the default layout (CUDA graph
    replays): 1.05-1.35x faster on the 1000-point rfft, c2c 400 / 720 / 1000, n_fft 400
    stft and mel (docs/benchmarks.md)."""
    if n & (n - 1) == 0 or len(radices) < 2:
        return SKEW[precision], 0
    accesses = _exchange_accesses(n, radices, threads, per_block)
    # with one transform a block, pad slots after it change nothing
    extras = range(128 // _COMPLEX_BYTES[precision]) if per_block > 1 else range(1)
    # ties go to the least shift, then the fewest extras: the default (SKEW, 0) first
    _, shift, extra = min((_wavefronts(accesses, n, precision, shift, extra), shift, extra)
                          for shift in range(SKEW[precision], 7) for extra in extras)  # fmt: skip
    return shift, extra


@dataclass(frozen=True)
class BlockSpec:
    """``per_block`` transforms of ``n`` points in one thread block, ``threads`` per transform.

    Stages of radix ``radices`` run in registers with shared memory as the exchange; twiddles
    come from a float64-derived table of ``table_n`` roots (``table_n`` is a multiple of
    ``n``) followed by each stage's roots in butterfly order (``twiddle_index``).
    ``load_staged`` / ``store_staged`` move data between global and shared memory with the
    block's transforms interleaved (coalesced when the transforms, not their elements, are
    adjacent in memory). ``pack``: ``r2c`` runs an n-point complex transform of 2n real points
    (even / odd samples as re / im) and untangles the 2n-point half spectrum at the end;
    ``c2r`` is its inverse. ``split``: the transform is one column of a four-step pipeline
    (launch arguments map (transform, element) to the logical index); ``twist`` multiplies
    each output by the four-step twiddle exp(sign 2 pi i column * element / total) (in the
    staged store: codegen.block._twist_rows).
    """

    n: int
    radices: tuple[int, ...]
    sign: int
    precision: str
    threads: int
    per_block: int
    load: LoadSpec = LoadSpec()
    store: StoreSpec = StoreSpec()
    load_staged: bool = False
    store_staged: bool = False
    pack: str = ""  # "" | r2c | c2r
    split: bool = False
    twist: bool = False
    unit_in: bool = False  # element j of a transform is at row base + logical offset + j
    unit_out: bool = False
    # shared memory: point j of a transform at j + (j >> shift) of its slot (shift -1: SKEW),
    # slots of skewed(n) + slot_extra points (shared_layout)
    skew_shift: int = -1
    slot_extra: int = 0
    # the register bound as blocks an SM chosen by autotuning (kernels.tuning; 1: none);
    # 0: min_blocks' rule
    bound: int = 0
    # the block's transforms interleaved in the lanes and in shared memory (transform s =
    # tid % per_block, its point j at per_block skew(j) + s): the first stage loads and the
    # last stores straight from and to global memory, a warp reaching per_block adjacent
    # columns a request (a four-step pass: ``interleaves``), with no staged transfers
    interleave: bool = False
    # the filterbank reduce's values (StoreSpec.reduce) in each transform's own slot, after
    # its last stage's reads, instead of an area of their own (REDUCE_IN_SLOT)
    reduce_in_slot: bool = False

    @property
    def shift(self) -> int:
        return SKEW[self.precision] if self.skew_shift < 0 else self.skew_shift

    @property
    def slot_size(self) -> int:
        """Shared-memory points of one transform's slot (its skewed points and pad slots)."""
        return skewed(self.n, self.precision, self.shift) + self.slot_extra

    @property
    def table_n(self) -> int:
        return 2 * self.n if self.pack else self.n

    @property
    def stage_offsets(self) -> tuple[int, ...]:
        """Where each stage's own twiddles start in the kernel's table (see ``twiddle_index``);
        0 for the first stage, which has none."""
        offsets, at, stride = [], self.table_n, 1
        for radix in self.radices or (1,):  # one point: a single empty stage
            offsets.append(at if stride > 1 else 0)
            if stride > 1:
                at += (radix - 1) * stride
            stride *= radix
        return tuple(offsets)

    def twiddle_index(self) -> tuple[int, ...]:
        """The kernel's twiddle table as indices into the ``table_n`` roots: the roots in
        order (the r2c / c2r untangling and the four-step twist index them directly), then for
        each stage after the first (stride ``s``, radix ``r``) the root of butterfly input
        ``q`` of butterfly ``k`` at ``(q - 1) * s + k``: the threads of a warp, consecutive
        ``k``, read consecutive entries for each ``q`` (with the ``k * q`` order of the plain
        roots, a warp's reads of one ``q`` spread over up to 32 sectors)."""
        index = list(range(self.table_n))
        stride = 1
        for radix in self.radices:
            if stride > 1:
                step = self.table_n // (stride * radix)
                for q in range(1, radix):
                    index += [(k * q * step) % self.table_n for k in range(stride)]
            stride *= radix
        return tuple(index)

    @property
    def block_threads(self) -> int:
        return self.threads * self.per_block

    @property
    def shared_bytes(self) -> int:
        bins = 0 if self.reduce_in_slot else self.store.bins
        return self.per_block * _slot_bytes(self.slot_size, self.precision, bins)

    @property
    def reduce_stride(self) -> int:
        """The distance, in real values, between consecutive transforms' reduce values in
        shared memory: ``store.bins`` (an area after the slots), or in their own slots
        (``reduce_in_slot``) a slot's real values, plus one where the last transform's
        values still fit its slot so, transform s's then starting s values into its slot
        (consecutive transforms' bins in consecutive banks where a slot is a multiple of 32
        values, as with bins 513 after the slots). A slot holds at least 2 n real values,
        the n + 1 bins' and more."""
        if not self.reduce_in_slot:
            return self.store.bins
        room = 2 * self.slot_size
        return room + 1 if self.per_block - 1 + self.store.bins <= room else room

    @property
    def min_blocks(self) -> int:
        """Blocks per SM the compiler must leave registers for (``__launch_bounds__``'s second
        argument; 1: no bound). A plain transform whose first stage is radix 16 holds 16
        complex values per thread: left alone, the compiler gave the 1024-point kernel (256
        threads) 87 registers, 2 blocks per SM, too few loads in flight for DRAM; bounded to
        1024 threads per SM (64 registers), `bench/fft.py`'s fft_b went from 0.60x to 0.71x
        of cuFFT's speed on an H200 (docs/benchmarks.md). Longer transforms (the 4096-point
        four-step halves were slower so bounded), float64 (twice the registers per value) and
        the framing / filterbank kernels (no gain) keep the compiler's choice.

        The float32 fused adjoint with the overlap-add (StoreSpec.ola_hop; 512 threads for
        n_fft 1024) is bounded to OLA_THREADS_PER_SM threads: for a reflect-padded stft it took
        46 registers, 2 blocks an SM, and ran about as slowly as the frames + gathers it
        replaced (H200, graph replays: mel forward + backward 0.455 ms; 0.429 bounded, 40
        registers and 3 blocks as with the constant padding). The istft's c2r kernel with
        the overlap-add (radix <= 8 stages) is bounded to ISTFT_THREADS_PER_SM, a full SM:
        it took 32 registers unbounded until its block's signal and frame became a 32-bit
        division at its start (39 registers, 3 blocks an SM, then); bounded to 3 blocks it
        had run slower (0.146 ms vs 0.138); on the greedy radices (``block``: float32 from
        ISTFT_GREEDY_MIN points) its first stage is radix 16 and it takes the plain kernels'
        rule below, as timed. Blocks of fewer than 256 threads (n_fft below
        512) keep the compiler's choice: their bound would ask for more blocks an SM than
        the 32 it runs. A spec with ``bound`` set (autotuning, kernels.tuning) takes it."""
        if self.bound:
            return self.bound
        ola = self.store.ola_hop and self.precision == "float32" and self.block_threads >= 256
        if ola and self.store.value == "adjoint":
            return max(1, OLA_THREADS_PER_SM // self.block_threads)
        if ola and self.pack == "c2r" and max(self.radices) <= 8:
            return max(1, ISTFT_THREADS_PER_SM // self.block_threads)
        plain = not self.load.frames and not self.store.reduce and self.precision == "float32"
        radix_16 = bool(self.radices) and self.radices[0] >= 16
        if plain and radix_16 and self.n <= 1024 and self.block_threads <= 256:
            return max(1, 1024 // self.block_threads)
        return 1


# The store values whose r2c kernel runs an inverse transform after a pointwise step
# (codegen.block._adjoint): the |stft| ** power backward's adjoint and the overlap-save
# convolution.
INVERSE_VALUES = ("adjoint", "convolve")


def untangle_slots(spec: BlockSpec) -> int:
    """How many butterfly pairs the last stage of an r2c kernel has when it untangles in
    registers (codegen.block._untangled_last_stage), or 0 when it does not: packed real
    transforms (``pack`` r2c) whose last stage has at least one pair per thread. With fewer
    (the last radix as wide as the first: 256 = 16 x 16), half the threads would idle in
    the last stage, and the kernel keeps the exchange through shared memory. The fused
    adjoint and convolution (StoreSpec.value ``adjoint``, ``convolve``) keep it too: their
    inverse transform follows in the kernel (codegen.block._adjoint)."""
    if spec.pack != "r2c" or spec.store_staged or spec.store.value in INVERSE_VALUES:
        return 0
    s = spec.n // (spec.radices or (1,))[-1]  # the last stage's butterflies
    slots = s // 2 if s % 2 == 0 else (s + 1) // 2
    return slots if slots >= spec.threads else 0


# A filterbank reduce's values (StoreSpec.reduce: |X| ** power of each bin) in each
# transform's own slot of shared memory (BlockSpec.reduce_in_slot) where the last stage
# untangles in registers (untangle_slots): that stage holds the values in registers until
# every thread of the transform has read the slot, then writes them into it, and a block
# needs no area of its own for them. mel's kernel (n_fft 1024, 4 frames a block): 25.6 ->
# 17.4 KB of shared memory a block, so an SM holds 9 blocks instead of 8 at its 56
# registers (NVRTC 13, sm_90; its register count unchanged). H100, tools/ab.py --rounds 2
# (2026-12-06): mel 0.0781 -> 0.0733 ms, mfcc 0.0973 -> 0.0923, mel_bwd 0.3089 -> 0.3032.
# The same bits on the host emulation; on the GPU the compiled kernels differ by rounding in
# some values (mel: 6% of them, by at most 1.95e-7 of the peak), with the same error
# against float64 (1.92e-7 of the peak both; docs/benchmarks.md). False: an area after the
# slots (the kernels before this switch).
REDUCE_IN_SLOT = True


def _reduces_in_slot(spec: BlockSpec) -> bool:
    """Whether ``spec``'s reduce values go into its transforms' own slots (REDUCE_IN_SLOT):
    a reduce of the bins' powers whose last stage untangles in registers (the values of a
    stored table need their bin, which codegen.block._store_lambda's reduce_value has not)."""
    if not (REDUCE_IN_SLOT and spec.store.reduce and untangle_slots(spec)):
        return False
    return not spec.store.table and spec.store.value in ("power", "magnitude", "db", "pow")


def _slot_bytes(points: int, precision: str, bins: int) -> int:
    """Shared memory of one transform: its slot of complex points (skewed, with any pad
    slots) and any reduce values."""
    complex_bytes = _COMPLEX_BYTES[precision]
    return points * complex_bytes + bins * (complex_bytes // 2)


@functools.lru_cache(maxsize=1024)
def block_fits(n: int, precision: str) -> bool:
    return n * _COMPLEX_BYTES[precision] <= BLOCK_BYTES and stage_radices(n) is not None


def _transform_threads(n: int, radices: tuple[int, ...]) -> int:
    """One thread per butterfly of the first stage, at most a block's 1024 (then each thread
    takes several: the fewest that divide evenly, so staged transfers stay whole)."""
    threads = max(1, n // radices[0]) if radices else 1
    share = 1
    while threads // share > MAX_THREADS or threads % share:
        share += 1
    return threads // share


def block(
    n: int, sign: int, precision: str, load: LoadSpec, store: StoreSpec, *,
    load_staged: bool = False, store_staged: bool = False, pack: str = "",
    split: bool = False, twist: bool = False, unit_in: bool = False, unit_out: bool = False,
    interleave: bool = False,
) -> BlockSpec:  # fmt: skip
    """The block kernel of an ``n``-point transform (``block_fits`` must hold): the rules
    below, unless autotuning recorded another kernel for their choice (:func:`tuned`).

    The inverse real transforms (``pack`` c2r) and the kernels of the |stft| ** power
    backward (StoreSpec.value ``adjoint`` and ``cotangent``, which must round alike: the
    fused adjoint equals the cotangent store + c2r chain bit for bit) take
    :func:`even_radices`: with them, on the H200 (CUDA graph replays, docs/benchmarks.md),
    istft 0.251 -> 0.223 ms and mel forward + backward 0.517 -> 0.456. The forward kernels
    keep the greedy radices, with which they ran faster (stft_p 0.088 vs 0.098 ms: the r2c
    untangle stays in registers only while the last stage has a butterfly pair per thread),
    and so does the float32 istft's c2r kernel with its overlap-add from ISTFT_GREEDY_MIN
    points, which no chain has to equal bit for bit. Graph replays on an H100 (old / new
    twice, the 39th session): n_fft 1024 (16, 16, 2 for 8, 8, 8: a warp a frame) 0.137 ->
    0.128 ms, n_fft 768 (16, 12, 2 for 8, 8, 6) 0.154 -> 0.143, but n_fft 64 (16, 2 for 8,
    4: blocks of 16 threads) 0.145 -> 0.222, so shorter ones keep even_radices; float64 was
    not timed and keeps them too."""
    if twist and not (store_staged or interleave):
        raise ValueError("a four-step twist kernel stores staged or interleaved (its twiddles "
                         "are per row)")  # fmt: skip
    if interleave and not interleaves(n, precision, load, store):
        raise ValueError(f"no interleaved {n}-point block kernel of these loads and stores")
    istft_ola = (pack == "c2r" and bool(store.ola_hop) and precision == "float32"
                 and n >= ISTFT_GREEDY_MIN)  # fmt: skip
    even = (pack == "c2r" and not istft_ola) or store.value in ("adjoint", "cotangent",
                                                                 "convolve")  # fmt: skip
    radices = even_radices(n) if even else stage_radices(n)
    if radices is None or not block_fits(n, precision):
        raise ValueError(f"{n} points do not fit one block in {precision}")
    threads = _transform_threads(n, radices)
    staged = load_staged or store_staged or interleave
    if store.ola_hop:
        per_block = ola_frames(2 * n, store.ola_hop, threads, precision)
        adjoint = pack == "r2c" and store.value == "adjoint"
        if not (pack == "c2r" or adjoint) or per_block is None:
            raise ValueError(f"no overlap-add block kernel of {2 * n} points, hop "
                             f"{store.ola_hop}, in {precision}")  # fmt: skip
        extra = staged_layout(n, radices, threads, per_block, precision) if load_staged else 0
        return tuned(BlockSpec(n, radices, sign, precision, threads, per_block, load, store,
                               load_staged, False, pack, unit_in=unit_in,
                               slot_extra=extra))  # fmt: skip
    # About 256 threads a block (FRAMED_THREADS for the forward stft kernels); staged
    # transfers want >= 32 contiguous bytes per row (a whole sector), for which they may take
    # up to a block's 1024 threads and 150 KiB.
    framed = load.frames and store.value not in ("adjoint", "cotangent", "convolve")
    per_block = max(1, (FRAMED_THREADS if framed else 256) // threads)
    if staged:
        per_block = max(per_block, 32 // _COMPLEX_BYTES[precision])
    per_block = min(per_block, max(1, (MAX_THREADS if staged else 512) // threads))
    row_bytes = _slot_bytes(skewed(n, precision), precision, store.bins)
    while per_block > 1 and per_block * row_bytes > (150 if staged else 100) * 1024:
        per_block -= 1
    shift, extra = SKEW[precision], 0  # (interleaved: the default skew, no pad slots)
    if load_staged or store_staged:  # staged transfers interleave the transforms
        extra = staged_layout(n, radices, threads, per_block, precision)
    elif not interleave:
        shift, extra = shared_layout(n, radices, threads, per_block, precision)
    spec = BlockSpec(n, radices, sign, precision, threads, per_block, load, store, load_staged,
                     store_staged, pack, split, twist, unit_in, unit_out, shift, extra,
                     interleave=interleave)  # fmt: skip
    if _reduces_in_slot(spec):
        spec = dataclasses.replace(spec, reduce_in_slot=True)
    return tuned(spec)


# The four-step passes run interleaved block kernels (``BlockSpec.interleave``) where they
# can (``interleaves``), else staged transfers (a switch for benchmarks and tests).
INTERLEAVE_COLUMNS = True


def interleaves(n: int, precision: str, load: LoadSpec, store: StoreSpec) -> bool:
    """Whether a four-step pass of ``n``-point columns can run interleaved: complex or real
    loads and complex stores (no framing, reduce or overlap-add), and a last stage whose
    butterflies are whole multiples of the threads (each thread's stored points j = t + r
    threads, as the four-step twiddles assume: codegen.block._twist_rows)."""
    radices = stage_radices(n)
    if radices is None or not block_fits(n, precision):
        return False
    threads = _transform_threads(n, radices)
    plain = loads_walk(load) and not load.frames and stores_walk(store) and not store.ola_hop
    return plain and (n // radices[-1]) % threads == 0


def loads_walk(load: LoadSpec) -> bool:
    """Whether a kernel's global loads of ``load`` may walk their elements' offsets by
    constant steps (codegen.block._walk): complex and real loads, not a hermitian load's
    mirrored elements, which go back."""
    return load.mode in ("complex", "real")


def stores_walk(store: StoreSpec) -> bool:
    """Whether a kernel's global stores of ``store`` may walk their elements' offsets: the
    complex values' (a cotangent's factors and a reduce's shared values are indexed by the
    row and bin instead)."""
    return store.value == "complex" and not store.reduce


def column_block(n: int, sign: int, precision: str, load: LoadSpec, store: StoreSpec,
                 twist: bool) -> BlockSpec:  # fmt: skip
    """A four-step pass's kernel: ``twist`` the columns' pass (strided columns, the twiddles
    multiplied into its stores), else the rows' (contiguous rows stored transposed);
    interleaved where :func:`interleaves` (and INTERLEAVE_COLUMNS), else staged."""
    unit_in = not twist
    if INTERLEAVE_COLUMNS and interleaves(n, precision, load, store):
        return block(n, sign, precision, load, store, split=True, twist=twist,
                     unit_in=unit_in, interleave=True)  # fmt: skip
    return block(n, sign, precision, load, store, load_staged=twist, store_staged=True,
                 split=True, twist=twist, unit_in=unit_in)  # fmt: skip


def tuned(spec: BlockSpec) -> BlockSpec:
    """The rule's ``spec`` or the autotuned winner recorded for it (kernels.tuning)."""
    from specux.kernels import tuning  # (it imports this module)

    return tuning.tuned(spec)


# The threads a block of the forward stft kernels (LoadSpec.frames; the spectrum, its power
# or dB, the filterbank reduce) aim at. Autotuning them on the H200 (kernels.tuning, 29th
# session: 64 x 160000 and 8 x 32000 samples, n_fft 256 / 400 / 512 / 1024 / 2048, complex,
# power and mel outputs, CUDA graph replays) chose half the transforms of 256-thread blocks
# in 25 of the 30 cases, 5-20% faster (stft_c 0.076 -> 0.069 ms, stft_p 0.065 -> 0.061, mel
# at n_fft 512 0.108 -> 0.099); the other 5 were within 2%. The backward's framed kernels
# (cotangent, adjoint) and the overlap-save convolution keep 256 (not timed).
FRAMED_THREADS = 128

EXPAND_UNROLLED = 4  # StoreSpec.expand: the most terms a bin unrolled


def expand_count(width: int) -> int:
    """StoreSpec.expand for bank tables of padded ``width`` (0: not known)."""
    return width if 0 < width <= EXPAND_UNROLLED else EXPAND_UNROLLED + 1


OLA_FRAMES = 8  # the fewest frames of an overlap-add block kernel
OLA_THREADS_PER_SM = 1536  # the float32 fused adjoint's register bound (BlockSpec.min_blocks)
ISTFT_GREEDY_MIN = 256  # the shortest float32 istft c2r half-length on greedy radices (block)
ISTFT_THREADS_PER_SM = 2048  # the float32 istft kernel's (32 registers a thread)
OLA_SHARED = 100 * 1024  # its most shared memory


def ola_frames(n_fft: int, hop: int, threads: int, precision: str) -> int | None:
    """The frames of an overlap-add block kernel (StoreSpec.ola_hop) of ``n_fft``-point frames
    and ``threads`` threads each, or None when none fits: at least OLA_FRAMES (the samples
    that neighbouring blocks' frames overlap, n_fft - hop at each seam, go through a scratch;
    the more frames, the fewer seams), and enough that only two blocks' frames overlap any
    sample (frames * hop >= n_fft - hop), within a block's threads and OLA_SHARED."""
    if not 0 < hop <= n_fft or n_fft % 2:
        return None
    frames = max(OLA_FRAMES, -(-n_fft // hop) - 1)
    slot = _slot_bytes(skewed(n_fft // 2, precision), precision, 0)
    if frames * threads > MAX_THREADS or frames * slot > OLA_SHARED:
        return None
    return frames


def four_step_split(n: int, precision: str) -> tuple[int, int] | None:
    """n = n1 * n2 with both halves fitting a block, as balanced as possible, or None."""
    best = None
    for n1 in range(2, int(n**0.5) + 2):
        if n % n1:
            continue
        n2 = n // n1
        if block_fits(n1, precision) and block_fits(n2, precision):
            best = (n1, n2)  # the last one found is the most balanced (n1 <= sqrt(n))
    if best is None:
        return None
    n1, n2 = best
    return (n2, n1) if n2 < n1 else best


# A four-step runs in three column passes instead of two (where its length splits so:
# fft_exec._four_step) when two would stage fewer than this many bytes of a row a block: whole
# 32-byte sectors. On the H200 (scratch A/B, CUDA graph replays, 2026-12-03): complex64 2 ** 24
# splits 4096 x 4096, 4 transforms a block in both passes (32 bytes), two passes 0.292 ms,
# three (256 x 256 x 256) 0.310; 2 ** 25 splits 4096 x 8192, whose 8192-point rows stage 2
# (16 bytes), two 0.848, three 0.619; 2 ** 26 2.256 vs 1.278; 2 ** 27 (no two-way split:
# passes) 7.29 vs 2.56.
THREE_PASS_ROW_BYTES = 32


def column_split(n: int, precision: str, store: StoreSpec = StoreSpec(),
                 unit_rows: bool = True) -> tuple[int, ...] | None:  # fmt: skip
    """The lengths of a four-step of ``n`` points storing ``store``: two
    (``four_step_split``) when both passes stage at least THREE_PASS_ROW_BYTES of a row (the
    first its columns' loads and stores, the second its transposed stores), else three where
    n splits so and the last pass can store, else two, else None. The last of three passes
    stores complex values without a valid count or table only, into output rows whose
    elements are not interleaved with other rows' (``unit_rows``: Strides.inner 1): its rows'
    element offset is not the logical index those refer to."""
    two = four_step_split(n, precision)
    three = (store.mode == "complex" and not store.valid and not store.table
             and unit_rows)  # fmt: skip
    if not three:
        return two
    if two is not None:
        first = column_block(two[0], -1, precision, LoadSpec(), StoreSpec(), twist=True)
        second = column_block(two[1], -1, precision, LoadSpec(), StoreSpec(), twist=False)
        staged = min(first.per_block, second.per_block) * _COMPLEX_BYTES[precision]
        if staged >= THREE_PASS_ROW_BYTES:
            return two
    return three_step_split(n, precision) or two


@functools.lru_cache(maxsize=256)
def three_step_split(n: int, precision: str) -> tuple[int, int, int] | None:
    """n = n1 * n2 * n3 with each fitting a block, the largest as small as possible, then the
    smallest as large (the columns stage more transforms a block the shorter they are),
    ascending (the largest is the last pass's, whose rows load contiguously), or None."""
    best, most = None, BLOCK_BYTES // _COMPLEX_BYTES[precision]  # the most points a block
    for n1 in range(2, round(n ** (1 / 3)) + 2):
        if n % n1 or not block_fits(n1, precision):
            continue
        rest = n // n1
        for n2 in range(max(n1, -(-rest // most)), int(rest**0.5) + 1):  # n3 <= most
            if rest % n2 == 0 and block_fits(n2, precision) and block_fits(rest // n2, precision):
                split = (n1, n2, rest // n2)
                if best is None or (split[2], -n1) < (best[2], -best[0]):
                    best = split
    return best
