"""Per-request decoding state over a compiled Lark grammar index: the runtime half of the CFG flow.

A `GrammarMatcher` runs lark's LALR parser incrementally alongside the grammar's lexer. Its
state is a small set of configurations (parser stack, lexer state, open lexer constraints):
usually one, a few right after an ambiguous lexeme end such as `1.` (a finished number
followed by a dot, or an unfinished `1.5`). Per step the work is dictionary lookups in the
`GrammarTables` every matcher of the index shares, and one copy of a cached mask row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from fsmcompile.index.bits import unpack_row
from fsmcompile.types import TokenId

from ._native import write_row
from .grammar_tables import Config, GrammarTables, grammar_tables_for
from .matcher import _bitmask_view, _fill_device_row

if TYPE_CHECKING:
    from collections.abc import Iterable

    from fsmcompile.index.grammar_index import GrammarIndex

__all__ = ["GrammarMatcher", "GrammarTables", "grammar_tables_for"]


class GrammarMatcher:
    """The decoding state of one request over one `GrammarIndex`.

    Same interface as the regex `Matcher`: `advance`, `advance_many`, `validate_tokens`,
    `fill_bitmask`, `allowed_token_ids`, `is_accepting`, `is_complete`, `is_terminated`,
    `rollback`, `reset`, `forced_bytes`, `forced_token_ids`. Not thread-safe: one matcher
    per request, driven by one thread.
    """

    __slots__ = (
        "_index",
        "_tables",
        "_configs",
        "_fresh",
        "_terminated",
        "_history",
        "_eos",
        "_out",
        "_out_view",
    )

    def __init__(self, index: GrammarIndex, *, tables: GrammarTables | None = None) -> None:
        """Start before the first byte of the text.

        Args:
            index: the compiled `GrammarIndex` to enforce.
            tables: shared lookup tables; by default those cached for `index`.
        """
        self._index = index
        self._tables = tables if tables is not None else grammar_tables_for(index)
        self._eos = self._tables.eos_token_ids
        self._history: list[tuple[tuple[Config, ...], bool, bool]] = []
        self._out: object = None
        self._out_view: Any = None
        self._configs: tuple[Config, ...] = ((0, self._tables.start_lexer_state, 0, 0),)
        self._fresh = True
        self._terminated = False

    @property
    def index(self) -> GrammarIndex:
        """The index this matcher enforces."""
        return self._index

    @property
    def tables(self) -> GrammarTables:
        """The lookup tables this matcher shares with the other matchers of its index."""
        return self._tables

    @property
    def configurations(self) -> tuple[Config, ...]:
        """The live readings (stack id, lexer state, constraint id); for tests and debugging."""
        return self._configs

    def advance(self, token_id: TokenId) -> bool:
        """Consume one sampled token.

        Returns:
            True if allowed (EOS where the text is complete terminates the matcher); False
            if not, and then the state is unchanged.
        """
        if self._terminated:
            return False
        if token_id in self._eos:
            if not self._tables.configs_accept_end(self._configs, self._fresh):
                return False
            self._history.append((self._configs, self._fresh, False))
            self._terminated = True
            return True
        nxt = self._tables.advance(self._configs, token_id)
        if not nxt:
            return False
        self._history.append((self._configs, self._fresh, False))
        self._configs = nxt
        self._fresh = False
        return True

    def advance_many(self, token_ids: Iterable[TokenId]) -> int:
        """Consume tokens in order, stopping at the first rejected one; returns the count."""
        count = 0
        for token_id in token_ids:
            if not self.advance(token_id):
                break
            count += 1
        return count

    def validate_tokens(self, token_ids: Iterable[TokenId]) -> int:
        """How many leading tokens of a draft would be accepted; the state is unchanged."""
        count = self.advance_many(token_ids)
        self.rollback(count)
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
            self._configs, self._fresh, self._terminated = self._history[-num_tokens]
            del self._history[-num_tokens:]

    def reset(self) -> None:
        """Back to the start with an empty history."""
        if self._history:
            self._configs, self._fresh, self._terminated = self._history[0]
            self._history.clear()

    def is_terminated(self) -> bool:
        """Whether EOS has been accepted."""
        return self._terminated

    def is_accepting(self) -> bool:
        """Whether the text so far parses completely (EOS would be accepted, or was)."""
        return self._terminated or self._tables.configs_accept_end(self._configs, self._fresh)

    def is_complete(self) -> bool:
        """Whether nothing but EOS can follow (the text is complete and cannot grow)."""
        if self._terminated:
            return True
        row = self._row()
        return bool(np.array_equal(row, self._tables.eos_row)) and self.is_accepting()

    def _row(self) -> npt.NDArray[np.int32]:
        if self._terminated:
            return self._tables.eos_row
        return self._tables.set_row(self._configs, self._fresh)

    def fill_bitmask(self, out: Any, row: int = 0) -> None:
        """Write the allowed tokens for the next step into one row of a bitmask.

        Args:
            out: int32[W'] or int32[B, W'] numpy array or torch tensor, W' >= ceil(V/32).
            row: the row of a 2-D `out` to write.

        Raises:
            TypeError: `out` is not an int32 numpy array or torch tensor.
            ValueError: `out` is too narrow or `row` is out of range.
        """
        if out is not self._out:
            self._out_view = _bitmask_view(out, self._tables.num_words)
            self._out = out
        view = self._out_view
        if not isinstance(view, memoryview):  # a device tensor
            _fill_device_row(view, row, self._row())
        elif self._terminated:
            write_row(view, row, self._tables.eos_row)
        else:
            self._tables.write_row(view, row, self._configs, self._fresh)

    def allowed_token_ids(self) -> npt.NDArray[np.int64]:
        """Sorted ids allowed at the next step (EOS included where complete). O(V)."""
        return np.flatnonzero(unpack_row(self._row(), self._tables.vocab_size)).astype(np.int64)

    def forced_bytes(self) -> bytes:
        """The text every continuation from here must start with (b"" if none)."""
        if self._terminated:
            return b""
        return self._tables.forced(self._configs, self._fresh)[0]

    def forced_token_ids(self) -> list[TokenId]:
        """Token ids for jump-forward: the canonical encoding of `forced_bytes()`.

        As `Matcher.forced_token_ids`: the final token is dropped where BPE could merge it
        with a byte allowed next, unless only EOS may follow the forced text; every
        returned id is accepted by `advance_many` from the current state.
        """
        if self._terminated:
            return []
        return list(self._tables.forced_token_ids(self._configs, self._fresh))
