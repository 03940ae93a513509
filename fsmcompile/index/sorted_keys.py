"""Lookups of many keys at once in a sorted key array (runs of equal keys)."""

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
    at = np.arange(owner.shape[0]) - np.repeat(np.cumsum(counts) - counts, counts) + lo[owner]
    return at.astype(np.int64), owner
