"""Numbers: exact integer ranges, exact decimal bounds, multipleOf, the number grammar."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmcompile.frontend.json_schema.numbers import (
    NUMBER_TEXT,
    Bound,
    integer_range,
    multiple_of,
    number_range,
)

from .conftest import dfa_of

NUMBER_RE = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


@settings(max_examples=25, deadline=None)
@given(
    st.one_of(st.none(), st.integers(-2000, 2000)),
    st.one_of(st.none(), st.integers(-2000, 2000)),
    st.lists(st.integers(-3000, 3000), min_size=5, max_size=20),
)
def test_integer_range_is_exact(lo, hi, probes) -> None:
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    dfa = dfa_of(integer_range(lo, hi))
    for value in [*probes, lo or 0, hi or 0]:
        inside = (lo is None or value >= lo) and (hi is None or value <= hi)
        assert dfa.matches(str(value).encode()) is inside, (lo, hi, value)
    assert not dfa.matches(b"01") and not dfa.matches(b"1.0")


decimals = st.decimals(min_value=-100, max_value=100, places=3, allow_nan=False)


@settings(max_examples=25, deadline=None)
@given(
    decimals, st.booleans(), decimals, st.booleans(), st.lists(decimals, min_size=5, max_size=15)
)
def test_number_range_compares_decimals_exactly(lo, lo_ex, hi, hi_ex, probes) -> None:
    if lo > hi:
        lo, hi = hi, lo
    low, high = Bound(lo, lo_ex), Bound(hi, hi_ex)
    if lo == hi and (lo_ex or hi_ex):
        return
    dfa = dfa_of(number_range(low, high))
    for value in [*probes, lo, hi]:
        text = format(value, "f")
        inside = (value > lo if lo_ex else value >= lo) and (value < hi if hi_ex else value <= hi)
        assert dfa.matches(text.encode()) is inside, (low, high, text)
        padded = text + ("0" if "." in text else ".000")
        assert dfa.matches(padded.encode()) is inside, (low, high, padded)


@pytest.mark.parametrize(
    "lo, hi, text, ok",
    [
        (Bound(Decimal(0), False), None, "1e300", True),
        (Bound(Decimal(0), False), None, "-0.0e5", True),
        (Bound(Decimal(0), True), None, "0e1", False),
        (Bound(Decimal(0), True), None, "0.001E-9", True),
        (None, Bound(Decimal(0), True), "-1E2", True),
        (Bound(Decimal("0.5"), False), None, "5e-1", False),  # exponent refused (documented)
    ],
)
def test_number_range_zero_bounds_keep_exponents(lo, hi, text, ok) -> None:
    assert dfa_of(number_range(lo, hi)).matches(text.encode()) is ok


@settings(max_examples=100, deadline=None)
@given(st.from_regex(NUMBER_RE, fullmatch=True))
def test_number_grammar_accepts_json_numbers(text: str) -> None:
    assert NUMBER_DFA.matches(text.encode())


NUMBER_DFA = dfa_of(NUMBER_TEXT)


@pytest.mark.parametrize("divisor", [1, 2, 4, 5, 8, 10, 25, 100])
def test_multiple_of_integer_divisors_of_powers_of_ten(divisor: int) -> None:
    node = multiple_of(Decimal(divisor), integer=True)
    assert node is not None
    dfa = dfa_of(node)
    for value in range(-300, 301):
        assert dfa.matches(str(value).encode()) is (value % divisor == 0), value


def test_multiple_of_decimal_power_of_ten() -> None:
    node = multiple_of(Decimal("0.01"), integer=False)
    assert node is not None
    dfa = dfa_of(node)
    for text, ok in [
        ("1.25", True),
        ("1.250", True),
        ("1.255", False),
        ("-3", True),
        ("0.1", True),
    ]:
        assert dfa.matches(text.encode()) is ok, text


@pytest.mark.parametrize("divisor", ["3", "7", "0.5", "2.5"])
def test_multiple_of_other_divisors_are_not_expressible(divisor: str) -> None:
    assert multiple_of(Decimal(divisor), integer=False) is None


def test_integer_schema_refuses_fraction_spelling(accepts) -> None:
    check = accepts({"type": "integer", "minimum": 1, "exclusiveMaximum": 10})
    assert check(1) and check(9) and not check(10) and not check(0)
    assert not check(1.0)  # documented: integers have one spelling


def test_schema_multiple_of_seven_is_reported(accepts) -> None:
    from fsmcompile.errors import UnsupportedFeatureError

    with pytest.raises(UnsupportedFeatureError, match="multipleOf") as info:
        accepts({"type": "integer", "multipleOf": 7})
    assert info.value.features == [("", "multipleOf")]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer"},
        {"type": "integer", "minimum": -5, "exclusiveMaximum": 20, "multipleOf": 5},
        {"type": ["integer", "null"], "not": {"enum": [0, 3]}},
        {"type": "array", "items": {"type": "integer", "maximum": 2}},
    ],
)
def test_integer_fractions_accepts_integral_values_with_zero_fractions(
    schema: dict[str, Any],
) -> None:
    import json

    import jsonschema

    from .language import schema_language

    accepts = schema_language(schema, integer_fractions=True)
    strict = schema_language(schema)
    validator = jsonschema.Draft202012Validator(schema)
    numbers = ["0", "-0", "0.0", "-0.00", "3", "3.0", "5.000", "10.0", "15.00", "20.0", "-5.0"]
    numbers += ["-10.0", "2.5", "3.01", "1e1", "1.0e0", "null"]
    texts = numbers + [f"[{n}]" for n in numbers] + ["[2.0,1.00,-7]"]
    for text in texts:
        valid = validator.is_valid(json.loads(text))
        if "e" not in text:  # exponents stay refused
            assert accepts(text) == valid, text  # exact on every fixed-point spelling
        assert valid or not accepts(text), text
        if "." in text:
            assert not strict(text), text  # the default keeps one spelling
