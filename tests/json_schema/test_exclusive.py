"""`oneOf` of overlapping scalar branches: each branch less the others, as automata."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from fsmcompile.errors import UnsupportedFeatureError
from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir

from .language import schema_language

NUMBERS = [
    "10.0",
    "0",
    "-0",
    "1",
    "2",
    "5",
    "10",
    "15",
    "-10",
    "7",
    "1.0",
    "2.5",
    "10.50",
    "1e1",
    "0.5",
]
STRINGS = ["", "a", "2024-01-31", "2024-13-01", "2", "20", "abc", "zz", "\u00e9", 'a"b']
TEXTS = NUMBERS + [json.dumps(s, ensure_ascii=False) for s in STRINGS]
TEXTS += [
    '"2024-01-3\\u0031"',
    '"\\u00e9"',
    '"\\u0032"',
    '"\\/"',
    "null",
    "true",
    "false",
    "[]",
    "{}",
    '"2\\u0030"',
]

CASES: list[dict[str, Any]] = [
    {"type": "string", "oneOf": [{"minLength": 5}, {"format": "date"}]},
    {"oneOf": [{"type": "integer", "multipleOf": 5}, {"type": "integer", "multipleOf": 2}]},
    {"oneOf": [{"type": "string", "format": "date"}, {"type": "string", "pattern": "^2"}]},
    {"type": "string", "oneOf": [{"format": "date"}, {"maxLength": 2}, {"enum": ["abc", "zz"]}]},
    {
        "oneOf": [
            {"type": "number", "multipleOf": 0.1},
            {"type": "integer", "minimum": 5},
            {"type": "null"},
        ]
    },
    {"oneOf": [{"enum": [1, "2", None]}, {"type": ["integer", "null"], "multipleOf": 2}]},
]


def canonical(text: str) -> bool:
    """Whether `text` is the spelling the exclusive union keeps for its value."""
    value = json.loads(text)
    if isinstance(value, float):
        return not value.is_integer() and "e" not in text and not text.endswith("0")
    if isinstance(value, int) and not isinstance(value, bool):
        return text == str(value)
    if isinstance(value, str):
        return text == json.dumps(value, ensure_ascii=False)
    return value is None or isinstance(value, bool)


@pytest.mark.parametrize("schema", CASES, ids=range(len(CASES)))
def test_overlapping_scalar_oneof_is_exact_on_canonical_texts(schema: dict[str, Any]) -> None:
    accepts = schema_language(schema)
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    for text in TEXTS:
        valid = validator.is_valid(json.loads(text))
        if accepts(text):
            assert valid, text  # sound
        elif canonical(text):
            assert not valid, text  # complete on canonical spellings


def test_fizzbuzz_oneof_excludes_the_common_multiples() -> None:
    accepts = schema_language(CASES[1])
    assert [n for n in range(31) if accepts(str(n))] == [
        n for n in range(31) if (n % 5 == 0) != (n % 2 == 0)
    ]


@pytest.mark.parametrize(
    "schema",
    [
        # objects: key order makes the other branch's language a subset
        {
            "oneOf": [
                {"type": "object", "required": ["a"]},
                {"type": "object", "propertyNames": {"maxLength": 1}},
            ]
        },
        {"oneOf": [{"type": "array", "items": {"type": "integer"}}, {"contains": {"const": 1}}]},
        # hostname is a documented subset (A-labels refused)
        {"oneOf": [{"type": "string", "format": "hostname"}, {"type": "string", "format": "date"}]},
    ],
)
def test_overlapping_oneof_outside_those_shapes_is_still_reported(schema: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedFeatureError, match="oneOf"):
        schema_to_ir(schema, options=JsonOptions())


def test_exclusive_union_inside_a_grammar_schema() -> None:
    # Free-form extra members make the schema a grammar; the oneOf stays one terminal.
    accepts = schema_language({"type": "object", "properties": {"n": CASES[1]}})
    assert accepts('{"n":4}') and accepts('{"n":5}') and accepts('{"n":4,"x":{"y":[]}}')
    assert not accepts('{"n":10}') and not accepts('{"n":3}')
