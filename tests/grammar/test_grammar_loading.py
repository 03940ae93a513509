"""Bad grammars: each error has the right class, a useful message and a position."""

from __future__ import annotations

import pytest

from fsmcompile.errors import GrammarError, SpecError, UnsupportedFeatureError
from fsmcompile.grammar import load_lark_grammar

BAD = [
    # (case, grammar, error class, message fragment, line, column)
    ("syntax_error", 'start: "a"\nfoo bar baz\n', GrammarError, "syntax error", 2, 5),
    ("unclosed_paren", 'start: "a" (\n', GrammarError, "Unclosed parenthesis", 1, 13),
    ("undefined_rule", 'start: "a" foo\n', GrammarError, "'foo' used but not defined", 1, 12),
    (
        "undefined_terminal",
        'start: "a"\n   | "b" FOO\n',
        GrammarError,
        "'FOO' used but not defined",
        2,
        10,
    ),
    ("duplicate_rule", 'start: "a"\nstart: "b"\n', GrammarError, "defined more than once", 2, 1),
    (
        "reduce_reduce",
        'start: a | b\na: "x"\nb: "x"\n',
        GrammarError,
        "Reduce/Reduce collision",
        2,
        1,
    ),
    ("no_start_rule", 'foo: "a"\n', GrammarError, "no start rule", None, None),
    ("zero_width_terminal", "start: A\nA: /a*/\n", GrammarError, "zero-width", 2, 1),
    ("bad_regex", "start: A\nA: /a(/\n", GrammarError, "Cannot compile token A", 2, 1),
    ("never_finishes", 'start: "y" | a\na: "x" a\n', GrammarError, "can never finish", 2, 1),
    ("declared_terminal", "start: A\n%declare A\n", UnsupportedFeatureError, "%declare", 1, 8),
    ("lookahead", "start: A\n\nA: /a(?=b)/\n", UnsupportedFeatureError, "lookaround", 3, 1),
    ("lazy_quantifier", "start: A\nA: /a+?/\n", UnsupportedFeatureError, "lazy quantifier", 2, 1),
    ("lazy_inline_regex", 'start: "x" /a+?/\n', UnsupportedFeatureError, "lazy quantifier", 1, 12),
    ("backreference", "start: A\nA: /(a)\\1/\n", UnsupportedFeatureError, "backreference", 2, 1),
    ("anchor", "start: A\nA: /^a/\n", UnsupportedFeatureError, "anchor", 2, 1),
]


@pytest.mark.parametrize(
    ("case", "grammar", "error", "fragment", "line", "column"), BAD, ids=[b[0] for b in BAD]
)
def test_grammar_load_bad_input_raises_with_position(case, grammar, error, fragment, line, column):
    with pytest.raises(error, match=fragment) as info:
        load_lark_grammar(grammar)
    assert getattr(info.value, "line", None) == line
    assert getattr(info.value, "column", None) == column


def test_grammar_load_shift_reduce_conflict_raises_in_strict_mode():
    grammar = 'start: e\ne: e "+" e | "1"\n'
    load_lark_grammar(grammar)  # lark resolves it as a shift, and so does the matcher
    with pytest.raises(GrammarError, match="Shift/Reduce conflict") as info:
        load_lark_grammar(grammar, {"strict": True})
    assert (info.value.line, info.value.column) == (2, 1)


def test_grammar_load_unknown_option_raises():
    with pytest.raises(SpecError, match="unknown lark options"):
        load_lark_grammar('start: "a"', {"lexer": "basic"})


def test_grammar_load_start_option_picks_rule():
    grammar = load_lark_grammar('start: "a"\nother: "b" "c"\n', {"start": "other"})
    assert grammar.start == "other"
    assert sorted(t.name for t in grammar.terminals) == ["B", "C"]


def test_grammar_load_templates_and_imports_follow_lark():
    grammar = load_lark_grammar(
        '_sep{x, sep}: x (sep x)*\nstart: _sep{NUMBER, ","}\n'
        "%import common.NUMBER\n%import common.WS\n%ignore WS\n"
    )
    names = {t.name: t for t in grammar.terminals}
    assert set(names) == {"NUMBER", "COMMA", "WS"}
    assert names["WS"].ignored and not names["NUMBER"].ignored


@pytest.mark.parametrize("name", ["json", "arithmetic", "sql_select", "tool_call"])
def test_grammar_bundled_grammars_pass_lark_strict_mode(name):
    from grammar_checks import bundled_text

    grammar = load_lark_grammar(bundled_text(name), {"strict": True})
    assert grammar.table.num_states > 0


def test_loaded_grammar_keeps_none_of_lark_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc
    import weakref

    from fsmcompile.grammar import loading

    built: list[weakref.ref[object]] = []
    real = loading._lark

    def spy(
        text: str,
        start: str,
        strict: bool,
        import_paths: tuple[str, ...],
        max_states: int | None,
    ) -> object:
        result = real(text, start, strict, import_paths, max_states)
        built.append(weakref.ref(result))
        return result

    monkeypatch.setattr(loading, "_lark", spy)
    text = 'start: "[" item ("," item)* "]"\nitem: /[a-z]+/ | start\n'
    first = load_lark_grammar(text)
    second = load_lark_grammar(text)
    assert len(built) == 1, "the second load reads the memoized analysis"
    assert first.table.num_states == second.table.num_states and first.contexts == second.contexts
    gc.collect()
    # lark's object graph (tens of thousands of objects for a schema's grammar) would
    # otherwise stay tracked by the garbage collector for the life of the process.
    assert built[0]() is None
