"""anyOf/oneOf/allOf/not/if, enum/const, dependencies: merged, distributed, negated."""

from __future__ import annotations

import json

import jsonschema
import pytest

from fsmcompile.errors import UnsupportedFeatureError
from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir

from .conftest import Raw


def test_allof_merges_object_properties_and_bounds(accepts) -> None:
    check = accepts(
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}},
                {"properties": {"a": {"maximum": 5}, "b": {"type": "string"}}, "required": ["a"]},
            ]
        }
    )
    assert check({"a": 3}) and check({"a": 0, "b": "x"})
    assert not check({"a": 6}) and not check({}) and not check({"a": 1, "b": 2})


def test_allof_intersects_string_patterns_and_lengths(accepts) -> None:
    check = accepts(
        {"allOf": [{"type": "string", "pattern": "^a"}, {"pattern": "z$"}, {"maxLength": 4}]}
    )
    assert check("abz") and not check("abcdz") and not check("bz")


def test_anyof_nullable_forms(accepts) -> None:
    for schema in (
        {"type": ["integer", "null"]},
        {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    ):
        check = accepts(schema)
        assert check(1) and check(None) and not check("x")


def test_oneof_with_distinct_types_is_exact(accepts) -> None:
    check = accepts({"oneOf": [{"type": "string"}, {"type": "integer"}]})
    assert check("a") and check(1) and not check(None)


def test_oneof_discriminator_is_accepted(accepts) -> None:
    cat = {
        "type": "object",
        "properties": {"kind": {"const": "cat"}, "meows": {"type": "boolean"}},
        "required": ["kind"],
    }
    dog = {
        "type": "object",
        "properties": {"kind": {"const": "dog"}, "barks": {"type": "boolean"}},
        "required": ["kind"],
    }
    check = accepts({"oneOf": [cat, dog]})
    assert check({"kind": "cat", "meows": True}) and check({"kind": "dog"})
    assert not check({"kind": "cow"})


def test_oneof_overlapping_required_sets_is_exclusive(accepts) -> None:
    check = accepts({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]})
    assert check({"a": 1}) and check({"b": 1}) and not check({"a": 1, "b": 2}) and not check({})


def test_oneof_of_bare_refs_is_exclusive_through_their_targets(accepts) -> None:
    # Bare `$ref` options (annotations aside, chains followed) are negated as their
    # targets: without that, this overlapping pair was reported as not enforceable.
    schema = {
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
        "$defs": {
            "private": {"title": "Private", "properties": {"target": {"type": "string"}}},
            "group": {"properties": {"channel": {"type": "string"}}},
            "group_alias": {"$ref": "#/$defs/group", "description": "a chain"},
        },
        "oneOf": [{"$ref": "#/$defs/private"}, {"$ref": "#/$defs/group_alias"}],
    }
    check = accepts(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for value in (
        {"message": "m", "target": 1},  # only "group" holds
        {"message": "m", "channel": 2},  # only "private" holds
        {"message": "m"},  # both hold
        {"message": "m", "target": "t"},  # both hold
        {"message": "m", "target": 1, "channel": 2},  # neither holds
    ):
        assert check(value) == validator.is_valid(value), value
    assert check({"message": "m", "channel": 2}) and not check({"message": "m"})


def test_oneof_that_cannot_be_made_exclusive_is_reported_with_pointer() -> None:
    # Both branches accept [] and `not: {items: ...}` has no positive form here.
    branches = [{"items": {"type": "string"}}, {"items": {"type": "integer"}}]
    schema = {"properties": {"x": {"type": "array", "oneOf": branches}}}
    with pytest.raises(UnsupportedFeatureError) as info:
        schema_to_ir(schema, options=JsonOptions())
    assert ("/properties/x", "oneOf") in info.value.features
    relaxed = schema_to_ir(schema, options=JsonOptions(strict=False)).relaxed
    assert [(p, k) for p, k, _ in relaxed] == [("/properties/x", "oneOf")]


@pytest.mark.parametrize(
    ("schema", "values"),
    [
        (
            {"oneOf": [{"pattern": "a"}, {"pattern": "b"}]},
            ["a", "b", "xa", "ab", "ba", "c", "", 1, None, ["a"]],
        ),
        (
            {
                "type": "string",
                "oneOf": [
                    {"pattern": "^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$"},
                    {"pattern": "^[0-9A-F]{8}-([0-9A-F]{4}-){3}[0-9A-F]{12}$"},
                ],
            },
            [
                "0123abcd-0000-4000-8000-00000000abcd",
                "0123ABCD-0000-4000-8000-00000000ABCD",
                "01234567-0000-4000-8000-000000000000",
                "0123abCD-0000-4000-8000-00000000abcd",
            ],
        ),
        ({"not": {"pattern": "^a"}}, ["b", "ba", "a", "abc", "", 1, None]),
        ({"type": "string", "not": {"pattern": "[0-9]"}, "maxLength": 3}, ["abc", "a1", "abcd"]),
    ],
)
def test_overlapping_patterns_are_made_exclusive(accepts, schema, values) -> None:
    """oneOf over patterns that share strings, and `not: {pattern}`: every verdict is
    jsonschema's."""
    check = accepts(schema)
    validator = jsonschema.Draft202012Validator(schema)
    verdicts = {json.dumps(v): (check(v), validator.is_valid(v)) for v in values}
    assert {k: ours for k, (ours, _) in verdicts.items()} == {
        k: theirs for k, (_, theirs) in verdicts.items()
    }
    assert any(ours for ours, _ in verdicts.values())
    assert not all(ours for ours, _ in verdicts.values())


def test_not_shapes_are_lowered(accepts) -> None:
    check = accepts({"type": ["string", "integer"], "not": {"enum": ["a", 3]}})
    assert check("b") and check(4) and not check("a") and not check(3)
    check = accepts({"not": {"minimum": 3}})  # "x" satisfies minimum: it fails the not
    assert check(2) and not check("x") and not check(3)
    check = accepts({"type": "object", "not": {"required": ["secret"]}})
    assert check({"a": 1}) and not check({"secret": 1})


def test_if_then_else_with_negatable_condition(accepts) -> None:
    check = accepts(
        {
            "type": "object",
            "properties": {"c": {"enum": ["x", "y"]}, "n": {"type": "integer"}},
            "if": {"properties": {"c": {"const": "x"}}},
            "then": {"required": ["n"]},
        }
    )
    assert check({"c": "x", "n": 1}) and check({"c": "y"}) and not check({"c": "x"})


def test_dependent_required(accepts) -> None:
    check = accepts(
        {"type": "object", "properties": {"a": {}, "b": {}}, "dependentRequired": {"a": ["b"]}}
    )
    assert check({}) and check({"b": 1}) and check({"a": 1, "b": 2}) and not check({"a": 1})


def test_enum_const_values_are_validated_against_siblings(accepts) -> None:
    check = accepts({"enum": [1, "a", None, {"x": [1, 2]}, 7], "not": {"const": 7}})
    assert check(1) and check(1.0) and check("a") and check(None) and check({"x": [1, 2]})
    assert not check(7) and not check(2) and not check(True)


def test_every_unsupported_keyword_is_listed_at_once() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "uniqueItems": True},
            "n": {"type": "integer", "multipleOf": 3},
            "s": {"type": "array", "not": {"items": {"type": "string"}}},
        },
        "if": {"properties": {"x": {"type": "string"}}},  # its annotations decide
        "unevaluatedProperties": False,
    }
    with pytest.raises(UnsupportedFeatureError) as info:
        schema_to_ir(schema, options=JsonOptions())
    assert sorted(info.value.features) == [
        ("", "unevaluatedProperties"),
        ("/properties/n", "multipleOf"),
        ("/properties/s", "not"),
        ("/properties/tags", "uniqueItems"),
    ]
    lenient = schema_to_ir(schema, options=JsonOptions(strict=False))
    assert len(lenient.relaxed) == 4


def test_keyword_for_an_excluded_type_is_not_reported() -> None:
    schema_to_ir({"type": "string", "uniqueItems": True}, options=JsonOptions())


def test_annotations_are_ignored_silently() -> None:
    lowering = schema_to_ir(
        {
            "type": "integer",
            "title": "t",
            "description": "d",
            "default": 3,
            "examples": [1],
            "$comment": "c",
            "deprecated": True,
            "readOnly": True,
        },
        options=JsonOptions(),
    )
    assert lowering.relaxed == []


def test_oneof_branch_forbidding_a_required_key_is_disjoint(accepts) -> None:
    # Compiled strictly (the fixture raises on anything unenforced): the second branch
    # requires `ref`, which the first forbids, so no object can match both.
    custom = {
        "properties": {"mode": {"enum": ["custom"]}, "name": {"type": "string"}},
        "additionalProperties": False,
    }
    reference = {
        "properties": {"mode": {"enum": ["reference"]}, "ref": {"type": "string"}},
        "required": ["ref"],
        "additionalProperties": False,
    }
    check = accepts({"type": "object", "oneOf": [custom, reference]})
    assert check({}) and check({"mode": "custom", "name": "x"}) and check({"ref": "r"})
    assert check({"mode": "reference", "ref": "r"})
    assert not check({"mode": "custom", "ref": "r"}) and not check({"name": "x", "ref": "r"})


def test_oneof_discriminator_need_not_be_required_on_both_sides(accepts) -> None:
    a = {"properties": {"kind": {"const": "a"}}, "required": ["kind"]}
    b = {"properties": {"kind": {"const": "b"}, "size": {"type": "integer"}}}
    check = accepts({"type": "object", "oneOf": [a, b]})
    assert check({"kind": "a"}) and check({"kind": "b"}) and check({}) and check({"size": 1})
    assert not check({"kind": "c"})


def test_oneof_of_disjoint_string_patterns_is_exact(accepts) -> None:
    check = accepts(
        {"type": "string", "oneOf": [{"pattern": "^Normal -"}, {"pattern": "^Primary -"}]}
    )
    assert check("Normal - lung") and check("Primary - x")
    assert not check("Normal") and not check("Other - x")


def test_oneof_branch_types_are_read_through_anyof(accepts) -> None:
    # JSON:API relationship data: to-one (null or an object) or to-many (an array).
    to_one = {"anyOf": [{"type": "null"}, {"type": "object", "required": ["id"]}]}
    to_many = {"type": "array", "items": {"type": "object", "required": ["id"]}}
    check = accepts({"oneOf": [to_one, to_many]})
    assert check(None) and check({"id": 1}) and check([]) and check([{"id": 1}])
    assert not check("x") and not check({}) and not check([{}])


def test_strings_outside_a_negated_pattern_are_spelled_narrowly(accepts) -> None:
    """The documented narrowing: an escape a character does not need (`\\u0062` for b)
    could hide the excluded text, so it is refused; needed escapes are kept."""
    check = accepts({"type": "string", "not": {"pattern": "^a"}})
    assert check(Raw('"b\\n"')) and check(Raw('"bé"')) and check(Raw('"\\""'))
    assert not check(Raw('"\\u0061"')) and not check(Raw('"\\u0062"')) and not check("ab")


_HTTP = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"domain": {"type": "string"}, "port": {"type": "integer"}},
}
_PARAM = {"type": "object", "additionalProperties": False, "properties": {"encoded": {}}}


@pytest.mark.parametrize(
    "schema",
    [
        # Both closed objects take `{}`: it matches two branches, so it is refused.
        {"oneOf": [_HTTP, _PARAM]},
        {
            "$defs": {"h": _HTTP, "p": _PARAM},
            "oneOf": [{"$ref": "#/$defs/h"}, {"$ref": "#/$defs/p"}],
        },
        # Only one takes `{}` (the other requires a key): `{}` is valid.
        {"oneOf": [_HTTP, {**_PARAM, "required": ["encoded"]}]},
        # Three branches, one of them not an object at all.
        {"oneOf": [_HTTP, _PARAM, {"type": "string"}]},
    ],
)
def test_oneof_of_objects_closed_to_disjoint_keys_is_exact(accepts, schema) -> None:
    check = accepts(schema)
    validator = jsonschema.Draft202012Validator(schema)
    values = [{}, {"domain": "a"}, {"domain": "b", "port": 1}, {"encoded": None}, {"encoded": 1}]
    values += [{"domain": "a", "encoded": 1}, {"port": "x"}, "s", 3, None, [{}]]
    for value in values:
        assert check(value) == validator.is_valid(value), value


def test_oneof_of_closed_objects_sharing_a_key_is_still_reported() -> None:
    shared = {**_PARAM, "properties": {"domain": {}}}
    with pytest.raises(UnsupportedFeatureError, match="oneOf"):
        schema_to_ir({"oneOf": [_HTTP, shared]}, options=JsonOptions())


def test_anyof_branch_keys_keep_the_place_of_their_group(accepts) -> None:
    # An allOf whose first member is a oneOf: the branch's keys come before the keys of
    # the later allOf member, as written; around a group written on the schema itself
    # they still come after that schema's own keys.
    check = accepts(
        {
            "allOf": [
                {
                    "oneOf": [
                        {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
                        {"properties": {"kind": {"const": "b"}, "size": {"type": "integer"}}},
                    ]
                },
                {"properties": {"id": {"type": "integer"}}, "required": ["id"]},
            ]
        }
    )
    assert check({"kind": "a", "id": 1}) and check({"kind": "b", "size": 2, "id": 3})
    assert not check({"id": 1, "kind": "a"}) and not check({"kind": "c", "id": 1})
    nested = accepts(
        {
            "properties": {"id": {"type": "integer"}},
            "required": ["id"],
            "anyOf": [{"properties": {"kind": {"type": "string"}}, "required": ["kind"]}],
        }
    )
    assert nested({"id": 1, "kind": "x"}) and not nested({"kind": "x", "id": 1})


def test_ref_targets_of_allof_members_come_before_the_referrer(accepts) -> None:
    # "`$ref` targets first" holds for a `$ref` inside an `allOf` member too: the
    # referenced base schema's keys come before the keys listed beside the `allOf`.
    schema = {
        "$defs": {"base": {"properties": {"id": {"type": "integer"}}, "required": ["id"]}},
        "type": "object",
        "allOf": [{"$ref": "#/$defs/base"}],
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    }
    check = accepts(schema)
    assert check({"id": 1, "name": "x"})
    assert not check({"name": "x", "id": 1}) and not check({"id": 1})
    later = accepts({**schema, "allOf": [{"properties": {"tag": {}}}, {"$ref": "#/$defs/base"}]})
    assert later({"id": 1, "name": "x", "tag": 2}) and not later({"name": "x", "tag": 2, "id": 1})
