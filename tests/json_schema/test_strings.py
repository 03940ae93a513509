"""String values: escapes, code-point lengths, patterns on decoded text, key complements."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmcompile.automaton.ir import CharSet, chars
from fsmcompile.spec.json_schema.strings import (
    ANY_STRING,
    encode_charset,
    encode_content,
    literal_string,
    strings_except,
)

from .conftest import Raw, compact, dfa_of
from .irmatch import ir_matches

ANY = dfa_of(ANY_STRING)


@settings(max_examples=100, deadline=None)
@given(st.text())
def test_any_string_accepts_every_json_dumps_spelling(text: str) -> None:
    # Lone surrogates never reach here: hypothesis' text() draws scalar values only.
    assert ANY.matches(compact(text).encode())
    assert ANY.matches(__import__("json").dumps(text).encode())  # ASCII-escaped form


@pytest.mark.parametrize(
    "text, ok",
    [
        ('"a\\u0041\\ud83d\\ude00\\n\\/"', True),
        ('"\\ud83d"', False),  # lone high surrogate
        ('"\\ude00"', False),  # lone low surrogate
        ('"a\nb"', False),  # raw control character
        ('"\\x41"', False),
        ('"\\u12"', False),
        ('"unterminated', False),
    ],
)
def test_any_string_escapes_follow_json(text: str, ok: bool) -> None:
    assert ANY.matches(text.encode()) is ok


def test_string_length_counts_code_points_not_escapes(accepts) -> None:
    check = accepts({"type": "string", "minLength": 2, "maxLength": 2})
    assert check("ab")
    assert check(Raw('"\\ud83d\\ude00x"'))  # surrogate pair = one character
    assert check(Raw('"\\n\\t"'))
    assert check("é😀")
    assert not check("a")
    assert not check("abc")


def test_string_pattern_searches_decoded_value(accepts) -> None:
    check = accepts({"type": "string", "pattern": "^a+b$"})
    assert check("aab")
    assert not check("aabc")
    check = accepts({"type": "string", "pattern": "b"})
    assert check("abc")
    assert check(Raw('"\\u0061bc"'))  # the searched `.*` around the match is free text
    assert not check(Raw('"a\\u0062c"'))  # the matched `b` itself: raw only (documented)
    assert not check("ac")


def test_string_pattern_with_quote_accepts_its_escape(accepts) -> None:
    check = accepts({"type": "string", "pattern": '^"[a-z]*"$'})
    assert check('"abc"')
    assert check(Raw('"\\u0022abc\\""'))
    assert not check("abc")


def test_encode_charset_narrow_set_keeps_required_escapes() -> None:
    node = encode_charset(chars('"', "\n", "a"))
    assert ir_matches(node, '\\"') and ir_matches(node, "\\n") and ir_matches(node, "\\u000A")
    assert ir_matches(node, "a") and not ir_matches(node, "\\u0061")


def test_encode_content_full_set_allows_every_escape() -> None:
    node = encode_content(CharSet(((0, 0x10FFFF),)))
    assert ir_matches(node, "\\u0061") and ir_matches(node, "\\ud83d\\ude00")


def test_literal_string_matches_json_dumps() -> None:
    for text in ["plain", 'q"uote', "back\\slash", "tab\t", "\x01", "é😀", "/"]:
        assert ir_matches(literal_string(text), compact(text))


@settings(max_examples=100, deadline=None)
@given(st.sets(st.text(max_size=3), max_size=4), st.text(max_size=4))
def test_strings_except_is_the_complement(excluded: set[str], probe: str) -> None:
    node = strings_except(excluded)
    assert ir_matches(node, probe) is (probe not in excluded)
