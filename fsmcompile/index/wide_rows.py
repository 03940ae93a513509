"""Distinct rows of wide tables (origin bitsets, signatures, packed masks) by hashing.

The index builders group hundreds of thousands of rows that are 10-100 words wide but take
only a few hundred distinct values; a lexicographic unique of such rows costs seconds,
a 64-bit hash per row (in C) and a check against each class's first member costs
milliseconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from fsmcompile import _native
from fsmcompile.automaton.fragment import radix_order, unique_rows

_CHUNK_ROWS = 1 << 15  # rows per check pass: keeps the gathered copies in cache


def row_hashes(rows: npt.NDArray[Any]) -> npt.NDArray[np.uint64]:
    """uint64[R]: a hash of each row of a 2-D array of 4- or 8-byte items (in C:
    `_native.row_hashes`). Equal rows hash equal; the callers check what a hash groups."""
    rows = np.ascontiguousarray(rows)
    out = np.empty(rows.shape[0], dtype=np.uint64)
    if rows.shape[0]:
        _native.row_hashes(rows, out)
    return out


def unique_wide_rows(
    rows: npt.NDArray[np.uint64], keys: npt.NDArray[np.uint64] | None = None
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(first member, class id) of equal (keys, rows) pairs; a 64-bit hash makes it a 1-D
    unique.

    Walk records repeat a few hundred distinct origin bitsets over hundreds of thousands of
    rows, so hashing and then checking every row against its class's first member is far
    cheaper than a lexicographic unique of the wide rows. The narrow `keys` columns are
    hashed apart and mixed in, not copied next to the wide rows.
    """
    if keys is None:
        keys = np.zeros((rows.shape[0], 0), dtype=np.uint64)
    hashed = row_hashes(rows)
    if keys.shape[1]:
        hashed = hashed * np.uint64(0x9E3779B97F4A7C15) + row_hashes(keys)
    first, inv = first_and_inverse(hashed)
    for lo in range(0, rows.shape[0], _CHUNK_ROWS):
        firsts = first[inv[lo : lo + _CHUNK_ROWS]]
        if not (
            np.array_equal(keys[lo : lo + _CHUNK_ROWS], np.take(keys, firsts, axis=0))
            and np.array_equal(rows[lo : lo + _CHUNK_ROWS], np.take(rows, firsts, axis=0))
        ):
            both = np.concatenate([keys, rows], axis=1)
            _, first, inv = np.unique(both, axis=0, return_index=True, return_inverse=True)
            return first.astype(np.int64), inv.reshape(-1).astype(np.int64)
    return first.astype(np.int64), inv.astype(np.int64)


def unique_mask_rows(
    rows: npt.NDArray[np.int32],
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """`unique_rows` of packed mask rows (ids in row-byte order), sorting only the distinct
    rows: a chunk's dense groups repeat a few score of 16 KB rows hundreds of times, and
    sorting the repeats compared 16 KB per step (4-7 ms for 299 rows, 87 distinct).

    Rows are matched by hash first (`row_hashes`), every repeat is checked against its
    first row, and any collision falls back to sorting all rows.
    """
    if rows.shape[0] < 2:
        return unique_rows(rows)
    rows = np.ascontiguousarray(rows, dtype=np.int32)
    first, inverse = first_and_inverse(row_hashes(rows))
    head = first[inverse]
    repeat = np.flatnonzero(head != np.arange(rows.shape[0]))
    if not np.array_equal(rows[repeat], rows[head[repeat]]):
        return unique_rows(rows)
    order_first, order_inverse = unique_rows(rows[first])
    return first[order_first].astype(np.intp), order_inverse[inverse].astype(np.intp)


def first_and_inverse(
    values: npt.NDArray[np.uint64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """`np.unique(values, return_index=True, return_inverse=True)[1:]` of 64-bit hashes,
    from one stable ordering: the first of each run of equal values in that order is its
    first member, and the runs number the classes.

    The order is by the top 32 bits only, in two stable 16-bit passes: numpy sorts
    16-bit keys by counting, 10x faster than its 64-bit sort (0.5 against 5-7 ms for
    110k values), and a walk's few hundred distinct hashes almost never share their top
    half. When two do, a run of one prefix holds both and the full sort decides.
    """
    order = radix_order(values, (32, 48))
    ordered = values[order]
    starts = np.ones(ordered.shape[0], dtype=np.bool_)
    starts[1:] = ordered[1:] != ordered[:-1]
    prefix = ordered >> np.uint64(32)
    if not np.array_equal(starts[1:], prefix[1:] != prefix[:-1]):
        order = np.argsort(values, kind="stable")
        ordered = values[order]
        starts[1:] = ordered[1:] != ordered[:-1]
    inverse = np.empty(values.shape[0], dtype=np.int64)
    inverse[order] = np.cumsum(starts) - 1
    return order[starts].astype(np.int64), inverse
