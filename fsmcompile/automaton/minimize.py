"""DFA minimization: the Nerode classes of a trimmed DFA, or of one whose states carry labels.

States start in blocks by *shape* (accepting flag, or label, and the set of classes with
a transition), and Hopcroft's refinement (`hopcroft.py`, in C) splits them until the
partition is stable. Grouping by shape first keeps the DFA partial: no dead state is
ever added.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import Flags, Fragment, Table, sorted_unique, unique_rows
from fsmcompile.automaton.hopcroft import refine
from fsmcompile.budget import Budget

Blocks = npt.NDArray[np.int32]
"""int32[S]: the equivalence class of each state."""

_CHECK_EVERY = 4096  # Python-loop states between deadline checks


def equivalence_classes(trans: Table, accepting: Flags, budget: Budget) -> Blocks:
    """The Nerode classes of a DFA whose every state can reach an accepting state.

    Args:
        trans: int32[S, C], -1 dead.
        accepting: bool[S].
        budget: its deadline is checked before the refinement.

    Returns:
        int32[S] class ids 0..K-1 (not canonically ordered: `canonical.py` renumbers).
    """
    return refine(trans, shape_blocks(trans, accepting), budget)


def shape_blocks(trans: Table, accepting: Flags) -> Blocks:
    """int32[S]: states numbered by shape (accepting flag, classes with a transition)."""
    if trans.shape[0] == 0:
        return np.zeros(0, dtype=np.int32)
    shape_rows = np.concatenate([accepting[:, None], trans >= 0], axis=1).astype(np.int32)
    return unique_rows(shape_rows)[1].astype(np.int32)


def labelled_classes(trans: Table, labels: npt.NDArray[np.integer], budget: Budget) -> Blocks:
    """The coarsest partition of a partial DFA's states that keeps `labels` along every
    path (a Moore machine's minimization), blocks numbered by their first state.

    A grammar's lexer cuts a lexeme where a state is labelled with a terminal, and its
    states carry more than acceptance (the context an ignored terminal restarts in, a
    counted lexeme's bound): those outputs, not one accepting flag, are what two states
    must agree on. A dead end is simply a state whose label no live state has.

    Args:
        trans: int32[S, C], -1 dead.
        labels: int[S], any integers.
        budget: its deadline is checked before the refinement.

    Returns:
        int32[S] block ids 0..K-1, in order of each block's first state, so the numbering
        does not depend on the refinement.
    """
    if trans.shape[0] == 0:
        return np.zeros(0, dtype=np.int32)
    _, label = np.unique(labels, return_inverse=True)
    shape_rows = np.concatenate([label.reshape(-1, 1), trans >= 0], axis=1).astype(np.int32)
    blocks = refine(trans, unique_rows(shape_rows)[1].astype(np.int32), budget)
    _, first = np.unique(blocks, return_index=True)
    rank = np.empty(first.shape[0], dtype=np.int32)
    rank[np.argsort(first, kind="stable")] = np.arange(first.shape[0], dtype=np.int32)
    return rank[blocks]


def quotient(trans: Table, accepting: Flags, blocks: Blocks) -> tuple[Table, Flags, int]:
    """The DFA over classes: (trans int32[K, C], accepting bool[K], start class)."""
    _, dense = np.unique(blocks, return_inverse=True)
    dense = dense.reshape(-1).astype(np.int32)
    _, representative = np.unique(dense, return_index=True)
    lookup = np.append(dense, np.int32(-1))
    return (
        lookup[trans[representative]].astype(np.int32),
        accepting[representative],
        int(dense[0]),
    )


def minimized(frag: Fragment, budget: Budget) -> Fragment:
    """`frag` minimized, start still state 0 (used on repetition bodies before copying)."""
    if frag.minimal or frag.num_states <= 1:
        return frag
    blocks = equivalence_classes(frag.trans, frag.accepting, budget)
    trans, accepting, start = quotient(frag.trans, frag.accepting, blocks)
    if start != 0:  # swap the start class into slot 0
        perm = np.arange(trans.shape[0], dtype=np.int32)
        perm[[0, start]] = perm[[start, 0]]
        lookup = np.append(perm, np.int32(-1))  # old id -> new id (a swap is its own inverse)
        trans = lookup[trans[perm]].astype(np.int32)
        accepting = accepting[perm]
    return Fragment(trans, accepting, minimal=True)


def max_word_length(frag: Fragment) -> int | None:
    """The longest accepted word in bytes, or None when the language is infinite.

    Kahn's order on reversed edges peels the states with finite residuals, each after all
    its targets; a state left over reaches a cycle (every state is live).
    """
    num_states = frag.num_states
    src, cls = np.nonzero(frag.trans >= 0)
    # Each (state, target) pair once: UTF-8 continuation ranges often split into several
    # classes with one target, and every pair is a Python step.
    pairs = sorted_unique(src.astype(np.int64) * num_states + frag.trans[src, cls])
    pair_src, pair_dst = pairs // num_states, pairs % num_states
    points = np.arange(num_states + 1)
    succ_ptr: list[int] = np.searchsorted(pair_src, points).tolist()
    succ: list[int] = pair_dst.tolist()
    by_target = np.argsort(pair_dst, kind="stable")
    preds: list[int] = pair_src[by_target].tolist()
    pred_ptr: list[int] = np.searchsorted(pair_dst[by_target], points).tolist()
    pending = np.diff(np.asarray(succ_ptr)).tolist()
    order = [s for s in range(num_states) if pending[s] == 0]
    budget = Budget(num_states, None)
    for count, s in enumerate(order):
        if count % _CHECK_EVERY == 0:
            budget.check_time()
        for p in preds[pred_ptr[s] : pred_ptr[s + 1]]:
            pending[p] -= 1
            if not pending[p]:
                order.append(p)
    if len(order) < num_states:
        return None
    longest = [0] * num_states
    for s in order:  # targets come first
        targets = succ[succ_ptr[s] : succ_ptr[s + 1]]
        if targets:
            longest[s] = 1 + max(longest[t] for t in targets)
    return longest[0]
