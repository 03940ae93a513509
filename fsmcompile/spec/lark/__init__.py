"""The Lark front end: grammar text → `LarkGrammar` → `GrammarIndex` for one tokenizer.

`compile_lark_index` is what `fsmcompile.compiler` calls for kind "lark". lark itself is
imported only when a grammar is loaded, so the runtime can use the data types without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fsmcompile.spec.lark.grammar import LarkGrammar, LexerContext, ParseTable, Terminal

if TYPE_CHECKING:
    from fsmcompile.index.grammar_index import GrammarIndex
    from fsmcompile.vocabulary import Vocabulary

__all__ = [
    "LarkGrammar",
    "LexerContext",
    "ParseTable",
    "Terminal",
    "compile_lark_index",
    "load_lark_grammar",
]


def load_lark_grammar(
    text: str, options: Mapping[str, Any] | None = None, *, max_states: int | None = None
) -> LarkGrammar:
    """Analyse a grammar with lark (see `loading.load_lark_grammar` for the errors)."""
    from fsmcompile.spec.lark.loading import load_lark_grammar as load

    return load(text, options, max_states=max_states)


def compile_lark_index(
    spec: str,
    vocab: Vocabulary,
    *,
    options: Mapping[str, Any] | None = None,
    max_states: int = 200_000,
    deadline: float | None = None,
) -> GrammarIndex:
    """Compile a Lark grammar (LALR, contextual lexer) into a token index for `vocab`.

    The index allows exactly the texts `Lark(spec, parser="lalr").parse` accepts, token
    by token, with EOS where the text is complete.

    Args:
        spec: the grammar source.
        vocab: the tokenizer.
        options: `start` (start rule, default "start"), `strict` (lark's strict mode).
        max_states: the largest lexer automaton allowed; also bounds lark's analysis
            (`analysis_size.py`).
        deadline: `time.monotonic()` value past which the compile stops.

    Raises:
        GrammarError: the grammar does not build (`line`/`column` say where when known).
        UnsupportedFeatureError: constructs no token mask can follow exactly (listed).
        BudgetExceededError: `max_states` or `deadline` exceeded.
    """
    from fsmcompile.automaton.budget import check_deadline, compile_deadline
    from fsmcompile.index.grammar_index import build_grammar_index
    from fsmcompile.spec.identity import spec_hash

    opts = dict(options or {})
    with compile_deadline(deadline):
        grammar = load_lark_grammar(spec, opts, max_states=max_states)
        check_deadline("loading the grammar")
        return build_grammar_index(
            grammar,
            vocab,
            spec_hash=spec_hash("lark", spec, opts),
            max_states=max_states,
            deadline=deadline,
        )
