"""Object keywords on generated schemas: the compiled language agrees with `jsonschema`.

Schemas are one or two `allOf` parts, each with some of `properties`, `required`,
`patternProperties` and `additionalProperties` over a few short keys whose patterns
overlap, plus `minProperties`. Instances list their properties in schema order (the
order the compiler enforces) and their other keys after them.
"""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fsmcompile.errors import SpecError

from .conftest import compact
from .language import schema_language

KEYS = ["a", "b", "ab", "ba", "x", "ax", "xb", "abc"]
PATTERNS = ["a", "^a", "b$", "^x", "^.{1,2}$"]
VALUES: list[Any] = [{"type": "integer"}, {"type": "string"}, True, False, {"minimum": 2}]

values = st.sampled_from(VALUES)


@st.composite
def parts(draw: st.DrawFn) -> dict[str, Any]:
    part: dict[str, Any] = {}
    listed = draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True))
    if listed:
        part["properties"] = {key: draw(values) for key in listed}
        required = draw(st.lists(st.sampled_from(listed), max_size=1))
        if required:
            part["required"] = required
    patterns = draw(st.lists(st.sampled_from(PATTERNS), max_size=2, unique=True))
    if patterns:
        part["patternProperties"] = {pattern: draw(values) for pattern in patterns}
    if draw(st.booleans()):
        part["additionalProperties"] = draw(values)
    return part


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    all_of = draw(st.lists(parts(), min_size=1, max_size=2))
    schema: dict[str, Any] = {"type": "object", "allOf": all_of}
    if draw(st.booleans()):
        schema["minProperties"] = draw(st.integers(1, 3))
    return schema


def in_schema_order(schema: dict[str, Any], instance: dict[str, Any]) -> dict[str, Any]:
    """The instance with the listed properties first, in order of first mention."""
    listed: list[str] = []
    for part in schema["allOf"]:
        listed += [key for key in part.get("properties", {}) if key not in listed]
    first = {key: instance[key] for key in listed if key in instance}
    return {**first, **{key: v for key, v in instance.items() if key not in first}}


instances = st.dictionaries(st.sampled_from(KEYS), st.sampled_from([1, 3, "s", None]), max_size=4)


CLOSED_TO_OWN_PATTERN = {
    "type": "object",
    "allOf": [
        {"patternProperties": {"a": True}, "additionalProperties": False},
        {"patternProperties": {"b$": True}, "additionalProperties": False},
    ],
}
"""Each part closed to its own pattern: only keys matching both ("ab") are valid."""


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas(), st.lists(instances, min_size=8, max_size=8))
@example(CLOSED_TO_OWN_PATTERN, [{"ab": 1}, {"a": 1}, {"b": 1}, {}, {"ab": 1, "xb": 3}] * 2)
def test_object_keywords_decide_instances_like_jsonschema(
    schema: dict[str, Any], drawn: list[dict[str, Any]]
) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    ordered = [in_schema_order(schema, instance) for instance in drawn]
    try:
        accepts = schema_language(schema)
    except SpecError:
        # Refused as accepting nothing: then no instance may be valid.
        assert not any(validator.is_valid(instance) for instance in ordered)
        return
    for instance in ordered:
        assert accepts(compact(instance)) is validator.is_valid(instance), instance
