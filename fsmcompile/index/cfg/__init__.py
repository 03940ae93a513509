"""The CFG index: a `LarkGrammar` and a vocabulary → `GrammarIndex`, the token groups the
runtime's parser picks masks from.

`compile_lark_index` is what `fsmcompile.compiler` calls for kind "lark".
"""

from __future__ import annotations

from fsmcompile.budget import check_deadline, compile_deadline
from fsmcompile.frontend.identity import spec_hash
from fsmcompile.frontend.lark.options import LarkOptions
from fsmcompile.frontend.options import options_key
from fsmcompile.grammar import load_lark_grammar
from fsmcompile.index.cfg.build import build_grammar_index
from fsmcompile.tables.grammar_index import GrammarIndex
from fsmcompile.vocabulary import Vocabulary

__all__ = ["compile_lark_index"]


def compile_lark_index(
    spec: str,
    vocab: Vocabulary,
    *,
    options: LarkOptions | None = None,
    max_states: int = 200_000,
    deadline: float | None = None,
) -> GrammarIndex:
    """Compile a Lark grammar (LALR, contextual lexer) into a token index for `vocab`.

    The index allows exactly the texts `Lark(spec, parser="lalr").parse` accepts, token
    by token, with EOS where the text is complete.

    Args:
        spec: the grammar source.
        vocab: the tokenizer.
        options: the start rule, lark's strict mode, `%import` folders (default: none).
        max_states: the largest lexer automaton allowed; also bounds lark's analysis
            (`analysis_size.py`).
        deadline: `time.monotonic()` value past which the compile stops.

    Raises:
        GrammarError: the grammar does not build (`line`/`column` say where when known).
        UnsupportedFeatureError: constructs no token mask can follow exactly (listed).
        BudgetExceededError: `max_states` or `deadline` exceeded.
    """
    opts = options if options is not None else LarkOptions()
    with compile_deadline(deadline):
        grammar = load_lark_grammar(spec, opts, max_states=max_states)
        check_deadline("loading the grammar")
        return build_grammar_index(
            grammar,
            vocab,
            spec_hash=spec_hash("lark", spec, options_key(opts)),
            max_states=max_states,
            deadline=deadline,
        )
