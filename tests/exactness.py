"""Reference checks shared by tests: brute-force masks and tiny hand-built automata."""

from __future__ import annotations

import numpy as np

from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.tables.token_index import TokenIndex
from fsmcompile.types import DEAD
from fsmcompile.vocabulary import Vocabulary


def dfa_from_edges(edges: dict[int, dict[bytes, int]], accepting: set[int]) -> ByteDFA:
    """A ByteDFA from {state: {byte: next}}; bytes missing from a state go to DEAD."""
    num_states = max([*edges, *accepting, *(t for e in edges.values() for t in e.values())]) + 1
    table = np.full((num_states, 256), DEAD, dtype=np.int32)
    for state, out in edges.items():
        for byte, target in out.items():
            table[state, byte[0]] = target
    columns, class_of_byte = np.unique(table.T, axis=0, return_inverse=True)
    return ByteDFA(
        transitions=np.ascontiguousarray(columns.T, dtype=np.int32),
        class_of_byte=class_of_byte.reshape(-1).astype(np.int32),
        accepting=np.array([s in accepting for s in range(num_states)], dtype=np.bool_),
    )


def tiny_vocabulary(
    tokens: list[bytes], eos: int | None = None, size: int | None = None
) -> Vocabulary:
    """A hand-made vocabulary; EOS is appended as the last id unless given."""
    table = list(tokens)
    if eos is None:
        table.append(b"")
        eos = len(table) - 1
    return Vocabulary(
        token_bytes=table,
        eos_token_ids=(eos,),
        special_token_ids=frozenset({eos}),
        size=size or len(table),
        name="tiny",
    )


def brute_force_allowed(dfa: ByteDFA, vocab: Vocabulary, state: int) -> set[int]:
    """The obviously right mask: every text token whose bytes keep `state` alive."""
    allowed = {
        token
        for token, data in enumerate(vocab.token_bytes)
        if data and token not in vocab.special_token_ids and dfa.walk(data, state) != DEAD
    }
    if dfa.accepting[state]:
        allowed |= set(vocab.eos_token_ids)
    return allowed


def assert_index_matches_brute_force(index: TokenIndex, states: list[int] | None = None) -> None:
    """Every state's mask equals the brute-force mask (soundness and completeness)."""
    for state in states if states is not None else range(index.num_states):
        expected = brute_force_allowed(index.dfa, index.vocabulary, state)
        got = set(index.allowed_token_ids(state).tolist())
        missing, extra = sorted(expected - got)[:5], sorted(got - expected)[:5]
        assert got == expected, f"state {state}: missing {missing}, extra {extra}"
