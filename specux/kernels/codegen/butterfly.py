"""Straight-line small DFTs (the stage butterflies) with literal, correctly rounded constants.

``small_dft(inputs, sign)`` writes the DFT of ``len(inputs)`` complex variables as statements:
composite radices by a Cooley-Tukey split in registers (internal twiddles are literals; the
trivial ones, 1, -1, +-i and the eighth turns, cost no or fewer multiplies), odd primes by
the symmetric-pair form (half the multiplies of the direct sum). Generated code is plain
arithmetic on the ``cpx`` struct, so every dialect compiles it.
"""

from __future__ import annotations

import decimal
import functools


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


class Code(list):
    """Statements being written, and fresh variable names unique within them."""

    def __init__(self, tag: str = "") -> None:
        super().__init__()
        self._tag = tag
        self._count = 0

    def fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._tag}_{self._count}"


def _rotate(name: str, turn_num: int, turn_den: int, sign: int, out: Code) -> str:
    """``name * exp(sign 2 pi i num / den)`` as a new variable (exact for quarter turns)."""
    num = turn_num % turn_den
    if num == 0:
        return name
    c, s = unit_root(num, turn_den)
    s *= sign
    var = out.fresh("r")
    if (c, s) == (-1.0, 0.0) or (c == -1.0 and s == 0.0):
        out.append(f"cpx {var} = {{-{name}.re, -{name}.im}};")
    elif c == 0.0 and s == 1.0:
        out.append(f"cpx {var} = {{-{name}.im, {name}.re}};")
    elif c == 0.0 and s == -1.0:
        out.append(f"cpx {var} = {{{name}.im, -{name}.re}};")
    elif abs(c) == abs(s):  # eighth turns: (c + is)(a + ib) with |c| = |s|
        h = _literal(abs(c))
        sc, ss = ("" if c > 0 else "-"), ("" if s > 0 else "-")
        # re = c a - s b, im = s a + c b
        out.append(
            f"cpx {var} = {{(real_t)({h}) * ({sc}{name}.re - ({ss}{name}.im)), "
            f"(real_t)({h}) * ({ss}{name}.re + ({sc}{name}.im))}};"
        )
    else:
        lc, ls = _literal(c), _literal(s)
        out.append(
            f"cpx {var} = {{(real_t)({lc}) * {name}.re - (real_t)({ls}) * {name}.im, "
            f"(real_t)({ls}) * {name}.re + (real_t)({lc}) * {name}.im}};"
        )
    return var


def _prime(inputs: list[str], sign: int, out: Code) -> list[str]:
    p = len(inputs)
    x0 = inputs[0]
    half = (p - 1) // 2
    sums, diffs = [], []
    for r in range(1, half + 1):
        a, b = out.fresh("s"), out.fresh("d")
        out.append(f"cpx {a} = cadd({inputs[r]}, {inputs[p - r]});")
        out.append(f"cpx {b} = csub({inputs[r]}, {inputs[p - r]});")
        sums.append(a)
        diffs.append(b)
    results = [""] * p
    dc = out.fresh("y")
    re = " + ".join([f"{x0}.re"] + [f"{a}.re" for a in sums])
    im = " + ".join([f"{x0}.im"] + [f"{a}.im" for a in sums])
    out.append(f"cpx {dc} = {{{re}, {im}}};")
    results[0] = dc
    for k in range(1, half + 1):
        # A = x0 + sum c_rk s_r ; B = sum sin_rk d_r ; X[k] = A + sign i B, X[p-k] = A - sign i B
        a_re = [f"{x0}.re"]
        a_im = [f"{x0}.im"]
        b_re, b_im = [], []
        for r in range(1, half + 1):
            c, s = unit_root(r * k, p)
            lc, ls = _literal(c), _literal(s)
            a_re.append(f"(real_t)({lc}) * {sums[r - 1]}.re")
            a_im.append(f"(real_t)({lc}) * {sums[r - 1]}.im")
            b_re.append(f"(real_t)({ls}) * {diffs[r - 1]}.re")
            b_im.append(f"(real_t)({ls}) * {diffs[r - 1]}.im")
        a, b = out.fresh("a"), out.fresh("b")
        out.append(f"cpx {a} = {{{' + '.join(a_re)}, {' + '.join(a_im)}}};")
        out.append(f"cpx {b} = {{{' + '.join(b_re)}, {' + '.join(b_im)}}};")
        plus, minus = out.fresh("y"), out.fresh("y")
        # sign i B = {-sign B.im, sign B.re}
        if sign > 0:
            out.append(f"cpx {plus} = {{{a}.re - {b}.im, {a}.im + {b}.re}};")
            out.append(f"cpx {minus} = {{{a}.re + {b}.im, {a}.im - {b}.re}};")
        else:
            out.append(f"cpx {plus} = {{{a}.re + {b}.im, {a}.im - {b}.re}};")
            out.append(f"cpx {minus} = {{{a}.re - {b}.im, {a}.im + {b}.re}};")
        results[k], results[p - k] = plus, minus
    return results


def _smallest_factor(r: int) -> int:
    for p in (4, 2, 3, 5, 7, 11, 13):
        if r % p == 0 and r != p:
            return p
    return r


def small_dft(inputs: list[str], sign: int, out: Code) -> list[str]:
    """Append statements computing ``y_k = sum_r x_r exp(sign 2 pi i r k / R)``; return the
    names of ``y_0 .. y_{R-1}``."""
    r = len(inputs)
    if r == 1:
        return list(inputs)
    if r == 2:
        a, b = out.fresh("y"), out.fresh("y")
        out.append(f"cpx {a} = cadd({inputs[0]}, {inputs[1]});")
        out.append(f"cpx {b} = csub({inputs[0]}, {inputs[1]});")
        return [a, b]
    a_factor = _smallest_factor(r)
    if a_factor == r:
        if r == 4:  # radix 4 by two radix-2 layers: the rotation by sign i is exact
            return small_dft_split(inputs, 2, sign, out)
        return _prime(inputs, sign, out)
    return small_dft_split(inputs, a_factor, sign, out)


def small_dft_split(inputs: list[str], a: int, sign: int, out: Code) -> list[str]:
    """Cooley-Tukey: R = a b, x[b n1 + n2]; a-point DFTs, twiddles W_R^(n2 k1), b-point DFTs."""
    r = len(inputs)
    b = r // a
    columns = []  # columns[n2][k1]
    for n2 in range(b):
        columns.append(small_dft([inputs[b * n1 + n2] for n1 in range(a)], sign, out))
    for n2 in range(1, b):
        for k1 in range(1, a):
            columns[n2][k1] = _rotate(columns[n2][k1], n2 * k1, r, sign, out)
    result = [""] * r
    for k1 in range(a):
        ys = small_dft([columns[n2][k1] for n2 in range(b)], sign, out)
        for k2 in range(b):
            result[k1 + a * k2] = ys[k2]
    return result
