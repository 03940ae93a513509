"""Walk the vocabulary trie from many DFA states at once and report which tokens live.

Each trie node holds the states reached there, each tagged with a bitset of the origins
(start states) that reach it. States are replaced by their liveness class at the node's
height, so pairs from different origins that can no longer be told apart merge and are
walked once. Cost grows with the number of distinct live pairs, not with states x
vocabulary x token length. The walk itself is C (`native/live_walk.c`, depth first): the numpy
walk it replaced spent ~0.7 s of a large schema's 2 s budget sorting and reducing each
level's pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt

from fsmcompile import _native
from fsmcompile.budget import check_deadline
from fsmcompile.errors import BudgetExceededError
from fsmcompile.index.dfa.levels import LivenessLevels
from fsmcompile.index.wide_rows import unique_wide_rows
from fsmcompile.tables.bits import bitmask_words, pack_gathered_rows
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.vocabulary.trie import TokenTrie


@dataclass(frozen=True, slots=True, eq=False)
class SinkEvents:
    """Pairs that entered a sink state: recorded, never expanded further.

    Attributes:
        nodes: int64[E], the trie node whose byte led into the sink.
        states: int64[E], the sink state.
        bits: uint64[E, words], the origins that got there.
    """

    nodes: npt.NDArray[np.int64]
    states: npt.NDArray[np.int64]
    bits: npt.NDArray[np.uint64]


@dataclass(frozen=True, slots=True, eq=False)
class Injections:
    """Extra start pairs: origin `origins[i]` is in `states[i]` at trie node `nodes[i]`.

    The node itself counts as reached; the walk goes on below it. Pairs at the root are
    ignored (the walk's first moves are the root's edges).
    """

    states: npt.NDArray[np.int64]
    nodes: npt.NDArray[np.int64]
    origins: npt.NDArray[np.int64]


def walk_live_tokens(
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
            caller's matrix of every origin's words saves a copy of it; any strides).
        deadline: `time.monotonic()` value past which the walk stops.

    Returns:
        (reached uint64[T, ceil(R/64)], sink events): bit r of reached row t is set when
        the bytes of trie token t (`trie.token_ids[t]`) keep the DFA alive from
        origins[r] (sink pairs are not marked; rows of tokens never reached are left as
        they were). Sink events are merged per (node, state), sorted by node then state.
        Rows are made for tokens only: a row per trie node was twice the memory, all of
        it touched and page-faulted anew on every walk.

    Raises:
        BudgetExceededError: `deadline` passed.
        ValueError: `out` is not uint64[T, ceil(R/64)].
    """
    num_origins = origins.shape[0]
    words = (num_origins + 63) // 64
    num_tokens = trie.token_ids.shape[0]
    if out is None:
        reached = np.zeros((num_tokens, words), dtype=np.uint64)
    elif out.dtype != np.uint64 or out.shape != (num_tokens, words):
        raise ValueError(
            f"out: expected uint64[{num_tokens}, {words}], found {out.dtype}{list(out.shape)}"
        )
    else:
        reached = out
    starting = np.arange(num_origins) if from_root is None else np.flatnonzero(from_root)
    is_sink = sinks if sinks is not None else np.zeros(dfa.num_states, dtype=np.bool_)
    if injections is not None:
        by_node = np.argsort(injections.nodes, kind="stable")  # the C walk meets nodes in order
        injected = [
            _int64(injections.nodes[by_node]),
            _int64(injections.states[by_node]),
            _int64(injections.origins[by_node]),
        ]
    else:
        injected = [np.zeros(0, dtype=np.int64)] * 3
    token_start, token_rows = trie.token_rows_by_node()
    arrays = (
        np.ascontiguousarray(dfa.transitions, dtype=np.int32),
        np.ascontiguousarray(dfa.class_of_byte, dtype=np.int32),
        np.ascontiguousarray(is_sink, dtype=np.bool_),
        np.ascontiguousarray(levels.canon, dtype=np.int32),
        _int64(levels.row_of_height),
        np.ascontiguousarray(trie.node_byte, dtype=np.uint8),
        np.ascontiguousarray(trie.node_height, dtype=np.int32),
        np.ascontiguousarray(trie.level_nodes, dtype=np.int32),
        _int64(trie.child_lo),
        _int64(trie.child_hi),
        token_start,
        token_rows,
        _int64(origins[starting]),
        _int64(starting),
        *injected,
    )
    found = _native.walk_live_tokens(
        arrays, dfa.num_classes, reached, math.inf if deadline is None else float(deadline)
    )
    if found is None:
        raise BudgetExceededError(
            "compile timed out while walking the vocabulary", limit="timeout_s", value=0.0
        )
    nodes, states, bits = found  # bytearrays: the arrays over them are writable
    ev_nodes = np.frombuffer(nodes, dtype=np.int64)
    ev_bits = np.frombuffer(bits, dtype=np.uint64).reshape(ev_nodes.shape[0], words)
    return reached, SinkEvents(ev_nodes, np.frombuffer(states, dtype=np.int64), ev_bits)


def _int64(values: npt.NDArray[np.integer]) -> npt.NDArray[np.int64]:
    return np.ascontiguousarray(values, dtype=np.int64)


MAX_UNPACKED_BYTES = 4 << 30
"""Most bytes the signatures x origins matrix of `origin_token_masks` may take unpacked
(one byte a bit, held twice while transposed): past it, allocation outruns every
deadline check and most of the machine's memory."""


def _check_unpacked_size(signatures: int, columns: int) -> None:
    size = 2 * signatures * columns
    if size > MAX_UNPACKED_BYTES:
        raise BudgetExceededError(
            f"collecting token masks would unpack {size / 2**30:.1f} GiB ({signatures:,} "
            f"token signatures x {columns:,} automaton state groups; at most "
            f"{MAX_UNPACKED_BYTES >> 30} GiB): simplify the spec or lower max_states",
            limit="walk_bytes",
            value=float(size),
        )


def origin_token_masks(
    rows: npt.NDArray[np.uint64],
    trie: TokenTrie,
    num_origins: int,
    vocab_size: int,
    *,
    num_virtual: int = 0,
    extra_column: npt.NDArray[np.int64] | None = None,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    """Turn per-token origin bits into distinct packed masks.

    Args:
        rows: uint64[T, ceil(R/64) + ceil(V/64)]: first the origin words, bit r set when
            trie token t is live from origin r; then, with `num_virtual` V, the words of
            token sets shared by many origins (a region shape's stay tokens per role),
            `extra_column[r]` (or -1) naming the one that origin r also allows.

    Returns:
        (masks int32[M, ceil(V/32)] distinct text-token masks without EOS,
         mask_of_origin int64[R]).

    Tokens with equal origin bits form a signature; origins with equal signature columns
    share a mask. Both are few, so the V x R bit transpose shrinks to one gather of
    M x V bytes and a contiguous pack.
    """
    # Each step is one vectorized pass of up to a second on a large automaton: the
    # compile's deadline is checked between them.
    sig_first, token_sig = unique_wide_rows(np.ascontiguousarray(rows))
    check_deadline("collecting token masks")
    origin_words = (num_origins + 63) // 64
    _check_unpacked_size(sig_first.shape[0], num_origins + num_virtual)
    sig_rows = np.ascontiguousarray(rows[sig_first, :origin_words]).view(np.uint8)
    sig_bits = np.unpackbits(sig_rows, axis=1, count=num_origins, bitorder="little")
    columns = np.ascontiguousarray(sig_bits.T)  # uint8[R, S]: the signatures each origin allows
    check_deadline("collecting token masks")
    if extra_column is not None and num_virtual:
        virtual_rows = np.ascontiguousarray(rows[sig_first, origin_words:]).view(np.uint8)
        virtual_columns = np.unpackbits(
            virtual_rows, axis=1, count=num_virtual, bitorder="little"
        ).T
        uses = np.flatnonzero(extra_column >= 0)
        columns[uses] |= virtual_columns[extra_column[uses]]
    column_words = np.packbits(columns, axis=1, bitorder="little")
    pad = (-column_words.shape[1]) % 8
    padded = np.pad(column_words, ((0, 0), (0, pad)))
    column_rows = cast("npt.NDArray[np.uint64]", padded.view(np.uint64))
    rep_first, mask_of_origin = unique_wide_rows(column_rows)
    check_deadline("collecting token masks")
    rep_bits = np.concatenate(  # an extra all-zero signature for ids that are not text
        [columns[rep_first], np.zeros((rep_first.shape[0], 1), dtype=np.uint8)], axis=1
    )
    width = bitmask_words(vocab_size) * 32
    sig_of_id = np.full(width, sig_first.shape[0], dtype=np.int64)
    sig_of_id[trie.token_ids] = token_sig
    return pack_gathered_rows(rep_bits, sig_of_id), mask_of_origin
