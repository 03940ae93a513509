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

from fsmcompile.automaton.fragment import distinct_targets
from fsmcompile.index.wide_rows import unique_mask_rows
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


def _reach(succ: list[list[int]], seeds: list[int]) -> list[int]:
    """Per state, the OR of the seed bitsets of every state it reaches (itself included).

    One pass over the strongly connected components in reverse topological order
    (Tarjan's order, iteratively): every member of a component reaches the same states.
    """
    n = len(succ)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    reach = [0] * n
    counter = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            recurse = False
            edges = succ[v]
            while i < len(edges):
                w = edges[i]
                i += 1
                if index[w] < 0:
                    work.append((v, i))
                    work.append((w, 0))
                    recurse = True
                    break
                if on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
            if recurse:
                continue
            if low[v] == index[v]:
                members = []
                bits = 0
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    members.append(w)
                    bits |= seeds[w]
                    if w == v:
                        break
                for w in members:
                    for x in succ[w]:
                        if not on_stack[x]:  # a finished component, or one of ours
                            bits |= reach[x]
                for w in members:
                    reach[w] = bits
            if work:
                parent = work[-1][0]
                if low[v] < low[parent]:
                    low[parent] = low[v]
    return reach


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

    Cost: one or two passes over the strongly connected components (integer bitsets),
    plus a Python pass over the states; only "restricted" end states (some context
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
    succ = distinct_targets(trans)
    label_list = label.tolist()
    free_seeds = [0] * num_states
    for q in np.flatnonzero(labelled & ~restricted).tolist():
        free_seeds[q] = 1 << label_list[q]
    free_reach = _reach(succ, free_seeds)
    limited = np.flatnonzero(restricted).tolist()
    limited_reach = [0] * num_states
    if limited:
        limited_seeds = [0] * num_states
        for j, r in enumerate(limited):
            limited_seeds[r] = 1 << j
        limited_reach = _reach(succ, limited_seeds)
    limited_follows = {r: np.flatnonzero(follows[r]).tolist() for r in limited}

    ids: dict[tuple[tuple[int, int], ...], int] = {}
    # States reaching the same labels share their exit set: one set per distinct
    # (free, limited) reach (a WashingtonPost lexer: 0.5 s spent on every state's own).
    by_reach: dict[tuple[int, int], int] = {}
    xsets: list[int] = []
    for free_bits, limited_bits in zip(free_reach, limited_reach, strict=True):
        found = by_reach.get((free_bits, limited_bits))
        if found is None:
            pairs = {(t, ANY_CONTEXT) for t in bit_positions(free_bits)}
            for j in bit_positions(limited_bits):
                r = limited[j]
                t = label_list[r]
                if free_bits >> t & 1:
                    continue
                pairs.add((t, END_ONLY))
                pairs.update((t, k) for k in limited_follows[r])
            key = tuple(sorted(pairs))
            found = by_reach[(free_bits, limited_bits)] = ids.setdefault(key, len(ids))
        xsets.append(found)
    state_xset = np.array(xsets, dtype=np.int32)
    keys = sorted(ids, key=ids.__getitem__)
    lengths = np.array([len(k) for k in keys], dtype=np.int64)
    flat = [p for k in keys for p in k]
    return ExitSets(
        state_xset=state_xset,
        pair_start=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        pair_terminal=np.array([t for t, _ in flat], dtype=np.int32),
        pair_context=np.array([k for _, k in flat], dtype=np.int32),
    )
