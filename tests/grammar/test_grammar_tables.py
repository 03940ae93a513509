"""Grammar tables: the path order that lets a row skip a rejected sequence's runs, and the
byte walk inside one lexeme that advances most tokens."""

from __future__ import annotations

import random

import numpy as np
import pytest
from grammar_checks import bundled_text, compiled, inside_walk
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmcompile.compiler import compile_json_schema
from fsmcompile.runtime.grammar_parser import sequence_preorder
from fsmcompile.runtime.grammar_tables import GrammarTables
from fsmcompile.tables.lexer_walks import context_set_ids, walk_bytes


@st.composite
def sequence_tables(draw: st.DrawFn) -> tuple[list[int], list[int], list[int]]:
    """Interned sequences as an index stores them: id 0 empty, a parent before its child,
    no two ids for the same (parent, terminal, context)."""
    parent, terminal, context = [-1], [-1], [-1]
    seen: set[tuple[int, int, int]] = set()
    for _ in range(draw(st.integers(0, 40))):
        key = (
            draw(st.integers(0, len(parent) - 1)),
            draw(st.integers(0, 3)),
            draw(st.integers(0, 4)),
        )
        if key not in seen:
            seen.add(key)
            for column, value in zip((parent, terminal, context), key, strict=True):
                column.append(value)
    return parent, terminal, context


def _path(seq: int, parent: list[int], terminal: list[int], context: list[int]) -> tuple:
    steps = []
    while seq > 0:
        steps.append((terminal[seq], context[seq]))
        seq = parent[seq]
    return tuple(reversed(steps))


@settings(max_examples=200, deadline=None)
@given(sequence_tables())
def testsequence_preorder_puts_each_sequence_before_exactly_its_extensions(table):
    parent, terminal, context = table
    rank, end = sequence_preorder(
        np.array(parent, dtype=np.int32),
        np.array(terminal, dtype=np.int32),
        np.array(context, dtype=np.int32),
    )
    paths = [_path(s, parent, terminal, context) for s in range(len(parent))]
    # Path order is the lexicographic order of the (terminal, context) steps.
    assert sorted(range(len(parent)), key=lambda s: paths[s]) == np.argsort(rank).tolist()
    for s, path in enumerate(paths):
        inside = {t for t in range(len(parent)) if rank[s] <= rank[t] < end[s]}
        assert inside == {t for t, other in enumerate(paths) if other[: len(path)] == path}


def _reference_walk(tables: GrammarTables, state: int, data: bytes) -> tuple:
    """The outcomes of `walk_bytes` itself, numbered as the tables number them."""
    out = []
    sets = context_set_ids(tables.index)
    for emitted, end, constraints, grown, fresh in walk_bytes(
        tables.lexer, tables._next_contexts, tables._ignored, state, frozenset(), data, sets
    ):
        seq = 0
        for terminal, context in emitted:
            seq = tables._sequences.extend(seq, terminal, context)
        out.append((seq, end, tables._constraints.intern(constraints), grown, fresh))
    return tuple(out)


@pytest.mark.parametrize("source", ["json", "sql_select", "counted"])
def test_c_walk_of_every_reading_is_walk_bytes(source, gpt2):
    """`Parser.walk_bytes` (C, what the tables advance with) lists the readings
    `walk_bytes` (the plain Python definition) does, from every lexer state, with no
    constraint and with open ones (the abandoned states of cuts)."""
    if source == "counted":
        schema = {"type": "object", "properties": {"s": {"maxLength": 6}, "any": {}}}
        index = compile_json_schema(schema, gpt2, cache=False)
    else:
        index = compiled(bundled_text(source), "gpt2")
    tables = GrammarTables(index)
    lexer = tables.lexer
    rng = random.Random(5)
    structural = [
        t for t in range(gpt2.size) if len(set(gpt2.token_bytes[t]) & set(b',:{}[]"( )')) > 1
    ]
    tokens = rng.sample(range(gpt2.size), 60) + rng.sample(structural, 60)
    unlabelled = np.flatnonzero(lexer.label < 0).tolist()
    sets = context_set_ids(index)
    constraint_sets = [frozenset(), frozenset(unlabelled[:1]), frozenset(unlabelled[1:4])]
    cuts = several = constrained = 0
    for state in range(lexer.num_states):
        for token in tokens:
            data = gpt2.token_bytes[token]
            for cons in constraint_sets:
                expected = walk_bytes(
                    lexer, tables._next_contexts, tables._ignored, state, cons, data, sets
                )
                got = tables._parser.walk_bytes(state, sorted(cons), data)
                readings = [(e, q, frozenset(c), g, f) for e, q, c, g, f in got]
                assert len(readings) == len(expected)
                assert set(readings) == set(expected), (state, data, cons)
                cuts += any(r[0] for r in expected)
                several += len(expected) > 1
                constrained += any(r[2] for r in expected)
    assert cuts > 100 and several > 10 and constrained > 10


@pytest.mark.parametrize("source", ["json", "sql_select", "counted"])
def test_walk_inside_a_lexeme_agrees_with_the_full_walk(source, gpt2):
    """The inside walk (what `advance_inside` is checked against) and the tables' walk
    both give `walk_bytes`' one reading wherever no byte can cut the lexeme."""
    if source == "counted":  # a recursive schema with a counted string: items grow
        schema = {"type": "object", "properties": {"s": {"maxLength": 6}, "any": {}}}
        index = compile_json_schema(schema, gpt2, cache=False)
    else:
        index = compiled(bundled_text(source), "gpt2")
    tables = GrammarTables(index)
    rng = random.Random(7)
    tokens = rng.sample(range(gpt2.size), 300)
    inside = cut = 0
    for state in range(tables.lexer.num_states):
        for token in tokens:
            data = gpt2.token_bytes[token]
            fast = inside_walk(tables.lexer, state, data)
            if fast is None:
                cut += 1
                continue
            inside += 1
            assert fast == _reference_walk(tables, state, data), (state, data)
            assert tables._walk(state, 0, data) == fast, (state, data)
    assert inside > 1000 and cut > 100  # both paths were taken
