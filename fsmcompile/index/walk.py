"""Walk the vocabulary trie from many DFA states at once and report which tokens live.

One level of the trie at a time, the frontier holds (state, node) pairs tagged with a
bitset of the origins (start states) that reach them. States are replaced by their
liveness class at the node's height, so pairs from different origins that can no
longer be told apart merge and are walked once. Cost grows with the number of distinct
live pairs, not with states x vocabulary x token length.
"""

from __future__ import annotations

import time
from typing import cast

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.dfa import ByteDFA
from fsmcompile.errors import BudgetExceededError
from fsmcompile.index.bits import bitmask_words
from fsmcompile.index.levels import LivenessLevels
from fsmcompile.vocabulary.trie import TokenTrie


def _or_reduce_sorted(
    bits: npt.NDArray[np.uint64], starts: npt.NDArray[np.int64]
) -> npt.NDArray[np.uint64]:
    """OR together the rows of `bits` in the runs that begin at `starts`."""
    if bits.shape[0] == starts.shape[0]:
        return bits
    return np.bitwise_or.reduceat(bits, starts, axis=0)


def walk_live_tokens(
    dfa: ByteDFA,
    trie: TokenTrie,
    levels: LivenessLevels,
    origins: npt.NDArray[np.int32],
    deadline: float | None = None,
) -> npt.NDArray[np.uint64]:
    """For each trie node, the set of origins from which its path stays alive.

    Args:
        origins: int32[R], start states (pairwise not equivalent at the root's height).

    Returns:
        uint64[N, ceil(R/64)]: bit r of row n is set when the bytes leading to node n keep
        the DFA alive from origins[r].
    """
    num_origins = origins.shape[0]
    words = (num_origins + 63) // 64
    trans = dfa.transitions
    byte_class = dfa.class_of_byte[trie.node_byte]  # class of the edge into each node
    canon = levels.canon
    canon_row = levels.row_of_height[np.minimum(trie.node_height, len(levels.row_of_height) - 1)]
    num_states = np.int64(dfa.num_states)

    reached = np.zeros((trie.num_nodes, words), dtype=np.uint64)
    state = origins.astype(np.int64)
    node = np.zeros(num_origins, dtype=np.int64)
    bits = np.zeros((num_origins, words), dtype=np.uint64)
    bits[np.arange(num_origins), np.arange(num_origins) // 64] = np.left_shift(
        np.uint64(1), (np.arange(num_origins) % 64).astype(np.uint64)
    )
    while state.shape[0]:
        if deadline is not None and time.monotonic() > deadline:
            raise BudgetExceededError(
                "compile timed out while walking the vocabulary", limit="timeout_s", value=0.0
            )
        lo = trie.child_lo[node]
        counts = trie.child_hi[node] - lo
        total = int(counts.sum())
        if total == 0:
            break
        parent = np.repeat(np.arange(state.shape[0]), counts)
        pos = lo[parent] + (np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts))
        child = trie.level_nodes[pos].astype(np.int64)
        nxt = trans[state[parent], byte_class[child]].astype(np.int64)
        alive = nxt >= 0
        parent, child, nxt = parent[alive], child[alive], nxt[alive]
        if child.shape[0] == 0:
            break
        nxt = canon[canon_row[child], nxt].astype(np.int64)
        # Merge equal (node, class) pairs; sorting by node first also groups by node.
        key = child * num_states + nxt
        order = np.argsort(key, kind="stable")
        key, parent = key[order], parent[order]
        starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
        merged = _or_reduce_sorted(bits[parent], starts)
        pair_key = key[starts]
        node = pair_key // num_states
        state = pair_key % num_states
        node_starts = np.flatnonzero(np.concatenate([[True], node[1:] != node[:-1]]))
        reached[node[node_starts]] = _or_reduce_sorted(merged, node_starts)
        bits = merged
    return reached


def _unique_rows(
    rows: npt.NDArray[np.uint64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(first index of each distinct row, distinct-row id of every row) for uint64[n, w]."""
    rng = np.random.default_rng(0xC0FFEE)
    mult = rng.integers(1, 2**63, size=rows.shape[1], dtype=np.uint64) | np.uint64(1)
    hashed = (
        (rows * mult).sum(axis=1, dtype=np.uint64)
        if rows.shape[1]
        else np.zeros(rows.shape[0], dtype=np.uint64)
    )
    _, first, inverse = np.unique(hashed, return_index=True, return_inverse=True)
    if not np.array_equal(rows, rows[first[inverse]]):  # a hash collision: do it exactly
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    return first.astype(np.int64), inverse.reshape(-1).astype(np.int64)


def origin_token_masks(
    per_token: npt.NDArray[np.uint64],
    trie: TokenTrie,
    num_origins: int,
    vocab_size: int,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    """Turn per-token origin bits into distinct packed masks.

    Args:
        per_token: uint64[T, ceil(R/64)], bit r set when trie token t is live from origin r.

    Returns:
        (masks int32[M, ceil(V/32)] distinct text-token masks without EOS,
         mask_of_origin int64[R]).

    Tokens with equal origin bits form a signature; origins with equal signature columns
    share a mask. Both are few, so the V x R bit transpose shrinks to one gather of
    M x V bytes and a contiguous pack.
    """
    sig_first, token_sig = _unique_rows(per_token)
    sig_rows = np.ascontiguousarray(per_token[sig_first]).view(np.uint8)
    sig_bits = np.unpackbits(sig_rows, axis=1, count=num_origins, bitorder="little")
    columns = np.ascontiguousarray(sig_bits.T)  # uint8[R, S]: the signatures each origin allows
    column_words = np.packbits(columns, axis=1, bitorder="little")
    pad = (-column_words.shape[1]) % 8
    column_rows = cast(
        "npt.NDArray[np.uint64]", np.pad(column_words, ((0, 0), (0, pad))).view(np.uint64)
    )
    rep_first, mask_of_origin = _unique_rows(column_rows)
    rep_bits = np.concatenate(  # an extra all-zero signature for ids that are not text
        [columns[rep_first], np.zeros((rep_first.shape[0], 1), dtype=np.uint8)], axis=1
    )
    width = bitmask_words(vocab_size) * 32
    sig_of_id = np.full(width, sig_bits.shape[0], dtype=np.int64)
    sig_of_id[trie.token_ids] = token_sig
    allowed = rep_bits[:, sig_of_id]  # uint8[M, 32W]
    packed = np.packbits(allowed, axis=1, bitorder="little")
    return np.ascontiguousarray(packed).view("<i4").astype(np.int32, copy=False), mask_of_origin
