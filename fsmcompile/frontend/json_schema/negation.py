"""`not` as a union of positive schemas, for `not`, `if`/`else` and `oneOf` exclusivity.

The IR cannot complement an automaton, but most negated schemas in practice are
conjunctions of simple keywords, and De Morgan turns their negation into a union of
simple *positive* schemas: not {required: [a, b]} is "an object without a, or one
without b"; not {properties: {kind: {const: "x"}}} is "an object with kind present and
kind != "x""; not {minimum: 3} is "a number < 3" (a value of another type satisfies
`minimum`, so its negation holds numbers only). Leaves that need a true complement
(`type`, scalar `enum`/`const`, one `required` key, one `pattern`) stay as `{"not": …}`
and are lowered by the negation support in lower.py. Shapes outside this set return
None and are reported as unsupported by the caller.
"""

from __future__ import annotations

from typing import Any

from fsmcompile.frontend.json_schema.keywords import ANNOTATIONS, CONSTRAINING

_BOUNDS = {
    # keyword: (type it applies to, keyword of the negated bound, offset for counts)
    "minimum": ("number", "exclusiveMaximum", None),
    "maximum": ("number", "exclusiveMinimum", None),
    "exclusiveMinimum": ("number", "maximum", None),
    "exclusiveMaximum": ("number", "minimum", None),
    "minLength": ("string", "maxLength", -1),
    "maxLength": ("string", "minLength", 1),
    "minItems": ("array", "maxItems", -1),
    "maxItems": ("array", "minItems", 1),
    "minProperties": ("object", "maxProperties", -1),
    "maxProperties": ("object", "minProperties", 1),
}
MAX_DEPTH = 4


def _has_ref(value: Any) -> bool:
    if isinstance(value, dict):
        return any(k in ("$ref", "$dynamicRef", "$recursiveRef") for k in value) or any(
            _has_ref(v) for v in value.values()
        )
    if isinstance(value, list):
        return any(_has_ref(v) for v in value)
    return False


def negate(schema: Any, depth: int = 0) -> list[dict[str, Any]] | None:
    """Positive schemas whose union is exactly the complement of `schema`, or None.

    An empty list means `schema` accepts everything (its complement is empty).
    """
    if schema is True:
        return []
    if schema is False:
        return [{}]
    if not isinstance(schema, dict) or depth > MAX_DEPTH or _has_ref(schema):
        return None
    out: list[dict[str, Any]] = []
    for keyword in sorted(set(schema) - ANNOTATIONS):
        value = schema[keyword]
        if keyword not in CONSTRAINING and keyword != "not":
            continue  # unknown keywords constrain nothing
        if keyword in ("type", "enum", "const"):
            out.append({"not": {keyword: value}})
        elif keyword == "pattern":
            # Only strings can fail a pattern: the complement is the non-matching strings.
            out.append({"type": "string", "not": {"pattern": value}})
        elif keyword == "required":
            out.extend({"type": "object", "not": {"required": [k]}} for k in value)
        elif keyword == "properties":
            for name, sub in value.items():
                negated = negate(sub, depth + 1)
                if negated is None:
                    return None
                if negated:
                    out.append(
                        {
                            "type": "object",
                            "required": [name],
                            "properties": {name: {"anyOf": negated}},
                        }
                    )
        elif keyword in _BOUNDS:
            if isinstance(value, bool):
                return None  # draft-04 exclusive flags modify a sibling; not handled
            kind, flipped, offset = _BOUNDS[keyword]
            if offset is not None:
                if offset < 0 and value == 0:
                    continue  # minLength 0 and friends always hold
                value = int(value) + offset
            # Values of other types satisfy a bound, so only `kind` can fail it.
            out.append({"type": kind, flipped: value})
        elif keyword == "allOf":
            for sub in value:
                negated = negate(sub, depth + 1)
                if negated is None:
                    return None
                out.extend(negated)
        elif keyword == "not":
            out.append(value if isinstance(value, dict) else {} if value else {"not": {}})
        else:
            return None
    return out
