"""A grammar index whose token groups are walked per lexer state on first need: a new
grammar spec masks its first token after the lexer is built and one origin is walked,
not every origin.

The compiler hands its walker (`fsmcompile.index.cfg.origins.OriginWalker`) in as the
`OriginSource`; the runtime only asks it for an origin's groups, so it serves a
`LazyGrammarIndex` without importing the compiler. The eager `GrammarIndex` stays the
definition of every row: `complete()` builds it, and the exactness tests hold the rows
made from lazily walked origins to its rows, bit for bit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from fsmcompile.tables.completion import Completion
from fsmcompile.tables.grammar_index import GrammarIndex, next_contexts
from fsmcompile.tables.lark_grammar import ParseTable
from fsmcompile.tables.lexer_automaton import LexerAutomaton
from fsmcompile.tables.sequences import SequenceTable
from fsmcompile.vocabulary import Vocabulary


class OriginSource(Protocol):
    """What walks a grammar's vocabulary from chosen lexer states (the compiler's walker).

    `sequences` is the one table of emitted sequences the walks and the runtime extend
    together, so a sequence id means the same on both sides.
    """

    sequences: SequenceTable

    def walk(
        self, origins: npt.NDArray[np.int64], deadline: float | None = None
    ) -> dict[str, npt.NDArray[Any]]:
        """The token groups of `origins`, as `GrammarIndex` columns local to the batch."""
        ...

    def context_set_columns(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """The context sets interned so far (`GrammarIndex.ctxset_start`/`ctxset_context`)."""
        ...


@dataclass(frozen=True, slots=True, eq=False)
class LazyGrammarIndex:
    """A `GrammarIndex` without its token groups: the runtime walks an origin's groups
    from `origins` the first time a mask reads them (`runtime/lazy_origins.py`).

    The attributes are the `GrammarIndex` attributes of the same name, plus `origins`
    (the `OriginSource`) and `completer` (builds the eager index, or None). Walks extend
    shared tables, so one thread drives an index's matchers, as for a `GrammarIndex`.
    """

    lexer: LexerAutomaton
    table: ParseTable
    terminal_names: tuple[str, ...]
    ignored: npt.NDArray[np.bool_]
    state_xset: npt.NDArray[np.int32]
    xset_start: npt.NDArray[np.int64]
    xset_terminal: npt.NDArray[np.int32]
    xset_context: npt.NDArray[np.int32]
    state_kill: npt.NDArray[np.int32]
    kill_masks: npt.NDArray[np.int32]
    vocabulary: Vocabulary
    kind: str
    spec_hash: str
    origins: OriginSource = field(repr=False)
    completer: Callable[[], GrammarIndex] | None = field(default=None, repr=False)
    _completion: Completion[GrammarIndex] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_completion", Completion(self.completer))

    @property
    def num_states(self) -> int:
        """Lexer states (the origins groups are walked from)."""
        return self.lexer.num_states

    @property
    def vocab_size(self) -> int:
        return self.vocabulary.size

    @property
    def completed(self) -> GrammarIndex | None:
        """The eager index once `complete()` has built it, else None."""
        return self._completion.done

    def next_contexts(self) -> list[list[int]]:
        """Per terminal, the lexer contexts a shift of it can lead to (sorted)."""
        return next_contexts(self.table, len(self.terminal_names))

    def complete(self) -> GrammarIndex:
        """The full eager index of this spec, built once (later calls return it).

        Matchers made before keep serving from their lazily walked groups (equal rows);
        `Matcher(index.complete())` serves from the full one.

        Raises:
            ValueError: the index was made without a completer.
            BudgetExceededError: the completer's budget ran out (a later call retries).
        """
        return self._completion.build()

    def complete_in_background(self) -> threading.Thread:
        """Start a daemon thread that runs `complete()`; a completion that fails (its
        budget ran out) is logged, and matchers go on walking origins on demand."""
        return self._completion.in_background("a lazy grammar index")
