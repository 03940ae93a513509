"""Number texts with an exponent under numeric bounds (`JsonOptions.exponent_numbers`).

`d.ddd` followed by `e±k` has the value of `d.ddd` with the point moved k places, so for
each exponent k the texts inside `[lo, hi]` are the fixed-point texts inside
`[lo / 10**k, hi / 10**k]` followed by a spelling of k: exact, digit by digit, as
`number_range` compares. Exponents beyond `MAX_EXPONENT` are refused when the mantissa is
not zero: a mantissa may carry any number of leading or trailing zeros (`0.0001e4`,
`1000e-3`), and telling those values apart for every exponent would compare a count of
digits with the exponent's value, which no finite automaton can do. A zero mantissa
(`0e999`, `-0.0E+5`) has the value 0 whatever the exponent and is accepted whenever 0 is.
"""

from __future__ import annotations

from decimal import Decimal

from fsmcompile.frontend.json_schema.numbers import (
    FRACTION_TEXT,
    INTEGER_TEXT,
    ZERO_FRACTION_TEXT,
    Bound,
    number_range,
)
from fsmcompile.ir.nodes import NOTHING, And, Node, Repeat, alt, chars, literal, seq

MAX_EXPONENT = 20
"""The largest exponent magnitude read with a nonzero mantissa. Each exponent costs the
automaton about 15 states (`maximum: 500`: 12 states without exponents, 323 with
exponents up to 20, 603 up to 40), which is why the option is off and the cap small."""

_DIGIT = chars((48, 57))
_ZEROS = Repeat(chars("0"), 0, None)
_MINUS = Repeat(chars("-"), 0, 1)
_MANTISSA: Node = seq(INTEGER_TEXT, Repeat(FRACTION_TEXT, 0, 1))
"""`-?(0|[1-9][0-9]*)(\\.[0-9]+)?`: a number text without its exponent."""
_ZERO_MANTISSA: Node = seq(_MINUS, chars("0"), Repeat(ZERO_FRACTION_TEXT, 0, 1))
ANY_EXPONENT: Node = seq(chars("eE"), Repeat(chars("+-"), 0, 1), Repeat(_DIGIT, 1, None))


def exponent_text(k: int) -> Node:
    """The spellings of exponent `k`: `e`/`E`, a sign (`+` optional when k > 0, either
    when k = 0) and the digits of |k| after any number of zeros (`e007`)."""
    if k == 0:
        return seq(chars("eE"), Repeat(chars("+-"), 0, 1), Repeat(chars("0"), 1, None))
    sign = Repeat(chars("+"), 0, 1) if k > 0 else chars("-")
    return seq(chars("eE"), sign, _ZEROS, literal(str(abs(k))))


def _contains_zero(lo: Bound | None, hi: Bound | None) -> bool:
    above = lo is None or lo.value < 0 or (lo.value == 0 and not lo.exclusive)
    below = hi is None or hi.value > 0 or (hi.value == 0 and not hi.exclusive)
    return above and below


def _scaled(bound: Bound | None, k: int) -> Bound | None:
    return None if bound is None else Bound(bound.value.scaleb(-k), bound.exclusive)


def _mantissa_range(lo: Bound | None, hi: Bound | None) -> Node:
    """Mantissa texts (no exponent) with value in the range: `number_range` keeps the
    exponent for bounds at zero or none, so those are cut back to mantissas."""
    node = number_range(lo, hi)
    if all(b is None or b.value == 0 for b in (lo, hi)):
        return NOTHING if node is NOTHING else And((node, _MANTISSA))
    return node


def _integral_mantissa(k: int) -> Node:
    """Mantissa texts whose value times 10**k is an integer (for k in the cap)."""
    if k >= 0:
        fraction = seq(chars("."), Repeat(_DIGIT, 0, k), _ZEROS)
        # `\.[0-9]{0,k}0*` may be just `.`, which JSON forbids: the fraction needs a digit.
        fraction = And((fraction, FRACTION_TEXT))
        return seq(INTEGER_TEXT, Repeat(fraction, 0, 1))
    trailing = seq(chars((49, 57)), Repeat(_DIGIT, 0, None), Repeat(chars("0"), -k, -k))
    return seq(_MINUS, alt(chars("0"), trailing), Repeat(ZERO_FRACTION_TEXT, 0, 1))


def exponent_range(lo: Bound | None, hi: Bound | None, *, integral: bool = False) -> Node:
    """Number texts *with* an exponent whose value lies in the range (and, with
    `integral`, is an integer), exponents up to `MAX_EXPONENT` with a nonzero mantissa."""
    parts: list[Node] = []
    if _contains_zero(lo, hi):
        parts.append(seq(_ZERO_MANTISSA, ANY_EXPONENT))
    for k in range(-MAX_EXPONENT, MAX_EXPONENT + 1):
        mantissa = _mantissa_range(_scaled(lo, k), _scaled(hi, k))
        if mantissa is NOTHING:
            continue
        if integral:
            mantissa = And((mantissa, _integral_mantissa(k)))
        parts.append(seq(mantissa, exponent_text(k)))
    return alt(*parts) if parts else NOTHING


def has_exponent_gap(lo: Bound | None, hi: Bound | None) -> bool:
    """Whether `number_range` leaves out exponent texts inside the range: it keeps the
    whole grammar when every bound is zero or absent."""
    return not all(b is None or b.value == Decimal(0) for b in (lo, hi))
