"""`multipleOf` by listing: the multiples of any divisor inside a bounded range.

`numbers.multiple_of` is exact for the divisors whose multiples the last digits decide
(divisors of a power of ten, powers of ten). Any other divisor (3, 0.5, 2.5, 0.75)
needs a remainder the regex IR cannot carry compactly; but between a `minimum` and a
`maximum` its multiples are finitely many values, and each value's texts are exact
(`1.5`, `1.50`, `1.500`..., no exponent, as `numbers` writes bounded numbers). Up to
`MAX_LISTED_MULTIPLES` of them are listed; a wider or unbounded range stays reported.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from typing import TYPE_CHECKING

from fsmcompile.ir.nodes import EMPTY, NOTHING, Node, Repeat, alt, chars, literal, seq

if TYPE_CHECKING:
    # Annotations only: `numbers` builds its ranges with these multiples.
    from fsmcompile.frontend.json_schema.numbers import Bound

MAX_LISTED_MULTIPLES = 1000
"""Most multiples listed: each is a few states of a trie, so 1,000 stay well inside the
state budget while covering percentages in 0.1 steps, prices in 0.05 steps and such."""


def bounded_multiples(
    divisor: Decimal, lo: Bound | None, hi: Bound | None, *, integer: bool
) -> Node | None:
    """Texts of the multiples of `divisor` within [lo, hi] (integers only when
    `integer`), or None when the range is open on a side or holds too many."""
    if lo is None or hi is None or not divisor.is_finite() or divisor <= 0:
        return None
    with localcontext() as context:
        context.prec = 200  # quotients of schema literals: exact at this precision
        first = int((lo.value / divisor).to_integral_value(rounding=ROUND_CEILING))
        last = int((hi.value / divisor).to_integral_value(rounding=ROUND_FLOOR))
        if lo.exclusive and first * divisor == lo.value:
            first += 1
        if hi.exclusive and last * divisor == hi.value:
            last -= 1
        if last - first + 1 > MAX_LISTED_MULTIPLES:
            return None
        values = [k * divisor for k in range(first, last + 1)]
    if integer:
        values = [v for v in values if v == v.to_integral_value()]
    return _texts(values, integer=integer)


def _texts(values: list[Decimal], *, integer: bool) -> Node:
    """Every text of exactly these values without exponent: `-0` for zero, trailing
    zeros after the point unless `integer` (the integer spelling has no point).
    Grouped by sign and integer digits, so the alternatives share their prefixes."""
    fractions: dict[str, list[str]] = {}
    for value in values:
        digits = format(abs(value).normalize(), "f")
        whole, _, fraction = digits.partition(".")
        signs = ["", "-"] if value == 0 else ["-" if value < 0 else ""]
        for sign in signs:
            fractions.setdefault(sign + whole, []).append(fraction)
    zeros = Repeat(chars("0"), 0, None)
    branches: list[Node] = []
    for whole, parts in fractions.items():
        tails: list[Node] = []
        for fraction in parts:
            if integer:
                tails.append(EMPTY)
            elif fraction:
                tails.append(seq(literal("." + fraction), zeros))
            else:
                tails.append(Repeat(seq(chars("."), Repeat(chars("0"), 1, None)), 0, 1))
        branches.append(seq(literal(whole), alt(*tails)))
    return alt(*branches) if branches else NOTHING
