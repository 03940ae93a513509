"""Soundness and completeness of regex → DFA against Python's `re`, on generated inputs.

Completeness: every string hypothesis derives from a pattern (`from_regex`) is accepted.
Soundness: on random and near-miss strings, the DFA agrees with `re.fullmatch` (and with
`re.search` in search mode). Bytes that are not UTF-8 are never accepted.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fsmcompile.automaton import ByteDFA, build_dfa
from fsmcompile.frontend.regex.parser import parse_regex

PATTERNS = [
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
    r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}",
    r"((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)",
    r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?",
    r"\+?1?[-. ]?\(?\d{3}\)?[-. ]?\d{3}[-. ]?\d{4}",
    r"(cat|car|cart|dog|do|done)+",
    r"[\u4e00-\u9fff]+",
    r'"([^"\\]|\\.){0,12}"',
    r"(a|ab)*(bc|c)?",
    r"\w+(\s\w+){0,3}",
    r"(?i)[a-fé]{2,4}x",
    r"[^\W\d_]{1,3}\d?",
    r"(\d+,?){0,4}",
    r".{0,5}é",
    r"(?s).{2}",
]

SMALL_ALPHABET = 'ab1 \n._-é中😀Zcx\\"@'


@cache
def dfa_for(pattern: str, search: bool = False) -> ByteDFA:
    return build_dfa(parse_regex(pattern, search=search))


@st.composite
def pattern_and_match(draw: st.DrawFn) -> tuple[str, str]:
    pattern = draw(st.sampled_from(PATTERNS))
    text = draw(st.from_regex(pattern, fullmatch=True))
    return pattern, text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern_and_match())
def test_dfa_accepts_every_string_of_the_pattern(case: tuple[str, str]) -> None:
    pattern, text = case
    assert dfa_for(pattern).matches(text.encode("utf-8"))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(PATTERNS), st.text(alphabet=SMALL_ALPHABET, max_size=12))
def test_dfa_agrees_with_re_on_random_strings(pattern: str, text: str) -> None:
    expected = re.fullmatch(pattern, text) is not None
    assert dfa_for(pattern).matches(text.encode("utf-8")) == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern_and_match(), st.data())
def test_dfa_agrees_with_re_on_near_misses(case: tuple[str, str], data: st.DataObject) -> None:
    pattern, text = case
    position = data.draw(st.integers(0, len(text)))
    edit = data.draw(st.sampled_from(["insert", "delete", "replace"]))
    char = data.draw(st.sampled_from(SMALL_ALPHABET))
    if edit == "insert":
        mutated = text[:position] + char + text[position:]
    elif edit == "delete":
        mutated = text[:position] + text[position + 1 :]
    else:
        mutated = text[:position] + char + text[position + 1 :]
    expected = re.fullmatch(pattern, mutated) is not None
    assert dfa_for(pattern).matches(mutated.encode("utf-8")) == expected


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(PATTERNS), st.binary(max_size=8))
def test_dfa_never_accepts_invalid_utf8(pattern: str, data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        assert not dfa_for(pattern).matches(data)
    else:
        assert dfa_for(pattern).matches(data) == (re.fullmatch(pattern, text) is not None)


# ---- generated patterns -------------------------------------------------------------------

ATOMS = ["a", "b", "é", "ab", "[ab]", "[^a]", "[a-c]", ".", r"\d", r"\w", r"\s", "[é-ü]", r"\W"]
QUANTIFIERS = ["*", "+", "?", "{2}", "{0,3}", "{1,2}", "{2,}", "*?", "{,2}"]


@st.composite
def regexes(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.integers(0, 3 if depth < 3 else 0))
    if kind == 0:
        return draw(st.sampled_from(ATOMS))
    if kind == 1:
        return draw(regexes(depth + 1)) + draw(regexes(depth + 1))
    if kind == 2:
        return f"(?:{draw(regexes(depth + 1))}|{draw(regexes(depth + 1))})"
    return f"(?:{draw(regexes(depth + 1))}){draw(st.sampled_from(QUANTIFIERS))}"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(regexes(), st.data())
def test_generated_pattern_dfa_agrees_with_re(pattern: str, data: st.DataObject) -> None:
    dfa = dfa_for(pattern)
    positives = data.draw(st.lists(st.from_regex(pattern, fullmatch=True), max_size=5))
    for text in positives:
        assert dfa.matches(text.encode("utf-8")), (pattern, text)
    for text in data.draw(st.lists(st.text(alphabet="abcé 1\n", max_size=8), max_size=10)):
        assert dfa.matches(text.encode("utf-8")) == (re.fullmatch(pattern, text) is not None)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(regexes(), st.lists(st.text(alphabet="abcé 1\n", max_size=8), max_size=10))
def test_generated_pattern_search_mode_agrees_with_re_search(
    pattern: str, texts: list[str]
) -> None:
    anchored = [pattern, "^" + pattern, pattern + "$", f"^(?:{pattern})$"]
    for variant in anchored:
        dfa = dfa_for(variant, search=True)
        for text in texts:
            expected = re.search(variant, text) is not None
            assert dfa.matches(text.encode("utf-8")) == expected, (variant, text)


@settings(max_examples=40, deadline=None)
@given(regexes(), regexes())
def test_alternation_of_generated_patterns_is_deterministic(left: str, right: str) -> None:
    assume(left != right)
    a = build_dfa(parse_regex(f"{left}|{right}"))
    b = build_dfa(parse_regex(f"{right}|{left}"))
    assert np.array_equal(a.transitions, b.transitions)
    assert np.array_equal(a.class_of_byte, b.class_of_byte)
    assert np.array_equal(a.accepting, b.accepting)
