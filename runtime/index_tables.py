"""Lookup tables of one DFA `TokenIndex`, built once and shared by every matcher of it.

A regex or non-recursive JSON Schema index is a DFA with one static mask per state; what
the runtime adds is the per-(state, token) steps, the forced text of a state and the mask
rows as arrays, all cached here (`tables_for`) so the first request of an index pays for
the walks and the rest look them up. A `LazyTokenIndex` gets `LazyIndexTables`: the same
lookups, with a state's row asked of the index the first time a matcher needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from fsmcompile._native import DfaWalk
from fsmcompile.memo import StageMemo
from fsmcompile.tables.bits import bitmask_words, set_bits
from fsmcompile.tables.int_columns import int_column
from fsmcompile.tables.lazy_grammar_index import LazyGrammarIndex
from fsmcompile.tables.lazy_index import LazyTokenIndex
from fsmcompile.types import DEAD, StateId, TokenId

from .jump_forward import FORCED_MAX_BYTES, accepted_prefix, byte_classes, forced_encoding

if TYPE_CHECKING:
    from fsmcompile.tables.grammar_index import GrammarIndex
    from fsmcompile.tables.token_index import TokenIndex

_TABLES_CACHE_SIZE = 32

MaskRows = list[npt.NDArray[np.int32]] | dict[int, npt.NDArray[np.int32]]
"""The rows by mask id: a list when every row is known, a dict filled on demand when not."""


class IndexTables:
    """Lookup tables for one `TokenIndex`, built once and shared by all its matchers.

    Why not store these on the index: `TokenIndex` is a frozen artifact type and the
    compiler must not learn about runtime caches. Why Python containers: on the hot path a
    dict lookup on an int beats any numpy call by 10x, and per-(state, token) results are
    reused across every request that uses the same spec.

    Memory grows with the (state, token) pairs actually visited, not with S x V.
    """

    __slots__ = (
        "index",
        "vocab_size",
        "num_words",
        "eos_token_ids",
        "eos_row",
        "accepting",
        "state_mask",
        "mask_rows",
        "_masks",
        "_transitions",
        "_rows",
        "_steps",
        "_next",
        "_stride",
        "_forced",
        "_forced_ids",
        "_live_bytes",
        "_class_sizes",
        "_byte_of_class",
    )

    index: TokenIndex | LazyTokenIndex
    mask_rows: MaskRows

    def __init__(self, index: TokenIndex) -> None:
        masks = np.ascontiguousarray(index.masks, dtype=np.int32)
        self._set_common(index, int(masks.shape[1]))
        self.state_mask = int_column(index.state_mask)
        # A state whose mask is empty (the vocabulary cannot spell any continuation) gets
        # the EOS-only row: an all -inf logits row would turn sampling into NaNs. The
        # matcher still rejects that EOS, so the engine sees a flagged, ended request.
        nonempty: list[bool] = np.any(masks, axis=1).astype(bool).tolist()
        self.mask_rows = [masks[m] if nonempty[m] else self.eos_row for m in range(masks.shape[0])]
        self._masks = masks
        self._steps = self._dfa_walk(index.state_mask, masks)

    def _set_common(self, index: TokenIndex | LazyTokenIndex, num_words: int) -> None:
        """What the tables of either DFA index type hold alike: the vocabulary's terms,
        the automaton's rows and the per-(state, token) caches."""
        vocabulary = index.vocabulary
        self.index = index
        self.vocab_size = int(vocabulary.size)
        self.num_words = num_words
        if self.num_words < bitmask_words(self.vocab_size):
            raise ValueError(
                f"index masks have {self.num_words} words per row; vocabulary size "
                f"{self.vocab_size} needs {bitmask_words(self.vocab_size)}"
            )
        # Only ids of the vocabulary end a text: an id outside it is no token a model can
        # sample, and a negative one must not turn into a bit or an accepted `advance(-1)`.
        self.eos_token_ids = frozenset(
            int(t) for t in vocabulary.eos_token_ids if 0 <= t < self.vocab_size
        )
        self.eos_row = np.zeros(self.num_words, dtype=np.int32)
        set_bits(self.eos_row, np.array(sorted(self.eos_token_ids), dtype=np.int64))
        dfa = index.dfa
        # Integer columns, not lists: as many items as DFA states, none of which the
        # garbage collector visits (`int_column`).
        self.accepting = int_column(dfa.accepting)
        self._transitions = dfa.transitions
        self._rows: dict[StateId, list[int]] = {}
        self._next: dict[int, StateId] = {}
        self._stride = self.vocab_size + 1
        self._forced: dict[StateId, tuple[bytes, StateId]] = {}
        self._forced_ids: dict[StateId, tuple[TokenId, ...]] = {}
        self._live_bytes: dict[StateId, int] = {}
        self._class_sizes, self._byte_of_class = byte_classes(dfa.class_of_byte, dfa.num_classes)

    def _dfa_walk(self, state_mask: npt.NDArray[np.int32], masks: npt.NDArray[np.int32]) -> DfaWalk:
        """The C walk of new (state, token) steps, through the vocabulary's flat bytes;
        a token whose bit is clear in its state's row of `masks` is refused unwalked."""
        dfa = self.index.dfa
        text_bytes, text_start = self.index.vocabulary.text_spans
        return DfaWalk(
            transitions=np.ascontiguousarray(dfa.transitions, dtype=np.int32).reshape(-1),
            class_of_byte=np.ascontiguousarray(dfa.class_of_byte, dtype=np.int32),
            text_bytes=np.frombuffer(text_bytes, dtype=np.uint8),
            text_start=text_start,
            state_mask=np.ascontiguousarray(state_mask, dtype=np.int32),
            masks=np.ascontiguousarray(masks, dtype=np.int32).reshape(-1),
            num_classes=int(dfa.num_classes),
            num_words=self.num_words,
        )

    def all_mask_rows(self) -> list[npt.NDArray[np.int32]]:
        """Every row, in mask id order (what a device table uploads)."""
        rows = self.mask_rows
        return [rows[m] for m in range(len(rows))]

    def row_of_state(self, state: StateId) -> npt.NDArray[np.int32]:
        """The int32[W] mask row for `state` (EOS-only once terminated)."""
        if state < 0:
            return self.eos_row
        return self.mask_rows[self.state_mask[state]]

    def next_state(self, state: StateId, token_id: TokenId) -> StateId:
        """The state after a text token, DEAD if the mask forbids it or it is no token of
        the vocabulary (an id outside it would alias another (state, token) key). EOS is
        the caller's."""
        if not 0 <= token_id < self.vocab_size:
            return DEAD
        key = state * self._stride + token_id
        nxt = self._next.get(key)
        if nxt is None:
            nxt = self._next[key] = self._steps.next_state(state, token_id)
        return nxt

    def _row(self, state: StateId) -> list[int]:
        row = self._rows.get(state)
        if row is None:
            row = self._transitions[state].tolist()
            self._rows[state] = row
        return row

    def live_bytes(self, state: StateId) -> int:
        """How many byte values lead somewhere alive from `state` (0: only EOS is left)."""
        count = self._live_bytes.get(state)
        if count is None:
            row = self._row(state)
            count = sum(self._class_sizes[c] for c, dst in enumerate(row) if dst != DEAD)
            self._live_bytes[state] = count
        return count

    def forced(self, state: StateId) -> tuple[bytes, StateId]:
        """The bytes every continuation from `state` starts with, and the state after them.

        The walk stops at an accepting state (the text may end there) and at any state
        with two or more live bytes. Cost: O(len(forced) x C) once per state.
        """
        hit = self._forced.get(state)
        if hit is not None:
            return hit
        out = bytearray()
        cur = state
        while not self.accepting[cur] and len(out) < FORCED_MAX_BYTES:
            if self.live_bytes(cur) != 1:
                break
            row = self._row(cur)
            cls = next(c for c, dst in enumerate(row) if dst != DEAD)
            out.append(self._byte_of_class[cls])
            cur = row[cls]
        result = (bytes(out), cur)
        self._forced[state] = result
        return result

    def forced_token_ids(self, state: StateId) -> tuple[TokenId, ...]:
        """Token ids for the forced text from `state` (see `Matcher.forced_token_ids`)."""
        hit = self._forced_ids.get(state)
        if hit is not None:
            return hit
        data, end = self.forced(state)
        row = self._row(end)
        classes = self.index.dfa.class_of_byte
        encoded = forced_encoding(
            self.index.vocabulary,
            data,
            must_stop=bool(self.accepting[end]) and self.live_bytes(end) == 0,
            next_byte_ok=lambda b: row[int(classes[b])] != DEAD,
        )

        def step(cur: StateId, token: TokenId) -> StateId | None:
            nxt = self.next_state(cur, token) if token not in self.eos_token_ids else DEAD
            return None if nxt == DEAD else nxt

        ids = accepted_prefix(encoded, state, step)
        self._forced_ids[state] = ids
        return ids


class LazyRows(dict[int, npt.NDArray[np.int32]]):
    """State → mask row, each asked of the `LazyTokenIndex` on its first lookup.

    A dict for the hot path's sake: a hit is the plain dict lookup the eager list's is,
    and only a miss runs Python (`__missing__`). Two threads missing one state both ask
    the index, which hands both the same row.
    """

    __slots__ = ("_index", "_eos_row")

    def __init__(self, index: LazyTokenIndex, eos_row: npt.NDArray[np.int32]) -> None:
        super().__init__()
        self._index = index
        self._eos_row = eos_row

    def __missing__(self, state: int) -> npt.NDArray[np.int32]:
        row = self._index.mask_row(state)
        # As the eager tables do: an empty row serves EOS only (see `IndexTables`).
        if not row.any():
            row = self._eos_row
        self[state] = row
        return row


class LazyIndexTables(IndexTables):
    """The tables of a `LazyTokenIndex`: each state is its own mask id, and its row is
    made on the first lookup (`LazyRows`)."""

    __slots__ = ()

    def __init__(self, index: LazyTokenIndex) -> None:
        self._set_common(index, bitmask_words(index.vocab_size))
        num_states = index.num_states
        self.state_mask = int_column(np.arange(num_states, dtype=np.int64))
        self.mask_rows = LazyRows(index, self.eos_row)
        # The C step refuses a token whose bit is clear in its state's row. With no rows
        # yet, every state reads one row of every text token: a text token is in a
        # state's mask exactly when its walk stays alive, which the C step then decides,
        # and ids without text (special tokens) are refused as the eager row refuses them.
        text = np.zeros((1, self.num_words), dtype=np.int32)
        set_bits(text[0], index.vocabulary.trie.token_ids)
        self._masks = text
        self._steps = self._dfa_walk(np.zeros(num_states, dtype=np.int32), text)

    def all_mask_rows(self) -> list[npt.NDArray[np.int32]]:
        """Every state's row, in state order (made now where not yet made)."""
        rows = self.mask_rows
        return [rows[state] for state in range(self.index.num_states)]


_tables_cache: StageMemo[tuple[object, ...], IndexTables] = StageMemo(_TABLES_CACHE_SIZE)


def tables_for(index: TokenIndex | LazyTokenIndex) -> IndexTables:
    """The shared `IndexTables` of `index` (LRU of 32, keyed by `tables_key`)."""

    def make() -> IndexTables:
        if isinstance(index, LazyTokenIndex):
            return LazyIndexTables(index)
        return IndexTables(index)

    return _tables_cache.get_or_make(tables_key(index), make)


def tables_key(
    index: TokenIndex | LazyTokenIndex | GrammarIndex | LazyGrammarIndex,
) -> tuple[object, ...]:
    """What an index's runtime tables are made of: its vocabulary's content and the
    identity of its other parts, all but the spec hash and kind.

    Indexes of one language share their parts (`CompileMemos.indexes`), and so their tables,
    warm from the first one's requests. A cached entry holds an index made of those parts,
    so an `id()` in a key never names a recycled object.
    """
    parts = (getattr(index, name) for name in index.__dataclass_fields__ if name not in _UNREAD)
    return (index.vocabulary.fingerprint, *map(id, parts))


_UNREAD = frozenset({"vocabulary", "kind", "spec_hash", "_next"})


def clear_index_table_memos() -> None:
    """Forget every DFA index's tables (see `clear_table_memos` in matcher.py)."""
    _tables_cache.clear()
