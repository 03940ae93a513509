"""JSON Schema's keywords as this front end sorts them: annotations (constrain nothing),
constraining keywords, those no token mask can enforce (`UNSUPPORTED`) and the type atoms
each applies to. Read by the lowering, by negation and by the unsupported-keyword check."""

from __future__ import annotations

Atom = str
"""A type atom: null, boolean, object, array, string, integer, fraction (non-integer)."""

ALL_ATOMS: frozenset[Atom] = frozenset(
    {"null", "boolean", "object", "array", "string", "integer", "fraction"}
)

ANNOTATIONS: frozenset[str] = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "example",
        "$comment",
        "readOnly",
        "writeOnly",
        "deprecated",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
        "$schema",
        "$id",
        "id",
        "$anchor",
        "$dynamicAnchor",
        "$defs",
        "definitions",
        "$vocabulary",
    }
)
"""Keywords that describe but never constrain: ignored silently, as validators do."""

TYPE_ATOMS: dict[str, frozenset[Atom]] = {
    "null": frozenset({"null"}),
    "boolean": frozenset({"boolean"}),
    "object": frozenset({"object"}),
    "array": frozenset({"array"}),
    "string": frozenset({"string"}),
    "integer": frozenset({"integer"}),
    "number": frozenset({"integer", "fraction"}),
}

UNSUPPORTED: dict[str, tuple[frozenset[Atom] | None, str]] = {
    "not": (None, "negating this shape needs a complement automaton"),
    "if": (None, "conditional schemas (if/then/else) are not enforced"),
    "uniqueItems": (
        frozenset({"array"}),
        "item uniqueness is not a regular property (enforced only over at most 10 values)",
    ),
    "unevaluatedItems": (frozenset({"array"}), "unevaluatedItems is not enforced"),
    "unevaluatedProperties": (frozenset({"object"}), "unevaluatedProperties is not enforced"),
    "$dynamicRef": (None, "$dynamicRef needs the dynamic scope at run time"),
    "$recursiveRef": (None, "$recursiveRef needs the dynamic scope at run time"),
}
"""keyword → (the type atoms it constrains, None for all; why it is not enforced)."""

CONSTRAINING: frozenset[str] = frozenset(
    {
        "type",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "items",
        "prefixItems",
        "additionalItems",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "allOf",
        "anyOf",
        "oneOf",
        "dependentRequired",
        "dependentSchemas",
        "contains",
        "dependencies",
        *UNSUPPORTED,
    }
)
"""Keywords that constrain instances; a schema object with none of them accepts anything."""

SPEC_FORMATS_NOT_ENFORCED: dict[str, str] = {
    "regex": "a valid regex is not a regular language (balanced groups)",
}
"""Formats the specification defines that are not enforced (not even as a subset)."""
