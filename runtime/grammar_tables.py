"""Shared lookup tables of one compiled Lark grammar: the parser, its stacks, the mask rows.

The LALR parser runs on interned stacks (a stack is a node id whose parent is the stack
below), so every question the masks ask (can this terminal be shifted here, does this
emitted sequence land in that lexer context, may the text end) is a dictionary lookup
after its first answer, and every matcher of the index shares the answers.

A mask row depends on the lexer state and on the top of the stack down to the deepest
state the parser read while deciding it (the "floor"); rows are cached by that suffix, so
inside a JSON string nested 9 levels deep only the top few levels decide which tokens may
close it, and the row is reused at every depth.

A row is the OR of the index's token groups of the lexer state (each a dense mask row or
a token list) whose emitted sequence and exit set the stack accepts. The groups come
sorted into runs sharing (sequence, exit set), the runs in path order (a sequence right
before its extensions): a sequence the stack rejects skips all its extensions' runs in
one step, and siblings that differ only in the lexer context assumed after their last
terminal share one parser step. A row then costs one OR over the valid runs' groups,
cached by the runs.

Jump-forward reads the same tables a byte at a time: the forced text of a configuration
set is the run of bytes that are each the only one `advance` would take (cached by set).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from fsmcompile.index.bits import bitmask_words, pack_bool_rows, set_bits
from fsmcompile.index.grammar_walk import (
    ConstraintTable,
    SequenceTable,
    items_grown,
    lexeme_key,
    tokens_reaching_labels,
    walk_bytes,
)
from fsmcompile.index.int_columns import int_column
from fsmcompile.memo import StageMemo

from .jump_forward import FORCED_MAX_BYTES, accepted_prefix, byte_classes, forced_encoding

if TYPE_CHECKING:
    from fsmcompile.index.grammar_index import GrammarIndex

Config = tuple[int, int, int, int]
"""(stack id, lexer state, constraint set id, items counted in the pending lexeme): one
reading of the text so far. The count matters only in a counted lexeme's states
(`LexerAutomaton.char_bound`), which may hold at most that many items."""

Outcome = tuple[int, int, int, int, int]
"""(seq id, end lexer state, constraint id, items grown, items fresh) of one reading of a
token (`walk_bytes`)."""

Forced = tuple[bytes, tuple[Config, ...], bool]
"""(forced bytes, configurations after them, whether those are still fresh) of
`GrammarTables.forced`."""

_PACK_MIN_TOKENS = 256
"""From this many listed tokens a union sets them through a bool row and `np.packbits`
(7-10 µs whatever the count) rather than `set_bits` (4 µs plus 1 µs per 100 tokens)."""

_FEW_GROUPS = 16
"""Up to this many groups a union reads them through list lookups; from there, gathers."""

_NO_TOKENS = np.zeros(0, dtype=np.int64)

_TABLES_CACHE_SIZE = 16
_MAX_ROW_ENTRIES = 500_000


class GrammarTables:
    """Parser, lexer and mask caches for one `GrammarIndex`, shared by all its matchers.

    Not thread-safe, like the regex `IndexTables`: one engine thread drives the matchers.
    Memory grows with the distinct stacks and (lexer state, stack) pairs actually seen.
    """

    def __init__(self, index: GrammarIndex) -> None:
        table = index.table
        vocab = index.vocabulary
        self.index = index
        self.vocab_size = int(vocab.size)
        self.num_words = bitmask_words(self.vocab_size)
        self.eos_token_ids = frozenset(int(t) for t in vocab.eos_token_ids)
        self.eos_row = np.zeros(self.num_words, dtype=np.int32)
        set_bits(
            self.eos_row,
            np.array(sorted(t for t in self.eos_token_ids if t < self.vocab_size), dtype=np.int64),
        )
        num_terminals = len(index.terminal_names)
        self._end = num_terminals
        self._num_symbols = num_terminals + 1
        self._action = _action_dicts(table.action)
        # Flat integer columns (`int_column`): read an item at a time, and no items for
        # the garbage collector to visit on every full pass.
        self._goto = int_column(table.goto.reshape(-1))
        self._num_nonterminals = int(table.goto.shape[1])
        self._rule_lhs = int_column(table.rule_lhs)
        self._rule_len = int_column(table.rule_len)
        self._end_state = int(table.end_state)
        self._context_of_state = int_column(table.context_of_state)
        self._num_parser_states = table.num_states
        # Interned stacks: node 0 is the start state alone.
        self._stack_parent = int_column([-1])
        self._stack_state = int_column([int(table.start_state)])
        self._stack_depth = int_column([0])
        self._stack_ids: dict[int, int] = {}
        lexer = index.lexer
        self.lexer = lexer
        self._label = int_column(lexer.label)
        self._ignored: list[bool] = index.ignored.tolist()
        self._next_contexts = index.next_contexts()
        self.start_lexer_state = int(
            lexer.context_start[self._context_of_state[int(table.start_state)]]
        )
        num_contexts = int(lexer.context_start.shape[0])
        # A sequence's context id past the contexts names a set of them (`ContextSets`).
        self._context_sets = index.context_sets()
        self._num_contexts = num_contexts
        self._sequences = SequenceTable.of(
            index.seq_parent,
            index.seq_terminal,
            index.seq_context,
            num_terminals=len(index.terminal_names),
            num_contexts=num_contexts + len(self._context_sets),
        )
        self._constraints = ConstraintTable()
        self._xsets = _exit_lists(index)
        # Contexts where no lexeme can start: only EOS follows a cut there.
        self._dead_contexts = frozenset(
            np.flatnonzero(~(lexer.transitions[lexer.context_start] >= 0).any(axis=1)).tolist()
        )
        self._xset_free = [
            any(ctxs is None and self._ignored[t] for t, ctxs in pairs) for pairs in self._xsets
        ]
        self._state_xset = int_column(index.state_xset)
        self._char_bound = int_column(lexer.char_bound)
        if max(self._char_bound, default=-1) >= 0:
            # Counted lexemes walk the trie near their bound (`items_grown`), reading
            # arrays derived from it once per process (~15 ms with Llama 3): derive them
            # here, with the tables, not inside a decoding step's mask.
            trie = vocab.trie
            trie.level_parents(), trie.subtree_ends(), trie.tokens_by_node()
        self._longest_token = int(vocab.max_token_bytes)
        self._fingerprint = vocab.fingerprint
        self._lexeme_keys: dict[int, tuple[str, bytes]] = {}
        self._too_long: dict[tuple[int, int], npt.NDArray[np.int32]] = {}
        runs = _entry_runs(index)
        # Columns: a row reads a few items of each at a time.
        self._origin_run = int_column(runs.origin_run)
        self._run_seq = int_column(runs.seq)
        self._run_xset = int_column(runs.xset)
        self._run_skip = int_column(runs.skip)
        self._run_start = int_column(runs.start)
        self._run_group_column = int_column(runs.groups)
        self._run_groups = np.frombuffer(self._run_group_column, dtype=np.int64)  # same items
        self._group_dense = index.group_dense
        self._group_dense_column = int_column(index.group_dense)
        self._group_token_start = index.group_token_start.astype(np.int64)
        self._group_starts = int_column(self._group_token_start)
        self._group_tokens = index.group_tokens.astype(np.int64)
        # The word and bit of each listed token, for scattering a few groups into a row.
        self._group_words = index.group_tokens >> 5
        self._group_bits = (np.uint32(1) << (index.group_tokens & 31).astype(np.uint32)).view(
            np.int32
        )
        self._masks = index.masks
        self._state_kill = int_column(index.state_kill)
        self._kill_masks = index.kill_masks
        self._context_start = int_column(lexer.context_start)
        # The lexer's moves and item starts by state * classes + class, read an item at a
        # time through memoryviews of the index's own arrays (no copy).
        self._class_of_byte: list[int] = lexer.class_of_byte.tolist()
        num_classes = self._num_classes = int(lexer.transitions.shape[1])
        self._moves = np.ascontiguousarray(lexer.transitions).reshape(-1).data
        self._move_starts = np.ascontiguousarray(lexer.char_start).view(np.uint8).reshape(-1).data
        # Byte classes of the lexer, for jump-forward: one byte walks for all of its class.
        self._class_size, self._class_byte = byte_classes(lexer.class_of_byte, num_classes)
        # Widest classes first: inside a string one wide class tells that nothing is forced.
        self._classes_by_size = sorted(range(num_classes), key=lambda c: -self._class_size[c])
        self._restart = int_column(lexer.restart_context)
        self._token_bytes = vocab.token_bytes
        self._text_token = np.zeros(self.vocab_size, dtype=np.bool_)
        self._text_token[vocab.text_token_ids] = True
        # Caches (values carry the shallowest stack depth the parser read, the "floor").
        self._feed: dict[int, tuple[int, int]] = {}
        # Keys pairing a stack with a small id are packed into one int (`stack << 32 | id`):
        # a row's checks look up tens of them, and an int hashes far faster than a tuple.
        self._apply: dict[int, tuple[int, int]] = {}
        self._xset_ok: dict[int, tuple[bool, int]] = {}
        self._end_ok: dict[int, tuple[bool, int]] = {}
        self._row_exact: dict[int, tuple[npt.NDArray[np.int32], int]] = {}
        self._row_suffix: dict[tuple[int, tuple[int, ...]], npt.NDArray[np.int32]] = {}
        self._suffix_lengths: dict[tuple[int, int], tuple[int, ...]] = {}
        self._outcomes: dict[tuple[int, int, int], tuple[Outcome, ...]] = {}
        self._byte_outcomes: dict[tuple[int, int, int], tuple[Outcome, ...]] = {}
        self._forced: dict[tuple[tuple[Config, ...], bool], Forced] = {}
        self._forced_ids: dict[tuple[tuple[Config, ...], bool], tuple[int, ...]] = {}
        self._moving: dict[int, tuple[int, ...]] = {}
        self._hits: dict[int, npt.NDArray[np.int32]] = {}
        self._set_rows: dict[tuple[Config, ...], npt.NDArray[np.int32]] = {}
        self._unions: dict[tuple[int, ...], npt.NDArray[np.int32]] = {}
        self._dense_rows: dict[tuple[int, ...], npt.NDArray[np.int32]] = {}
        self._row_store: dict[bytes, npt.NDArray[np.int32]] = {}

    # -- parser ---------------------------------------------------------------------------

    def _push(self, stack: int, state: int) -> int:
        key = stack * self._num_parser_states + state
        found = self._stack_ids.get(key)
        if found is None:
            found = len(self._stack_state)
            self._stack_ids[key] = found
            self._stack_parent.append(stack)
            self._stack_state.append(state)
            self._stack_depth.append(self._stack_depth[stack] + 1)
        return found

    def _reduce(self, sid: int, rule: int, floor: int) -> tuple[int, int]:
        """One LALR reduction on stack `sid`: pop the rule's symbols, then goto its lhs.

        Returns (the new stack, or -1 when the goto is missing; the shallowest depth read).
        """
        parent, depth = self._stack_parent, self._stack_depth
        for _ in range(self._rule_len[rule]):
            sid = parent[sid]
        floor = min(floor, depth[sid])
        target = self._goto[self._stack_state[sid] * self._num_nonterminals + self._rule_lhs[rule]]
        if target < 0:
            return -1, floor
        return self._push(sid, target), floor

    def feed(self, stack: int, terminal: int) -> tuple[int, int]:
        """The stack after lark's parser takes `terminal` (reductions, then the shift).

        Returns:
            (new stack id or -1 if rejected, shallowest depth of `stack` that was read).
        """
        key = stack * self._num_symbols + terminal
        hit = self._feed.get(key)
        if hit is not None:
            return hit
        states = self._stack_state
        sid = stack
        floor = self._stack_depth[stack]
        result = -1
        while True:
            act = self._action[states[sid]].get(terminal, 0)
            if act == 0:
                break
            if act > 0:
                result = self._push(sid, act - 1)
                break
            sid, floor = self._reduce(sid, -act - 1, floor)
            if sid < 0:
                break
        self._feed[key] = (result, floor)
        return result, floor

    def accepts_end(self, stack: int) -> tuple[bool, int]:
        """Whether `$END` completes the parse on `stack`, and the floor read."""
        hit = self._end_ok.get(stack)
        if hit is not None:
            return hit
        states = self._stack_state
        sid = stack
        floor = self._stack_depth[stack]
        ok = False
        while True:
            act = self._action[states[sid]].get(self._end, 0)
            if act >= 0:  # error, or a shift of $END (lark never builds one)
                break
            sid, floor = self._reduce(sid, -act - 1, floor)
            if sid < 0:
                break
            if states[sid] == self._end_state:
                ok = True
                break
        self._end_ok[stack] = (ok, floor)
        return ok, floor

    def apply(self, stack: int, seq: int) -> tuple[int, int]:
        """The stack after an emitted sequence, checking the lexer context assumed after each
        terminal; -1 if the parser rejects a terminal or lands in another context."""
        if seq == 0:
            return stack, self._stack_depth[stack]
        key = stack << 32 | seq
        hit = self._apply.get(key)
        if hit is not None:
            return hit
        seqs = self._sequences
        before, floor = self.apply(stack, seqs.parent[seq])
        result = -1
        if before >= 0:
            after, f = self.feed(before, seqs.terminal[seq])
            floor = min(floor, f)
            if after >= 0:
                landing = self._context_of_state[self._stack_state[after]]
                wanted = seqs.context[seq]
                if landing == wanted or (
                    wanted >= self._num_contexts
                    and landing in self._context_sets[wanted - self._num_contexts]
                ):
                    result = after
        self._apply[key] = (result, floor)
        return result, floor

    def xset_ok(self, stack: int, xset: int) -> tuple[bool, int]:
        """Whether the pending lexeme can still be cut as a terminal the parser takes, with
        something able to follow the cut (a token of the next context, or EOS)."""
        if self._xset_free[xset]:
            return True, self._stack_depth[stack]
        key = stack << 32 | xset
        hit = self._xset_ok.get(key)
        if hit is not None:
            return hit
        floor = self._stack_depth[stack]
        ok = False
        for terminal, contexts in self._xsets[xset]:
            if self._ignored[terminal]:
                after = stack
            else:
                after, f = self.feed(stack, terminal)
                floor = min(floor, f)
                if after < 0:
                    continue
            landing = self._context_of_state[self._stack_state[after]]
            if (contexts is None and landing not in self._dead_contexts) or (
                contexts is not None and landing in contexts
            ):
                ok = True
                break
            ended, f = self.accepts_end(after)
            floor = min(floor, f)
            if ended:
                ok = True
                break
        self._xset_ok[key] = (ok, floor)
        return ok, floor

    def config_accepts_end(self, stack: int, state: int) -> tuple[bool, int]:
        """Whether EOS is allowed: the pending lexeme is complete and `$END` parses."""
        label = self._label[state]
        if label < 0:
            return False, self._stack_depth[stack]
        if self._ignored[label]:
            return self.accepts_end(stack)
        after, floor = self.feed(stack, label)
        if after < 0:
            return False, floor
        ok, f = self.accepts_end(after)
        return ok, min(floor, f)

    # -- masks ----------------------------------------------------------------------------

    def _suffix(self, stack: int, length: int) -> tuple[int, ...]:
        out = []
        parent, states = self._stack_parent, self._stack_state
        for _ in range(length):
            out.append(states[stack])
            stack = parent[stack]
        return tuple(out)

    def config_row(self, stack: int, state: int) -> tuple[npt.NDArray[np.int32], int]:
        """int32[W]: tokens (and EOS) allowed for one unconstrained configuration, and the
        shallowest stack depth that decided it."""
        key = stack << 32 | state
        hit = self._row_exact.get(key)
        if hit is not None:
            return hit
        top = (state, self._stack_state[stack])
        for length in self._suffix_lengths.get(top, ()):
            shared = self._row_suffix.get((state, self._suffix(stack, length)))
            if shared is not None:
                hit = (shared, self._stack_depth[stack] - length + 1)
                self._row_exact[key] = hit
                return hit
        self._bound_caches()
        row, floor = self._compute_row(stack, state)
        length = self._stack_depth[stack] - floor + 1
        lengths = self._suffix_lengths.get(top, ())
        if length not in lengths:  # a tuple of ints: the collector stops tracking it
            self._suffix_lengths[top] = (*lengths, length)
        self._row_suffix[(state, self._suffix(stack, length))] = row
        self._row_exact[key] = (row, floor)
        return row, floor

    def _intern_row(self, row: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
        """The one stored copy of a row with these bits (read-only).

        Thousands of (stack, lexer state) pairs share a few hundred distinct rows; keeping
        one copy each bounds memory by the distinct masks (16 KB each at 128k tokens), not
        by the stacks seen. The stored row is a view of its dictionary key's bytes, so the
        bits are held once and a hit costs one hash, no element-wise compare.
        """
        data = row.tobytes()
        stored = self._row_store.get(data)
        if stored is None:
            stored = np.frombuffer(data, dtype=np.int32)
            self._row_store[data] = stored
        return stored

    def _bound_caches(self) -> None:
        """Past `_MAX_ROW_ENTRIES` cached pairs the pair caches start over (the interned
        rows stay), so a long-running server does not grow without bound."""
        if len(self._row_exact) + len(self._row_suffix) > _MAX_ROW_ENTRIES:
            self._row_exact.clear()
            self._row_suffix.clear()
            self._suffix_lengths.clear()
            self._set_rows.clear()
            self._forced.clear()
            self._forced_ids.clear()

    def _union(self, runs: tuple[int, ...]) -> npt.NDArray[np.int32]:
        """int32[W]: the OR of some runs' groups, read-only and cached (many stacks validate
        the same runs of a state; two states rarely list the same groups)."""
        row = self._unions.get(runs)
        if row is None:
            start = self._run_start
            if sum(start[r + 1] - start[r] for r in runs) <= _FEW_GROUPS:
                row = self._few_groups_row(runs)
            else:
                groups = self._run_groups
                dense, tokens = self._split_many(
                    _joined([groups[start[r] : start[r + 1]] for r in runs])
                )
                row = self._groups_row(dense, tokens)
            self._unions[runs] = row
        return row

    def _few_groups_row(self, runs: tuple[int, ...]) -> npt.NDArray[np.int32]:
        """int32[W], read-only: the OR of a few groups' dense rows and listed tokens, read
        through list lookups (most rows join one to four small groups, where numpy's
        per-call cost would dominate), each listed group scattered in one call."""
        start, groups = self._run_start, self._run_group_column
        dense_of, starts = self._group_dense_column, self._group_starts
        dense: set[int] = set()
        listed: list[int] = []
        for run in runs:
            for group in groups[start[run] : start[run + 1]]:
                if dense_of[group] >= 0:
                    dense.add(dense_of[group])
                else:
                    listed.append(group)
        if dense:
            row = self._dense_row(tuple(sorted(dense))).copy()
        else:
            row = np.zeros(self.num_words, dtype=np.int32)
        words, bits = self._group_words, self._group_bits
        for group in listed:
            lo, hi = starts[group], starts[group + 1]
            if hi - lo == 1:
                row[words[lo]] |= bits[lo]
            else:
                np.bitwise_or.at(row, words[lo:hi], bits[lo:hi])
        row.setflags(write=False)
        return row

    def _split_many(
        self, groups: npt.NDArray[np.int32]
    ) -> tuple[tuple[int, ...], npt.NDArray[np.int64]]:
        """(dense rows, listed tokens) of many groups, in a few numpy gathers."""
        dense_of = self._group_dense[groups]
        is_dense = dense_of >= 0
        listed = groups[~is_dense]
        lo = self._group_token_start[listed]
        sizes = self._group_token_start[listed + 1] - lo
        # Position k of group i reads group_tokens[lo[i] + k]: repeat each group's offset
        # from its place in the output, then add the output positions.
        offsets = np.repeat(lo - (np.cumsum(sizes) - sizes), sizes)
        tokens = self._group_tokens[offsets + np.arange(offsets.shape[0])]
        return tuple(sorted(set(dense_of[is_dense].tolist()))), tokens

    def _groups_row(
        self, dense: tuple[int, ...], tokens: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int32]:
        """int32[W]: the OR of some dense rows and token lists, read-only."""
        if not tokens.size:
            return self._dense_row(dense)
        if dense:
            row = self._dense_row(dense).copy()
        else:
            row = np.zeros(self.num_words, dtype=np.int32)
        self._set_tokens(row, tokens)
        row.setflags(write=False)
        return row

    def _dense_row(self, dense: tuple[int, ...]) -> npt.NDArray[np.int32]:
        """int32[W]: the OR of some rows of `masks`, read-only: one row is a view of it,
        several are cached, as unions of different token lists often share their dense
        rows (tens of them at about 1 µs each in the unions of a JSON string's content)."""
        if len(dense) == 1:
            view = np.asarray(self._masks[dense[0]], dtype=np.int32)
            view.setflags(write=False)
            return view
        row = self._dense_rows.get(dense)
        if row is None:
            if dense:
                row = self._masks[dense[0]].astype(np.int32)  # a fresh copy
                for d in dense[1:]:
                    np.bitwise_or(row, self._masks[d], out=row)
            else:
                row = np.zeros(self.num_words, dtype=np.int32)
            row.setflags(write=False)
            if dense:
                self._dense_rows[dense] = row
        return row

    def _set_tokens(self, row: npt.NDArray[np.int32], tokens: npt.NDArray[np.int64]) -> None:
        """Set the bits of `tokens` (ids below W * 32, repeats allowed) in `row`, in place."""
        if tokens.size < _PACK_MIN_TOKENS:
            set_bits(row, tokens)
            return
        flags = np.zeros(self.num_words * 32, dtype=np.bool_)
        flags[tokens] = True
        row |= np.packbits(flags, bitorder="little").view("<i4")

    def _valid_runs(self, stack: int, state: int) -> tuple[list[int], int]:
        """The runs of lexer `state` whose sequence and exit set `stack` accepts, and the
        shallowest stack depth read (the hit paths of `apply`, `feed` and `xset_ok`,
        inlined: a first row checks tens of runs)."""
        floor = self._stack_depth[stack]
        valid: list[int] = []
        run_seq, run_xset, run_skip = self._run_seq, self._run_xset, self._run_skip
        seqs = self._sequences
        seq_parent, seq_terminal, seq_context = seqs.parent, seqs.terminal, seqs.context
        apply_memo, feed_memo, xset_memo = self._apply, self._feed, self._xset_ok
        xset_free, num_symbols = self._xset_free, self._num_symbols
        context_of_state, stack_state = self._context_of_state, self._stack_state
        num_contexts, context_sets = self._num_contexts, self._context_sets
        stack_key = stack << 32
        last_seq = last_parent = last_terminal = -1
        after = stepped = landing = -1
        run, end = self._origin_run[state], self._origin_run[state + 1]
        while run < end:
            seq = run_seq[run]
            if seq != last_seq:
                last_seq = seq
                if seq == 0:
                    after = stack
                else:
                    parent, terminal = seq_parent[seq], seq_terminal[seq]
                    if parent != last_parent or terminal != last_terminal:
                        # One parser step for all siblings that differ only in the
                        # context they assume after `terminal`: it lands in one.
                        last_parent, last_terminal = parent, terminal
                        before = stack
                        if parent:
                            hit = apply_memo.get(stack_key | parent)
                            before, f = hit if hit is not None else self.apply(stack, parent)
                            if f < floor:
                                floor = f
                        stepped = -1
                        if before >= 0:
                            hit = feed_memo.get(before * num_symbols + terminal)
                            stepped, f = hit if hit is not None else self.feed(before, terminal)
                            if f < floor:
                                floor = f
                        if stepped >= 0:
                            landing = context_of_state[stack_state[stepped]]
                    wanted = seq_context[seq]
                    if stepped < 0 or not (
                        wanted == landing
                        or (
                            wanted >= num_contexts
                            and landing in context_sets[wanted - num_contexts]
                        )
                    ):
                        run = run_skip[run]  # this sequence and every extension of it
                        continue
                    after = stepped
            xset = run_xset[run]
            if xset_free[xset]:
                valid.append(run)
            else:
                hit = xset_memo.get(after << 32 | xset)
                ok, f = hit if hit is not None else self.xset_ok(after, xset)
                if f < floor:
                    floor = f
                if ok:
                    valid.append(run)
            run += 1
        return valid, floor

    def _compute_row(self, stack: int, state: int) -> tuple[npt.NDArray[np.int32], int]:
        # Cost: one memoized parser step per distinct (sequence before the last terminal,
        # last terminal) of `state`'s runs the stack does not reject earlier, one exit-set
        # check per surviving run, then one OR over the valid runs' rows and token lists
        # (cached by the runs). Runs once per cache miss.
        valid, floor = self._valid_runs(stack, state)
        union = self._union(tuple(valid))
        extra: list[npt.NDArray[np.int32]] = []  # bits beyond the union
        kill = self._state_kill[state]
        if kill >= 0:
            # Tokens whose first byte ends this lexeme: the next lexeme's start-state row,
            # on the stack after the terminal (the same stack for an ignored one).
            label = self._label[state]
            kill_row = self._kill_masks[kill]
            if self._ignored[label]:
                sub, f = self.config_row(stack, self._context_start[self._restart[state]])
                floor = min(floor, f)
                extra.append(sub & kill_row)
            else:
                for ctx in self._next_contexts[label]:
                    after, f = self.apply(stack, self._sequences.extend(0, label, ctx))
                    floor = min(floor, f)
                    if after < 0:
                        continue
                    sub, f = self.config_row(after, self._context_start[ctx])
                    floor = min(floor, f)
                    extra.append(sub & kill_row)
        eos, f = self.config_accepts_end(stack, state)
        floor = min(floor, f)
        if eos:
            extra.append(self.eos_row)
        if not extra:  # the union is a read-only row of its own: no copy, no hashing
            return union, floor
        row = union.copy()
        for bits in extra:
            row |= bits
        return self._intern_row(row), floor

    def constraint_row(self, cid: int) -> npt.NDArray[np.int32]:
        """int32[W]: tokens that would take an open constraint to a label (forbidden)."""
        row = self._hits.get(cid)
        if row is None:
            row = np.zeros(self.num_words, dtype=np.int32)
            for c in self._constraints.sets[cid]:
                row |= tokens_reaching_labels(
                    self.lexer, self.index.vocabulary.trie, self.vocab_size, c
                )
            self._hits[cid] = row
        return row

    def _room(self, state: int, count: int) -> int:
        """How many more items a token may add to the lexeme at `state` having `count`, or
        -1 when no token could pass its bound (uncounted, or far from the bound)."""
        bound = self._char_bound[state]
        if bound < 0 or bound - count >= self._longest_token:
            return -1
        return bound - count

    def set_row(self, configs: tuple[Config, ...], fresh: bool) -> npt.NDArray[np.int32]:
        """int32[W]: the allowed tokens of a configuration set (OR of its readings)."""
        if len(configs) == 1 and not fresh:
            stack, state, cid, count = configs[0]
            if cid == 0 and self._room(state, count) < 0:
                return self.config_row(stack, state)[0]
        keys = tuple((s, q, cid, self._room(q, n)) for s, q, cid, n in configs)
        key = keys if not fresh else (*keys, (-1, -1, -1, -1))
        row = self._set_rows.get(key)
        if row is None:
            row = np.zeros(self.num_words, dtype=np.int32)
            for stack, state, cid, room in keys:
                part = self.config_row(stack, state)[0]
                if room >= 0:
                    part = part & ~self.too_long_row(state, room)
                if cid:
                    eos = part & self.eos_row
                    part = (part & ~self.constraint_row(cid)) | eos
                row |= part
            if fresh and self.accepts_end(configs[0][0])[0]:
                row |= self.eos_row
            row = self._intern_row(row)
            self._bound_caches()
            self._set_rows[key] = row
        return row

    # -- advancing ------------------------------------------------------------------------

    def too_long_row(self, state: int, room: int) -> npt.NDArray[np.int32]:
        """int32[W]: tokens that add more than `room` items to the lexeme at `state`.

        Kept per process by the lexeme's content (`lexeme_key`) as well: every schema's
        strings under a `maxLength` are the same few lexemes, and a first walk would
        otherwise pay a trie walk per lexer state and a packed row per room.
        """
        row = self._too_long.get((state, room))
        if row is None:
            key = self._lexeme_keys.get(state)
            if key is None:
                key = self._lexeme_keys[state] = (self._fingerprint, lexeme_key(self.lexer, state))
            row = _too_long_rows.get_or_make(
                (*key, room), lambda: self._too_long_of(key, state, room)
            )
            self._too_long[(state, room)] = row
        return row

    def _too_long_of(self, key: tuple[str, bytes], state: int, room: int) -> npt.NDArray[np.int32]:
        grown = _items_grown.get_or_make(key, lambda: self._items_grown_of(state))
        row: npt.NDArray[np.int32] = pack_bool_rows((grown > room)[None])[0]
        row.setflags(write=False)
        return row

    def _items_grown_of(self, state: int) -> npt.NDArray[np.int32]:
        grown = items_grown(self.lexer, self.index.vocabulary.trie, self.vocab_size, state)
        grown.setflags(write=False)  # kept for the process, shared by every index
        return grown

    def outcomes(self, state: int, cid: int, token: int) -> tuple[Outcome, ...]:
        """(seq id, end lexer state, constraint id, items grown, items fresh) for each
        reading of a token's bytes (see `walk_bytes`)."""
        key = (state, cid, token)
        hit = self._outcomes.get(key)
        if hit is None:
            text = 0 <= token < self.vocab_size and self._text_token[token]
            hit = self._walk(state, cid, self._token_bytes[token]) if text else ()
            self._outcomes[key] = hit
        return hit

    def byte_outcomes(self, state: int, cid: int, byte: int) -> tuple[Outcome, ...]:
        """`outcomes` of one byte (a representative of its lexer class), for jump-forward."""
        key = (state, cid, byte)
        hit = self._byte_outcomes.get(key)
        if hit is None:
            hit = self._byte_outcomes[key] = self._walk(state, cid, bytes((byte,)))
        return hit

    def _walk(self, state: int, cid: int, data: bytes) -> tuple[Outcome, ...]:
        if not cid:
            inside = self._walk_inside(state, data)
            if inside is not None:
                return inside
        found = walk_bytes(
            self.lexer,
            self._next_contexts,
            self._ignored,
            state,
            self._constraints.sets[cid],
            data,
        )
        out = []
        for emitted, end, cons, grown, fresh in found:
            seq = 0
            for terminal, ctx in emitted:
                seq = self._sequences.extend(seq, terminal, ctx)
            out.append((seq, end, self._constraints.intern(cons), grown, fresh))
        return tuple(out)

    def _walk_inside(self, state: int, data: bytes) -> tuple[Outcome, ...] | None:
        """`walk_bytes` for bytes that cannot cut the lexeme (no constraint open): one
        reading, or none. None where some byte could end the lexeme, which only the full
        walk follows. Most tokens a first walk meets stay inside one lexeme, and this reads
        the lexer's tables a byte at a time instead of tracking sets of readings."""
        moves, starts, label = self._moves, self._move_starts, self._label
        class_of_byte, num_classes = self._class_of_byte, self._num_classes
        grown = 0
        for byte in data:
            move = state * num_classes + class_of_byte[byte]
            nxt = moves[move]
            if label[state] >= 0 and (nxt < 0 or label[nxt] < 0):
                return None  # the lexeme may be cut before this byte
            if nxt < 0:
                return ()
            grown += starts[move]
            state = nxt
        return ((0, state, 0, grown, -1),)

    def advance(self, configs: tuple[Config, ...], token: int) -> tuple[Config, ...]:
        """The configurations after a text token; empty if no reading survives."""
        return self._advance(configs, token, self.outcomes)

    def _advance(
        self,
        configs: tuple[Config, ...],
        unit: int,
        outcomes: Callable[[int, int, int], tuple[Outcome, ...]],
    ) -> tuple[Config, ...]:
        """The configurations after a token or a byte (`unit`, read by `outcomes`)."""
        out: set[Config] = set()
        state_xset = self._state_xset
        bounds = self._char_bound
        for stack, state, cid, count in configs:
            bound = bounds[state]
            for seq, end, end_cid, grown, fresh in outcomes(state, cid, unit):
                if 0 <= bound < count + grown:
                    continue  # the lexeme would pass its bound
                after, _ = self.apply(stack, seq)
                if after >= 0 and self.xset_ok(after, state_xset[end])[0]:
                    out.add((after, end, end_cid, count + grown if fresh < 0 else fresh))
        return tuple(sorted(out)) if len(out) > 1 else tuple(out)

    # -- jump-forward ---------------------------------------------------------------------

    def forced(self, configs: tuple[Config, ...], fresh: bool) -> Forced:
        """The bytes every continuation of `configs` starts with, the configurations after
        them, and whether those are still fresh (nothing read yet).

        A byte is forced when the text may not end here and it is the only byte some
        reading takes: exactly what `advance` would accept, so a forced byte is never a
        guess. Cost: a few byte walks per forced byte, cached by configuration set.
        """
        key = (configs, fresh)
        hit = self._forced.get(key)
        if hit is not None:
            return hit
        out = bytearray()
        cur, cur_fresh = configs, fresh
        while len(out) < FORCED_MAX_BYTES and not self.configs_accept_end(cur, cur_fresh):
            live = self._live_classes(cur, stop_at_two_bytes=True)
            if len(live) != 1 or self._class_size[live[0][0]] != 1:
                break
            cls, cur = live[0]
            out.append(self._class_byte[cls])
            cur_fresh = False
        result = (bytes(out), cur, cur_fresh)
        self._bound_caches()
        self._forced[key] = result
        return result

    def forced_token_ids(self, configs: tuple[Config, ...], fresh: bool) -> tuple[int, ...]:
        """Token ids for the forced text of `configs` (see `GrammarMatcher.forced_token_ids`)."""
        key = (configs, fresh)
        hit = self._forced_ids.get(key)
        if hit is not None:
            return hit
        data, end, end_fresh = self.forced(configs, fresh)
        ids: tuple[int, ...] = ()
        if data:
            live = {cls for cls, _ in self._live_classes(end, stop_at_two_bytes=False)}
            class_of_byte = self._class_of_byte
            encoded = forced_encoding(
                self.index.vocabulary,
                data,
                must_stop=not live and self.configs_accept_end(end, end_fresh),
                next_byte_ok=lambda b: class_of_byte[b] in live,
            )
            eos = self.eos_token_ids
            ids = accepted_prefix(
                encoded,
                configs,
                lambda cur, token: (self.advance(cur, token) or None) if token not in eos else None,
            )
        self._forced_ids[key] = ids
        return ids

    def _moving_classes(self, state: int) -> tuple[int, ...]:
        """The byte classes that can read on from lexer `state`, widest first: its own moves,
        or every class where the lexeme may be cut and the next one start."""
        found = self._moving.get(state)
        if found is None:
            row = self.lexer.transitions[state]
            cut = self._label[state] >= 0
            found = tuple(c for c in self._classes_by_size if cut or row[c] >= 0)
            self._moving[state] = found
        return found

    def _live_classes(
        self, configs: tuple[Config, ...], *, stop_at_two_bytes: bool
    ) -> list[tuple[int, tuple[Config, ...]]]:
        """(lexer byte class, configurations after one of its bytes) for each class some
        reading of `configs` takes; with `stop_at_two_bytes`, only until two live bytes
        are known (enough to tell that nothing is forced)."""
        live: list[tuple[int, tuple[Config, ...]]] = []
        size = self._class_size
        if len(configs) == 1:
            candidates = self._moving_classes(configs[0][1])
        else:
            moving = set().union(*(self._moving_classes(q) for _, q, *_ in configs))
            candidates = tuple(c for c in self._classes_by_size if c in moving)
        for cls in candidates:
            after = self._advance(configs, self._class_byte[cls], self.byte_outcomes)
            if not after:
                continue
            live.append((cls, after))
            if stop_at_two_bytes and (len(live) > 1 or size[cls] > 1):
                break
        return live

    def configs_accept_end(self, configs: tuple[Config, ...], fresh: bool) -> bool:
        if fresh:
            return self.accepts_end(configs[0][0])[0]
        return any(self.config_accepts_end(stack, state)[0] for stack, state, *_ in configs)


def _joined(arrays: list[npt.NDArray[Any]]) -> npt.NDArray[Any]:
    """The concatenation of some token lists, without a copy when at most one is non-empty."""
    arrays = [a for a in arrays if a.size]
    if len(arrays) > 1:
        return np.concatenate(arrays)
    return arrays[0] if arrays else _NO_TOKENS


def _action_dicts(action: npt.NDArray[np.integer]) -> list[dict[int, int]]:
    """Per parser state, {symbol: action} for its nonzero actions (one numpy pass)."""
    states, symbols = np.nonzero(action)
    values = action[states, symbols].tolist()
    bounds = np.searchsorted(states, np.arange(action.shape[0] + 1)).tolist()
    pairs = list(zip(symbols.tolist(), values, strict=True))
    return [dict(pairs[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


@dataclass(frozen=True, slots=True)
class _Runs:
    """The groups of every origin sorted by (sequence in path order, exit set), cut into
    runs sharing both: a row's plan is a slice of these, whatever the number of groups.

    Path order lists a sequence right before its extensions, siblings by (terminal,
    context): the runs of a sequence the stack rejects and of all its extensions are one
    stretch, skipped in one step, and siblings that differ only in the lexer context
    assumed after their last terminal are neighbours, decided by one parser step.
    """

    groups: npt.NDArray[np.int32]
    """int32[E]: the entries' groups, sorted per origin."""
    start: npt.NDArray[np.int64]
    """int64[R+1]: the groups of run r are groups[start[r]:start[r+1]]."""
    seq: npt.NDArray[np.int32]
    xset: npt.NDArray[np.int32]
    """int32[R]: the sequence and exit set of each run."""
    skip: npt.NDArray[np.int64]
    """int64[R]: the first run after r whose sequence does not extend (or equal) r's."""
    origin_run: npt.NDArray[np.int64]
    """int64[L+1]: the runs of origin o are origin_run[o]:origin_run[o+1]."""


def _entry_runs(index: GrammarIndex) -> _Runs:
    """The `_Runs` of an index, in numpy (a few ms per 100k entries)."""
    rank, end = _sequence_preorder(index.seq_parent, index.seq_terminal, index.seq_context)
    # Rank groups by (sequence, exit set, id), then sort each origin's entries by rank
    # with one stable sort of (origin, rank).
    group_seq, group_xset = index.group_seq, index.group_xset
    num_groups = group_seq.shape[0]
    group_rank = np.empty(num_groups, dtype=np.int64)
    group_rank[np.lexsort((group_xset, rank[group_seq]))] = np.arange(num_groups)
    starts = index.origin_entry_start
    entry_origin = np.repeat(np.arange(starts.shape[0] - 1, dtype=np.int64), np.diff(starts))
    entry_key = entry_origin * max(num_groups, 1) + group_rank[index.entry_group]
    order = np.argsort(entry_key, kind="stable")
    groups = index.entry_group[order]
    entry_origin = entry_origin[order]
    run_start = np.flatnonzero(
        _changes(entry_origin) | _changes(group_seq[groups]) | _changes(group_xset[groups])
    )
    heads = groups[run_start]
    seq = group_seq[heads]
    # Runs are sorted by (origin, rank of their sequence): the subtree of a sequence ends
    # at the first run of its origin ranked at or past its subtree's end.
    num_seqs = max(int(rank.shape[0]), 1)
    origin = entry_origin[run_start]
    run_key = origin * num_seqs + rank[seq]
    skip = np.searchsorted(run_key, origin * num_seqs + end[seq], side="left")
    return _Runs(
        groups=groups,
        start=np.append(run_start, groups.shape[0]).astype(np.int64),
        seq=seq,
        xset=group_xset[heads],
        skip=skip.astype(np.int64),
        origin_run=np.searchsorted(run_start, starts).astype(np.int64),
    )


def _sequence_preorder(
    parent: npt.NDArray[np.integer],
    terminal: npt.NDArray[np.integer],
    context: npt.NDArray[np.integer],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(rank, end): each sequence's place in path order (a prefix first, then its
    extensions, siblings by (terminal, context)); the extensions of s hold the ranks
    rank[s] + 1 up to end[s] - 1. A sequence's parent has a smaller id."""
    parent = parent.astype(np.int64)
    count = parent.shape[0]
    label = terminal.astype(np.int64) * (int(context.max(initial=0)) + 1) + context + 1
    label[:1] = 0
    depth = np.zeros(count, dtype=np.int64)
    up = np.arange(count, dtype=np.int64)
    while (up > 0).any():
        depth += up > 0
        up = np.where(up > 0, parent[np.maximum(up, 0)], 0)
    longest = int(depth.max(initial=0))
    # Column k: the label of each sequence's ancestor at depth k (0 past its own depth).
    columns = []
    ancestor = np.arange(count, dtype=np.int64)
    for level in range(longest, 0, -1):
        deep = depth >= level
        columns.append(np.where(deep, label[ancestor], 0))
        ancestor = np.where(deep, parent[ancestor], ancestor)
    rank = np.empty(count, dtype=np.int64)
    rank[np.lexsort(columns) if columns else np.arange(count)] = np.arange(count)
    end = rank + 1
    for level in range(longest, 0, -1):
        at = np.flatnonzero(depth == level)
        np.maximum.at(end, parent[at], end[at])
    return rank, end


def _changes(values: npt.NDArray[np.integer]) -> npt.NDArray[np.bool_]:
    """bool[N]: where a value differs from the one before (always at 0)."""
    out = np.ones(values.shape[0], dtype=np.bool_)
    np.not_equal(values[1:], values[:-1], out=out[1:])
    return out


def _exit_lists(index: GrammarIndex) -> list[list[tuple[int, frozenset[int] | None]]]:
    """Per exit set, (terminal, contexts that may follow or None for any) pairs."""
    from fsmcompile.index.grammar_exits import ANY_CONTEXT

    starts = index.xset_start.tolist()
    terminals = index.xset_terminal.tolist()
    contexts = index.xset_context.tolist()
    out: list[list[tuple[int, frozenset[int] | None]]] = []
    for lo, hi in zip(starts[:-1], starts[1:], strict=True):
        by_terminal: dict[int, set[int] | None] = {}
        for t, k in zip(terminals[lo:hi], contexts[lo:hi], strict=True):
            if k == ANY_CONTEXT:
                by_terminal[t] = None
            elif by_terminal.setdefault(t, set()) is not None and k >= 0:
                by_terminal[t].add(k)  # type: ignore[union-attr]
        # Terminals any context may follow first: the common case decides fastest.
        pairs = [(t, None if ks is None else frozenset(ks)) for t, ks in by_terminal.items()]
        out.append(sorted(pairs, key=lambda p: p[1] is not None))
    return out


_tables_cache: StageMemo[tuple[object, ...], GrammarTables] = StageMemo(_TABLES_CACHE_SIZE)

_items_grown: StageMemo[tuple[str, bytes], npt.NDArray[np.int32]] = StageMemo(
    64, max_bytes=64 << 20, size_of=lambda a: int(a.nbytes)
)
"""Per (vocabulary fingerprint, `lexeme_key`): the items each token adds there."""

_too_long_rows: StageMemo[tuple[str, bytes, int], npt.NDArray[np.int32]] = StageMemo(
    4096, max_bytes=64 << 20, size_of=lambda a: int(a.nbytes)
)
"""Per (vocabulary fingerprint, `lexeme_key`, room): `GrammarTables.too_long_row`."""


def grammar_tables_for(index: GrammarIndex) -> GrammarTables:
    """The shared `GrammarTables` of `index` (LRU of 16, keyed by `tables_key`)."""
    from .matcher import tables_key

    return _tables_cache.get_or_make(tables_key(index), lambda: GrammarTables(index))
