"""Object members in any order (`JsonOptions.any_order_max`), exactly.

Schema order lets an object's automaton follow its members in one pass. In any order it
must remember which listed keys it has seen: 2**n sets, each with its own copy of the
value automata that may follow it. That is why the option names a small maximum and
`MAX_ANY_ORDER` caps it. Extra keys may come between the listed ones. Two constructions:

* `any_order_checked` (values of bounded depth, a DFA): any sequence of the members,
  intersected with one `key_checker` per listed key ("at most once", "exactly once"
  when required) and the member counter; the automaton builder's product makes the
  subset automaton, and the IR stays linear in the keys.
* `any_order_members` (values that nest without bound, a grammar, where the checkers'
  depth skipping fails): the IR lists each set of seen keys as a node shared by every
  order that reaches it, counting members on the way; the grammar writer keeps the
  sharing, so it grows with the 2**n sets, not with the n! orders. (Built as one
  automaton, each order would copy its values: 8 keys did not fit 200,000 states.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsmcompile.ir.nodes import EMPTY, NOTHING, And, Node, Repeat, alt, seq

if TYPE_CHECKING:
    from fsmcompile.frontend.json_schema.syntax import JsonSyntax

MAX_ANY_ORDER = 8
"""The most listed properties `any_order_max` may name: 256 sets of seen keys, each with
its own copy of the values that may follow it."""


def any_order_members(
    members: list[tuple[Node, bool]],
    extra: Node | None,
    comma: Node,
    low: int,
    high: int | None,
) -> tuple[Node, bool]:
    """The members of an object, listed ones in any order and each at most once, the
    required ones all present, extra ones anywhere, `low..high` in all.

    Args:
        members: (member text, required) per listed property.
        extra: one extra member (any key not listed), or None when none is allowed.
        comma: the separator between members.

    Returns:
        (the member list without the brackets and never empty, whether `{}` is valid).
    """
    required = frozenset(i for i, (_, needed) in enumerate(members) if needed)
    cap = low if high is None else high  # without an upper bound, counts >= low act alike
    memo: dict[tuple[frozenset[int], int], Node] = {}

    def after(seen: frozenset[int], count: int) -> Node:
        """What may follow once the keys `seen` and `count` members (capped) are in."""
        key = (seen, count)
        found = memo.get(key)
        if found is not None:
            return found
        room = high is None or count < high
        parts: list[Node] = []
        if required <= seen and count >= low:
            parts.append(EMPTY)
        if room:
            following = min(count + 1, cap)
            for i, (member, _) in enumerate(members):
                if i not in seen:
                    parts.append(seq(comma, member, after(seen | {i}, following)))
        saturated = high is None and count == cap
        if extra is not None and room and not saturated:
            parts.append(seq(comma, extra, after(seen, count + 1)))
        node = alt(*parts) if parts else NOTHING
        if extra is not None and saturated:
            # Past every bound an extra member changes nothing: a loop, not a chain.
            node = seq(Repeat(seq(comma, extra), 0, None), node)
        memo[key] = node
        return node

    firsts: list[Node] = []
    if high is None or high > 0:
        start = min(1, cap)
        firsts = [seq(m, after(frozenset({i}), start)) for i, (m, _) in enumerate(members)]
        if extra is not None:
            firsts.append(seq(extra, after(frozenset(), start)))
    body = alt(*firsts) if firsts else NOTHING
    return body, not required and low == 0


def any_order_checked(
    syntax: JsonSyntax,
    members: list[tuple[Node, Node, bool]],
    extra: Node | None,
    low: int,
    high: int | None,
    depth: int,
) -> Node:
    """The whole object (brackets included): listed members in any order, each at most
    once, the required ones present, extra ones anywhere, `low..high` in all.

    Args:
        members: (key literal, member text, required) per listed property.
        depth: the most containers a value nests, for the checkers' skipping.
    """
    items = [member for _, member, _ in members]
    if extra is not None:
        items.append(extra)
    loose = syntax.container("{", "}", syntax.separated(alt(*items), 1, None), may_be_empty=True)
    checks = [syntax.key_checker(key, required, depth) for key, _, required in members]
    if low > 0 or high is not None:
        checks.append(syntax.member_checker(low, high, depth))
    return And((loose, *checks))
