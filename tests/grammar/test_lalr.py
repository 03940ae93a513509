"""The integer LALR(1) builder (`fsmcompile/grammar/lalr.py`) builds lark's tables.

Generated grammars are analysed by `lalr_states`, not lark's `LALR_Analyzer`; the masks
are exact only if both give one parse table. Compared here on random grammars (empty
rules, left and right recursion, conflicts of both kinds) and on every bundled Lark
grammar's rules, through the canonical renumbering (`tables_from_states`).
"""

from __future__ import annotations

from typing import Any

import pytest
from grammar_checks import GRAMMARS
from hypothesis import given, settings
from hypothesis import strategies as st
from lark import Lark
from lark.common import ParserConf
from lark.exceptions import GrammarError
from lark.grammar import NonTerminal, Rule, RuleOptions, Terminal
from lark.parsers.lalr_analysis import LALR_Analyzer

from fsmcompile.grammar.lalr import lalr_states
from fsmcompile.grammar.parse_tables import tables_from_states
from fsmcompile.tables.lark_grammar import LexerContext

NONTERMINALS = ("s", "a", "b", "c")
TERMINALS = ("X", "Y", "Z")


def _canonical(table: Any, rules: list[Any], start: str) -> tuple[Any, ...]:
    """The parse table and per-state terminals, renumbered as indexes store them."""
    used = sorted({s.name for r in rules for s in r.expansion if s.is_term})
    names = {n: i for i, n in enumerate(used)}

    def context(old: int) -> LexerContext:
        return LexerContext(tuple(sorted(names[s] for s in table.states[old] if s in names)), ())

    contexts, parse = tables_from_states(
        table.states, table.start_states[start], table.end_states[start], names, context
    )
    arrays = tuple(
        getattr(parse, f).tolist()
        for f in ("action", "goto", "rule_lhs", "rule_len", "context_of_state")
    )
    return contexts, arrays, parse.start_state, parse.end_state


def _both(rules: list[Any], start: str, *, strict: bool = True) -> tuple[Any, Any]:
    """(lark's outcome, ours): a canonical table, or the error's first word."""
    outcomes = []
    for build in (_lark_states, lalr_states):
        try:
            outcomes.append(_canonical(build(rules, start, strict=strict), rules, start))
        except GrammarError as exc:
            outcomes.append(str(exc).split(" ")[0])
    return outcomes[0], outcomes[1]


def _lark_states(rules: list[Any], start: str, *, strict: bool) -> Any:
    analysis = LALR_Analyzer(ParserConf(rules, {}, [start]), strict=strict)
    analysis.compute_lalr()
    return analysis.parse_table


_symbol = st.sampled_from(
    [("n", n) for n in NONTERMINALS[1:]] + [("t", t) for t in TERMINALS] + [("n", "s")]
)
_expansions = st.lists(st.lists(_symbol, max_size=3), min_size=1, max_size=3, unique_by=str)


@settings(max_examples=400, deadline=None)
@given(st.fixed_dictionaries({n: _expansions for n in NONTERMINALS}))
def test_random_grammars_get_larks_table_or_an_error_as_lark(
    bodies: dict[str, list[list[tuple[str, str]]]],
) -> None:
    rules = [
        Rule(
            NonTerminal(name),
            [Terminal(v) if k == "t" else NonTerminal(v) for k, v in expansion],
            order,
        )
        for name, expansions in bodies.items()
        for order, expansion in enumerate(expansions)
    ]
    theirs, ours = _both(rules, "s")
    if isinstance(theirs, str) or isinstance(ours, str):
        # Both refuse the grammar. Where a table has conflicts of both kinds lark reports
        # whichever its hash order meets first, lalr_states the reduce/reduce ones.
        assert isinstance(theirs, str) and isinstance(ours, str)
        assert ours in ("Reduce/Reduce", "Shift/Reduce")
        if ours == "Shift/Reduce":
            assert theirs == "Shift/Reduce"
        return
    assert ours == theirs


@settings(max_examples=400, deadline=None)
@given(
    st.fixed_dictionaries({n: _expansions for n in NONTERMINALS}),
    st.lists(st.integers(-1, 2), min_size=12, max_size=12),
)
def test_random_grammars_with_priorities_get_larks_lenient_table(
    bodies: dict[str, list[list[tuple[str, str]]]], priorities: list[int]
) -> None:
    """Outside strict mode a shift/reduce conflict shifts, and a reduce/reduce collision
    goes to a rule of higher priority than the rest, as lark settles them: the table a
    user's Lark grammar loads with (`loading._NativeLalrParser`)."""

    def rules() -> list[Any]:
        return [
            Rule(
                NonTerminal(name),
                [Terminal(v) if k == "t" else NonTerminal(v) for k, v in expansion],
                order,
                options=RuleOptions(priority=priorities[3 * i + order] or None),
            )
            for i, (name, expansions) in enumerate(bodies.items())
            for order, expansion in enumerate(expansions)
        ]

    theirs, ours = _both(rules(), "s", strict=False)
    if isinstance(ours, str):
        assert ours == "Reduce/Reduce"
    # Where rules collide around empty rules in a cycle, lark's lookahead sets (built in
    # the order of objects in memory) differ from run to run, and so do its verdict and
    # table: ours must be one of lark's.
    for _ in range(200):
        if theirs == ours:
            break
        theirs = _both(rules(), "s", strict=False)[0]
    assert theirs == ours


BUNDLED = sorted(p.name for p in GRAMMARS.glob("*.lark"))


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_grammars_rules_get_larks_table(name: str) -> None:
    built = Lark((GRAMMARS / name).read_text(), parser="lalr")
    rules = list(built.rules)
    start = built.options.start[0]
    theirs, ours = _both(rules, start)
    assert ours == theirs
    assert not isinstance(ours, str)


def test_a_collision_names_the_colliding_rules_as_lark_does() -> None:
    # `merge_twins` reads the rule names out of the message.
    rules = [
        Rule(NonTerminal("s"), [NonTerminal("a")], 0),
        Rule(NonTerminal("s"), [NonTerminal("b")], 1),
        Rule(NonTerminal("a"), [Terminal("X")], 0),
        Rule(NonTerminal("b"), [Terminal("X")], 0),
    ]
    with pytest.raises(GrammarError) as ours:
        lalr_states(rules, "s")
    message = str(ours.value)
    assert message.startswith("Reduce/Reduce collision in Terminal('$END') between")
    assert sorted(message.split("\n\t- ")[1:]) == ["<a : X>", "<b : X>"]


def test_an_undefined_rule_is_refused_by_name() -> None:
    rules = [Rule(NonTerminal("s"), [NonTerminal("missing")], 0)]
    with pytest.raises(GrammarError, match=r"Using an undefined rule: NonTerminal\('missing'\)"):
        lalr_states(rules, "s")


def test_an_undefined_start_rule_is_refused_by_name() -> None:
    rules = [Rule(NonTerminal("s"), [Terminal("X")], 0)]
    with pytest.raises(GrammarError, match=r"Using an undefined rule: NonTerminal\('top'\)"):
        lalr_states(rules, "top")


LENIENT_GRAMMARS = {
    # A shift/reduce conflict lark settles by shifting: the dangling else.
    "dangling_else": """
        start: stmt
        stmt: "if" COND "then" stmt ("else" stmt)? | "go"
        COND: /[a-z]+/
        %ignore " "
    """,
    # A reduce/reduce collision settled by rule priority.
    "prioritised": """
        start: a | b
        a.2: WORD
        b: WORD
        WORD: /[a-z]+/
    """,
}


@pytest.mark.parametrize("name", [*BUNDLED, *LENIENT_GRAMMARS], ids=[*BUNDLED, *LENIENT_GRAMMARS])
def test_a_loaded_grammar_has_the_tables_and_contexts_of_larks_own_parser(name: str) -> None:
    """`load_lark_grammar` builds the LALR table in C inside lark's frontend: the parse
    table and the contextual lexer's contexts (with their `unless` lists) read out of it
    are those of `Lark(text)` with lark's own analysis, conflicts settled alike."""
    from fsmcompile.grammar import load_lark_grammar
    from fsmcompile.grammar.parse_tables import extract_tables

    text = LENIENT_GRAMMARS.get(name) or (GRAMMARS / name).read_text()
    ours = load_lark_grammar(text)
    built = Lark(text, parser="lalr", lexer="contextual")
    names = {t.name: i for i, t in enumerate(ours.terminals)}
    contexts, table = extract_tables(built.parser, names, "start")
    assert ours.contexts == contexts
    for field in ("action", "goto", "rule_lhs", "rule_len", "context_of_state"):
        assert getattr(ours.table, field).tolist() == getattr(table, field).tolist(), field
    assert (ours.table.start_state, ours.table.end_state) == (table.start_state, table.end_state)
