"""Which terminals a pending lexeme can still be cut as, and which contexts can follow.

A lexer state is only worth allowing if its lexeme can still end as a terminal the parser
takes *and* something can follow the cut. lark cuts a lexeme only where the next byte
cannot extend it, so a terminal whose every end state is extended by every byte the next
context can start with can never be followed there: `start: A A` with `A: /a+/` and no
`%ignore` matches no text at all, yet "a" keeps the lexer alive. The exit set of a state
lists, per terminal it can still become, the contexts in which some cut point can be
followed (EOS always can). The runtime checks it against the context the parser lands in
after the terminal. This looks one lexeme boundary ahead; see grammars/README.md for the
cases it does not cover.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fsmcompile import _native
from fsmcompile.index.wide_rows import unique_mask_rows, unique_wide_rows
from fsmcompile.tables.bits import bit_positions, pack_bool_rows
from fsmcompile.tables.grammar_index import ANY_CONTEXT, END_ONLY
from fsmcompile.tables.lexer_automaton import LexerAutomaton


@dataclass(frozen=True, slots=True, eq=False)
class ExitSets:
    """Exit sets as interned lists of (terminal, context) pairs.

    Attributes:
        state_xset: int32[L], the exit set of each lexer state.
        pair_start: int64[X+1], exit set x is pairs pair_start[x]:pair_start[x+1].
        pair_terminal: int32[P]; pair_context: int32[P], a context id, ANY_CONTEXT or
            END_ONLY.
    """

    state_xset: npt.NDArray[np.int32]
    pair_start: npt.NDArray[np.int64]
    pair_terminal: npt.NDArray[np.int32]
    pair_context: npt.NDArray[np.int32]


def _reach(trans: npt.NDArray[np.int32], seeds: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Per state, the OR of the seed bitsets (int64[L, W] rows) of every state it reaches,
    itself included (`_native.reach_or`: one pass over the strongly connected components;
    as Python integer bitsets this was most of the exit sets' cost)."""
    out = np.empty_like(seeds)
    _native.reach_or(np.ascontiguousarray(trans, dtype=np.int32), seeds, out)
    return out


def _bit_rows(
    num_states: int, states: npt.NDArray[np.intp], bits: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """int64[L, W]: bit `bits[i]` set in the row of `states[i]`, every other row zero."""
    words = max(1, (int(bits.max(initial=-1)) + 64) // 64)
    rows = np.zeros((num_states, words), dtype=np.uint64)
    rows[states, bits // 64] = np.left_shift(np.uint64(1), (bits % 64).astype(np.uint64))
    return rows.view(np.int64)


def _as_int(row: npt.NDArray[np.int64]) -> int:
    """A bitset row as one Python integer (bit b of word w is bit 64 w + b)."""
    return int.from_bytes(row.astype("<i8").tobytes(), "little")


def _any_shared(a: npt.NDArray[np.bool_], b: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """bool[A, B]: whether row i of `a` and row j of `b` share a column (a byte class that
    ends the lexeme and starts a lexeme of the context).

    Computed on the distinct rows only (packed, then matched as mask rows): a
    WashingtonPost lexer's 12.8k states have a few hundred distinct rows, and numpy's
    integer matrix product (no BLAS kernel) over all of them took 0.41 s. A float product
    would use BLAS, whose worker threads then spin on the other cores after every call,
    slowing the rest of the process."""
    a_first, a_of = unique_mask_rows(pack_bool_rows(a))
    b_first, b_of = unique_mask_rows(pack_bool_rows(b))
    shared = (a[a_first].astype(np.int32) @ b[b_first].T.astype(np.int32)) > 0
    return shared[a_of][:, b_of]


def exit_sets(lexer: LexerAutomaton, num_terminals: int) -> ExitSets:
    """The exit set of every lexer state.

    Cost: two passes over the strongly connected components (C, bitset rows), plus a
    Python pass over the distinct reach rows; only "restricted" end states (some context
    cannot follow them, rare) carry per-context detail.
    """
    trans, label = lexer.transitions, lexer.label
    num_states = trans.shape[0]
    labelled = label >= 0
    nxt = np.maximum(trans, 0)
    can_cut = (trans < 0) | (label[nxt] < 0)  # bool[L, C]: this byte may end the lexeme
    starts_alive = trans[lexer.context_start] >= 0  # bool[K, C]
    follows = _any_shared(can_cut, starts_alive)  # bool[L, K]
    # A context where no lexeme can start (only `$END` expected) follows nothing; the
    # runtime asks the parser for EOS there, so it does not make every state restricted.
    restricted = labelled & ~follows[:, starts_alive.any(axis=1)].all(axis=1)
    free = np.flatnonzero(labelled & ~restricted)
    free_reach = _reach(trans, _bit_rows(num_states, free, label[free].astype(np.int64)))
    limited = np.flatnonzero(restricted)
    limited_reach = _reach(trans, _bit_rows(num_states, limited, np.arange(limited.shape[0])))
    label_list = label.tolist()
    limited_list = limited.tolist()
    limited_follows = {r: np.flatnonzero(follows[r]).tolist() for r in limited_list}

    ids: dict[tuple[tuple[int, int], ...], int] = {}
    # States reaching the same labels share their exit set: one set per distinct
    # (free, limited) reach, taken in order of each one's first state so that ids are
    # numbered as a pass over the states would (a WashingtonPost lexer: 0.5 s spent on
    # every state's own).
    reach = np.ascontiguousarray(np.concatenate([free_reach, limited_reach], axis=1))
    first, of_state = unique_wide_rows(reach.view(np.uint64))
    words = free_reach.shape[1]
    xset_of = np.empty(first.shape[0], dtype=np.int32)
    for g in np.argsort(first, kind="stable").tolist():
        row = reach[first[g]]
        free_bits, limited_bits = _as_int(row[:words]), _as_int(row[words:])
        pairs = {(t, ANY_CONTEXT) for t in bit_positions(free_bits)}
        for j in bit_positions(limited_bits):
            r = limited_list[j]
            t = label_list[r]
            if free_bits >> t & 1:
                continue
            pairs.add((t, END_ONLY))
            pairs.update((t, k) for k in limited_follows[r])
        key = tuple(sorted(pairs))
        xset_of[g] = ids.setdefault(key, len(ids))
    xsets = xset_of[of_state]
    state_xset = np.ascontiguousarray(xsets, dtype=np.int32)
    keys = sorted(ids, key=ids.__getitem__)
    lengths = np.array([len(k) for k in keys], dtype=np.int64)
    flat = [p for k in keys for p in k]
    return ExitSets(
        state_xset=state_xset,
        pair_start=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        pair_terminal=np.array([t for t, _ in flat], dtype=np.int32),
        pair_context=np.array([k for _, k in flat], dtype=np.int32),
    )
