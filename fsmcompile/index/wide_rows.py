"""Distinct rows of wide tables (origin bitsets, signatures, packed masks) by hashing.

The index builders group hundreds of thousands of rows that are 10-100 words wide but take
only a few hundred distinct values; a lexicographic unique of such rows costs seconds,
a 64-bit hash per row and a check against each class's first member costs milliseconds.
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import radix_order, unique_rows

_CHUNK_ROWS = 1 << 15  # rows per pass: keeps the temporaries in cache


@functools.lru_cache(maxsize=256)
def _multipliers(width: int) -> npt.NDArray[np.uint64]:
    """Odd random 64-bit factors per column, the same on every call (read-only): seeding
    a generator cost more than hashing the few hundred rows of a typical call."""
    rng = np.random.default_rng(0x5EED)
    mult = rng.integers(1, 2**63, size=width, dtype=np.uint64) | np.uint64(1)
    mult.flags.writeable = False
    return mult


def unique_wide_rows(
    rows: npt.NDArray[np.uint64], keys: npt.NDArray[np.uint64] | None = None
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(first member, class id) of equal (keys, rows) pairs; a 64-bit hash makes it a 1-D
    unique.

    Walk records repeat a few hundred distinct origin bitsets over hundreds of thousands of
    rows, so hashing (in cache-sized chunks) and then checking every row against its
    class's first member is far cheaper than a lexicographic unique of the wide rows. The
    narrow `keys` columns are hashed alongside, not copied next to the wide rows.
    """
    if keys is None:
        keys = np.zeros((rows.shape[0], 0), dtype=np.uint64)
    mult = _multipliers(keys.shape[1] + rows.shape[1])
    hashed = np.empty(rows.shape[0], dtype=np.uint64)
    for lo in range(0, rows.shape[0], _CHUNK_ROWS):
        hi = lo + _CHUNK_ROWS
        total = np.zeros(min(hi, rows.shape[0]) - lo, dtype=np.uint64)
        for block, factors in (
            (keys[lo:hi], mult[: keys.shape[1]]),
            (rows[lo:hi], mult[keys.shape[1] :]),
        ):
            # Fold the high half down first: a bare multiply never moves high bits down,
            # so rows differing only in bit 63 of two words would always collide.
            # A product with the factors (integer matmul wraps like the sum of products
            # it stands for, in half the time of multiplying and summing the rows).
            mixed = block ^ (block >> np.uint64(32))
            total += mixed @ factors
        hashed[lo:hi] = total
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

    Rows are matched by a weighted sum of their words first (odd weights, so rows one word
    apart never collide), every repeat is checked against its first row, and any
    collision falls back to sorting all rows.
    """
    if rows.shape[0] < 2:
        return unique_rows(rows)
    rows = np.ascontiguousarray(rows, dtype=np.int32)
    weights = _word_weights(rows.shape[1])
    hashed = (rows.view(np.uint32) * weights).sum(axis=1, dtype=np.uint64)
    first, inverse = first_and_inverse(hashed)
    head = first[inverse]
    repeat = np.flatnonzero(head != np.arange(rows.shape[0]))
    if not np.array_equal(rows[repeat], rows[head[repeat]]):
        return unique_rows(rows)
    order_first, order_inverse = unique_rows(rows[first])
    return first[order_first].astype(np.intp), order_inverse[inverse].astype(np.intp)


@functools.lru_cache(maxsize=16)
def _word_weights(width: int) -> npt.NDArray[np.uint32]:
    """Odd random 32-bit weights per word (the low halves of `_multipliers`), read-only."""
    weights = _multipliers(width).astype(np.uint32)
    weights.flags.writeable = False
    return weights


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
