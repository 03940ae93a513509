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
merged across contexts (Moore minimization), except that a state labelled with an
`%ignore`d terminal keeps its context, since lark restarts in the same context after it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import numpy.typing as npt

from fsmcompile import _native
from fsmcompile.automaton.fragment import sorted_unique, unique_rows
from fsmcompile.automaton.utf8 import utf8_sequences
from fsmcompile.errors import BudgetExceededError, UnsupportedFeatureError
from fsmcompile.index.edge_rounds import EdgeRounds
from fsmcompile.ir.nodes import (
    Alt,
    And,
    ByteSet,
    CharSet,
    Concat,
    Diff,
    Node,
    Repeat,
    counted_at,
    normalize_ranges,
)
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.tables.lark_grammar import LarkGrammar, Terminal
from fsmcompile.tables.sorted_keys import positions_of

_BYTE, _SPLIT, _MATCH = 0, 1, 2
NFA_STATES_PER_STATE = 8

Countable = Callable[[ByteDFA, dict[int, frozenset[int]], int], bool]
"""(a counted terminal's unbounded automaton, its item starts from `item_starts`, the
bound) → whether the runtime may count the bound instead of the lexer unrolling it."""


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


class _Nfa:
    """A byte NFA with ordered epsilon splits (the order is the match preference)."""

    def __init__(self, max_states: int, deadline: float | None) -> None:
        self.kind: list[int] = []
        self.ranges: list[tuple[tuple[int, int], ...]] = []
        self.out: list[list[int]] = []
        self.owner: list[int] = []  # the terminal each state was built for
        self.counting: list[bool] = []  # a byte state that starts a counted item
        self.building = -1
        self.max_states = max_states
        self.deadline = deadline

    def add(
        self, kind: int, ranges: tuple[tuple[int, int], ...] = (), out: list[int] | None = None
    ) -> int:
        if len(self.kind) >= self.max_states:
            raise BudgetExceededError(
                f"the lexer NFA needs more than {self.max_states} states; "
                "raise max_states or bound the terminals' repetition counts",
                limit="max_states",
                value=self.max_states,
            )
        if (
            self.deadline is not None
            and len(self.kind) % 1024 == 0
            and time.monotonic() > self.deadline
        ):
            raise _lexer_timeout()
        self.kind.append(kind)
        self.owner.append(self.building)
        self.counting.append(False)
        self.ranges.append(ranges)
        self.out.append(out if out is not None else [])
        return len(self.kind) - 1

    def build(self, node: Node, nxt: int) -> int:
        """States for `node` followed by state `nxt`; returns the entry state."""
        if isinstance(node, CharSet):
            heads = [self._sequence(seq, nxt) for seq in utf8_sequences(node.ranges)]
            return heads[0] if len(heads) == 1 else self.add(_SPLIT, out=heads)
        if isinstance(node, ByteSet):
            return self.add(_BYTE, node.ranges, [nxt]) if node.ranges else self.add(_SPLIT)
        if isinstance(node, Concat):
            for item in reversed(node.items):
                nxt = self.build(item, nxt)
            return nxt
        if isinstance(node, Alt):
            return self.add(_SPLIT, out=[self.build(item, nxt) for item in node.items])
        if isinstance(node, Repeat):
            return self._repeat(node, nxt)
        if isinstance(node, (And, Diff)):
            raise UnsupportedFeatureError(
                "intersections and differences have no match preference in lark terminals"
            )
        raise TypeError(f"not an IR node: {node!r}")

    def embed(self, dfa: ByteDFA, nxt: int, starts: dict[int, frozenset[int]] | None = None) -> int:
        """States for the language of `dfa` (without the empty string) followed by `nxt`.

        A deterministic automaton has one thread, so the only preference is where to
        stop: every accepting state prefers reading on over `nxt`, which is longest match.
        `starts` (state → classes, from `item_starts`) marks the moves that count.
        """
        trans = dfa.transitions
        class_ranges: list[list[tuple[int, int]]] = [[] for _ in range(dfa.num_classes)]
        for byte, c in enumerate(dfa.class_of_byte.tolist()):
            spans = class_ranges[c]
            if spans and spans[-1][1] == byte - 1:
                spans[-1] = (spans[-1][0], byte)
            else:
                spans.append((byte, byte))
        heads = [self.add(_SPLIT) for _ in range(dfa.num_states)]
        moves: list[list[int]] = []
        for s in range(dfa.num_states):
            by_target: dict[int, list[tuple[int, int]]] = {}
            first_class: dict[int, int] = {}  # a class per target: its moves count alike
            for c, t in enumerate(trans[s].tolist()):
                if t >= 0:
                    by_target.setdefault(t, []).extend(class_ranges[c])
                    first_class.setdefault(t, c)
            outs = [
                self.add(_BYTE, normalize_ranges(spans), [heads[t]])
                for t, spans in by_target.items()
            ]
            if starts is not None and s in starts:
                for out, t in zip(outs, by_target, strict=True):
                    self.counting[out] = first_class[t] in starts[s]
            moves.append(outs)
            self.out[heads[s]] = outs + ([nxt] if dfa.accepting[s] else [])
        return self.add(_SPLIT, out=list(moves[0]))

    def _sequence(self, seq: tuple[tuple[int, int], ...], nxt: int) -> int:
        for lo, hi in reversed(seq):
            nxt = self.add(_BYTE, ((lo, hi),), [nxt])
        return nxt

    def _repeat(self, node: Repeat, nxt: int) -> int:
        # Greedy, as Python's `*`, `+`, `{m,n}`: each split prefers one more iteration.
        if node.max is None:
            loop = self.add(_SPLIT)
            self.out[loop] = [self.build(node.item, loop), nxt]
            entry = loop
        else:
            entry = nxt
            for _ in range(node.max - node.min):
                entry = self.add(_SPLIT, out=[self.build(node.item, entry), nxt])
        for _ in range(node.min):
            entry = self.build(node.item, entry)
        return entry

    def closure(self, states: list[int]) -> list[int]:
        """Non-split states reachable by epsilon moves, in preference order, first kept."""
        out: list[int] = []
        seen: set[int] = set()
        stack = list(reversed(states))
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            if self.kind[s] == _SPLIT:
                stack.extend(reversed(self.out[s]))
            else:
                out.append(s)
        return out


def _byte_classes(nfa: _Nfa) -> tuple[npt.NDArray[np.int32], list[int]]:
    """class_of_byte for the cuts of every byte range, and one byte per class."""
    cuts = {0, 256}
    for kind, ranges in zip(nfa.kind, nfa.ranges, strict=True):
        if kind == _BYTE:
            for lo, hi in ranges:
                cuts.update((lo, hi + 1))
    bounds = sorted(cuts)
    class_of_byte = np.zeros(256, dtype=np.int32)
    for c, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        class_of_byte[lo:hi] = c
    return class_of_byte, bounds[:-1]


def _moore_minimize(
    trans: npt.NDArray[np.int32], output: npt.NDArray[np.int64], deadline: float | None = None
) -> npt.NDArray[np.int64]:
    """Block id of each state: states with equal outputs along every path share a block.

    Rounds split blocks by each state's moves: the blocks of its targets, column by
    column. There are as many rounds as the longest string telling two states apart
    (thousands in a bounded string's chain), so a round rehashes only the states with a
    move into one that changed block in the round before (`EdgeRounds.coarsest`). Equal
    signatures always hash alike, so only a collision could merge states wrongly: the
    final partition is checked once to be closed under the moves (then it is the
    coarsest), and rebuilt by sorting whole signatures if not. Blocks are numbered by
    their first state, so the result does not depend on the rounds."""
    _, out = np.unique(output, return_inverse=True)
    out = out.reshape(-1).astype(np.int64)
    rounds = EdgeRounds(trans)
    _, cls = np.unique(
        rounds.coarsest(out, partial(_check_minimize_deadline, deadline)), return_inverse=True
    )
    cls = cls.reshape(-1).astype(np.int64)
    if not rounds.closed(out, cls, int(cls.max(initial=-1)) + 1):
        cls = _sorted_rounds(trans, out, deadline)
    _, first = np.unique(cls, return_index=True)
    rank = np.empty(first.shape[0], dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.shape[0])
    return rank[cls]


def _check_minimize_deadline(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise BudgetExceededError(
            "compile timed out while minimizing the lexer", limit="timeout_s", value=0.0
        )


def _sorted_rounds(
    trans: npt.NDArray[np.int32], out: npt.NDArray[np.int64], deadline: float | None
) -> npt.NDArray[np.int64]:
    """The exact refinement, sorting whole signature rows each round (after a hash
    collision)."""
    block, count = out, int(out.max(initial=-1)) + 1
    while True:
        _check_minimize_deadline(deadline)
        nxt = np.where(trans >= 0, block[np.maximum(trans, 0)], -1)
        signature = np.concatenate([block[:, None], nxt], axis=1).astype(np.int32)
        first, cls = unique_rows(signature)
        if first.shape[0] == count:
            return block
        block, count = cls.astype(np.int64), int(first.shape[0])


def _co_reachable(
    trans: npt.NDArray[np.int32], seeds: npt.NDArray[np.bool_]
) -> npt.NDArray[np.bool_]:
    """bool[L]: the states from which some seed state can be reached (seeds included),
    by a search backwards along the moves, each move read once."""
    source, _ = np.nonzero(trans >= 0)
    target = trans[trans >= 0].astype(np.int64)
    order = np.argsort(target, kind="stable")
    preds, by_target = source[order], target[order]
    reached = seeds.copy()
    frontier = np.flatnonzero(seeds)
    while frontier.shape[0]:
        found = preds[positions_of(by_target, frontier)[0]]
        found = found[~reached[found]]
        reached[found] = True
        frontier = sorted_unique(found)
    return reached


class _SharedCountedState(Exception):
    """A counted item starts in a lexer state another terminal's lexeme shares.

    Attributes:
        terminals: the counted terminals with a thread in that state.
    """

    def __init__(self, terminals: frozenset[int]) -> None:
        super().__init__(sorted(terminals))
        self.terminals = terminals


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
    (`_build_lexer_from_dfas`); others in Python on a byte NFA that keeps Python's
    alternation preference.

    Raises:
        BudgetExceededError: more than `max_states` states, or `deadline` passed.
        UnsupportedFeatureError: a terminal whose IR has no match preference.
    """
    build = _build_lexer
    if all(t.dfa is not None for t in grammar.terminals) and not any(
        c.unless for c in grammar.contexts
    ):
        build = _build_lexer_from_dfas
    unrolled: frozenset[int] = frozenset()
    while True:
        try:
            return build(grammar, max_states, deadline, countable, unrolled)
        except _SharedCountedState as exc:
            unrolled |= exc.terminals  # each round unrolls one more terminal at least


def item_starts(dfa: ByteDFA, node: Node) -> dict[int, frozenset[int]] | None:
    """For the automaton of `uncounted(node)`: state → the byte classes whose move starts
    an item of its counted repeat (`counted_at`), or None when a move cannot be told
    apart that way (a state both between items and inside one, or a class or target
    mixing both kinds).

    Walks the automaton alongside the item's own automaton from every state the items
    begin in; an item ends where the item automaton accepts (it is a prefix code).
    """
    from fsmcompile.automaton import build_dfa

    at = counted_at(node)
    assert at is not None
    cut, counted = at
    prefix = build_dfa(Concat(node.items[:cut] if isinstance(node, Concat) else ()))
    unit = build_dfa(counted.item)
    reps = _joint_bytes(dfa, prefix, unit)
    entry: set[int] = set()
    seen = {(0, 0)}
    frontier = [(0, 0)]
    while frontier:
        q, p = frontier.pop()
        if prefix.accepting[p]:
            entry.add(q)
        for b in reps:
            nq = int(dfa.transitions[q, dfa.class_of_byte[b]])
            np_ = int(prefix.transitions[p, prefix.class_of_byte[b]])
            if nq >= 0 and np_ >= 0 and (nq, np_) not in seen:
                seen.add((nq, np_))
                frontier.append((nq, np_))
    starts: dict[int, set[int]] = {}
    inside: set[int] = set()
    pairs = {(q, 0) for q in entry}
    frontier = list(pairs)
    while frontier:
        q, u = frontier.pop()
        if u == 0:
            starts.setdefault(q, set())  # between items: its moves are classes, not states
        else:
            inside.add(q)
        for b in reps:
            nq = int(dfa.transitions[q, dfa.class_of_byte[b]])
            nu = int(unit.transitions[u, unit.class_of_byte[b]])
            if nu < 0:
                if u != 0 and nq >= 0:
                    return None  # the automaton reads on where the item cannot
                continue
            if nq < 0:
                continue
            if u == 0:
                starts[q].add(int(dfa.class_of_byte[b]))
            if unit.accepting[nu]:
                if (unit.transitions[nu] >= 0).any():
                    return None  # not a prefix code
                nu = 0
            if (nq, nu) not in pairs:
                pairs.add((nq, nu))
                frontier.append((nq, nu))
    if inside & set(starts):
        return None
    for q, classes in starts.items():
        kinds: dict[int, bool] = {}
        for b in range(256):
            c = int(dfa.class_of_byte[b])
            t = int(dfa.transitions[q, c])
            if t < 0:
                continue
            if kinds.setdefault(t, c in classes) != (c in classes):
                return None
        # A class whose bytes split between starts and not would have been two classes
        # of a minimal automaton, so classes are uniform; targets were checked above.
    return {q: frozenset(c) for q, c in starts.items()}


def _joint_bytes(*dfas: ByteDFA) -> list[int]:
    """One byte per class of the automata's joint byte partition."""
    keys = zip(*(d.class_of_byte.tolist() for d in dfas), strict=True)
    return list({k: b for b, k in enumerate(keys)}.values())


@dataclass(slots=True)
class _LexerTable:
    """The lexer DFA a subset construction builds, state by state, and its finish.

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
        Elsewhere, `_SharedCountedState` names the `counted` terminals to unroll; `finish`
        checks that no move leads back into such a start.
        """
        if self.bounds[sid] < 0:
            if sid not in self.starts:
                raise _SharedCountedState(counted)
            self.shared_starts[sid] = counted
        self.char_starts[sid] = flags

    def add(self, label: int, restart: int, bound: int) -> int:
        """A new state with no moves yet; its id."""
        if len(self.rows) >= self.max_states:
            raise _too_many_states(self.max_states)
        self.rows.append([-1] * self.num_classes)
        self.labels.append(label)
        self.restart.append(restart)
        self.bounds.append(bound)
        return len(self.rows) - 1

    def add_start(self, start: int) -> None:
        """Record a context's start; -1 (a context with no terminals, only `$END`
        expected) gets a dead start state."""
        self.starts.append(start if start >= 0 else self.add(-1, -1, -1))

    def finish(
        self,
        class_of_byte: npt.NDArray[np.int32],
        deadline: float | None,
        *,
        trimmed: bool = False,
        minimize: bool = True,
    ) -> LexerAutomaton:
        """The automaton, trimmed (unless `trimmed` says every state is co-reachable
        already) and minimized (unless `minimize` is false)."""
        trans = np.array(self.rows, dtype=np.int32).reshape(len(self.rows), self.num_classes)
        if self.shared_starts:
            entered = np.isin(np.fromiter(self.shared_starts, dtype=np.int32), trans)
            if entered.any():
                counted = [t for ts in self.shared_starts.values() for t in ts]
                raise _SharedCountedState(frozenset(counted))
        char_start = np.zeros(trans.shape, dtype=np.bool_)
        for sid, flags in self.char_starts.items():
            char_start[sid] = flags
        return _finish(
            trans,
            class_of_byte,
            np.array(self.labels, dtype=np.int32),
            np.array(self.starts, dtype=np.int32),
            np.array(self.restart, dtype=np.int32),
            (np.array(self.bounds, dtype=np.int32), char_start),
            deadline,
            trimmed=trimmed,
            minimize=minimize,
        )


def _terminal_automaton(
    term: Terminal, countable: Countable | None, max_states: int, deadline: float | None
) -> tuple[ByteDFA, dict[int, frozenset[int]] | None, int]:
    """(automaton, item starts or None, bound or -1) a generated terminal is lexed by: a
    counted one that `countable` accepts keeps its unbounded automaton and its bound for
    the runtime to count; else the bound is unrolled, as any other repetition."""
    from fsmcompile.automaton import build_dfa

    assert term.dfa is not None
    counted = term.counted
    if counted is None:
        return term.dfa, None, -1
    assert counted.max is not None
    if countable is not None:
        moves = item_starts(term.dfa, term.node)
        if moves is not None and countable(term.dfa, moves, counted.max):
            return term.dfa, moves, counted.max
    return build_dfa(term.node, max_states=max_states, deadline=deadline), None, -1


def _build_lexer(
    grammar: LarkGrammar,
    max_states: int,
    deadline: float | None,
    countable: Countable | None,
    unrolled: frozenset[int] = frozenset(),
) -> LexerAutomaton:

    # NFA states are cheap next to DFA states (an embedded terminal automaton takes one
    # per state and target), so the NFA gets a larger share of the budget.
    nfa = _Nfa(NFA_STATES_PER_STATE * max_states, deadline)
    match_of_terminal: list[int] = []
    term_entry: list[int] = []
    bound_of: list[int] = []
    for t, term in enumerate(grammar.terminals):
        nfa.building = t
        match_of_terminal.append(nfa.add(_MATCH, out=[t]))
        bound_of.append(-1)
        if term.dfa is None:
            term_entry.append(nfa.build(term.node, match_of_terminal[t]))
            continue
        may_count = None if t in unrolled else countable
        dfa, moves, bound_of[t] = _terminal_automaton(term, may_count, max_states, deadline)
        term_entry.append(nfa.embed(dfa, match_of_terminal[t], moves))
    any_counted = any(b >= 0 for b in bound_of)
    class_of_byte, class_byte = _byte_classes(nfa)
    num_classes = len(class_byte)
    # Ranges are unions of whole classes (the classes are cut at every range bound), so a
    # range covers the classes from its low byte's to its high byte's.
    step: list[list[int] | None] = []
    class_at = class_of_byte.tolist()
    for k, r, o in zip(nfa.kind, nfa.ranges, nfa.out, strict=True):
        if k != _BYTE:
            step.append(None)
            continue
        targets = [-1] * num_classes
        for lo, hi in r:
            first, last = class_at[lo], class_at[hi]
            targets[first : last + 1] = [o[0]] * (last - first + 1)
        step.append(targets)
    is_match = [k == _MATCH for k in nfa.kind]
    ignored_terminal = grammar.ignored.tolist()
    ignored_thread = [ignored_terminal[t] for t in nfa.owner]
    unless_ids = {ctx.unless: i for i, ctx in enumerate(grammar.contexts)}

    # A DFA state depends on its context only while an ignored terminal is still possible
    # (lark restarts in that context after it) or a keyword may still rename the lexeme
    # (the context decides which): other states are shared by every context.
    states: dict[tuple[int, int, tuple[int, ...], frozenset[int]], int] = {}
    table = _LexerTable(num_classes, max_states)
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
                raise _lexer_timeout()
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
    return table.finish(class_of_byte, deadline)


def _build_lexer_from_dfas(
    grammar: LarkGrammar,
    max_states: int,
    deadline: float | None,
    countable: Countable | None,
    unrolled: frozenset[int] = frozenset(),
) -> LexerAutomaton:
    """`_build_lexer` for terminals that all have automata (generated grammars), without
    keywords: the subset construction runs on (terminal, automaton state) threads
    directly, with no byte NFA in between.

    A lexer state is the tuple of its threads in priority order, cut after the first
    accepting one (a lexeme of that terminal ends there, and lower-priority terminals
    lose to it). Each thread is one code: `base[t] + s`, or `entry[t]` for a nullable
    terminal's start, which may not end a lexeme before a byte. States are interned and
    visited in the order `_build_lexer` visits them, so both give the same automaton.

    The state loop runs in C (`native/lexer.c`; in Python it took 200-290 ms of a 2 s
    WashingtonPost compile); Python prepares the threads (`_Threads`) and raises what
    the walk stopped for.
    """
    automata: list[ByteDFA] = []
    bound_of: list[int] = []
    item_moves: list[dict[int, frozenset[int]] | None] = []
    for t, term in enumerate(grammar.terminals):
        may_count = None if t in unrolled else countable
        dfa, moves, bound = _terminal_automaton(term, may_count, max_states, deadline)
        automata.append(dfa)
        bound_of.append(bound)
        item_moves.append(moves)
    class_of_byte, class_byte = _dfa_byte_classes(automata)
    threads = _Threads.of(automata, item_moves, class_byte)
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
        raise _too_many_states(max_states)
    if stop == _STOP_DEADLINE:
        raise _lexer_timeout()
    if stop == _STOP_SHARED:
        assert isinstance(result, list)
        raise _SharedCountedState(frozenset(result))
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
    return _finish(
        np.frombuffer(rows, dtype=np.int32).reshape(num_states, num_classes),
        class_of_byte,
        np.frombuffer(labels, dtype=np.int32),
        np.frombuffer(starts, dtype=np.int32),
        np.frombuffer(restart, dtype=np.int32),
        (
            np.frombuffer(bounds, dtype=np.int32),
            np.frombuffer(char_starts, dtype=np.bool_).reshape(num_states, num_classes),
        ),
        deadline,
        trimmed=True,
        minimize=False,
    )


# How the C walk stopped (`native/lexer.c`): the error the Python raised there.
_STOP_STATES, _STOP_DEADLINE, _STOP_SHARED = 1, 2, 3


@dataclass(frozen=True, slots=True)
class _Threads:
    """The threads of `_build_lexer_from_dfas` as flat arrays for the C walk (T threads,
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
    ) -> _Threads:
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


def _too_many_states(max_states: int) -> BudgetExceededError:
    return BudgetExceededError(
        f"the lexer automaton needs more than max_states={max_states} states",
        limit="max_states",
        value=max_states,
    )


def _lexer_timeout() -> BudgetExceededError:
    return BudgetExceededError(
        "compile timed out while building the lexer", limit="timeout_s", value=0.0
    )


def _dfa_byte_classes(automata: list[ByteDFA]) -> tuple[npt.NDArray[np.int32], list[int]]:
    """`_byte_classes` of the NFA `_build_lexer` would embed these automata in: a class
    boundary wherever some state of some automaton moves differently on two adjacent
    bytes (its ranges per target end there)."""
    cut = np.zeros(257, dtype=np.bool_)
    cut[0] = cut[256] = True
    for dfa in automata:
        by_byte = dfa.transitions[:, dfa.class_of_byte]
        cut[1:256] |= (by_byte[:, 1:] != by_byte[:, :-1]).any(axis=0)
    bounds = np.flatnonzero(cut)
    class_of_byte = np.repeat(np.arange(bounds.shape[0] - 1), np.diff(bounds)).astype(np.int32)
    return class_of_byte, bounds[:-1].tolist()


def _finish(
    trans: npt.NDArray[np.int32],
    class_of_byte: npt.NDArray[np.int32],
    label: npt.NDArray[np.int32],
    starts: npt.NDArray[np.int32],
    restart: npt.NDArray[np.int32],
    counting: tuple[npt.NDArray[np.int32], npt.NDArray[np.bool_]],
    deadline: float | None,
    *,
    trimmed: bool = False,
    minimize: bool = True,
) -> LexerAutomaton:
    """Trim states that can never be cut into a lexeme (unless `trimmed`), then merge
    equal futures (and equal counting: bound and counted moves are part of a state's
    output), unless `minimize` is false: then every state is kept as it is."""
    if trimmed and not minimize:
        bound, char_start = counting
        return LexerAutomaton(
            transitions=np.ascontiguousarray(trans, dtype=np.int32),
            class_of_byte=class_of_byte,
            label=np.ascontiguousarray(label, dtype=np.int32),
            context_start=np.ascontiguousarray(starts, dtype=np.int32),
            restart_context=np.ascontiguousarray(restart, dtype=np.int32),
            char_bound=np.ascontiguousarray(bound, dtype=np.int32),
            char_start=np.ascontiguousarray(char_start),
        )
    if trimmed:
        live = np.ones(label.shape[0], dtype=np.bool_)
    else:
        live = label >= 0
        live[starts] = True  # a context's start stays even when no lexeme can begin there
        live = _co_reachable(trans, live)
        trans = np.where((trans >= 0) & live[np.maximum(trans, 0)], trans, -1).astype(np.int32)
    bound, char_start = counting
    output = (label.astype(np.int64) + 1) * 65536 + (restart.astype(np.int64) + 1)
    if (bound >= 0).any():
        _, moves = np.unique(np.packbits(char_start, axis=1), axis=0, return_inverse=True)
        _, output = np.unique(
            np.stack([output, bound, moves.reshape(-1)], axis=1), axis=0, return_inverse=True
        )
        output = output.reshape(-1).astype(np.int64)
    # Dead states all share one block, so mark them by an output no live state has.
    output = np.where(live, output, -1)
    block = _moore_minimize(trans, output, deadline)
    # Renumber blocks: live blocks first, in order of first state.
    order = np.argsort(np.where(live, 0, 1), kind="stable")
    new_id = np.full(int(block.max()) + 1, -1, dtype=np.int64)
    count = 0
    first = np.zeros(int(block.max()) + 1, dtype=np.int64)
    for s in order.tolist():
        if not live[s]:
            continue
        b = int(block[s])
        if new_id[b] < 0:
            new_id[b] = count
            first[count] = s
            count += 1
    reps = first[:count]
    mapped = np.where(trans[reps] >= 0, new_id[block[np.maximum(trans[reps], 0)]], -1)
    return LexerAutomaton(
        transitions=np.ascontiguousarray(mapped, dtype=np.int32),
        class_of_byte=class_of_byte,
        label=np.ascontiguousarray(label[reps], dtype=np.int32),
        context_start=new_id[block[starts]].astype(np.int32),
        restart_context=np.ascontiguousarray(restart[reps], dtype=np.int32),
        char_bound=np.ascontiguousarray(bound[reps], dtype=np.int32),
        char_start=np.ascontiguousarray(char_start[reps]),
    )


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


def lexer_shapes(lexer: LexerAutomaton, deadline: float | None = None) -> LexerShapes:
    """Merge lexer states whose labels agree along every path (ignore tags dropped).

    A lexer with no ignore tags and no counted items was minimized on its labels alone
    (`_finish`), so each of its states is a shape of its own: a generated grammar's
    lexer skips the second minimization.
    """
    trans = lexer.transitions
    if (lexer.restart_context < 0).all() and (lexer.char_bound < 0).all():
        block = np.arange(lexer.num_states, dtype=np.int64)
    else:
        block = _moore_minimize(trans, lexer.label.astype(np.int64), deadline)
    _, first, shape = np.unique(block, return_index=True, return_inverse=True)
    shape = shape.reshape(-1)
    reps = first
    shape_trans = np.where(trans[reps] >= 0, shape[np.maximum(trans[reps], 0)], -1)
    tag = lexer.restart_context.astype(np.int64).copy()
    while True:
        nxt = tag.copy()
        for c in range(trans.shape[1]):
            ok = trans[:, c] >= 0
            nxt[ok] = np.maximum(nxt[ok], tag[trans[ok, c]])
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
