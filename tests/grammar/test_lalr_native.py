"""The C steps of the LALR builder (`native/lalr_lr0.c`) agree with their Python definition
(`lalr_reference.py`) exactly: the LR(0) states with their numbering, item order and
transition order, the lookahead entries and their rules in first-seen order, and so every
action dict, its key order, and every conflict message word for word.

Compared on the bundled grammars' rules, on the grammars real JSON schemas generate
(merge rounds included, whose first builds end in collisions), on a deep chain, and on
random grammars with empty rules, left and right recursion and conflicts of both kinds.
Both C steps stop at the compile's deadline, on a grammar that keeps them busy for
seconds, and a deadline not reached changes nothing.
"""

from __future__ import annotations

import json
import math
import random
import time
from array import array
from pathlib import Path
from typing import Any

import pytest
from grammar_checks import GRAMMARS
from hypothesis import given, settings
from hypothesis import strategies as st
from lalr_reference import lalr_states_reference, lookaheads_reference, lr0_reference
from lark import Lark
from lark.exceptions import GrammarError
from lark.grammar import NonTerminal, Rule, Terminal

from fsmcompile import _native
from fsmcompile.budget import compile_deadline
from fsmcompile.errors import BudgetExceededError
from fsmcompile.grammar import lalr

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpora" / "jsonschemabench"
SCHEMAS = (
    "WashingtonPost/wp_0_Normalized",
    "WashingtonPost/wp_1_Normalized",
    "WashingtonPost/wp_6_Normalized",
    "Kubernetes/kb_0_Normalized",
    "Kubernetes/kb_2_Normalized",
    "Github_hard/o366",
    "Github_hard/o1052",
    "Github_hard/o3446",
    "Github_medium/o13",
    "Github_ultra/o358",
)


def _lr0_lists(lr0: Any) -> tuple[list[list[int]], list[list[tuple[int, int]]]]:
    """The C item sets as the reference holds them (transitions as ordered pairs)."""
    cs, ci = lr0.closure_start.tolist(), lr0.closure_items.tolist()
    ts, sym, target = lr0.trans_start.tolist(), lr0.trans_sym.tolist(), lr0.trans_target.tolist()
    closure = [ci[cs[s] : cs[s + 1]] for s in range(len(cs) - 1)]
    trans = [
        list(zip(sym[ts[s] : ts[s + 1]], target[ts[s] : ts[s + 1]], strict=True))
        for s in range(len(ts) - 1)
    ]
    return closure, trans


def _lookahead_lists(found: Any) -> list[list[tuple[int, list[int]]]]:
    """The C lookaheads as ordered (symbol, rules) pairs per state."""
    start, sym = found.start.tolist(), found.sym.tolist()
    rule_start, rules = found.rule_start.tolist(), found.rules.tolist()
    return [
        [(sym[e], rules[rule_start[e] : rule_start[e + 1]]) for e in range(start[s], start[s + 1])]
        for s in range(len(start) - 1)
    ]


def _outcome(build: Any, rules: list[Any], start: str) -> Any:
    """The table with each state's actions in order, or the error message."""
    try:
        table = build(rules, start)
    except GrammarError as exc:
        return str(exc)
    states = [(state, list(actions.items())) for state, actions in table.states.items()]
    return states, table.start_states, table.end_states


def _assert_same(rules: list[Any], start: str) -> Any:
    """Every step of the C build equals the reference's; the outcome, for more checks."""
    try:
        grammar = lalr._numbered(rules, start)
    except GrammarError:
        grammar = None
    if grammar is not None:
        columns = lalr._columns(grammar)
        ours = lalr._lr0(grammar, columns)
        theirs = lr0_reference(grammar)
        closure, trans = _lr0_lists(ours)
        assert closure == theirs.closure
        assert trans == [list(moves.items()) for moves in theirs.trans]
        found = lalr._lookaheads(grammar, columns, ours)
        expected = lookaheads_reference(grammar, theirs)
        assert _lookahead_lists(found) == [list(per_state.items()) for per_state in expected]
    outcome = _outcome(lalr.lalr_states, rules, start)
    assert outcome == _outcome(lalr_states_reference, rules, start)
    return outcome


@pytest.mark.parametrize("name", sorted(p.name for p in GRAMMARS.glob("*.lark")))
def test_bundled_grammars_get_the_reference_states(name: str) -> None:
    built = Lark((GRAMMARS / name).read_text(), parser="lalr")
    outcome = _assert_same(list(built.rules), built.options.start[0])
    assert not isinstance(outcome, str)


def _schema_builds(schema_id: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[Any], str]]:
    """The (rules, start) of every LALR build of a corpus schema's grammar."""
    from fsmcompile.compile_memos import CompileMemos
    from fsmcompile.compiler import ROOT_RULE, lower_spec
    from fsmcompile.errors import UnsupportedFeatureError
    from fsmcompile.grammar import from_rules, generated

    subset = schema_id.split("/")[0]
    path = CORPUS / subset / "schemas.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not present")
    with open(path, encoding="utf-8") as handle:
        record = next(r for r in map(json.loads, handle) if r["id"] == schema_id)
    builds: list[tuple[list[Any], str]] = []

    def recorded(rules: list[Any], start: str) -> Any:
        builds.append((list(rules), start))
        return lalr.lalr_states(rules, start)

    monkeypatch.setattr(generated, "lalr_states", recorded)
    node, rules = lower_spec("json", record["schema"], {})
    assert rules, "a schema of the grammar route"
    try:
        # Fresh memos: a grammar analysed by an earlier test would not be built again.
        with CompileMemos().active():
            from_rules.grammar_from_rules({ROOT_RULE: node, **rules}, ROOT_RULE, max_states=100_000)
    except UnsupportedFeatureError:
        pass  # still LALR(1)-conflicted after merging: the builds are compared all the same
    return builds


@pytest.mark.corpus
@pytest.mark.parametrize("schema_id", SCHEMAS)
def test_schema_grammars_get_the_reference_states(
    schema_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds = _schema_builds(schema_id, monkeypatch)
    assert builds
    for rules, start in builds:
        _assert_same(rules, start)


@pytest.mark.corpus
def test_a_merge_round_s_collision_message_is_the_reference_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # wp_0's first build collides; `merge_twins` reads the rules out of the message.
    builds = _schema_builds("WashingtonPost/wp_0_Normalized", monkeypatch)
    first = _assert_same(*builds[0])
    assert isinstance(first, str) and first.startswith("Reduce/Reduce collision in ")


def test_a_deep_chain_gets_the_reference_states() -> None:
    # n_i: A n_{i+1} | B, then m_i: C m_{i+1} | <empty>: the includes relation (through
    # nullable tails too) and the item sets nest as deep as the chains.
    depth = 3000
    rules = [
        rule
        for i in range(depth)
        for rule in (
            Rule(NonTerminal(f"n{i}"), [Terminal("A"), NonTerminal(f"n{i + 1}")], 0),
            Rule(NonTerminal(f"n{i}"), [Terminal("B")], 1),
            Rule(NonTerminal(f"m{i}"), [Terminal("C"), NonTerminal(f"m{i + 1}")], 0),
            Rule(NonTerminal(f"m{i}"), [], 1),
        )
    ] + [
        Rule(NonTerminal(f"n{depth}"), [NonTerminal("m0")], 0),
        Rule(NonTerminal(f"m{depth}"), [Terminal("D")], 0),
    ]
    outcome = _assert_same(rules, "n0")
    assert not isinstance(outcome, str)


NONTERMINALS = ("s", "a", "b", "c", "d", "e")
TERMINALS = ("X", "Y", "Z", "W")
_symbol = st.sampled_from([("n", n) for n in NONTERMINALS] + [("t", t) for t in TERMINALS])
_expansions = st.lists(st.lists(_symbol, max_size=4), min_size=1, max_size=4, unique_by=str)


@settings(max_examples=500, deadline=None)
@given(st.fixed_dictionaries({n: _expansions for n in NONTERMINALS}))
def test_random_grammars_get_the_reference_states_or_message(
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
    _assert_same(rules, "s")


def test_seeded_random_grammars_cover_both_conflicts_and_clean_tables() -> None:
    # The comparison is only as good as its cases: each outcome must occur among them.
    symbols = [NonTerminal(n) for n in NONTERMINALS] + [Terminal(t) for t in TERMINALS]
    seen = set()
    for seed in range(300):
        rng = random.Random(seed)
        rules = list(
            dict.fromkeys(
                Rule(NonTerminal(n), rng.sample(symbols, rng.randint(0, 3)), order)
                for n in NONTERMINALS
                for order in range(rng.randint(1, 3))
            )
        )
        outcome = _assert_same(rules, "s")
        seen.add(outcome.split(" ")[0] if isinstance(outcome, str) else "table")
    assert {"table", "Shift/Reduce", "Reduce/Reduce"} <= seen


def test_inconsistent_columns_are_refused() -> None:
    grammar = lalr._numbered([Rule(NonTerminal("s"), [Terminal("X")], 0)], "s")
    columns = list(lalr._columns(grammar))
    root = grammar.item_base[-1]
    with pytest.raises(ValueError, match="int32"):
        _native.lalr_lr0(array("q", grammar.item_next), *columns[1:], 2, 4, root, math.inf)
    with pytest.raises(ValueError, match="root_item"):
        _native.lalr_lr0(*columns, grammar.num_nt, len(grammar.symbols), 99, math.inf)
    with pytest.raises(TypeError, match="real number"):
        _native.lalr_lr0(*columns, grammar.num_nt, len(grammar.symbols), root, "soon")  # type: ignore[arg-type]
    columns[0] = array("i", [7 if s == -1 else s for s in grammar.item_next])
    with pytest.raises(ValueError, match="rule"):
        _native.lalr_lr0(*columns, grammar.num_nt, len(grammar.symbols), root, math.inf)


def _keyword_chain(keywords: int) -> list[Any]:
    """s: K0 s | K1 s | ... | END: a state per keyword, each holding every rule and
    reading every keyword, so the item sets grow as keywords², the includes relation
    too (every state's node includes every other's), each edge a set of every keyword."""
    rules = [
        Rule(NonTerminal("s"), [Terminal(f"K{i}"), NonTerminal("s")], i) for i in range(keywords)
    ]
    return [*rules, Rule(NonTerminal("s"), [Terminal("END")], keywords)]


BUDGET_S = 0.2
SCHEDULING_S = 1.0
"""Allowance for a busy machine's scheduler: the steps overran by 0.5-1 s before they
read the clock, and stop within milliseconds of the deadline now; a run niced under load 6
on two cores still took 0.87 s, so the allowance is wide while staying well under the
5 s the unchecked step takes."""


def _stops_in_time(step: Any) -> None:
    """`step()` under a compile deadline BUDGET_S away raises the timeout within 2x it
    (plus the scheduling allowance)."""
    began = time.monotonic()
    with compile_deadline(began + BUDGET_S), pytest.raises(BudgetExceededError) as caught:
        step()
    assert time.monotonic() - began < 2 * BUDGET_S + SCHEDULING_S
    assert caught.value.limit == "timeout_s"


def test_the_lr0_step_stops_at_the_deadline() -> None:
    # 4,000 keywords: 8,000 states of 4,000 items, 1 s of C unloaded (5x BUDGET_S).
    grammar = lalr._numbered(_keyword_chain(4000), "s")
    columns = lalr._columns(grammar)
    _stops_in_time(lambda: lalr._lr0(grammar, columns))


def test_the_lookahead_step_stops_at_the_deadline() -> None:
    # 2,000 keywords: the lookaheads take 1 s of C unloaded (5x BUDGET_S; 1,000 took
    # 0.22 s on a faster machine, and then sometimes finished before the deadline), the
    # LR(0) states 0.4 s, built first without a deadline.
    grammar = lalr._numbered(_keyword_chain(2000), "s")
    columns = lalr._columns(grammar)
    lr0 = lalr._lr0(grammar, columns)
    _stops_in_time(lambda: lalr._lookaheads(grammar, columns, lr0))
    _stops_in_time(lambda: lalr.lalr_states(_keyword_chain(2000), "s"))


def test_the_action_step_stops_at_the_deadline() -> None:
    # s: s item | item; item: K0 | ... | K1999: every keyword's state reduces on every
    # keyword, 4 million lookahead entries, 5 s of Python unloaded; the C steps (0.3 s)
    # run first without a deadline.
    rules = [
        Rule(NonTerminal("s"), [NonTerminal("s"), NonTerminal("item")], 0),
        Rule(NonTerminal("s"), [NonTerminal("item")], 1),
        *(Rule(NonTerminal("item"), [Terminal(f"K{i}")], i) for i in range(2000)),
    ]
    grammar = lalr._numbered(rules, "s")
    columns = lalr._columns(grammar)
    lr0 = lalr._lr0(grammar, columns)
    found = lalr._lookaheads(grammar, columns, lr0)
    _stops_in_time(lambda: lalr._actions(grammar, lr0, found, True))


def test_a_deadline_not_reached_changes_no_table() -> None:
    # 100 keywords: the C steps read the clock dozens of times, and build what they build
    # with no deadline (math.inf), which is the reference's.
    with compile_deadline(time.monotonic() + 3600):
        outcome = _assert_same(_keyword_chain(100), "s")
        assert not isinstance(outcome, str)
    grammar = lalr._numbered(_keyword_chain(100), "s")
    columns = lalr._columns(grammar)
    sizes = (grammar.num_nt, len(grammar.symbols))
    root = grammar.item_base[-1]
    far = time.monotonic() + 3600
    built = [_native.lalr_lr0(*columns, *sizes, root, deadline) for deadline in (far, math.inf)]
    assert built[0] == built[1] is not None
    lr0 = [lalr._int32(column) for column in built[1]]
    found = [
        _native.lalr_lookaheads(*columns, *sizes, grammar.start, *lr0, deadline)
        for deadline in (far, math.inf)
    ]
    assert found[0] == found[1] is not None
