"""The IR operators on fragments: pick the array shortcut when it is sound, else a subset build.

Each operator first normalizes the trivial cases (no string, the empty string, counts
of 0 and 1), then checks the overlap condition that makes gluing deterministic
(`glue.py`) and falls back to the subset and product constructions (`subset.py`, walked in
C) only when the next byte cannot tell the operands apart.
"""

from __future__ import annotations

import numpy as np

from fsmcompile.automaton.fragment import (
    Fragment,
    empty_string,
    nothing,
    trimmed,
    with_fresh_start,
    without_empty_string,
)
from fsmcompile.automaton.glue import (
    chain_repeat,
    continues_on,
    glue_concat,
    merge_union,
    start_mask,
)
from fsmcompile.automaton.minimize import max_word_length, minimized
from fsmcompile.automaton.subset import (
    product_intersection,
    product_union,
    subset_concat,
    subset_repeat,
)
from fsmcompile.budget import Budget

_MINIMIZE_BODY = 4096  # repetition bodies up to this size are minimized before copying


def concat(parts: list[Fragment], num_classes: int, budget: Budget) -> Fragment:
    """The parts one after another.

    Runs of overlap-free boundaries are glued in one allocation each; the runs are then
    joined right to left by subset construction, which copies the (already built)
    right-hand side instead of walking it.
    """
    if any(p.is_nothing for p in parts):
        return nothing(num_classes)
    parts = [p for p in parts if not p.is_empty_string]
    if not parts:
        return empty_string(num_classes)
    if len(parts) == 1:
        return parts[0]
    runs: list[list[Fragment]] = [[parts[-1]]]
    follow = start_mask(parts[-1])  # classes that may start what follows the next part
    for part in reversed(parts[:-1]):
        if continues_on(part, follow):
            runs.insert(0, [part])
            follow = start_mask(part)
        else:
            runs[0].insert(0, part)
            follow = start_mask(part) | follow if part.nullable else start_mask(part)
    glued = [run[0] if len(run) == 1 else glue_concat(run, budget) for run in runs]
    result = glued[-1]
    for left in reversed(glued[:-1]):
        result = subset_concat(left, result, budget)
    return result


def union(parts: list[Fragment], num_classes: int, budget: Budget) -> Fragment:
    """Strings matched by any part."""
    unique: dict[int, Fragment] = {}
    for part in parts:
        if not part.is_nothing:
            unique.setdefault(id(part), part)
    live = list(unique.values())
    if not live:
        return nothing(num_classes)
    if len(live) == 1:
        return live[0]
    starts = np.sum([start_mask(p) for p in live], axis=0)
    if int(starts.max()) <= 1:
        return merge_union(live, budget)
    return product_union(live, budget)


def intersection(parts: list[Fragment], num_classes: int, budget: Budget) -> Fragment:
    """Strings matched by every part."""
    if not parts or any(p.is_nothing for p in parts):
        return nothing(num_classes)
    unique = list({id(p): p for p in parts}.values())
    if len(unique) == 1:
        return unique[0]
    return product_intersection(unique, budget)


def difference(keep: Fragment, drop: Fragment, budget: Budget) -> Fragment:
    """Strings of `keep` that `drop` does not match: `keep` times the complement of `drop`."""
    if keep.is_nothing or drop.is_nothing:
        return keep
    return product_intersection([keep, complement(drop, budget)], budget)


def complement(fragment: Fragment, budget: Budget) -> Fragment:
    """Every byte string the fragment does not match: a sink state takes the missing
    transitions, acceptance flips, and states that can no longer accept are dropped."""
    sink = fragment.num_states
    budget.reserve(sink + 1, "a complement")
    trans = np.full((sink + 1, fragment.num_classes), sink, dtype=np.int32)
    trans[:sink] = np.where(fragment.trans >= 0, fragment.trans, np.int32(sink))
    accepting = np.append(~fragment.accepting, True)
    return trimmed(trans, accepting, prune_dead_ends=True)


def repeat(item: Fragment, lo: int, hi: int | None, budget: Budget) -> Fragment:
    """`item{lo,hi}`; `hi=None` is unbounded.

    A nullable item repeats like its non-empty part with `lo=0` (`x{m,n}` = `x{0,n}`
    when the empty string is in `x`), which keeps every chain state count exact.
    """
    num_classes = item.num_classes
    if hi is not None and hi < lo:
        return nothing(num_classes)
    if item.is_nothing:
        return empty_string(num_classes) if lo == 0 else item
    if item.is_empty_string or hi == 0:
        return empty_string(num_classes)
    if lo == 1 and hi == 1:
        return item
    if item.num_states <= _MINIMIZE_BODY:
        item = minimized(item, budget)  # every body state is copied hi times
    if item.nullable:
        item = without_empty_string(item)
        lo = 0
    item = with_fresh_start(item)
    if hi == 1 or not continues_on(item, start_mask(item)):
        return chain_repeat(item, lo, hi, budget)
    if hi is not None:
        longest = max_word_length(item)
        if longest is not None:
            # A finite language whose longest word has L bytes needs L + 1 states.
            budget.reserve(hi * longest + 1, f"a repetition {{{lo},{hi}}}")
    return subset_repeat(item, lo, hi, budget)
