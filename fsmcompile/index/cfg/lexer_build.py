"""Build the lexer automaton of a Lark grammar: the entry point that picks the
construction and unrolls counted terminals the runtime cannot count."""

from __future__ import annotations

from fsmcompile.index.cfg.lexer import Countable
from fsmcompile.index.cfg.lexer_from_dfas import build_lexer_from_dfas
from fsmcompile.index.cfg.lexer_from_nfa import build_lexer_from_nfa
from fsmcompile.index.cfg.lexer_limits import SharedCountedState
from fsmcompile.tables.lark_grammar import LarkGrammar
from fsmcompile.tables.lexer_automaton import LexerAutomaton


def build_lexer_automaton(
    grammar: LarkGrammar,
    *,
    max_states: int,
    deadline: float | None = None,
    countable: Countable | None = None,
) -> LexerAutomaton:
    """One leftmost-first DFA per lexer context, merged and minimized.

    Counted terminals (`Terminal.counted`) that `countable` accepts (no token can write
    more items than the bound into a lexeme it starts: `fresh_items.max_fresh_items`) are
    built unbounded, their item starts marked for the runtime's counter; others, all of
    them without `countable`, and those whose items start in a state another terminal's
    lexeme shares (a long array of ids beside keys that begin like them), are built with
    the bound unrolled.

    Cost: subset construction, O(DFA states x classes x threads); lark terminals give
    tens to hundreds of states per context. A generated grammar (every terminal has an
    automaton, no keywords) runs it in C on the terminals' automata directly
    (`build_lexer_from_dfas`); others in Python on a byte NFA that keeps Python's
    alternation preference.

    Raises:
        BudgetExceededError: more than `max_states` states, or `deadline` passed.
        UnsupportedFeatureError: a terminal whose IR has no match preference.
    """
    build = build_lexer_from_nfa
    if all(t.dfa is not None for t in grammar.terminals) and not any(
        c.unless for c in grammar.contexts
    ):
        build = build_lexer_from_dfas
    unrolled: frozenset[int] = frozenset()
    while True:
        try:
            return build(grammar, max_states, deadline, countable, unrolled)
        except SharedCountedState as exc:
            unrolled |= exc.terminals  # each round unrolls one more terminal at least
