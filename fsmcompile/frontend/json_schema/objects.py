"""Objects: properties in schema order, optional members, extra keys, counts.

Listed properties appear in schema order (the order of first mention across the
conjunction), or in any order where `JsonOptions.any_order_max` allows (any_order.py);
each optional one may be skipped; additional properties (extra keys
allowed by `additionalProperties`/`patternProperties`) follow them in any order.
Separators are made *optional* and the result is intersected with `member_checker`,
which accepts exactly the comma placements of a JSON object and counts members for
`minProperties`/`maxProperties`; this keeps the IR linear in the properties (see
syntax.py). When the first listed property is required, the first member is known and
the plain chain is exact on its own.

Extra keys are split by the set of `patternProperties` they match (the IR says "matches
P but not Q" through pattern complements), so each gets exactly the schemas of its
patterns, or `additionalProperties` of the parts it matches no pattern of. Past
`_MAX_OVERLAPPING` patterns overlapping one, the split is replaced by a sound
approximation (documented); duplicate extra keys are not prevented (a relaxation: see
the docs).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING

from fsmcompile.frontend.json_schema.any_order import any_order_checked, any_order_members
from fsmcompile.frontend.json_schema.combinators import (
    collect,
    enum_values,
    required_keys,
    type_atoms,
    value_locations,
)
from fsmcompile.frontend.json_schema.lowering_result import NOTHING_LOWERED, Lowered
from fsmcompile.frontend.json_schema.refs import Location
from fsmcompile.frontend.json_schema.strings import (
    ANY_STRING,
    QUOTE,
    content_except,
    literal_content,
    literal_string,
    string_content,
)
from fsmcompile.frontend.json_schema.unsupported import unsupported_in
from fsmcompile.ir.dag_walk import Call, run
from fsmcompile.ir.nodes import EMPTY, NOTHING, Alt, And, Node, Repeat, alt, optional, seq

if TYPE_CHECKING:
    from fsmcompile.frontend.json_schema.combinators import Conjunction
    from fsmcompile.frontend.json_schema.lower import Lowerer

OBJECT_KEYWORDS = frozenset(
    {
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
    }
)


_MAX_OVERLAPPING = 3
"""Most patterns that may match a key together with another, per pattern, for which the
extra keys are split exactly by the patterns they match (one alternative per subset)."""

EXPANSION_LIMIT = 24
"""Most member copies the per-first-member expansion may make before the object is
built as an intersection with the member checker instead (cheaper automata for small
objects, linear IR for large ones)."""


@dataclass(frozen=True, slots=True)
class _Member:
    key: Node
    node: Node
    value: Lowered
    required: bool


def lower_object(lw: Lowerer, conj: Conjunction) -> Lowered:
    """Objects satisfying the object keywords of every part of `conj`."""
    syntax = lw.syntax
    sources = [p for p in conj.parts if set(p.schema) & OBJECT_KEYWORDS]
    if not sources and not conj.forbidden_keys:
        inner = lw.any_value().node
        return Lowered(syntax.object_of(syntax.member(ANY_STRING, inner)), 1, unbounded=True)
    order: dict[str, None] = {}
    for part in sources:
        order.update(dict.fromkeys(part.schema.get("properties", {})))
    required = set(required_keys(conj))
    order.update(dict.fromkeys(k for k in required_keys(conj) if k not in order))
    min_count = max((int(v) for _, v in conj.keyword("minProperties")), default=0)
    maxima = [int(v) for _, v in conj.keyword("maxProperties")]
    max_count = min(maxima) if maxima else None
    names = [p.child("propertyNames") for p in sources if "propertyNames" in p.schema]

    every = lw.options.listed_escapes
    members: list[_Member] = []
    for key in order:
        allowed = key not in conj.forbidden_keys and all(lw.checker.is_valid(key, n) for n in names)
        value = lw.lower_all(value_locations(sources, key)) if allowed else NOTHING_LOWERED
        if value.empty:
            if key in required:
                return Lowered(NOTHING, 0, value.unbounded)
            continue
        spelled = literal_string(key, every_spelling=every)
        members.append(_Member(spelled, syntax.member(spelled, value.node), value, key in required))

    extras = _extras(lw, sources, set(order) | conj.forbidden_keys, names)
    return _assemble(lw, members, extras, min_count, max_count)


def _extras(
    lw: Lowerer, sources: list[Location], listed: set[str], names: list[Location]
) -> list[tuple[Node, Lowered]]:
    """(key content, value) alternatives for keys not listed in `properties`.

    A key matching pattern i must satisfy S_i and every S_j whose pattern also matches
    it; a key matching none must satisfy `additionalProperties`. Both are exact through
    the patterns' complements (`Lowerer.pattern_complement`, narrowly spelled keys).
    """
    base = content_except(listed)
    name_contents = [c for c in (_names_content(lw, n) for n in names) if c is not None]
    patterns = [
        (part, pattern, part.child("patternProperties", pattern))
        for part in sources
        for pattern in part.schema.get("patternProperties", {})
    ]
    additional = [
        (p, p.child("additionalProperties")) for p in sources if "additionalProperties" in p.schema
    ]
    contents = [lw.pattern_content(p, "patternProperties", pattern) for p, pattern, _ in patterns]
    negated = [lw.pattern_complement(pattern) for _, pattern, _ in patterns]
    out: list[tuple[Node, Lowered]] = []
    seen: set[frozenset[int]] = set()
    for i, (part, pattern, loc) in enumerate(patterns):
        overlapping = [
            j
            for j, (_, other, _) in enumerate(patterns)
            if j != i and not lw.patterns_disjoint(pattern, other)
        ]
        if len(overlapping) > _MAX_OVERLAPPING or any(negated[j] is None for j in overlapping):
            # Sound, not exact: every schema whose pattern might match, and every other
            # part's additionalProperties, though a key that matches one of that part's
            # patterns is exempt from it.
            others_addl = [a for p, a in additional if p is not part]
            locs = [loc, *(patterns[j][2] for j in overlapping), *others_addl]
            key = _intersect([base, *_present([contents[i]]), *name_contents])
            out.append((key, lw.lower_all(locs)))
            continue
        # Exact: one alternative per set of overlapping patterns the key also matches.
        for size in range(len(overlapping), -1, -1):
            for matched in combinations(overlapping, size):
                signature = frozenset((i, *matched))
                if signature in seen:
                    continue
                seen.add(signature)
                unmatched = [negated[j] for j in overlapping if j not in matched]
                key = _intersect(
                    [
                        base,
                        *_present([contents[j] for j in sorted(signature)]),
                        *name_contents,
                        *_present(unmatched),
                    ]
                )
                owners = {id(patterns[j][0]) for j in signature}
                locs = [patterns[j][2] for j in sorted(signature)]
                locs += [a for p, a in additional if id(p) not in owners]
                out.append((key, lw.lower_all(locs)))
    if all(n is not None for n in negated):
        key = _intersect([base, *(n for n in negated if n is not None), *name_contents])
        generic = [a for _, a in additional]
    else:
        key = _intersect([base, *name_contents])
        generic = [loc for _, _, loc in patterns] + [a for _, a in additional]
    out.append((key, lw.lower_all(generic)))
    return [(key, value) for key, value in out if not value.empty and key is not NOTHING]


def _present(nodes: list[Node | None]) -> list[Node]:
    return [n for n in nodes if n is not None]


def _intersect(items: list[Node]) -> Node:
    if any(item is NOTHING for item in items):
        return NOTHING
    return items[0] if len(items) == 1 else And(tuple(items))


def _names_content(lw: Lowerer, loc: Location) -> Node | None:
    """Escaped key content allowed by `propertyNames` (None: no restriction)."""
    conj = collect(lw, [loc])
    if conj.false or "string" not in type_atoms(conj):
        return NOTHING
    if conj.groups or conj.negations:
        lw.report(loc, "propertyNames", "only string keywords and enum are enforced on names")
        return None
    for part in conj.parts:
        for keyword, reason in unsupported_in(part.schema, frozenset({"string"})):
            lw.report(part, keyword, reason)
    values = enum_values(conj)
    if values is not None:
        kept = [v for v in values if isinstance(v, str) and lw.checker.is_valid(v, loc)]
        every = lw.options.listed_escapes
        return alt(*(literal_content(v, every_spelling=every) for v in kept)) if kept else NOTHING
    return string_content(lw, conj)


def _assemble(
    lw: Lowerer,
    members: list[_Member],
    extras: list[tuple[Node, Lowered]],
    min_count: int,
    max_count: int | None,
) -> Lowered:
    syntax = lw.syntax
    values = [m.value for m in members] + [v for _, v in extras]
    depth = max((v.depth for v in values), default=0)
    unbounded = any(v.unbounded for v in values)
    extra: Node | None = None
    if extras:
        extra = alt(*(syntax.member(seq(QUOTE, key, QUOTE), value.node) for key, value in extras))
    counted = min_count > 0 or max_count is not None
    n_required = sum(m.required for m in members)
    if max_count is not None and (min_count > max_count or n_required > max_count):
        return Lowered(NOTHING, 0, unbounded)
    if not members and extra is None:
        if min_count > 0:
            return Lowered(NOTHING, 0, unbounded)
        return Lowered(syntax.container("{", "}", seq(), may_be_empty=True), 1, unbounded)
    comma = syntax.comma
    if 2 <= len(members) <= lw.options.any_order_max and not unbounded:
        keyed = [(m.key, m.node, m.required) for m in members]
        node = any_order_checked(syntax, keyed, extra, min_count, max_count, depth)
        return Lowered(node, depth + 1, unbounded)
    if 2 <= len(members) <= lw.options.any_order_max:
        listed = [(m.node, m.required) for m in members]
        body, may_be_empty = any_order_members(listed, extra, comma, min_count, max_count)
        if body is NOTHING and not may_be_empty:
            return Lowered(NOTHING, 0, unbounded)
        node = syntax.container("{", "}", body, may_be_empty=may_be_empty)
        return Lowered(node, depth + 1, unbounded)
    if extra is None and all(m.required for m in members):
        if counted and not (min_count <= len(members) <= (max_count or len(members))):
            return Lowered(NOTHING, 0, unbounded)
        body = _chain(members, comma, first_separator=None)
        return Lowered(syntax.container("{", "}", body, may_be_empty=False), depth + 1, unbounded)
    if unbounded:
        # The member checker skips values by bracket depth, which a value that nests
        # without bound defeats: count members in the chain itself (a DAG, so linear).
        body = _counted(members, extra, comma, min_count, max_count)
        node = syntax.container("{", "}", body, may_be_empty=False)
        return Lowered(node, depth + 1, unbounded)
    if not counted:
        expanded = _expanded(members, extra, comma)
        if expanded is not None:
            node = syntax.container("{", "}", expanded, may_be_empty=n_required == 0)
            return Lowered(node, depth + 1, unbounded)
    separator = optional(comma)
    body = _chain(members, separator, first_separator=separator)
    if extra is not None:
        body = seq(body, Repeat(seq(separator, extra), 0, None))
    loose = syntax.container("{", "}", body, may_be_empty=n_required == 0)
    checker = syntax.member_checker(min_count, max_count, depth)
    return Lowered(And((loose, checker)), depth + 1, unbounded)


def _counted(
    members: list[_Member], extra: Node | None, comma: Node, low: int, high: int | None
) -> Node:
    """The member list with `low..high` members, counted as it goes: one node per
    (position, members so far), shared, so the IR stays linear in the properties."""
    cap = low if high is None else high  # without an upper bound, counts >= low act alike
    memo: dict[tuple[int, int, bool], Node] = {}

    def rest(k: int, count: int, first: bool) -> Call[Node]:
        # A `run` call: one nested call per member, deeper than Python's recursion limit
        # for objects of a thousand members.
        key = (k, count, first)
        found = memo.get(key)
        if found is not None:
            return found
        separator = EMPTY if first else comma
        if k == len(members):
            need = max(low - count, 0)
            room = None if high is None else high - count
            if extra is None or room == 0:
                out = EMPTY if need == 0 else NOTHING
            elif first:
                more = None if room is None else room - 1
                some = seq(extra, Repeat(seq(comma, extra), max(need - 1, 0), more))
                out = alt(EMPTY, some) if need == 0 else some
            else:
                out = Repeat(seq(comma, extra), need, room)
        else:
            member = members[k]
            take = (
                NOTHING
                if high is not None and count >= high
                else seq(separator, member.node, (yield rest(k + 1, min(count + 1, cap), False)))
            )
            # Alt, not alt(): flattening would list every later member at each member,
            # quadratic in the properties (and in the grammar lark analyses).
            out = take if member.required else Alt((take, (yield rest(k + 1, count, first))))
        memo[key] = out
        return out

    return run(rest(0, 0, True))


def _expanded(members: list[_Member], extra: Node | None, comma: Node) -> Node | None:
    """The member list with one alternative per possible first member (exact, no
    intersection), or None when that would copy the members too many times."""
    first_required = next((i for i, m in enumerate(members) if m.required), len(members))
    firsts = min(first_required + 1, len(members))
    if (firsts - 1) * len(members) > EXPANSION_LIMIT:
        return None
    branches = [seq(members[k].node, _chain(members[k + 1 :], comma, comma)) for k in range(firsts)]
    if first_required == len(members) and extra is not None:
        branches.append(extra)
    rest_extra = Repeat(seq(comma, extra), 0, None) if extra is not None else EMPTY
    return seq(alt(*branches), rest_extra)


def _chain(members: list[_Member], separator: Node, first_separator: Node | None) -> Node:
    """Members in order, each optional one skippable, `separator` before all but the
    first (and before the first too when `first_separator` is given)."""
    pieces: list[Node] = []
    for i, member in enumerate(members):
        sep = first_separator if i == 0 else separator
        piece = member.node if sep is None else seq(sep, member.node)
        pieces.append(piece if member.required else optional(piece))
    return seq(*pieces)
