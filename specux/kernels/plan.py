"""FFT plans: frozen, hashable descriptions of every kernel launch of a transform.

A 1-D transform of ``n`` points runs as a chain of Stockham passes in global memory (each pass
one radix-R butterfly per thread, natural order in and out, no bit reversal). Lengths with a
prime factor above the largest codelet run as Bluestein's algorithm: a chirp-multiplied,
zero-padded forward FFT of a smooth length M >= 2n - 1, a pointwise product with the chirp
filter's spectrum (fused into the inverse's first load) and a chirp-multiplied inverse (fused
into its last store). Loads and stores carry the prologue / epilogue work: layouts, real and
Hermitian inputs, half-spectrum and real outputs, tables, scaling, storage precision.

Rendering a plan with a dialect gives source text (codegen/); the plan is the cache key.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def bluestein_length(n: int) -> int:
    """The smallest 2/3/5/7-smooth length >= 2n - 1."""
    m = 2 * n - 1
    while not _is_smooth(m):
        m += 1
    return m


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


@dataclass(frozen=True)
class StoreSpec:
    """The epilogue: ``complex`` (all), ``half`` (bins j <= n/2 only), ``real`` (real part).

    Only ``j < valid`` is stored (0 means all); ``table`` multiplies by a per-element table;
    ``scaled`` multiplies by the launch's scale argument (the normalization).
    """

    layout: Layout = CANONICAL
    mode: str = "complex"
    storage: str = "compute"
    valid: int = 0
    table: bool = False
    scaled: bool = False
    logical: int = 0  # the transform length the half / real modes refer to (0: the pass's n)


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


# Fused single-block kernels keep two copies of the transform in shared memory; 64 KiB holds
# 4096 complex64 or 2048 complex128 points (H200 blocks may opt in to 227 KiB).
FUSED_SHARED_BYTES = 64 * 1024
_COMPLEX_BYTES = {"float32": 8, "float64": 16}
RADIX_CODE = {1: 0, 2: 1, 3: 2, 4: 3, 5: 4, 7: 5, 8: 6, 11: 7, 13: 8}


@dataclass(frozen=True)
class FusedSpec:
    """A whole ``n``-point transform in one block: load to shared memory, every radix pass
    there (barriers between), store. ``radices`` and ``n`` are launch arguments."""

    n: int
    radices: tuple[int, ...]
    sign: int
    precision: str
    load: LoadSpec = LoadSpec()
    store: StoreSpec = StoreSpec()

    @property
    def shared_bytes(self) -> int:
        return 2 * self.n * _COMPLEX_BYTES[self.precision]

    @property
    def radix_code(self) -> int:
        """4 bits per pass (index into RADIX_CODE), first pass in the low bits."""
        code = 0
        for index, radix in enumerate(self.radices):
            code |= RADIX_CODE[radix] << (4 * index)
        return code


def fused(n: int, sign: int, precision: str, load: LoadSpec, store: StoreSpec):
    """The one-kernel plan of an ``n``-point transform, or None if it does not fit a block."""
    radices = factorize(n)
    if radices is None or 2 * n * _COMPLEX_BYTES[precision] > FUSED_SHARED_BYTES:
        return None
    if len(radices) > 15:
        return None
    return FusedSpec(n, radices, sign, precision, load, store)
