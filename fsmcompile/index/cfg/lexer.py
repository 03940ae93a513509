"""The lexer automaton of a Lark grammar: one byte DFA per lark lexer context, merged.

lark's contextual lexer tries, in each parser state, one `re` alternation of the terminals
that state accepts: the first alternative that matches wins, with Python's
backtracking preference inside it. That is leftmost-first matching, not longest match, and
a plain language DFA (`build_dfa`) cannot tell `a|ab` from `ab|a`. So each context gets a
leftmost-first DFA, built the way RE2 and Rust's regex-automata build one: DFA states are
priority-ordered lists of NFA states, and the threads behind the first one that reaches a
match are dropped. The lexeme lark cuts is then the last labelled state before the DFA
dies. lark's `UnlessCallback` (a NAME lexeme that spells a keyword is renamed) is folded in
by tracking the keyword literals alongside, without priority.

All contexts share one state space and one byte-class map; states with the same future are
merged across contexts (minimized on their outputs), except that a state labelled with an
`%ignore`d terminal keeps its context, since lark restarts in the same context after it.

This module holds the data (`LexerAutomaton` itself lives in `fsmcompile.tables`, where
the runtime reads it): `lexer_build.build_lexer_automaton` builds it (from the ordered byte
NFA, `lexer_from_nfa.py`, or from a generated grammar's automata, `lexer_from_dfas.py`),
`lexer_minimize.py` trims and minimizes it through the automaton stage, and
`lexer_shapes.lexer_shapes` erases its ignore tags for the vocabulary walk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fsmcompile.tables.byte_dfa import ByteDFA

Countable = Callable[[ByteDFA, dict[int, frozenset[int]], int], bool]
"""(a counted terminal's unbounded automaton, its item starts from `item_starts`, the
bound) → whether the runtime may count the bound instead of the lexer unrolling it."""


@dataclass(frozen=True, slots=True, eq=False)
class LexerShapes:
    """The lexer automaton with its ignore tags erased, for walking the vocabulary.

    A `%ignore`d terminal (a comment, whitespace) has one copy of its states per context,
    because lark restarts in that context after it. Until the lexeme is cut the copies
    behave alike, so the vocabulary walk runs on these merged "shapes" and recovers the
    context from the origin only when an ignored lexeme is cut: a comment state is walked
    once, not once per context.

    Attributes:
        of_state: int32[L], the shape of each lexer state.
        transitions: int32[S, C]; label: int32[S]; class_of_byte: int32[256], as in
            `LexerAutomaton`.
        context_start: int32[K], the shape of each context's start state.
        context_tag: int32[L], for a state whose lexeme can still become an ignored
            terminal, the context it restarts in; -1 for the others.
    """

    of_state: npt.NDArray[np.int32]
    transitions: npt.NDArray[np.int32]
    label: npt.NDArray[np.int32]
    class_of_byte: npt.NDArray[np.int32]
    context_start: npt.NDArray[np.int32]
    context_tag: npt.NDArray[np.int32]

    @property
    def num_shapes(self) -> int:
        return int(self.transitions.shape[0])
