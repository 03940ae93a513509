"""The Python exit sets and shape tags that `index/cfg/exits.py` (`_native.reach_or`) and
`index/cfg/lexer_shapes.py` replaced: the reference definitions their tests compare
against, ids and dtypes included.

Reach is a Tarjan pass over Python integer bitsets; exit sets are interned in a pass over
the states; shape tags are propagated one byte class at a time.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import distinct_targets
from fsmcompile.index.cfg.exits import ExitSets, _any_shared
from fsmcompile.tables.bits import bit_positions
from fsmcompile.tables.grammar_index import ANY_CONTEXT, END_ONLY
from fsmcompile.tables.lexer_automaton import LexerAutomaton


def reach_reference(succ: list[list[int]], seeds: list[int]) -> list[int]:
    """Per state, the OR of the seeds of every state it reaches (Tarjan, iteratively)."""
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
                        if not on_stack[x]:
                            bits |= reach[x]
                for w in members:
                    reach[w] = bits
            if work:
                parent = work[-1][0]
                if low[v] < low[parent]:
                    low[parent] = low[v]
    return reach


def exit_sets_reference(lexer: LexerAutomaton, num_terminals: int) -> ExitSets:
    """The exit set of every lexer state, interned in a pass over the states."""
    trans, label = lexer.transitions, lexer.label
    num_states = trans.shape[0]
    labelled = label >= 0
    nxt = np.maximum(trans, 0)
    can_cut = (trans < 0) | (label[nxt] < 0)
    starts_alive = trans[lexer.context_start] >= 0
    follows = _any_shared(can_cut, starts_alive)
    restricted = labelled & ~follows[:, starts_alive.any(axis=1)].all(axis=1)
    succ = distinct_targets(trans)
    label_list = label.tolist()
    free_seeds = [0] * num_states
    for q in np.flatnonzero(labelled & ~restricted).tolist():
        free_seeds[q] = 1 << label_list[q]
    free_reach = reach_reference(succ, free_seeds)
    limited = np.flatnonzero(restricted).tolist()
    limited_reach = [0] * num_states
    if limited:
        limited_seeds = [0] * num_states
        for j, r in enumerate(limited):
            limited_seeds[r] = 1 << j
        limited_reach = reach_reference(succ, limited_seeds)
    limited_follows = {r: np.flatnonzero(follows[r]).tolist() for r in limited}
    ids: dict[tuple[tuple[int, int], ...], int] = {}
    xsets: list[int] = []
    for free_bits, limited_bits in zip(free_reach, limited_reach, strict=True):
        pairs = {(t, ANY_CONTEXT) for t in bit_positions(free_bits)}
        for j in bit_positions(limited_bits):
            r = limited[j]
            t = label_list[r]
            if free_bits >> t & 1:
                continue
            pairs.add((t, END_ONLY))
            pairs.update((t, k) for k in limited_follows[r])
        xsets.append(ids.setdefault(tuple(sorted(pairs)), len(ids)))
    keys = sorted(ids, key=ids.__getitem__)
    lengths = np.array([len(k) for k in keys], dtype=np.int64)
    flat = [p for k in keys for p in k]
    return ExitSets(
        state_xset=np.array(xsets, dtype=np.int32),
        pair_start=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        pair_terminal=np.array([t for t, _ in flat], dtype=np.int32),
        pair_context=np.array([k for _, k in flat], dtype=np.int32),
    )


def context_tag_reference(lexer: LexerAutomaton) -> npt.NDArray[np.int64]:
    """Each state's largest restart context among the states it reaches (-1: none)."""
    trans = lexer.transitions
    tag = lexer.restart_context.astype(np.int64).copy()
    while True:
        nxt = tag.copy()
        for c in range(trans.shape[1]):
            ok = trans[:, c] >= 0
            nxt[ok] = np.maximum(nxt[ok], tag[trans[ok, c]])
        if np.array_equal(nxt, tag):
            break
        tag = nxt
    return tag
