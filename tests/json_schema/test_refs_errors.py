"""$ref resolution (pointers, $id, $anchor, remotes, recursion) and schema errors."""

from __future__ import annotations

from typing import Any

import pytest

from fsmcompile.errors import SchemaError, UnsupportedFeatureError
from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir


def test_ref_to_defs_and_definitions(accepts) -> None:
    check = accepts(
        {
            "$defs": {"pos": {"type": "integer", "minimum": 1}},
            "definitions": {"name": {"type": "string"}},
            "type": "object",
            "properties": {"n": {"$ref": "#/$defs/pos"}, "s": {"$ref": "#/definitions/name"}},
            "additionalProperties": False,
        }
    )
    assert check({"n": 1, "s": "x"}) and not check({"n": 0}) and not check({"s": 1})


def test_ref_by_id_and_anchor(accepts) -> None:
    check = accepts(
        {
            "$id": "http://example.com/root.json",
            "type": "array",
            "items": [{"$ref": "item.json"}, {"$ref": "#flag"}],
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {
                "item": {"$id": "item.json", "type": "integer"},
                "flag": {"$id": "#flag", "type": "boolean"},
            },
        }
    )
    assert check([1, True]) and not check([True, 1])


@pytest.mark.parametrize(
    ("dialect", "identifier"),
    [
        ("http://json-schema.org/draft-04/schema#", "$id"),
        ("http://json-schema.org/draft-07/schema#", "id"),
    ],
)
def test_the_other_dialects_identifier_spelling_does_not_move_the_base(
    accepts, dialect: str, identifier: str
) -> None:
    # Draft-04 names a schema's identifier `id`, later drafts `$id`; the other spelling is
    # an unknown keyword. Tools write draft-04 schemas with `$id` pointers on every
    # subschema (JSON Schema Store's cryproj): `#/definitions/...` under one of them must
    # still resolve against the document, as a draft-04 validator resolves it.
    check = accepts(
        {
            "$schema": dialect,
            "definitions": {"name": {"type": "string", "maxLength": 3}},
            "type": "object",
            "properties": {
                "name": {identifier: "/properties/name", "$ref": "#/definitions/name"},
            },
        }
    )
    assert check({"name": "abc"}) and not check({"name": "abcd"}) and not check({"name": 1})


def test_a_draft_04_id_moves_the_base(accepts) -> None:
    check = accepts(
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "id": "http://example.com/root.json",
            "type": "array",
            "items": {"$ref": "item.json"},
            "definitions": {"item": {"id": "item.json", "type": "integer"}},
        }
    )
    assert check([1, 2]) and not check(["x"])


def test_ref_to_remote_schema() -> None:
    remote = {"http://example.com/schemas/int.json": {"type": "integer", "maximum": 3}}
    lowering = schema_to_ir(
        {"$ref": "http://example.com/schemas/int.json"},
        options=JsonOptions(remote_schemas=remote),
    )
    from .conftest import dfa_of

    dfa = dfa_of(lowering.node)
    assert dfa.matches(b"3") and not dfa.matches(b"4")


def test_recursive_ref_becomes_a_rule_with_no_depth_limit(accepts) -> None:
    tree = {
        "type": "object",
        "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["v"],
        "additionalProperties": False,
    }
    lowering = schema_to_ir(tree, options=JsonOptions())
    assert not lowering.regular and len(lowering.rules) == 1
    check = accepts(tree)
    deep: dict = {"v": 0}
    for depth in range(1, 12):
        deep = {"v": depth, "kids": [deep, {"v": -depth}]}
    assert check(deep)
    assert check({"v": 1, "kids": []})
    assert not check({"v": 1, "kids": [{"kids": []}]})
    assert not check({"v": 1, "kids": [{"v": 2, "kids": [{"v": "3"}]}]})
    assert not check({"v": 1, "kids": [{"v": 2, "w": 3}]})


def test_schema_that_requires_endless_nesting_is_an_error() -> None:
    endless = {"properties": {"next": {"$ref": "#"}}, "required": ["next"], "type": "object"}
    with pytest.raises(SchemaError, match="endlessly nested"):
        schema_to_ir(endless, options=JsonOptions())


def test_free_form_values_nest_without_limit(accepts) -> None:
    check = accepts({"type": "object", "properties": {"a": {"type": "integer"}}})
    nested: Any = 1
    for _ in range(20):
        nested = {"k": [nested, None, "s"]}
    assert check({"a": 1, "b": nested}) and check(nested)
    assert not check({"a": "x", "b": nested})
    assert accepts({})(nested) and accepts(True)([nested, nested])


def test_pure_ref_cycle_does_not_hang() -> None:
    schema = {
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
        "$ref": "#/$defs/a",
    }
    schema_to_ir(schema, options=JsonOptions())


def test_unresolvable_ref_is_a_schema_error_with_pointer() -> None:
    with pytest.raises(SchemaError, match="cannot resolve \\$ref") as info:
        schema_to_ir({"properties": {"a": {"$ref": "#/$defs/missing"}}}, options=JsonOptions())
    assert info.value.pointer == "/properties/a" and info.value.keyword == "$ref"
    with pytest.raises(SchemaError, match="remote_schemas"):
        schema_to_ir({"$ref": "http://example.com/elsewhere.json"}, options=JsonOptions())


@pytest.mark.parametrize(
    "schema, fragment, pointer, keyword",
    [
        (
            {"minLength": 5, "maxLength": 3},
            "minLength 5 is greater than maxLength 3",
            "/minLength",
            "minLength",
        ),
        (
            {"properties": {"a": {"minItems": 4, "maxItems": 1}}},
            "minItems",
            "/properties/a/minItems",
            "minItems",
        ),
        ({"minimum": 5, "exclusiveMaximum": 5}, "no number fits", "/minimum", "minimum"),
        (
            {"minProperties": 3, "maxProperties": 2},
            "minProperties",
            "/minProperties",
            "minProperties",
        ),
        ({"type": "strin"}, "type must be one of", "/type", "type"),
        ({"minLength": -1}, "non-negative integer", "/minLength", "minLength"),
        (
            {"properties": {"a": 3}},
            "properties must map names to schemas",
            "/properties",
            "properties",
        ),
        ({"pattern": "("}, "invalid regex", "/pattern", "pattern"),
    ],
)
def test_malformed_or_contradictory_schema_errors(schema, fragment, pointer, keyword) -> None:
    with pytest.raises(SchemaError, match=fragment) as info:
        schema_to_ir(schema, options=JsonOptions())
    assert info.value.pointer == pointer
    assert info.value.keyword == keyword


def test_malformed_json_text_names_line_and_column() -> None:
    with pytest.raises(SchemaError, match="line 2, column 3") as info:
        schema_to_ir('{"type":\n  integer}', options=JsonOptions())
    assert info.value.pointer == ""


def test_json_text_schema_is_parsed() -> None:
    schema_to_ir('{"type": "integer"}', options=JsonOptions())


@pytest.mark.parametrize("schema", [[1, 2], 3, None])
def test_not_a_schema_is_an_error(schema) -> None:
    with pytest.raises(SchemaError, match="must be a JSON object or a boolean"):
        schema_to_ir(schema, options=JsonOptions())


@pytest.mark.parametrize(
    "schema", [False, {"not": {}}, {"allOf": [{"type": "string"}, {"type": "integer"}]}]
)
def test_empty_language_is_an_error(schema) -> None:
    with pytest.raises(SchemaError, match="accepts no JSON value"):
        schema_to_ir(schema, options=JsonOptions())


def test_options_are_validated() -> None:
    with pytest.raises(SchemaError, match="whitespace"):
        JsonOptions(whitespace="pretty")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("exponent_numbers", "yes"),
        ("integer_fractions", 1),
        ("strict", None),
        ("any_order_max", "3"),
        ("any_order_max", True),
        ("any_order_max", 2.5),
        ("nesting_limit", 1.5),
        ("max_whitespace_chars", "20"),
    ],
)
def test_option_values_of_the_wrong_type_are_refused_by_name(field: str, value: object) -> None:
    # Options come from requests too: "yes" must not pass as true (and key another
    # cache entry), nor "3" fail as a TypeError deep in a comparison.
    with pytest.raises(SchemaError, match=field):
        JsonOptions(**{field: value})  # type: ignore[arg-type]


def test_nesting_limit_unrolls_rules_into_a_dfa(accepts) -> None:
    tree = {"type": "array", "items": {"$ref": "#"}}
    exact, limited = accepts(tree), accepts(tree, nesting_limit=2)
    # The root array plus two nested levels of the recursive reference.
    for depth, ok in ((1, True), (3, True), (4, False), (9, False)):
        value: Any = []
        for _ in range(depth - 1):
            value = [value, []]
        assert exact(value)
        assert limited(value) is ok
    assert not limited([1]) and not exact([1])


def test_too_deeply_nested_schema_is_a_schema_error_at_the_limit_not_a_crash(gpt2) -> None:
    from fsmcompile.compiler import compile_spec
    from fsmcompile.frontend.json_schema.document import MAX_SCHEMA_DEPTH

    schema: Any = {"type": "integer"}
    for _ in range(300):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    with pytest.raises(SchemaError, match="nests deeper than") as info:
        compile_spec("json", schema, gpt2, cache=False)
    assert info.value.pointer == "/properties/a" * (MAX_SCHEMA_DEPTH // 2)


@pytest.mark.parametrize(
    "schema",
    [
        # Object keywords on an array (a real schema put them beside `items`).
        {"type": "array", "required": ["name"], "additionalProperties": False},
        {"type": "array", "minProperties": 3, "maxProperties": 1},
        {"type": ["array", "null"], "minLength": 5, "maxLength": 3},
        {"type": "string", "minimum": 5, "maximum": 1},
        {"type": "integer", "minItems": 2, "maxItems": 0},
    ],
)
def test_keywords_of_a_type_that_type_rules_out_never_contradict(schema, accepts) -> None:
    import jsonschema

    check = accepts(schema)
    for value in ([], [1, "a"], None, "abcd", 7, {"name": 1}):
        assert check(value) == jsonschema.Draft202012Validator(schema).is_valid(value), value


@pytest.mark.parametrize(
    "uri",
    [
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    ],
)
def test_ref_to_a_meta_schema_resolves_offline(uri: str) -> None:
    # The meta-schemas ship with jsonschema-specifications. What strict mode then
    # reports is what the meta-schema holds (uniqueItems, `format: regex`, dynamic refs),
    # not an unresolvable ref.
    with pytest.raises(UnsupportedFeatureError) as raised:
        schema_to_ir({"$ref": uri}, options=JsonOptions())
    keywords = {keyword for _, keyword in raised.value.features}
    assert keywords and keywords <= {"uniqueItems", "format", "$dynamicRef", "$recursiveRef"}
    assert schema_to_ir({"$ref": uri}, options=JsonOptions(strict=False)).relaxed


def test_ref_into_a_meta_schema_is_exact(accepts) -> None:
    base = "http://json-schema.org/draft-07/schema#/definitions/"
    check = accepts(
        {
            "type": "object",
            "properties": {
                "type": {"$ref": base + "simpleTypes"},
                "size": {"$ref": base + "nonNegativeInteger"},
            },
            "additionalProperties": False,
        }
    )
    assert check({"type": "string", "size": 0}) and check({"type": "null"})
    assert not check({"type": "strin"}) and not check({"size": -1})


def test_other_remote_refs_still_need_remote_schemas() -> None:
    for ref in ("http://json-schema.org/draft-03/schema#", "http://json-schema.org/x.json"):
        with pytest.raises(SchemaError, match="remote_schemas"):
            schema_to_ir({"$ref": ref}, options=JsonOptions())
    mine = {"http://json-schema.org/draft-07/schema": {"type": "integer"}}
    lowering = schema_to_ir(
        {"$ref": "http://json-schema.org/draft-07/schema#"},
        options=JsonOptions(remote_schemas=mine),
    )
    from .conftest import dfa_of

    assert dfa_of(lowering.node).matches(b"3") and not dfa_of(lowering.node).matches(b"{}")
