"""Hopcroft's partition refinement: the minimizer's fallback for long chains between loops.

Vectorized Moore rounds tell apart one more link of a chain per round, so a chain of
thousands of states that both comes from and leads into cycles would cost thousands of
numpy passes. Hopcroft's algorithm does the same refinement in O(E log n) Python steps.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.budget import Budget
from fsmcompile.automaton.fragment import Table, sorted_unique


def refine(trans: Table, blocks: npt.NDArray[np.int32], budget: Budget) -> npt.NDArray[np.int32]:
    """Refine `blocks` (a partition coarser than Nerode's) until it is stable.

    Args:
        trans: int32[S, C], -1 dead.
        blocks: int32[S], any labels.
        budget: deadline checked every 1024 splitters.

    Returns:
        int32[S] labels of the coarsest stable refinement.

    Classic Hopcroft with a refinable partition: blocks are contiguous runs of `elems`;
    marking a state swaps it to the front of its run. The new block is always the
    smaller half, so it is the only one that must become a splitter.

    Precondition: states in one block have transitions on the same classes (any Moore
    round or Revuz key ensures it). The partition is then already stable against the
    dead state, which therefore never has to exist, and the largest block can be left
    out of the initial worklist as usual.
    """
    num_states, width = trans.shape
    src, cls = np.nonzero(trans >= 0)
    dst = trans[src, cls]
    order = np.lexsort((cls, dst))
    preds = src[order].tolist()
    pred_cls = cls[order].tolist()
    pred_ptr = np.searchsorted(dst[order], np.arange(num_states + 1)).tolist()
    # The classes each state is entered on: a block is a useful splitter only on those.
    pairs = sorted_unique(dst.astype(np.int64) * width + cls)
    entered: list[list[int]] = [[] for _ in range(num_states)]
    for state, c in zip((pairs // width).tolist(), (pairs % width).tolist(), strict=True):
        entered[state].append(c)

    dense = np.unique(blocks, return_inverse=True)[1].reshape(-1)
    elems = np.argsort(dense, kind="stable").tolist()
    counts = np.bincount(dense).tolist()
    first: list[int] = []
    end: list[int] = []
    pos = 0
    for size in counts:
        first.append(pos)
        pos += size
        end.append(pos)
    mid = list(first)
    blk = dense.tolist()
    loc = [0] * num_states
    for i, s in enumerate(elems):
        loc[s] = i
    largest = max(range(len(counts)), key=counts.__getitem__)
    work: list[tuple[int, int]] = []
    for b in range(len(counts)):
        if b != largest:
            classes: set[int] = set()
            for s in elems[first[b] : end[b]]:
                classes.update(entered[s])
            work.extend((b, c) for c in sorted(classes))

    steps = 0
    while work:
        steps += 1
        if steps & 1023 == 0:
            budget.check_time()
        b, c = work.pop()
        touched: list[int] = []
        for t in elems[first[b] : end[b]]:
            lo, hi = pred_ptr[t], pred_ptr[t + 1]
            if lo == hi:
                continue
            lo = bisect_left(pred_cls, c, lo, hi)
            hi = bisect_right(pred_cls, c, lo, hi)
            for i in range(lo, hi):
                p = preds[i]
                bp = blk[p]
                lp = loc[p]
                m = mid[bp]
                if lp >= m:  # not marked yet: swap into the marked prefix
                    q = elems[m]
                    elems[m] = p
                    elems[lp] = q
                    loc[p] = m
                    loc[q] = lp
                    mid[bp] = m + 1
                    if m == first[bp]:
                        touched.append(bp)
        for bp in touched:
            f, m, e = first[bp], mid[bp], end[bp]
            mid[bp] = f
            if m == e:
                continue
            nb = len(first)
            if m - f <= e - m:  # the marked part is the new (smaller) block
                first.append(f)
                end.append(m)
                mid.append(f)
                first[bp] = m
                mid[bp] = m
                moved = elems[f:m]
            else:
                first.append(m)
                end.append(e)
                mid.append(m)
                end[bp] = m
                moved = elems[m:e]
            classes = set()
            for s in moved:
                blk[s] = nb
                classes.update(entered[s])
            work.extend((nb, cc) for cc in sorted(classes))
    return np.array(blk, dtype=np.int32)
