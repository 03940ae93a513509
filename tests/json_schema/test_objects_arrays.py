"""Objects and arrays: order, optional members, extras, counts, positional items."""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import pytest

from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir
from fsmcompile.ir.nodes import And, nodes

from .conftest import Raw


def test_object_optional_properties_any_subset_in_schema_order(accepts) -> None:
    names = ["a", "b", "c", "d"]
    schema = {
        "type": "object",
        "properties": {n: {"type": "integer"} for n in names},
        "additionalProperties": False,
    }
    check = accepts(schema)
    for size in range(len(names) + 1):
        for subset in itertools.combinations(names, size):
            assert check({k: 1 for k in subset}), subset
    assert not check({"b": 1, "a": 1})  # out of schema order (documented)
    assert not check(Raw('{,"a":1}')) and not check(Raw('{"a":1,}'))
    assert not check(Raw('{"a":1"b":1}')) and not check(Raw('{"a":1,,"b":1}'))


def test_object_required_after_optional(accepts) -> None:
    check = accepts(
        {"properties": {"a": {}, "b": {}, "c": {}}, "required": ["c"], "type": "object"}
    )
    assert check({"c": 1}) and check({"a": 1, "c": 2}) and check({"a": 1, "b": 2, "c": 3})
    assert not check({"a": 1}) and not check({})


def test_object_many_optional_properties_stay_linear() -> None:
    props = {f"p{i}": {"type": "integer"} for i in range(40)}
    closed = {"type": "object", "properties": props, "additionalProperties": False}
    node = schema_to_ir(closed, options=JsonOptions()).node
    assert isinstance(node, And)  # the member checker instead of 40 alternatives
    # With free-form extras the members are counted in a shared chain instead.
    lowering = schema_to_ir({"type": "object", "properties": props}, options=JsonOptions())
    assert len(list(nodes(lowering.node))) < 40 * 30


def test_object_many_optional_properties_subset_matches(accepts) -> None:
    props = {f"p{i}": {"type": "integer"} for i in range(30)}
    check = accepts({"type": "object", "properties": props, "additionalProperties": False})
    assert check({"p3": 1, "p17": 2, "p29": 3}) and check({}) and check({"p0": 0})
    assert not check({"p17": 2, "p3": 1}) and not check({"x": 1})


def test_additional_properties_default_allows_other_keys_after_listed(accepts) -> None:
    check = accepts({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert check({"a": 1, "zzz": [1, {"k": None}]})
    assert check({"other": "x"})
    assert not check({"a": "not an integer"})
    assert not check({"zzz": 1, "a": "x"})  # a listed key cannot hide among the extras


def test_additional_properties_schema_and_patterns(accepts) -> None:
    check = accepts(
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}},
            "patternProperties": {"^x-": {"type": "string"}},
            "additionalProperties": {"type": "boolean"},
        }
    )
    assert check({"id": 1, "x-a": "s", "flag": True})
    assert not check({"x-a": 1}) and not check({"flag": "s"})


def test_overlapping_pattern_properties_are_exact(accepts) -> None:
    # JSON:API attributes: any word key, but the reserved names (which also match \w+)
    # are refused, and keys matching neither pattern are not allowed at all.
    check = accepts(
        {
            "type": "object",
            "patternProperties": {
                "^\\w[-\\w_]*$": {},
                "^(relationships|links)$": {"not": {}},
            },
            "additionalProperties": False,
        }
    )
    assert check({"title": "x", "body": [1, {"k": None}]}) and check({"links2": 1})
    assert not check({"links": 1}) and not check({"relationships": {}})
    assert not check({"-dash": 1}) and not check({"a b": 1})
    assert not check(Raw('{"\\u006cinks":1}'))  # "links" in disguise


def test_a_key_matching_each_parts_pattern_is_exempt_from_their_additional_properties(
    accepts,
) -> None:
    # Each allOf part closes the object to its own pattern: a key must contain both a
    # and b, and such a key is extra to neither part. Every part's additionalProperties
    # used to apply to every pattern key of the other parts, which refused them all.
    closed_to = [
        {"patternProperties": {letter: True}, "additionalProperties": False} for letter in "ab"
    ]
    schema = {"type": "object", "allOf": closed_to, "minProperties": 1}
    check = accepts(schema)
    validator = jsonschema.Draft202012Validator(schema)
    values: list[Any] = [{"ab": 1}, {"ba": [], "xaxb": {}}, {"a": 1}, {"b": 1}, {}, {"x": 1}]
    values += [{"ab": 1, "a": 2}]
    for value in values:
        assert check(value) is validator.is_valid(value), value
    # JSONSchemaBench Handwritten/allOfPProp1: at least four keys, none of 1-3 characters.
    short = {"patternProperties": {"^.{1,3}$": False}, "additionalProperties": True}
    schema = {"type": "object", "allOf": [short, *closed_to], "minProperties": 4}
    check = accepts(schema)
    assert check({"abcd": 1, "abce": 2, "abcf": 3, "abcg": [4]})
    assert not check({"abcd": 1, "abce": 2, "abcf": 3})
    assert not check({"abcd": 1, "abce": 2, "abcf": 3, "ab": 4})


def test_a_key_matching_several_patterns_of_one_part_satisfies_each(accepts) -> None:
    schema = {
        "type": "object",
        "patternProperties": {"^a": {"type": "integer"}, "b$": {"minimum": 2}},
        "additionalProperties": {"type": "string"},
    }
    check = accepts(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for value in ({"ab": 2}, {"ab": 1}, {"ax": 1}, {"xb": 1.5}, {"xb": "s"}, {"x": "s"}, {"x": 1}):
        assert check(value) is validator.is_valid(value), value


def test_property_names_and_counts(accepts) -> None:
    check = accepts(
        {
            "type": "object",
            "propertyNames": {"maxLength": 3},
            "minProperties": 1,
            "maxProperties": 2,
        }
    )
    assert check({"abc": 1}) and check({"a": 1, "b": 2})
    assert not check({}) and not check({"a": 1, "b": 2, "c": 3}) and not check({"abcd": 1})


def test_required_forbidden_by_additional_properties_false_is_an_error() -> None:
    from fsmcompile.errors import SchemaError

    with pytest.raises(SchemaError, match="forbidden by additionalProperties") as info:
        schema_to_ir(
            {"properties": {"a": {}}, "required": ["b"], "additionalProperties": False},
            options=JsonOptions(),
        )
    assert info.value.pointer == "/required" and info.value.keyword == "required"


def test_array_prefix_items_rest_and_counts(accepts) -> None:
    check = accepts(
        {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "boolean"}],
            "items": {"type": "string"},
            "minItems": 1,
            "maxItems": 4,
        }
    )
    assert check([1]) and check([1, True]) and check([1, True, "a", "b"])
    assert not check([]) and not check([1, True, "a", "b", "c"]) and not check(["a"])


def test_draft07_array_items_and_additional_items(accepts) -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "items": [{"type": "integer"}],
        "additionalItems": False,
    }
    check = accepts(schema)
    assert check([1]) and check([]) and not check([1, 2]) and check("not an array")


def test_large_bounds_keep_the_ir_compact() -> None:
    node = schema_to_ir(
        {
            "type": "array",
            "maxItems": 50,
            "items": {
                "type": "object",
                "properties": {"a": {"type": "string", "maxLength": 100000}},
            },
        },
        options=JsonOptions(),
    ).node
    assert dag_size(node) < 5_000  # distinct nodes: Repeat bounds, nothing unrolled


def dag_size(node) -> int:
    seen: set[int] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        stack.extend(getattr(item, "items", ()))
        if hasattr(item, "item"):
            stack.append(item.item)
    return len(seen)


@pytest.mark.parametrize("whitespace", ["standard", "flexible"])
def test_whitespace_modes(accepts, whitespace: str) -> None:
    import json

    check = accepts(
        {
            "type": "object",
            "properties": {"a": {"type": "array", "items": {"type": "integer"}}},
            "required": ["a"],
        },
        whitespace=whitespace,
    )
    assert check(Raw(json.dumps({"a": [1, 2]})))  # ", " and ": "
    pretty = json.dumps({"a": [1, 2]}, indent=2)
    assert check(Raw(pretty)) is (whitespace == "flexible")
    assert check(Raw('{"a":[1,2]}')) is (whitespace == "flexible")


def test_contains_counts_matching_items(accepts) -> None:
    check = accepts({"type": "array", "contains": {"const": 1}, "minContains": 2, "maxContains": 3})
    assert check([1, 1]) and check([1, 2, 1, 1]) and check([2, 1, 2, 1])
    assert not check([1]) and not check([1, 1, 1, 1]) and not check([2, 2])
    check = accepts(
        {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5}, "maxItems": 2}
    )
    assert check([5]) and check([1, 7]) and not check([1, 2]) and not check([1, 2, 9])


def test_lowering_stops_at_its_deadline() -> None:
    import time

    from fsmcompile.errors import BudgetExceededError

    with pytest.raises(BudgetExceededError) as info:
        schema_to_ir(
            {"properties": {"a": {}}}, options=JsonOptions(), deadline=time.monotonic() - 1
        )
    assert info.value.limit == "timeout_s"
