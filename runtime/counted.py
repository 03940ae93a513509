"""The items each token adds to a counted lexeme: what a `maxLength` bound is checked
against at run time (`GrammarTables.fitting_row`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from fsmcompile._native import items_grown as _items_grown

if TYPE_CHECKING:
    from fsmcompile.tables.lexer_automaton import LexerAutomaton
    from fsmcompile.vocabulary.trie import TokenTrie


def items_grown(
    lexer: LexerAutomaton, trie: TokenTrie, vocab_size: int, state: int
) -> npt.NDArray[np.int32]:
    """int32[V]: the items (`LexerAutomaton.char_start` moves) each token adds to the
    lexeme at `state`, counted until the lexeme cannot go on (a counted lexeme is cut only
    there). Computed when a counted lexeme first nears its bound: one walk of the whole
    trie in C (~0.5 ms with Llama 3), in level order, a node's count its parent's plus
    one where its byte starts an item."""
    parent_at = trie.level_parents()[0]
    level_bytes, token_positions = trie.level_walk()
    grown = np.zeros(vocab_size, dtype=np.int32)
    _items_grown(
        np.ascontiguousarray(lexer.transitions, dtype=np.int32),
        np.ascontiguousarray(lexer.char_start, dtype=np.bool_).view(np.uint8),
        int(lexer.transitions.shape[1]),
        np.ascontiguousarray(lexer.class_of_byte, dtype=np.int32),
        parent_at,
        level_bytes,
        token_positions,
        trie.token_ids,
        state,
        grown,
    )
    return grown
