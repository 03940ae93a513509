"""DFA + vocabulary → TokenIndex: the compile step that costs the most, kept vectorized."""

from __future__ import annotations

import logging
import time

import numpy as np
import numpy.typing as npt

from fsmcompile.index.dfa.levels import LivenessLevels, liveness_levels
from fsmcompile.index.dfa.regions import Region, ShapeWalk, find_regions, walk_shape
from fsmcompile.index.dfa.trie_walk import Injections, origin_token_masks, walk_live_tokens
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.tables.token_index import TokenIndex
from fsmcompile.vocabulary import Vocabulary

logger = logging.getLogger(__name__)

# Origins walked together: wider origin bitsets make every merge of the walk dearer.
_ORIGIN_CHUNK = 256  # a multiple of 64: each chunk owns whole words of the origin bits


def _region_plan(
    dfa: ByteDFA, vocab: Vocabulary, origins: npt.NDArray[np.int32]
) -> tuple[npt.NDArray[np.int64], list[tuple[int, int, ShapeWalk, Region]], int]:
    """Which origins are region states, and the shape walk that serves each.

    Returns (virtual column per origin or -1, [(origin index, role, walk, region)], number
    of virtual columns).
    """
    extra = np.full(origins.shape[0], -1, dtype=np.int64)
    served: list[tuple[int, int, ShapeWalk, Region]] = []
    regions = find_regions(dfa, feeders=True)
    if not regions:
        return extra, served, 0
    origin_index = {int(s): i for i, s in enumerate(origins.tolist())}
    column_of_shape: dict[str, int] = {}
    num_virtual = 0
    for region in regions:
        if region.shape_key not in column_of_shape:
            column_of_shape[region.shape_key] = num_virtual
            num_virtual += region.states.shape[0]
        walk = walk_shape(region, vocab)
        for role, state in enumerate(region.states.tolist()):
            position = origin_index.get(state)
            if position is not None:
                extra[position] = column_of_shape[region.shape_key] + role
                served.append((position, role, walk, region))
    return extra, served, num_virtual


def _virtual_block(
    served: list[tuple[int, int, ShapeWalk, Region]],
    extra: npt.NDArray[np.int64],
    block: npt.NDArray[np.uint64],
) -> None:
    """Write each virtual column's stay tokens into `block` (uint64[T, ceil(V/64)],
    zeros)."""
    done: set[int] = set()
    for position, role, walk, _region in served:
        column = int(extra[position])
        if column in done:
            continue
        done.add(column)
        has_role = (walk.stay[:, 0] >> np.uint64(role)) & np.uint64(1)
        block[:, column // 64] |= has_role << np.uint64(column % 64)


def _injections(served: list[tuple[int, int, ShapeWalk, Region]], lo: int, hi: int) -> Injections:
    """Exit events of the region origins in chunk [lo, hi), as start pairs of the walk."""
    states, nodes, owners = [], [], []
    for position, role, walk, region in served:
        if not lo <= position < hi:
            continue
        events = walk.events
        has_role = ((events.bits[:, 0] >> np.uint64(role)) & np.uint64(1)).astype(np.bool_)
        sink = events.states[has_role] - region.states.shape[0]
        states.append(region.exit_targets[sink])
        nodes.append(events.nodes[has_role])
        owners.append(np.full(sink.shape[0], position - lo, dtype=np.int64))
    if not states:
        empty = np.zeros(0, dtype=np.int64)
        return Injections(empty, empty, empty)
    return Injections(np.concatenate(states), np.concatenate(nodes), np.concatenate(owners))


def _token_masks(
    dfa: ByteDFA,
    vocab: Vocabulary,
    levels: LivenessLevels,
    origins: npt.NDArray[np.int32],
    deadline: float | None,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    """(distinct text-token masks int32[M, W], mask id of each origin int64[R])."""
    trie = vocab.trie
    extra, served, num_virtual = _region_plan(dfa, vocab, origins)
    # One matrix of every origin's words, then the virtual columns': each chunk's walk
    # writes its words in place (chunks are whole words: _ORIGIN_CHUNK % 64 == 0).
    origin_words = (origins.shape[0] + 63) // 64
    virtual_words = (num_virtual + 63) // 64 if served else 0
    rows = np.zeros((trie.token_ids.shape[0], origin_words + virtual_words), dtype=np.uint64)
    for lo in range(0, origins.shape[0], _ORIGIN_CHUNK):
        chunk = origins[lo : lo + _ORIGIN_CHUNK]
        hi = lo + chunk.shape[0]
        walk_live_tokens(
            dfa,
            trie,
            levels,
            chunk,
            deadline,
            from_root=extra[lo:hi] < 0,
            injections=_injections(served, lo, hi),
            out=rows[:, lo // 64 : (hi + 63) // 64],
        )
    if served:
        _virtual_block(served, extra, rows[:, origin_words:])
    return origin_token_masks(
        rows,
        trie,
        origins.shape[0],
        vocab.size,
        num_virtual=num_virtual if served else 0,
        extra_column=extra,
    )


def build_token_index(
    dfa: ByteDFA,
    vocab: Vocabulary,
    *,
    kind: str,
    spec_hash: str,
    deadline: float | None = None,
) -> TokenIndex:
    """Compute, for every DFA state, the tokens that keep it alive, plus EOS where accepting.

    States are first grouped by liveness equivalence up to the longest token (states in
    one group have the same token mask), so each group is walked once.

    Raises:
        BudgetExceededError: `deadline` (a `time.monotonic()` value) passed.
    """
    started = time.perf_counter()
    trie = vocab.trie
    height = int(trie.node_height[0]) if trie.num_nodes else 0
    levels = liveness_levels(dfa, height, deadline)
    root_class = levels.canon[levels.row_of_height[height]]
    origins, origin_of_state = np.unique(root_class, return_inverse=True)
    token_packed, mask_of_origin = _token_masks(
        dfa, vocab, levels, origins.astype(np.int32), deadline
    )

    # A state's mask is its group's token mask plus EOS when accepting.
    token_mask = mask_of_origin[origin_of_state.reshape(-1)]
    combo = token_mask * 2 + dfa.accepting.astype(np.int64)
    combos, state_combo = np.unique(combo, return_inverse=True)
    rows = token_packed[combos // 2].copy()
    eos = np.asarray(vocab.eos_token_ids, dtype=np.int64)
    accepting_rows = np.flatnonzero(combos % 2 == 1)
    if accepting_rows.shape[0]:
        words = rows.view(np.uint32)
        for token in eos:
            words[accepting_rows, token // 32] |= np.uint32(1) << np.uint32(token % 32)
    # Rows are distinct already: token masks are distinct, and EOS tells the halves apart.
    masks = rows
    state_mask = state_combo.reshape(-1).astype(np.int32)
    logger.debug(
        "token index: %d states, %d groups, %d masks in %.1f ms",
        dfa.num_states,
        origins.shape[0],
        masks.shape[0],
        (time.perf_counter() - started) * 1e3,
    )
    return TokenIndex(
        dfa=dfa,
        state_mask=state_mask,
        masks=np.ascontiguousarray(masks, dtype=np.int32),
        vocabulary=vocab,
        kind=kind,
        spec_hash=spec_hash,
    )
