"""Per-request decoding state over a compiled Lark grammar index: the runtime half of the CFG flow.

A `GrammarMatcher` runs lark's LALR parser incrementally alongside the grammar's lexer. Its
state is a small set of configurations (parser stack, lexer state, open lexer constraints):
usually one, a few right after an ambiguous lexeme end such as `1.` (a finished number
followed by a dot, or an unfinished `1.5`). Per step the work is dictionary lookups in the
`GrammarTables` every matcher of the index shares, and one copy of a cached mask row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from fsmcompile._native import write_row
from fsmcompile.errors import ArtifactCorruptError
from fsmcompile.tables.grammar_index import GrammarIndex
from fsmcompile.tables.lazy_grammar_index import LazyGrammarIndex
from fsmcompile.types import TokenId

from .base import Matcher
from .grammar_tables import Config, GrammarTables, grammar_tables_for

__all__ = ["GrammarMatcher", "GrammarTables", "grammar_tables_for"]


class GrammarMatcher(Matcher):
    """The decoding state of one request over one `GrammarIndex` (what `Matcher(index)`
    returns for one).

    Matchers of the same index share its `GrammarTables`. Not thread-safe: one matcher
    per request, driven by one thread.
    """

    __slots__ = ("_index", "_tables", "_configs", "_fresh", "_terminated", "_eos")

    @classmethod
    def serves(cls, index: object) -> bool:
        return isinstance(index, GrammarIndex | LazyGrammarIndex)

    def __init__(
        self, index: GrammarIndex | LazyGrammarIndex, *, tables: GrammarTables | None = None
    ) -> None:
        """Start before the first byte of the text.

        Args:
            index: the compiled `GrammarIndex` to enforce, or a `LazyGrammarIndex` (its
                lexer states' token groups are walked as rows first need them).
            tables: shared lookup tables; by default those cached for `index`.
        """
        self._index = index
        self._tables = tables if tables is not None else grammar_tables_for(index)
        self._start(self._tables.num_words, self._tables.vocab_size)
        self._eos = self._tables.eos_token_ids
        self._configs: tuple[Config, ...] = ((0, self._tables.start_lexer_state, 0, 0),)
        self._fresh = True
        self._terminated = False

    @property
    def index(self) -> GrammarIndex | LazyGrammarIndex:
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

        Raises:
            ArtifactCorruptError: the index's tables let the token's bytes branch into more
                readings than any walk may hold (`walk_bytes`); the state is unchanged.
        """
        if self._terminated:
            return False
        if token_id in self._eos:
            if not self._tables.configs_accept_end(self._configs, self._fresh):
                return False
            self._history.append((self._configs, self._fresh, False))
            self._terminated = True
            return True
        try:
            nxt = self._tables.advance(self._configs, token_id)
        except ValueError as error:
            raise _walk_error(error) from error
        if not nxt:
            return False
        self._history.append((self._configs, self._fresh, False))
        self._configs = nxt
        self._fresh = False
        return True

    def _restore(self, entry: tuple[tuple[Config, ...], bool, bool]) -> None:
        self._configs, self._fresh, self._terminated = entry

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

    def _write_host_row(self, bitmask: Any, row: int) -> None:
        # One unconstrained configuration (most tokens) is looked up, computed if new and
        # copied in one C call (`GrammarTables.write_row`).
        if self._terminated:
            write_row(bitmask, row, self._tables.eos_row)
        else:
            self._tables.write_row(bitmask, row, self._configs, self._fresh)

    def forced_bytes(self) -> bytes:
        """The text every continuation from here must start with (b"" if none)."""
        if self._terminated:
            return b""
        try:
            return self._tables.forced(self._configs, self._fresh)[0]
        except ValueError as error:
            raise _walk_error(error) from error

    def forced_token_ids(self) -> list[TokenId]:
        """Token ids for jump-forward: the canonical encoding of `forced_bytes()`.

        As `Matcher.forced_token_ids`: the final token is dropped where BPE could merge it
        with a byte allowed next, unless only EOS may follow the forced text; every
        returned id is accepted by `advance_many` from the current state.
        """
        if self._terminated:
            return []
        try:
            return list(self._tables.forced_token_ids(self._configs, self._fresh))
        except ValueError as error:
            raise _walk_error(error) from error


def _walk_error(error: ValueError) -> ArtifactCorruptError:
    """The error of a walk the C parser refused (`Parser.walk_bytes`: more readings of a
    token's bytes than its bound). A grammar's walks hold a few readings a byte; a parse
    table that sends one terminal's shifts into several lexer contexts, each taking that
    terminal again, doubles them per repeat, so the request fails here instead of waiting
    out an exponential walk."""
    return ArtifactCorruptError(f"grammar index tables: {error}")
