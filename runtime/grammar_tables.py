"""Shared lookup tables of one compiled Lark grammar: the parser, its stacks, the mask rows.

The LALR parser runs on interned stacks (a stack is a node id whose parent is the stack
below), so every question the masks ask (can this terminal be shifted here, does this
emitted sequence land in that lexer context, may the text end) is a memo lookup after its
first answer, and every matcher of the index shares the answers. The parser, its memos
and the rows (their checks, unions, caches and interning) are C (`native/parser_*.c`, built from
`grammar_parser.py`): a first walk meets a new row at about a quarter of its tokens, and in
Python each cost 20-70 µs.

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
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from fsmcompile._native import OriginPending, fitting_rows, write_row
from fsmcompile.errors import ArtifactCorruptError
from fsmcompile.memo import StageMemo
from fsmcompile.tables.bits import bitmask_words, set_bits
from fsmcompile.tables.grammar_index import GrammarIndex
from fsmcompile.tables.int_columns import int_column
from fsmcompile.tables.lexer_walks import lexeme_key, tokens_reaching_labels
from fsmcompile.tables.sequences import ConstraintTable, SequenceTable

from .counted import items_grown
from .grammar_parser import parser_for
from .index_tables import tables_key
from .jump_forward import FORCED_MAX_BYTES, accepted_prefix, byte_classes, forced_encoding
from .lazy_origins import OriginLoader

if TYPE_CHECKING:
    from fsmcompile.tables.lazy_grammar_index import LazyGrammarIndex

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

_TABLES_CACHE_SIZE = 16
_INT32 = np.dtype(np.int32)
_MAX_ROW_ENTRIES = 500_000


class GrammarTables:
    """Parser, lexer and mask caches for one `GrammarIndex`, shared by all its matchers.

    Not thread-safe, like the regex `IndexTables`: one engine thread drives the matchers.
    Memory grows with the distinct stacks and (lexer state, stack) pairs actually seen.
    """

    def __init__(self, index: GrammarIndex | LazyGrammarIndex) -> None:
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
        lexer = index.lexer
        self.lexer = lexer
        self._label = int_column(lexer.label)
        self._ignored: list[bool] = index.ignored.tolist()
        self._next_contexts = index.next_contexts()
        self.start_lexer_state = int(
            lexer.context_start[int(table.context_of_state[int(table.start_state)])]
        )
        self._loader: OriginLoader | None = None
        if isinstance(index, GrammarIndex):
            num_contexts = int(lexer.context_start.shape[0])
            # A sequence's context id past the contexts names a set of them (`ContextSets`).
            num_context_sets = int(index.ctxset_start.shape[0]) - 1
            self._sequences = SequenceTable.of(
                index.seq_parent,
                index.seq_terminal,
                index.seq_context,
                num_terminals=len(index.terminal_names),
                num_contexts=num_contexts + num_context_sets,
            )
            groups = None
        else:  # lazy: the walks and the runtime extend one table of sequences
            self._sequences = index.origins.sequences
            self._loader = OriginLoader(index, self.num_words)
            groups = self._loader.tables()
        self._constraints = ConstraintTable()
        # The parser, its memos and the rows' checks, unions and caches, in C.
        self._parser = parser_for(index, self._sequences, self.num_words, self.eos_row, groups)
        self._state_xset = int_column(index.state_xset)
        self._char_bound = int_column(lexer.char_bound)
        if max(self._char_bound, default=-1) >= 0:
            # Counted lexemes walk the trie near their bound (`items_grown`), reading
            # arrays derived from it once per process (~15 ms with Llama 3): derive them
            # here, with the tables, not inside a decoding step's mask.
            trie = vocab.trie
            trie.level_parents(), trie.level_walk()
        self._longest_token = int(vocab.max_token_bytes)
        self._fingerprint = vocab.fingerprint
        self._lexeme_keys: dict[int, tuple[str, bytes]] = {}
        self._fitting: dict[tuple[int, int], npt.NDArray[np.int32]] = {}
        # Byte classes of the lexer, for jump-forward: one byte walks for all of its class.
        self._class_of_byte: list[int] = lexer.class_of_byte.tolist()
        num_classes = int(lexer.transitions.shape[1])
        self._class_size, self._class_byte = byte_classes(lexer.class_of_byte, num_classes)
        # Widest classes first: inside a string one wide class tells that nothing is forced.
        self._classes_by_size = sorted(range(num_classes), key=lambda c: -self._class_size[c])
        self._token_bytes = vocab.token_bytes
        self._text_token = np.zeros(self.vocab_size, dtype=np.bool_)
        self._text_token[vocab.text_token_ids] = True
        # The parser's rows by id (`config_row`), and caches by configuration set.
        self._rows: list[npt.NDArray[np.int32]] = []
        self._outcomes: dict[tuple[int, int, int], tuple[Outcome, ...]] = {}
        self._byte_outcomes: dict[tuple[int, int, int], tuple[Outcome, ...]] = {}
        self._forced: dict[tuple[tuple[Config, ...], bool], Forced] = {}
        self._forced_ids: dict[tuple[tuple[Config, ...], bool], tuple[int, ...]] = {}
        self._moving: dict[int, tuple[int, ...]] = {}
        self._hits: dict[int, npt.NDArray[np.int32]] = {}
        self._set_rows: dict[tuple[Config, ...], npt.NDArray[np.int32]] = {}

    # -- masks ----------------------------------------------------------------------------

    def config_row(self, stack: int, state: int) -> tuple[npt.NDArray[np.int32], int]:
        """int32[W]: tokens (and EOS) allowed for one unconstrained configuration, and the
        shallowest stack depth that decided it. Computed and cached in C (`Parser.row`)."""
        while True:
            try:
                row, floor = self._parser.row(stack, state)
                return self._row_at(row), floor
            except OriginPending as pending:
                self._walk_origin(pending.args[0])

    def _walk_origin(self, state: int) -> None:
        """Give the parser the groups of origin `state`, which a row asked for (only a
        lazy index leaves origins pending)."""
        if self._loader is None:
            raise ArtifactCorruptError(f"grammar index: origin {state} has no groups")
        self._parser.regroup(self._loader.load(state))

    def _row_at(self, row: int) -> npt.NDArray[np.int32]:
        """The parser's row `row` as a read-only array over its bytes (no copy), kept by id
        with every other row it made since the last call."""
        rows = self._rows
        if row >= len(rows):
            parser = self._parser
            rows.extend(
                np.frombuffer(parser.row_bytes(i), dtype=_INT32) for i in range(len(rows), row + 1)
            )
        return rows[row]

    def _intern_row(self, row: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
        """The one stored copy of a row with these bits (read-only): thousands of
        configuration sets share a few hundred distinct rows, 16 KB each at 128k tokens."""
        return self._row_at(self._parser.intern(row))

    def _bound_caches(self) -> None:
        """Past `_MAX_ROW_ENTRIES` cached configuration sets those caches start over (the
        rows stay, and the parser bounds its own), so a long-running server does not grow
        without bound."""
        if len(self._set_rows) + len(self._forced) + len(self._forced_ids) > _MAX_ROW_ENTRIES:
            self._set_rows.clear()
            self._forced.clear()
            self._forced_ids.clear()

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
                    part = part & self.fitting_row(state, room)
                if cid:
                    eos = part & self.eos_row
                    part = (part & ~self.constraint_row(cid)) | eos
                row |= part
            if fresh and self._parser.accepts_end(configs[0][0])[0]:
                row |= self.eos_row
            row = self._intern_row(row)
            self._bound_caches()
            self._set_rows[key] = row
        return row

    def write_row(
        self, bitmask: memoryview, row: int, configs: tuple[Config, ...], fresh: bool
    ) -> None:
        """`set_row` into one row of a host bitmask: one unconstrained configuration (most
        tokens) is looked up, computed if new, and copied in one C call (`Parser.write_row`)."""
        if len(configs) == 1 and not fresh:
            stack, state, cid, count = configs[0]
            bound = self._char_bound[state]  # `_room`, inlined: every token asks
            if cid == 0 and (bound < 0 or bound - count >= self._longest_token):
                while True:
                    try:
                        self._parser.write_row(bitmask, row, stack, state)
                        return
                    except OriginPending as pending:
                        self._walk_origin(pending.args[0])
        write_row(bitmask, row, self.set_row(configs, fresh))

    # -- advancing ------------------------------------------------------------------------

    def fitting_row(self, state: int, room: int) -> npt.NDArray[np.int32]:
        """int32[W]: tokens that add at most `room` items to the lexeme at `state`.

        Kept per process by the lexeme's content (`lexeme_key`), a row for every room at
        once: every schema's strings under a `maxLength` are the same few lexemes, and a
        first walk would otherwise pay a trie walk per lexer state and a row per room.
        """
        row = self._fitting.get((state, room))
        if row is None:
            key = self._lexeme_keys.get(state)
            if key is None:
                key = self._lexeme_keys[state] = (self._fingerprint, lexeme_key(self.lexer, state))
            rows = _fitting_rows.get_or_make(key, lambda: self._fitting_of(key, state))
            row = self._fitting[(state, room)] = rows[room]
        return row

    def _fitting_of(self, key: tuple[str, bytes], state: int) -> npt.NDArray[np.int32]:
        """int32[R, W]: per room r below the longest token, the tokens that fit in it."""
        grown = _items_grown.get_or_make(key, lambda: self._items_grown_of(state))
        rows = np.zeros((self._longest_token, self.num_words), dtype=np.int32)
        fitting_rows(grown, rows)
        rows.setflags(write=False)
        return rows

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
        found = self._parser.walk_bytes(state, sorted(self._constraints.sets[cid]), data)
        found.sort()  # in `walk_bytes` order
        out = []
        for emitted, end, cons, grown, fresh in found:
            seq = 0
            for terminal, ctx in emitted:
                seq = self._sequences.extend(seq, terminal, ctx)
            out.append((seq, end, self._constraints.intern(frozenset(cons)), grown, fresh))
        return tuple(out)

    def advance(self, configs: tuple[Config, ...], token: int) -> tuple[Config, ...]:
        """The configurations after a text token; empty if no reading survives.

        One unconstrained configuration and a token that stays inside its lexeme (most
        tokens of a first walk) take the C road (`Parser.advance_inside`); the rest walk
        every reading (`walk_bytes`, cached per lexer state and token)."""
        if len(configs) == 1 and not configs[0][2]:
            stack, state, _, count = configs[0]
            inside = self._parser.advance_inside(stack, state, count, token)
            if inside is not None:
                return inside
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
        apply, xset_ok = self._parser.apply, self._parser.xset_ok
        for stack, state, cid, count in configs:
            bound = bounds[state]
            for seq, end, end_cid, grown, fresh in outcomes(state, cid, unit):
                if 0 <= bound < count + grown:
                    continue  # the lexeme would pass its bound
                after, _ = apply(stack, seq)
                if after >= 0 and xset_ok(after, state_xset[end])[0]:
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
            return self._parser.accepts_end(configs[0][0])[0]
        accepts = self._parser.config_accepts_end
        return any(accepts(stack, state)[0] for stack, state, *_ in configs)


_tables_cache: StageMemo[tuple[object, ...], GrammarTables] = StageMemo(_TABLES_CACHE_SIZE)

_items_grown: StageMemo[tuple[str, bytes], npt.NDArray[np.int32]] = StageMemo(
    64, max_bytes=64 << 20, size_of=lambda a: int(a.nbytes)
)
"""Per (vocabulary fingerprint, `lexeme_key`): the items each token adds there."""

_fitting_rows: StageMemo[tuple[str, bytes], npt.NDArray[np.int32]] = StageMemo(
    64, max_bytes=256 << 20, size_of=lambda a: int(a.nbytes)
)
"""Per (vocabulary fingerprint, `lexeme_key`): `GrammarTables.fitting_row` of every room
(2 MB for Llama 3: 128 rooms of 16 KB)."""


def grammar_tables_for(index: GrammarIndex | LazyGrammarIndex) -> GrammarTables:
    """The shared `GrammarTables` of `index` (LRU of 16, keyed by `tables_key`)."""
    return _tables_cache.get_or_make(tables_key(index), lambda: GrammarTables(index))


def clear_grammar_table_memos() -> None:
    """Forget every grammar index's tables and the per-state rows they grew (a benchmark
    measuring a first mask, or a server dropping indexes it will not see again)."""
    for memo in (_tables_cache, _items_grown, _fitting_rows):
        memo.clear()
