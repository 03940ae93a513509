"""Conjunctions and groups: `allOf`, `$ref`, `not`, `anyOf`/`oneOf`, `if`, dependencies.

The lowering never intersects automata of whole subschemas when it can avoid it: the
object language orders keys by schema order, so `And(A, B)` of two object schemas
would force each key to sit where *both* orders put it. Instead every schema is first
flattened into a `Conjunction` (its object plus everything `allOf`/`$ref` pulls in),
whose keywords are merged per type by the type lowerings. `anyOf`/`oneOf` stay as
groups, distributed over the conjunction one alternative at a time; `if`/`then`/`else`,
dependencies and non-leaf `not`s are rewritten into such groups. `provably_disjoint`
decides when `oneOf` may be lowered as `anyOf`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from fsmcompile.errors import SchemaError
from fsmcompile.frontend.json_schema.checks import check_object, pattern_search
from fsmcompile.frontend.json_schema.keywords import ALL_ATOMS, ANNOTATIONS, TYPE_ATOMS, Atom
from fsmcompile.frontend.json_schema.negation import negate
from fsmcompile.frontend.json_schema.numbers import Bound, numeric_bounds
from fsmcompile.frontend.json_schema.refs import Location, escape_token, is_legacy
from fsmcompile.frontend.json_schema.values import atom_of, json_key
from fsmcompile.ir.nodes import Node

if TYPE_CHECKING:
    from fsmcompile.frontend.json_schema.lower import Lowerer


MAX_DISTRIBUTED = 64
"""Most alternatives `anyOf`/`oneOf` groups of one conjunction are multiplied out to;
past it the groups are intersected as automata instead (sound, possibly stricter)."""


@dataclass
class Group:
    """One `anyOf` or `oneOf`: exactly one (or at least one) option must hold.

    Each option is a conjunction of locations: `dependentSchemas` and `if`/`then`/`else`
    become anyOf groups whose options pair a synthetic schema with a real one.
    """

    kind: str
    owner: Location
    options: list[list[Location]]
    keyword: str = ""


_NON_OBJECT = {"type": ["null", "boolean", "string", "number", "array"]}


def synthetic(loc: Location, suffix: str, schema: dict[str, Any]) -> Location:
    """A schema made up by the lowering, placed under `loc` for error messages."""
    return replace(loc, schema=schema, pointer=f"{loc.pointer}/{suffix}", synthetic=True)


def derived_groups(loc: Location) -> list[Group]:
    """Groups equivalent to `dependentRequired`, `dependentSchemas`, `dependencies`
    (drafts 4-7) and `if`/`then`/`else` when `if` is a negatable shape.

    "If `a` is present then S" is "not an object, or an object without `a`, or an
    object with `a` satisfying S", an `anyOf` the distribution already handles.
    """
    schema = loc.schema
    groups: list[Group] = []
    legacy = is_legacy(loc.draft)
    for keyword in ("dependencies",) if legacy else ("dependentRequired", "dependentSchemas"):
        for name, value in (schema.get(keyword) or {}).items():
            tag = f"{keyword}/{escape_token(name)}"
            absent = {"type": "object", "not": {"required": [name]}}
            options = [
                [synthetic(loc, f"{tag}/(not-object)", _NON_OBJECT)],
                [synthetic(loc, f"{tag}/(absent)", absent)],
            ]
            if isinstance(value, list):
                present = {"type": "object", "required": [name, *value]}
                options.append([synthetic(loc, f"{tag}/(present)", present)])
            else:
                present = {"type": "object", "required": [name]}
                options.append(
                    [synthetic(loc, f"{tag}/(present)", present), loc.child(keyword, name)]
                )
            groups.append(Group("anyOf", loc, options, tag))
    if "if" in schema and ("then" in schema or "else" in schema):
        negated = negate(schema["if"])
        if negated is not None:
            yes = [loc.child("if")] + ([loc.child("then")] if "then" in schema else [])
            otherwise = [loc.child("else")] if "else" in schema else []
            options = [yes] + [
                [synthetic(loc, f"if/(not-{i})", alternative), *otherwise]
                for i, alternative in enumerate(negated)
            ]
            groups.append(Group("anyOf", loc, options, "if"))
    return groups


def negation_group(loc: Location, owner: Location, tag: str) -> Group | None:
    """`not loc.schema` as an anyOf group of positive schemas (see negation.py), or None
    when the shape is not handled. An empty group means the negation is false."""
    negated = negate(loc.schema)
    if negated is None:
        return None
    options = [[synthetic(loc, f"(not-{i})", alternative)] for i, alternative in enumerate(negated)]
    return Group("anyOf", owner, options, tag)


def negation_supported(schema: Any) -> bool:
    """Whether `not: schema` is one of the shapes lowered exactly: a type, one required
    property, one pattern, or excluded scalar values."""
    if schema is True or schema is False:
        return True
    if not isinstance(schema, dict):
        return False
    keys = set(schema) - ANNOTATIONS
    if not keys:
        return True
    if keys == {"type"} or (keys == {"required"} and len(schema["required"]) <= 1):
        return True
    if keys == {"pattern"}:
        return isinstance(schema["pattern"], str)
    return bool(keys & {"enum", "const"}) and keys <= {"enum", "const", "type"}


@dataclass
class Conjunction:
    """Schema objects that must all hold, plus what they negate.

    Attributes:
        parts: schema objects (booleans removed), `$ref` targets (also those of `allOf`
            members) before their referrer.
        groups: pending `anyOf`/`oneOf` groups.
        negations: `not` subschemas the type lowerings try to honour.
        false: some part is `false` (or `not: {}`): the language is empty.
        forbidden_keys: properties a `not: {required: [k]}` forbids.
        excluded_values: values a `not: {enum: [...]}` forbids.
        excluded_patterns: (where, pattern) for each `not: {pattern: p}`: strings matching
            p are forbidden.
        excluded_scalars: (where, language) for each `not` of a regular scalar schema:
            canonical scalar texts in the language are forbidden (complement.py).
    """

    parts: list[Location] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    negations: list[Location] = field(default_factory=list)
    false: bool = False
    forbidden_keys: set[str] = field(default_factory=set)
    excluded_values: list[Any] = field(default_factory=list)
    excluded_patterns: list[tuple[Location, str]] = field(default_factory=list)
    excluded_scalars: list[tuple[Location, Node]] = field(default_factory=list)

    def key(self) -> tuple[Any, ...]:
        """Identity for memoization: which objects, groups and negations it holds."""
        return (
            tuple(sorted(p.key for p in self.parts)),
            tuple(sorted((*g.owner.key, g.keyword) for g in self.groups)),
            tuple(sorted(n.key for n in self.negations)),
        )

    def merged(self, other: Conjunction, *, after: Location | None = None) -> Conjunction:
        """Both conjunctions at once (parts deduplicated).

        `other`'s parts go after `after` and the parts under it (an `anyOf` branch where
        its group is written, so the keys it lists keep their place in the key order),
        else at the end.
        """
        seen = {p.key for p in self.parts}
        added = [p for p in other.parts if p.key not in seen]
        at = _end_of_subtree(self.parts, after) if after is not None else len(self.parts)
        return Conjunction(
            parts=self.parts[:at] + added + self.parts[at:],
            groups=self.groups + other.groups,
            negations=self.negations + other.negations,
            false=self.false or other.false,
        )

    def keyword(self, name: str) -> list[tuple[Location, Any]]:
        """(part, value) for each part that has keyword `name`."""
        return [(p, p.schema[name]) for p in self.parts if name in p.schema]


def _end_of_subtree(parts: list[Location], owner: Location) -> int:
    """The position after the last of `parts` that is `owner` or lies under it; the end
    when none does."""
    prefix = owner.pointer + "/"
    end = len(parts)
    for i, part in enumerate(parts):
        if part.document == owner.document and (
            part.pointer == owner.pointer or part.pointer.startswith(prefix)
        ):
            end = i + 1
    return end


def collect(lw: Lowerer, locs: list[Location], *, option: bool = False) -> Conjunction:
    """Flatten `locs` with their `allOf`s, `$ref`s and double negations.

    With `option` (an `anyOf`/`oneOf` alternative), contradictory keywords in one object
    make the conjunction empty instead of raising.

    Raises:
        SchemaError: a subschema is not an object or boolean, a keyword is malformed,
            a `$ref` cannot be resolved, or (outside options) keywords contradict.
    """
    conj = Conjunction()
    seen: set[tuple[str, str]] = set()

    def visit(loc: Location) -> None:
        if loc.key in seen:
            return
        seen.add(loc.key)
        schema = loc.schema
        if schema is True:
            return
        if schema is False:
            conj.false = True
            return
        if not isinstance(schema, dict):
            raise SchemaError(
                f"a schema must be an object or a boolean, got {type(schema).__name__}",
                loc.where,
            )
        contradiction = check_object(loc)
        if contradiction is not None:
            if not option:
                raise contradiction
            conj.false = True
            return
        if "$ref" in schema:
            visit(lw.registry.resolve(schema["$ref"], loc))
            if is_legacy(loc.draft):
                return
        for keyword in ("$dynamicRef", "$recursiveRef"):
            if keyword in schema:
                lw.report(loc, keyword, "needs the dynamic scope at run time; treated as {}")
        members = [loc.child("allOf", i) for i in range(len(schema.get("allOf", ())))]
        for member in members:  # `$ref` targets first, those of `allOf` members too
            if isinstance(member.schema, dict) and "$ref" in member.schema:
                visit(lw.registry.resolve(member.schema["$ref"], member))
        conj.parts.append(loc)
        for member in members:
            visit(member)
        for kind in ("anyOf", "oneOf"):
            options = schema.get(kind)
            if isinstance(options, list):
                group = [[loc.child(kind, i)] for i in range(len(options))]
                conj.groups.append(Group(kind, loc, group, kind))
        conj.groups.extend(derived_groups(loc))
        if "not" in schema:
            visit_not(loc.child("not"))

    def visit_not(loc: Location) -> None:
        schema = loc.schema
        if schema is False:
            return
        keys = set(schema) - ANNOTATIONS if isinstance(schema, dict) else set()
        if schema is True or not keys:
            conj.false = True
        elif keys == {"not"}:
            visit(loc.child("not"))
        elif negation_supported(schema):
            conj.negations.append(loc)
        else:
            group = negation_group(loc, loc, f"not:{loc.pointer}")
            if group is None:
                conj.negations.append(loc)  # reported as unsupported when lowered
            elif not group.options:
                conj.false = True
            else:
                conj.groups.append(group)

    for loc in locs:
        visit(loc)
    return conj


def type_atoms(conj: Conjunction) -> frozenset[Atom]:
    """The type atoms every part allows (`integer` ⊂ `number`)."""
    atoms = ALL_ATOMS
    for _, value in conj.keyword("type"):
        names = [value] if isinstance(value, str) else value
        allowed: frozenset[Atom] = frozenset()
        for name in names:
            allowed |= TYPE_ATOMS[name]
        atoms &= allowed
    return atoms


def possible_atoms(lw: Lowerer, conj: Conjunction, depth: int = 0) -> frozenset[Atom]:
    """The type atoms an instance of the conjunction can have: its `type`s, narrowed by
    each `anyOf`/`oneOf` group to the atoms some option allows (`anyOf: [{type: null},
    {type: object}]` is null or object). Groups nested deeper than 3 are not looked at."""
    atoms = type_atoms(conj)
    for group in conj.groups if depth < 3 else ():
        allowed: frozenset[Atom] = frozenset()
        for option in group.options:
            branch = collect(lw, option, option=True)
            if not branch.false:
                allowed |= possible_atoms(lw, branch, depth + 1)
            if allowed >= atoms:
                break
        atoms &= allowed
    return atoms


def enum_values(conj: Conjunction) -> list[Any] | None:
    """Values every `enum`/`const` part allows, in first-seen order; None if unrestricted."""
    result: list[Any] | None = None
    for part in conj.parts:
        lists = []
        if "enum" in part.schema:
            lists.append(list(part.schema["enum"]))
        if "const" in part.schema:
            lists.append([part.schema["const"]])
        for values in lists:
            if result is None:
                result = values
            else:
                allowed = {json_key(w) for w in values}
                result = [v for v in result if json_key(v) in allowed]
    return result


def required_keys(conj: Conjunction) -> list[str]:
    """Every property some part requires, in first-seen order."""
    keys: dict[str, None] = {}
    for _, value in conj.keyword("required"):
        keys.update(dict.fromkeys(value))
    return list(keys)


def value_locations(sources: list[Location], key: str) -> list[Location]:
    """Every subschema that applies to the value of property `key`."""
    locs: list[Location] = []
    for part in sources:
        schema = part.schema
        matched = False
        if key in schema.get("properties", {}):
            locs.append(part.child("properties", key))
            matched = True
        for pattern in schema.get("patternProperties", {}):
            found = pattern_search(pattern, key)
            if found is not False:
                locs.append(part.child("patternProperties", pattern))
            matched = matched or found is True
        if not matched and "additionalProperties" in schema:
            locs.append(part.child("additionalProperties"))
    return locs


def provably_disjoint(
    lw: Lowerer, a: Conjunction, b: Conjunction, depth: int = 0, *, empty_object_aside: bool = False
) -> bool:
    """Whether no instance can satisfy both conjunctions, by sufficient tests: disjoint
    types, disjoint `enum`/`const` sets, disjoint numeric ranges, string keywords whose
    automata do not intersect, or a property one side requires whose values the other
    side cannot accept (a discriminator, or a key it forbids).

    With `empty_object_aside`, whether they can share no instance but the empty object:
    objects of two sides closed to keys they do not share (`additionalProperties: false`)
    can only both be `{}`.
    """
    common = possible_atoms(lw, a) & possible_atoms(lw, b)
    if not common or a.false or b.false:
        return True
    values_a, values_b = enum_values(a), enum_values(b)
    if values_a is not None:
        values_a = [v for v in values_a if atom_of(v) in common]
    if values_b is not None:
        values_b = [v for v in values_b if atom_of(v) in common]
    if values_a is not None and values_b is not None:
        return {json_key(x) for x in values_a}.isdisjoint(json_key(y) for y in values_b)
    if values_a == [] or values_b == []:
        return True
    for atom in common:
        if atom in ("integer", "fraction"):
            (lo_a, hi_a), (lo_b, hi_b) = numeric_bounds(a), numeric_bounds(b)
            if not (_below(hi_a, lo_b) or _below(hi_b, lo_a)):
                return False
        elif atom == "object":
            if empty_object_aside and _closed_apart(a, b):
                continue
            if depth > 3 or not _discriminated(lw, a, b, depth):
                return False
        elif atom == "string":
            if not lw.strings_disjoint(a, b):
                return False
        else:
            return False
    return True


def _below(hi: Bound | None, lo: Bound | None) -> bool:
    """Whether every value <= hi is below every value >= lo."""
    if hi is None or lo is None:
        return False
    return hi.value < lo.value or (hi.value == lo.value and (hi.exclusive or lo.exclusive))


def _closed_keys(conj: Conjunction) -> set[str] | None:
    """The only keys an object of the conjunction may have, when some part closes it
    (`additionalProperties: false` and no `patternProperties`); None when it is open."""
    keys: set[str] | None = None
    for part in conj.parts:
        schema = part.schema
        if schema.get("additionalProperties") is False and not schema.get("patternProperties"):
            names = set(schema.get("properties", {}))
            keys = names if keys is None else keys & names
    return keys


def _closed_apart(a: Conjunction, b: Conjunction) -> bool:
    """Whether both sides are closed to key sets that do not meet."""
    keys_a, keys_b = _closed_keys(a), _closed_keys(b)
    return keys_a is not None and keys_b is not None and not keys_a & keys_b


def _discriminated(lw: Lowerer, a: Conjunction, b: Conjunction, depth: int) -> bool:
    """Whether a property one side requires has values the other side cannot accept: a
    discriminator (`kind: "a"` vs `kind: "b"`), or a key the other side forbids
    (`additionalProperties: false` without it, `not: {required: [key]}`)."""
    for this, other in ((a, b), (b, a)):
        for key in required_keys(this):
            if key in _forbidden_keys(other):
                return True
            theirs = _sure_value_locations(other.parts, key)
            if not theirs:
                continue  # any value, or unsure which patterns match
            ours = _sure_value_locations(this.parts, key)
            if ours is None:
                continue
            if provably_disjoint(
                lw, collect(lw, ours, option=True), collect(lw, theirs, option=True), depth + 1
            ):
                return True
    return False


def _forbidden_keys(conj: Conjunction) -> set[str]:
    """Keys a `not: {required: [key]}` of the conjunction forbids (before lowering)."""
    out = set(conj.forbidden_keys)
    for neg in conj.negations:
        schema = neg.schema
        if isinstance(schema, dict) and set(schema) - ANNOTATIONS == {"required"}:
            out.update(k for k in schema["required"] if isinstance(k, str))
    return out


def _sure_value_locations(parts: list[Location], key: str) -> list[Location] | None:
    """`value_locations`, or None when a pattern cannot be decided for `key` (then which
    subschemas apply is unknown, and no disjointness may be concluded)."""
    for part in parts:
        for pattern in part.schema.get("patternProperties", {}):
            if pattern_search(pattern, key) is None:
                return None
    return value_locations(parts, key)
