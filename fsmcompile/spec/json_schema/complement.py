"""Complements of simple decoded-string languages, for exact `patternProperties`.

The IR has intersection but no complement, yet "a key that matches no pattern" is a
complement. Most real patterns have a shape whose complement is easy to write down:
`.*` (matches everything), `^[a-z_]+$` (one class, counted), `^x-` (a prefix), literal
names. `complement` handles those and returns None otherwise; callers then fall back to
a sound over-approximation.
"""

from __future__ import annotations

from fsmcompile.automaton.ir import (
    EMPTY,
    NOTHING,
    Alt,
    CharSet,
    Concat,
    Node,
    Repeat,
    alt,
    negate,
    seq,
)
from fsmcompile.spec.json_schema.strings import ANY_CHAR

_ANY_STAR = Repeat(ANY_CHAR, 0, None)


def _is_any(node: Node) -> bool:
    return isinstance(node, CharSet) and node.ranges == ANY_CHAR.ranges


def _is_any_star(node: Node) -> bool:
    return isinstance(node, Repeat) and node.min == 0 and node.max is None and _is_any(node.item)


def _nullable(node: Node) -> bool:
    if isinstance(node, Repeat):
        return node.min == 0 or _nullable(node.item)
    if isinstance(node, Concat):
        return all(_nullable(i) for i in node.items)
    if isinstance(node, Alt):
        return any(_nullable(i) for i in node.items)
    return False


def _universal(node: Node) -> bool:
    """Sufficient test for "matches every string": nullable items around an `ANY*`."""
    if _is_any_star(node):
        return True
    if isinstance(node, Concat):
        return any(_is_any_star(i) for i in node.items) and all(_nullable(i) for i in node.items)
    if isinstance(node, Alt):
        return any(_universal(i) for i in node.items)
    return False


def _sets(node: Node) -> list[CharSet] | None:
    """The node as a fixed sequence of character sets, if it is one."""
    if isinstance(node, CharSet):
        return [node]
    if isinstance(node, Concat) and all(isinstance(i, CharSet) for i in node.items):
        return [i for i in node.items if isinstance(i, CharSet)]
    if isinstance(node, Repeat) and isinstance(node.item, CharSet) and node.min == node.max:
        return [node.item] * node.min
    return None


def _sequence_complement(sets: list[CharSet], open_end: bool) -> Node:
    """Strings not matching `sets` exactly (or, with `open_end`, not starting with them)."""
    branches: list[Node] = []
    for i, charset in enumerate(sets):
        prefix = seq(*sets[:i]) if i else EMPTY
        branches.append(prefix)  # stops before position i
        outside = negate(charset)
        if outside.ranges:
            branches.append(seq(prefix, outside, _ANY_STAR))
    if not open_end:
        branches.append(seq(*sets, ANY_CHAR, _ANY_STAR))
    return alt(*branches) if branches else NOTHING


def _absorb(node: Node) -> Node:
    """Drop nullable items next to an `ANY*` in a concatenation (`ANY* X*` == `ANY*`)."""
    if not isinstance(node, Concat):
        return node
    items = list(node.items)
    changed = True
    while changed:
        changed = False
        for i, item in enumerate(items):
            neighbours = items[i - 1 : i] + items[i + 1 : i + 2]
            if not _is_any_star(item) and _nullable(item) and any(map(_is_any_star, neighbours)):
                del items[i]
                changed = True
                break
            if _is_any_star(item) and i + 1 < len(items) and _is_any_star(items[i + 1]):
                del items[i]
                changed = True
                break
    return seq(*items)


def complement(node: Node) -> Node | None:
    """Decoded strings NOT in `node`'s language, or None when the shape is not handled."""
    node = _absorb(node)
    if _universal(node):
        return NOTHING
    if (
        isinstance(node, Concat)
        and len(node.items) == 3
        and _is_any_star(node.items[0])
        and _is_any_star(node.items[2])
        and isinstance(node.items[1], CharSet)
    ):
        return Repeat(negate(node.items[1]), 0, None)  # "contains one of C"
    if isinstance(node, Repeat) and isinstance(node.item, CharSet):
        charset = node.item
        branches: list[Node] = []
        outside = negate(charset)
        if outside.ranges:
            branches.append(seq(_ANY_STAR, outside, _ANY_STAR))
        if node.min > 0:
            branches.append(Repeat(charset, 0, node.min - 1))
        if node.max is not None:
            branches.append(Repeat(charset, node.max + 1, None))
        return alt(*branches) if branches else NOTHING
    if isinstance(node, Concat) and node.items and _is_any_star(node.items[-1]):
        sets = _sets(seq(*node.items[:-1]))
        return None if sets is None else _sequence_complement(sets, open_end=True)
    sets = _sets(node)
    if sets is not None:
        return _sequence_complement(sets, open_end=False)
    return None
