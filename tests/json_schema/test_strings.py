"""String values: escapes, code-point lengths, patterns on decoded text, key complements."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmcompile.automaton import build_dfa
from fsmcompile.frontend.json_schema.strings import (
    ANY_CHAR,
    ANY_STRING,
    content_except,
    encode_charset,
    encode_content,
    literal_string,
)
from fsmcompile.ir.nodes import EMPTY, NOTHING, And, CharSet, Node, Repeat, alt, chars, negate, seq

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


def test_string_pattern_lookaheads_test_the_rest_of_the_value(accepts) -> None:
    check = accepts({"type": "string", "pattern": "^(?=.*[0-9])(?!.*\\s)[a-z0-9 ]{4,8}$"})
    assert check("abc1")
    assert check("1abc")
    assert not check("abcd")  # no digit
    assert not check("ab c1")  # a space
    assert not check("abc1\t")  # whitespace outside the class is still outside it
    assert not check("abcd12345")  # too long
    check = accepts({"type": "string", "pattern": "x(?!y)"})  # searched: anywhere
    assert check("axb") and check("yx") and check("xyx")
    assert not check("xy") and not check("axy")
    # In an object open to free-form members: the grammar route.
    check = accepts(
        {"type": "object", "properties": {"p": {"type": "string", "pattern": "^(?=.*1)[a-z1]+$"}}}
    )
    assert check({"p": "ab1"}) and check({"p": "1", "q": [{}]})
    assert not check({"p": "ab"})
    assert check({"p": "ab1", "q": {"p": "x"}})  # a free-form member's own "p" is free


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
def test_content_except_is_the_complement(excluded: set[str], probe: str) -> None:
    node = content_except(excluded)
    assert ir_matches(node, compact(probe)[1:-1]) is (probe not in excluded)
    # A word escaped as \\uXXXX decodes to the same word: never let through.
    for word in excluded:
        escaped = "".join(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else c for c in word)
        assert not ir_matches(node, escaped)


def _plain_strings_except(excluded: set[str]) -> Node:
    """The complement written the straightforward way: at every trie node, stop or leave
    with any character no child has, then anything (one free rest per node)."""
    trie: dict[str, dict] = {}
    for word in excluded:
        node = trie
        for c in word:
            node = node.setdefault(c, {})
        node[""] = {}

    def build(node: dict) -> Node:
        branches: list[Node] = [] if "" in node else [EMPTY]
        children = sorted(c for c in node if c)
        leave = negate(chars(*children)) if children else ANY_CHAR
        if leave.ranges:
            branches.append(seq(leave, Repeat(ANY_CHAR, 0, None)))
        branches += [seq(chars(c), build(node[c])) for c in children]
        return alt(*branches) if branches else NOTHING

    return build(trie)


_NARROW_UNIT = alt(
    negate(chars('"', "\\", (0, 0x1F))),
    seq(chars("\\"), chars('"\\/bfnrt')),
    seq(
        chars("\\"),
        chars("u"),
        chars("0"),
        chars("0"),
        chars("01"),
        chars("0123456789abcdefABCDEF"),
    ),
    seq(chars("\\"), chars("u"), chars("0"), chars("0"), chars("2"), chars("2")),
    seq(chars("\\"), chars("u"), chars("0"), chars("0"), chars("5"), chars("cC")),
)
"""Narrow spellings, written out: raw, short escapes, `\\u00XX` for controls, `"` and `\\`."""


@settings(max_examples=60, deadline=None)
@given(st.sets(st.text(alphabet='ab/"\\\n\x01é_😀', max_size=4), min_size=1, max_size=4))
def test_content_except_is_the_narrow_part_of_the_plain_complement(excluded: set[str]) -> None:
    """The difference of automata has exactly the narrow spellings (raw, needed escapes,
    `\\/`) of the complement written out over the words' trie: same minimized automaton."""
    fast = build_dfa(content_except(excluded))
    plain = build_dfa(
        And((encode_content(_plain_strings_except(excluded)), Repeat(_NARROW_UNIT, 0, None)))
    )
    assert np.array_equal(fast.transitions, plain.transitions)
    assert np.array_equal(fast.accepting, plain.accepting)
    assert np.array_equal(fast.class_of_byte, plain.class_of_byte)


def test_content_except_nothing_keeps_every_spelling() -> None:
    assert ir_matches(content_except(()), "\\u0061\\ud83d\\ude00")
