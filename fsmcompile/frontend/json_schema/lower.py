"""Schema → regex IR: the entry point and the dispatch over conjunctions and types.

`schema_to_ir` resolves the document, lowers the root conjunction, and then either
raises one error listing every unenforceable keyword (strict) or returns them as
relaxations (lenient). Per-type work lives in strings/numbers/objects/arrays; this
module distributes `anyOf`/`oneOf`, applies `not`, enforces `enum`/`const` by
validating each value, and bounds recursion.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Hashable
from dataclasses import replace
from typing import Any

from fsmcompile.budget import check_deadline
from fsmcompile.errors import BudgetExceededError, SchemaError, UnsupportedFeatureError
from fsmcompile.frontend.json_schema.arrays import lower_array
from fsmcompile.frontend.json_schema.combinators import (
    MAX_DISTRIBUTED,
    Conjunction,
    Group,
    collect,
    enum_values,
    negation_group,
    negation_supported,
    provably_disjoint,
    synthetic,
    type_atoms,
)
from fsmcompile.frontend.json_schema.complement import scalar_complement, subtract_scalars
from fsmcompile.frontend.json_schema.document import check_document, parse_schema_text
from fsmcompile.frontend.json_schema.exclusive import SCALAR_ATOMS, exclusive_union
from fsmcompile.frontend.json_schema.instances import InstanceChecker
from fsmcompile.frontend.json_schema.keywords import ANNOTATIONS, CONSTRAINING, TYPE_ATOMS, Atom
from fsmcompile.frontend.json_schema.lowering_result import NOTHING_LOWERED, Lowered
from fsmcompile.frontend.json_schema.number_keywords import lower_number
from fsmcompile.frontend.json_schema.objects import lower_object
from fsmcompile.frontend.json_schema.options import JsonOptions, Relaxation, SchemaLowering
from fsmcompile.frontend.json_schema.refs import Location, Registry
from fsmcompile.frontend.json_schema.strings import (
    STRING_KEYWORDS,
    encode_content,
    lower_string,
    narrow_content,
    string_content,
)
from fsmcompile.frontend.json_schema.syntax import JsonSyntax
from fsmcompile.frontend.json_schema.unevaluated import Kind, resolve_unevaluated, subset_groups
from fsmcompile.frontend.json_schema.unsupported import raise_unsupported, unsupported_in
from fsmcompile.frontend.json_schema.values import atom_of, json_key, value_depth, value_ir
from fsmcompile.ir.nodes import NOTHING, And, Node, Ref, alt, content_key, literal, without
from fsmcompile.ir.rules import prune_rules

ANY_RULE = "any"
"""The rule of any JSON value (free-form values, `{}`, absent `additionalProperties`)."""

_VALUES_PER_CHECK = 256
"""enum/const values validated between deadline checks (a value takes microseconds)."""


def schema_to_ir(
    schema: dict[str, Any] | bool | str,
    *,
    options: JsonOptions,
    deadline: float | None = None,
) -> SchemaLowering:
    """Lower a JSON Schema to regex IR over the instance text.

    Args:
        schema: the schema as a dict, a boolean, or JSON text.
        options: whitespace form, strictness, recursion bound, remote documents, draft.
        deadline: a `time.monotonic()` value; lowering stops with BudgetExceededError
            soon after it passes (distributing many `anyOf`s can take long).

    Returns:
        The IR plus the relaxations (lenient mode) and the rules its `Ref`s name (empty
        when the schema is regular; otherwise it compiles as a grammar).

    Raises:
        SchemaError: malformed JSON, not a schema, a malformed keyword, an unresolvable
            `$ref`, contradictory keywords in one object, or a schema that accepts no
            value at all.
        UnsupportedFeatureError: strict mode and some keywords cannot be enforced;
            `.features` lists every one.
        BudgetExceededError: `deadline` passed (limit="timeout_s").
    """
    if isinstance(schema, str):
        schema = parse_schema_text(schema)
    check_document(schema)
    if not isinstance(schema, dict | bool):
        raise SchemaError(
            f"a schema must be a JSON object or a boolean, got {type(schema).__name__}", ""
        )
    registry = Registry(schema, remote_schemas=options.remote_schemas, draft=options.draft)
    lowerer = Lowerer(registry, options, deadline=deadline)
    result = lowerer.lower_all([registry.root])
    lowerer.define_rules()
    problems = sorted(lowerer.problems.items())
    relaxed: list[Relaxation] = [(w, k, r) for (w, k), r in problems]
    if options.strict:
        raise_unsupported(relaxed)
    relaxed += [(w, k, r) for (w, k), r in sorted(lowerer.allowed.items())]
    node, rules = prune_rules(result.node, lowerer.rules)
    if node == NOTHING:
        raise SchemaError(
            "the schema accepts no JSON value (it is false, contradictory, or requires "
            "endlessly nested values)",
            "",
        )
    return SchemaLowering(node, relaxed, rules)


class Lowerer:
    """Lowering state for one schema: registry, problems found, recursion stack, memo."""

    def __init__(
        self, registry: Registry, options: JsonOptions, *, deadline: float | None = None
    ) -> None:
        self.registry = registry
        self.deadline = deadline
        self.options = options
        self.syntax = JsonSyntax(options)
        self.checker = InstanceChecker(registry)
        self.problems: dict[tuple[str, str], str] = {}
        self.allowed: dict[tuple[str, str], str] = {}
        self.rules: dict[str, Node] = {}
        self._rule_names: dict[tuple[Any, ...], str] = {}
        self._pending: list[tuple[str, Conjunction]] = []
        self._active: Counter[tuple[str, str]] = Counter()
        self._memo: dict[tuple[Any, ...], Lowered] = {}
        self._patterns: dict[str, Node | None] = {}
        self._decoded: dict[str, Node | None] = {}
        self._disjoint: dict[tuple[str, str], bool] = {}

    def check_deadline(self) -> None:
        """Raise once the time budget has passed (every stage of lowering calls this)."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise BudgetExceededError(
                "lowering the schema ran past its time budget; raise timeout_s or simplify "
                "the schema (many nested anyOf/oneOf multiply out, long enums)",
                limit="timeout_s",
                value=self.deadline,
            )

    # -- reporting ---------------------------------------------------------------

    def report(self, loc: Location | str, keyword: str, reason: str) -> None:
        """Record a keyword that is not enforced (raised at the end in strict mode)."""
        where = loc if isinstance(loc, str) else loc.where
        self.problems.setdefault((where, keyword), reason)

    def relax(self, loc: Location, keyword: str, reason: str) -> None:
        """Record a keyword an option allows to go unenforced (reported, never raised)."""
        self.allowed.setdefault((loc.where, keyword), reason)

    def any_value(self) -> Lowered:
        """Any JSON value: a reference to the any-JSON rule, since JSON nests freely."""
        if ANY_RULE not in self.rules:
            self.rules[ANY_RULE] = self.syntax.any_value(Ref(ANY_RULE))
        return Lowered(Ref(ANY_RULE), 0, unbounded=True)

    def pattern_content(self, loc: Location, keyword: str, pattern: str) -> Node | None:
        """Escaped string-content IR of an ECMA `pattern` (search semantics), or None if
        it uses a construct the regex front end cannot compile (reported)."""
        if pattern not in self._patterns:
            decoded = self._parse_pattern(loc, keyword, pattern)
            self._decoded[pattern] = decoded
            self._patterns[pattern] = None if decoded is None else encode_content(decoded)
        node = self._patterns[pattern]
        if node is None:
            self.report(loc, keyword, f"pattern {pattern!r} uses an unsupported regex feature")
        return node

    def pattern_complement(self, pattern: str) -> Node | None:
        """Escaped content of the strings a (searched) pattern does NOT match, narrowly
        spelled (`narrow_content`); None when the pattern itself could not be compiled."""
        matched = self._patterns.get(pattern)
        return None if matched is None else without(narrow_content(), matched)

    def patterns_disjoint(self, first: str, second: str) -> bool:
        """Whether no string matches both patterns (searched), proved by building the
        intersection automaton under a small budget; False when unsure."""
        key = (first, second) if first <= second else (second, first)
        if key not in self._disjoint:
            a, b = self._decoded.get(first), self._decoded.get(second)
            self._disjoint[key] = a is not None and b is not None and _empty(And((a, b)))
        return self._disjoint[key]

    def strings_disjoint(self, a: Conjunction, b: Conjunction) -> bool:
        """Whether no string satisfies the string keywords of both conjunctions (`pattern`,
        `format`, lengths), proved by building the intersection automaton under a small
        budget; False when unsure or when a side does not constrain strings."""
        if not (_constrains_strings(a) and _constrains_strings(b)):
            return False
        return _empty(And((string_content(self, a), string_content(self, b))))

    def _parse_pattern(self, loc: Location, keyword: str, pattern: str) -> Node | None:
        from fsmcompile.errors import RegexSyntaxError
        from fsmcompile.frontend.regex.parser import parse_regex

        try:
            return parse_regex(pattern, dialect="ecma", search=True)
        except RegexSyntaxError as exc:
            raise SchemaError(
                f"invalid regex in {keyword}: {exc.reason} at position {exc.pos}",
                f"{loc.where}/{keyword}",
                keyword,
            ) from exc
        except UnsupportedFeatureError:
            return None

    # -- conjunctions --------------------------------------------------------------

    def lower_all(self, locs: list[Location]) -> Lowered:
        """Lower the conjunction of `locs` (a property value, an item, the root)."""
        self.check_deadline()
        conj = collect(self, locs)
        if any(self._active[part.key] for part in conj.parts):
            return Lowered(Ref(self._rule_for(conj)), 0, unbounded=True)
        return self._lower_active(conj)

    def _lower_active(self, conj: Conjunction) -> Lowered:
        """`lower_conj` with the parts of `conj` marked as being expanded, so a `$ref`
        back into one of them becomes a rule reference instead of recursing."""
        for part in conj.parts:
            self._active[part.key] += 1
        try:
            return self.lower_conj(conj)
        finally:
            for part in conj.parts:
                self._active[part.key] -= 1

    def rule_of(self, node: Node) -> Lowered:
        """A reference to a rule holding `node`, named by its content (a lexer terminal of
        its own in the grammar, see `strings.lower_string`)."""
        name = "c" + content_key(node).hex()[:16]
        self.rules.setdefault(name, node)
        return Lowered(Ref(name), 0, unbounded=True)

    def _rule_for(self, conj: Conjunction) -> str:
        """The rule holding the language of `conj` (defined by `define_rules`)."""
        key = conj.key()
        name = self._rule_names.get(key)
        if name is None:
            name = f"s{len(self._rule_names)}"
            self._rule_names[key] = name
            self._pending.append((name, conj))
        return name

    def define_rules(self) -> None:
        """Lower every conjunction a recursive `$ref` pointed back to, as its own rule."""
        while self._pending:
            name, conj = self._pending.pop()
            self.rules[name] = self._lower_active(conj).node

    def lower_conj(self, conj: Conjunction) -> Lowered:
        """Lower a flattened conjunction (memoized when no recursion limit was hit)."""
        if conj.false:
            return NOTHING_LOWERED
        key = conj.key()
        if key in self._memo:
            return self._memo[key]
        result = self._distribute(conj) if conj.groups else self._lower_flat(conj)
        self._memo[key] = result
        return result

    def _distribute(self, conj: Conjunction) -> Lowered:
        conj = subset_groups(self, conj)
        if math.prod(len(g.options) for g in conj.groups) > MAX_DISTRIBUTED:
            return self._intersect_groups(conj)
        group, rest = conj.groups[0], conj.groups[1:]
        base = Conjunction(conj.parts, rest, conj.negations, conj.false)
        branches = [
            base.merged(collect(self, o, option=True), after=group.owner) for o in group.options
        ]
        if group.kind == "oneOf":
            exclusive = self._exclusive(group, branches)
            if isinstance(exclusive, Lowered):
                return exclusive
            branches = exclusive
        return _union([self.lower_conj(b) for b in branches])

    def _exclusive(self, group: Group, branches: list[Conjunction]) -> list[Conjunction] | Lowered:
        """oneOf as anyOf when the branches cannot overlap; as anyOf less `{}` when they
        can share only the empty object and more than one option takes it; else branch i
        also negates every other option (De Morgan, see negation.py) when those negations
        are expressible; else, for regular scalar branches, each branch less the others
        as automata (exclusive.py, already lowered); else it is reported."""
        overlapping = [
            (a, b)
            for i, a in enumerate(branches)
            for b in branches[i + 1 :]
            if not provably_disjoint(self, a, b)
        ]
        if not overlapping:
            return branches
        if all(provably_disjoint(self, a, b, empty_object_aside=True) for a, b in overlapping):
            # The branches can share `{}` at most: valid iff exactly one option takes it.
            takers = [self._takes_empty_object(option) for option in group.options]
            if None not in takers:
                if sum(1 for taker in takers if taker) <= 1:
                    return branches
                non_empty = synthetic(group.owner, "(oneOf-non-empty)", {"minProperties": 1})
                return [b.merged(Conjunction(parts=[non_empty])) for b in branches]
        negations: list[Group | None] = []
        for j, option in enumerate(group.options):
            if len(option) != 1:
                negations.append(None)
                continue
            target = self._referenced(option[0])
            negations.append(negation_group(target, group.owner, f"oneOf-not:{j}"))
        if any(n is None for n in negations):
            difference = exclusive_union(self, branches)
            if difference is not None:
                return difference
            self.report(group.owner, "oneOf", "branches may overlap; exclusivity is not enforced")
            return branches
        out = []
        for i, branch in enumerate(branches):
            extra = Conjunction(groups=[n for j, n in enumerate(negations) if j != i and n])
            merged = branch.merged(extra)
            merged.false = merged.false or any(
                n is not None and not n.options for j, n in enumerate(negations) if j != i
            )
            out.append(merged)
        return out

    def _referenced(self, loc: Location) -> Location:
        """The schema a `$ref`-only schema (annotations aside) stands for, through chains
        of them: a oneOf's options are often bare `$ref`s, and the negation of their
        target is what exclusivity needs."""
        seen = {loc.key}
        while isinstance(loc.schema, dict) and set(loc.schema) - ANNOTATIONS == {"$ref"}:
            loc = self.registry.resolve(loc.schema["$ref"], loc)
            if loc.key in seen:
                break
            seen.add(loc.key)
        return loc

    def _takes_empty_object(self, option: list[Location]) -> bool | None:
        """Whether `{}` is valid against every schema of a oneOf option (jsonschema
        decides), or None when a validator cannot tell."""
        for loc in option:
            valid = self.checker.is_valid({}, loc)
            if not valid and not self.checker.is_valid({}, loc, negate=True):
                return None  # neither valid nor invalid: the validator failed
            if not valid:
                return False
        return True

    def _intersect_groups(self, conj: Conjunction) -> Lowered:
        parts = [self._lower_flat(Conjunction(conj.parts, [], conj.negations, conj.false))]
        for group in conj.groups:
            options = [collect(self, o, option=True) for o in group.options]
            exclusive = self._exclusive(group, options) if group.kind == "oneOf" else options
            if isinstance(exclusive, Lowered):
                parts.append(exclusive)
            else:
                parts.append(_union([self.lower_conj(o) for o in exclusive]))
        if any(p.empty for p in parts):
            return NOTHING_LOWERED
        return Lowered(
            And(tuple(p.node for p in parts)),
            max(p.depth for p in parts),
            any(p.unbounded for p in parts),
        )

    def _lower_flat(self, conj: Conjunction) -> Lowered:
        if conj.false:
            return NOTHING_LOWERED
        if not conj.negations and not any(set(p.schema) & CONSTRAINING for p in conj.parts):
            return self.any_value()
        atoms = type_atoms(conj)
        values = enum_values(conj)
        if values is not None:
            return self._lower_values(conj, values, atoms)
        kinds: set[Kind] = {"properties"} if "object" in atoms else set()
        kinds |= {"items"} if "array" in atoms else set()
        enforcing, handled = resolve_unevaluated(self, conj, kinds)
        if enforcing:
            conj = replace(conj, parts=[*conj.parts, *enforcing])
        for negation in conj.negations:
            atoms = self._apply_negation(conj, negation, atoms)
        for part in conj.parts:
            for keyword, reason in unsupported_in(part.schema, atoms):
                if keyword in ("not", "uniqueItems"):  # arrays.py reports uniqueItems
                    continue
                if (part.key, keyword) not in handled:
                    self.report(part, keyword, reason)
        return self._lower_types(conj, atoms)

    def _lower_values(
        self, conj: Conjunction, values: list[Any], atoms: frozenset[Atom]
    ) -> Lowered:
        """enum/const: every listed value that the whole conjunction accepts, validated
        by jsonschema itself, so even keywords we cannot lower hold exactly."""
        kept: list[Any] = []
        texts: list[Node] = []
        seen: set[Hashable] = set()
        for count, value in enumerate(values):
            if count % _VALUES_PER_CHECK == 0:
                self.check_deadline()
            key = json_key(value)
            if key in seen or atom_of(value) not in atoms:
                continue
            # `values` come from every part's enum/const (`enum_values`), so those hold.
            if any(not self.checker.is_valid(value, p, apart_from_values=True) for p in conj.parts):
                continue
            if any(not self.checker.is_valid(value, n, negate=True) for n in conj.negations):
                continue
            # Only kept values stand for their equals: draft-04 refuses 1.0 as an integer
            # but keeps a later 1.
            seen.add(key)
            kept.append(value)
            texts.append(value_ir(value, self.syntax))
        if not kept:
            return NOTHING_LOWERED
        return Lowered(alt(*texts), max(value_depth(v) for v in kept))

    def _apply_negation(
        self, conj: Conjunction, neg: Location, atoms: frozenset[Atom]
    ) -> frozenset[Atom]:
        schema = neg.schema
        if isinstance(schema, bool):
            return frozenset() if schema else atoms
        keys = set(schema) - ANNOTATIONS
        if not keys:
            return frozenset()  # not {} is false
        if not negation_supported(schema):
            complement = scalar_complement(self, neg)
            if complement is not None:
                conj.excluded_scalars.append((neg, complement.language))
                return atoms - complement.removed
            self.report(
                neg.where.rsplit("/", 1)[0] if neg.where.endswith("/not") else neg.where,
                "not",
                "negating this shape needs a complement automaton; only type, enum/const, "
                "required, pattern, properties, bounds and allOf of those are negated, and "
                "regular scalar schemas that accept all objects and arrays or none",
            )
            return atoms
        if keys == {"type"}:
            names = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
            for name in names:
                atoms -= TYPE_ATOMS.get(name, frozenset())
            return atoms
        if keys == {"required"}:
            if not schema["required"]:
                return frozenset()
            conj.forbidden_keys.add(schema["required"][0])
            return atoms & {"object"}
        if keys == {"pattern"}:
            conj.excluded_patterns.append((neg, schema["pattern"]))
            return atoms & {"string"}
        values = list(schema.get("enum", [])) + ([schema["const"]] if "const" in schema else [])
        if "type" in schema:
            allowed: frozenset[Atom] = frozenset()
            names = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
            for name in names:
                allowed |= TYPE_ATOMS.get(name, frozenset())
            values = [v for v in values if atom_of(v) in allowed]
        for value in values:
            if atom_of(value) in ("array", "object") and atom_of(value) in atoms:
                self.report(neg, "enum", "excluding array or object values is not enforced")
            conj.excluded_values.append(value)
        if any(v is None for v in values):
            atoms -= {"null"}
        return atoms

    def _lower_types(self, conj: Conjunction, atoms: frozenset[Atom]) -> Lowered:
        if not conj.excluded_scalars or not atoms & SCALAR_ATOMS:
            return self._lower_atoms(conj, atoms)
        scalars = self._lower_atoms(conj, atoms & SCALAR_ATOMS)
        containers = self._lower_atoms(conj, atoms - SCALAR_ATOMS)
        return _union([subtract_scalars(self, conj, scalars), containers])

    def _lower_atoms(self, conj: Conjunction, atoms: frozenset[Atom]) -> Lowered:
        results: list[Lowered] = []
        excluded = conj.excluded_values
        if "null" in atoms:
            results.append(Lowered(literal("null")))
        if "boolean" in atoms:
            flags = [b for b in (True, False) if not any(v is b for v in excluded)]
            results.extend(Lowered(literal("true" if b else "false")) for b in flags)
        if "string" in atoms:
            results.append(lower_string(self, conj))
        if "integer" in atoms:
            results.append(lower_number(self, conj, integer="fraction" not in atoms))
        elif "fraction" in atoms:  # `not: {type: integer}` on numbers
            results.append(lower_number(self, conj, integer=False, fractional=True))
        if "object" in atoms:
            results.append(lower_object(self, conj))
        if "array" in atoms:
            results.append(lower_array(self, conj))
        return _union(results)


def _constrains_strings(conj: Conjunction) -> bool:
    return any(set(p.schema) & STRING_KEYWORDS for p in conj.parts)


def _empty(node: Node) -> bool:
    """Whether `node` matches nothing, decided by the automaton builder (bounded)."""
    from fsmcompile.automaton import build_dfa
    from fsmcompile.errors import BudgetExceededError, SpecError

    try:
        build_dfa(node, max_states=5_000, deadline=time.monotonic() + 0.5)
    except BudgetExceededError:
        check_deadline("proving schemas disjoint")  # the compile's own budget, if spent
        return False
    except SpecError:
        return True
    return False


def _union(results: list[Lowered]) -> Lowered:
    live = [r for r in results if not r.empty]
    unbounded = any(r.unbounded for r in results)
    if not live:
        return Lowered(NOTHING, 0, unbounded)
    return Lowered(alt(*(r.node for r in live)), max(r.depth for r in live), unbounded)
