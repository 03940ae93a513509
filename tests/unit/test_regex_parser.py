"""The regex front end: what each construct matches, in both dialects, and how errors point."""

from __future__ import annotations

import itertools
import re

import pytest

from fsmcompile.automaton import build_dfa
from fsmcompile.errors import RegexSyntaxError, SpecError, UnsupportedFeatureError
from fsmcompile.frontend.regex.classes import ecma_space, python_shorthand
from fsmcompile.frontend.regex.parser import parse_regex
from fsmcompile.ir.nodes import CharSet, Concat, Repeat


def matches(pattern: str, text: str, *, dialect: str = "python", search: bool = False) -> bool:
    dfa = build_dfa(parse_regex(pattern, dialect=dialect, search=search))  # type: ignore[arg-type]
    return dfa.matches(text.encode("utf-8"))


def agrees_with_re(pattern: str, texts: list[str]) -> None:
    dfa = build_dfa(parse_regex(pattern))
    for text in texts:
        expected = re.fullmatch(pattern, text) is not None
        assert dfa.matches(text.encode("utf-8")) == expected, (pattern, text)


# ---- the IR shape ----------------------------------------------------------------------


def test_parse_regex_literal_is_concat_of_charsets() -> None:
    node = parse_regex("ab")
    assert node == Concat((CharSet(((97, 97),)), CharSet(((98, 98),))))


def test_parse_regex_counted_repeat_keeps_counts() -> None:
    node = parse_regex("x{2,5}")
    assert node == Repeat(CharSet(((120, 120),)), 2, 5)


def test_parse_regex_python_open_lower_bound_means_zero() -> None:
    assert parse_regex("x{,3}") == Repeat(CharSet(((120, 120),)), 0, 3)


# ---- literals and escapes --------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        (r"\n\t\r\f\v", "\n\t\r\f\v"),
        (r"\x41\u00e9\U0001F600", "Aé😀"),
        (r"\0", "\x00"),
        (r"\101", "A"),  # three octal digits: a character, not a group
        (r"\N{EM DASH}", "—"),
        (r"\.\*\\\(", ".*\\("),
        (r"\a", "\a"),
        ("naïve 日本", "naïve 日本"),
    ],
)
def test_parse_regex_python_escape_matches_its_character(pattern: str, text: str) -> None:
    assert matches(pattern, text)
    assert re.fullmatch(pattern, text)


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        (r"\u{1F600}", "😀"),
        (r"\uD83D\uDE00", "😀"),  # a surrogate pair is one code point in ECMA-262
        (r"\cJ", "\n"),
        (r"\/", "/"),
        (r"\0", "\x00"),
        (r"[\b]", "\x08"),
        (r"[\-]", "-"),
    ],
)
def test_parse_regex_ecma_escape_matches_its_character(pattern: str, text: str) -> None:
    assert matches(pattern, text, dialect="ecma")


# ---- classes and shorthands ------------------------------------------------------------


def test_char_class_negated_non_ascii_range_agrees_with_re() -> None:
    agrees_with_re(r"[^é-ü\d]", ["é", "ü", "ñ", "e", "1", "٣", "😀", "\n", "ab"])


def test_char_class_leading_bracket_is_literal_in_python() -> None:
    agrees_with_re(r"[]a]", ["]", "a", "b"])
    agrees_with_re(r"[^]a]", ["]", "a", "b"])


def test_char_class_escapes_inside_agree_with_re() -> None:
    agrees_with_re(r"[\w\s.\-\]\\]", ["a", "_", " ", ".", "-", "]", "\\", "!", "é"])


def test_python_shorthands_are_unicode_sets_from_re() -> None:
    agrees_with_re(r"\d\w\s", ["1a ", "٣é\u3000", "a1 ", "11\u0085"])
    digits = python_shorthand("d", False)
    assert (0x0660, 0x0669) in digits  # Arabic-Indic digits


def test_python_ascii_flag_narrows_shorthands() -> None:
    assert matches(r"(?a)\d", "1")
    assert not matches(r"(?a)\d", "٣")
    assert matches(r"\d", "٣")


@pytest.mark.parametrize(
    ("pattern", "text", "python", "ecma"),
    [
        (r"\d", "٣", True, False),
        (r"\w", "é", True, False),
        (r"\s", "\ufeff", False, True),
        (r"\s", "\x1c", True, False),
        (".", "\r", True, False),
        (".", "\u2028", True, False),
        (".", "\n", False, False),
        ("[]", "a", None, False),  # Python: unterminated set; ECMA: matches nothing
        ("[^]", "\n", None, True),
    ],
)
def test_dialects_differ_where_the_standards_do(
    pattern: str, text: str, python: bool | None, ecma: bool
) -> None:
    if python is None:
        with pytest.raises(RegexSyntaxError):
            parse_regex(pattern)
    else:
        assert matches(pattern, text) is python
    if pattern == "[]":
        with pytest.raises(SpecError, match="matches no string"):
            build_dfa(parse_regex(pattern, dialect="ecma"))
    else:
        assert matches(pattern, text, dialect="ecma") is ecma


def test_ecma_space_contains_zs_and_line_terminators() -> None:
    space = ecma_space()
    for code in (0x20, 0xA0, 0x1680, 0x2028, 0x2029, 0x3000, 0xFEFF, 0x0A):
        assert any(lo <= code <= hi for lo, hi in space)
    assert not any(lo <= 0x85 <= hi for lo, hi in space)


def test_dot_dotall_flag_matches_newline() -> None:
    assert matches("(?s).", "\n")
    assert not matches(".", "\n")


# ---- groups, alternation, quantifiers ----------------------------------------------------


def test_groups_of_every_kind_agree_with_re() -> None:
    agrees_with_re(r"(a)(?:b)(?P<n>c)|x", ["abc", "x", "ab", "abcx"])
    assert matches(r"(?<year>\d{4})-(?<m>\d\d)", "2024-05", dialect="ecma")


@pytest.mark.parametrize(
    "pattern",
    [r"a*?b", r"a+?", r"a??b", r"(ab){2,3}?", r"a{,2}", r"a{2}", r"a{2,}", r"a{}", r"a{1,b}"],
)
def test_quantifiers_agree_with_re(pattern: str) -> None:
    agrees_with_re(pattern, ["", "a", "b", "ab", "aab", "aaa", "abab", "ababab", "a{}", "a{1,b}"])


def test_alternation_with_empty_branch_agrees_with_re() -> None:
    agrees_with_re("a|", ["", "a", "b"])
    agrees_with_re("(|b)c", ["c", "bc", "b"])


def test_comment_group_lets_quantifier_reach_previous_item() -> None:
    agrees_with_re("a(?#note)*", ["", "a", "aa", "b"])


def test_verbose_flag_ignores_layout_but_keeps_escaped_space() -> None:
    pattern = "(?x) a \\  b  # comment\n c"
    agrees_with_re(pattern, ["a bc", "abc", "a b c"])


def test_ignorecase_flag_folds_like_re() -> None:
    agrees_with_re("(?i)straße[a-c]", ["STRASSEA", "Straßeb", "strassec", "STRAẞEC"])
    agrees_with_re("(?i)k", ["k", "K", "\u212a", "x"])  # Kelvin sign folds to k
    agrees_with_re("(?i:a)b", ["Ab", "aB", "ab"])


def test_multiline_flag_is_accepted_at_the_edges() -> None:
    agrees_with_re("(?m)^ab$", ["ab", "ab\n", "xab"])


# ---- anchors and search mode ------------------------------------------------------------


def test_anchors_at_edges_are_no_ops_under_full_match() -> None:
    agrees_with_re(r"^ab$", ["ab", "ab\n", "xab"])
    agrees_with_re(r"\Aab\Z", ["ab", "ab\n"])
    agrees_with_re(r"^a|b$", ["a", "b", "ab"])
    agrees_with_re(r"(^a|b)c", ["ac", "bc", "c"])


@pytest.mark.parametrize(
    "pattern", [r"abc", r"^abc", r"abc$", r"^a|b$", r"(^a|b)c", r"^$", r"(?m)^ab", r"ab\Z"]
)
def test_search_mode_python_agrees_with_re_search(pattern: str) -> None:
    dfa = build_dfa(parse_regex(pattern, search=True))
    for text in ["", "abc", "xabc", "abcx", "a", "b", "xb", "ax", "bc", "\nab", "ab\n", "x\nab\ny"]:
        assert dfa.matches(text.encode()) == (re.search(pattern, text) is not None), text


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("^abc", "abcdef", True),
        ("^abc", "xabc", False),
        ("abc$", "xxabc", True),
        ("abc$", "abc\n", False),  # ECMA $ (no m flag) is only the very end
        ("b", "abc", True),
        ("^a|c$", "xyzc", True),
        ("^a|c$", "xcy", False),
        ("^[a-z]+$", "héllo", False),
    ],
)
def test_search_mode_ecma_honours_anchors(pattern: str, text: str, expected: bool) -> None:
    assert matches(pattern, text, dialect="ecma", search=True) is expected


def test_search_mode_any_prefix_allows_every_code_point() -> None:
    assert matches("x", "😀\n\u2028x\x00", dialect="ecma", search=True)


# ---- lookaheads ---------------------------------------------------------------------------

_SHORT_TEXTS = ["".join(p) for n in range(6) for p in itertools.product("ab1\n", repeat=n)]
"""Every string of up to 5 characters over a, b, 1 and a newline (1,365)."""


@pytest.mark.parametrize(
    "pattern",
    [
        r"(?=a)\w+",
        r"^(?=.*1)(?=.*b)\w{2,4}$",
        r"a(?!b)",
        r"(?!.*ab).*",
        r"((a)(?![0-9]*$)\w)$",  # in groups
        r"(?:(?=b)\w+)$",
        r"(a(?=b))\w",  # the rest of the pattern after the group counts
        r"(a(?=b)|1)\w",  # per alternative of a group
        r"(a|(?=b)\w)\w$",
        r"(?:(?=a)|b)\w",
        r"x?(?:a(?!b))?\w",  # in an optional group
        r"^([ab1](?:(?!.*11)[ab1]*[ab])?)$",
        r"(?=a|1$)..",
        r"x?(?=$)",
        r"(?=b\Z)b",
        r"^(?!a)",
        r"(?=(ab)*$).*",
        r"(?=.*b$).*",
        r"\w(?!\d)\w",
        r"(?=a)b|b(?!a)",
        r"(?m)a(?=$)",
    ],
)
@pytest.mark.parametrize("search", [False, True])
def test_lookaheads_agree_with_re_on_every_short_text(pattern: str, search: bool) -> None:
    """The rest of the input after a lookahead (the rest of the pattern, then the search
    padding) is tested as Python tests it, `$` in the body included, in both modes."""
    try:
        dfa = build_dfa(parse_regex(pattern, search=search))
    except SpecError:
        dfa = None  # the pattern matches no string
    for text in _SHORT_TEXTS:
        expected = (re.search if search else re.fullmatch)(pattern, text) is not None
        assert (dfa is not None and dfa.matches(text.encode())) == expected, text


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        (r"^(?=.*\d)(?=.*[A-Z])(?!.*\s).{8,}$", "Passw0rdX", True),
        (r"^(?=.*\d)(?=.*[A-Z])(?!.*\s).{8,}$", "password0", False),
        (r"^(?=.*\d)(?=.*[A-Z])(?!.*\s).{8,}$", "Pass w0rdX", False),
        (r"^(?=.*\d)(?=.*[A-Z])(?!.*\s).{8,}$", "Passw0rd\n", False),  # $: only the end
        (r"(?!.*://)^[a-z.]+$", "example.com", True),
        (r"(?!.*://)^[a-z:/.]+$", "http://example.com", False),
        (r"x(?=y)", "axyz", True),
        (r"x(?=y)", "axz", False),
    ],
)
def test_ecma_lookaheads_in_search_mode(pattern: str, text: str, expected: bool) -> None:
    assert matches(pattern, text, dialect="ecma", search=True) is expected


# ---- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "dialect", "fragment", "pos"),
    [
        ("(ab", "python", "missing )", 0),
        ("ab)", "python", "unbalanced parenthesis", 2),
        ("[z-a]", "python", "bad character range", 1),
        ("*a", "python", "nothing to repeat", 0),
        (r"a\q", "python", "bad escape", 1),
        ("a{3,2}", "python", "min repeat greater than max repeat", 2),
        ("(ab", "ecma", "missing )", 0),
        ("ab)", "ecma", "unbalanced parenthesis", 2),
        ("[z-a]", "ecma", "bad character range", 3),
        ("*a", "ecma", "nothing to repeat", 0),
        (r"a\q", "ecma", "bad escape", 1),
        ("a{3,2}", "ecma", "min repeat greater than max repeat", 1),
        ("a{,2}", "ecma", "not a quantifier in ECMA-262", 1),
        ("a**", "ecma", "multiple repeat", 2),
        ("[a", "ecma", "unterminated character set", 0),
        (r"[\d-z]", "ecma", "bad character range", 1),
    ],
)
def test_parse_regex_syntax_error_reports_position(
    pattern: str, dialect: str, fragment: str, pos: int
) -> None:
    with pytest.raises(RegexSyntaxError, match=re.escape(fragment)) as info:
        parse_regex(pattern, dialect=dialect)  # type: ignore[arg-type]
    assert info.value.pos == pos
    assert info.value.pattern == pattern
    assert "^" in str(info.value)  # the caret line


@pytest.mark.parametrize(
    ("pattern", "dialect", "fragment", "pos"),
    [
        (r"(a)\1", "python", "backreference", 3),
        (r"(?P<x>a)(?P=x)", "python", "backreference", 8),
        (r"(a(?=b)|c)+", "python", "lookahead in a repeated group", 2),
        ("(a(?=b)|c)" * 7, "python", "more than 64 readings", 2),
        (r"(?=a(?!b))a", "python", "lookahead inside a lookahead", 4),
        (r"(?=^a)a", "python", "not at the start", 3),
        (r"(?<!a)b", "python", "lookbehind", 0),
        (r"\bword", "python", "word boundary", 0),
        (r"a\B", "python", "word boundary", 1),
        (r"a^b", "python", "not at the start", 1),
        (r"a$b", "python", "not at the end", 1),
        (r"(a$)b", "python", "not at the end", 2),
        (r"(^a)*", "python", "anchor inside a repeated group", 4),
        (r"a*+", "python", "possessive", 1),
        (r"(?>a)", "python", "atomic group", 0),
        (r"(a)?(?(1)b|c)", "python", "conditional", 4),
        (r"(a)\1", "ecma", "backreference", 3),
        (r"(?<n>a)\k<n>", "ecma", "backreference", 7),
        (r"(a(?!b))*", "ecma", "lookahead in a repeated group", 2),
        (r"(?:a(?=b)){2}", "ecma", "lookahead in a repeated group", 4),
        (r"a(?=b)*", "ecma", "quantified lookahead", 6),
        (r"x\p{Script=Latin}", "ecma", "Unicode property", 1),
        (r"a^", "ecma", "not at the start", 1),
    ],
)
def test_parse_regex_unsupported_feature_names_construct_and_position(
    pattern: str, dialect: str, fragment: str, pos: int
) -> None:
    with pytest.raises(UnsupportedFeatureError, match=fragment) as info:
        parse_regex(pattern, dialect=dialect)  # type: ignore[arg-type]
    assert info.value.pos == pos
    assert info.value.pattern == pattern


def test_parse_regex_unknown_dialect_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="dialect"):
        parse_regex("a", dialect="perl")  # type: ignore[arg-type]


def test_parse_regex_lone_surrogate_matches_no_string() -> None:
    with pytest.raises(SpecError, match="matches no string"):
        build_dfa(parse_regex("\ud800"))


@pytest.mark.parametrize(
    ("flags", "body"),
    [
        ("i", "k"),
        ("i", "[a-z]"),
        ("i", "[^s]"),
        ("i", "ß"),
        ("i", r"[\w-]"),
        ("ai", "[k-s]"),
        ("i", r"\W"),
        ("i", "İ"),
    ],
)
def test_ignorecase_set_equals_re_over_every_code_point(flags: str, body: str) -> None:
    from fsmcompile.frontend.regex.classes import _every_code_point

    node = parse_regex(f"(?{flags}){body}")
    assert isinstance(node, CharSet)
    found = re.finditer(f"(?{flags})(?:{body})+", _every_code_point())
    assert node.ranges == tuple((m.start(), m.end() - 1) for m in found)


def test_cased_table_covers_every_code_point_re_folds() -> None:
    sre = pytest.importorskip("_sre")
    from fsmcompile.frontend.regex.classes import _cased

    codes = set(_cased()[0])
    for code in range(0x110000):
        if sre.unicode_iscased(code):
            assert code in codes
            assert sre.unicode_tolower(code) in codes


def test_ecma_group_name_must_be_an_identifier() -> None:
    with pytest.raises(RegexSyntaxError, match="bad group name") as info:
        parse_regex("(?<1a>x)", dialect="ecma")
    assert info.value.pos == 3
    assert matches("(?P<naïve>a)", "a")


@pytest.mark.parametrize(
    ("pattern", "accepted", "rejected"),
    [
        (r"\p{L}+", ["héllo", "中文", "Ωmega"], ["a1", "-"]),
        (r"\p{Lu}", ["A", "É"], ["a", "1"]),
        (r"\P{L}", ["1", " ", "😀"], ["a"]),
        (r"[\p{Nd}\p{Zs}]+", ["1 ٣\u3000"], ["a"]),
        (r"\p{gc=Sc}", ["$", "€"], ["a"]),
        (r"\p{General_Category=Decimal_Number}", ["7"], ["x"]),
        (r"\p{ASCII}+", ["abc~"], ["é"]),
    ],
)
def test_ecma_unicode_property_escapes_match_general_categories(
    pattern: str, accepted: list[str], rejected: list[str]
) -> None:
    dfa = build_dfa(parse_regex(pattern, dialect="ecma"))
    assert all(dfa.matches(t.encode()) for t in accepted)
    assert not any(dfa.matches(t.encode()) for t in rejected)


def test_deeply_nested_groups_fail_cleanly() -> None:
    pattern = "(" * 5000 + "a" + ")" * 5000
    with pytest.raises(SpecError):
        parse_regex(pattern, dialect="ecma")
    with pytest.raises(SpecError):
        parse_regex(pattern)
