"""Walk the vocabulary trie through a grammar's lexer, cutting lexemes the way lark does.

From each lexer state (the origin) every token's bytes are fed to the lexer automaton.
While the automaton lives the token stays inside the lexeme. Where a labelled state meets
a byte that kills it, lark cuts the lexeme there and the byte starts a new one. Where the
byte instead leads to an unlabelled live state (`1.` after the number `1`), lark's choice
depends on bytes not seen yet: it keeps the longer lexeme only if the automaton reaches
another labelled state before it dies. The walk follows both branches; the "cut" branch
carries the abandoned automaton state as a constraint that must die before it reaches a
label, and is dropped if it does not.

After a cut the next lexeme's context is the parser's business: it is the context of the
state the parser reaches by shifting the terminal. The walk tries every context some shift
of that terminal can lead to and records which one it assumed, so the parser can check;
contexts the next byte takes to the same lexer state are tried once, as a set
(`ContextSets`). A token's outcome is thus (terminals emitted with the context or context
set assumed after each, lexer state at the end, constraints still open); `seq` ids name
the emitted sequences.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import sorted_unique
from fsmcompile.errors import BudgetExceededError
from fsmcompile.index.cfg.lexer import LexerAutomaton, LexerShapes
from fsmcompile.index.cfg.regions import MAX_SERVED_DEPTH, Entries, RegionServer
from fsmcompile.index.dfa.levels import LivenessLevels, liveness_levels
from fsmcompile.tables.byte_dfa import ByteDFA, classes_by_first_byte
from fsmcompile.tables.int_columns import extend_column, int_column
from fsmcompile.tables.sorted_keys import concatenated_ranges
from fsmcompile.vocabulary.trie import TokenTrie

Emitted = tuple[tuple[int, int], ...]
"""Terminals a token completes, each with the lexer context assumed after it."""
Packed = TypeVar("Packed", int, npt.NDArray[np.int64])
"""One packed sequence key (`SequenceTable.key`), or an array of them."""


_MERGE_MIN = 4096
"""New sequences a walk keeps in the dictionary before the first merge."""


@dataclass(slots=True)
class SequenceTable:
    """Interned emitted sequences: id 0 is the empty one, each other id extends a parent.

    A sequence is found by one integer packing (parent, terminal, context), `key`: a walk
    looks up millions (3.6 million, 0.6 million of them new, for a WashingtonPost
    schema). Most lookups are answered by one `np.searchsorted` over the sorted keys of
    the sequences up to `_merged`; only the keys of newer sequences (and single lookups,
    remembered) sit in a dictionary, merged into the sorted columns once it holds a quarter
    as many. A dictionary of every key cost that walk 0.7 s of lookups, and a runtime
    table 0.2 s to rebuild it from the stored columns.
    """

    num_terminals: int
    num_contexts: int
    parent: array[int] = field(default_factory=lambda: int_column([-1]))
    terminal: array[int] = field(default_factory=lambda: int_column([-1]))
    context: array[int] = field(default_factory=lambda: int_column([-1]))
    _sorted_keys: array[int] = field(default_factory=lambda: int_column([]))
    _sorted_ids: array[int] = field(default_factory=lambda: int_column([]))
    _merged: int = 1
    _ids: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        parent: npt.NDArray[np.integer],
        terminal: npt.NDArray[np.integer],
        context: npt.NDArray[np.integer],
        *,
        num_terminals: int,
        num_contexts: int,
    ) -> SequenceTable:
        """The table holding these sequences under their ids (id 0 is the empty one), as
        an index stores them."""
        columns = (int_column(parent), int_column(terminal), int_column(context))
        table = cls(num_terminals, num_contexts, *columns)
        table._merge()
        return table

    def key(self, seq: Packed, terminal: Packed, context: Packed) -> Packed:
        """The packed (parent, terminal, context) that names a sequence, of one or of
        whole arrays of them (int64: the walk's keys stay far below 2**63)."""
        return (seq * self.num_terminals + terminal) * self.num_contexts + context

    def extend(self, seq: int, terminal: int, context: int) -> int:
        """The id of `seq` followed by `terminal` with lexer `context` after it (one at a
        time, as the runtime asks: a dictionary hit after the first lookup)."""
        key = self.key(seq, terminal, context)
        found = self._ids.get(key)
        if found is None:
            found = self._sorted_id(key)
            if found < 0:
                found = len(self.parent)
                self.parent.append(seq)
                self.terminal.append(terminal)
                self.context.append(context)
            self._ids[key] = found
        return found

    def extend_keys(self, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The id of each sequence of distinct packed `keys` (`key`), new ones added."""
        found = self._sorted_ids_of(keys)
        missing = np.flatnonzero(found < 0)
        if missing.shape[0] and self._ids:
            found[missing] = np.fromiter(
                map(self._ids.get, keys[missing].tolist(), repeat(-1)),
                dtype=np.int64,
                count=missing.shape[0],
            )
            missing = missing[found[missing] < 0]
        if missing.shape[0]:
            first = len(self.parent)
            found[missing] = ids = np.arange(first, first + missing.shape[0], dtype=np.int64)
            added = keys[missing]
            rest, context = np.divmod(added, self.num_contexts)
            seq, terminal = np.divmod(rest, self.num_terminals)
            extend_column(self.parent, seq)
            extend_column(self.terminal, terminal)
            extend_column(self.context, context)
            if len(self.parent) - self._merged > max(_MERGE_MIN, len(self._sorted_keys) // 4):
                self._merge()
            else:
                self._ids.update(zip(added.tolist(), ids.tolist(), strict=True))
        return found

    def _sorted_id(self, key: int) -> int:
        """The id of `key` among the merged sequences, or -1 (a bisection of the array:
        half the cost of a scalar `np.searchsorted`, on the runtime's one-at-a-time path)."""
        keys = self._sorted_keys
        at = bisect_left(keys, key)
        if at < len(keys) and keys[at] == key:
            return self._sorted_ids[at]
        return -1

    def _sorted_ids_of(self, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """int64 copy: the id of each key among the merged sequences, or -1."""
        if not self._sorted_keys:
            return np.full(keys.shape[0], -1, dtype=np.int64)
        sorted_keys = np.frombuffer(self._sorted_keys, dtype=np.int64)
        at = np.minimum(np.searchsorted(sorted_keys, keys), sorted_keys.shape[0] - 1)
        ids = np.frombuffer(self._sorted_ids, dtype=np.int64)
        return np.where(sorted_keys[at] == keys, ids[at], -1)

    def _merge(self) -> None:
        """Sort every sequence's key into the lookup arrays; the dictionary starts over."""
        start, stop = self._merged, len(self.parent)
        if stop > start:
            ids = np.arange(start, stop, dtype=np.int64)
            columns = (self.parent, self.terminal, self.context)
            keys = self.key(*(np.frombuffer(c, dtype=np.int64)[start:stop] for c in columns))
            keys = np.concatenate([np.frombuffer(self._sorted_keys, dtype=np.int64), keys])
            ids = np.concatenate([np.frombuffer(self._sorted_ids, dtype=np.int64), ids])
            order = np.argsort(keys, kind="stable")
            self._sorted_keys, self._sorted_ids = int_column(keys[order]), int_column(ids[order])
            self._merged = stop
        self._ids = {}


CONTEXT_SET_ROOM = 1 << 20
"""Context-set ids a walk may add past the contexts themselves (a bound the packed
sequence keys rely on; a grammar meets a few thousand at most)."""


class ContextSets:
    """Sets of lexer contexts a sequence may have assumed after its last terminal.

    Id k < `num_contexts` is the context k alone; larger ids name interned sets. After a
    cut the walk tries each context the parser may be in next, and contexts whose start
    state the next byte takes to the same lexer state have identical futures: one entry
    stands for all of them, and the parser's check becomes membership. The 148 contexts
    that may follow `}` in a WashingtonPost schema made a million sequences of one entry
    each. Sets stay single contexts in grammars with ignored terminals (`merge` false),
    whose cut restarts in the context the sequence assumed.
    """

    def __init__(
        self,
        next_contexts: list[list[int]],
        num_contexts: int,
        num_classes: int,
        *,
        merge: bool = True,
    ) -> None:
        self.num_contexts = num_contexts
        self.num_classes = num_classes
        self.merge = merge
        self.members: list[tuple[int, ...]] = []
        self._ids: dict[tuple[int, ...], int] = {}
        self._fan_count = np.asarray([len(c) for c in next_contexts], dtype=np.int64)
        self._fan_start = np.concatenate([[0], np.cumsum(self._fan_count)[:-1]]).astype(np.int64)
        self._fan_flat = np.asarray([c for cs in next_contexts for c in cs], dtype=np.int64)
        # Per (terminal, byte class) split so far: where its (state, set) pairs start in
        # the flat columns (-1: not split yet), and how many there are.
        self._first = np.full(len(next_contexts) * num_classes, -1, dtype=np.int64)
        self._count = np.zeros(len(next_contexts) * num_classes, dtype=np.int64)
        self._state = int_column([])
        self._set = int_column([])

    @property
    def capacity(self) -> int:
        """The id bound a `SequenceTable` packs its keys with."""
        return self.num_contexts + CONTEXT_SET_ROOM if self.merge else self.num_contexts

    def columns(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """(start int64[S+1], context int32[...]): the interned sets as an index stores
        them, set k's contexts at context[start[k]:start[k + 1]]."""
        sizes = [len(members) for members in self.members]
        start = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
        flat = [c for members in self.members for c in members]
        return start, np.asarray(flat, dtype=np.int32)

    def intern(self, contexts: tuple[int, ...]) -> int:
        """The id of a sorted tuple of contexts (a single context is its own id)."""
        if len(contexts) == 1:
            return contexts[0]
        found = self._ids.get(contexts)
        if found is None:
            if len(self.members) >= CONTEXT_SET_ROOM:
                raise BudgetExceededError(
                    "too many distinct lexer-context sets", limit="context_sets", value=0.0
                )
            found = self._ids[contexts] = self.num_contexts + len(self.members)
            self.members.append(contexts)
        return found

    def split(
        self,
        terminal: npt.NDArray[np.int64],
        byte_class: npt.NDArray[np.int64],
        context_start: npt.NDArray[np.int32],
        transitions: npt.NDArray[np.int64],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(edge, lexer state, context-set id) per cut edge i (a cut of `terminal[i]` whose
        next byte is of `byte_class[i]`) and distinct live state that byte starts in the
        contexts that may follow the terminal; each pair is split once per walk."""
        pair = terminal * self.num_classes + byte_class
        missing = sorted_unique(pair[self._first[pair] < 0])
        if missing.shape[0]:
            self._split_new(missing, context_start, transitions)
        count = self._count[pair]
        edge = np.repeat(np.arange(pair.shape[0], dtype=np.int64), count)
        at = np.repeat(self._first[pair], count) + concatenated_ranges(count)
        state = np.frombuffer(self._state, dtype=np.int64)[at]
        return edge, state, np.frombuffer(self._set, dtype=np.int64)[at]

    def _split_new(
        self,
        pairs: npt.NDArray[np.int64],
        context_start: npt.NDArray[np.int32],
        transitions: npt.NDArray[np.int64],
    ) -> None:
        terminal, byte_class = np.divmod(pairs, self.num_classes)
        fan = self._fan_count[terminal]
        owner = np.repeat(np.arange(pairs.shape[0], dtype=np.int64), fan)
        ctx = self._fan_flat[np.repeat(self._fan_start[terminal], fan) + concatenated_ranges(fan)]
        state = transitions[context_start[ctx], byte_class[owner]]
        live = state >= 0
        owner, ctx, state = owner[live], ctx[live], state[live]
        order = np.lexsort((ctx, state, owner))
        owner, ctx, state = owner[order], ctx[order], state[order]
        if self.merge:  # one set per (pair, state); singletons are their context
            starts_set = np.ones(owner.shape[0], dtype=np.bool_)
            starts_set[1:] = (owner[1:] != owner[:-1]) | (state[1:] != state[:-1])
            heads = np.flatnonzero(starts_set)
            bounds = np.append(heads, owner.shape[0]).tolist()
            members = ctx.tolist()
            ids = [self.intern(tuple(members[lo:hi])) for lo, hi in itertools.pairwise(bounds)]
            owner, state, ctx = owner[heads], state[heads], np.asarray(ids, dtype=np.int64)
        self._count[pairs] = np.bincount(owner, minlength=pairs.shape[0])
        self._first[pairs] = len(self._state) + np.concatenate(
            [[0], np.cumsum(self._count[pairs])[:-1]]
        )
        extend_column(self._state, state)
        extend_column(self._set, ctx)


@dataclass(slots=True)
class ConstraintTable:
    """Interned constraint sets (lexer states that must die unlabelled); id 0 is empty."""

    sets: list[frozenset[int]] = field(default_factory=lambda: [frozenset()])
    _ids: dict[frozenset[int], int] = field(default_factory=lambda: {frozenset(): 0})

    def intern(self, states: frozenset[int]) -> int:
        found = self._ids.get(states)
        if found is None:
            found = len(self.sets)
            self._ids[states] = found
            self.sets.append(states)
        return found


def step_constraints(
    lexer: LexerAutomaton, states: frozenset[int], byte_class: int
) -> frozenset[int] | None:
    """The constraint set after one byte; None when a constraint reached a label (fail)."""
    return _step_constraints(lexer.transitions, lexer.label, states, byte_class)


def _step_constraints(
    trans: npt.NDArray[np.int32],
    label: npt.NDArray[np.int32],
    states: frozenset[int],
    byte_class: int,
) -> frozenset[int] | None:
    out = []
    for c in states:
        nxt = int(trans[c, byte_class])
        if nxt >= 0:
            if label[nxt] >= 0:
                return None
            out.append(nxt)
    return frozenset(out)


def walk_bytes(
    lexer: LexerAutomaton,
    next_contexts: list[list[int]],
    ignored: list[bool],
    state: int,
    constraints: frozenset[int],
    data: bytes,
) -> list[tuple[Emitted, int, frozenset[int], int, int]]:
    """Every outcome of feeding `data` to the lexer from `state` (the slow, obvious walk).

    The definition: the runtime advances with its C twin (`Parser.walk_bytes`, tested
    against this), and every mask the runtime builds from the vectorized walk must agree
    with it token for token (the grammar tests check that at every step). Returns
    (emitted, end state, open constraints, grown, fresh) tuples, deduplicated: `grown`
    counts the items (`LexerAutomaton.char_start`) added to the lexeme `state` is in,
    `fresh` those of the lexeme the walk ends in when that is a later one (-1 when it is
    the same).
    """
    trans = lexer.transitions
    label = lexer.label
    starts = lexer.char_start
    Outcome = tuple[Emitted, int, frozenset[int], int, int]
    configs: set[Outcome] = {((), state, constraints, 0, -1)}
    for byte in data:
        cls = int(lexer.class_of_byte[byte])
        nxt_configs: set[Outcome] = set()
        for emitted, q, cons, grown, fresh in configs:
            stepped = step_constraints(lexer, cons, cls) if cons else cons
            if stepped is None:
                continue
            nq = int(trans[q, cls])
            if nq >= 0:
                item = int(starts[q, cls])
                if fresh < 0:
                    nxt_configs.add((emitted, nq, stepped, grown + item, -1))
                else:
                    nxt_configs.add((emitted, nq, stepped, grown, fresh + item))
            lab = int(label[q])
            if lab < 0 or (nq >= 0 and label[nq] >= 0):
                continue
            cut_cons = stepped | {nq} if nq >= 0 else stepped
            restarts = (
                [(emitted, int(lexer.context_start[lexer.restart_context[q]]))]
                if ignored[lab]
                else [
                    (emitted + ((lab, ctx),), int(lexer.context_start[ctx]))
                    for ctx in next_contexts[lab]
                ]
            )
            for after, start in restarts:
                fresh_state = int(trans[start, cls])
                if fresh_state >= 0:
                    item = int(starts[start, cls])
                    nxt_configs.add((after, fresh_state, cut_cons, grown, item))
        configs = nxt_configs
        if not configs:
            break
    return sorted(configs, key=lambda c: (c[0], c[1], sorted(c[2]), c[3], c[4]))


@dataclass(frozen=True, slots=True, eq=False)
class WalkRecords:
    """Token outcomes per origin, as parallel arrays (E records).

    Attributes:
        node: int64[E], the trie node where the token(s) end.
        state: int64[E], the lexer shape at the token's end.
        seq: int64[E], the emitted sequence id.
        origins: uint64[E, ceil(L/64)], which origin lexer states have this outcome.
    """

    node: npt.NDArray[np.int64]
    state: npt.NDArray[np.int64]
    seq: npt.NDArray[np.int64]
    origins: npt.NDArray[np.uint64]


def _or_runs(
    bits: npt.NDArray[np.uint64], order: npt.NDArray[np.int64], starts: npt.NDArray[np.int64]
) -> npt.NDArray[np.uint64]:
    """Rows `bits[order]` ORed over each run that begins at `starts`.

    Most runs hold one entry (a walk merges rarely when few states share a shape), so
    only the rows of longer runs are gathered and reduced: with wide origin bitsets,
    copying every row twice was most of the walk.
    """
    if order.shape[0] == starts.shape[0]:
        return np.take(bits, order, axis=0)
    out = np.take(bits, order[starts], axis=0)
    lengths = np.diff(np.append(starts, order.shape[0]))
    multi = np.flatnonzero(lengths > 1)
    members = order[np.repeat(lengths > 1, lengths)]
    local_starts = np.concatenate([[0], np.cumsum(lengths[multi])[:-1]])
    out[multi] = np.bitwise_or.reduceat(np.take(bits, members, axis=0), local_starts, axis=0)
    return out


def _picked(
    where: npt.NDArray[np.bool_] | npt.NDArray[np.int64], *arrays: npt.NDArray[Any]
) -> tuple[npt.NDArray[Any], ...]:
    """The rows of each array that `where` picks (a mask or indices), by one `np.take`
    each: on a level's entries a boolean index cost 4-5x as much (35 against 7 µs per
    30k int64, 190 against 40 for their eight-word bitsets)."""
    index = np.flatnonzero(where) if where.dtype == np.bool_ else where
    return tuple(np.take(a, index, axis=0) for a in arrays)


def _equal_runs(
    columns: tuple[npt.NDArray[np.int64], ...],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(order, starts): the rows of non-negative int64 `columns` in lexicographic order
    (stable), and where each run of equal rows begins in that order.

    When the columns' ranges fit, each row is packed into one int64 first, so the sort
    and the run boundaries read one column: stacking the columns into rows, gathering
    them in order and comparing them was a fifth of a typical vocabulary walk.
    """
    spans = [float(c.max(initial=0)) + 1 for c in columns]
    if float(np.prod(spans)) < 2.0**62:
        packed = columns[0].copy()
        for column, span in zip(columns[1:], spans[1:], strict=True):
            packed *= int(span)
            packed += column
        order = np.argsort(packed, kind="stable")
        ordered = packed[order]
        differs = ordered[1:] != ordered[:-1]
    else:
        keys = np.stack(columns, axis=1)
        order = np.lexsort(keys.T[::-1])
        ordered_rows = keys[order]
        differs = np.any(ordered_rows[1:] != ordered_rows[:-1], axis=1)
    starts = np.flatnonzero(np.concatenate([[True], differs])) if order.shape[0] else order
    return order, starts


def _root_live_edges(
    trie: TokenTrie,
    class_of: npt.NDArray[np.int64],
    trans: npt.NDArray[np.int64],
    state: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(entry, root child, byte class) of each first-level edge whose byte the entry's
    shape takes, by entry, then class, then byte.

    Every first-level entry sits at the root, whose children are nearly every byte, and a
    lexeme takes few of them (in a book-flight schema, 8,180 of 64,768 edges lived). The
    root's children are sorted by class once, and each live (entry, class) pair takes
    its class's slice, so dead edges are never made.
    """
    _, children = trie.children(np.zeros(1, dtype=np.int64))
    child_class = class_of[trie.node_byte[children]]
    order = np.argsort(child_class, kind="stable")
    children, child_class = children[order], child_class[order]
    class_start = np.searchsorted(child_class, np.arange(trans.shape[1] + 1))
    entry, live_class = np.nonzero(trans[state] >= 0)
    counts = class_start[live_class + 1] - class_start[live_class]
    at = np.repeat(class_start[live_class], counts) + concatenated_ranges(counts)
    return np.repeat(entry, counts).astype(np.int64), children[at], child_class[at]


MAX_LEVEL_BYTES = 4 << 30
"""Most bytes of origin bitsets one trie level may gather (its edges times the bitset
width). Past this, each numpy step of the level would take seconds, run past any deadline
and hold most of the machine's memory: tens of thousands of lexer states come from long
bounded strings unrolled inside terminals."""


def _check_deadline(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise BudgetExceededError(
            "compile timed out while walking the vocabulary", limit="timeout_s", value=0.0
        )


def _check_level_size(edges: int, words: int, states: int) -> None:
    size = edges * words * 8
    if size > MAX_LEVEL_BYTES:
        raise BudgetExceededError(
            f"the vocabulary walk would gather {size / 2**30:.1f} GiB of lexer-state sets "
            f"at one level ({states:,} lexer states wide, {edges:,} trie edges; at most "
            f"{MAX_LEVEL_BYTES >> 30} GiB): simplify the spec; each distinct bounded string "
            "or repeat costs lexer states per unit of its bound",
            limit="walk_bytes",
            value=float(size),
        )


def walk_grammar_tokens(
    shapes: LexerShapes,
    trie: TokenTrie,
    next_contexts: list[list[int]],
    ignored: list[bool],
    sequences: SequenceTable,
    constraints: ConstraintTable,
    deadline: float | None = None,
    *,
    levels: LivenessLevels | None = None,
    regions: RegionServer | None = None,
    origins: npt.NDArray[np.int64] | None = None,
    context_sets: ContextSets | None = None,
) -> WalkRecords:
    """Outcomes of every text token from every lexer state, level by level through the trie.

    Outcomes where a labelled origin's lexeme ends right before the token (its first byte
    kills the lexeme) are left out: they are the outcomes from the next context's start
    state, prefixed with that terminal, and the runtime composes them.

    Frontier entries are (node, shape, seq, constraint set) with a bitset of the origins
    (lexer states) that reach them, so origins that converge (every state inside a string
    reaches the same state on a letter) are walked once. When an ignored lexeme that began
    at the origin is cut, the bitset is split by the origins' contexts. Cost grows with
    distinct live entries. Inside-lexeme steps are numpy; cuts and constraints go through
    small Python loops over distinct (sequence, terminal, context) and (constraint set,
    byte class) pairs only. With `levels`, at each trie node a shape stands in for every
    shape equivalent to it at the node's height, so the levels of a bounded string merge;
    records then name that shape, which has the same exit set. With `origins`, only those
    lexer states are walked, bit i of a bitset standing for `origins[i]`.
    """
    if origins is None:
        origins = np.arange(shapes.of_state.shape[0], dtype=np.int64)
    of_state = shapes.of_state[origins]
    context_tag = shapes.context_tag[origins]
    num_origins = int(origins.shape[0])
    words = (num_origins + 63) // 64
    trans = shapes.transitions.astype(np.int64)
    label = shapes.label.astype(np.int64)
    has_label = np.append(label >= 0, False)  # index -1 (dead) maps to False
    # Per-node facts are read per edge (`class_of[node_byte[child]]`), not mapped over the
    # whole trie first: that cost ~2 ms a walk, more than the levels below depth 4.
    class_of = shapes.class_of_byte.astype(np.int64)
    node_byte = trie.node_byte
    is_token_node = trie.token_node_flags()
    ignored_arr = np.asarray(ignored + [False], dtype=np.bool_)
    num_terminals = len(next_contexts)
    num_contexts = int(shapes.context_start.shape[0])
    num_classes = int(trans.shape[1])
    if context_sets is None:
        context_sets = ContextSets(next_contexts, num_contexts, num_classes, merge=False)
    assert not (context_sets.merge and any(ignored)), "an ignored cut needs one context"
    assert (context_sets.num_contexts, context_sets.num_classes) == (num_contexts, num_classes)
    assert (sequences.num_terminals, sequences.num_contexts) == (
        num_terminals,
        context_sets.capacity,
    )
    onehot = np.zeros((num_origins, words), dtype=np.uint64)
    idx = np.arange(num_origins)
    onehot[idx, idx // 64] = np.left_shift(np.uint64(1), (idx % 64).astype(np.uint64))
    context_bits = np.zeros((num_contexts, words), dtype=np.uint64)
    for k in range(num_contexts):
        context_bits[k] = (
            np.bitwise_or.reduce(onehot[context_tag == k], axis=0)
            if (context_tag == k).any()
            else 0
        )

    # Per trie node, the shapes a walk may stand for one another there (`walk_levels`).
    if levels is None:
        canon = np.arange(shapes.num_shapes, dtype=np.int32)[None, :]
        row_of_height = np.zeros(1, dtype=np.int64)
    else:
        canon = levels.canon
        row_of_height = levels.row_of_height
    top_height = row_of_height.shape[0] - 1

    def canon_row(nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return row_of_height[np.minimum(trie.node_height[nodes], top_height)]

    root = np.zeros(1, dtype=np.int64)
    start_shape = canon[canon_row(root)[0], of_state] if trie.num_nodes else of_state
    order = np.argsort(start_shape, kind="stable")
    starts0 = np.flatnonzero(np.concatenate([[True], np.diff(start_shape[order]) != 0]))
    state = start_shape[order][starts0].astype(np.int64)
    bits = _or_runs(onehot, order, starts0)
    seq = np.zeros(state.shape[0], dtype=np.int64)
    node = np.zeros(state.shape[0], dtype=np.int64)
    cid = np.zeros(state.shape[0], dtype=np.int64)
    pending: dict[int, list[Entries]] = {}  # served entries' exits, by trie depth
    depth_of = trie.node_depths() if regions is not None else None

    def served(depth: int) -> npt.NDArray[np.bool_]:
        """Hand the frontier's region entries to `regions`; returns which they were."""
        if regions is None or depth_of is None or depth > MAX_SERVED_DEPTH:
            return np.zeros(state.shape[0], dtype=np.bool_)
        picked: npt.NDArray[np.bool_] = (regions.role_of[state] >= 0) & (cid == 0)
        if picked.any():
            left = regions.serve(depth, *_picked(picked, node, state, seq, bits))
            left_depth = depth_of[left.nodes]
            for d in sorted_unique(left_depth).tolist():
                at = left_depth == d
                pending.setdefault(d, []).append(
                    Entries(left.nodes[at], left.states[at], left.seq[at], left.bits[at])
                )
        return picked

    kept = ~served(0)
    state, bits, node, seq, cid = _picked(kept, state, bits, node, seq, cid)
    recorded: list[tuple[npt.NDArray[Any], ...]] = []  # (node, state, seq, bits) per level
    first_level = True
    depth = 0

    while state.shape[0] or any(d > depth for d in pending):
        depth += 1
        _check_deadline(deadline)
        # An edge lives on if the lexeme goes on, or ends (a cut) and the byte starts the
        # next one. At the first level only the former: a lexeme that ends exactly where
        # the token starts has the token read from the next context's start, whose
        # outcomes are recorded there already. The runtime composes those
        # (GrammarIndex.kill_masks); walking them again from every labelled origin would
        # repeat most of the vocabulary per terminal. Dead edges are dropped before the
        # rest of the step; at the first level they are never made.
        if first_level and trie.num_nodes:
            parent, child, cls = _root_live_edges(trie, class_of, trans, state)
        else:
            parent, child = trie.children(node)
            cls = class_of[node_byte[child]]
        _check_level_size(child.shape[0], words, num_origins)
        if child.shape[0] == 0 and not any(d >= depth for d in pending):
            break
        q = state[parent]
        nq = trans[q, cls]
        lab = label[q]
        if not first_level:
            live = np.flatnonzero((nq >= 0) | (lab >= 0))
            parent, child, cls, q, nq, lab = _picked(live, parent, child, cls, q, nq, lab)
        first_level = False
        cut = (lab >= 0) & ~has_label[nq]
        fork = np.where(cut & (nq >= 0), nq, -1)

        # Parts (edge indices): stay in the lexeme, cut after an ignored terminal, cut after
        # a parsed one (once per context the parser may be in next).
        stay = np.flatnonzero(nq >= 0)
        part_edge = [stay]
        part_state = [nq[stay]]
        part_seq = [seq[parent[stay]]]
        part_fork = [np.full(stay.shape[0], -1, dtype=np.int64)]
        # Where each entry's origin bitset is: an index into `bits`, then into `extra`.
        part_src = [parent[stay]]
        extra: list[npt.NDArray[np.uint64]] = []
        num_rows = bits.shape[0]
        is_ign = cut & ignored_arr[lab]
        known = np.flatnonzero(is_ign & (seq[parent] > 0))
        if known.shape[0]:
            # The context each known sequence ended in (looked up per distinct sequence:
            # the table holds every sequence of the walk so far).
            uniq, inv = np.unique(seq[parent[known]], return_inverse=True)
            ends_in = sequences.context
            ctx = np.asarray([ends_in[s] for s in uniq.tolist()], dtype=np.int64)[inv.reshape(-1)]
            part_edge.append(known)
            part_state.append(trans[shapes.context_start[ctx], cls[known]])
            part_seq.append(seq[parent[known]])
            part_fork.append(fork[known])
            part_src.append(parent[known])
        at_origin = np.flatnonzero(is_ign & (seq[parent] == 0))
        for k in range(num_contexts) if at_origin.shape[0] else ():
            split = bits[parent[at_origin]] & context_bits[k]
            some = split.any(axis=1)
            if not some.any():
                continue
            sel = at_origin[some]
            part_edge.append(sel)
            part_state.append(trans[shapes.context_start[k], cls[sel]])
            part_seq.append(seq[parent[sel]])
            part_fork.append(fork[sel])
            part_src.append(np.arange(num_rows, num_rows + sel.shape[0]))
            extra.append(split[some])
            num_rows += sel.shape[0]
        is_tok = np.flatnonzero(cut & ~ignored_arr[lab])
        if is_tok.shape[0]:
            # Each cut edge once per set of contexts the parser may be in after its
            # terminal whose start the byte takes to one state (`ContextSets.split`).
            edge, fresh, ctx = context_sets.split(
                lab[is_tok], cls[is_tok], shapes.context_start, trans
            )
            sel = is_tok[edge]
            keys = sequences.key(seq[parent[sel]], lab[sel], ctx)
            uniq, inv = np.unique(keys, return_inverse=True)
            new = sequences.extend_keys(uniq)
            part_edge.append(sel)
            part_state.append(fresh)
            part_seq.append(new[inv.reshape(-1)])
            part_fork.append(fork[sel])
            part_src.append(parent[sel])
        _check_deadline(deadline)  # each step of a wide level can take seconds
        e_edge = np.concatenate(part_edge)
        e_state = np.concatenate(part_state)
        e_seq = np.concatenate(part_seq)
        e_fork = np.concatenate(part_fork)
        e_src = np.concatenate(part_src)
        keep = e_state >= 0
        e_edge, e_state, e_seq, e_fork, e_src = _picked(keep, e_edge, e_state, e_seq, e_fork, e_src)
        e_cid = cid[parent[e_edge]]
        # Constraints: step the open ones with this byte, add the fork's new one.
        busy = (e_cid != 0) | (e_fork >= 0)
        if busy.any():
            b_idx = np.flatnonzero(busy)
            key = np.stack([e_cid[b_idx], cls[e_edge[b_idx]], e_fork[b_idx]], axis=1)
            uniq, inv = np.unique(key, axis=0, return_inverse=True)
            mapped = np.empty(uniq.shape[0], dtype=np.int64)
            for i, (c_id, c_cls, c_fork) in enumerate(uniq.tolist()):
                stepped = _step_constraints(
                    shapes.transitions, shapes.label, constraints.sets[c_id], c_cls
                )
                if stepped is None:
                    mapped[i] = -1
                    continue
                if c_fork >= 0:
                    stepped = stepped | {c_fork}
                mapped[i] = constraints.intern(stepped)
            e_cid = e_cid.copy()
            e_cid[b_idx] = mapped[inv.reshape(-1)]
            alive = e_cid >= 0
            e_edge, e_state, e_seq, e_cid, e_src = _picked(
                alive, e_edge, e_state, e_seq, e_cid, e_src
            )
        _check_deadline(deadline)
        e_node = child[e_edge]
        for joined in pending.pop(depth, ()):
            e_node = np.concatenate([e_node, joined.nodes])
            e_seq = np.concatenate([e_seq, joined.seq])
            e_cid = np.concatenate([e_cid, np.zeros(joined.nodes.shape[0], dtype=np.int64)])
            e_state = np.concatenate([e_state, joined.states])
            e_src = np.concatenate([e_src, np.arange(num_rows, num_rows + joined.nodes.shape[0])])
            extra.append(joined.bits)
            num_rows += joined.nodes.shape[0]
        if e_state.shape[0] == 0:
            if any(d > depth for d in pending):
                state = node = seq = cid = e_state
                bits = np.zeros((0, words), dtype=np.uint64)
                continue
            break
        _check_deadline(deadline)
        # Merge equal (node, shape, seq, constraints) entries; OR their origin bitsets.
        e_state = canon[canon_row(e_node), e_state].astype(np.int64)
        order, starts = _equal_runs((e_node, e_seq, e_cid, e_state))
        # Entries point at their origin bitsets (`e_src`) until they merge: every filter
        # of the level moved indices, and each row is gathered once, here.
        source = np.concatenate([bits, *extra]) if extra else bits
        bits = _or_runs(source, e_src[order], starts)
        heads = order[starts]
        node, seq, cid, state = e_node[heads], e_seq[heads], e_cid[heads], e_state[heads]
        at_token = is_token_node[node]
        if at_token.any():
            recorded.append(_picked(at_token, node, state, seq, bits))
        kept = ~served(depth)
        node, seq, cid, state, bits = _picked(kept, node, seq, cid, state, bits)
    if not recorded:
        empty = np.zeros(0, dtype=np.int64)
        return WalkRecords(empty, empty, empty, np.zeros((0, words), dtype=np.uint64))
    return WalkRecords(*(np.concatenate(column) for column in zip(*recorded, strict=True)))


def walk_levels(
    shapes: LexerShapes,
    shape_xset: npt.NDArray[np.int32],
    regions: RegionServer,
    height: int,
    deadline: float | None = None,
) -> LivenessLevels:
    """Which shapes a walk may merge at a trie node of each height.

    A record keeps only the exit set of the shape a token ends in, and a step depends on
    the shape only through its transitions and label (the cut). So two shapes that agree
    on label and exit set along every path of h bytes leave the same records below a node
    of height h. The 200 levels of `"[^"]{0,200}"` are such shapes: a walk that kept them
    apart paid a full trie walk per level. Region roles keep their region, so a served
    shape is only replaced by one served the same way.
    """
    key = np.stack(
        [shapes.label.astype(np.int64), shape_xset.astype(np.int64), regions.region_of], axis=1
    )
    _, initial = np.unique(key, axis=0, return_inverse=True)
    dfa = ByteDFA(
        transitions=shapes.transitions,
        class_of_byte=shapes.class_of_byte,
        accepting=shapes.label >= 0,
    )
    return liveness_levels(dfa, height, deadline, initial=initial.reshape(-1).astype(np.int64))


def tokens_reaching_labels(
    lexer: LexerAutomaton, trie: TokenTrie, vocab_size: int, state: int
) -> npt.NDArray[np.int32]:
    """int32[ceil(V/32)]: tokens whose bytes take `state` to a labelled state at some prefix.

    An open constraint forbids exactly these tokens. Cost: one trie walk from one state,
    only along paths that stay alive; computed once per constraint state at run time.
    """
    trans = lexer.transitions
    class_of = lexer.class_of_byte
    has_label = np.append(lexer.label >= 0, False)
    hit = np.zeros(trie.num_nodes, dtype=np.bool_)
    node = np.zeros(1, dtype=np.int64)
    cur = np.array([state], dtype=np.int64)  # -2: an ancestor already reached a label
    while node.shape[0]:
        parent, child = trie.children(node)
        if child.shape[0] == 0:
            break
        q = cur[parent]
        nq = np.where(q == -2, -2, trans[np.maximum(q, 0), class_of[trie.node_byte[child]]])
        reached = (nq == -2) | has_label[np.where(nq >= 0, nq, -1)]
        hit[child[reached]] = True
        nq = np.where(reached, -2, nq)
        keep = nq != -1
        node, cur = child[keep], nq[keep]
    bits = np.zeros((1, vocab_size), dtype=np.bool_)
    bits[0, trie.token_ids[hit[trie.token_node]]] = True
    from fsmcompile.tables.bits import pack_bool_rows

    row: npt.NDArray[np.int32] = pack_bool_rows(bits)[0]
    return row


def lexeme_key(lexer: LexerAutomaton, state: int) -> bytes:
    """A digest of all that `items_grown` (runtime/counted.py) reads from `state`: the
    moves by raw byte and the item starts of the states it reaches, numbered in the order
    a search by byte value meets them, so equal lexemes of different grammars (and byte
    classes) share one key.

    The search reads each state's row of byte classes, the classes in the order of their
    smallest byte (a class first meets a target at its smallest byte); only the digested
    table is spelled out by raw byte.
    """
    full = lexer.class_of_byte
    by_first_byte = classes_by_first_byte(full).tolist()
    transitions = lexer.transitions
    order = [state]
    number = {state: 0}
    for s in order:
        row = transitions[s].tolist()
        for cls in by_first_byte:
            t = row[cls]
            if t >= 0 and t not in number:
                number[t] = len(order)
                order.append(t)
    reached = np.asarray(order)
    lookup = np.full(lexer.num_states + 1, -1, dtype=np.int32)
    lookup[reached] = np.arange(len(order), dtype=np.int32)
    table = lookup[transitions[reached][:, full]]  # -1 maps through lookup[-1] == -1
    starts = lexer.char_start[reached][:, full]
    return hashlib.blake2b(table.tobytes() + np.packbits(starts).tobytes()).digest()
