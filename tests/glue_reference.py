"""The numpy definition of gluing concatenation that `_native.glue_concat` replaces: the
reference its tests compare against (`tests/unit/test_automaton_kernels.py`)."""

from __future__ import annotations

import numpy as np

from fsmcompile.automaton.fragment import Fragment, drop_orphans


def glue_concat_reference(parts: list[Fragment]) -> Fragment:
    """The parts glued end to start: each part's accepting rows take the next part's
    start row (merged right to left), then the orphaned later starts are dropped."""
    sizes = np.array([p.num_states for p in parts], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    part_of_row = np.repeat(np.arange(len(parts)), sizes)
    raw = np.concatenate([p.trans for p in parts], axis=0)
    trans = np.where(raw >= 0, raw + starts[part_of_row][:, None], -1).astype(np.int32)
    accepting = np.concatenate([p.accepting for p in parts])
    offsets = starts.tolist()
    merged_row = trans[offsets[-1]].copy()
    merged_accepts = bool(accepting[offsets[-1]])
    for part, off in zip(reversed(parts[:-1]), reversed(offsets[:-1]), strict=True):
        rows = np.nonzero(part.accepting)[0] + off
        cols = np.nonzero(merged_row >= 0)[0]
        trans[np.ix_(rows, cols)] = merged_row[cols]
        accepting[rows] = merged_accepts
        merged_row = trans[off].copy()
        merged_accepts = bool(accepting[off])
    return drop_orphans(trans, accepting, offsets[1:])
