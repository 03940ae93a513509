"""`not` of a regular scalar schema as an automaton difference.

negation.py writes `not S` as a union of positive schemas (De Morgan) when S is a
conjunction of simple keywords; an `anyOf`, a `$ref`, a `multipleOf` or a `format`
under `not` has no such form. Where S tells objects and arrays apart by type alone
(it accepts all objects or none, all arrays or none), `not S` is the surrounding
schema's scalar texts less L(S), the IR's automaton difference (`Diff`), plus its
objects and arrays where S accepts none: `not: {multipleOf: 20}` on integers,
`not: {anyOf: [{$ref: uuid}, {format: date}]}` on strings.

As in exclusive.py, subtracting L(S) is sound only on texts L(S) holds whenever their
value is an instance of S, and the compiler's documented canonical forms (integers
without `.0`, bounded numbers without exponents, narrowly spelled pattern strings) make
L(S) a subset: `10.0` is outside L({multipleOf: 5}) though 10 is a multiple. The scalar
texts kept are therefore cut to one canonical spelling per value (`canonical_scalars`),
on which every scalar lowering of the keywords `complete_keywords` accepts is complete.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fsmcompile.frontend.json_schema.combinators import (
    MAX_DISTRIBUTED,
    Conjunction,
    collect,
    enum_values,
    synthetic,
    type_atoms,
)
from fsmcompile.frontend.json_schema.exclusive import (
    COMPLETE_KEYWORDS,
    SCALAR_ATOMS,
    canonical_scalars,
    complete_keywords,
    is_regular,
    plain,
)
from fsmcompile.frontend.json_schema.keywords import ANNOTATIONS, CONSTRAINING, TYPE_ATOMS, Atom
from fsmcompile.frontend.json_schema.lowering_result import Lowered
from fsmcompile.frontend.json_schema.values import atom_of
from fsmcompile.ir.nodes import And, Node, alt, without

if TYPE_CHECKING:
    from fsmcompile.frontend.json_schema.lower import Lowerer
    from fsmcompile.frontend.json_schema.refs import Location

CONTAINERS = ("object", "array")
_SCALAR_TYPES = ["null", "boolean", "string", "number"]


@dataclass(frozen=True, slots=True)
class ScalarComplement:
    """What `not S` leaves: no value of the `removed` atoms (containers S accepts all
    of), no scalar text of `language` (S's scalar texts, one automaton)."""

    removed: frozenset[Atom]
    language: Node


def scalar_complement(lw: Lowerer, neg: Location) -> ScalarComplement | None:
    """`not neg.schema` as removed container atoms and a scalar language to subtract, or
    None when S constrains objects or arrays beyond their type, is lowered as a subset
    on some scalar (see the module), or is not one automaton."""
    conj = collect(lw, [neg], option=True)
    containers = _containers(lw, conj)
    if containers is None or not _complete(lw, conj):
        return None
    only_scalars = synthetic(neg, "(scalars)", {"type": _SCALAR_TYPES})
    lowered = lw.lower_conj(conj.merged(Conjunction(parts=[only_scalars])))
    if not is_regular(lowered):
        return None
    removed = frozenset(atom for atom, all_of_them in containers.items() if all_of_them)
    return ScalarComplement(removed, plain(lowered.node))


def subtract_scalars(lw: Lowerer, conj: Conjunction, scalars: Lowered) -> Lowered:
    """The canonical texts of `scalars` outside every excluded scalar language of
    `conj`; `scalars` itself (reported) when it is not one automaton."""
    if scalars.empty:
        return scalars
    if not is_regular(scalars):
        for neg, _ in conj.excluded_scalars:
            lw.report(neg, "not", "the scalars beside this `not` are not one automaton")
        return scalars
    excluded = alt(*(plain(language) for _, language in conj.excluded_scalars))
    kept = without(And((plain(scalars.node), canonical_scalars())), excluded)
    return Lowered(kept, scalars.depth)


def _branches(lw: Lowerer, conj: Conjunction) -> list[Conjunction] | None:
    """`conj` with its first group distributed (as the lowering does), None past the
    lowering's distribution cap (where it intersects groups: a subset)."""

    if math.prod(len(g.options) for g in conj.groups) > MAX_DISTRIBUTED:
        return None
    group, rest = conj.groups[0], conj.groups[1:]
    base = Conjunction(conj.parts, rest, conj.negations, conj.false)
    return [base.merged(collect(lw, o, option=True), after=group.owner) for o in group.options]


def _complete(lw: Lowerer, conj: Conjunction) -> bool:
    """Whether every branch of `conj` is lowered completely on canonical scalar texts."""
    if conj.false:
        return True
    if not conj.groups:
        return complete_keywords(conj)
    branches = _branches(lw, conj)
    return branches is not None and all(_complete(lw, b) for b in branches)


def _containers(lw: Lowerer, conj: Conjunction) -> dict[Atom, bool] | None:
    """For objects and arrays: whether `conj` accepts all of them (True) or none
    (False); None when it accepts some only."""
    if conj.false:
        return dict.fromkeys(CONTAINERS, False)
    if conj.groups:
        branches = _branches(lw, conj)
        if branches is None:
            return None
        verdicts = [_containers(lw, b) for b in branches]
        out: dict[Atom, bool] = {}
        for atom in CONTAINERS:
            if any(v is not None and v[atom] for v in verdicts):
                out[atom] = True
            elif any(v is None for v in verdicts):
                return None
            else:
                out[atom] = False
        return out
    atoms = type_atoms(conj)
    simple = True
    for neg in conj.negations:
        schema = neg.schema
        keys = set(schema) - ANNOTATIONS if isinstance(schema, dict) else set()
        if keys == {"type"}:
            names = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
            for name in names:
                atoms -= TYPE_ATOMS.get(name, frozenset())
        elif not keys or not keys <= {"pattern", "enum", "const", "type"}:
            # A negation the lowering complements too: it accepts the containers its
            # schema accepts none of.
            inner = _containers(lw, collect(lw, [neg], option=True))
            if inner is None:
                simple = False
            else:
                atoms -= {atom for atom, all_of_them in inner.items() if all_of_them}
        else:  # excluded values: all containers stay unless one is excluded
            listed = list(schema.get("enum", [])) + ([schema["const"]] if "const" in keys else [])
            simple = simple and all(atom_of(v) not in CONTAINERS for v in listed)
    values = enum_values(conj)
    constrained = any(
        (set(p.schema) & CONSTRAINING) - COMPLETE_KEYWORDS - ANNOTATIONS for p in conj.parts
    )
    out = {}
    for atom in CONTAINERS:
        if atom not in atoms:
            out[atom] = False
        elif values is not None:
            if any(atom_of(v) == atom for v in values):
                return None
            out[atom] = False
        elif constrained or not simple:
            return None
        else:
            out[atom] = True
    return out


__all__ = ["SCALAR_ATOMS", "ScalarComplement", "scalar_complement", "subtract_scalars"]
