"""The compiled form of a Lark grammar (or a schema that needed one) for one tokenizer:
what the CFG index builder (`fsmcompile.index.cfg.build`) writes, the artifact stores and
the runtime's parser picks masks from."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fsmcompile.tables.lark_grammar import ParseTable
from fsmcompile.tables.lexer_automaton import LexerAutomaton
from fsmcompile.vocabulary import Vocabulary

ANY_CONTEXT = -1
"""Exit pair context: the cut can be followed in every context where a lexeme can start
(in one where none can, only by EOS: the runtime checks that with the parser)."""
END_ONLY = -2
"""Exit pair context: the lexeme can be cut as the terminal, but only EOS may follow."""


@dataclass(frozen=True, slots=True, eq=False)
class GrammarIndex:
    """What the runtime needs to mask logits for one Lark grammar and one tokenizer.

    Attributes:
        lexer: the merged leftmost-first lexer automaton (L states).
        table: lark's LALR table.
        terminal_names: lark's terminal names, by terminal id.
        ignored: bool[T], `%ignore`d terminals.
        seq_parent / seq_terminal / seq_context: int32[Q], emitted sequences: id 0 is
            empty, id s is seq_parent[s] followed by terminal seq_terminal[s], after which
            the next lexeme was lexed in a context of set seq_context[s]: context k
            itself for k < K (the lexer's contexts), else the contexts
            ctxset_context[ctxset_start[k - K]:ctxset_start[k - K + 1]] (`ContextSets`).
        state_xset: int32[L], the exit set of each lexer state (`fsmcompile.index.cfg.exits`): the
            terminals its lexeme can still be cut as, with the contexts that can follow;
            xset_start int64[X+1] / xset_terminal / xset_context int32[P] list the pairs.
        origin_entry_start: int64[L+1], the groups valid-to-check from origin o are
            entry_group[origin_entry_start[o]:origin_entry_start[o+1]].
        entry_group: int32[E], group ids (a group is shared by the origins that agree on it).
        group_seq / group_xset: int32[G], what a group's tokens emit, and the exit set of
            the state they end in.
        group_dense: int32[G], row of `masks` holding the group's tokens, or -1 when they
            are listed in group_tokens[group_token_start[g]:group_token_start[g+1]].
        masks: int32[D, ceil(V/32)], the distinct dense group masks (layout in bits.py).
        state_kill: int32[L], for a labelled state, the row of `kill_masks` holding the
            tokens whose first byte ends its lexeme; -1 for unlabelled states. Those tokens'
            outcomes are not in the groups: they are the next context's start-state
            outcomes after the terminal, which the runtime composes.
        kill_masks: int32[K, ceil(V/32)].
        vocabulary, kind ('lark', or 'json' for a schema compiled as a grammar), spec_hash:
            as for TokenIndex.
    """

    lexer: LexerAutomaton
    table: ParseTable
    terminal_names: tuple[str, ...]
    ignored: npt.NDArray[np.bool_]
    seq_parent: npt.NDArray[np.int32]
    seq_terminal: npt.NDArray[np.int32]
    seq_context: npt.NDArray[np.int32]
    ctxset_start: npt.NDArray[np.int64]
    ctxset_context: npt.NDArray[np.int32]
    state_xset: npt.NDArray[np.int32]
    xset_start: npt.NDArray[np.int64]
    xset_terminal: npt.NDArray[np.int32]
    xset_context: npt.NDArray[np.int32]
    origin_entry_start: npt.NDArray[np.int64]
    entry_group: npt.NDArray[np.int32]
    group_seq: npt.NDArray[np.int32]
    group_xset: npt.NDArray[np.int32]
    group_dense: npt.NDArray[np.int32]
    group_token_start: npt.NDArray[np.int64]
    group_tokens: npt.NDArray[np.int32]
    masks: npt.NDArray[np.int32]
    state_kill: npt.NDArray[np.int32]
    kill_masks: npt.NDArray[np.int32]
    vocabulary: Vocabulary
    kind: str
    spec_hash: str

    @property
    def num_states(self) -> int:
        """Lexer states (the origins groups are indexed by)."""
        return self.lexer.num_states

    @property
    def num_groups(self) -> int:
        return int(self.group_seq.shape[0])

    @property
    def vocab_size(self) -> int:
        return self.vocabulary.size

    def context_sets(self) -> list[frozenset[int]]:
        """The contexts of each context-set id from K on (`seq_context`)."""
        bounds = self.ctxset_start.tolist()
        members = self.ctxset_context.tolist()
        return [frozenset(members[lo:hi]) for lo, hi in zip(bounds, bounds[1:], strict=False)]

    def next_contexts(self) -> list[list[int]]:
        """Per terminal, the lexer contexts a shift of it can lead to (sorted)."""
        return next_contexts(self.table, len(self.terminal_names))


def next_contexts(table: ParseTable, num_terminals: int) -> list[list[int]]:
    """Per terminal t, the contexts of every state some `shift t` goes to.

    The walk assumes each in turn after a lexeme of t; the parser later keeps the one
    its stack really leads to. Cost: O(P x T) numpy.
    """
    action = table.action[:, :num_terminals]
    out: list[list[int]] = []
    for t in range(num_terminals):
        targets = action[:, t][action[:, t] > 0] - 1
        out.append(sorted(set(table.context_of_state[targets].tolist())))
    return out
