"""Per-request decoding state over a compiled index: the runtime half of the flow.

A matcher follows one generation through an index: it accepts or rejects each sampled
token, writes the allowed-token bitmask for the next step, rolls back rejected
speculation and finds the text every continuation is forced to start with (jump-forward).

`Matcher(index)` takes any index a compile function returns and gives the implementation
for its kind, both on the `Matcher` base (shared history, rollback and bitmask writing):
a `DfaMatcher` for a `TokenIndex` (regex, JSON Schema through a DFA; one static mask per
state, the per-token path a dict lookup and a copy of one row) and a `GrammarMatcher`
for a `GrammarIndex` (Lark, JSON Schemas that nest without bound; masks that depend on
the parser stack, `grammar_matcher.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np
import numpy.typing as npt

from fsmcompile._native import write_row
from fsmcompile.tables.bits import unpack_row
from fsmcompile.types import DEAD, StateId, TokenId

from .index_tables import IndexTables, tables_for, tables_key

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Self

    from fsmcompile.index.cfg.grammar_index import GrammarIndex
    from fsmcompile.tables.token_index import TokenIndex

__all__ = [
    "TERMINATED",
    "DfaMatcher",
    "IndexTables",
    "Matcher",
    "TokenMatcher",
    "matcher_for",
    "tables_for",
    "tables_key",
]

TERMINATED: StateId = -2
"""Matcher state after EOS was accepted: only EOS may follow, nothing else is consumed."""


class TokenMatcher(Protocol):
    """What the engine adapters need from a matcher; every `Matcher` fits."""

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


class Matcher:
    """The decoding state of one request over one compiled index, of any kind.

    `Matcher(index)` returns a `DfaMatcher` for a `TokenIndex` and a `GrammarMatcher` for
    a `GrammarIndex`, so one line serves a regex, any JSON Schema and a Lark grammar.
    Not thread-safe: one matcher per request, driven by one thread. Matchers of the same
    index share its lookup tables, so the first request pays for the walks.

    Subclasses keep the tokens' history (`_history`, one `_restore`-able entry per
    accepted token), the allowed row (`_row`) and how to write it to host memory
    (`_write_host_row`); this base does rollback, reset and the bitmask's checks.
    """

    __slots__ = ("_history", "_num_words", "_vocab_size", "_out", "_out_key", "_out_view")

    _history: list[Any]
    _num_words: int
    _vocab_size: int

    def __new__(cls, index: TokenIndex | GrammarIndex, *, tables: Any = None) -> Self:
        """The implementation for `index`'s kind (`Matcher(index)`), or `cls` itself."""
        if cls is Matcher:
            return cast("Self", object.__new__(_implementation_for(index)))
        return object.__new__(cls)

    def __init__(self, index: TokenIndex | GrammarIndex, *, tables: Any = None) -> None:
        raise TypeError(f"Matcher cannot enforce a {type(index).__name__}")

    def _start(self, num_words: int, vocab_size: int) -> None:
        """What every matcher sets up: an empty history and no bitmask seen yet."""
        self._history = []
        self._num_words = num_words
        self._vocab_size = vocab_size
        self._out: object = None
        self._out_key: object = None
        self._out_view: Any = None

    # -- the kind's own ---------------------------------------------------------------

    def advance(self, token_id: TokenId) -> bool:
        """Consume one sampled token.

        Returns:
            True if the token was allowed (EOS where the text is complete terminates the
            matcher); False if not, and then the state is unchanged. A rejected token is
            an expected outcome on the hot path, so it is a return value, not an exception.
        """
        raise NotImplementedError

    def is_terminated(self) -> bool:
        """Whether EOS has been accepted."""
        raise NotImplementedError

    def is_accepting(self) -> bool:
        """Whether the text so far is complete (EOS would be accepted, or was)."""
        raise NotImplementedError

    def is_complete(self) -> bool:
        """Whether nothing but EOS can follow."""
        raise NotImplementedError

    def forced_bytes(self) -> bytes:
        """The text every continuation from here must start with (b"" if none)."""
        raise NotImplementedError

    def forced_token_ids(self) -> list[TokenId]:
        """Token ids for jump-forward: the canonical encoding of `forced_bytes()`.

        The final token is dropped when some token could span it and a byte allowed next
        (BPE could merge across the boundary) unless the forced text ends where the text
        must stop; a forced text cut inside a UTF-8 character is encoded up to the last
        whole character. Every returned id is accepted by `advance_many` from here.
        """
        raise NotImplementedError

    def _row(self) -> npt.NDArray[np.int32]:
        """int32[W]: the tokens (and EOS) allowed at the next step."""
        raise NotImplementedError

    def _write_host_row(self, bitmask: npt.NDArray[np.int32], row: int) -> None:
        """`_row()` into row `row` of a host int32 array (C checks its shape again)."""
        write_row(bitmask, row, self._row())

    def _restore(self, entry: Any) -> None:
        """Go back to the state a `_history` entry recorded."""
        raise NotImplementedError

    # -- shared -------------------------------------------------------------------------

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
        count = self.advance_many(token_ids)
        self.rollback(count)
        return count

    def rollback(self, num_tokens: int) -> None:
        """Undo the last `num_tokens` accepted tokens (EOS included).

        Raises:
            ValueError: `num_tokens` is negative or more than were accepted since reset.
        """
        history = self._history
        if not 0 <= num_tokens <= len(history):
            raise ValueError(f"cannot roll back {num_tokens} tokens: expected 0..{len(history)}")
        if num_tokens:
            self._restore(history[-num_tokens])
            del history[-num_tokens:]

    def reset(self) -> None:
        """Back to the start with an empty history."""
        if self._history:
            self._restore(self._history[0])
            self._history.clear()

    def fill_bitmask(self, out: Any, row: int = 0) -> None:
        """Write the allowed tokens for the next step into one row of a bitmask.

        `out` is checked on its first use, and its memory at every call: a tensor given
        new storage (`Tensor.set_`, `resize_`) or an array reshaped in place is written
        where its data is now, never where it was.

        Args:
            out: int32[W'] or int32[B, W'] as a numpy array or torch tensor (any device),
                with W' >= ceil(V / 32) for the index's vocabulary size V. Words past the
                index's own width are zeroed (padded logits rows are never allowed).
            row: the row of a 2-D `out` to write.

        Raises:
            TypeError: `out` is not an int32 numpy array or torch tensor.
            ValueError: `out` is too narrow, read-only, or `row` is out of range.
        """
        if out is not self._out or (self._out_key is not None and _layout(out) != self._out_key):
            self._out_view, self._out_key = _bitmask_target(out, self._num_words)
            self._out = out
        view = self._out_view
        if view.__class__ is np.ndarray:
            self._write_host_row(view, row)
        else:
            _fill_device_row(view, row, self._row())

    def allowed_token_ids(self) -> npt.NDArray[np.int64]:
        """Sorted ids allowed at the next step (EOS included where accepted). O(V)."""
        return np.flatnonzero(unpack_row(self._row(), self._vocab_size)).astype(np.int64)


def _implementation_for(index: object) -> type[Matcher]:
    """The `Matcher` subclass for an index's kind (the grammar one imported only then)."""
    from fsmcompile.index.cfg.grammar_index import GrammarIndex
    from fsmcompile.tables.token_index import TokenIndex

    if isinstance(index, TokenIndex) or hasattr(index, "state_mask"):
        return DfaMatcher
    if isinstance(index, GrammarIndex):
        from .grammar_matcher import GrammarMatcher

        return GrammarMatcher
    raise TypeError(
        f"Matcher: expected a TokenIndex or GrammarIndex (what compile_regex, "
        f"compile_json_schema, compile_lark and load return), found {type(index).__name__}"
    )


class DfaMatcher(Matcher):
    """The decoding state of one request over one DFA `TokenIndex`.

    Matchers of the same index share its `IndexTables`, so the first request pays for
    the DFA walks; the per-token path is a dict lookup and a copy of one mask row.
    """

    __slots__ = ("_index", "_tables", "_state", "_eos", "_accepting", "_next", "_stride")

    def __init__(self, index: TokenIndex, *, tables: IndexTables | None = None) -> None:
        """Start at the index's start state.

        Args:
            index: the compiled `TokenIndex` to enforce.
            tables: shared lookup tables; by default those cached for `index`.
        """
        self._index = index
        self._tables = tables if tables is not None else tables_for(index)
        self._start(self._tables.num_words, self._tables.vocab_size)
        self._state: StateId = 0
        self._eos = self._tables.eos_token_ids
        self._accepting = self._tables.accepting
        self._next = self._tables._next
        self._stride = self._tables._stride

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
        if nxt is None or not 0 <= token_id < self._vocab_size:
            # A new step, or an id outside the vocabulary, whose key would alias another
            # state's token: the tables decide.
            nxt = self._tables.next_state(state, token_id)
        if nxt < 0:
            return False
        self._history.append(state)
        self._state = nxt
        return True

    def validate_tokens(self, token_ids: Iterable[TokenId]) -> int:
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

    def _restore(self, entry: StateId) -> None:
        self._state = entry

    def is_terminated(self) -> bool:
        return self._state == TERMINATED

    def is_accepting(self) -> bool:
        state = self._state
        return state == TERMINATED or (state >= 0 and bool(self._accepting[state]))

    def is_complete(self) -> bool:
        """Whether nothing but EOS can follow: accepting with no live byte left."""
        state = self._state
        if state == TERMINATED:
            return True
        return bool(self._accepting[state]) and self._tables.live_bytes(state) == 0

    def _row(self) -> npt.NDArray[np.int32]:
        return self._tables.row_of_state(self._state)

    def _write_host_row(self, bitmask: npt.NDArray[np.int32], row: int) -> None:
        # `_row()` inlined: every token of every request comes here.
        tables = self._tables
        state = self._state
        src = tables.mask_rows[tables.state_mask[state]] if state >= 0 else tables.eos_row
        write_row(bitmask, row, src)

    def forced_bytes(self) -> bytes:
        if self._state < 0:
            return b""
        return self._tables.forced(self._state)[0]

    def forced_token_ids(self) -> list[TokenId]:
        if self._state < 0:
            return []
        return list(self._tables.forced_token_ids(self._state))


def matcher_for(index: TokenIndex | GrammarIndex) -> Matcher:
    """A fresh matcher for any compiled index: `Matcher(index)`."""
    return Matcher(index)


def _layout(tensor: Any) -> tuple[object, ...]:
    """Where a host tensor's words are: its data pointer, shape and strides."""
    return (tensor.data_ptr(), tensor.shape, tensor.stride())


def _bitmask_target(out: Any, num_words: int) -> tuple[Any, tuple[object, ...] | None]:
    """(what to write into, the layout to re-check at each call or None) for `out`.

    A numpy array is written through itself: C reads its buffer at each call, so the
    array may be reshaped or resized and the words still land in its current memory. A
    host tensor has no buffer of its own: it is written through a numpy view of its
    storage, taken again whenever its layout changed. A device tensor gets a copy per
    call.
    """
    if isinstance(out, np.ndarray):
        array = out
        key = None
    else:
        torch = _torch_or_none()
        if torch is None or not isinstance(out, torch.Tensor):
            raise TypeError(f"bitmask must be a numpy array or torch tensor, found {type(out)}")
        if out.dtype != torch.int32:
            raise TypeError(f"bitmask dtype: expected torch.int32, found {out.dtype}")
        _check_shape(tuple(out.shape), num_words)
        if out.device.type != "cpu":
            return out, None
        array = out.numpy()
        key = _layout(out)
    if array.dtype != np.int32:
        raise TypeError(f"bitmask dtype: expected int32, found {array.dtype}")
    if not array.flags.writeable:
        raise ValueError("bitmask is read-only: expected a writeable array")
    _check_shape(array.shape, num_words)
    return array, key


def _check_shape(shape: tuple[int, ...], num_words: int) -> None:
    if len(shape) not in (1, 2) or shape[-1] < num_words:
        raise ValueError(
            f"bitmask shape: expected [{num_words}] or [B, {num_words}] (or wider), "
            f"found {list(shape)}"
        )


def _target_row(bitmask: Any, row: int) -> Any:
    """Row `row` of a [B, W'] bitmask (array or tensor), or a 1-D one itself (row 0)."""
    if bitmask.ndim == 1:
        if row != 0:
            raise ValueError(f"row {row} out of range for a 1-D bitmask: expected 0")
        return bitmask
    if not 0 <= row < bitmask.shape[0]:
        raise ValueError(f"row {row} out of range: expected 0..{bitmask.shape[0] - 1}")
    return bitmask[row]


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
