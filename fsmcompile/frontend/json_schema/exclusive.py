"""`oneOf` of overlapping scalar branches as automaton differences: each branch less the others.

When neither disjointness nor De Morgan (negation.py) makes a `oneOf` exclusive, branch
i can still be written as `L(i) - (L(j) for j != i)` with the automaton difference of
the IR (`Diff`). That is sound only where each other branch's language holds *every*
text of an instance it accepts; the compiler's documented canonical forms (integers
without `.0`, bounded numbers without exponents, narrowly spelled pattern strings) are
subsets, so a text outside `L(j)` could still be an instance of branch j. The texts
taken from branch i are therefore cut to one canonical spelling per value
(`canonical_scalars`: integral numbers as integers, other numbers as fixed point
without trailing zeros, strings narrowly spelled), on which every scalar lowering of
the shapes below is complete. Objects and arrays are left out (their key order and
nesting are not canonical), and so are the lowerings documented as subsets: the
`hostname`, `email`, `idn-*`, `time` and `date-time` formats, patterns with lookaheads,
and nested groups (distributed past their cap they are intersected, a subset too).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from fsmcompile.automaton.build import keep_built
from fsmcompile.frontend.json_schema.combinators import (
    Conjunction,
    enum_values,
    possible_atoms,
    synthetic,
)
from fsmcompile.frontend.json_schema.keywords import CONSTRAINING
from fsmcompile.frontend.json_schema.lowering_result import Lowered
from fsmcompile.frontend.json_schema.strings import STRING_KEYWORDS, narrow_content
from fsmcompile.frontend.json_schema.values import atom_of
from fsmcompile.ir.nodes import (
    Alt,
    And,
    Concat,
    CountedRepeat,
    Diff,
    Node,
    Ref,
    Repeat,
    alt,
    chars,
    literal,
    nodes,
    seq,
    without,
)

if TYPE_CHECKING:
    from fsmcompile.frontend.json_schema.lower import Lowerer

SCALAR_ATOMS = frozenset({"null", "boolean", "string", "integer", "fraction"})

NUMBER_KEYWORDS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)
COMPLETE_KEYWORDS = STRING_KEYWORDS | NUMBER_KEYWORDS | {"type", "enum", "const", "not"}
COMPLETE_KEYWORDS |= {"$ref", "allOf", "anyOf", "oneOf", "$defs", "definitions"}
COMPLETE_KEYWORDS |= {"$schema", "$id", "id", "$anchor"}
"""Keywords whose scalar lowering accepts every canonical text of a valid value (the
groups themselves are checked apart: a branch must have none left)."""

SUBSET_FORMATS = frozenset(
    {"hostname", "idn-hostname", "email", "idn-email", "time", "date-time", "uri", "iri"}
)
"""Formats lowered as documented subsets (or holding a host name)."""


@functools.cache
def canonical_scalars() -> Node:
    """One spelling per scalar value: `null`, `true`, `false`, integral numbers as
    `0|-?[1-9][0-9]*`, other numbers as `-?(0|[1-9][0-9]*).[0-9]*[1-9]`, strings narrowly
    spelled. Built once per process."""
    digits = Repeat(chars((48, 57)), 0, None)
    natural = seq(chars((49, 57)), digits)
    minus = Repeat(chars("-"), 0, 1)
    integral = alt(chars("0"), seq(minus, natural))
    fraction = seq(minus, alt(chars("0"), natural), chars("."), digits, chars((49, 57)))
    string = seq(chars('"'), narrow_content(), chars('"'))
    words = alt(literal("null"), literal("true"), literal("false"))
    return keep_built(alt(words, integral, fraction, string))


def _complete(lw: Lowerer, branch: Conjunction) -> bool:
    """Whether the branch's lowering holds every canonical text of its instances."""
    if branch.groups:
        return False
    if branch.false:
        return True
    atoms = possible_atoms(lw, branch)
    values = enum_values(branch)
    if values is not None:
        atoms &= {atom_of(value) for value in values}
    if atoms - SCALAR_ATOMS:
        return False
    return complete_keywords(branch)


def complete_keywords(branch: Conjunction) -> bool:
    """Whether the keywords of every part of a flat branch are lowered completely on the
    canonical scalar texts of their instances (no keyword outside `COMPLETE_KEYWORDS`, no
    subset format, no lookahead)."""
    for part in branch.parts:
        schema: dict[str, Any] = part.schema
        if any(key in CONSTRAINING and key not in COMPLETE_KEYWORDS for key in schema):
            return False
        if schema.get("format") in SUBSET_FORMATS:
            return False
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and ("(?=" in pattern or "(?!" in pattern):
            return False
    return True


def plain(node: Node) -> Node:
    """`node` with each `CountedRepeat` unrolled as the `Repeat` it is: inside a
    difference no lexer terminal can count it. Sub-trees without one stay shared."""
    if not any(isinstance(n, CountedRepeat) for n in nodes(node)):
        return node
    if isinstance(node, Repeat):
        return Repeat(plain(node.item), node.min, node.max)
    if isinstance(node, Diff):
        return Diff((plain(node.items[0]), plain(node.items[1])))
    if isinstance(node, Concat | Alt | And):
        return type(node)(tuple(plain(item) for item in node.items))
    return node


def _without_groups(branch: Conjunction) -> Conjunction:
    """The branch with its parts' `anyOf`/`oneOf`/`allOf`/`$ref`/`not` keywords taken out
    (already flattened into the conjunction): an `enum` is checked with `jsonschema`
    against whole parts, and the part holding the `oneOf` would drop the values another
    branch shares, while what is subtracted must be all of a branch's texts."""
    parts = [
        synthetic(p, "(branch-alone)", {k: v for k, v in p.schema.items() if k not in _FLATTENED})
        if _FLATTENED & set(p.schema)
        else p
        for p in branch.parts
    ]
    return Conjunction(parts, [], branch.negations, branch.false)


_FLATTENED = frozenset({"anyOf", "oneOf", "allOf", "$ref", "not"})


def is_regular(lowered: Lowered) -> bool:
    """Whether `lowered` is one automaton (no rule reference): a side of a difference."""
    return not lowered.unbounded and not any(isinstance(n, Ref) for n in nodes(lowered.node))


def exclusive_union(lw: Lowerer, branches: list[Conjunction]) -> Lowered | None:
    """The texts of exactly one branch, each in its canonical spelling, or None when some
    branch is not a regular scalar lowering known to be complete (see the module)."""
    if not all(_complete(lw, branch) for branch in branches):
        return None
    lowered = [lw.lower_conj(branch) for branch in branches]
    alone = [lw.lower_conj(_without_groups(branch)) for branch in branches]
    if not all(is_regular(item) for item in lowered + alone):
        return None
    languages = [plain(item.node) for item in alone]
    canonical = canonical_scalars()
    exclusive = [
        without(
            And((plain(item.node), canonical)),
            alt(*(o for j, o in enumerate(languages) if j != i)),
        )
        for i, item in enumerate(lowered)
        if not item.empty
    ]
    return Lowered(alt(*exclusive))
