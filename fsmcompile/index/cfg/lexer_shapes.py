"""The lexer automaton with its ignore tags erased (`LexerShapes`), for walking the
vocabulary once per shape rather than once per context."""

from __future__ import annotations

import numpy as np

from fsmcompile.index.cfg.lexer import LexerShapes
from fsmcompile.index.cfg.lexer_minimize import minimized_blocks
from fsmcompile.tables.lexer_automaton import LexerAutomaton


def lexer_shapes(lexer: LexerAutomaton, deadline: float | None = None) -> LexerShapes:
    """Merge lexer states whose labels agree along every path (ignore tags dropped).

    A lexer with no ignore tags and no counted items was minimized on its labels alone
    (`finish_lexer`), so each of its states is a shape of its own: a generated grammar's
    lexer skips the second minimization.
    """
    trans = lexer.transitions
    if (lexer.restart_context < 0).all() and (lexer.char_bound < 0).all():
        block = np.arange(lexer.num_states, dtype=np.int32)
    else:
        block = minimized_blocks(trans, lexer.label.astype(np.int64), deadline)
    _, first, shape = np.unique(block, return_index=True, return_inverse=True)
    shape = shape.reshape(-1)
    reps = first
    shape_trans = np.where(trans[reps] >= 0, shape[np.maximum(trans[reps], 0)], -1)
    # Each state takes the largest tag among its moves' targets, until nothing changes;
    # a round reads every move at once (a loop over byte classes cost more than the rest).
    tag = lexer.restart_context.astype(np.int64).copy()
    live = trans >= 0
    targets = np.maximum(trans, 0)
    while (tag >= 0).any():
        nxt = np.maximum(tag, np.where(live, tag[targets], -1).max(axis=1, initial=-1))
        if np.array_equal(nxt, tag):
            break
        tag = nxt
    return LexerShapes(
        of_state=shape.astype(np.int32),
        transitions=np.ascontiguousarray(shape_trans, dtype=np.int32),
        label=np.ascontiguousarray(lexer.label[reps], dtype=np.int32),
        class_of_byte=lexer.class_of_byte,
        context_start=shape[lexer.context_start].astype(np.int32),
        context_tag=tag.astype(np.int32),
    )
