"""The byte NFA of lark terminals with ordered epsilon splits: the match preference the
lexer's leftmost-first subset construction (`lexer_from_nfa.py`) keeps.

A split's order is Python's `re` preference: alternatives left to right, greedy
repetition (one more iteration first). A terminal that already has an automaton is
embedded as one thread with longest match.
"""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.utf8 import utf8_sequences
from fsmcompile.errors import BudgetExceededError, UnsupportedFeatureError
from fsmcompile.index.cfg.lexer_limits import lexer_timeout
from fsmcompile.ir.nodes import (
    Alt,
    And,
    ByteSet,
    CharSet,
    Concat,
    Diff,
    Node,
    Repeat,
    normalize_ranges,
)
from fsmcompile.tables.byte_dfa import ByteDFA

BYTE, SPLIT, MATCH = 0, 1, 2
"""The kinds of NFA state: reads a byte range, splits by preference, ends a terminal."""
NFA_STATES_PER_STATE = 8
"""The NFA's share of the lexer's `max_states` budget, per lexer state."""


class OrderedNfa:
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
            raise lexer_timeout()
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
            return heads[0] if len(heads) == 1 else self.add(SPLIT, out=heads)
        if isinstance(node, ByteSet):
            return self.add(BYTE, node.ranges, [nxt]) if node.ranges else self.add(SPLIT)
        if isinstance(node, Concat):
            for item in reversed(node.items):
                nxt = self.build(item, nxt)
            return nxt
        if isinstance(node, Alt):
            return self.add(SPLIT, out=[self.build(item, nxt) for item in node.items])
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
        heads = [self.add(SPLIT) for _ in range(dfa.num_states)]
        moves: list[list[int]] = []
        for s in range(dfa.num_states):
            by_target: dict[int, list[tuple[int, int]]] = {}
            first_class: dict[int, int] = {}  # a class per target: its moves count alike
            for c, t in enumerate(trans[s].tolist()):
                if t >= 0:
                    by_target.setdefault(t, []).extend(class_ranges[c])
                    first_class.setdefault(t, c)
            outs = [
                self.add(BYTE, normalize_ranges(spans), [heads[t]])
                for t, spans in by_target.items()
            ]
            if starts is not None and s in starts:
                for out, t in zip(outs, by_target, strict=True):
                    self.counting[out] = first_class[t] in starts[s]
            moves.append(outs)
            self.out[heads[s]] = outs + ([nxt] if dfa.accepting[s] else [])
        return self.add(SPLIT, out=list(moves[0]))

    def _sequence(self, seq: tuple[tuple[int, int], ...], nxt: int) -> int:
        for lo, hi in reversed(seq):
            nxt = self.add(BYTE, ((lo, hi),), [nxt])
        return nxt

    def _repeat(self, node: Repeat, nxt: int) -> int:
        # Greedy, as Python's `*`, `+`, `{m,n}`: each split prefers one more iteration.
        if node.max is None:
            loop = self.add(SPLIT)
            self.out[loop] = [self.build(node.item, loop), nxt]
            entry = loop
        else:
            entry = nxt
            for _ in range(node.max - node.min):
                entry = self.add(SPLIT, out=[self.build(node.item, entry), nxt])
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
            if self.kind[s] == SPLIT:
                stack.extend(reversed(self.out[s]))
            else:
                out.append(s)
        return out


def nfa_byte_classes(nfa: OrderedNfa) -> tuple[npt.NDArray[np.int32], list[int]]:
    """class_of_byte for the cuts of every byte range, and one byte per class."""
    cuts = {0, 256}
    for kind, ranges in zip(nfa.kind, nfa.ranges, strict=True):
        if kind == BYTE:
            for lo, hi in ranges:
                cuts.update((lo, hi + 1))
    bounds = sorted(cuts)
    class_of_byte = np.zeros(256, dtype=np.int32)
    for c, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        class_of_byte[lo:hi] = c
    return class_of_byte, bounds[:-1]
