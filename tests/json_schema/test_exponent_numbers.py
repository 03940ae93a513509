"""Number texts with an exponent under numeric bounds (`exponent_numbers`): exactly the
texts whose value lies in the bounds, for exponents up to the documented cap.

The oracle is `jsonschema` on values parsed as `Decimal` (floats would round `1e-400`
to 0 and `0.1` off its decimal value), schema numbers parsed the same way.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from itertools import product
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import allowed_all_the_way

from fsmcompile.frontend.json_schema.exponents import MAX_EXPONENT

from .language import schema_language
from .walks import gpt2_index

MANTISSAS = (
    "0 -0 0.0 -0.000 1 -1 5 5.0 -7 15 50 100 500 1000 0.5 -0.5 0.15 1.5 -1.5 2.25 -2.25 "
    "2.5 4.99 7.000 123.456 0.001 -0.001 499.999 500.001 100000"
).split()
EXPONENTS = (
    "|e0|E+0|e-0|e00|e1|e+1|E-1|e2|E-2|e+02|e007|e-007|e3|e-3|e10|e-10|e20|e-20|e+020|"
    "e21|e-21|e400|e-400"
).split("|")
TEXTS = [m + e for m, e in product(MANTISSAS, EXPONENTS)]

SCHEMAS = [
    '{"type": "number", "maximum": 500}',
    '{"type": "number", "minimum": 0, "maximum": 500}',
    '{"type": "number", "exclusiveMinimum": -1.5, "maximum": 2.25}',
    '{"type": "number", "minimum": 1}',
    '{"type": "number", "exclusiveMaximum": 0.15}',
    '{"type": "number", "minimum": -0.001, "exclusiveMaximum": 0.001}',
    '{"type": "number", "minimum": 0}',
    '{"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1e-3}',
    '{"enum": [150, 0.25, -3, 0, 1e21]}',
    '{"const": 2.5}',
]

_TEXT = re.compile(r"(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?")


def in_cap(text: str) -> bool:
    """Whether the documented cap keeps the text: no exponent, a zero mantissa, or an
    exponent of magnitude at most MAX_EXPONENT."""
    match = _TEXT.fullmatch(text)
    assert match is not None, text
    _, whole, fraction, exponent = match.groups()
    zero = set(whole + (fraction or "")) == {"0"}
    return exponent is None or zero or abs(int(exponent)) <= MAX_EXPONENT


def sign_only(schema_text: str) -> bool:
    """Whether every bound is 0: the sign decides, and every exponent is read."""
    schema = json.loads(schema_text)
    keys = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
    return "type" in schema and all(schema.get(k, 0) == 0 for k in keys)


def _valid(schema_text: str, text: str) -> bool:
    schema = json.loads(schema_text, parse_float=Decimal)
    value = json.loads(text, parse_float=Decimal)
    return bool(jsonschema.Draft202012Validator(schema).is_valid(value))


_LANGUAGES: dict[str, Any] = {}


def _language(schema_text: str, **options: Any) -> Any:
    key = json.dumps([schema_text, options], sort_keys=True)
    if key not in _LANGUAGES:
        _LANGUAGES[key] = schema_language(json.loads(schema_text), **options)
    return _LANGUAGES[key]


@pytest.mark.parametrize("schema_text", SCHEMAS)
def test_exponent_numbers_accept_exactly_the_texts_inside_the_bounds(schema_text: str) -> None:
    accepts = _language(schema_text, exponent_numbers=True)
    for text in TEXTS:
        expected = _valid(schema_text, text) and (in_cap(text) or sign_only(schema_text))
        assert accepts(text) is expected, (schema_text, text)


@pytest.mark.parametrize("schema_text", SCHEMAS[:3])
def test_exponent_numbers_off_by_default(schema_text: str) -> None:
    accepts = _language(schema_text)
    assert not accepts("1.5e0") and not accepts("1E-1")
    assert accepts("1.5")


numbers = st.from_regex(
    re.compile(r"-?(0|[1-9][0-9]{0,3})(\.[0-9]{1,4})?([eE][+-]?0?[0-9]{1,2})?"), fullmatch=True
)
bounds = st.decimals(min_value=-1000, max_value=1000, places=3, allow_nan=False)


@settings(max_examples=15, deadline=None)
@given(bounds, st.booleans(), bounds, st.booleans(), st.lists(numbers, min_size=20, max_size=40))
def test_exponent_numbers_random_bounds_and_texts(
    lo: Decimal, lo_ex: bool, hi: Decimal, hi_ex: bool, texts: list[str]
) -> None:
    if lo > hi:
        lo, hi = hi, lo
    if lo == hi:
        lo_ex = hi_ex = False
    schema: dict[str, Any] = {"type": "number"}
    schema["exclusiveMinimum" if lo_ex else "minimum"] = float(lo)
    schema["exclusiveMaximum" if hi_ex else "maximum"] = float(hi)
    schema_text = json.dumps(schema)
    accepts = schema_language(schema, exponent_numbers=True)
    for text in [*texts, format(lo, "E"), format(hi, "e"), format(hi.scaleb(-2), "f") + "e2"]:
        expected = _valid(schema_text, text) and in_cap(text)
        assert accepts(text) is expected, (schema_text, text)


INTEGER_SCHEMAS = [
    '{"type": "integer", "minimum": 0, "maximum": 500}',
    '{"type": "integer", "exclusiveMinimum": -20.5, "exclusiveMaximum": 1000}',
    '{"type": "integer"}',
    '{"type": "integer", "minimum": 0}',
]


def _integral(text: str) -> bool:
    value = Decimal(text)
    return value == value.to_integral_value()


@pytest.mark.parametrize("schema_text", INTEGER_SCHEMAS)
def test_integer_exponents_need_both_options(schema_text: str) -> None:
    both = _language(schema_text, exponent_numbers=True, integer_fractions=True)
    only_exponents = _language(schema_text, exponent_numbers=True)
    only_fractions = _language(schema_text, integer_fractions=True)
    for text in TEXTS:
        # jsonschema calls a Decimal no integer, so integrality is checked apart.
        valid = _integral(text) and _valid(schema_text.replace("integer", "number"), text)
        assert both(text) is (valid and in_cap(text)), (schema_text, text)
        written_as_integer = valid and _TEXT.fullmatch(text).group(4) is None  # type: ignore[union-attr]
        plain = written_as_integer and "." not in text
        assert only_exponents(text) is plain, (schema_text, text)
        assert only_fractions(text) is written_as_integer, (schema_text, text)


def test_exponent_numbers_under_multiple_of_stay_without_exponent() -> None:
    schema_text = '{"type": "number", "maximum": 500, "multipleOf": 5}'
    accepts = _language(schema_text, exponent_numbers=True)
    assert accepts("150") and not accepts("1.5e2")


def test_exponent_numbers_through_gpt2_matcher() -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"type": "number", "maximum": 500}},
        "required": ["x"],
        "additionalProperties": False,
    }
    index = gpt2_index(schema, exponent_numbers=True)
    vocab = index.vocabulary
    for text, ok in (
        ('{"x":1.5e2}', True),
        ('{"x":-2.5E-3}', True),
        ('{"x":0e999}', True),
        ('{"x":1e+002}', True),
        ('{"x":5.1e2}', False),
        ('{"x":1e21}', False),
    ):
        allowed, why = allowed_all_the_way(index, vocab, text)
        assert allowed is ok, (text, why)
        if ok:
            jsonschema.validate(json.loads(text), schema)
