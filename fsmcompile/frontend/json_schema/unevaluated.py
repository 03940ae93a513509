"""`unevaluatedProperties` / `unevaluatedItems` as ordinary keywords, where the lowering
knows statically which subschemas evaluated the instance.

A property is evaluated when a `properties`, `patternProperties`, `additionalProperties`
or nested `unevaluatedProperties` of a subschema applied in place (the schema itself, its
`allOf`, `$ref`, the `anyOf`/`oneOf` options, `if`/`then`/`else` branch and
`dependentSchemas` that hold) covers it; annotations under `not` and of options that fail
are dropped. After `anyOf`/`oneOf`/`if` are distributed, each flat conjunction holds
exactly the subschemas that hold, so the evaluated set is static: the keys of those
`properties`, those patterns, or everything when one has `additionalProperties`. Then
`unevaluatedProperties: U` is `{properties: {k: true...}, patternProperties: {p: true...},
additionalProperties: U}` added to the conjunction, which the object lowering enforces
exactly; items likewise (`prefixItems` of the longest evaluated prefix, `items: U`).

`anyOf` keeps the annotations of *every* option that holds, not only one: an `anyOf`
whose options may annotate is distributed over the non-empty subsets of its options
(`subset_groups`), so each branch's evaluated set is again exact. Where the set is not
static (`contains`, `$dynamicRef`, groups intersected rather than distributed, an `anyOf`
of more than `MAX_SUBSET_OPTIONS` annotating options, an `if` without `then`/`else`
whose annotations would count) the keyword stays reported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING, Any, Literal

from fsmcompile.errors import SchemaError
from fsmcompile.frontend.json_schema.combinators import Conjunction, Group, synthetic
from fsmcompile.frontend.json_schema.refs import Location, escape_token, is_legacy

if TYPE_CHECKING:
    from fsmcompile.frontend.json_schema.lower import Lowerer

Kind = Literal["properties", "items"]

KEYWORDS: dict[Kind, str] = {
    "properties": "unevaluatedProperties",
    "items": "unevaluatedItems",
}

MAX_SUBSET_OPTIONS = 4
"""Most options of an annotating `anyOf` distributed over their subsets (2^n - 1
branches); a wider one leaves the unevaluated keywords above it reported."""

SUBSETS_KEYWORD = "anyOf(subsets)"
"""`Group.keyword` of an `anyOf` already distributed over its subsets."""

_ANNOTATING: dict[Kind, frozenset[str]] = {
    "properties": frozenset(
        {"properties", "patternProperties", "additionalProperties", "unevaluatedProperties"}
    ),
    "items": frozenset({"prefixItems", "items", "additionalItems", "contains", "unevaluatedItems"}),
}
_IN_PLACE = ("allOf", "anyOf", "oneOf", "if", "then", "else", "dependentSchemas", "$ref")


def active(schema: Any, kind: Kind) -> bool:
    """Whether the schema object has an unevaluated keyword of `kind` that constrains
    (`true` and `{}` never do)."""
    if not isinstance(schema, dict) or KEYWORDS[kind] not in schema:
        return False
    value = schema[KEYWORDS[kind]]
    return not (value is True or value == {})


def _has_active(conj: Conjunction) -> bool:
    return any(active(p.schema, k) for p in conj.parts for k in KEYWORDS)


def may_annotate(lw: Lowerer, loc: Location, kind: Kind) -> bool:
    """Whether any subschema applied in place under `loc` may evaluate a property (item):
    the sufficient test that decides whether an `anyOf` needs its subsets."""
    walk = _walk(loc, lambda here: _in_place_children(lw, here))
    return any(here is not None and set(here.schema) & _ANNOTATING[kind] for here in walk)


def _walk(
    start: Location, children: Callable[[Location], list[Location] | None]
) -> Iterator[Location | None]:
    """Each schema object reached from `start` through `children`, once; a final None
    when `children` could not tell (the walk then stops)."""
    seen: set[tuple[str, str]] = set()
    stack = [start]
    while stack:
        loc = stack.pop()
        if loc.key in seen or not isinstance(loc.schema, dict):
            continue
        seen.add(loc.key)
        yield loc
        found = children(loc)
        if found is None:
            yield None
            return
        stack.extend(found)


def _in_place_children(lw: Lowerer, loc: Location) -> list[Location]:
    """Every subschema applied to the same instance as `loc`, `not` aside."""
    schema = loc.schema
    target = _ref_target(lw, loc)
    out = [] if target is None else [target]
    for kind in ("allOf", "anyOf", "oneOf"):
        if isinstance(schema.get(kind), list):
            out.extend(loc.child(kind, i) for i in range(len(schema[kind])))
    for kind in ("if", "then", "else"):
        if kind in schema:
            out.append(loc.child(kind))
    if isinstance(schema.get("dependentSchemas"), dict):
        out.extend(loc.child("dependentSchemas", name) for name in schema["dependentSchemas"])
    return out


def _ref_target(lw: Lowerer, loc: Location) -> Location | None:
    """The schema `loc`'s `$ref` names (2019-09 on, where `$ref` applies beside its
    siblings), or None."""
    ref = loc.schema.get("$ref")
    if not isinstance(ref, str) or is_legacy(loc.draft):
        return None
    try:
        return lw.registry.resolve(ref, loc)
    except SchemaError:
        return None  # reported where the ref is lowered


def subset_groups(lw: Lowerer, conj: Conjunction) -> Conjunction:
    """`conj` with each annotating `anyOf` (at most `MAX_SUBSET_OPTIONS` options) made
    an `anyOf` over the non-empty subsets of its options, when some part has an
    unevaluated keyword: the same language, and each branch then holds every option that
    evaluated the instance. Returns `conj` itself when nothing changes."""
    if not _has_active(conj):
        return conj
    groups: list[Group] = []
    changed = False
    for group in conj.groups:
        if _needs_subsets(lw, group):
            options = [
                [loc for option in chosen for loc in option]
                for size in range(1, len(group.options) + 1)
                for chosen in combinations(group.options, size)
            ]
            groups.append(Group("anyOf", group.owner, options, SUBSETS_KEYWORD))
            changed = True
        else:
            groups.append(group)
    if not changed:
        return conj
    return Conjunction(conj.parts, groups, conj.negations, conj.false)


def _needs_subsets(lw: Lowerer, group: Group) -> bool:
    if group.kind != "anyOf" or group.keyword != "anyOf" or len(group.options) < 2:
        return False
    if len(group.options) > MAX_SUBSET_OPTIONS:
        return False
    return _annotating_options(lw, group.owner) > 0


def _annotating_options(lw: Lowerer, owner: Location) -> int:
    options = owner.schema.get("anyOf", [])
    return sum(
        1
        for i in range(len(options))
        if any(may_annotate(lw, owner.child("anyOf", i), kind) for kind in KEYWORDS)
    )


@dataclass
class _Evaluated:
    """What the subschemas holding under one schema evaluate."""

    keys: dict[str, None] = field(default_factory=dict)
    patterns: dict[str, None] = field(default_factory=dict)
    prefix: int = 0
    everything: bool = False


def resolve_unevaluated(
    lw: Lowerer, conj: Conjunction, kinds: set[Kind]
) -> tuple[list[Location], set[tuple[tuple[str, str], str]]]:
    """The parts that enforce the unevaluated keywords of a flat conjunction, and the
    (part key, keyword) pairs they enforce (the others stay reported).

    `kinds` names the instance types the conjunction can take (`properties` for objects,
    `items` for arrays): a keyword of another type constrains nothing.
    """
    held = {p.key for p in conj.parts}
    extra: list[Location] = []
    handled: set[tuple[tuple[str, str], str]] = set()
    for part in conj.parts:
        for kind in kinds:
            if not active(part.schema, kind):
                continue
            evaluated = _evaluated(lw, part, held, kind)
            if evaluated is None:
                continue
            handled.add((part.key, KEYWORDS[kind]))
            if not evaluated.everything:
                extra.append(_as_part(part, kind, evaluated))
    return extra, handled


def _as_part(part: Location, kind: Kind, evaluated: _Evaluated) -> Location:
    """The schema that says what `unevaluated*` says, given what was evaluated."""
    value = part.schema[KEYWORDS[kind]]
    if kind == "properties":
        schema: dict[str, Any] = {
            "properties": dict.fromkeys(evaluated.keys, True),
            "patternProperties": dict.fromkeys(evaluated.patterns, True),
            "additionalProperties": value,
        }
    else:
        schema = {"prefixItems": [True] * evaluated.prefix, "items": value}
    return synthetic(part, f"({KEYWORDS[kind]})", schema)


def _evaluated(
    lw: Lowerer, part: Location, held: set[tuple[str, str]], kind: Kind
) -> _Evaluated | None:
    """What the subschemas of `part` that hold in this conjunction evaluate, or None
    when that is not static."""
    out = _Evaluated()
    for loc in _walk(part, lambda here: _holding_children(lw, here, held, kind)):
        if loc is None or "$dynamicRef" in loc.schema or "$recursiveRef" in loc.schema:
            return None
        if loc is not part and KEYWORDS[kind] in loc.schema:
            out.everything = True
        if not _note(loc, kind, out):
            return None
    return out


def _note(loc: Location, kind: Kind, out: _Evaluated) -> bool:
    """Add what `loc`'s own keywords evaluate; False when that depends on the values."""
    schema = loc.schema
    if kind == "properties":
        if isinstance(schema.get("properties"), dict):
            out.keys.update(dict.fromkeys(schema["properties"]))
        if isinstance(schema.get("patternProperties"), dict):
            out.patterns.update(dict.fromkeys(schema["patternProperties"]))
        if "additionalProperties" in schema:
            out.everything = True
        return True
    if "contains" in schema:
        return False  # evaluates the items that match it: not static
    legacy_items = isinstance(schema.get("items"), list)
    if isinstance(schema.get("prefixItems"), list) and not legacy_items:
        out.prefix = max(out.prefix, len(schema["prefixItems"]))
        if "items" in schema:
            out.everything = True
    elif legacy_items:
        out.prefix = max(out.prefix, len(schema["items"]))
        if "additionalItems" in schema:
            out.everything = True
    elif "items" in schema:
        out.everything = True
    return True


def _holding_children(
    lw: Lowerer, loc: Location, held: set[tuple[str, str]], kind: Kind
) -> list[Location] | None:
    """The in-place subschemas of `loc` whose annotations count here (those that hold),
    or None when which of them hold is not known from the conjunction."""
    schema = loc.schema
    out = [loc.child("allOf", i) for i in range(len(schema.get("allOf") or ()))]
    target = _ref_target(lw, loc)
    if target is not None:
        out.append(target)
    for group in ("anyOf", "oneOf"):
        options = schema.get(group)
        if not isinstance(options, list):
            continue
        locs = [loc.child(group, i) for i in range(len(options))]
        chosen = [o for o in locs if o.key in held]
        if not any(may_annotate(lw, o, kind) for o in locs):
            continue
        if group == "anyOf" and (
            len(locs) > MAX_SUBSET_OPTIONS and _annotating_options(lw, loc) > 0
        ):
            return None
        if not chosen and not any(o.schema is True for o in locs):
            return None  # not distributed: intersected as automata
        out.extend(chosen)
    if "if" in schema:
        branches = _if_branches(lw, loc, held, kind)
        if branches is None:
            return None
        out.extend(branches)
    for name in schema.get("dependentSchemas") or {}:
        child = loc.child("dependentSchemas", name)
        if child.key in held:
            out.append(child)
        elif may_annotate(lw, child, kind) and not _marked(
            loc, held, f"dependentSchemas/{escape_token(name)}/("
        ):
            return None  # not distributed
    return out


def _marked(loc: Location, held: set[tuple[str, str]], prefix: str) -> bool:
    """Whether a synthetic part the distribution made under `loc` (its pointer starts
    with `prefix`) holds: then the group it belongs to was distributed."""
    start = f"{loc.pointer}/{prefix}"
    return any(document == loc.document and pointer.startswith(start) for document, pointer in held)


def _if_branches(
    lw: Lowerer, loc: Location, held: set[tuple[str, str]], kind: Kind
) -> list[Location] | None:
    """`if` and `then` when `if` holds, `else` when it fails; None when unknown."""
    schema = loc.schema
    condition = loc.child("if")
    if "then" not in schema and "else" not in schema:
        # Nothing was distributed: `if`'s annotations count when it holds.
        return None if may_annotate(lw, condition, kind) else []
    if condition.key in held or condition.schema is True:
        return [condition] + ([loc.child("then")] if "then" in schema else [])
    if _marked(loc, held, "if/(not-"):
        return [loc.child("else")] if "else" in schema else []
    relevant = [b for b in ("if", "then", "else") if b in schema]
    return None if any(may_annotate(lw, loc.child(b), kind) for b in relevant) else []
