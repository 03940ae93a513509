"""Deeply nested and non-text patterns: a RegexSyntaxError at the position, never a crash."""

from __future__ import annotations

import pytest

from fsmcompile import compile_regex
from fsmcompile.errors import RegexSyntaxError
from fsmcompile.frontend.regex.parser import MAX_GROUP_DEPTH, parse_regex


@pytest.mark.parametrize("opening", ["(", "(?:", "(?="])
def test_groups_nested_past_the_limit_fail_where_the_limit_is_crossed(gpt2, opening) -> None:
    """5,000 levels: Python's own `re` runs out of stack on them; we say where."""
    pattern = "x" + opening * 5_000 + "a" + ")" * 5_000
    with pytest.raises(RegexSyntaxError, match=f"deeper than {MAX_GROUP_DEPTH} levels") as info:
        compile_regex(pattern, gpt2, cache=False)
    assert info.value.pos == 1 + MAX_GROUP_DEPTH * len(opening)


@pytest.mark.parametrize("dialect", ["python", "ecma"])
def test_groups_nested_to_the_limit_compile_through_every_stage(gpt2, dialect) -> None:
    pattern = "(?:" * MAX_GROUP_DEPTH + "ab" + ")*" * MAX_GROUP_DEPTH
    parse_regex(pattern, dialect=dialect)
    index = compile_regex(pattern, gpt2, cache=False)
    assert index.num_states >= 2


def test_groups_past_the_limit_in_a_schema_pattern_point_at_the_pattern(gpt2) -> None:
    from fsmcompile import compile_json_schema
    from fsmcompile.errors import SchemaError

    schema = {"type": "string", "pattern": "(" * 300 + "a" + ")" * 300}
    with pytest.raises(SchemaError, match="deeper than") as info:
        compile_json_schema(schema, gpt2, cache=False)
    assert info.value.pointer == "/pattern"


@pytest.mark.parametrize(("pattern", "pos"), [("a\ud800", 1), ("[\udfff-\uffff]x", 1)])
def test_surrogate_in_a_pattern_is_a_regex_syntax_error(gpt2, pattern, pos) -> None:
    """A lone surrogate is no Unicode text: no UTF-8 input could ever match it."""
    with pytest.raises(RegexSyntaxError, match="surrogate code point") as info:
        compile_regex(pattern, gpt2, cache=False)
    assert info.value.pos == pos
    assert "\ud800" not in str(info.value) and "\udfff" not in str(info.value)
