"""The C lexer construction (`native/lexer.c`) builds the same lexer as its Python definition
(`lexer_reference.py`): every array equal, state numbering included, and the same errors
for the same budgets.

Compared on the grammars real JSON schemas generate, on schemas whose strings and arrays
are counted (the runtime counts some bounds, others are unrolled after a counted item
starts beside another lexeme), on the bundled grammars with `%ignore`d terminals (given
automata, so the thread construction runs on them), and on random small grammars.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from grammar_checks import bundled_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lexer_reference import build_lexer_automaton_reference, build_lexer_from_dfas_reference

from fsmcompile.automaton import build_dfa
from fsmcompile.errors import BudgetExceededError, UnsupportedFeatureError
from fsmcompile.grammar import load_lark_grammar
from fsmcompile.index.cfg.fresh_items import countable_for
from fsmcompile.index.cfg.lexer_build import build_lexer_automaton
from fsmcompile.index.cfg.lexer_from_dfas import build_lexer_from_dfas
from fsmcompile.index.cfg.lexer_limits import SharedCountedState
from fsmcompile.ir.nodes import Alt, Concat, CountedRepeat, Node, Repeat, chars, literal
from fsmcompile.tables.lark_grammar import LarkGrammar
from fsmcompile.tables.lexer_automaton import LexerAutomaton

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpora" / "jsonschemabench"
SCHEMAS = (
    "WashingtonPost/wp_2_Normalized",
    "WashingtonPost/wp_3_Normalized",
    "Kubernetes/kb_0_Normalized",
    "Kubernetes/kb_2_Normalized",
    "Github_hard/o2045",
    "Github_hard/o2069",
    "Github_medium/o13",
    "Github_ultra/o358",
    "Snowplow/sp_9_Normalized",
    "Snowplow/sp_17_Normalized",
    "Glaiveai2K/analyze_health_data_4ad104b4",
    "Glaiveai2K/analyze_social_media_mentions_df9069d1",
)
# Each refers to itself, which takes the grammar route.
COUNTED: dict[str, Any] = {
    "short_strings": {
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": 3},
            "b": {"type": "string", "maxLength": 40},
            "c": {"type": "array", "items": {"type": "integer"}, "maxItems": 5},
            "next": {"$ref": "#"},
        },
    },
    "string_arrays": {
        "type": "array",
        "items": {"anyOf": [{"type": "string", "maxLength": 8}, {"$ref": "#"}]},
        "minItems": 1,
        "maxItems": 30,
    },
    "keys_beside_values": {
        "type": "object",
        "properties": {
            "ab": {"type": "string", "maxLength": 2},
            "abc": {"type": "integer"},
            "kids": {"type": "array", "items": {"$ref": "#"}},
        },
        "additionalProperties": {"type": "string", "maxLength": 64},
    },
}
FIELDS = (
    "transitions",
    "class_of_byte",
    "label",
    "context_start",
    "restart_context",
    "char_bound",
    "char_start",
)


def _assert_same(built: LexerAutomaton, reference: LexerAutomaton) -> None:
    for name in FIELDS:
        ours, theirs = getattr(built, name), getattr(reference, name)
        assert ours.dtype == theirs.dtype, name
        assert ours.shape == theirs.shape, name
        assert np.array_equal(ours, theirs), name


def _outcome(build: Any, *args: Any) -> Any:
    """The lexer, or the error's class, message and budget fields."""
    try:
        return build(*args)
    except BudgetExceededError as exc:
        return ("budget", str(exc), exc.limit, exc.value)
    except SharedCountedState as exc:
        return ("shared", exc.terminals)


def _assert_same_outcome(grammar: LarkGrammar, *args: Any) -> Any:
    built = _outcome(build_lexer_from_dfas, grammar, *args)
    reference = _outcome(build_lexer_from_dfas_reference, grammar, *args)
    if isinstance(reference, LexerAutomaton):
        assert isinstance(built, LexerAutomaton), built
        _assert_same(built, reference)
    else:
        assert built == reference
    return reference


def _schema_grammar(schema: Any) -> LarkGrammar:
    from fsmcompile.compiler import ROOT_RULE, lower_spec
    from fsmcompile.grammar.from_rules import grammar_from_rules

    node, rules = lower_spec("json", schema, {})
    assert rules, "a schema of the grammar route"
    return grammar_from_rules({ROOT_RULE: node, **rules}, ROOT_RULE, max_states=100_000)


def _corpus_schema(schema_id: str) -> Any:
    path = CORPUS / schema_id.split("/")[0] / "schemas.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not present")
    with open(path, encoding="utf-8") as handle:
        return next(r for r in map(json.loads, handle) if r["id"] == schema_id)["schema"]


def _check_grammar(grammar: LarkGrammar, vocab: Any) -> LexerAutomaton:
    countable = countable_for(vocab, grammar)
    built = build_lexer_automaton(grammar, max_states=200_000, countable=countable)
    reference = build_lexer_automaton_reference(grammar, max_states=200_000, countable=countable)
    _assert_same(built, reference)
    # Without counting, every bound is unrolled: more states, the same agreement.
    _assert_same_outcome(grammar, 200_000, None, None)
    return built


@pytest.mark.corpus
@pytest.mark.parametrize("schema_id", SCHEMAS)
def test_schema_grammar_lexers_equal_the_reference(schema_id: str, gpt2: Any) -> None:
    grammar = _schema_grammar(_corpus_schema(schema_id))
    lexer = _check_grammar(grammar, gpt2)
    assert lexer.num_states > 20


@pytest.mark.parametrize("name", sorted(COUNTED))
def test_counted_schema_lexers_equal_the_reference(name: str, gpt2: Any) -> None:
    lexer = _check_grammar(_schema_grammar(COUNTED[name]), gpt2)
    assert (lexer.char_bound >= 0).any()
    assert lexer.char_start.any()


def test_a_counted_item_beside_another_lexeme_stops_both_alike(gpt2: Any) -> None:
    # `(,a){2,40}` starts its second item where `,a,b` is still alive: both builds stop
    # with that terminal, and the retry that unrolls it agrees too.
    from fsmcompile.grammar.from_rules import grammar_from_rules

    shared = CountedRepeat(literal(",a"), 2, 40)
    root = Concat(
        (
            chars("["),
            Alt((shared, literal(",a,b"))),
            chars("]"),
            CountedRepeat(literal(";b"), 0, 50),
        )
    )
    grammar = grammar_from_rules({"root": root}, "root", max_states=100_000)
    countable = countable_for(gpt2, grammar)
    first = _assert_same_outcome(grammar, 100_000, None, countable)
    assert first[0] == "shared" and first[1]
    _assert_same_outcome(grammar, 100_000, None, countable, first[1])
    _check_grammar(grammar, gpt2)


def _with_automata(grammar: LarkGrammar) -> LarkGrammar:
    """The grammar with an automaton for every terminal, so that the thread construction
    (and its `%ignore` tags) runs on it."""
    terminals = tuple(dataclasses.replace(t, dfa=build_dfa(t.node)) for t in grammar.terminals)
    return dataclasses.replace(grammar, terminals=terminals)


@pytest.mark.parametrize("name", ["json", "arithmetic", "sql_select", "tool_call"])
def test_ignored_terminal_lexers_equal_the_reference(name: str) -> None:
    grammar = _with_automata(load_lark_grammar(bundled_text(name)))
    assert grammar.ignored.any()
    lexer = _assert_same_outcome(grammar, 100_000, None, None)
    assert (lexer.restart_context >= 0).any()


def test_budgets_stop_both_alike(gpt2: Any) -> None:
    grammar = _schema_grammar(COUNTED["short_strings"])
    countable = countable_for(gpt2, grammar)
    full = build_lexer_from_dfas(grammar, 100_000, None, countable)
    for max_states in (1, 2, full.num_states // 2, full.num_states - 1, full.num_states):
        outcome = _assert_same_outcome(grammar, max_states, None, countable)
        if max_states < full.num_states:
            assert outcome[2] == "max_states", max_states
    # A deadline already passed stops at the first state either way (in a grammar with
    # no bound to unroll first, which would stop in `build_dfa`).
    plain = _with_automata(load_lark_grammar(bundled_text("json")))
    outcome = _assert_same_outcome(plain, 100_000, time.monotonic() - 1.0, None)
    assert outcome[:3] == ("budget", "compile timed out while building the lexer", "timeout_s")


def test_an_empty_context_gets_a_dead_start_in_both() -> None:
    grammar = _with_automata(load_lark_grammar('start: "a" | "b" "c"\n'))
    _assert_same_outcome(grammar, 1_000, None, None)


LEAVES = st.sampled_from(["a", "b", "ab", "ba", "aab", ",", ":", '"'])


def _nodes() -> st.SearchStrategy[Node]:
    leaf = st.one_of(
        LEAVES.map(literal),
        st.sampled_from(["ab", "a-c", "b"]).map(lambda s: chars((ord(s[0]), ord(s[-1])))),
    )

    def extend(inner: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
        return st.one_of(
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: Concat(tuple(xs))),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: Alt(tuple(xs))),
            st.tuples(inner, st.integers(0, 2), st.sampled_from([None, 3])).map(
                lambda x: Repeat(x[0], x[1], x[2])
            ),
            st.tuples(inner, st.integers(0, 2), st.integers(3, 9)).map(
                lambda x: CountedRepeat(x[0], x[1], x[2])
            ),
        )

    return st.recursive(leaf, extend, max_leaves=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(_nodes(), min_size=1, max_size=3), max_states=st.integers(1, 400))
def test_random_grammars_equal_the_reference(gpt2: Any, parts: list[Node], max_states: int) -> None:
    from fsmcompile.grammar.from_rules import grammar_from_rules

    rules: dict[str, Node] = {"root": Concat(tuple(parts))}
    try:
        grammar = grammar_from_rules(rules, "root", max_states=10_000)
    except (UnsupportedFeatureError, BudgetExceededError):
        return
    countable = countable_for(gpt2, grammar)
    for budget in (100_000, max_states):
        _assert_same_outcome(grammar, budget, None, countable)
        _assert_same_outcome(grammar, budget, None, None)
