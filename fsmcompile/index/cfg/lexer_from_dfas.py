"""The lexer of a generated grammar (every terminal has an automaton, no keywords): the
subset construction on (terminal, automaton state) threads directly, in C (`native/lexer.c`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fsmcompile import _native
from fsmcompile.index.cfg.lexer import Countable
from fsmcompile.index.cfg.lexer_counted import terminal_automaton
from fsmcompile.index.cfg.lexer_limits import SharedCountedState, lexer_timeout, too_many_states
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.tables.lark_grammar import LarkGrammar
from fsmcompile.tables.lexer_automaton import LexerAutomaton


def build_lexer_from_dfas(
    grammar: LarkGrammar,
    max_states: int,
    deadline: float | None,
    countable: Countable | None,
    unrolled: frozenset[int] = frozenset(),
) -> LexerAutomaton:
    """`build_lexer_from_nfa` for terminals that all have automata (generated grammars), without
    keywords: the subset construction runs on (terminal, automaton state) threads
    directly, with no byte NFA in between.

    A lexer state is the tuple of its threads in priority order, cut after the first
    accepting one (a lexeme of that terminal ends there, and lower-priority terminals
    lose to it). Each thread is one code: `base[t] + s`, or `entry[t]` for a nullable
    terminal's start, which may not end a lexeme before a byte. States are interned and
    visited in the order `build_lexer_from_nfa` visits them, so both give the same automaton.

    The state loop runs in C (`native/lexer.c`; in Python it took 200-290 ms of a 2 s
    WashingtonPost compile); Python prepares the threads (`_ThreadTables`) and raises what
    the walk stopped for.
    """
    automata: list[ByteDFA] = []
    bound_of: list[int] = []
    item_moves: list[dict[int, frozenset[int]] | None] = []
    for t, term in enumerate(grammar.terminals):
        may_count = None if t in unrolled else countable
        dfa, moves, bound = terminal_automaton(term, may_count, max_states, deadline)
        automata.append(dfa)
        bound_of.append(bound)
        item_moves.append(moves)
    class_of_byte, class_byte = dfa_byte_classes(automata)
    threads = _ThreadTables.of(automata, item_moves, class_byte)
    ctx_entries = [threads.entry[t] for context in grammar.contexts for t in context.terminals]
    ctx_ptr = np.cumsum([0, *(len(context.terminals) for context in grammar.contexts)])
    stop, result = _native.build_lexer(
        threads.moves,
        threads.accepting,
        threads.term_of,
        threads.count_index,
        threads.count_flags,
        np.ascontiguousarray(grammar.ignored, dtype=np.bool_),
        np.array(bound_of, dtype=np.int32),
        ctx_ptr.astype(np.int32),
        np.array(ctx_entries, dtype=np.int32),
        max_states,
        math.inf if deadline is None else deadline,
    )
    if stop == _STOP_STATES:
        raise too_many_states(max_states)
    if stop == _STOP_DEADLINE:
        raise lexer_timeout()
    if stop == _STOP_SHARED:
        assert isinstance(result, list)
        raise SharedCountedState(frozenset(result))
    assert isinstance(result, tuple)
    rows, labels, restart, bounds, char_starts, starts = result
    num_states = len(labels) // 4
    num_classes = len(class_byte)
    # Every state reaches a label: its first thread is never cut (only threads after an
    # accepting one are), and it reaches an accepting state of its minimal automaton.
    # Nor is it minimized: states are thread lists of minimal automata, and in none of
    # the grammars of 96 JSONSchemaBench schemas did minimization merge two (it took 4%
    # of a median compile, 73 ms of a WashingtonPost one). Two states with one future
    # would only cost the vocabulary walk a state more, never a wrong mask.
    return LexerAutomaton(
        transitions=np.frombuffer(rows, dtype=np.int32).reshape(num_states, num_classes),
        class_of_byte=class_of_byte,
        label=np.frombuffer(labels, dtype=np.int32),
        context_start=np.frombuffer(starts, dtype=np.int32),
        restart_context=np.frombuffer(restart, dtype=np.int32),
        char_bound=np.frombuffer(bounds, dtype=np.int32),
        char_start=np.frombuffer(char_starts, dtype=np.bool_).reshape(num_states, num_classes),
    )


# How the C walk stopped (`native/lexer.c`): the error the Python raised there.
_STOP_STATES, _STOP_DEADLINE, _STOP_SHARED = 1, 2, 3


@dataclass(frozen=True, slots=True)
class _ThreadTables:
    """The threads of `build_lexer_from_dfas` as flat arrays for the C walk (T threads,
    C byte classes): per terminal, one code per automaton state, then its entry if
    nullable (an entry moves as state 0 but does not accept before a byte).

    Attributes:
        moves: int32[T, C], the thread each class moves to; -1 dies.
        accepting / term_of: bool[T] / int32[T].
        count_index: int32[T], the row of `count_flags` of a thread whose moves may start
            a counted item (`item_starts` holds classes for its state); -1 elsewhere.
        count_flags: int32[R, C], whether each class starts an item.
        entry: per terminal, the thread a lexeme starts in.
    """

    moves: npt.NDArray[np.int32]
    accepting: npt.NDArray[np.bool_]
    term_of: npt.NDArray[np.int32]
    count_index: npt.NDArray[np.int32]
    count_flags: npt.NDArray[np.int32]
    entry: list[int]

    @classmethod
    def of(
        cls,
        automata: list[ByteDFA],
        item_moves: list[dict[int, frozenset[int]] | None],
        class_byte: list[int],
    ) -> _ThreadTables:
        blocks: list[npt.NDArray[np.int32]] = []
        accepting: list[npt.NDArray[np.bool_]] = []
        count_index: list[npt.NDArray[np.int32]] = []
        count_rows: list[npt.NDArray[np.bool_]] = []
        sizes: list[int] = []
        entry: list[int] = []
        base = 0
        for dfa, moves in zip(automata, item_moves, strict=True):
            n = dfa.num_states
            nullable = bool(dfa.accepting[0])
            own_class = dfa.class_of_byte[class_byte]
            by_class = np.where(dfa.transitions >= 0, dfa.transitions + base, -1)[:, own_class]
            index = np.full(n + nullable, -1, dtype=np.int32)
            for s, counts in (moves or {}).items():
                if counts:
                    index[s] = len(count_rows)
                    count_rows.append(np.isin(own_class, list(counts)))
            blocks.append(by_class)
            accepting.append(dfa.accepting)
            if nullable:
                index[n] = index[0]
                blocks.append(by_class[:1])
                accepting.append(np.zeros(1, dtype=np.bool_))
            count_index.append(index)
            entry.append(base + n if nullable else base)
            sizes.append(n + nullable)
            base += n + nullable
        width = len(class_byte)
        return cls(
            moves=np.ascontiguousarray(np.concatenate(blocks), dtype=np.int32).reshape(-1, width),
            accepting=np.ascontiguousarray(np.concatenate(accepting), dtype=np.bool_),
            term_of=np.repeat(np.arange(len(sizes), dtype=np.int32), sizes),
            count_index=np.concatenate(count_index).astype(np.int32),
            count_flags=np.array(count_rows, dtype=np.int32).reshape(-1, width),
            entry=entry,
        )


def dfa_byte_classes(automata: list[ByteDFA]) -> tuple[npt.NDArray[np.int32], list[int]]:
    """`nfa_byte_classes` of the NFA `build_lexer_from_nfa` would embed these automata in:
    a class boundary wherever some state of some automaton moves differently on two
    adjacent bytes (its ranges per target end there)."""
    cut = np.zeros(257, dtype=np.bool_)
    cut[0] = cut[256] = True
    for dfa in automata:
        by_byte = dfa.transitions[:, dfa.class_of_byte]
        cut[1:256] |= (by_byte[:, 1:] != by_byte[:, :-1]).any(axis=0)
    bounds = np.flatnonzero(cut)
    class_of_byte = np.repeat(np.arange(bounds.shape[0] - 1), np.diff(bounds)).astype(np.int32)
    return class_of_byte, bounds[:-1].tolist()
