"""The lexer of a Lark grammar by leftmost-first subset construction over the ordered
byte NFA (`lexer_nfa.py`), every context into one state space.

DFA states are priority-ordered lists of NFA states, and the threads behind the first
one that reaches a match are dropped, as RE2 and Rust's regex-automata build a
leftmost-first DFA. lark's `UnlessCallback` (a NAME lexeme that spells a keyword is
renamed) is folded in by tracking the keyword literals alongside, without priority.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from fsmcompile.index.cfg.lexer import Countable
from fsmcompile.index.cfg.lexer_counted import terminal_automaton
from fsmcompile.index.cfg.lexer_limits import SharedCountedState, lexer_timeout, too_many_states
from fsmcompile.index.cfg.lexer_minimize import finish_lexer
from fsmcompile.index.cfg.lexer_nfa import (
    BYTE,
    MATCH,
    NFA_STATES_PER_STATE,
    OrderedNfa,
    nfa_byte_classes,
)
from fsmcompile.tables.lark_grammar import LarkGrammar
from fsmcompile.tables.lexer_automaton import LexerAutomaton


@dataclass(slots=True)
class LexerTable:
    """The lexer DFA a subset construction builds, state by state.

    Attributes:
        rows: per state, the next state per byte class (-1: dead).
        labels / restart / bounds: per state, as in `LexerAutomaton` (label, restart
            context, char bound) before trimming.
        char_starts: per state with counted moves, whether each class starts an item.
        starts: the start state of each context.
        shared_starts: context starts where a counted item starts beside another
            terminal's lexeme, with the counted terminals there (see `count_in`).
    """

    num_classes: int
    max_states: int
    rows: list[list[int]] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    restart: list[int] = field(default_factory=list)
    bounds: list[int] = field(default_factory=list)
    char_starts: dict[int, list[bool]] = field(default_factory=dict)
    starts: list[int] = field(default_factory=list)
    shared_starts: dict[int, frozenset[int]] = field(default_factory=dict)

    def count_in(self, sid: int, flags: list[bool], counted: frozenset[int]) -> None:
        """Mark the classes that start a counted item in state `sid`.

        The runtime checks a lexeme's count against the bound of the state it is in, so a
        state another terminal's lexeme shares has none. That is safe only where a lexeme
        starts, with no item yet: `countable` bounds what one token writes from there.
        Elsewhere, `SharedCountedState` names the `counted` terminals to unroll; `finish`
        checks that no move leads back into such a start.
        """
        if self.bounds[sid] < 0:
            if sid not in self.starts:
                raise SharedCountedState(counted)
            self.shared_starts[sid] = counted
        self.char_starts[sid] = flags

    def add(self, label: int, restart: int, bound: int) -> int:
        """A new state with no moves yet; its id."""
        if len(self.rows) >= self.max_states:
            raise too_many_states(self.max_states)
        self.rows.append([-1] * self.num_classes)
        self.labels.append(label)
        self.restart.append(restart)
        self.bounds.append(bound)
        return len(self.rows) - 1

    def add_start(self, start: int) -> None:
        """Record a context's start; -1 (a context with no terminals, only `$END`
        expected) gets a dead start state."""
        self.starts.append(start if start >= 0 else self.add(-1, -1, -1))

    def built(self, class_of_byte: npt.NDArray[np.int32]) -> LexerAutomaton:
        """The automaton as built, every state kept (no trimming, no minimization).

        Raises:
            SharedCountedState: a move leads back into a context start where a counted
                item starts beside another terminal's lexeme.
        """
        trans = np.array(self.rows, dtype=np.int32).reshape(len(self.rows), self.num_classes)
        if self.shared_starts:
            entered = np.isin(np.fromiter(self.shared_starts, dtype=np.int32), trans)
            if entered.any():
                counted = [t for ts in self.shared_starts.values() for t in ts]
                raise SharedCountedState(frozenset(counted))
        char_start = np.zeros(trans.shape, dtype=np.bool_)
        for sid, flags in self.char_starts.items():
            char_start[sid] = flags
        return LexerAutomaton(
            transitions=trans,
            class_of_byte=class_of_byte,
            label=np.array(self.labels, dtype=np.int32),
            context_start=np.array(self.starts, dtype=np.int32),
            restart_context=np.array(self.restart, dtype=np.int32),
            char_bound=np.array(self.bounds, dtype=np.int32),
            char_start=char_start,
        )


def build_lexer_from_nfa(
    grammar: LarkGrammar,
    max_states: int,
    deadline: float | None,
    countable: Countable | None,
    unrolled: frozenset[int] = frozenset(),
) -> LexerAutomaton:

    # NFA states are cheap next to DFA states (an embedded terminal automaton takes one
    # per state and target), so the NFA gets a larger share of the budget.
    nfa = OrderedNfa(NFA_STATES_PER_STATE * max_states, deadline)
    match_of_terminal: list[int] = []
    term_entry: list[int] = []
    bound_of: list[int] = []
    for t, term in enumerate(grammar.terminals):
        nfa.building = t
        match_of_terminal.append(nfa.add(MATCH, out=[t]))
        bound_of.append(-1)
        if term.dfa is None:
            term_entry.append(nfa.build(term.node, match_of_terminal[t]))
            continue
        may_count = None if t in unrolled else countable
        dfa, moves, bound_of[t] = terminal_automaton(term, may_count, max_states, deadline)
        term_entry.append(nfa.embed(dfa, match_of_terminal[t], moves))
    any_counted = any(b >= 0 for b in bound_of)
    class_of_byte, class_byte = nfa_byte_classes(nfa)
    num_classes = len(class_byte)
    # Ranges are unions of whole classes (the classes are cut at every range bound), so a
    # range covers the classes from its low byte's to its high byte's.
    step: list[list[int] | None] = []
    class_at = class_of_byte.tolist()
    for k, r, o in zip(nfa.kind, nfa.ranges, nfa.out, strict=True):
        if k != BYTE:
            step.append(None)
            continue
        targets = [-1] * num_classes
        for lo, hi in r:
            first, last = class_at[lo], class_at[hi]
            targets[first : last + 1] = [o[0]] * (last - first + 1)
        step.append(targets)
    is_match = [k == MATCH for k in nfa.kind]
    ignored_terminal = grammar.ignored.tolist()
    ignored_thread = [ignored_terminal[t] for t in nfa.owner]
    unless_ids = {ctx.unless: i for i, ctx in enumerate(grammar.contexts)}

    # A DFA state depends on its context only while an ignored terminal is still possible
    # (lark restarts in that context after it) or a keyword may still rename the lexeme
    # (the context decides which): other states are shared by every context.
    states: dict[tuple[int, int, tuple[int, ...], frozenset[int]], int] = {}
    table = LexerTable(num_classes, max_states)
    closures: dict[tuple[int, ...], list[int]] = {}
    Pending = list[
        tuple[int, tuple[int, ...], frozenset[int], int, int, dict[int, tuple[int, ...]]]
    ]

    def closure(seeds: list[int]) -> list[int]:
        key = tuple(seeds)
        found = closures.get(key)
        if found is None:
            found = nfa.closure(seeds)
            for i, s in enumerate(found):
                if is_match[s]:
                    found = found[: i + 1]  # lower-preference threads lose to this match
                    break
            closures[key] = found
        return found

    def intern(
        main: list[int],
        shadow: frozenset[int],
        ctx: int,
        unless_id: int,
        unless: dict[int, tuple[int, ...]],
        pending: Pending,
    ) -> int:
        if not main:
            return -1
        tag = ctx if any(ignored_thread[s] for s in main) else -1
        key = (tag, unless_id if shadow else -1, tuple(main), shadow)
        found = states.get(key)
        if found is not None:
            return found
        label = nfa.out[main[-1]][0] if is_match[main[-1]] else -1
        if label >= 0:
            for keyword in unless.get(label, ()):
                if match_of_terminal[keyword] in shadow:
                    label = keyword
                    break
        owners = set(map(nfa.owner.__getitem__, main)) if any_counted else set()
        sid = table.add(
            label,
            ctx if label >= 0 and ignored_terminal[label] else -1,
            bound_of[owners.pop()] if len(owners) == 1 else -1,
        )
        states[key] = sid
        pending.append((sid, key[2], shadow, ctx, unless_id, unless))
        return sid

    for ctx, context in enumerate(grammar.contexts):
        unless = dict(context.unless)
        keywords = sorted({k for _, ks in context.unless for k in ks})
        shadow0 = frozenset(nfa.closure([term_entry[k] for k in keywords]))
        pending: Pending = []
        start = intern(
            closure([term_entry[t] for t in context.terminals]),
            shadow0,
            ctx,
            unless_ids[context.unless],
            unless,
            pending,
        )
        table.add_start(start)
        while pending:
            sid, main, shadow, p_ctx, p_uid, p_unless = pending.pop()
            if deadline is not None and time.monotonic() > deadline:
                raise lexer_timeout()
            main_rows = [row for s in main if (row := step[s]) is not None]
            if not main_rows:
                continue
            counting = [row for s in main if nfa.counting[s] and (row := step[s]) is not None]
            if counting:
                table.count_in(
                    sid,
                    [any(r[c] >= 0 for r in counting) for c in range(num_classes)],
                    frozenset(nfa.owner[s] for s in main if nfa.counting[s]),
                )
            shadow_rows = [row for s in shadow if (row := step[s]) is not None]
            # Classes whose threads move alike lead to one state: intern each once. The
            # per-class steps (columns, lookups) run in `zip`, `dict` and `map`: a lexer
            # has thousands of states times tens of classes.
            if len(main_rows) == 1 and not shadow_rows:
                row = main_rows[0]
                target_of = dict.fromkeys(row, -1)
                for t in target_of:
                    if t >= 0:
                        target_of[t] = intern(
                            closure([t]), frozenset(), p_ctx, p_uid, p_unless, pending
                        )
                table.rows[sid] = list(map(target_of.__getitem__, row))
                continue
            columns = list(zip(*main_rows, *shadow_rows, strict=True))
            split = len(main_rows)
            column_target = dict.fromkeys(columns, -1)
            for column in column_target:
                moved = [t for t in column[:split] if t >= 0]
                if moved:
                    moved_shadow = (
                        frozenset(nfa.closure([t for t in column[split:] if t >= 0]))
                        if shadow_rows
                        else frozenset()
                    )
                    column_target[column] = intern(
                        closure(moved), moved_shadow, p_ctx, p_uid, p_unless, pending
                    )
            table.rows[sid] = list(map(column_target.__getitem__, columns))
    return finish_lexer(table.built(class_of_byte), deadline)
