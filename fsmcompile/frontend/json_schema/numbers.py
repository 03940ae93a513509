"""Numeric ranges and divisibility as IR over JSON number texts, compared exactly.

Bounds are compared as exact decimals (`decimal.Decimal` of the schema's shortest
spelling), digit by digit, so `minimum: 0.1` admits `0.1` and `0.10` but not `0.09999`.
Two decisions are documented in docs/json_schema.md:

* `integer` accepts only `-?(0|[1-9][0-9]*)`; `1.0` is refused although JSON Schema
  calls it an integer (an over-constraint that keeps integers one spelling).
* A `number` with a bound other than zero is written without an exponent here: the
  value of `d.ddde±k` against a bound depends on the exponent, one fixed-point range per
  exponent, which costs states (exponents.py builds them under
  `JsonOptions.exponent_numbers`). Bounds at zero (`minimum: 0`, `exclusiveMinimum: 0`)
  only fix the sign, so they keep the full grammar.

The keywords are combined in number_keywords.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from fsmcompile.ir.nodes import EMPTY, NOTHING, And, Node, Repeat, alt, chars, literal, seq

if TYPE_CHECKING:
    from fsmcompile.frontend.json_schema.combinators import Conjunction

_DIGIT = chars((48, 57))
_NONZERO = chars((49, 57))

INTEGER_TEXT: Node = seq(
    Repeat(chars("-"), 0, 1), alt(chars("0"), seq(_NONZERO, Repeat(_DIGIT, 0, None)))
)
"""`-?(0|[1-9][0-9]*)`: the integer spelling (`1.0` only with `integer_fractions`)."""

FRACTION_TEXT: Node = seq(chars("."), Repeat(_DIGIT, 1, None))
ZERO_FRACTION_TEXT: Node = seq(chars("."), Repeat(chars("0"), 1, None))
"""`.0`, `.00`, ...: what `integer_fractions` lets follow an integer."""
EXPONENT_TEXT: Node = seq(chars("eE"), Repeat(chars("+-"), 0, 1), Repeat(_DIGIT, 1, None))
NUMBER_TEXT: Node = seq(INTEGER_TEXT, Repeat(FRACTION_TEXT, 0, 1), Repeat(EXPONENT_TEXT, 0, 1))
"""The JSON number grammar `-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?`."""
_DIGITS = Repeat(_DIGIT, 0, None)
_ANY_FRACTION = Repeat(FRACTION_TEXT, 0, 1)
_UNSIGNED_INTEGER = alt(chars("0"), seq(_NONZERO, _DIGITS))
_MINUS = chars("-")


@dataclass(frozen=True, slots=True)
class Bound:
    """One side of a numeric range: `value`, excluded when `exclusive`."""

    value: Decimal
    exclusive: bool


def to_decimal(value: int | float) -> Decimal:
    """The exact decimal a schema author wrote: floats through their shortest repr."""
    return Decimal(value) if isinstance(value, int) else Decimal(repr(value))


def _digit_range(lo: int, hi: int) -> Node:
    return chars((48 + lo, 48 + hi))


def _same_length(a: str, b: str) -> Node:
    """Digit strings of len(a) == len(b) between `a` and `b` (leading zeros allowed)."""
    if a == b:
        return literal(a)
    if len(a) == 1:
        return _digit_range(int(a), int(b))
    if a[0] == b[0]:
        return seq(chars(a[0]), _same_length(a[1:], b[1:]))
    rest = len(a) - 1
    low_full = a[1:] == "0" * rest
    high_full = b[1:] == "9" * rest
    parts: list[Node] = []
    if not low_full:
        parts.append(seq(chars(a[0]), _same_length(a[1:], "9" * rest)))
    first = int(a[0]) + (0 if low_full else 1)
    last = int(b[0]) - (0 if high_full else 1)
    if first <= last:
        parts.append(seq(_digit_range(first, last), Repeat(_DIGIT, rest, rest)))
    if not high_full:
        parts.append(seq(chars(b[0]), _same_length("0" * rest, b[1:])))
    return alt(*parts)


def natural_range(lo: int, hi: int | None) -> Node:
    """Texts of the naturals in `[lo, hi]` without leading zeros (`hi=None`: unbounded).

    One alternative per digit count, each split at the first differing digit: size is
    quadratic in the number of digits, never in the size of the range.
    """
    lo = max(lo, 0)
    if hi is not None and hi < lo:
        return NOTHING
    parts: list[Node] = []
    top = len(str(hi)) if hi is not None else len(str(lo))
    for width in range(len(str(lo)), top + 1):
        start = max(lo, 10 ** (width - 1) if width > 1 else 0)
        end = 10**width - 1 if hi is None else min(hi, 10**width - 1)
        if start <= end:
            parts.append(_same_length(str(start), str(end)))
    if hi is None:
        width = len(str(lo))
        parts.append(seq(_NONZERO, Repeat(_DIGIT, width, None)))
    return alt(*parts) if parts else NOTHING


def integer_range(lo: int | None, hi: int | None) -> Node:
    """Integer texts `-?(0|[1-9][0-9]*)` with value in `[lo, hi]` (None: unbounded).

    `-0` has value 0 and is accepted whenever 0 is.
    """
    if lo is not None and hi is not None and lo > hi:
        return NOTHING
    parts: list[Node] = []
    if hi is None or hi >= 0:
        parts.append(natural_range(max(lo or 0, 0), hi))
    if lo is None or lo <= 0:
        top = None if lo is None else -lo
        bottom = 0 if hi is None or hi >= 0 else -hi
        parts.append(seq(_MINUS, natural_range(bottom, top)))
    return alt(*parts) if parts else NOTHING


def integer_bounds(lo: Bound | None, hi: Bound | None) -> tuple[int | None, int | None]:
    """The inclusive integer bounds equivalent to two decimal bounds."""
    lo_int = hi_int = None
    if lo is not None:
        lo_int = math.floor(lo.value) + 1 if lo.exclusive else math.ceil(lo.value)
    if hi is not None:
        hi_int = math.ceil(hi.value) - 1 if hi.exclusive else math.floor(hi.value)
    return lo_int, hi_int


def _split(value: Decimal) -> tuple[int, str]:
    """(integer part, fraction digits without trailing zeros) of a non-negative value."""
    text = format(value, "f")
    whole, _, fraction = text.partition(".")
    return int(whole), fraction.rstrip("0")


def _fraction_at_least(fraction: str, strict: bool) -> Node:
    """Optional `.digits` whose value is >= (or >) `0.fraction`."""
    nonzero_tail = seq(_DIGITS, _NONZERO, _DIGITS)
    if not fraction:
        return seq(chars("."), nonzero_tail) if strict else _ANY_FRACTION

    def tail(i: int) -> Node:
        if i == len(fraction):
            return nonzero_tail if strict else _DIGITS
        digit = int(fraction[i])
        same = seq(chars(fraction[i]), tail(i + 1))
        return alt(seq(_digit_range(digit + 1, 9), _DIGITS), same) if digit < 9 else same

    return seq(chars("."), tail(0))


def _fraction_at_most(fraction: str, strict: bool) -> Node:
    """Optional `.digits` whose value is <= (or <) `0.fraction`."""
    if not fraction:
        return NOTHING if strict else Repeat(seq(chars("."), Repeat(chars("0"), 1, None)), 0, 1)

    def tail(i: int, may_end: bool) -> Node:
        if i == len(fraction):
            return NOTHING if strict else Repeat(chars("0"), 0, None)
        digit = int(fraction[i])
        parts: list[Node] = [EMPTY] if may_end else []
        if digit > 0:
            parts.append(seq(_digit_range(0, digit - 1), _DIGITS))
        parts.append(seq(chars(fraction[i]), tail(i + 1, True)))
        return alt(*parts)

    return alt(EMPTY, seq(chars("."), tail(0, False)))


def _magnitude_at_least(bound: Bound) -> Node:
    whole, fraction = _split(bound.value)
    return alt(
        seq(natural_range(whole + 1, None), _ANY_FRACTION),
        seq(literal(str(whole)), _fraction_at_least(fraction, bound.exclusive)),
    )


def _magnitude_at_most(bound: Bound) -> Node:
    whole, fraction = _split(bound.value)
    parts: list[Node] = []
    if whole > 0:
        parts.append(seq(natural_range(0, whole - 1), _ANY_FRACTION))
    parts.append(seq(literal(str(whole)), _fraction_at_most(fraction, bound.exclusive)))
    return alt(*parts)


def _empty_range(lo: Bound | None, hi: Bound | None) -> bool:
    if lo is None or hi is None:
        return False
    return lo.value > hi.value or (lo.value == hi.value and (lo.exclusive or hi.exclusive))


def _magnitudes(lo: Bound | None, hi: Bound | None) -> Node:
    """Unsigned fixed-point texts with value in the range (lo.value >= 0)."""
    if _empty_range(lo, hi):
        return NOTHING
    items: list[Node] = []
    if lo is not None and (lo.value > 0 or lo.exclusive):
        items.append(_magnitude_at_least(lo))
    if hi is not None:
        items.append(_magnitude_at_most(hi))
    if not items:
        return seq(_UNSIGNED_INTEGER, _ANY_FRACTION)
    return items[0] if len(items) == 1 else And(tuple(items))


def _sign_only(lo: Bound | None, hi: Bound | None) -> Node:
    """Bounds that are all zero: the sign and zeroness decide, exponents stay allowed."""
    exponent = Repeat(EXPONENT_TEXT, 0, 1)
    zero = seq(chars("0"), Repeat(seq(chars("."), Repeat(chars("0"), 1, None)), 0, 1), exponent)
    nonzero = seq(
        alt(
            seq(_NONZERO, _DIGITS, _ANY_FRACTION),
            seq(chars("0"), chars("."), _DIGITS, _NONZERO, _DIGITS),
        ),
        exponent,
    )
    positive_ok = hi is None
    negative_ok = lo is None
    zero_ok = (lo is None or not lo.exclusive) and (hi is None or not hi.exclusive)
    parts: list[Node] = []
    if zero_ok:
        parts.append(seq(Repeat(_MINUS, 0, 1), zero))
    if positive_ok:
        parts.append(nonzero)
    if negative_ok:
        parts.append(seq(_MINUS, nonzero))
    return alt(*parts) if parts else NOTHING


def number_range(lo: Bound | None, hi: Bound | None) -> Node:
    """JSON number texts with value in the range; see the module docstring for spelling."""
    if lo is None and hi is None:
        return NUMBER_TEXT
    if _empty_range(lo, hi):
        return NOTHING
    if all(b is None or b.value == 0 for b in (lo, hi)):
        return _sign_only(lo, hi)
    parts: list[Node] = []
    # Texts without '-': magnitudes in [max(lo, 0), hi].
    if hi is None or hi.value > 0 or (hi.value == 0 and not hi.exclusive):
        plus_lo = lo if lo is not None and lo.value >= 0 else None
        parts.append(_magnitudes(plus_lo, hi))
    # Texts with '-': value -m in [lo, hi] <=> m in [-hi, -lo]; '-0' has value 0.
    if lo is None or lo.value < 0 or (lo.value == 0 and not lo.exclusive):
        minus_lo = Bound(-hi.value, hi.exclusive) if hi is not None and hi.value <= 0 else None
        minus_hi = Bound(-lo.value, lo.exclusive) if lo is not None else None
        parts.append(seq(_MINUS, _magnitudes(minus_lo, minus_hi)))
    return alt(*parts)


def _power_of_ten_exponent(divisor: int) -> int | None:
    """The least k with `divisor | 10**k`, or None when no power of ten is a multiple."""
    twos = fives = 0
    while divisor % 2 == 0:
        divisor //= 2
        twos += 1
    while divisor % 5 == 0:
        divisor //= 5
        fives += 1
    return max(twos, fives) if divisor == 1 else None


def _trie(words: list[str]) -> Node:
    """Exactly the given equal-length digit strings, sharing prefixes."""
    if not words or not words[0]:
        return EMPTY if words else NOTHING
    groups: dict[str, list[str]] = {}
    for word in words:
        groups.setdefault(word[0], []).append(word[1:])
    return alt(*(seq(chars(first), _trie(rest)) for first, rest in sorted(groups.items())))


def multiple_of(divisor: Decimal, *, integer: bool) -> Node | None:
    """Texts whose value is a multiple of `divisor`, or None when not expressible here.

    Exact for integer divisors of a power of ten (2, 4, 5, 8, 10, 25, ...: the last k
    digits decide) and for powers of ten (0.01: at most two significant decimals).
    Other divisors (3, 7, 0.5, 2.5, ...) need a counter a compact regex cannot carry.
    """
    if divisor <= 0:
        return None
    sign = Repeat(_MINUS, 0, 1)
    if divisor == divisor.to_integral_value():
        k = _power_of_ten_exponent(int(divisor))
        if k is None:
            return None
        q = int(divisor)
        if k == 0:
            body: Node = _UNSIGNED_INTEGER
        else:
            suffixes = [str(s).zfill(k) for s in range(0, 10**k, q)]
            short = [str(v) for v in range(0, 10 ** (k - 1), q)]
            body = alt(
                *(literal(s) for s in short),
                _trie([s for s in suffixes if s[0] != "0"]),
                seq(_NONZERO, _DIGITS, _trie(suffixes)),
            )
        if not integer:
            body = seq(body, Repeat(seq(chars("."), Repeat(chars("0"), 1, None)), 0, 1))
        return seq(sign, body)
    exponent = -divisor.normalize().as_tuple().exponent  # type: ignore[operator]
    if divisor != Decimal(1).scaleb(-exponent):
        return None
    if integer:
        return seq(sign, _UNSIGNED_INTEGER)
    places = Repeat(_DIGIT, 1, exponent)
    return seq(
        sign, _UNSIGNED_INTEGER, Repeat(seq(chars("."), places, Repeat(chars("0"), 0, None)), 0, 1)
    )


def numeric_bounds(conj: Conjunction) -> tuple[Bound | None, Bound | None]:
    """The tightest lower and upper bound over all parts (draft-04 boolean exclusives too)."""
    lo: Bound | None = None
    hi: Bound | None = None

    def tighter(current: Bound | None, new: Bound, lower: bool) -> Bound:
        if current is None:
            return new
        if new.value == current.value:
            return new if new.exclusive else current
        return new if (new.value > current.value) == lower else current

    def number(value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool)

    for part in conj.parts:
        schema = part.schema
        if number(schema.get("minimum")):
            flag = schema.get("exclusiveMinimum") is True
            lo = tighter(lo, Bound(to_decimal(schema["minimum"]), flag), True)
        if number(schema.get("maximum")):
            flag = schema.get("exclusiveMaximum") is True
            hi = tighter(hi, Bound(to_decimal(schema["maximum"]), flag), False)
        if number(schema.get("exclusiveMinimum")):
            lo = tighter(lo, Bound(to_decimal(schema["exclusiveMinimum"]), True), True)
        if number(schema.get("exclusiveMaximum")):
            hi = tighter(hi, Bound(to_decimal(schema["exclusiveMaximum"]), True), False)
    return lo, hi
