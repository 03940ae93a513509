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

from fsmcompile.index.grammar_lexer import LexerAutomaton

ANY_CONTEXT = -1
"""Exit pair context: the cut can be followed in every context where a lexeme can start
(in one where none can, only by EOS: the runtime checks that with the parser)."""
END_ONLY = -2
"""Exit pair context: the lexeme can be cut as the terminal, but only EOS may follow."""


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


def _reach(trans: npt.NDArray[np.int32], seeds: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """bool[L, X]: row q has the seed columns of every state reachable from q (q included)."""
    reach = seeds.copy()
    while True:
        nxt = reach.copy()
        for c in range(trans.shape[1]):
            ok = trans[:, c] >= 0
            nxt[ok] |= reach[trans[ok, c]]
        if np.array_equal(nxt, reach):
            return reach
        reach = nxt


def exit_sets(lexer: LexerAutomaton, num_terminals: int) -> ExitSets:
    """The exit set of every lexer state.

    Cost: two reachability fixpoints, O(depth x L x C) numpy, plus a Python pass over the
    states; only "restricted" end states (some context cannot follow them, rare) carry
    per-context detail.
    """
    trans, label = lexer.transitions, lexer.label
    num_states = trans.shape[0]
    labelled = label >= 0
    nxt = np.maximum(trans, 0)
    can_cut = (trans < 0) | (label[nxt] < 0)  # bool[L, C]: this byte may end the lexeme
    starts_alive = trans[lexer.context_start] >= 0  # bool[K, C]
    follows = (can_cut.astype(np.int32) @ starts_alive.T.astype(np.int32)) > 0  # bool[L, K]
    # A context where no lexeme can start (only `$END` expected) follows nothing; the
    # runtime asks the parser for EOS there, so it does not make every state restricted.
    restricted = labelled & ~follows[:, starts_alive.any(axis=1)].all(axis=1)
    free_seeds = np.zeros((num_states, num_terminals), dtype=np.bool_)
    free = np.flatnonzero(labelled & ~restricted)
    free_seeds[free, label[free]] = True
    free_reach = _reach(trans, free_seeds)
    limited = np.flatnonzero(restricted)
    limited_seeds = np.zeros((num_states, limited.shape[0]), dtype=np.bool_)
    limited_seeds[limited, np.arange(limited.shape[0])] = True
    limited_reach = _reach(trans, limited_seeds) if limited.shape[0] else limited_seeds

    ids: dict[tuple[tuple[int, int], ...], int] = {}
    state_xset = np.zeros(num_states, dtype=np.int32)
    for q in range(num_states):
        pairs = {(int(t), ANY_CONTEXT) for t in np.flatnonzero(free_reach[q])}
        for j in np.flatnonzero(limited_reach[q]).tolist():
            r = int(limited[j])
            t = int(label[r])
            if free_reach[q, t]:
                continue
            pairs.add((t, END_ONLY))
            pairs.update((t, int(k)) for k in np.flatnonzero(follows[r]))
        key = tuple(sorted(pairs))
        state_xset[q] = ids.setdefault(key, len(ids))
    keys = sorted(ids, key=ids.__getitem__)
    lengths = np.array([len(k) for k in keys], dtype=np.int64)
    flat = [p for k in keys for p in k]
    return ExitSets(
        state_xset=state_xset,
        pair_start=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        pair_terminal=np.array([t for t, _ in flat], dtype=np.int32),
        pair_context=np.array([k for _, k in flat], dtype=np.int32),
    )
