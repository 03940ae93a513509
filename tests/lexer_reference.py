"""The Python subset construction that `lexer_from_dfas.build_lexer_from_dfas`'s C walk
(`native/lexer.c`) replaced: the reference definition its tests compare against, state
numbering, counted items and budget errors included.

States are tuples of (terminal, automaton state) thread codes interned in a dict; each
context is walked from its start with a LIFO stack, each row's classes left to right.
"""

from __future__ import annotations

import time

import numpy as np

from fsmcompile.errors import BudgetExceededError
from fsmcompile.index.cfg import lexer as gl
from fsmcompile.index.cfg.lexer_counted import terminal_automaton
from fsmcompile.index.cfg.lexer_from_dfas import dfa_byte_classes
from fsmcompile.index.cfg.lexer_from_nfa import LexerTable
from fsmcompile.index.cfg.lexer_limits import SharedCountedState
from fsmcompile.tables.lark_grammar import LarkGrammar
from fsmcompile.tables.lexer_automaton import LexerAutomaton


def build_lexer_automaton_reference(
    grammar: LarkGrammar,
    *,
    max_states: int,
    deadline: float | None = None,
    countable: gl.Countable | None = None,
) -> LexerAutomaton:
    """`build_lexer_automaton` of a generated grammar, with the Python construction."""
    unrolled: frozenset[int] = frozenset()
    while True:
        try:
            return build_lexer_from_dfas_reference(
                grammar, max_states, deadline, countable, unrolled
            )
        except SharedCountedState as exc:
            unrolled |= exc.terminals


def build_lexer_from_dfas_reference(
    grammar: LarkGrammar,
    max_states: int,
    deadline: float | None,
    countable: gl.Countable | None,
    unrolled: frozenset[int] = frozenset(),
) -> LexerAutomaton:
    """`_build_lexer_from_dfas`, the state loop in Python."""
    automata = []
    bound_of: list[int] = []
    item_moves: list[dict[int, frozenset[int]] | None] = []
    for t, term in enumerate(grammar.terminals):
        may_count = None if t in unrolled else countable
        dfa, moves, bound = terminal_automaton(term, may_count, max_states, deadline)
        automata.append(dfa)
        bound_of.append(bound)
        item_moves.append(moves)
    any_counted = any(b >= 0 for b in bound_of)
    class_of_byte, class_byte = dfa_byte_classes(automata)
    num_classes = len(class_byte)
    # Threads: per terminal, one code per automaton state, then its entry if nullable.
    move_rows: list[list[int]] = []
    accepting: list[bool] = []
    term_of: list[int] = []
    counting_rows: list[list[bool] | None] = []
    entry: list[int] = []
    for t, dfa in enumerate(automata):
        base = len(move_rows)
        own_class = dfa.class_of_byte[class_byte]
        by_class = np.where(dfa.transitions >= 0, dfa.transitions + base, -1)[:, own_class]
        rows_t = by_class.tolist()
        move_rows.extend(rows_t)
        accepting.extend(dfa.accepting.tolist())
        term_of.extend([t] * dfa.num_states)
        moves, own = item_moves[t], own_class.tolist()
        for s in range(dfa.num_states):
            counts = moves.get(s) if moves is not None else None
            counting_rows.append([k in counts for k in own] if counts else None)
        if dfa.accepting[0]:
            entry.append(len(move_rows))
            move_rows.append(rows_t[0])
            accepting.append(False)
            term_of.append(t)
            counting_rows.append(counting_rows[base])
        else:
            entry.append(base)
    ignored_terminal = grammar.ignored.tolist()
    ignored_thread = [ignored_terminal[t] for t in term_of]

    states: dict[tuple[int, tuple[int, ...]], int] = {}
    table = LexerTable(num_classes, max_states)

    def cut(threads: list[int]) -> tuple[int, ...]:
        for i, k in enumerate(threads):
            if accepting[k]:
                return tuple(threads[: i + 1])  # lower-priority threads lose to this end
        return tuple(threads)

    def intern(
        main: tuple[int, ...], ctx: int, pending: list[tuple[int, tuple[int, ...], int]]
    ) -> int:
        if not main:
            return -1
        tag = ctx if any(ignored_thread[k] for k in main) else -1
        key = (tag, main)
        found = states.get(key)
        if found is not None:
            return found
        label = term_of[main[-1]] if accepting[main[-1]] else -1
        owners = set(map(term_of.__getitem__, main)) if any_counted else set()
        sid = table.add(
            label,
            ctx if label >= 0 and ignored_terminal[label] else -1,
            bound_of[owners.pop()] if len(owners) == 1 else -1,
        )
        states[key] = sid
        pending.append((sid, main, ctx))
        return sid

    for ctx, context in enumerate(grammar.contexts):
        pending: list[tuple[int, tuple[int, ...], int]] = []
        start = intern(cut([entry[t] for t in context.terminals]), ctx, pending)
        table.add_start(start)
        while pending:
            sid, main, p_ctx = pending.pop()
            if deadline is not None and time.monotonic() > deadline:
                raise BudgetExceededError(
                    "compile timed out while building the lexer", limit="timeout_s", value=0.0
                )
            counting = [
                (flags, move_rows[k]) for k in main if (flags := counting_rows[k]) is not None
            ]
            if counting:
                table.count_in(
                    sid,
                    [
                        any(flags[c] and moves[c] >= 0 for flags, moves in counting)
                        for c in range(num_classes)
                    ],
                    frozenset(term_of[k] for k in main if counting_rows[k] is not None),
                )
            if len(main) == 1:
                row = move_rows[main[0]]
                target_of = dict.fromkeys(row, -1)
                for k in target_of:
                    if k >= 0:
                        target_of[k] = intern((k,), p_ctx, pending)
                table.rows[sid] = list(map(target_of.__getitem__, row))
                continue
            columns = list(zip(*(move_rows[k] for k in main), strict=True))
            column_target = dict.fromkeys(columns, -1)
            for column in column_target:
                moved = [k for k in column if k >= 0]
                if moved:
                    column_target[column] = intern(cut(moved), p_ctx, pending)
            table.rows[sid] = list(map(column_target.__getitem__, columns))
    return table.built(class_of_byte)
