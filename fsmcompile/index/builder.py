"""DFA + vocabulary → TokenIndex: the compile step that costs the most, kept vectorized."""

from __future__ import annotations

import logging
import time

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.dfa import ByteDFA
from fsmcompile.index.levels import LivenessLevels, liveness_levels
from fsmcompile.index.token_index import TokenIndex
from fsmcompile.index.walk import origin_token_masks, walk_live_tokens
from fsmcompile.vocabulary import Vocabulary

logger = logging.getLogger(__name__)

# Origins walked together: wider origin bitsets make every merge of the walk dearer.
_ORIGIN_CHUNK = 256


def _token_masks(
    dfa: ByteDFA,
    vocab: Vocabulary,
    levels: LivenessLevels,
    origins: npt.NDArray[np.int32],
    deadline: float | None,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    """(distinct text-token masks int32[M, W], mask id of each origin int64[R])."""
    trie = vocab.trie
    per_token = []
    for lo in range(0, origins.shape[0], _ORIGIN_CHUNK):
        chunk = origins[lo : lo + _ORIGIN_CHUNK]
        reached = walk_live_tokens(dfa, trie, levels, chunk, deadline)
        per_token.append(reached[trie.token_node])
    return origin_token_masks(np.concatenate(per_token, axis=1), trie, origins.shape[0], vocab.size)


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
