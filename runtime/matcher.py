"""Per-request decoding state over a compiled token index: the runtime half of the flow.

A `Matcher` follows one generation through a `TokenIndex`: it accepts or rejects each
sampled token, writes the allowed-token bitmask for the next step, rolls back rejected
speculation and finds the text every continuation is forced to start with (jump-forward).

The per-token path is a dict lookup and an `np.copyto` of one mask row. Everything slower
(walking a token's bytes through the DFA, encoding forced text) runs once per distinct
(state, token) or state and is cached in `IndexTables`, which every matcher of the same
index shares.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from fsmcompile.index.bits import bitmask_words, set_bits, unpack_row
from fsmcompile.index.int_columns import int_column
from fsmcompile.memo import StageMemo
from fsmcompile.types import DEAD, StateId, TokenId

from ._native import DfaWalk, write_row
from .jump_forward import FORCED_MAX_BYTES, accepted_prefix, byte_classes, forced_encoding

if TYPE_CHECKING:
    from collections.abc import Iterable

    from fsmcompile.index.grammar_index import GrammarIndex
    from fsmcompile.index.token_index import TokenIndex

TERMINATED: StateId = -2
"""Matcher state after EOS was accepted: only EOS may follow, nothing else is consumed."""

_TABLES_CACHE_SIZE = 32


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

    def __init__(self, index: TokenIndex) -> None:
        vocabulary = index.vocabulary
        masks = np.ascontiguousarray(index.masks, dtype=np.int32)
        self.index = index
        self.vocab_size = int(vocabulary.size)
        self.num_words = int(masks.shape[1])
        if self.num_words < bitmask_words(self.vocab_size):
            raise ValueError(
                f"index masks have {self.num_words} words per row; vocabulary size "
                f"{self.vocab_size} needs {bitmask_words(self.vocab_size)}"
            )
        self.eos_token_ids = frozenset(int(t) for t in vocabulary.eos_token_ids)
        self.eos_row = np.zeros(self.num_words, dtype=np.int32)
        eos = np.array(sorted(t for t in self.eos_token_ids if t < self.vocab_size), np.int64)
        set_bits(self.eos_row, eos)
        dfa = index.dfa
        # Integer columns, not lists: as many items as DFA states, none of which the
        # garbage collector visits (`int_column`).
        self.accepting = int_column(dfa.accepting)
        self.state_mask = int_column(index.state_mask)
        # A state whose mask is empty (the vocabulary cannot spell any continuation) gets
        # the EOS-only row: an all -inf logits row would turn sampling into NaNs. The
        # matcher still rejects that EOS, so the engine sees a flagged, ended request.
        nonempty: list[bool] = np.any(masks, axis=1).astype(bool).tolist()
        self.mask_rows: list[npt.NDArray[np.int32]] = [
            masks[m] if nonempty[m] else self.eos_row for m in range(masks.shape[0])
        ]
        self._masks = masks
        self._transitions = dfa.transitions
        self._rows: dict[StateId, list[int]] = {}
        # A new (state, token) step is walked in C, through the vocabulary's flat bytes.
        text_bytes, text_start = vocabulary.text_spans
        self._steps = DfaWalk(
            (
                np.ascontiguousarray(dfa.transitions, dtype=np.int32).reshape(-1),
                np.ascontiguousarray(dfa.class_of_byte, dtype=np.int32),
                np.frombuffer(text_bytes, dtype=np.uint8),
                text_start,
                np.ascontiguousarray(index.state_mask, dtype=np.int32),
                masks.reshape(-1),
            ),
            int(dfa.num_classes),
            self.num_words,
        )
        self._next: dict[int, StateId] = {}
        self._stride = self.vocab_size + 1
        self._forced: dict[StateId, tuple[bytes, StateId]] = {}
        self._forced_ids: dict[StateId, tuple[TokenId, ...]] = {}
        self._live_bytes: dict[StateId, int] = {}
        self._class_sizes, self._byte_of_class = byte_classes(dfa.class_of_byte, dfa.num_classes)

    def row_of_state(self, state: StateId) -> npt.NDArray[np.int32]:
        """The int32[W] mask row for `state` (EOS-only once terminated)."""
        if state < 0:
            return self.eos_row
        return self.mask_rows[self.state_mask[state]]

    def next_state(self, state: StateId, token_id: TokenId) -> StateId:
        """The state after a text token, DEAD if the mask forbids it. EOS is the caller's."""
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


_tables_cache: StageMemo[tuple[object, ...], IndexTables] = StageMemo(_TABLES_CACHE_SIZE)


def tables_for(index: TokenIndex) -> IndexTables:
    """The shared `IndexTables` of `index` (LRU of 32, keyed by `tables_key`)."""
    return _tables_cache.get_or_make(tables_key(index), lambda: IndexTables(index))


def tables_key(index: TokenIndex | GrammarIndex) -> tuple[object, ...]:
    """What an index's runtime tables are made of: its vocabulary's content and the
    identity of its other parts, all but the spec hash and kind.

    Indexes of one language share their parts (`compiler._indexes`), and so their tables,
    warm from the first one's requests. A cached entry holds an index made of those parts,
    so an `id()` in a key never names a recycled object.
    """
    parts = (getattr(index, name) for name in index.__dataclass_fields__ if name not in _UNREAD)
    return (index.vocabulary.fingerprint, *map(id, parts))


_UNREAD = frozenset({"vocabulary", "kind", "spec_hash", "_next"})


class Matcher:
    """The decoding state of one request over one `TokenIndex`.

    Not thread-safe: one matcher per request, driven by one thread. Matchers of the same
    index share its `IndexTables`, so the first request pays for the DFA walks.
    """

    __slots__ = (
        "_index",
        "_tables",
        "_state",
        "_history",
        "_eos",
        "_accepting",
        "_next",
        "_stride",
        "_out",
        "_out_view",
    )

    def __init__(self, index: TokenIndex, *, tables: IndexTables | None = None) -> None:
        """Start at the index's start state.

        Args:
            index: the compiled `TokenIndex` to enforce.
            tables: shared lookup tables; by default those cached for `index`.
        """
        self._index = index
        self._tables = tables if tables is not None else tables_for(index)
        self._state: StateId = 0
        self._history: list[StateId] = []
        self._eos = self._tables.eos_token_ids
        self._accepting = self._tables.accepting
        self._next = self._tables._next
        self._stride = self._tables._stride
        self._out: object = None
        self._out_view: Any = None

    @property
    def index(self) -> TokenIndex:
        """The index this matcher enforces."""
        return self._index

    @property
    def tables(self) -> IndexTables:
        """The lookup tables this matcher shares with the other matchers of its index."""
        return self._tables

    @property
    def state(self) -> StateId:
        """The current DFA state; -2 once EOS was accepted."""
        return self._state

    def advance(self, token_id: TokenId) -> bool:
        """Consume one sampled token.

        Returns:
            True if the token was allowed (EOS in an accepting state terminates the
            matcher); False if not, and then the state is unchanged. A rejected token is an
            expected outcome on the hot path, so it is a return value, not an exception.
        """
        state = self._state
        if state < 0:
            return False
        if token_id in self._eos:
            if not self._accepting[state]:
                return False
            self._history.append(state)
            self._state = TERMINATED
            return True
        nxt = self._next.get(state * self._stride + token_id)
        if nxt is None:
            nxt = self._tables.next_state(state, token_id)
        if nxt < 0:
            return False
        self._history.append(state)
        self._state = nxt
        return True

    def advance_many(self, token_ids: Iterable[TokenId]) -> int:
        """Consume tokens in order, stopping at the first rejected one.

        Returns:
            How many were consumed; the matcher stays after the last accepted token.
        """
        count = 0
        for token_id in token_ids:
            if not self.advance(token_id):
                break
            count += 1
        return count

    def validate_tokens(self, token_ids: Iterable[TokenId]) -> int:
        """How many leading tokens of a speculative draft would be accepted; no state change."""
        state = self._state
        tables = self._tables
        count = 0
        for token_id in token_ids:
            if state < 0:
                break
            if token_id in self._eos:
                if not self._accepting[state]:
                    break
                state = TERMINATED
            else:
                state = tables.next_state(state, token_id)
                if state == DEAD:
                    break
            count += 1
        return count

    def rollback(self, num_tokens: int) -> None:
        """Undo the last `num_tokens` accepted tokens (EOS included).

        Raises:
            ValueError: `num_tokens` is negative or more than were accepted since reset.
        """
        if not 0 <= num_tokens <= len(self._history):
            raise ValueError(
                f"cannot roll back {num_tokens} tokens: expected 0..{len(self._history)}"
            )
        if num_tokens:
            self._state = self._history[-num_tokens]
            del self._history[-num_tokens:]

    def reset(self) -> None:
        """Back to the start state with an empty history."""
        self._state = 0
        self._history.clear()

    def is_terminated(self) -> bool:
        """Whether EOS has been accepted."""
        return self._state == TERMINATED

    def is_accepting(self) -> bool:
        """Whether the text so far is a complete match (EOS would be accepted, or was)."""
        state = self._state
        return state == TERMINATED or (state >= 0 and bool(self._accepting[state]))

    def is_complete(self) -> bool:
        """Whether nothing but EOS can follow: accepting with no live byte left."""
        state = self._state
        if state == TERMINATED:
            return True
        return bool(self._accepting[state]) and self._tables.live_bytes(state) == 0

    def fill_bitmask(self, out: Any, row: int = 0) -> None:
        """Write the allowed tokens for the next step into one row of a bitmask.

        Args:
            out: int32[W'] or int32[B, W'] as a numpy array or torch tensor (any device),
                with W' >= ceil(V / 32) for the index's vocabulary size V. Words past the
                index's own width are zeroed (padded logits rows are never allowed).
            row: the row of a 2-D `out` to write.

        Raises:
            TypeError: `out` is not an int32 numpy array or torch tensor.
            ValueError: `out` is too narrow or `row` is out of range.
        """
        src = self._tables.row_of_state(self._state)
        if out is not self._out:
            self._out_view = _bitmask_view(out, self._tables.num_words)
            self._out = out
        view = self._out_view
        if isinstance(view, memoryview):
            write_row(view, row, src)
            return
        _fill_device_row(view, row, src)

    def allowed_token_ids(self) -> npt.NDArray[np.int64]:
        """Sorted ids allowed at the next step (EOS included where accepted). O(V)."""
        src = self._tables.row_of_state(self._state)
        return np.flatnonzero(unpack_row(src, self._tables.vocab_size)).astype(np.int64)

    def forced_bytes(self) -> bytes:
        """The text every continuation from here must start with (b"" if none)."""
        if self._state < 0:
            return b""
        return self._tables.forced(self._state)[0]

    def forced_token_ids(self) -> list[TokenId]:
        """Token ids for jump-forward: the canonical encoding of `forced_bytes()`.

        The final token is dropped when some token could span it and a byte allowed next
        (BPE could merge across the boundary) unless the forced text ends where the
        automaton must stop; a forced text cut
        inside a UTF-8 character is encoded up to the last whole character. Every returned
        id is accepted by `advance_many` from the current state.
        """
        if self._state < 0:
            return []
        return list(self._tables.forced_token_ids(self._state))


class TokenMatcher(Protocol):
    """What the engine adapters need from a matcher: `Matcher` and `GrammarMatcher` fit."""

    def advance(self, token_id: TokenId) -> bool: ...

    def advance_many(self, token_ids: Iterable[TokenId]) -> int: ...

    def validate_tokens(self, token_ids: Iterable[TokenId]) -> int: ...

    def rollback(self, num_tokens: int) -> None: ...

    def reset(self) -> None: ...

    def is_terminated(self) -> bool: ...

    def is_accepting(self) -> bool: ...

    def is_complete(self) -> bool: ...

    def fill_bitmask(self, out: Any, row: int = 0) -> None: ...

    def allowed_token_ids(self) -> npt.NDArray[np.int64]: ...

    def forced_bytes(self) -> bytes: ...

    def forced_token_ids(self) -> list[TokenId]: ...


def matcher_for(index: Any) -> TokenMatcher:
    """A fresh matcher for any compiled index.

    A regex or JSON Schema `TokenIndex` (a DFA with one static mask per state) gets a
    `Matcher`; a Lark `GrammarIndex` (masks depend on the parser stack) gets a
    `GrammarMatcher`, imported only then.
    """
    if hasattr(index, "state_mask"):
        return Matcher(index)
    from .grammar_matcher import GrammarMatcher

    return GrammarMatcher(index)


def _target_row(bitmask: Any, row: int) -> Any:
    """Row `row` of a [B, W'] bitmask (array or tensor), or a 1-D one itself (row 0)."""
    if bitmask.ndim == 1:
        if row != 0:
            raise ValueError(f"row {row} out of range for a 1-D bitmask: expected 0")
        return bitmask
    if not 0 <= row < bitmask.shape[0]:
        raise ValueError(f"row {row} out of range: expected 0..{bitmask.shape[0] - 1}")
    return bitmask[row]


def _bitmask_view(out: Any, num_words: int) -> Any:
    """Validate `out` once per object; a memoryview of host memory (what `write_row`
    reads a row's place from, far cheaper than a numpy array's buffer export each token),
    else the tensor."""
    if isinstance(out, np.ndarray):
        array = out
    else:
        torch = _torch_or_none()
        if torch is None or not isinstance(out, torch.Tensor):
            raise TypeError(f"bitmask must be a numpy array or torch tensor, found {type(out)}")
        if out.dtype != torch.int32:
            raise TypeError(f"bitmask dtype: expected torch.int32, found {out.dtype}")
        if out.device.type != "cpu":
            _check_shape(tuple(out.shape), num_words)
            return out
        array = out.numpy()
    if array.dtype != np.int32:
        raise TypeError(f"bitmask dtype: expected int32, found {array.dtype}")
    if not array.flags.writeable:
        raise ValueError("bitmask is read-only: expected a writeable array")
    _check_shape(array.shape, num_words)
    return array.data


def _check_shape(shape: tuple[int, ...], num_words: int) -> None:
    if len(shape) not in (1, 2) or shape[-1] < num_words:
        raise ValueError(
            f"bitmask shape: expected [{num_words}] or [B, {num_words}] (or wider), "
            f"found {list(shape)}"
        )


def _fill_device_row(tensor: Any, row: int, src: npt.NDArray[np.int32]) -> None:
    """Copy one row to a device tensor: a host-to-device copy per call, for tests and HF."""
    import torch

    dst = _target_row(tensor, row)
    width = src.shape[0]
    dst[:width].copy_(torch.from_numpy(src))
    if dst.shape[0] > width:
        dst[width:].zero_()


def _torch_or_none() -> Any:
    import sys

    # Only a caller that already imported torch can pass a tensor: never import it here.
    return sys.modules.get("torch")
