"""The one matcher interface of the runtime: `TokenMatcher` (the protocol the engine
adapters type against) and `Matcher`, the base both implementations share.

A matcher follows one generation through an index: it accepts or rejects each sampled
token, writes the allowed-token bitmask for the next step, rolls back rejected
speculation and finds the text every continuation is forced to start with (jump-forward).
The base holds what does not depend on the index's kind: the history, rollback, reset and
writing a row into any bitmask (numpy array or torch tensor, host or device).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np
import numpy.typing as npt

from fsmcompile._native import write_row
from fsmcompile.tables.bits import unpack_row
from fsmcompile.tables.grammar_index import GrammarIndex
from fsmcompile.tables.lazy_grammar_index import LazyGrammarIndex
from fsmcompile.tables.lazy_index import LazyTokenIndex
from fsmcompile.tables.token_index import TokenIndex
from fsmcompile.types import StateId, TokenId

if TYPE_CHECKING:
    from typing import Self

__all__ = ["TERMINATED", "Matcher", "TokenMatcher"]

TERMINATED: StateId = -2
"""Matcher state after EOS was accepted: only EOS may follow, nothing else is consumed."""


class TokenMatcher(Protocol):
    """What the engine adapters need from a matcher; every `Matcher` fits."""

    @property
    def index(self) -> TokenIndex | LazyTokenIndex | GrammarIndex | LazyGrammarIndex: ...

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

    An implementation subclasses this base and says which indexes it serves (`serves`):
    `Matcher(index)` asks each subclass in turn, so this module never imports the
    implementations (they import it). Subclasses keep the tokens' history (`_history`, one
    `_restore`-able entry per accepted token), the allowed row (`_row`) and how to write it
    to host memory (`_write_host_row`); this base does rollback, reset and the bitmask's
    checks.
    """

    __slots__ = ("_history", "_num_words", "_vocab_size", "_out", "_out_key", "_out_view")

    _history: list[Any]
    _num_words: int
    _vocab_size: int

    def __new__(
        cls,
        index: TokenIndex | LazyTokenIndex | GrammarIndex | LazyGrammarIndex,
        *,
        tables: Any = None,
    ) -> Self:
        """The implementation for `index`'s kind (`Matcher(index)`), or `cls` itself."""
        if cls is Matcher:
            return cast("Self", object.__new__(_implementation_for(index)))
        return object.__new__(cls)

    def __init__(
        self,
        index: TokenIndex | LazyTokenIndex | GrammarIndex | LazyGrammarIndex,
        *,
        tables: Any = None,
    ) -> None:
        raise TypeError(f"Matcher cannot enforce a {type(index).__name__}")

    @classmethod
    def serves(cls, index: object) -> bool:
        """Whether this implementation enforces `index` (the base itself serves none)."""
        return False

    @property
    def index(self) -> TokenIndex | LazyTokenIndex | GrammarIndex | LazyGrammarIndex:
        """The index this matcher enforces."""
        raise NotImplementedError

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
    """The `Matcher` subclass that serves `index`'s kind.

    The subclasses are those imported: `fsmcompile.runtime` (whose `__init__` runs before
    any of its modules) imports both, through `matcher.py`.
    """
    for implementation in Matcher.__subclasses__():
        if implementation.serves(index):
            return implementation
    raise TypeError(
        f"Matcher: expected a TokenIndex or GrammarIndex (what compile_regex, "
        f"compile_json_schema, compile_lark and load return), found {type(index).__name__}"
    )


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
    import torch  # only here: a caller with a device tensor has torch; the runtime may not

    dst = _target_row(tensor, row)
    width = src.shape[0]
    dst[:width].copy_(torch.from_numpy(src))
    if dst.shape[0] > width:
        dst[width:].zero_()


def _torch_or_none() -> Any:
    # Only a caller that already imported torch can pass a tensor: never import it here.
    return sys.modules.get("torch")
