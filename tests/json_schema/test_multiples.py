"""`multipleOf` with any divisor between a `minimum` and a `maximum`: the multiples listed.

Divisors whose multiples the last digits decide (2, 25, 0.01) were exact before; the
others (3, 7, 0.5, 0.75, 2.5) are now exact when both bounds are present and at most
`MAX_LISTED_MULTIPLES` multiples lie between them. Texts are compared with `jsonschema`
on random decimals (the divisors are binary fractions or integers, so its float
arithmetic is exact for them) and walked through GPT-2's token index.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmcompile.errors import UnsupportedFeatureError
from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir
from fsmcompile.frontend.json_schema.multiples import MAX_LISTED_MULTIPLES

from .conftest import schema_dfa
from .walks import gpt2_index, walk_to_end

SCHEMAS: list[dict[str, Any]] = [
    {"type": "number", "minimum": -3, "maximum": 20, "multipleOf": 0.5},
    {"type": "number", "exclusiveMinimum": -1.5, "exclusiveMaximum": 9, "multipleOf": 0.75},
    {"type": "number", "minimum": 0, "maximum": 40, "multipleOf": 2.5},
    {"type": "integer", "minimum": -20, "maximum": 300, "multipleOf": 3},
    {"type": "integer", "minimum": 1, "maximum": 99, "multipleOf": 0.5},
    {"type": "number", "minimum": -20, "maximum": 30.5, "multipleOf": 7},
]


@st.composite
def number_texts(draw: st.DrawFn) -> str:
    """A decimal in [-25, 320] with up to 3 fraction digits, maybe zero-padded."""
    thousandths = draw(st.integers(-25_000, 320_000))
    text = format(Decimal(thousandths).scaleb(-3).normalize(), "f")
    if draw(st.booleans()):
        text += ("" if "." in text else ".") + "0" * draw(st.integers(1, 2))
    return text


@pytest.mark.parametrize("schema", SCHEMAS, ids=[json.dumps(s) for s in SCHEMAS])
@settings(max_examples=150, deadline=None)
@given(texts=st.lists(number_texts(), min_size=10, max_size=10))
def test_bounded_multiples_decide_like_jsonschema(schema: dict[str, Any], texts: list[str]) -> None:
    dfa = _dfa(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for text in texts:
        value = json.loads(text)
        valid = validator.is_valid(value) and not (schema["type"] == "integer" and "." in text)
        assert dfa.matches(text.encode()) is valid, text


def test_bounded_multiples_accept_every_multiple() -> None:
    dfa = _dfa(SCHEMAS[0])
    for k in range(-6, 41):
        value = Decimal(k) / 2
        for text in (str(value), f"{value:.2f}", f"{value:.3f}"):
            assert dfa.matches(text.encode()), text
    assert not dfa.matches(b"20.5") and not dfa.matches(b"-3.5") and not dfa.matches(b"1e1")


def test_bounded_multiples_leave_out_exclusive_bounds() -> None:
    dfa = _dfa(SCHEMAS[1])  # 0.75 in (-1.5, 9)
    assert dfa.matches(b"-0.75") and dfa.matches(b"8.25") and dfa.matches(b"-0")
    assert not dfa.matches(b"-1.5") and not dfa.matches(b"9") and not dfa.matches(b"9.00")


_DFAS: dict[str, Any] = {}


def _dfa(schema: dict[str, Any]) -> Any:
    key = json.dumps(schema, sort_keys=True)
    if key not in _DFAS:
        _DFAS[key] = schema_dfa(schema)
    return _DFAS[key]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "number", "multipleOf": 0.5},
        {"type": "number", "minimum": 0, "multipleOf": 0.5},
        {"type": "number", "minimum": 0, "maximum": MAX_LISTED_MULTIPLES, "multipleOf": 0.5},
        {"type": "integer", "maximum": 10, "multipleOf": 3},
    ],
)
def test_multiples_of_an_open_or_wide_range_stay_reported(schema: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedFeatureError, match="multipleOf") as exc:
        schema_to_ir({"properties": {"n": schema}}, options=JsonOptions())
    assert exc.value.features == [("/properties/n", "multipleOf")]


PRICE = {
    "type": "object",
    "properties": {"price": {"type": "number", "minimum": 0, "maximum": 20, "multipleOf": 0.25}},
    "required": ["price"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("seed", range(4))
def test_bounded_multiples_token_walks_end_in_valid_instances(seed: int) -> None:
    index = gpt2_index(PRICE)
    # Trailing zeros may go on for ever: lean towards closing the object.
    text = walk_to_end(index, seed, lean_closing=0.3)
    jsonschema.validate(json.loads(text), PRICE)
