"""Subset and product constructions, for the cases the array shortcuts cannot take.

Used when the next byte does not tell the two sides of a concatenation or repetition
apart (`\\d+\\d`, `(a|ab)*`), for unions whose branches start alike (`cat|car`), and for
intersections and differences. Each works on a compressed alphabet (only the byte-class
columns that differ in its operands) and copies an operand wholesale wherever the run can
only be inside that operand, so only the overlapping part is walked.

The walk itself, (state x class) with new states interned in order of discovery, is in C
(`native/subset.c`): in Python, with a dict of tuples, it was most of building a JSON Schema's
terminal automata. Here the tables are prepared and the new rows finished with numpy;
`Budget` limits are passed down, and where the walk stops on one the same `Budget` call
is made here, so the same error is raised as by a Python loop.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from fsmcompile import _native
from fsmcompile.automaton.fragment import (
    Flags,
    Fragment,
    Table,
    drop_orphans,
    shifted,
    trimmed,
    unique_rows,
)
from fsmcompile.budget import Budget

# How a C walk stopped (`native/subset.c`): the Budget limit it found broken.
_STOP_STATES = 1  # Budget.reserve(value)
_STOP_MEMBERS = 2  # Budget.reserve_set(members)
_STOP_DEADLINE = 3  # Budget.check_time()


def compress_columns(tables: list[Table]) -> tuple[list[Table], npt.NDArray[np.intp]]:
    """Drop duplicate columns shared by all `tables`; return them and the column map.

    `expand[:, column_map]` turns a table over the compressed columns back into one
    over the original classes.
    """
    first, column_map = unique_rows(np.concatenate(tables, axis=0).T)
    return [t[:, first] for t in tables], column_map


def _limits(budget: Budget, reserve_base: int) -> tuple[int, float, int, int]:
    """What a C walk checks: (max_states, deadline or inf, set members left, the count its
    state reserves start from)."""
    deadline = math.inf if budget.deadline is None else budget.deadline
    return budget.max_states, deadline, budget.set_members_left(), reserve_base


def _settle(budget: Budget, what: str, stop: int, value: int, members: int) -> None:
    """Charge a C walk's set members to `budget` and, where the walk stopped on a limit,
    make the Budget call that raises for it."""
    if members:
        budget.reserve_set(members, what)
    if stop == _STOP_STATES:
        budget.reserve(value, what)
    elif stop == _STOP_DEADLINE:
        budget.check_time()
    if stop:
        raise AssertionError(f"a C walk stopped ({stop}, {value}) where the budget holds")


def _walked(
    rows: bytearray, accepting: bytearray, width: int
) -> tuple[npt.NDArray[np.int32], Flags]:
    """A C walk's new rows (int32[N, width]) and accepting flags (bool[N]) as arrays."""
    count = len(accepting)
    table = np.frombuffer(rows, dtype=np.int32).reshape(count, width)
    return table, np.frombuffer(accepting, dtype=np.bool_)


def _table(trans: Table) -> Table:
    return np.ascontiguousarray(trans, dtype=np.int32)


def _flags(accepting: Flags) -> Flags:
    return np.ascontiguousarray(accepting, dtype=np.bool_)


def _finish(
    rows: npt.NDArray[np.int32],
    accepting: Flags,
    embedded: list[Table],
    embedded_accepting: list[Flags],
    column_map: npt.NDArray[np.intp],
) -> tuple[Table, Flags]:
    """Stack new rows with wholly copied operands; codes <= -2 point into the copies."""
    num_new = rows.shape[0]
    raw = rows.astype(np.int64)
    local: Table = np.where(raw <= -2, num_new + (-raw - 2), raw).astype(np.int32)
    parts = [local]
    offset = num_new
    for table in embedded:
        parts.append(shifted(table, offset))
        offset += table.shape[0]
    trans = np.concatenate(parts, axis=0)[:, column_map]
    flags = np.concatenate([accepting, *embedded_accepting])
    return np.ascontiguousarray(trans, dtype=np.int32), flags


def subset_concat(first: Fragment, second: Fragment, budget: Budget) -> Fragment:
    """`first` then `second` when their boundary overlaps on some classes.

    The result is glue plus a few subset states. A subset state is (a, {b, ...}): in
    `first` at `a` and in `second` at each b. A copy of `first` stands for the pairs
    (a, {start of second} if a accepts else {}): its accepting rows get `second`'s start
    row wherever the two do not collide, exactly as in `glue_concat`. A copy of `second`
    stands for (dead, {b}). Only collisions create new states, and only those are walked,
    so a 16k-state left side with a one-byte collision costs O(size) numpy work.
    """
    n_a, n_b = first.num_states, second.num_states
    budget.reserve(n_a + n_b, "a concatenation")
    (a_local, b_local), column_map = compress_columns([first.trans, second.trans])
    b_start = second.trans[0]
    b_live = b_start >= 0
    rows = np.nonzero(first.accepting)[0]
    glued = first.trans[rows]
    collide = (glued >= 0) & b_live[None, :]
    glued = np.where((glued < 0) & b_live[None, :], b_start[None, :] + n_a, glued)
    # Each collision, row by row, is the pair (a's target, {b's start target} plus b's
    # start if that target accepts); the walk numbers the states they need first.
    hit_rows, hit_cols = np.nonzero(collide)
    seed_a = first.trans[rows[hit_rows], hit_cols]
    seed_b = b_start[hit_cols]
    raw_rows, raw_acc, stop, value, members, codes = _native.subset_concat(
        _table(a_local),
        _table(b_local),
        _flags(first.accepting),
        _flags(second.accepting),
        _table(seed_a),
        _table(seed_b),
        _limits(budget, n_a + n_b),
    )
    _settle(budget, "a concatenation", stop, value, members)
    glued[hit_rows, hit_cols] = np.frombuffer(codes, dtype=np.int32)
    a_part = first.trans.copy()
    a_part[rows] = glued
    new_rows, new_acc = _walked(raw_rows, raw_acc, a_local.shape[1])
    accepting_a = first.accepting & bool(second.accepting[0])
    parts = [a_part, shifted(second.trans, n_a)]
    if new_rows.shape[0]:
        parts.append(new_rows[:, column_map])
    trans = np.concatenate(parts, axis=0).astype(np.int32)
    flags = np.concatenate([accepting_a, second.accepting, new_acc])
    return drop_orphans(trans, flags, [n_a])


def subset_repeat(item: Fragment, lo: int, hi: int | None, budget: Budget) -> Fragment:
    """`item{lo,hi}` by subset construction over (repetitions done, item state) pairs.

    Preconditions: `item` is not nullable and its start has no incoming transition, so
    a pair (k, start) means exactly "k repetitions done". With `hi=None` the count
    saturates at `lo`: past it, more repetitions change nothing.
    """
    (table,), column_map = compress_columns([item.trans])
    raw_rows, raw_acc, stop, value, members = _native.subset_repeat(
        _table(table),
        _flags(item.accepting),
        lo,
        -1 if hi is None else hi,
        _limits(budget, 0),
    )
    _settle(budget, "a repetition", stop, value, members)
    rows, accepting = _walked(raw_rows, raw_acc, table.shape[1])
    budget.reserve(rows.shape[0], "a repetition")
    trans, flags = _finish(rows, accepting, [], [], column_map)
    return Fragment(trans, flags)


def product_union(parts: list[Fragment], budget: Budget) -> Fragment:
    """Union by product construction over the branches still alive.

    A state is a tuple of (branch, state) pairs; when one branch is left the run moves
    into a copy of that branch, so a trie of words costs only its shared prefixes. The
    walk sees the branches stacked (branch i's state s is row bases[i] + s), which
    numbers the pairs in the same order.
    """
    tables, column_map = compress_columns([p.trans for p in parts])
    sizes = [p.num_states for p in parts]
    bases = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
    stacked = np.concatenate(
        [shifted(t, int(base)) for t, base in zip(tables, bases, strict=True)], axis=0
    )
    accepting = np.concatenate([p.accepting for p in parts])
    raw_rows, raw_acc, stop, value, members = _native.product_union(
        _table(stacked), _flags(accepting), bases, _limits(budget, sum(sizes))
    )
    _settle(budget, "an alternation", stop, value, members)
    rows, row_acc = _walked(raw_rows, raw_acc, stacked.shape[1])
    trans, flags = _finish(rows, row_acc, [stacked], [accepting], column_map)
    starts = [rows.shape[0] + int(base) for base in bases]
    return drop_orphans(trans, flags, starts)


def product_intersection(parts: list[Fragment], budget: Budget) -> Fragment:
    """Intersection by pairwise product construction; dead ends are pruned afterwards."""
    result = parts[0]
    for part in parts[1:]:
        result = _product_pair(result, part, budget)
        if result.is_nothing:
            break
    return result


def _product_pair(left: Fragment, right: Fragment, budget: Budget) -> Fragment:
    """Both languages at once: states (a, b) numbered breadth first from (0, 0)."""
    (a_table, b_table), column_map = compress_columns([left.trans, right.trans])
    raw_rows, raw_acc, stop, value, members = _native.product_pair(
        _table(a_table),
        _table(b_table),
        _flags(left.accepting),
        _flags(right.accepting),
        _limits(budget, 0),
    )
    _settle(budget, "an intersection", stop, value, members)
    rows, accepting = _walked(raw_rows, raw_acc, a_table.shape[1])
    budget.reserve(rows.shape[0], "an intersection")
    trans, flags = _finish(rows, accepting, [], [], column_map)
    return trimmed(trans, flags, prune_dead_ends=True)
