"""`Matcher(index)`: per-request decoding state over any compiled index, the runtime half
of the flow.

`Matcher(index)` takes any index a compile function returns and gives the implementation
for its kind, both on the `Matcher` base (`base.py`: shared history, rollback and bitmask
writing, and the `TokenMatcher` protocol): a `DfaMatcher` for a `TokenIndex` (regex, JSON
Schema through a DFA; one static mask per state, `dfa_matcher.py`) and a `GrammarMatcher`
for a `GrammarIndex` (Lark, JSON Schemas that nest without bound; masks that depend on the
parser stack, `grammar_matcher.py`). This module imports both, so `Matcher` finds them.
"""

from __future__ import annotations

from fsmcompile.tables.grammar_index import GrammarIndex
from fsmcompile.tables.lazy_grammar_index import LazyGrammarIndex
from fsmcompile.tables.lazy_index import LazyTokenIndex
from fsmcompile.tables.token_index import TokenIndex

from .base import TERMINATED, Matcher, TokenMatcher
from .dfa_matcher import DfaMatcher
from .grammar_matcher import GrammarMatcher
from .grammar_tables import clear_grammar_table_memos
from .index_tables import IndexTables, clear_index_table_memos, tables_for, tables_key

__all__ = [
    "TERMINATED",
    "DfaMatcher",
    "GrammarMatcher",
    "IndexTables",
    "Matcher",
    "TokenMatcher",
    "clear_table_memos",
    "matcher_for",
    "tables_for",
    "tables_key",
]


def matcher_for(index: TokenIndex | LazyTokenIndex | GrammarIndex | LazyGrammarIndex) -> Matcher:
    """A fresh matcher for any compiled index: `Matcher(index)`."""
    return Matcher(index)


def clear_table_memos() -> None:
    """Forget the lookup tables every index's matchers share, built on an index's first
    matcher and kept (LRU) for the next: what a process measuring its first mask for a
    spec, as a server seeing it for the first time would, must start without."""
    clear_index_table_memos()
    clear_grammar_table_memos()
