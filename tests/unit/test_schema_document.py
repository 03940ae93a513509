"""Hostile schema documents end in a SchemaError with a pointer, never a Python error."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fsmcompile import compile_json_schema
from fsmcompile.errors import SchemaError
from fsmcompile.frontend.json_schema.document import MAX_SCHEMA_DEPTH


def nested(prefix: str, inner: str, suffix: str, levels: int) -> str:
    return prefix * levels + inner + suffix * levels


DEEP_SHAPES = {
    # shape: (JSON text prefix, suffix, pointer segment of one level, containers per level)
    "properties": ('{"properties":{"a":', "}}", "/properties/a", 2),
    "items": ('{"items":', "}", "/items", 1),
    "allOf": ('{"allOf":[', "]}", "/allOf/0", 2),
}


@pytest.mark.parametrize("shape", sorted(DEEP_SHAPES))
def test_schema_nested_past_the_limit_is_a_schema_error_at_the_crossing(gpt2, shape) -> None:
    prefix, suffix, segment, per_level = DEEP_SHAPES[shape]
    schema = json.loads(nested(prefix, "{}", suffix, 400))  # deep, yet json can parse it
    with pytest.raises(SchemaError, match=f"deeper than {MAX_SCHEMA_DEPTH} levels") as info:
        compile_json_schema(schema, gpt2, cache=False)
    assert info.value.pointer == segment * (MAX_SCHEMA_DEPTH // per_level)


def test_schema_text_too_deep_for_json_parser_has_pointer_line_and_column(gpt2) -> None:
    text = nested('{"properties":{"a":', "{}", "}}", 5_000)  # json.loads: RecursionError
    with pytest.raises(SchemaError, match="deeper than") as info:
        compile_json_schema(text, gpt2, cache=False)
    levels = MAX_SCHEMA_DEPTH // 2
    assert info.value.pointer == "/properties/a" * levels
    assert (info.value.line, info.value.column) == (1, levels * len('{"properties":{"a":') + 1)


def test_deeply_nested_json_array_text_is_a_schema_error(gpt2) -> None:
    text = "\n" + "[" * 100_000 + "]" * 100_000
    with pytest.raises(SchemaError, match="deeper than") as info:
        compile_json_schema(text, gpt2, cache=False)
    assert info.value.pointer == "/0" * MAX_SCHEMA_DEPTH
    assert (info.value.line, info.value.column) == (2, MAX_SCHEMA_DEPTH + 1)


def test_schema_at_the_depth_limit_compiles(gpt2) -> None:
    """The limit is one lowering can take: `MAX_SCHEMA_DEPTH` containers deep compiles."""
    schema = json.loads(nested('{"type":"array","items":', '{"type":"integer"}', "}", 99))
    index = compile_json_schema(schema, gpt2, cache=False)
    assert index.num_states > MAX_SCHEMA_DEPTH


@pytest.mark.parametrize(
    ("text", "pointer"),
    [
        ('{"const": "a\\ud800"}', "/const"),
        ('{"enum": ["ok", "\\udfff"]}', "/enum/1"),
        ('{"type": "string", "pattern": "\\ud800+"}', "/pattern"),
        ('{"properties": {"\\ud800": {}}}', "/properties/\ud800"),
    ],
)
def test_surrogate_in_schema_is_a_schema_error_at_its_pointer(gpt2, text, pointer) -> None:
    for schema in (text, json.loads(text)):
        with pytest.raises(SchemaError, match="surrogate code point U\\+D[89A-F]") as info:
            compile_json_schema(schema, gpt2, cache=False)
        assert info.value.pointer == pointer


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ('{"type": "number", "maximum": 1e400}', "/maximum"),
        ({"type": "number", "minimum": float("nan")}, "/minimum"),
        ({"enum": [1, float("-inf")]}, "/enum/1"),
    ],
)
def test_non_finite_number_is_a_schema_error(gpt2, schema: Any, pointer: str) -> None:
    with pytest.raises(SchemaError, match="not a JSON number") as info:
        compile_json_schema(schema, gpt2, cache=False)
    assert info.value.pointer == pointer


@pytest.mark.parametrize(
    ("schema", "pointer", "message"),
    [
        ({"enum": [{1, 2}]}, "/enum/0", "set is not a JSON value"),
        ({"properties": {"a": {1: "x", "b": "y"}}}, "/properties/a", "keys are strings"),
        ({"const": b"x"}, "/const", "bytes is not a JSON value"),
    ],
)
def test_python_value_no_json_holds_is_a_schema_error(gpt2, schema, pointer, message) -> None:
    with pytest.raises(SchemaError, match=message) as info:
        compile_json_schema(schema, gpt2, cache=False)
    assert info.value.pointer == pointer


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [("", 1, 1), ('{"type": "string"}\x00', 1, 19), ('{\n  "const": "a\x00"}', 2, 14)],
)
def test_schema_text_that_is_not_json_has_line_and_column(gpt2, text, line, column) -> None:
    with pytest.raises(SchemaError, match="not valid JSON") as info:
        compile_json_schema(text, gpt2, cache=False)
    assert (info.value.line, info.value.column) == (line, column)


@pytest.mark.parametrize("text", ["[1, 2]", "3", '"string"', "null"])
def test_json_that_is_not_a_schema_is_a_schema_error(gpt2, text) -> None:
    with pytest.raises(SchemaError, match="must be a JSON object or a boolean") as info:
        compile_json_schema(text, gpt2, cache=False)
    assert info.value.pointer == ""
