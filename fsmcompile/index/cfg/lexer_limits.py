"""The errors the lexer builders raise, and the signal that sends a counted terminal back
to be unrolled (`lexer_build.build_lexer_automaton` catches it)."""

from __future__ import annotations

from fsmcompile.errors import BudgetExceededError


class SharedCountedState(Exception):
    """A counted item starts in a lexer state another terminal's lexeme shares.

    Attributes:
        terminals: the counted terminals with a thread in that state.
    """

    def __init__(self, terminals: frozenset[int]) -> None:
        super().__init__(sorted(terminals))
        self.terminals = terminals


def too_many_states(max_states: int) -> BudgetExceededError:
    return BudgetExceededError(
        f"the lexer automaton needs more than max_states={max_states} states",
        limit="max_states",
        value=max_states,
    )


def lexer_timeout() -> BudgetExceededError:
    return BudgetExceededError(
        "compile timed out while building the lexer", limit="timeout_s", value=0.0
    )
