"""The Python state loops that `subset.py`'s C walks (`native/subset.c`) replaced: the reference
definition their tests compare against, state numbering and budget calls included.

Each construction walks (state x byte class) in Python, interning new states in a dict in
the order of discovery (breadth first, classes left to right), on the compressed columns
of `compress_columns`, and finishes with the same numpy steps as the product code.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import (
    Flags,
    Fragment,
    Table,
    drop_orphans,
    shifted,
    trimmed,
)
from fsmcompile.automaton.subset import compress_columns
from fsmcompile.budget import Budget

_RESERVE_EVERY = 256  # new states between budget checks in the Python loops


def _finish(
    rows: list[list[int]],
    accepting: list[bool],
    embedded: list[Table],
    embedded_accepting: list[Flags],
    column_map: npt.NDArray[np.intp],
) -> tuple[Table, Flags]:
    """Stack new rows with wholly copied operands; codes <= -2 point into the copies."""
    num_new = len(rows)
    width = len(column_map) if not rows else len(rows[0])
    raw = np.array(rows, dtype=np.int64).reshape(num_new, width)
    local: Table = np.where(raw <= -2, num_new + (-raw - 2), raw).astype(np.int32)
    parts = [local]
    offset = num_new
    for table in embedded:
        parts.append(shifted(table, offset))
        offset += table.shape[0]
    trans = np.concatenate(parts, axis=0)[:, column_map]
    flags = np.concatenate([np.array(accepting, dtype=np.bool_), *embedded_accepting])
    return np.ascontiguousarray(trans, dtype=np.int32), flags


def subset_concat_reference(first: Fragment, second: Fragment, budget: Budget) -> Fragment:
    """`first` then `second` when their boundary overlaps on some classes.

    The result is glue plus a few subset states. A subset state is (a, {b, ...}): in
    `first` at `a` and in `second` at each b. A copy of `first` stands for the pairs
    (a, {start of second} if a accepts else {}): its accepting rows get `second`'s start
    row wherever the two do not collide, exactly as in `glue_concat`. A copy of `second`
    stands for (dead, {b}). Only collisions create new states, and Python walks only
    those, so a 16k-state left side with a one-byte collision costs O(size) numpy work.
    """
    n_a, n_b = first.num_states, second.num_states
    budget.reserve(n_a + n_b, "a concatenation")
    a_acc, b_acc = first.accepting.tolist(), second.accepting.tolist()
    (a_local, b_local), column_map = compress_columns([first.trans, second.trans])
    a_cache: dict[int, list[int]] = {}
    b_cache: dict[int, list[int]] = {}

    def a_row(a: int) -> list[int]:
        row = a_cache.get(a)
        if row is None:
            row = a_cache[a] = a_local[a].tolist()
        return row

    def b_row(b: int) -> list[int]:
        row = b_cache.get(b)
        if row is None:
            row = b_cache[b] = b_local[b].tolist()
        return row

    index: dict[tuple[int, tuple[int, ...]], int] = {}
    queue: list[tuple[int, tuple[int, ...]]] = []

    def state_of(na: int, nbs: set[int]) -> int:
        if na >= 0:
            if nbs == ({0} if a_acc[na] else set()):
                return na
        elif not nbs:
            return -1
        elif len(nbs) == 1:
            return n_a + next(iter(nbs))
        key = (na, tuple(sorted(nbs)))
        found = index.get(key)
        if found is None:
            found = index[key] = len(queue)
            queue.append(key)
            budget.reserve_set(len(nbs) + 1, "a concatenation")
            if found % _RESERVE_EVERY == 0:
                budget.reserve(n_a + n_b + found, "a concatenation")
        return n_a + n_b + found

    b_start = second.trans[0]
    b_live = b_start >= 0
    rows = np.nonzero(first.accepting)[0]
    glued = first.trans[rows]
    collide = (glued >= 0) & b_live[None, :]
    glued = np.where((glued < 0) & b_live[None, :], b_start[None, :] + n_a, glued)
    for r, c in zip(*np.nonzero(collide), strict=True):
        na = int(first.trans[rows[r], c])
        nbs = {int(b_start[c])} | ({0} if a_acc[na] else set())
        glued[r, c] = state_of(na, nbs)
    a_part = first.trans.copy()
    a_part[rows] = glued
    width = a_local.shape[1]  # the loop below runs on compressed columns
    new_rows: list[list[int]] = []
    new_acc: list[bool] = []
    for a, bs in queue:
        budget.tick()
        here = a_row(a) if a >= 0 else [-1] * width
        others = [b_row(b) for b in bs]
        row = []
        for c in range(width):
            na = here[c]
            nbs = {r[c] for r in others}
            nbs.discard(-1)
            if na >= 0 and a_acc[na]:
                nbs.add(0)
            row.append(state_of(na, nbs))
        new_rows.append(row)
        new_acc.append(any(b_acc[b] for b in bs))
    accepting_a = first.accepting & bool(second.accepting[0])
    parts = [a_part, shifted(second.trans, n_a)]
    if new_rows:
        parts.append(np.array(new_rows, dtype=np.int32)[:, column_map])
    trans = np.concatenate(parts, axis=0).astype(np.int32)
    flags = np.concatenate([accepting_a, second.accepting, np.array(new_acc, dtype=np.bool_)])
    return drop_orphans(trans, flags, [n_a])


def subset_repeat_reference(item: Fragment, lo: int, hi: int | None, budget: Budget) -> Fragment:
    """`item{lo,hi}` by subset construction over (repetitions done, item state) pairs.

    Preconditions: `item` is not nullable and its start has no incoming transition, so
    a pair (k, start) means exactly "k repetitions done". With `hi=None` the count
    saturates at `lo`: past it, more repetitions change nothing.
    """
    (table,), column_map = compress_columns([item.trans])
    rows_in = table.tolist()
    acc_in = item.accepting.tolist()
    size = len(rows_in)
    width = table.shape[1]
    start: tuple[int, ...] = (0,)
    index = {start: 0}
    queue = [start]
    rows: list[list[int]] = []
    accepting: list[bool] = []
    for macro in queue:
        budget.tick()
        pairs = [divmod(code, size) for code in macro]
        row = []
        for c in range(width):
            nxt: set[int] = set()
            for k, x in pairs:
                t = rows_in[x][c]
                if t < 0:
                    continue
                nxt.add(k * size + t)
                if acc_in[t]:
                    done = k + 1
                    if hi is None:
                        nxt.add(min(done, lo) * size)
                    elif done < hi:
                        nxt.add(done * size)
            if not nxt:
                row.append(-1)
                continue
            key = tuple(sorted(nxt))
            target = index.get(key)
            if target is None:
                target = index[key] = len(queue)
                queue.append(key)
                budget.reserve_set(len(key), "a repetition")
                if target % _RESERVE_EVERY == 0:
                    budget.reserve(target, "a repetition")
            row.append(target)
        rows.append(row)
        accepting.append(any((acc_in[x] and k + 1 >= lo) or (x == 0 and k >= lo) for k, x in pairs))
    budget.reserve(len(rows), "a repetition")
    trans, flags = _finish(rows, accepting, [], [], column_map)
    return Fragment(trans, flags)


def product_union_reference(parts: list[Fragment], budget: Budget) -> Fragment:
    """Union by product construction over the branches still alive.

    A state is a tuple of (branch, state) pairs; when one branch is left the run moves
    into a copy of that branch, so a trie of words costs only its shared prefixes.
    """
    tables, column_map = compress_columns([p.trans for p in parts])
    all_rows = [t.tolist() for t in tables]
    all_acc = [p.accepting.tolist() for p in parts]
    bases = np.concatenate([[0], np.cumsum([p.num_states for p in parts])[:-1]]).tolist()
    width = tables[0].shape[1]
    start = tuple((i, 0) for i in range(len(parts)))
    index = {start: 0}
    queue = [start]
    rows: list[list[int]] = []
    accepting: list[bool] = []
    reserve_base = sum(p.num_states for p in parts)
    for macro in queue:
        budget.tick()
        row = []
        live_rows = [(i, all_rows[i][s]) for i, s in macro]
        for c in range(width):
            nxt = tuple((i, r[c]) for i, r in live_rows if r[c] >= 0)
            if not nxt:
                row.append(-1)
            elif len(nxt) == 1:
                i, s = nxt[0]
                row.append(-2 - (bases[i] + s))
            else:
                target = index.get(nxt)
                if target is None:
                    target = index[nxt] = len(queue)
                    queue.append(nxt)
                    budget.reserve_set(len(nxt), "an alternation")
                    if target % _RESERVE_EVERY == 0:
                        budget.reserve(target + reserve_base, "an alternation")
                row.append(target)
        rows.append(row)
        accepting.append(any(all_acc[i][s] for i, s in macro))
    trans, flags = _finish(rows, accepting, tables, [p.accepting for p in parts], column_map)
    starts = [len(rows) + base for base in bases]
    return drop_orphans(trans, flags, starts)


def product_intersection_reference(parts: list[Fragment], budget: Budget) -> Fragment:
    """Intersection by pairwise product construction; dead ends are pruned afterwards."""
    result = parts[0]
    for part in parts[1:]:
        result = product_pair_reference(result, part, budget)
        if result.is_nothing:
            break
    return result


def product_pair_reference(left: Fragment, right: Fragment, budget: Budget) -> Fragment:
    """Both languages at once: states (a, b) numbered by BFS, keyed as a * |right| + b."""
    (a_table, b_table), column_map = compress_columns([left.trans, right.trans])
    a_rows, b_rows = a_table.tolist(), b_table.tolist()
    a_acc, b_acc = left.accepting.tolist(), right.accepting.tolist()
    n_b = right.num_states
    index = {0: 0}
    queue = [0]
    rows: list[list[int]] = []
    accepting: list[bool] = []
    for key in queue:
        budget.tick()
        a, b = divmod(key, n_b)
        row = []
        for x, y in zip(a_rows[a], b_rows[b], strict=True):
            if x < 0 or y < 0:
                row.append(-1)
                continue
            nxt = x * n_b + y
            target = index.get(nxt)
            if target is None:
                target = index[nxt] = len(queue)
                queue.append(nxt)
                if target % _RESERVE_EVERY == 0:
                    budget.reserve(target, "an intersection")
            row.append(target)
        rows.append(row)
        accepting.append(a_acc[a] and b_acc[b])
    budget.reserve(len(rows), "an intersection")
    trans, flags = _finish(rows, accepting, [], [], column_map)
    return trimmed(trans, flags, prune_dead_ends=True)
