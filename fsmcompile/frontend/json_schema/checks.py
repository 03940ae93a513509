"""Well-formedness and self-contradiction checks on one schema object.

A keyword with a value of the wrong shape, or two keywords of the same object that
contradict each other (`minLength` 5 with `maxLength` 3), is almost always a mistake in
the schema, so it becomes a `SchemaError` pointing at the keyword instead of a decoder
that silently emits nothing. Keywords of a type that `type` rules out never apply, so
they contradict nothing (object keywords beside `"type": "array"`). One exception: a
contradictory `anyOf`/`oneOf` option only removes that option (real schemas carry dead
alternatives, and validators accept them).
Contradictions that arise when *different* objects are combined (`allOf` branches, `$ref`
siblings) are legitimate empty intersections and are left to the lowering.
"""

from __future__ import annotations

import re
from typing import Any

from fsmcompile.errors import SchemaError
from fsmcompile.frontend.json_schema.keywords import TYPE_ATOMS
from fsmcompile.frontend.json_schema.refs import Location

_COUNTS = (
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minContains",
    "maxContains",
)
_NUMBERS = ("minimum", "maximum", "multipleOf")
_PAIRS = (("minLength", "maxLength"), ("minItems", "maxItems"), ("minProperties", "maxProperties"))
_TYPE_OF = {
    "minLength": ("string",),
    "minItems": ("array",),
    "minProperties": ("object",),
    "minimum": ("number", "integer"),
    "required": ("object",),
}
"""The types whose values a contradiction between these keywords rules out: with a
`type` that allows none of them the keywords never apply, and nothing contradicts."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _fail(loc: Location, keyword: str, message: str) -> SchemaError:
    return SchemaError(message, f"{loc.where}/{keyword}", keyword)


def pattern_search(pattern: str, text: str) -> bool | None:
    """Whether `pattern` (ECMA syntax, search semantics) matches `text`, or None when
    Python's `re` cannot tell (a construct it spells differently)."""
    try:
        return re.search(pattern, text) is not None
    except (re.error, RecursionError):
        return None


def check_object(loc: Location) -> SchemaError | None:
    """Check the keyword values of one schema object.

    Returns:
        A contradiction between keywords of the object (not raised: inside an `anyOf`
        option it only makes that option empty; the caller decides), or None.

    Raises:
        SchemaError: a keyword value of the wrong type.
    """
    schema: dict[str, Any] = loc.schema
    kind = schema.get("type")
    names = [kind] if isinstance(kind, str) else kind
    if kind is not None and (
        not isinstance(names, list) or any(n not in TYPE_ATOMS for n in names)
    ):
        raise _fail(
            loc,
            "type",
            f"type must be one of {', '.join(TYPE_ATOMS)} or a list of them, got {kind!r}",
        )
    for keyword in _COUNTS:
        value = schema.get(keyword)
        if value is not None and not (
            _is_number(value) and value >= 0 and float(value).is_integer()
        ):
            raise _fail(loc, keyword, f"{keyword} must be a non-negative integer, got {value!r}")
    for keyword in _NUMBERS:
        value = schema.get(keyword)
        if value is not None and not _is_number(value):
            raise _fail(loc, keyword, f"{keyword} must be a number, got {value!r}")
    if "multipleOf" in schema and schema["multipleOf"] <= 0:
        raise _fail(loc, "multipleOf", f"multipleOf must be > 0, got {schema['multipleOf']!r}")
    for keyword in ("exclusiveMinimum", "exclusiveMaximum"):
        value = schema.get(keyword)
        if value is not None and not (_is_number(value) or isinstance(value, bool)):
            raise _fail(loc, keyword, f"{keyword} must be a number, got {value!r}")
    _check_shapes(loc, schema)
    required = schema.get("required")
    if required is not None and not (
        isinstance(required, list) and all(isinstance(k, str) for k in required)
    ):
        raise _fail(loc, "required", "required must be a list of property names")
    allowed = None if names is None else set(names)

    def applies(keyword: str) -> bool:
        return allowed is None or not allowed.isdisjoint(_TYPE_OF[keyword])

    for low, high in _PAIRS:
        if low in schema and high in schema and schema[low] > schema[high] and applies(low):
            return _fail(
                loc,
                low,
                f"{low} {schema[low]} is greater than {high} {schema[high]}: "
                "no value can satisfy both",
            )
    if applies("minimum") and (found := _check_bounds(loc, schema)) is not None:
        return found
    return _check_required(loc, schema) if applies("required") else None


def _check_bounds(loc: Location, schema: dict[str, Any]) -> SchemaError | None:
    low = [(schema["minimum"], False)] if _is_number(schema.get("minimum")) else []
    high = [(schema["maximum"], False)] if _is_number(schema.get("maximum")) else []
    if _is_number(schema.get("exclusiveMinimum")):
        low.append((schema["exclusiveMinimum"], True))
    if _is_number(schema.get("exclusiveMaximum")):
        high.append((schema["exclusiveMaximum"], True))
    for lo, lo_ex in low:
        for hi, hi_ex in high:
            if lo > hi or (lo == hi and (lo_ex or hi_ex)):
                keyword = "exclusiveMinimum" if lo_ex else "minimum"
                return _fail(
                    loc, keyword, f"lower bound {lo} is above upper bound {hi}: no number fits"
                )
    return None


def _check_shapes(loc: Location, schema: dict[str, Any]) -> None:
    for keyword in ("pattern",):
        if keyword in schema and not isinstance(schema[keyword], str):
            raise _fail(loc, keyword, f"{keyword} must be a string")
    for keyword in ("properties", "patternProperties", "$defs", "definitions"):
        value = schema.get(keyword)
        if value is not None and not (
            isinstance(value, dict) and all(isinstance(v, dict | bool) for v in value.values())
        ):
            raise _fail(loc, keyword, f"{keyword} must map names to schemas")
    for keyword in ("allOf", "anyOf", "oneOf", "prefixItems"):
        value = schema.get(keyword)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(v, dict | bool) for v in value)
        ):
            raise _fail(loc, keyword, f"{keyword} must be a list of schemas")
    for keyword in ("additionalProperties", "additionalItems", "propertyNames", "not"):
        if keyword in schema and not isinstance(schema[keyword], dict | bool):
            raise _fail(loc, keyword, f"{keyword} must be a schema")
    items = schema.get("items")
    if items is not None and not isinstance(items, dict | bool | list):
        raise _fail(loc, "items", "items must be a schema or a list of schemas")
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise _fail(loc, "enum", "enum must be a list of values")
    if "$ref" in schema and not isinstance(schema["$ref"], str):
        raise _fail(loc, "$ref", "$ref must be a string")


def _check_required(loc: Location, schema: dict[str, Any]) -> SchemaError | None:
    required = schema.get("required") or []
    if schema.get("additionalProperties") is not False:
        return None
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    for key in required:
        if key in properties:
            continue
        if any(pattern_search(p, key) is not False for p in patterns):
            continue
        return _fail(
            loc,
            "required",
            f"required property {key!r} is forbidden by additionalProperties: false "
            "(it is not in properties and matches no patternProperties)",
        )
    return None
