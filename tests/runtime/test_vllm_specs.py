"""vLLM constraints → fsmcompile specs, and the front end's early check. No vLLM needed."""

from __future__ import annotations

import json
import re

import pytest

from fsmcompile import compile_regex
from fsmcompile.errors import GrammarError, RegexSyntaxError, SchemaError, SpecError
from fsmcompile.runtime.matcher import matcher_for
from fsmcompile.runtime.vllm_specs import (
    JSON_OBJECT_SCHEMA,
    CompileSpec,
    check_spec,
    choice_regex,
    spec_for,
)

GBNF = 'root ::= "yes" | "no"\n'


def test_each_option_maps_to_its_spec() -> None:
    assert spec_for("JSON", '{"type":"integer"}') == CompileSpec("json", '{"type":"integer"}')
    assert spec_for("JSON_OBJECT", "") == CompileSpec("json", JSON_OBJECT_SCHEMA)
    assert spec_for("REGEX", "[a-z]+") == CompileSpec("regex", "[a-z]+")
    assert spec_for("GRAMMAR", 'start: "a"') == CompileSpec("lark", 'start: "a"')
    assert spec_for("CHOICE", '["a", "b"]').kind == "regex"


CHOICES = ["yes", "no", "a b", "x#y&z~", "q?*+", "(paren)", "é", "tab\tnew\nline", ""]


def test_choice_regex_matches_exactly_the_choices(gpt2) -> None:
    pattern = spec_for("CHOICE", json.dumps(CHOICES)).spec
    assert pattern == choice_regex(CHOICES)
    index = compile_regex(pattern, gpt2)
    for choice in CHOICES:
        assert re.fullmatch(pattern, choice)
        matcher = matcher_for(index)
        tokens = gpt2.encode(choice) if choice else []
        assert matcher.advance_many(tokens) == len(tokens)
        assert matcher.is_accepting(), choice
    for other in ["ye", "yess", "a  b", "x#y", "Yes", "(paren"]:
        assert not re.fullmatch(pattern, other)
        matcher = matcher_for(index)
        tokens = gpt2.encode(other)
        assert matcher.advance_many(tokens) < len(tokens) or not matcher.is_accepting(), other


@pytest.mark.parametrize("text", ["[]", "{}", '["a", 1]', "not json"])
def test_malformed_choices_are_refused(text: str) -> None:
    with pytest.raises(SpecError, match="choice"):
        spec_for("CHOICE", text)


@pytest.mark.parametrize(
    ("grammar", "line", "column"),
    [
        (GBNF, 1, 6),
        ("// a comment\n\n  value ::= [0-9]+\nroot ::= value\n", 3, 9),
        ("<root> ::= 'x'\n", 1, 8),
    ],
)
def test_a_gbnf_grammar_is_refused_naming_the_dialect(grammar: str, line: int, column: int) -> None:
    with pytest.raises(GrammarError, match="GBNF/EBNF") as exc:
        spec_for("GRAMMAR", grammar)
    assert (exc.value.line, exc.value.column) == (line, column)
    assert "Lark" in str(exc.value)


def test_a_lark_grammar_that_quotes_the_bnf_operator_is_lark() -> None:
    grammar = 'start: NAME ASSIGN NAME\nASSIGN: "::="\nNAME: /[a-z]+/\n'
    spec = spec_for("GRAMMAR", grammar)
    check_spec(spec)


def test_structural_tags_are_refused() -> None:
    with pytest.raises(SpecError, match="structural_tag is not supported"):
        spec_for("STRUCTURAL_TAG", "{}")


def test_check_spec_accepts_valid_specs() -> None:
    check_spec(CompileSpec("regex", "[0-9]{3}"))
    check_spec(CompileSpec("json", '{"type":"object","properties":{"a":{"type":"string"}}}'))
    check_spec(CompileSpec("json", JSON_OBJECT_SCHEMA))
    check_spec(CompileSpec("lark", 'start: "a"+'))


def test_check_spec_reports_where_a_spec_is_wrong() -> None:
    with pytest.raises(RegexSyntaxError) as regex:
        check_spec(CompileSpec("regex", "[0-9"))
    assert regex.value.pos is not None
    with pytest.raises(SchemaError) as schema:
        check_spec(CompileSpec("json", '{"type":"object","properties":{"a":{"type":"strin"}}}'))
    assert schema.value.pointer == "/properties/a/type"
    with pytest.raises(SchemaError, match="not valid JSON"):
        check_spec(CompileSpec("json", '{"type": '))
    with pytest.raises(GrammarError) as grammar:
        check_spec(CompileSpec("lark", "start: a\n"))
    assert "a" in str(grammar.value)
