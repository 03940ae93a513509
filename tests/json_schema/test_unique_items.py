"""`uniqueItems` over finite item domains: exact, checked against jsonschema."""

from __future__ import annotations

import itertools
import json
from typing import Any

import jsonschema
import pytest

from fsmcompile.errors import UnsupportedFeatureError
from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir

from .language import schema_language

CASES: list[tuple[dict[str, Any], list[Any]]] = [
    ({"items": {"enum": ["a", "b", 1]}}, ["a", "b", 1, 1.0, "c"]),
    ({"items": {"type": "boolean"}, "minItems": 1}, [True, False, None]),
    ({"items": {"type": ["integer", "null"], "minimum": 1, "maximum": 3}}, [1, 2.0, 3, None, 4]),
    ({"items": {"const": {"k": [1]}}}, [{"k": [1]}, {"k": [1.0]}, {"k": []}]),
    ({"items": {"enum": [1, 2, 3, 4]}, "maxItems": 2}, [1, 2, 3, 4]),
    ({"items": {"enum": ["x", "y"], "not": {"const": "y"}}}, ["x", "y"]),
    ({"items": {"enum": ["a", "b", 1]}, "contains": {"const": "a"}}, ["a", "b", 1]),
]


@pytest.mark.parametrize(("schema", "pool"), CASES, ids=range(len(CASES)))
@pytest.mark.parametrize("whitespace", ["compact", "flexible"])
def test_unique_items_over_finite_values_is_exact(
    schema: dict[str, Any], pool: list[Any], whitespace: str
) -> None:
    schema = {"type": "array", "uniqueItems": True, **schema}
    accepts = schema_language(schema, whitespace=whitespace)
    validator = jsonschema.Draft202012Validator(schema)
    separators = (",", ":") if whitespace == "compact" else (" , ", ": ")
    for n in range(5):
        for items in itertools.product(pool, repeat=n):
            text = json.dumps(list(items), separators=separators)
            if accepts(text):
                assert validator.is_valid(list(items)), text
            elif not any(isinstance(item, float) for item in items):  # `2.0` for integer
                assert not validator.is_valid(list(items)), text


def test_positional_items_with_unique_items() -> None:
    schema = {
        "type": "array",
        "prefixItems": [{"type": "boolean"}, {"enum": [1, "a"]}],
        "items": {"enum": [True, "a", None]},
        "uniqueItems": True,
    }
    accepts = schema_language(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for n in range(6):
        for items in itertools.product([True, False, 1, "a", None], repeat=n):
            text = json.dumps(list(items), separators=(",", ":"))
            assert accepts(text) == validator.is_valid(list(items)), text


def test_draft_04_type_list_of_simple_types() -> None:
    # The meta-schemas' `type` array: distinct names out of seven.
    types = ["array", "boolean", "integer", "null", "number", "object", "string"]
    schema = {"type": "array", "items": {"enum": types}, "minItems": 1, "uniqueItems": True}
    accepts = schema_language(schema)
    assert accepts('["string","null"]') and accepts(json.dumps(types, separators=(",", ":")))
    assert not accepts('["string","string"]') and not accepts("[]")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "uniqueItems": True},
        {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        {"type": "array", "items": {"enum": list(range(11))}, "uniqueItems": True},
        {"type": "array", "items": {"type": "integer", "minimum": 0}, "uniqueItems": True},
        {
            "type": "array",
            "prefixItems": [{"const": 1}],
            "uniqueItems": True,
        },
    ],
)
def test_other_unique_items_are_still_reported(schema: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedFeatureError) as raised:
        schema_to_ir(schema, options=JsonOptions())
    assert raised.value.features == [("", "uniqueItems")]


def test_a_small_max_items_admits_more_values() -> None:
    schema = {
        "type": "array",
        "items": {"enum": list(range(40))},
        "maxItems": 2,
        "uniqueItems": True,
    }
    accepts = schema_language(schema)
    assert accepts("[3,39]") and not accepts("[7,7]") and not accepts("[1,2,3]")
