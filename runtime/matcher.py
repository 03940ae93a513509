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
from fsmcompile.tables.lazy_index import LazyTokenIndex
from fsmcompile.tables.token_index import TokenIndex

from .base import TERMINATED, Matcher, TokenMatcher
from .dfa_matcher import DfaMatcher
from .grammar_matcher import GrammarMatcher
from .index_tables import IndexTables, tables_for, tables_key

__all__ = [
    "TERMINATED",
    "DfaMatcher",
    "GrammarMatcher",
    "IndexTables",
    "Matcher",
    "TokenMatcher",
    "matcher_for",
    "tables_for",
    "tables_key",
]


def matcher_for(index: TokenIndex | LazyTokenIndex | GrammarIndex) -> Matcher:
    """A fresh matcher for any compiled index: `Matcher(index)`."""
    return Matcher(index)
