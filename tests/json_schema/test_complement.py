"""`not` of a regular scalar schema: the scalar texts less the negated schema's, as automata."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from fsmcompile.errors import UnsupportedFeatureError
from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir

from .language import schema_language
from .test_exclusive import TEXTS, canonical

DEFS = {"uuid": {"type": "string", "pattern": "^[0-9a-f]{8}$"}, "small": {"maximum": 3}}

CASES: list[dict[str, Any]] = [
    {"type": "integer", "not": {"multipleOf": 5}},
    {"not": {"multipleOf": 5}},
    {"type": "string", "not": {"anyOf": [{"format": "date"}, {"maxLength": 1}]}},
    {"not": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]}},
    {"type": ["string", "number"], "not": {"$ref": "#/$defs/small"}, "$defs": DEFS},
    {"not": {"anyOf": [{"$ref": "#/$defs/uuid"}, {"type": "object"}]}, "$defs": DEFS},
    {"type": "number", "not": {"oneOf": [{"multipleOf": 2}, {"multipleOf": 5}]}},
    {"not": {"enum": ["a", 2], "maxLength": 3}},
    # a negation inside the negated schema: multiples of 5 and every non-number but null
    {"not": {"anyOf": [{"not": {"multipleOf": 5}}, {"type": "null"}], "comment": "unknown"}},
]
EXTRA = ['"0123abcd"', '"0123abcx"', "3", "3.5", "4", "20", "25", '{"a":1}', "[1]", '["a"]']


@pytest.mark.parametrize("schema", CASES, ids=range(len(CASES)))
def test_not_of_a_regular_scalar_schema_is_exact_on_canonical_texts(
    schema: dict[str, Any],
) -> None:
    accepts = schema_language(schema)
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    for text in TEXTS + EXTRA:
        valid = validator.is_valid(json.loads(text))
        if accepts(text):
            assert valid, text  # sound
        elif canonical(text) or text.startswith(("{", "[")):
            assert not valid, text  # complete on canonical spellings


def test_not_multiple_of_keeps_the_other_numbers_only() -> None:
    # Every value that is not a number satisfies `multipleOf`, so it fails its negation.
    accepts = schema_language(CASES[1])
    assert [n for n in range(12) if accepts(str(n))] == [1, 2, 3, 4, 6, 7, 8, 9, 11]
    assert accepts("2.5") and not accepts("10.0")  # 10.0 is a multiple of 5
    assert not any(accepts(text) for text in ['"x"', "null", '{"a":[1]}', "[]"])


def test_not_of_a_scalar_anyof_keeps_objects_and_arrays() -> None:
    accepts = schema_language(CASES[3])
    assert accepts("1") and accepts('"2024-13-01"') and accepts("[]") and accepts('{"a":[1]}')
    assert not accepts('"2024-01-31"') and not accepts("null")


@pytest.mark.parametrize(
    "schema",
    [
        # objects S accepts only some of: no complement automaton for them
        {"not": {"anyOf": [{"required": ["a"]}, {"type": "string"}]}},
        {"not": {"$ref": "#/$defs/o"}, "$defs": {"o": {"type": "object", "minProperties": 1}}},
        # hostname is a documented subset (A-labels refused)
        {"type": "string", "not": {"anyOf": [{"format": "hostname"}, {"maxLength": 1}]}},
    ],
)
def test_not_outside_those_shapes_is_still_reported(schema: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedFeatureError, match="not"):
        schema_to_ir(schema, options=JsonOptions())
