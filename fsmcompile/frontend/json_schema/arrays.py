"""Arrays: positional `prefixItems` (or draft-07 array `items`), the rest, and counts.

Item schemas merge per position across the conjunction: position i takes every part's
i-th prefix schema, or that part's rest schema when its prefix is shorter. Counts stay
`Repeat` bounds, so `maxItems: 50` over a complex item is one node, not fifty copies;
the automaton builder's state budget decides whether it is affordable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsmcompile.frontend.json_schema.keywords import UNSUPPORTED
from fsmcompile.frontend.json_schema.lowering_result import Lowered
from fsmcompile.frontend.json_schema.refs import Location, is_legacy
from fsmcompile.frontend.json_schema.unique_items import item_domain, unique_arrays
from fsmcompile.ir.nodes import EMPTY, NOTHING, And, Node, Repeat, alt, optional, seq

if TYPE_CHECKING:
    from fsmcompile.frontend.json_schema.combinators import Conjunction
    from fsmcompile.frontend.json_schema.lower import Lowerer

ARRAY_KEYWORDS = frozenset(
    {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "contains"}
)


def _split(part: Location) -> tuple[list[Location], Location | None]:
    """(positional item schemas, schema of the items after them; None: any)."""
    schema = part.schema
    if isinstance(schema.get("prefixItems"), list) and not is_legacy(part.draft):
        prefix = [part.child("prefixItems", i) for i in range(len(schema["prefixItems"]))]
        return prefix, part.child("items") if "items" in schema else None
    if isinstance(schema.get("items"), list):
        prefix = [part.child("items", i) for i in range(len(schema["items"]))]
        rest = part.child("additionalItems") if "additionalItems" in schema else None
        return prefix, rest
    return [], part.child("items") if "items" in schema else None


def lower_array(lw: Lowerer, conj: Conjunction) -> Lowered:
    """Arrays satisfying the array keywords of every part of `conj`; `uniqueItems` where
    the items are drawn from a finite set of values (unique_items.py)."""
    plain = _lower_plain_array(lw, conj)
    unique = [p for p in conj.parts if p.schema.get("uniqueItems") is True]
    if not unique:
        return plain
    splits = [_split(p) for p in conj.parts if set(p.schema) & ARRAY_KEYWORDS]
    width = max((len(prefix) for prefix, _ in splits), default=0)
    positions = [
        [loc for loc in (p[i] if i < len(p) else r for p, r in splits) if loc is not None]
        for i in range(width)
    ]
    positions.append([r for _, r in splits if r is not None])
    domain = item_domain(lw, positions)
    maxima = [int(v) for _, v in conj.keyword("maxItems")]
    lowered = None
    if domain is not None:
        lowered = unique_arrays(lw, plain, domain, min(maxima) if maxima else None)
    if lowered is not None:
        return lowered
    for part in unique:
        lw.report(part, "uniqueItems", UNSUPPORTED["uniqueItems"][1])
    return plain


def _lower_plain_array(lw: Lowerer, conj: Conjunction) -> Lowered:
    """Arrays satisfying every array keyword but `uniqueItems`."""
    syntax = lw.syntax
    sources = [p for p in conj.parts if set(p.schema) & ARRAY_KEYWORDS]
    if not sources:
        return Lowered(syntax.array_of(lw.any_value().node), 1, unbounded=True)
    splits = [_split(p) for p in sources]
    min_items = max((int(v) for _, v in conj.keyword("minItems")), default=0)
    for part, contains in conj.keyword("contains"):
        if contains is True or contains == {}:  # any item counts: a length bound
            min_items = max(min_items, int(part.schema.get("minContains", 1)))
    maxima = [int(v) for _, v in conj.keyword("maxItems")]
    max_items = min(maxima) if maxima else None

    elements: list[Lowered] = []
    for i in range(max((len(prefix) for prefix, _ in splits), default=0)):
        if max_items is not None and i >= max_items:
            break
        locs = [prefix[i] if i < len(prefix) else rest for prefix, rest in splits]
        element = lw.lower_all([loc for loc in locs if loc is not None])
        if element.empty:
            max_items = i
            break
        elements.append(element)
    rest = lw.lower_all([r for _, r in splits if r is not None])
    if rest.empty:
        max_items = len(elements) if max_items is None else min(max_items, len(elements))
    parts = [*elements, rest]
    unbounded = any(p.unbounded for p in parts)
    if max_items is not None and min_items > max_items:
        return Lowered(NOTHING, 0, unbounded)
    counted = [(p, c) for p, c in conj.keyword("contains") if not (c is True or c == {})]
    if counted:
        if elements or len(counted) > 1:
            for part, _ in counted:
                lw.report(part, "contains", "contains next to prefixItems or another contains")
        else:
            rest_locs = [r for _, r in splits if r is not None]
            return _contains(lw, counted[0][0], rest_locs, rest, min_items, max_items)
    depth = 1 + max((p.depth for p in parts if not p.empty), default=0)
    if not elements:
        if rest.empty:
            return Lowered(syntax.array_of(NOTHING, 0, 0), 1, unbounded)
        return Lowered(syntax.array_of(rest.node, min_items, max_items), depth, unbounded)
    if max_items == 0:
        return Lowered(syntax.array_of(NOTHING, 0, 0), 1, unbounded)

    def tail(i: int) -> Node:
        """What may follow once `i` items are written (1 <= i <= len(elements))."""
        if max_items is not None and i >= max_items:
            return EMPTY
        if i == len(elements):
            if rest.empty:
                return EMPTY
            low = max(min_items - i, 0)
            high = None if max_items is None else max_items - i
            return Repeat(seq(syntax.comma, rest.node), low, high)
        node = seq(syntax.comma, elements[i].node, tail(i + 1))
        return optional(node) if i >= min_items else node

    content = seq(elements[0].node, tail(1))
    return Lowered(
        syntax.container("[", "]", content, may_be_empty=min_items == 0), depth, unbounded
    )


def _contains(
    lw: Lowerer,
    part: Location,
    rest_locs: list[Location],
    rest: Lowered,
    min_items: int,
    max_items: int | None,
) -> Lowered:
    """Arrays with `minContains..maxContains` items matching `contains` (default 1..)."""
    from fsmcompile.frontend.json_schema.combinators import negation_group

    syntax = lw.syntax
    schema = part.schema
    low = int(schema.get("minContains", 1))
    high = None if schema.get("maxContains") is None else int(schema["maxContains"])
    hit = lw.lower_all([*rest_locs, part.child("contains")])
    other = rest
    if high is not None:
        group = negation_group(part.child("contains"), part, "contains-not")
        if group is None:
            lw.report(part, "maxContains", "the items not matching contains cannot be isolated")
            high = None
        else:
            misses = [lw.lower_all([*rest_locs, *option]) for option in group.options]
            live = [m for m in misses if not m.empty]
            other = Lowered(
                alt(*(m.node for m in live)),
                max((m.depth for m in live), default=0),
                any(m.unbounded for m in live),
            )
    if high is not None and low > high:
        return Lowered(NOTHING)
    comma = syntax.comma
    filler = Repeat(seq(comma, other.node), 0, None) if not other.empty else EMPTY

    def runs(at_least: int, at_most: int | None) -> Node:
        return seq(filler, Repeat(seq(comma, hit.node, filler), at_least, at_most))

    branches: list[Node] = []
    if not other.empty:
        branches.append(seq(other.node, runs(low, high)))
    if not hit.empty and (high is None or high > 0):
        branches.append(seq(hit.node, runs(max(low - 1, 0), None if high is None else high - 1)))
    if not branches:
        return Lowered(syntax.array_of(NOTHING, 0, 0) if low == 0 else NOTHING)
    node = syntax.container("[", "]", alt(*branches), may_be_empty=low == 0)
    if min_items > 0 or max_items is not None:
        node = And((node, syntax.array_of(rest.node, min_items, max_items)))
    depth = 1 + max(hit.depth, other.depth, rest.depth)
    return Lowered(node, depth, hit.unbounded or other.unbounded or rest.unbounded)
