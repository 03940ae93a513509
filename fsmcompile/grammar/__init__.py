"""The CFG back end: grammar text or generated rules → `LarkGrammar` (LALR tables, lexer
contexts, terminals as IR), and the lexing check behind generated grammars.

lark itself is imported only when a grammar is loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fsmcompile.tables.lark_grammar import LarkGrammar, LexerContext, ParseTable, Terminal

if TYPE_CHECKING:
    from fsmcompile.frontend.lark.options import LarkOptions

__all__ = ["LarkGrammar", "LexerContext", "ParseTable", "Terminal", "load_lark_grammar"]


def load_lark_grammar(
    text: str,
    options: LarkOptions | Mapping[str, Any] | None = None,
    *,
    max_states: int | None = None,
) -> LarkGrammar:
    """Analyse a grammar with lark (see `loading.load_lark_grammar` for the errors)."""
    from fsmcompile.grammar.loading import load_lark_grammar as load

    return load(text, options, max_states=max_states)
