"""Lookups of many keys at once in a sorted key array (runs of equal keys), and the
index ranges such lookups gather."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def positions_of(
    top: npt.NDArray[np.int64], nodes: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Positions in sorted `top` that hold one of `nodes`, with the index of that node
    (a run of equal keys per node, nodes in the given order)."""
    lo = np.searchsorted(top, nodes, side="left")
    counts = np.searchsorted(top, nodes, side="right") - lo
    owner = np.repeat(np.arange(nodes.shape[0]), counts)
    at = concatenated_ranges(counts) + lo[owner]
    return at.astype(np.int64), owner


def concatenated_ranges(lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """0..n-1 for each n of `lengths`, concatenated: the offsets of many runs at once."""
    total = int(lengths.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
