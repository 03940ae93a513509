"""The lexer automaton of a grammar index as data: what the index builder writes
(`fsmcompile.index.cfg.lexer`), the artifact stores and the runtime's parser lexes with."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True, slots=True, eq=False)
class LexerAutomaton:
    """Every lexer context of a grammar as one trimmed byte DFA (L states, C classes).

    Attributes:
        transitions: int32[L, C], next state per (state, byte class); -1 is dead.
        class_of_byte: int32[256].
        label: int32[L], the terminal lark emits if the lexeme is cut here; -1 if none.
        context_start: int32[K], the state a new lexeme starts in, per lexer context.
        restart_context: int32[L], for states labelled with an `%ignore`d terminal, the
            context the next lexeme starts in (the same one); -1 elsewhere.
        char_bound: int32[L], in a state only a counted terminal's lexeme reaches, the
            most items (string characters) that lexeme may hold; -1 elsewhere.
        char_start: bool[L, C], whether the move starts one more counted item.
    """

    transitions: npt.NDArray[np.int32]
    class_of_byte: npt.NDArray[np.int32]
    label: npt.NDArray[np.int32]
    context_start: npt.NDArray[np.int32]
    restart_context: npt.NDArray[np.int32]
    char_bound: npt.NDArray[np.int32]
    char_start: npt.NDArray[np.bool_]

    @property
    def num_states(self) -> int:
        return int(self.transitions.shape[0])
