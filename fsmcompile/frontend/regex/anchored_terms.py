"""Parsed regex pieces keyed by the anchors their paths crossed, and lookaheads applied to
the rest of the pattern: the anchor and lookahead algebra of the regex parser.

A term's language is split by (start anchor kind, end anchor kind) so that search mode
can pad each part only where its anchors allow (`BEFORE`, `AFTER`), and a sequence
joins its items' parts path by path, keeping the stronger anchor.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fsmcompile.ir.nodes import EMPTY, And, CharSet, Diff, Node, alt, repeat, seq

# Anchor kinds, ordered by strength: combining two on one path keeps the stronger.
NO_ANCHOR = 0
LINE = 1  # (?m)^ / (?m)$: at a line boundary
DOLLAR = 2  # Python's $ without (?m): at the end or before a final "\n"
TEXT = 3  # \A, \Z, ECMA ^ and $: at the very start / end
AnchorKey = tuple[int, int]  # (start anchor kind, end anchor kind)

_ANYTHING: Node = repeat(CharSet(((0, 0x10FFFF),)), 0, None)
_NEWLINE: Node = CharSet(((0x0A, 0x0A),))
BEFORE = {NO_ANCHOR: _ANYTHING, LINE: alt(EMPTY, seq(_ANYTHING, _NEWLINE)), TEXT: EMPTY}
"""What search mode lets stand before a match, by the kind of its start anchor."""
AFTER = {
    NO_ANCHOR: _ANYTHING,
    LINE: alt(EMPTY, seq(_NEWLINE, _ANYTHING)),
    DOLLAR: alt(EMPTY, _NEWLINE),
    TEXT: EMPTY,
}
"""What may follow a match (in search mode, or a lookahead's body anywhere), by the kind
of its end anchor."""


@dataclass(slots=True)
class Term:
    """A parsed piece: its language split by the anchors its paths crossed."""

    parts: dict[AnchorKey, Node]
    start_pos: int | None = None  # where its first ^ / \A is, if any
    end_pos: int | None = None  # where its first $ / \Z is, if any
    empty_only: bool = False  # matches only "" (anchors, empty groups)
    anchor: bool = False  # a bare anchor: nothing to repeat
    quantified: bool = False
    # A lookahead itself: the language the rest of the input must (True) or must not
    # (False) be in, and where the lookahead starts.
    lookahead: tuple[Node, bool, int] | None = None
    # A group holding a lookahead: its readings as alternative item lists, unjoined, for
    # the enclosing sequence to take in (the lookahead needs the rest of the pattern).
    spliced: list[list[Term]] | None = None


def plain_term(node: Node) -> Term:
    return Term({(NO_ANCHOR, NO_ANCHOR): node})


def joined_terms(items: list[Term]) -> Term:
    """Lookahead-free items read one after the other, their anchor kinds combined per path."""
    if not items:
        return Term({(NO_ANCHOR, NO_ANCHOR): EMPTY}, empty_only=True)
    if len(items) == 1:
        return replace(items[0], anchor=False, quantified=False)
    start_pos = next((t.start_pos for t in items if t.start_pos is not None), None)
    end_pos = next((t.end_pos for t in items if t.end_pos is not None), None)
    empty_only = all(t.empty_only for t in items)
    plain = (NO_ANCHOR, NO_ANCHOR)
    if all(len(t.parts) == 1 and plain in t.parts for t in items):
        return Term({plain: seq(*(t.parts[plain] for t in items))}, empty_only=empty_only)
    paths: dict[AnchorKey, list[list[Node]]] = {plain: [[]]}
    for item in items:
        grown: dict[AnchorKey, list[list[Node]]] = {}
        for (s1, e1), prefixes in paths.items():
            for (s2, e2), node in item.parts.items():
                key = (max(s1, s2), max(e1, e2))
                grown.setdefault(key, []).extend(p + [node] for p in prefixes)
        paths = grown
    parts = {key: alt(*(seq(*p) for p in ps)) for key, ps in paths.items()}
    return Term(parts, start_pos=start_pos, end_pos=end_pos, empty_only=empty_only)


def merged_parts(terms: list[Term]) -> dict[AnchorKey, Node]:
    """The parts of several alternatives, one alternation per anchor key."""
    merged: dict[AnchorKey, list[Node]] = {}
    for term in terms:
        for key, node in term.parts.items():
            merged.setdefault(key, []).append(node)
    return {key: alt(*nodes) for key, nodes in merged.items()}


def lookahead_pos(readings: list[list[Term]]) -> int:
    """Where the first lookahead of some reading starts."""
    return next(i.lookahead[2] for items in readings for i in items if i.lookahead is not None)


def readings_of(term: Term) -> list[list[Term]]:
    """The alternative item lists a term stands for (itself, unless it holds a lookahead)."""
    return term.spliced if term.spliced is not None else [[term]]


def with_lookaheads_applied(items: list[Term], search: bool) -> list[Term]:
    """The top-level sequence `items` with each lookahead applied to everything after it.

    From the last lookahead back: the items after it, joined and (in search mode) padded
    as the match will be, are intersected with what it tests, or less it. Padded, that
    part reaches the input's end, so it is keyed as ending there."""
    items = list(items)
    for i in reversed(range(len(items))):
        lookahead = items[i].lookahead
        if lookahead is None:
            continue
        tested, positive, _ = lookahead
        rest = joined_terms(items[i + 1 :])
        parts: dict[AnchorKey, list[Node]] = {}
        for (start, end), node in rest.parts.items():
            padded = seq(node, AFTER[end]) if search else node
            tested_rest = And((padded, tested)) if positive else Diff((padded, tested))
            parts.setdefault((start, TEXT) if search else (start, end), []).append(tested_rest)
        items[i:] = [
            Term(
                {key: alt(*nodes) for key, nodes in parts.items()},
                start_pos=rest.start_pos,
                end_pos=rest.end_pos,
                empty_only=rest.empty_only,
            )
        ]
    return items
