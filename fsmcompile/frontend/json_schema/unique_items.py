"""`uniqueItems` over a finite item domain: arrays that hold no value twice.

Uniqueness is no regular property of arbitrary items, but when the items can only be
one of k values (an `enum`/`const`, booleans and null, integers in a short range), an
automaton can remember which values it has seen: 2^k subsets. The language is written
as the intersection of k languages "value v at most once" with the arrays the other
keywords allow (positions, counts, `contains`), which the automaton builder's product
turns into exactly that subset automaton without the IR listing the subsets. Each value
is checked against the item schemas with `jsonschema` (as `enum` values are) and
written in its `enum` spellings (`1` also as `1.0`), which are disjoint between values,
so no two items can be equal. Past `MAX_SUBSETS` reachable subsets, or over items of
any other shape, `uniqueItems` stays unenforceable and is reported.
"""

from __future__ import annotations

from math import comb
from typing import TYPE_CHECKING, Any

from fsmcompile.frontend.json_schema.combinators import collect, enum_values, type_atoms
from fsmcompile.frontend.json_schema.lowering_result import Lowered
from fsmcompile.frontend.json_schema.numbers import integer_bounds, numeric_bounds
from fsmcompile.frontend.json_schema.values import atom_of, json_equal, value_ir
from fsmcompile.ir.nodes import And, Node, Repeat, alt, seq

if TYPE_CHECKING:
    from fsmcompile.frontend.json_schema.combinators import Conjunction
    from fsmcompile.frontend.json_schema.lower import Lowerer
    from fsmcompile.frontend.json_schema.refs import Location

MAX_SUBSETS = 1024
"""The most sets of already-used values an array may reach (10 values, or more values
under a small `maxItems`): each is a copy of the item automaton's states."""


def _candidates(items: Conjunction) -> list[Any] | None:
    """The values an item could be, before checking them; None when not finite."""
    values = enum_values(items)
    if values is not None:
        return values
    atoms = type_atoms(items)
    if atoms - {"null", "boolean", "integer"}:
        return None
    candidates: list[Any] = [v for v in (None, True, False) if atom_of(v) in atoms]
    if "integer" in atoms:
        lo, hi = integer_bounds(*numeric_bounds(items))
        if lo is None or hi is None or hi - lo >= MAX_SUBSETS:
            return None
        candidates.extend(range(lo, hi + 1))
    return candidates


def item_values(lw: Lowerer, item_locs: list[Location]) -> list[Any] | None:
    """Every distinct value valid against all of `item_locs`, or None when the item
    language is not such a finite set."""
    items = collect(lw, item_locs, option=True)
    if items.false:
        return []
    if items.groups:
        return None
    candidates = _candidates(items)
    if candidates is None:
        return None
    atoms = type_atoms(items)
    kept: list[Any] = []
    for value in candidates:
        if atom_of(value) not in atoms or any(json_equal(value, k) for k in kept):
            continue
        if all(lw.checker.is_valid(value, p) for p in items.parts) and all(
            lw.checker.is_valid(value, n, negate=True) for n in items.negations
        ):
            kept.append(value)
    return kept


def _subsets(k: int, max_items: int | None) -> int:
    top = k if max_items is None else min(k, max_items)
    return sum(comb(k, i) for i in range(top + 1))


def item_domain(lw: Lowerer, positions: list[list[Location]]) -> list[Any] | None:
    """Every distinct value some position's item schemas allow (`positions`: the
    schemas of each prefix position, then of the rest), or None when one is not finite."""
    domain: list[Any] = []
    for locs in positions:
        values = item_values(lw, locs) if locs else None
        if values is None:
            return None
        domain.extend(v for v in values if not any(json_equal(v, d) for d in domain))
    return domain


def unique_arrays(
    lw: Lowerer, plain: Lowered, domain: list[Any], max_items: int | None
) -> Lowered | None:
    """`plain` (the arrays without `uniqueItems`) holding no value of `domain` twice, or
    None past `MAX_SUBSETS` subsets or when `plain` refers to grammar rules."""
    if plain.unbounded or _subsets(len(domain), max_items) > MAX_SUBSETS:
        return None
    if plain.empty:
        return plain
    texts = [value_ir(v, lw.syntax) for v in domain]
    languages = [plain.node]
    for i, text in enumerate(texts):
        others = alt(*(t for j, t in enumerate(texts) if j != i))
        languages.append(alt(lw.syntax.array_of(others), _once(lw, text, others)))
    return Lowered(And(tuple(languages)), plain.depth)


def _once(lw: Lowerer, text: Node, others: Node) -> Node:
    """Arrays of `others` items with `text` exactly once among them."""
    comma = lw.syntax.comma
    before = Repeat(seq(others, comma), 0, None)
    after = Repeat(seq(comma, others), 0, None)
    return lw.syntax.container("[", "]", seq(before, text, after), may_be_empty=False)
