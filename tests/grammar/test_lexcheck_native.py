"""The lexing check's C searches (`native/lexcheck.c`) agree with their Python definition
(`lexcheck_reference.py`) exactly: the same witness bytes (they appear in error messages)
and the same follower index, -1 or `DROPPED`.

Compared on every `lexing_conflict` call the grammars of real JSON schemas and the
bundled grammars make, and on random small automata with interleaved byte classes,
followers, and both flags.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from grammar_checks import GRAMMARS
from hypothesis import given, settings
from hypothesis import strategies as st
from lexcheck_reference import Lists, lexing_conflict_lists

from fsmcompile import _native
from fsmcompile.compile_memos import current_memos
from fsmcompile.grammar import from_rules, lexing_check
from fsmcompile.grammar.lexing_check import DROPPED
from fsmcompile.tables.byte_dfa import ByteDFA

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpora" / "jsonschemabench"
SCHEMAS = (
    "WashingtonPost/wp_0_Normalized",
    "WashingtonPost/wp_3_Normalized",
    "Kubernetes/kb_0_Normalized",
    "Kubernetes/kb_2_Normalized",
    "Github_hard/o1052",
    "Github_hard/o4249",
    "Github_hard/o5863",
    "Github_hard/o6023",
    "Github_medium/o13",
    "Snowplow/sp_0_Normalized",
    "Snowplow/sp_17_Normalized",
    "Glaiveai2K/calculate_area_0a79b7ed",
)

Automaton = tuple[Any, Any, Any]
Call = tuple[Automaton, Automaton, bool, bool, list[Automaton]]


def _assert_same(calls: list[Call]) -> list[tuple[bytes, int] | None]:
    """Each call's C answer equals the reference's; the answers."""
    lists: dict[int, Lists] = {}

    def as_lists(automaton: Automaton) -> Lists:
        if id(automaton) not in lists:
            lists[id(automaton)] = Lists.of(ByteDFA(*automaton))
        return lists[id(automaton)]

    answers = []
    for a, b, same, first, follows in calls:
        ours = _native.lexing_conflict(a, b, same, first, follows)
        theirs = lexing_conflict_lists(
            as_lists(a), as_lists(b), same, first, list(map(as_lists, follows))
        )
        assert ours == theirs, (same, first, len(follows))
        answers.append(ours)
    return answers


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[Call]:
    """Every `lexing_conflict` call from here on (the content memo emptied, so none is
    answered from an earlier test's)."""
    calls: list[Call] = []
    real = lexing_check.lexing_conflict

    def recorded(a: Automaton, b: Automaton, same: bool, first: bool, follows: Any) -> Any:
        calls.append((a, b, same, first, list(follows)))
        return real(a, b, same, first, follows)

    monkeypatch.setattr(lexing_check, "lexing_conflict", recorded)
    current_memos().conflicts.clear()
    return calls


@pytest.mark.corpus
@pytest.mark.parametrize("schema_id", SCHEMAS)
def test_schema_grammars_get_the_reference_answers(
    schema_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fsmcompile.compiler import ROOT_RULE, lower_spec
    from fsmcompile.errors import UnsupportedFeatureError

    path = CORPUS / schema_id.split("/")[0] / "schemas.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not present")
    with open(path, encoding="utf-8") as handle:
        record = next(r for r in map(json.loads, handle) if r["id"] == schema_id)
    calls = _recording(monkeypatch)
    node, rules = lower_spec("json", record["schema"], {})
    assert rules, "a schema of the grammar route"
    try:
        from_rules.grammar_from_rules({ROOT_RULE: node, **rules}, ROOT_RULE, max_states=100_000)
    except UnsupportedFeatureError:
        pass  # a lexing conflict: its witness was compared like every other answer
    assert calls
    _assert_same(calls)


@pytest.mark.parametrize("name", sorted(p.name for p in GRAMMARS.glob("*.lark")))
def test_bundled_grammars_get_the_reference_answers(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Hand-written grammars are not checked on load (their terminals follow Python's
    # alternation order, not an automaton): here each terminal is given its automaton and
    # the contexts are checked only to compare the searches on real terminals.
    from dataclasses import replace

    from fsmcompile.automaton.build import build_dfa
    from fsmcompile.grammar.loading import load_lark_grammar

    grammar = load_lark_grammar((GRAMMARS / name).read_text())
    terminals = [replace(t, dfa=build_dfa(t.node)) for t in grammar.terminals]
    grammar = replace(grammar, terminals=terminals)
    calls = _recording(monkeypatch)
    try:
        lexing_check.check_contexts(grammar)
    except lexing_check.LexingConflict:
        pass
    assert calls
    _assert_same(calls)


# ---- random automata ---------------------------------------------------------------------

NUM_BYTES = 256


def _random_dfa(rng: random.Random, *, live: float) -> Automaton:
    """A small automaton whose byte classes interleave (a class owns several runs of
    bytes), so class pairs are ordered by their first byte and spelled by their last."""
    num_states, num_classes = rng.randint(1, 5), rng.randint(1, 4)
    cuts = sorted(rng.sample(range(1, NUM_BYTES), rng.randint(0, 6)))
    runs = [rng.randrange(num_classes) for _ in range(len(cuts) + 1)]
    class_of_byte = np.zeros(NUM_BYTES, np.int32)
    for start, end, cls in zip([0, *cuts], [*cuts, NUM_BYTES], runs, strict=True):
        class_of_byte[start:end] = cls
    transitions = np.array(
        [
            [rng.randrange(num_states) if rng.random() < live else -1 for _ in range(num_classes)]
            for _ in range(num_states)
        ],
        np.int32,
    )
    accepting = np.array([rng.random() < 0.4 for _ in range(num_states)], np.bool_)
    return transitions, class_of_byte, accepting


def _random_call(rng: random.Random) -> Call:
    live = rng.choice((0.3, 0.6, 0.9))
    a = _random_dfa(rng, live=live)
    same = rng.random() < 0.3
    b = a if same else _random_dfa(rng, live=live)
    follows = [_random_dfa(rng, live=live) for _ in range(rng.randint(0, 3))]
    return a, b, same, rng.random() < 0.3, follows


@settings(max_examples=400, deadline=None)
@given(st.randoms(use_true_random=False))
def test_random_automata_get_the_reference_answers(rng: random.Random) -> None:
    _assert_same([_random_call(rng)])


def test_seeded_random_automata_cover_every_answer() -> None:
    # The comparison is only as good as its cases: each kind of answer must occur.
    rng = random.Random(7)
    answers = _assert_same([_random_call(rng) for _ in range(3000)])
    kinds = {None if found is None else min(found[1], 0) for found in answers}
    assert kinds == {None, -1, DROPPED, 0}
    assert any(found is not None and found[1] > 0 for found in answers)
    assert any(found is not None and len(found[0]) > 2 for found in answers)


def test_a_long_chain_is_searched_breadth_first() -> None:
    # a reads 'x' * 5000 then 'y'; b reads any run of 'x' then 'y': they share the lexeme.
    n = 5000
    class_of_byte = np.zeros(NUM_BYTES, np.int32)
    class_of_byte[ord("x")], class_of_byte[ord("y")] = 1, 2
    chain = np.full((n + 2, 3), -1, np.int32)
    chain[np.arange(n), 1] = np.arange(1, n + 1)
    chain[n, 2] = n + 1
    a = (chain, class_of_byte, np.arange(n + 2) == n + 1)
    loop = np.array([[-1, 0, 1], [-1, -1, -1]], np.int32)
    b = (loop, class_of_byte, np.array([False, True]))
    assert _assert_same([(a, b, False, False, [])]) == [(b"x" * n + b"y", -1)]


def test_malformed_automata_are_refused() -> None:
    one = np.zeros(NUM_BYTES, np.int32)
    # One byte to an accepting state: a = b reaches it, so each follower is read.
    good = (np.array([[1], [-1]], np.int32), one, np.array([False, True]))
    transitions, class_of_byte, accepting = good
    bad_shapes = [
        (transitions.astype(np.int64), class_of_byte, accepting),
        (transitions, class_of_byte[:255], accepting),
        (transitions, class_of_byte, accepting[:-1]),
        (np.asfortranarray(np.zeros((3, 2), np.int32)), class_of_byte, np.zeros(3, np.bool_)),
    ]
    for bad in bad_shapes:
        with pytest.raises(ValueError):
            _native.lexing_conflict(bad, good, False, False, [])
        with pytest.raises(ValueError):
            _native.lexing_conflict(good, good, True, False, [good, bad])
    out_of_range = np.full(NUM_BYTES, 9, np.int32)
    with pytest.raises(ValueError):
        _native.lexing_conflict((transitions, out_of_range, accepting), good, False, False, [])
    wild = (np.array([[7]], np.int32), one, np.array([True]))
    with pytest.raises(ValueError, match="out of range"):
        _native.lexing_conflict(wild, wild, True, False, [])
    with pytest.raises(TypeError):
        _native.lexing_conflict(list(good), good, False, False, [])
