"""The regular-expression tree every front end builds and the automaton builder consumes.

Regex, JSON Schema and Lark terminals all lower to these nodes instead of printing
regex strings: composing trees avoids giant pattern texts and lets equal sub-trees
share work. Characters are Unicode code points; the automaton builder turns them into
UTF-8 byte sequences. Nodes are immutable and hashable so builders can memoize them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from fsmcompile.budget import check_deadline

MAX_CODE_POINT = 0x10FFFF


@dataclass(frozen=True, slots=True)
class CharSet:
    """One character from a set of code points: sorted, merged, inclusive `ranges`.

    Surrogates (U+D800..U+DFFF) have no UTF-8 form; the builder drops them.
    """

    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class ByteSet:
    """One raw byte from sorted, merged, inclusive byte `ranges` (0..255).

    For byte-level languages only; text specs use CharSet so UTF-8 stays valid.
    """

    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Concat:
    """The items one after another; `Concat(())` is the empty string."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Alt:
    """Any one of the items; `Alt(())` matches nothing."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Repeat:
    """`item` from `min` to `max` times; `max=None` means unbounded."""

    item: Node
    min: int
    max: int | None


@dataclass(frozen=True, slots=True)
class CountedRepeat(Repeat):
    """A `Repeat` whose upper bound a grammar lexer may enforce with a counter.

    Counting needs `item` to be a prefix code (no spelling of it is a proper prefix of
    another, as one JSON string character), so every start of an item is one determinate
    byte of the text; where it is not, the lexer finds so and unrolls the bound. Every
    consumer that does not count reads it as the plain `Repeat` it is; a lexer terminal
    holding one (`counted_at`) is built unbounded, and the runtime counts item starts
    against `max` instead of holding `max` copies of the item.
    """


def counted_at(node: Node) -> tuple[int, CountedRepeat] | None:
    """Where the one `CountedRepeat` of `node` (a `Concat`, or the repeat alone: the items
    of a long array) is: the index of the item that is it, or that is an `And` holding it
    directly (a string under a `pattern` or `format` and a length bound, whose product
    would unroll the pattern once per character), and the repeat; None without exactly
    one."""
    if isinstance(node, CountedRepeat):
        return (0, node) if node.max is not None else None
    if not isinstance(node, Concat):
        return None
    found = [
        (i, part)
        for i, item in enumerate(node.items)
        for part in (item.items if isinstance(item, And) else (item,))
        if isinstance(part, CountedRepeat)
    ]
    if len(found) != 1 or found[0][1].max is None:
        return None
    return found[0]


def counted_item(node: Node) -> CountedRepeat | None:
    """The one `CountedRepeat` of `node` (see `counted_at`), if there is one."""
    at = counted_at(node)
    return None if at is None else at[1]


def uncounted(node: Node) -> Node:
    """`node` with its counted item's upper bound dropped (the language a counter cuts)."""
    if isinstance(node, CountedRepeat):
        return Repeat(node.item, node.min, None)
    assert isinstance(node, Concat)

    def drop(item: Node) -> Node:
        if isinstance(item, CountedRepeat):
            return Repeat(item.item, item.min, None)
        if isinstance(item, And):
            return And(tuple(drop(part) for part in item.items))
        return item

    return Concat(tuple(drop(item) for item in node.items))


@dataclass(frozen=True, slots=True)
class And:
    """Strings matched by every item (intersection, built as a product automaton)."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Diff:
    """Strings of `items[0]` that are not strings of `items[1]` (set difference, built as
    a product with the complement of the second). Both must be regular (no `Ref` below):
    the complement of a context-free language is not context-free."""

    items: tuple[Node, Node]


@dataclass(frozen=True, slots=True)
class Ref:
    """The language of rule `name` (a context-free reference).

    Only front ends that produce grammars use it (a recursive JSON Schema, any-JSON
    values); `fsmcompile.grammar.from_rules` turns rules holding refs into a grammar.
    The automaton builder refuses it: a byte DFA cannot follow a recursive reference.
    """

    name: str


Node = CharSet | ByteSet | Concat | Alt | Repeat | And | Diff | Ref

EMPTY: Node = Concat(())
"""Matches only the empty string."""
NOTHING: Node = Alt(())
"""Matches no string at all."""


def children(node: Node) -> tuple[Node, ...]:
    """The direct sub-trees of `node` (none for a leaf or a `Ref`): the one place that
    knows which node kinds hold others."""
    if isinstance(node, Repeat):
        return (node.item,)
    if isinstance(node, (Concat, Alt, And, Diff)):
        return node.items
    return ()


def nodes(root: Node) -> Iterator[Node]:
    """Every distinct node under `root` (by identity, so shared sub-trees once)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(children(node))


_DIGESTS: dict[int, tuple[Node, bytes]] = {}
"""Digests of nodes already hashed, by identity (each entry holds its node, so the id
is not reused while it is here): a grammar hashes each terminal's tree for its name and
again for its automaton, and the trees share their parts. Kept for one compile
(`forget_digests`)."""
_MAX_DIGESTS = 50_000
"""Kept digests before they start over: the nodes they hold stay alive until then, and a
schema's IR has hundreds to a few thousand nodes."""


def forget_digests() -> None:
    """Drop the kept digests, and so the nodes they hold, once a compile is done.

    Across compiles they would only save rehashing the few sub-trees every schema shares,
    while the nodes they keep alive are containers the garbage collector walks on each
    full pass of a serving process: after the coverage sample's compiles, 9,760 digests
    held 27 thousand objects, 7.5 ms of each pass.
    """
    _DIGESTS.clear()


_STEPS_PER_CHECK = 4096
"""`content_key` steps between deadline checks: a million-node tree takes seconds."""


def content_key(root: Node) -> bytes:
    """A 16-byte digest of the language tree's content, equal for equal trees.

    Each distinct node (by identity) is hashed once from its children's digests, so a
    shared DAG costs its size, not the size of its expansion as `hash(node)` would; IR
    nodes are immutable, so a node's digest is kept for the next call (`_DIGESTS`).
    """
    if len(_DIGESTS) > _MAX_DIGESTS:
        _DIGESTS.clear()
    known = _DIGESTS.get(id(root))
    if known is not None and known[0] is root:
        return known[1]
    digests: dict[int, bytes] = {}

    def digest_of(node: Node) -> bytes | None:
        found = digests.get(id(node))
        if found is None:
            kept = _DIGESTS.get(id(node))
            if kept is not None and kept[0] is node:
                found = digests[id(node)] = kept[1]
        return found

    stack: list[tuple[Node, bool]] = [(root, False)]
    steps = 0
    while stack:
        steps += 1
        if steps % _STEPS_PER_CHECK == 0:
            check_deadline("hashing the spec's tree")
        node, ready = stack.pop()
        if digest_of(node) is not None:
            continue
        if not ready:
            stack.append((node, True))
            stack.extend((c, False) for c in children(node) if digest_of(c) is None)
            continue
        h = hashlib.blake2b(type(node).__name__.encode(), digest_size=16)
        if isinstance(node, (CharSet, ByteSet)):
            h.update(repr(node.ranges).encode())
        elif isinstance(node, Ref):
            h.update(node.name.encode())
        elif isinstance(node, Repeat):
            h.update(f"{node.min},{node.max}".encode())
        for child in children(node):
            h.update(digests[id(child)])
        digests[id(node)] = h.digest()
        _DIGESTS[id(node)] = (node, digests[id(node)])
    return digests[id(root)]


def normalize_ranges(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sort and merge inclusive ranges; adjacent ranges join."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def chars(*ranges: tuple[int, int] | str) -> CharSet:
    """A CharSet from ranges and/or single-character strings: `chars("a", (48, 57))`."""
    spans: list[tuple[int, int]] = []
    for r in ranges:
        if isinstance(r, str):
            spans.extend((ord(c), ord(c)) for c in r)
        else:
            spans.append(r)
    return CharSet(normalize_ranges(spans))


def negate(charset: CharSet) -> CharSet:
    """Every code point not in `charset`."""
    out: list[tuple[int, int]] = []
    prev = 0
    for lo, hi in charset.ranges:
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= MAX_CODE_POINT:
        out.append((prev, MAX_CODE_POINT))
    return CharSet(tuple(out))


def literal(text: str) -> Node:
    """Exactly `text`."""
    return Concat(tuple(CharSet(((ord(c), ord(c)),)) for c in text))


def seq(*items: Node) -> Node:
    """Concatenation, flattening nested Concats; a single item is returned as is."""
    flat: list[Node] = []
    for item in items:
        if isinstance(item, Concat):
            flat.extend(item.items)
        else:
            flat.append(item)
    return flat[0] if len(flat) == 1 else Concat(tuple(flat))


def alt(*items: Node) -> Node:
    """Alternation, flattening nested Alts; a single item is returned as is."""
    flat: list[Node] = []
    for item in items:
        if isinstance(item, Alt):
            flat.extend(item.items)
        else:
            flat.append(item)
    return flat[0] if len(flat) == 1 else Alt(tuple(flat))


def repeat(item: Node, lo: int, hi: int | None) -> Node:
    """`item{lo,hi}`; `hi=None` is unbounded."""
    return Repeat(item, lo, hi)


def without(keep: Node, drop: Node) -> Node:
    """`keep` minus the strings of `drop` (`Diff`, skipped when nothing is dropped)."""
    if drop == NOTHING or keep == NOTHING:
        return keep
    return Diff((keep, drop))


def optional(item: Node) -> Node:
    """`item?`."""
    return Repeat(item, 0, 1)
