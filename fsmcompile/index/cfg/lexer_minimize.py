"""A built lexer trimmed and minimized through the automaton stage: co-reachability
(`fragment.coreachable`) and the one minimizer (`minimize.labelled_classes`), on the
lexer's outputs rather than an accepting flag.
"""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import coreachable
from fsmcompile.automaton.minimize import labelled_classes
from fsmcompile.budget import Budget
from fsmcompile.errors import BudgetExceededError
from fsmcompile.tables.lexer_automaton import LexerAutomaton


def finish_lexer(built: LexerAutomaton, deadline: float | None) -> LexerAutomaton:
    """`built` with the states that can never be cut into a lexeme trimmed, then equal
    futures merged (and equal counting: bound and counted moves are part of a state's
    output).

    States are numbered by their block's first state, so the result does not depend on
    how the minimizer refines.

    Raises:
        BudgetExceededError: `deadline` has passed.
    """
    trans, label, starts = built.transitions, built.label, built.context_start
    restart, bound, char_start = built.restart_context, built.char_bound, built.char_start
    live = label >= 0
    live[starts] = True  # a context's start stays even when no lexeme can begin there
    live = coreachable(trans, live)
    trans = np.where((trans >= 0) & live[np.maximum(trans, 0)], trans, -1).astype(np.int32)
    output = (label.astype(np.int64) + 1) * 65536 + (restart.astype(np.int64) + 1)
    if (bound >= 0).any():
        _, moves = np.unique(np.packbits(char_start, axis=1), axis=0, return_inverse=True)
        _, output = np.unique(
            np.stack([output, bound, moves.reshape(-1)], axis=1), axis=0, return_inverse=True
        )
        output = output.reshape(-1).astype(np.int64)
    # Dead states all share one block, so mark them by an output no live state has.
    output = np.where(live, output, -1)
    block = minimized_blocks(trans, output, deadline)
    # Blocks are numbered by first state and never mix live and dead states, so the live
    # blocks in block order are the live blocks in order of first state.
    _, first = np.unique(block, return_index=True)
    live_block = live[first]
    new_id = np.where(live_block, np.cumsum(live_block) - 1, -1).astype(np.int64)
    reps = first[live_block]
    mapped = np.where(trans[reps] >= 0, new_id[block[np.maximum(trans[reps], 0)]], -1)
    return LexerAutomaton(
        transitions=np.ascontiguousarray(mapped, dtype=np.int32),
        class_of_byte=built.class_of_byte,
        label=np.ascontiguousarray(label[reps], dtype=np.int32),
        context_start=new_id[block[starts]].astype(np.int32),
        restart_context=np.ascontiguousarray(restart[reps], dtype=np.int32),
        char_bound=np.ascontiguousarray(bound[reps], dtype=np.int32),
        char_start=np.ascontiguousarray(char_start[reps]),
    )


def minimized_blocks(
    trans: npt.NDArray[np.int32], output: npt.NDArray[np.int64], deadline: float | None = None
) -> npt.NDArray[np.int32]:
    """Block id of each state: states with equal outputs along every path share a block,
    blocks numbered by their first state (`labelled_classes`).

    Raises:
        BudgetExceededError: `deadline` has passed.
    """
    if deadline is not None and time.monotonic() > deadline:
        raise BudgetExceededError(
            "compile timed out while minimizing the lexer", limit="timeout_s", value=0.0
        )
    return labelled_classes(trans, output, Budget(max(trans.shape[0], 1), None))
