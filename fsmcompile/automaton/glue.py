"""Deterministic-by-construction shortcuts: concatenation, repetition and union as array copies.

Concatenating DFAs is in general a subset construction: after `A` accepts, the run may be
in `A` and at `B`'s start at once. When the bytes that continue `A` from its accepting
states never overlap the bytes that start `B` (`[^"]*` then `"`, `\\d+` then `-`), the next
byte decides which side the run is on, so `B`'s start row can simply be copied into `A`'s
accepting states: no new states, O(size) numpy work. Counted repetition `x{m,n}` is the
same glue applied to n copies of `x` at once, which is how `[^"]{0,2000}` (16k states)
is built in a few milliseconds without the quadratic `x?x?x?...` subset construction.
The callers in `compose.py` check the no-overlap conditions; these functions trust them.
"""

from __future__ import annotations

import numpy as np

from fsmcompile import _native
from fsmcompile.automaton.fragment import Flags, Fragment, drop_orphans, keep_states, shifted
from fsmcompile.budget import Budget


def start_mask(frag: Fragment) -> Flags:
    """bool[C]: the classes on which the start state has a transition."""
    mask: Flags = frag.trans[0] >= 0
    return mask


def continues_on(frag: Fragment, mask: Flags) -> bool:
    """Whether some accepting state has a transition on a class in `mask`."""
    rows = frag.trans[frag.accepting]
    return bool(((rows >= 0) & mask[None, :]).any())


def glue_concat(parts: list[Fragment], budget: Budget) -> Fragment:
    """Concatenate fragments whose every boundary is overlap-free, in one allocation.

    Merges run right to left so a nullable part passes its successor's start row on to
    its predecessor; the later parts' starts that nothing enters are dropped (in C,
    `_native.glue_concat`). Concatenating single characters only (a literal) is minimal:
    each state's residual fixes how many characters remain, and UTF-8 decodes uniquely.
    """
    budget.reserve(sum(p.num_states for p in parts), "a concatenation")
    rows, flags, size = _native.glue_concat(
        [
            (np.ascontiguousarray(p.trans, dtype=np.int32), np.ascontiguousarray(p.accepting))
            for p in parts
        ]
    )
    trans = np.frombuffer(rows, dtype=np.int32).reshape(size, parts[0].num_classes)
    accepting = np.frombuffer(flags, dtype=np.bool_)
    units = {p.unit for p in parts}
    minimal = len(units) == 1 and None not in units
    return Fragment(trans, accepting, minimal=minimal)


def chain_repeat(item: Fragment, lo: int, hi: int | None, budget: Budget) -> Fragment:
    """`item{lo,hi}` as a chain of copies glued end to start (`hi=None`: the last loops).

    Preconditions: `item` is not nullable, its start has no incoming transition, and
    (when copies are glued) no accepting state continues on a class the start uses.
    Copy k's accepting states mean k+1 repetitions are done. A chain of one character
    set is minimal but for `x*`: a state's residual fixes the characters left (and
    whether more may follow), and UTF-8 (or single bytes) decode uniquely, so no two
    states share a residual.
    """
    size = item.num_states
    copies = hi if hi is not None else max(lo, 1)
    # Copy starts past the first are dropped: copies * (size - 1) + 1 states remain.
    budget.reserve(copies * (size - 1) + 1, f"a repetition {{{lo},{'' if hi is None else hi}}}")
    base = item.trans
    copy_offsets = np.arange(copies, dtype=np.int32) * np.int32(size)
    trans = np.where(
        base[None, :, :] >= 0, base[None, :, :] + copy_offsets[:, None, None], np.int32(-1)
    ).astype(np.int32)
    cols = np.nonzero(base[0] >= 0)[0]
    rows = np.nonzero(item.accepting)[0]
    start_targets = base[0, cols]
    if copies > 1:
        glued = start_targets[None, None, :] + copy_offsets[1:, None, None]
        trans[:-1, rows[:, None], cols[None, :]] = glued
    if hi is None:
        trans[-1, rows[:, None], cols[None, :]] = start_targets[None, :] + copy_offsets[-1]
    accepting = np.zeros((copies, size), dtype=np.bool_)
    done = np.arange(1, copies + 1) >= lo
    accepting[:, rows] = done[:, None]
    accepting[0, 0] = lo == 0
    flat_trans = trans.reshape(copies * size, -1)
    flat_accepting = accepting.reshape(-1)
    keep = np.ones(copies * size, dtype=np.bool_)
    keep[size::size] = False  # copy starts past the first: nothing jumps back to a start
    flat_trans, flat_accepting = keep_states(flat_trans, flat_accepting, keep)
    # `x*` is the one chain that is not minimal: its start and its loop state both
    # read "any number of x".
    unbounded_from_zero = lo == 0 and hi is None
    return Fragment(
        flat_trans, flat_accepting, minimal=item.unit is not None and not unbounded_from_zero
    )


def merge_union(parts: list[Fragment], budget: Budget) -> Fragment:
    """Union of fragments whose start states use pairwise disjoint classes.

    The new start gets every part's start row; old starts survive only when some
    transition loops back to them.
    """
    sizes = [p.num_states for p in parts]
    budget.reserve(1 + sum(sizes), "an alternation")
    offsets = (1 + np.concatenate([[0], np.cumsum(sizes)[:-1]])).astype(np.int64).tolist()
    bodies = [shifted(p.trans, off) for p, off in zip(parts, offsets, strict=True)]
    start_row = np.full(parts[0].num_classes, -1, dtype=np.int32)
    for body in bodies:
        live = body[0] >= 0
        start_row[live] = body[0][live]
    trans = np.concatenate([start_row[None, :], *bodies], axis=0)
    accepting = np.concatenate(
        [np.array([any(p.nullable for p in parts)], dtype=np.bool_)] + [p.accepting for p in parts]
    )
    return drop_orphans(trans, accepting, offsets)
