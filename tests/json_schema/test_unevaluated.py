"""`unevaluatedProperties` / `unevaluatedItems` where the evaluated set is static.

After `anyOf`/`oneOf`/`if` are distributed, each branch knows which subschemas hold, so
what they evaluate is a fixed set of keys, patterns or a prefix length, and the keyword
becomes an `additionalProperties` (`items`) beside them. These tests compare the
compiled language with `jsonschema` on hand-picked and generated schemas, walk a real
tokenizer's index, and check that the shapes whose evaluated set depends on the values
(`contains`, an `if` without branches, `$dynamicRef`, wide `anyOf`s) stay reported.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fsmcompile.errors import SpecError, UnsupportedFeatureError
from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir

from .conftest import compact
from .language import schema_language
from .walks import gpt2_index, walk_to_end

DRAFT = "https://json-schema.org/draft/2020-12/schema"

CASES: list[tuple[str, dict[str, Any], list[Any], list[Any]]] = [
    (
        "beside properties",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "unevaluatedProperties": False,
        },
        [{}, {"a": 1}],
        [{"b": 1}, {"a": 1, "b": 2}, {"a": "x"}],
    ),
    (
        "sees through allOf and $ref",
        {
            "$defs": {"b": {"properties": {"b": {"type": "string"}}}},
            "allOf": [{"properties": {"a": True}}, {"$ref": "#/$defs/b"}],
            "unevaluatedProperties": False,
        },
        [{"b": "x", "a": 1}, {"b": "x"}, {}, 3],  # `$ref` targets first
        [{"c": 1}, {"a": 1, "c": 2}, {"b": 1}],
    ),
    (
        "a schema for the rest",
        {
            "properties": {"a": True},
            "patternProperties": {"^x": {"type": "integer"}},
            "unevaluatedProperties": {"type": "string"},
        },
        [{"a": None, "x1": 1, "z": "s"}, {"z": "s", "w": "t"}],
        [{"z": 1}, {"x1": "s"}],
    ),
    (
        "every anyOf option that holds",
        {
            "anyOf": [
                {"properties": {"a": {"const": 1}}, "required": ["a"]},
                {"properties": {"b": {"const": 2}}, "required": ["b"]},
            ],
            "unevaluatedProperties": False,
        },
        [{"a": 1}, {"b": 2}, {"a": 1, "b": 2}],
        [{"a": 1, "b": 3}, {"a": 1, "c": 0}, {}],
    ),
    (
        "the oneOf option that holds",
        {
            "oneOf": [
                {"properties": {"kind": {"const": "x"}, "x": True}, "required": ["kind"]},
                {"properties": {"kind": {"const": "y"}, "y": True}, "required": ["kind"]},
            ],
            "unevaluatedProperties": False,
        },
        [{"kind": "x", "x": 1}, {"kind": "y", "y": 1}],
        [{"kind": "x", "y": 1}, {"kind": "y", "x": 1}],
    ),
    (
        "if and then, or else",
        {
            "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
            "then": {"properties": {"a": True}},
            "else": {"properties": {"b": True}},
            "unevaluatedProperties": False,
        },
        [{"kind": "a", "a": 1}, {"b": 1}, {}],
        [{"kind": "a", "b": 1}, {"kind": "c"}, {"a": 1}],
    ),
    (
        "dependentSchemas when its key is present",
        {
            "properties": {"a": True},
            "dependentSchemas": {"a": {"properties": {"b": True}}},
            "unevaluatedProperties": False,
        },
        [{"a": 1, "b": 2}, {"a": 1}],
        [{"b": 2}],
    ),
    (
        "not drops annotations",
        {
            "properties": {"a": True},
            "not": {"not": {"properties": {"b": True}}},
            "unevaluatedProperties": False,
        },
        [{"a": 1}],
        [{"a": 1, "b": 2}],
    ),
    (
        "a nested unevaluatedProperties evaluates the rest",
        {
            "allOf": [{"properties": {"a": True}, "unevaluatedProperties": True}],
            "unevaluatedProperties": False,
        },
        [{"a": 1, "z": 2}],
        [],
    ),
    (
        "additionalProperties evaluates every key",
        {
            "allOf": [{"properties": {"a": True}, "additionalProperties": {"type": "integer"}}],
            "unevaluatedProperties": False,
        },
        [{"a": "s", "z": 2}],
        [{"z": "s"}],
    ),
    (
        "an uncle's properties do not count",
        {
            "allOf": [{"properties": {"a": True}}, {"unevaluatedProperties": False}],
        },
        [{}],
        [{"a": 1}],
    ),
    (
        "items beside prefixItems",
        {"prefixItems": [{"type": "integer"}, True], "unevaluatedItems": False},
        [[], [1], [1, "x"]],
        [[1, "x", None], ["x"]],
    ),
    (
        "items through allOf, and an items schema",
        {
            "allOf": [{"prefixItems": [True, True]}],
            "prefixItems": [{"type": "string"}],
            "unevaluatedItems": {"type": "integer"},
        },
        [["a", None, 3, 4], ["a"]],
        [["a", None, "x"], [1]],
    ),
    (
        "items is everything",
        {"allOf": [{"items": {"type": "integer"}}], "unevaluatedItems": False},
        [[1, 2, 3], []],
        [["x"]],
    ),
]


@pytest.mark.parametrize(("name", "schema", "valid", "invalid"), CASES, ids=[c[0] for c in CASES])
def test_unevaluated_static_cases_match_jsonschema(
    name: str, schema: dict[str, Any], valid: list[Any], invalid: list[Any]
) -> None:
    schema = {"$schema": DRAFT, **schema}
    validator = jsonschema.Draft202012Validator(schema)
    accepts = schema_language(schema)
    for instance in valid:
        assert validator.is_valid(instance), instance
        assert accepts(compact(instance)), instance
    for instance in invalid:
        assert not validator.is_valid(instance), instance
        assert not any(accepts(compact(v)) for v in _key_orders(instance)), instance


def _key_orders(instance: Any) -> list[Any]:
    """The instance with its top-level keys in every order (it is valid in all or none)."""
    if not isinstance(instance, dict):
        return [instance]
    return [dict(p) for p in itertools.permutations(instance.items())]


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"prefixItems": [True], "contains": {"type": "string"}, "unevaluatedItems": False}, ""),
        ({"if": {"patternProperties": {"f": True}}, "unevaluatedProperties": False}, ""),
        (
            {"anyOf": [{"properties": {k: True}} for k in "abcde"], "unevaluatedProperties": False},
            "",
        ),
        (
            {
                "allOf": [
                    {"anyOf": [{"properties": {f"{k}{i}": True}} for i in range(3)]} for k in "abcd"
                ],
                "unevaluatedProperties": False,
            },
            "",
        ),
    ],
    ids=["contains", "if-alone", "wide-anyOf", "intersected-groups"],
)
def test_unevaluated_not_static_stays_reported(schema: dict[str, Any], pointer: str) -> None:
    with pytest.raises(UnsupportedFeatureError, match="unevaluated") as exc:
        schema_to_ir({"$schema": DRAFT, **schema}, options=JsonOptions())
    assert (pointer, "unevaluatedProperties") in exc.value.features or (
        pointer,
        "unevaluatedItems",
    ) in exc.value.features


def test_unevaluated_wide_anyof_that_annotates_nothing_is_static() -> None:
    schema = {
        "anyOf": [{"required": [k]} for k in "abcde"],
        "properties": dict.fromkeys("abcde", True),
        "unevaluatedProperties": False,
    }
    accepts = schema_language(schema)
    assert accepts('{"a":1,"e":2}') and not accepts('{"a":1,"f":2}') and not accepts("{}")


KEYS = ["a", "b", "xa"]
VALUES: list[Any] = [True, {"type": "integer"}, {"type": "string"}]


@st.composite
def _object_part(draw: st.DrawFn) -> dict[str, Any]:
    part: dict[str, Any] = {}
    listed = draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True))
    if listed:
        part["properties"] = {k: draw(st.sampled_from(VALUES)) for k in listed}
    if draw(st.integers(0, 3)) == 0:
        part["patternProperties"] = {"^x": draw(st.sampled_from(VALUES))}
    if draw(st.integers(0, 2)) == 0:
        part["required"] = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=1))
    if draw(st.integers(0, 5)) == 0:
        part["additionalProperties"] = draw(st.sampled_from(VALUES))
    return part


def _around(
    draw: st.DrawFn, part: Any, shapes: list[str], keyword: str, base: dict[str, Any]
) -> dict[str, Any]:
    """A schema with its own keywords and parts drawn by `part` under one of `shapes`,
    and the unevaluated `keyword` beside them."""
    schema: dict[str, Any] = {**base, **draw(part())}
    shape = draw(st.sampled_from(shapes))
    parts = draw(st.lists(part(), min_size=1, max_size=3))
    if shape == "if":
        schema.update({"if": parts[0], "then": parts[-1]})
        if len(parts) > 2:
            schema["else"] = parts[1]
    elif shape == "ref":
        schema["$defs"] = {"d": parts[0]}
        schema["$ref"] = "#/$defs/d"
    else:
        schema[shape] = parts
    schema[keyword] = draw(st.sampled_from([False, {"type": "integer"}]))
    return {"$schema": DRAFT, **schema}


@st.composite
def _schemas(draw: st.DrawFn) -> dict[str, Any]:
    shapes = ["allOf", "anyOf", "oneOf", "if", "ref"]
    return _around(draw, _object_part, shapes, "unevaluatedProperties", {"type": "object"})


_instances = st.dictionaries(st.sampled_from([*KEYS, "z"]), st.sampled_from([1, "s"]), max_size=3)


@st.composite
def _array_part(draw: st.DrawFn) -> dict[str, Any]:
    part: dict[str, Any] = {}
    prefix = draw(st.lists(st.sampled_from(VALUES), max_size=3))
    if prefix:
        part["prefixItems"] = prefix
    if draw(st.integers(0, 3)) == 0:
        part["items"] = draw(st.sampled_from(VALUES))
    if draw(st.integers(0, 2)) == 0:
        part["minItems"] = draw(st.integers(1, 2))
    return part


@st.composite
def _array_schemas(draw: st.DrawFn) -> dict[str, Any]:
    shapes = ["allOf", "anyOf", "if", "ref"]
    return _around(draw, _array_part, shapes, "unevaluatedItems", {"type": "array"})


_arrays = st.lists(st.sampled_from([1, "s"]), max_size=4)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_unevaluated_keywords_decide_like_jsonschema(data: st.DataObject) -> None:
    objects = data.draw(st.booleans(), label="objects")
    schema = data.draw(_schemas() if objects else _array_schemas(), label="schema")
    drawn = data.draw(st.lists(_instances if objects else _arrays, min_size=6, max_size=6))
    validator = jsonschema.Draft202012Validator(schema)
    try:
        accepts = schema_language(schema)
    except UnsupportedFeatureError as exc:
        # Only an overlapping oneOf or a non-negatable `if` (and so the unevaluated
        # keyword above it) may stay unsupported here.
        keywords = {k for _, k in exc.features}
        keyword = "unevaluatedProperties" if objects else "unevaluatedItems"
        assert keywords & {"oneOf", "if"}, exc.features
        assert keywords <= {"oneOf", "if", keyword}, exc.features
        return
    except SpecError:
        assert not any(validator.is_valid(instance) for instance in drawn)
        return
    for instance in drawn:
        accepted = any(accepts(compact(v)) for v in _key_orders(instance))
        # Sound: no key order of an invalid instance is accepted. Complete up to the
        # documented key order: some order of a valid one is.
        assert accepted is validator.is_valid(instance), instance


UNEVALUATED_CONFIG = {
    "$schema": DRAFT,
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 6}},
    "required": ["name"],
    "anyOf": [
        {"properties": {"port": {"type": "integer", "minimum": 1, "maximum": 99}}},
        {
            "properties": {
                "tags": {
                    "type": "array",
                    "prefixItems": [{"enum": ["x", "y"]}],
                    "unevaluatedItems": False,
                }
            }
        },
    ],
    "unevaluatedProperties": False,
}


@pytest.mark.parametrize("seed", range(4))
def test_unevaluated_token_walks_end_in_valid_instances(seed: int) -> None:
    index = gpt2_index(UNEVALUATED_CONFIG)
    # Every value is bounded (name, port, one tag): a walk ends.
    text = walk_to_end(index, seed)
    jsonschema.validate(json.loads(text), UNEVALUATED_CONFIG)
    for text, ok in (
        ('{"name":"ab","port":7}', True),
        ('{"name":"ab","tags":["x"]}', True),
        ('{"name":"ab","port":7,"tags":["y"]}', True),
        ('{"name":"ab","tags":["x","y"]}', False),
        ('{"name":"ab","other":1}', False),
    ):
        assert index.dfa.matches(text.encode()) is ok, text
