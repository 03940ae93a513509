"""The named tables the C grammar parser (`fsmcompile._native.Parser`) is built from.

The parser reads each field below by name and checks its item type and length against
the others, so a table handed in the wrong place is an error that names it, never a
parser that quietly reads one column as another. Ids: S parser states, T terminals
(`num_symbols - 1`; symbol T is `$END`), K lexer contexts, X exit sets, P exit pairs,
L lexer states, C byte classes, R runs, E run entries, G token groups, D dense rows,
W int32 words a row, V vocabulary size.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Int32 = npt.NDArray[np.int32]
Int64 = npt.NDArray[np.int64]
UInt8 = npt.NDArray[np.uint8]


@dataclass(frozen=True, slots=True, kw_only=True)
class ParserTables:
    """Every table and count `Parser(tables)` reads, each a C-contiguous 1-D array."""

    action: Int32
    """int32[S * (T + 1)]: 0 error, s + 1 shift to s, -r - 1 reduce rule r."""
    goto: Int32
    """int32[S * num_nonterminals]: target state or -1."""
    rule_lhs: Int32
    """int32[rules]: each rule's left-hand side."""
    rule_len: Int32
    """int32[rules]: the symbols each rule pops."""
    context_of_state: Int32
    """int32[S]: the lexer context after the parser reaches a state."""
    ctxset_start: Int64
    """int64[sets + 1]: the contexts of context-set id K + s (a CSR of `ctxset_context`)."""
    ctxset_context: Int32
    """int32[...]: the contexts of each context set."""
    ignored: UInt8
    """uint8[T]: terminals the parser never sees (whitespace, comments)."""
    dead: UInt8
    """uint8[K]: contexts where no lexeme can start."""
    xset_free: UInt8
    """uint8[X]: exit sets that always hold."""
    xset_start: Int64
    """int64[X + 1]: the (terminal, contexts) pairs of each exit set."""
    pair_terminal: Int32
    """int32[P]: each exit pair's terminal."""
    pair_ctx_start: Int64
    """int64[P + 1]: the contexts of each pair (a CSR of `pair_context`)."""
    pair_any: UInt8
    """uint8[P]: any context may follow the pair's terminal."""
    pair_context: Int32
    """int32[...]: the contexts of each pair."""
    origin_run: Int64
    """int64[2L]: the runs of lexer state q are origin_run[2q]:origin_run[2q + 1]; (-1, -1)
    marks a state whose runs a lazy index has not computed yet (a row there raises
    `OriginPending`). Pairs, not offsets, so runs appended later need not follow their
    state's neighbours."""
    run_seq: Int64
    """int64[R]: each run's emitted sequence."""
    run_xset: Int64
    """int64[R]: each run's exit set."""
    run_skip: Int64
    """int64[R]: the first run past r's sequence and its extensions."""
    run_start: Int64
    """int64[R + 1]: the groups of run r (a CSR of `run_groups`)."""
    run_groups: Int32
    """int32[E]: the runs' token groups."""
    group_dense: Int32
    """int32[G]: the dense row of a group, or -1 for a token list."""
    group_token_start: Int64
    """int64[G + 1]: the listed tokens of each group (a CSR of `group_tokens`)."""
    group_tokens: Int32
    """int32[...]: the groups' listed tokens."""
    masks: Int32
    """int32[D * W]: the dense rows."""
    label: Int32
    """int32[L]: the terminal a lexer state completes, or -1."""
    state_kill: Int32
    """int32[L]: the row of `kill_masks` of a labelled state, or -1."""
    kill_masks: Int32
    """int32[kill rows * W]: tokens whose first byte ends the lexeme."""
    restart: Int32
    """int32[L]: the context after an ignored lexeme that ends here, or -1."""
    context_start: Int32
    """int32[K]: each context's start lexer state."""
    next_ctx_start: Int64
    """int64[T + 1]: the contexts a shift of terminal t may lead to (a CSR of `next_ctx`)."""
    next_ctx: Int32
    """int32[...]: the contexts after each terminal."""
    eos_row: Int32
    """int32[W]: the end-of-sequence tokens."""
    text_bytes: UInt8
    """uint8[...]: the text tokens' bytes, end to end."""
    text_start: Int64
    """int64[V + 1]: token v's bytes; empty for a token never text."""
    moves: Int32
    """int32[L * C]: the lexer's next state per byte class, or -1."""
    move_starts: UInt8
    """uint8[L * C]: whether the move starts a counted item."""
    class_of_byte: Int32
    """int32[256]: each byte's class."""
    char_bound: Int32
    """int32[L]: the most items a counted lexeme may hold, or -1."""
    state_xset: Int32
    """int32[L]: the exit set of each lexer state."""
    seq_parent: array[int]
    seq_terminal: array[int]
    seq_context: array[int]
    """The emitted sequences (array('q')), which the runtime appends to: read afresh at
    each call that needs them."""
    num_symbols: int
    """T + 1: the terminals, then `$END`."""
    num_nonterminals: int
    start_state: int
    end_state: int
    num_contexts: int
    """K."""
    num_words: int
    """W."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupTables:
    """The runs, token groups and context sets `Parser(tables)` starts with and
    `Parser.regroup(tables)` replaces: fields as in `ParserTables`. A lazy index's loader
    (`lazy_origins.py`) appends to them, so ids handed in earlier keep their meaning."""

    origin_run: Int64
    run_seq: Int64
    run_xset: Int64
    run_skip: Int64
    run_start: Int64
    run_groups: Int32
    group_dense: Int32
    group_token_start: Int64
    group_tokens: Int32
    masks: Int32
    ctxset_start: Int64
    ctxset_context: Int32
