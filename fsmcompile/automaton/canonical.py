"""The last build step: coarsest byte classes and breadth-first state numbers.

Two builds of equal languages must give identical arrays (artifacts are cached by
content and compared byte for byte), so both numberings are canonical: classes are
numbered by their smallest byte, states in BFS order from the start, visiting each
state's transitions in class order. Unreachable states are dropped, and classes that
only they kept apart merged. One pass in C (`_native.canonical_numbering`): every
terminal of a schema's grammar ends here, and in numpy its fixed cost was ~0.1 ms.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fsmcompile import _native
from fsmcompile.automaton.fragment import Flags, Table
from fsmcompile.tables.byte_dfa import ByteDFA


def canonical_dfa(
    trans: Table, accepting: Flags, start: int, class_of_byte: npt.NDArray[np.int32]
) -> ByteDFA:
    """The ByteDFA with coarsest classes and BFS state numbers (state 0 = `start`)."""
    rows, classes, flags, num_states, num_classes = _native.canonical_numbering(
        np.ascontiguousarray(trans, dtype=np.int32),
        np.ascontiguousarray(accepting, dtype=np.bool_),
        start,
        np.ascontiguousarray(class_of_byte, dtype=np.int32),
    )
    return ByteDFA(
        transitions=np.frombuffer(rows, dtype=np.int32).reshape(num_states, num_classes),
        class_of_byte=np.frombuffer(classes, dtype=np.int32),
        accepting=np.frombuffer(flags, dtype=np.bool_),
    )
