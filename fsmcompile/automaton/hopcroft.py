"""Hopcroft's partition refinement, the minimizer's one algorithm (in C: `native/refine.c`).

Minimization took passes matched to each automaton's shape in Python (hash-consing of
chains, numpy Moore rounds, Hopcroft for long chains between loops): about a second of a
40k-state schema automaton's build, and a tenth of a typical terminal's. One Hopcroft run
in C does every shape in O(E log S).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fsmcompile import _native
from fsmcompile.automaton.fragment import Table
from fsmcompile.budget import Budget


def refine(trans: Table, blocks: npt.NDArray[np.int32], budget: Budget) -> npt.NDArray[np.int32]:
    """Refine `blocks` (a partition coarser than Nerode's) until it is stable.

    Args:
        trans: int32[S, C], -1 dead.
        blocks: int32[S], any labels.
        budget: its deadline is checked before the run (the run itself takes
            milliseconds even for 100k states).

    Returns:
        int32[S] labels 0..K-1 of the coarsest stable refinement.

    Precondition: states in one block have transitions on the same classes (acceptance
    and live classes, `shape_blocks`). The partition is then already stable against the
    dead state, which therefore never has to exist.
    """
    budget.check_time()
    _, dense = np.unique(blocks, return_inverse=True)
    out = np.ascontiguousarray(dense.reshape(-1), dtype=np.int32)
    num_blocks = int(out.max()) + 1 if out.shape[0] else 0
    _native.refine_partition(np.ascontiguousarray(trans, dtype=np.int32), out, num_blocks)
    return out
