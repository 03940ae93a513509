"""The numpy definition of the canonical numbering that `_native.canonical_numbering`
replaces: the reference its tests compare against (`tests/unit/test_automaton_kernels.py`).

Two builds of equal languages must give identical arrays (artifacts are cached by
content and compared byte for byte), so both numberings are canonical: classes are
numbered by their smallest byte, states in BFS order from the start, visiting each
state's transitions in class order.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fsmcompile import _native
from fsmcompile.automaton.fragment import Flags, Table, unique_rows
from fsmcompile.tables.byte_dfa import ByteDFA


def coarsest_classes(
    trans: Table, class_of_byte: npt.NDArray[np.int32]
) -> tuple[Table, npt.NDArray[np.int32]]:
    """Merge byte classes whose columns are equal; number classes by their smallest byte.

    Args:
        trans: int32[S, C] over the build's classes.
        class_of_byte: int32[256] into those C classes.

    Returns:
        (int32[S, C'], int32[256]): the table over the merged classes and the new map.
    """
    _, group = unique_rows(trans.T)
    group_of_byte = group[class_of_byte]
    _, first_byte = np.unique(group_of_byte, return_index=True)
    order = np.argsort(first_byte, kind="stable")  # groups by their smallest byte
    new_label = np.empty(order.size, dtype=np.int32)
    new_label[order] = np.arange(order.size, dtype=np.int32)
    new_class_of_byte = new_label[group_of_byte].astype(np.int32)
    representative = class_of_byte[np.sort(first_byte)]  # one old class per new class
    return np.ascontiguousarray(trans[:, representative], dtype=np.int32), new_class_of_byte


def canonical_dfa_reference(
    trans: Table, accepting: Flags, start: int, class_of_byte: npt.NDArray[np.int32]
) -> ByteDFA:
    """The ByteDFA with coarsest classes and BFS state numbers (state 0 = `start`).

    The walk is a search in C (`_native.bfs_order`), O(E): a numpy frontier walk would
    need one round per step of the longest chain. Unreachable states are dropped.
    """
    trans, new_class_of_byte = coarsest_classes(trans, class_of_byte)
    num_states = trans.shape[0]
    new_id = np.empty(num_states, dtype=np.int32)
    reached = _native.bfs_order(np.ascontiguousarray(trans, dtype=np.int32), start, new_id)
    perm = np.empty(reached, dtype=np.intp)
    kept = np.flatnonzero(new_id >= 0)
    perm[new_id[kept]] = kept
    lookup = np.append(new_id, np.int32(-1))
    renumbered = np.ascontiguousarray(lookup[trans[perm]], dtype=np.int32)
    if reached < num_states:
        # Unreachable states may have kept classes apart: merge again. Merging equal
        # columns never changes the BFS order (a merged class's targets were already
        # visited through its smaller-byte twin), so no second walk is needed.
        renumbered, new_class_of_byte = coarsest_classes(renumbered, new_class_of_byte)
    return ByteDFA(
        transitions=renumbered,
        class_of_byte=new_class_of_byte,
        accepting=np.ascontiguousarray(accepting[perm], dtype=np.bool_),
    )
