"""The numeric keywords of a conjunction lowered to number texts: `type` integer or
number, bounds, `multipleOf`, excluded values, and the spellings the options allow.

The languages themselves are built in numbers.py (fixed point), exponents.py (with an
exponent) and multiples.py (listed multiples); this module picks and combines them.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from fsmcompile.frontend.json_schema.exponents import exponent_range, has_exponent_gap
from fsmcompile.frontend.json_schema.lowering_result import Lowered
from fsmcompile.frontend.json_schema.multiples import MAX_LISTED_MULTIPLES, bounded_multiples
from fsmcompile.frontend.json_schema.numbers import (
    INTEGER_TEXT,
    ZERO_FRACTION_TEXT,
    Bound,
    integer_bounds,
    integer_range,
    multiple_of,
    number_range,
    numeric_bounds,
    to_decimal,
)
from fsmcompile.ir.nodes import NOTHING, And, Node, Repeat, alt, chars, seq

if TYPE_CHECKING:
    from fsmcompile.frontend.json_schema.combinators import Conjunction
    from fsmcompile.frontend.json_schema.lower import Lowerer

_DIGITS = Repeat(chars((48, 57)), 0, None)
_UNSIGNED_INTEGER = alt(chars("0"), seq(chars((49, 57)), _DIGITS))

FRACTIONAL_TEXT: Node = seq(
    Repeat(chars("-"), 0, 1), _UNSIGNED_INTEGER, chars("."), _DIGITS, chars((49, 57)), _DIGITS
)
"""Numbers that are not integers, without exponent (a sound subset)."""


def _not_equal(value: Decimal, integer: bool) -> Node:
    """Texts whose value differs from `value` (a `not: {const: n}`)."""
    if integer:
        if value != value.to_integral_value():
            return INTEGER_TEXT
        v = int(value)
        return alt(integer_range(None, v - 1), integer_range(v + 1, None))
    point = Bound(value, True)
    return alt(number_range(None, point), number_range(point, None))


def lower_number(
    lw: Lowerer, conj: Conjunction, *, integer: bool, fractional: bool = False
) -> Lowered:
    """`integer` or `number` texts under every bound, `multipleOf` and excluded value;
    with `fractional`, only numbers that are not integers.

    With `exponent_numbers` the texts with an exponent inside the bounds are added where
    the range is the only constraint (under `multipleOf` or an excluded value they stay
    refused); for an integer only with `integer_fractions` too, since `1e2` is, like
    `1.0`, a float to most JSON parsers.
    """
    lo, hi = numeric_bounds(conj)
    lo_int, hi_int = integer_bounds(lo, hi)
    items: list[Node] = [FRACTIONAL_TEXT] if fractional else []
    if integer:
        items.append(integer_range(lo_int, hi_int))
    else:
        items.append(number_range(lo, hi))
    for part, divisor in conj.keyword("multipleOf"):
        node = multiple_of(to_decimal(divisor), integer=integer)
        if node is None:
            node = bounded_multiples(to_decimal(divisor), lo, hi, integer=integer)
        if node is None:
            lw.report(
                part,
                "multipleOf",
                f"multipleOf {divisor} is not enforced: only divisors of a power of ten "
                "(2, 5, 10, 25, ...), powers of ten (0.1, 0.01, ...) and others between a "
                f"minimum and a maximum at most {MAX_LISTED_MULTIPLES} multiples apart are",
            )
        else:
            items.append(node)
    for value in conj.excluded_values:
        if isinstance(value, int | float) and not isinstance(value, bool):
            items.append(_not_equal(to_decimal(value), integer))
    if any(item is NOTHING for item in items):
        return Lowered(NOTHING)
    node = items[0] if len(items) == 1 else And(tuple(items))
    if integer and lw.options.integer_fractions:
        node = seq(node, Repeat(ZERO_FRACTION_TEXT, 0, 1))  # `10.0` has the value of `10`
    options = lw.options
    if options.exponent_numbers and len(items) == 1 and not fractional:
        if integer and options.integer_fractions:
            lo_b = None if lo_int is None else Bound(Decimal(lo_int), False)
            hi_b = None if hi_int is None else Bound(Decimal(hi_int), False)
            node = alt(node, exponent_range(lo_b, hi_b, integral=True))
        elif not integer and has_exponent_gap(lo, hi):
            node = alt(node, exponent_range(lo, hi))
    return Lowered(node)
