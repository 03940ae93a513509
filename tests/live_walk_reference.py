"""The level-by-level numpy walk that `walk_live_tokens` (C, `native/live_walk.c`) replaced: the
reference definition its tests compare against.

One level of the trie at a time, the frontier holds (state, node) pairs tagged with a
bitset of the origins that reach them; states are replaced by their liveness class at the
node's height and equal (node, state) pairs merge, OR-ing their bits.
"""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import sorted_unique
from fsmcompile.errors import BudgetExceededError
from fsmcompile.index.dfa.levels import LivenessLevels
from fsmcompile.index.dfa.trie_walk import Injections, SinkEvents
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.vocabulary.trie import TokenTrie


def _or_reduce_sorted(
    bits: npt.NDArray[np.uint64], starts: npt.NDArray[np.int64]
) -> npt.NDArray[np.uint64]:
    """OR together the rows of `bits` in the runs that begin at `starts`."""
    if bits.shape[0] == starts.shape[0]:
        return bits
    return np.bitwise_or.reduceat(bits, starts, axis=0)


def _one_hot(origins: npt.NDArray[np.int64], words: int) -> npt.NDArray[np.uint64]:
    bits = np.zeros((origins.shape[0], words), dtype=np.uint64)
    bits[np.arange(origins.shape[0]), origins // 64] = np.left_shift(
        np.uint64(1), (origins % 64).astype(np.uint64)
    )
    return bits


def _merge(
    node: npt.NDArray[np.int64],
    state: npt.NDArray[np.int64],
    bits: npt.NDArray[np.uint64],
    num_states: np.int64,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
    """Merge equal (node, state) pairs, OR-ing their origin bits; result sorted by node."""
    key = node * num_states + state
    order = np.argsort(key, kind="stable")
    key = key[order]
    starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
    merged = _or_reduce_sorted(bits[order], starts)
    pair_key = key[starts]
    return pair_key // num_states, pair_key % num_states, merged


def walk_live_tokens_reference(
    dfa: ByteDFA,
    trie: TokenTrie,
    levels: LivenessLevels,
    origins: npt.NDArray[np.int32],
    deadline: float | None = None,
    *,
    from_root: npt.NDArray[np.bool_] | None = None,
    injections: Injections | None = None,
    sinks: npt.NDArray[np.bool_] | None = None,
    out: npt.NDArray[np.uint64] | None = None,
) -> tuple[npt.NDArray[np.uint64], SinkEvents]:
    """For each text token of the trie, the set of origins from which it stays alive.

    Args:
        origins: int32[R], start states (pairwise not equivalent at the root's height).
        from_root: bool[R], which origins start at the root (default: all).
        injections: start pairs below the root (regions' exit events).
        sinks: bool[S], states whose pairs are recorded as events and not expanded.
        out: uint64[T, ceil(R/64)], zeros, to write the rows into (a slice of the
            caller's matrix of every origin's words saves a copy of it).

    Returns:
        (reached uint64[T, ceil(R/64)], sink events): bit r of reached row t is set when
        the bytes of trie token t (`trie.token_ids[t]`) keep the DFA alive from
        origins[r] (sink pairs are not marked). Rows are made for tokens only: a row per
        trie node was twice the memory, all of it touched and page-faulted anew on every
        walk.
    """
    num_origins = origins.shape[0]
    words = (num_origins + 63) // 64
    trans = dfa.transitions
    # Per-node facts are read per edge, not mapped over the whole trie first (~2 ms).
    class_of = dfa.class_of_byte.astype(np.int64)
    canon = levels.canon
    top_height = len(levels.row_of_height) - 1
    num_states = np.int64(dfa.num_states)
    is_sink = sinks if sinks is not None else np.zeros(dfa.num_states, dtype=np.bool_)
    events: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.uint64]]]
    events = []

    level_nodes: list[npt.NDArray[np.int64]] = []
    level_bits: list[npt.NDArray[np.uint64]] = []
    starting = np.arange(num_origins) if from_root is None else np.flatnonzero(from_root)
    state = origins[starting].astype(np.int64)
    node = np.zeros(state.shape[0], dtype=np.int64)
    bits = _one_hot(starting.astype(np.int64), words)
    injected_by_depth: dict[int, npt.NDArray[np.int64]] = {}
    if injections is not None and injections.nodes.shape[0]:
        injected_depth = trie.node_depths()[injections.nodes]
        for depth in sorted_unique(injected_depth).tolist():
            injected_by_depth[int(depth)] = np.flatnonzero(injected_depth == depth)
    for depth in range(1, trie.depth + 1):
        if deadline is not None and time.monotonic() > deadline:
            raise BudgetExceededError(
                "compile timed out while walking the vocabulary", limit="timeout_s", value=0.0
            )
        parent, child = trie.children(node)
        nxt = trans[state[parent], class_of[trie.node_byte[child]]].astype(np.int64)
        alive = nxt >= 0
        child, nxt, pair_bits = child[alive], nxt[alive], bits[parent[alive]]
        sunk = is_sink[nxt]
        if sunk.any():
            events.append((child[sunk], nxt[sunk], pair_bits[sunk]))
            keep = ~sunk
            child, nxt, pair_bits = child[keep], nxt[keep], pair_bits[keep]
        picked = injected_by_depth.get(depth)
        if picked is not None and injections is not None:
            child = np.concatenate([child, injections.nodes[picked]])
            nxt = np.concatenate([nxt, injections.states[picked]])
            pair_bits = np.concatenate([pair_bits, _one_hot(injections.origins[picked], words)])
        if child.shape[0] == 0:
            if not any(d > depth for d in injected_by_depth):
                break
            state, node, bits = child, child, pair_bits
            continue
        row = levels.row_of_height[np.minimum(trie.node_height[child], top_height)]
        nxt = canon[row, nxt].astype(np.int64)
        node, state, bits = _merge(child, nxt, pair_bits, num_states)
        node_starts = np.flatnonzero(np.concatenate([[True], node[1:] != node[:-1]]))
        # A node is met at its depth only, once (pairs are merged by node above).
        level_nodes.append(node[node_starts])
        level_bits.append(_or_reduce_sorted(bits, node_starts))
    reached = np.zeros((trie.token_ids.shape[0], words), dtype=np.uint64) if out is None else out
    if level_nodes:
        at_node = np.full(trie.num_nodes, -1, dtype=np.int64)
        nodes = np.concatenate(level_nodes)
        at_node[nodes] = np.arange(nodes.shape[0])
        row_of_token = at_node[trie.token_node]
        live = np.flatnonzero(row_of_token >= 0)
        reached[live] = np.concatenate(level_bits)[row_of_token[live]]
    if events:
        ev_nodes = np.concatenate([e[0] for e in events])
        ev_states = np.concatenate([e[1] for e in events])
        ev_bits = np.concatenate([e[2] for e in events])
        ev_nodes, ev_states, ev_bits = _merge(ev_nodes, ev_states, ev_bits, num_states)
    else:
        ev_nodes = ev_states = np.zeros(0, dtype=np.int64)
        ev_bits = np.zeros((0, words), dtype=np.uint64)
    return reached, SinkEvents(ev_nodes, ev_states, ev_bits)
