"""The tables of a grammar index's C parser (`fsmcompile._native.Parser`), built once per process.

The parser answers a mask row's questions (does the stack take this emitted sequence,
can the pending lexeme still be cut, which runs of token groups are valid, their OR) over
flat arrays: the LALR tables as the index stores them, the exit sets' (terminal, contexts)
pairs, and the index's token groups sorted into runs in path order (`entry_runs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from fsmcompile._native import Parser
from fsmcompile.errors import ArtifactCorruptError
from fsmcompile.tables.grammar_index import ANY_CONTEXT, GrammarIndex

from .parser_tables import GroupTables, ParserTables

if TYPE_CHECKING:
    from fsmcompile.tables.lazy_grammar_index import LazyGrammarIndex
    from fsmcompile.tables.sequences import SequenceTable


def parser_for(
    index: GrammarIndex | LazyGrammarIndex,
    sequences: SequenceTable,
    num_words: int,
    eos_row: npt.NDArray[np.int32],
    groups: GroupTables | None = None,
) -> Parser:
    """The C parser of `index`, reading `sequences` (which the runtime extends) for the
    emitted sequences, and making mask rows of `num_words` int32 words (`eos_row` where
    the text may end). `groups` are the runs and token groups it starts with: by default
    every origin's, from a `GrammarIndex` (a `LazyGrammarIndex` passes its loader's).

    Raises:
        ArtifactCorruptError: the index's tables contradict one another (an id out of its
            table, an offset out of order, a reduction past the stack's bottom). The loader
            checks artifacts first; the C parser checks again whatever it is handed, as
            memory safety must not rest on every caller having checked.
    """
    try:
        return Parser(parser_tables(index, sequences, num_words, eos_row, groups))
    except (ValueError, IndexError) as error:
        raise ArtifactCorruptError(f"grammar index tables: {error}") from error


def parser_tables(
    index: GrammarIndex | LazyGrammarIndex,
    sequences: SequenceTable,
    num_words: int,
    eos_row: npt.NDArray[np.int32],
    groups: GroupTables | None = None,
) -> ParserTables:
    """The named tables `Parser` is built from for `index` (`groups` as `parser_for`).

    Raises:
        ValueError, IndexError: tables whose shapes or ids disagree.
    """
    table = index.table
    lexer = index.lexer
    num_terminals = len(index.terminal_names)
    num_symbols = num_terminals + 1  # the terminals, then $END
    action = np.ascontiguousarray(table.action[:, :num_symbols], dtype=np.int32)
    if action.shape[1] != num_symbols:
        raise ValueError(f"parse table has {action.shape[1]} symbols, expected {num_symbols}")
    context_start = lexer.context_start
    num_contexts = int(context_start.shape[0])
    dead = ~(lexer.transitions[context_start] >= 0).any(axis=1)
    pairs = exit_lists(index)
    xset_start = np.zeros(len(pairs) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in pairs], out=xset_start[1:])
    flat = [pair for per_xset in pairs for pair in per_xset]
    pair_contexts = [sorted(ctxs) if ctxs is not None else [] for _, ctxs in flat]
    pair_ctx_start = np.zeros(len(flat) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in pair_contexts], out=pair_ctx_start[1:])
    ignored = index.ignored.astype(np.uint8)
    xset_free = [any(ctxs is None and ignored[t] for t, ctxs in per_xset) for per_xset in pairs]
    if groups is None:
        assert isinstance(index, GrammarIndex), "a lazy index passes its loader's groups"
        masks = index.masks
        if masks.shape[0] and masks.shape[1] != num_words:
            raise ValueError(f"dense rows have {masks.shape[1]} words, expected {num_words}")
        groups = eager_groups(index)
    kill_masks = index.kill_masks
    if kill_masks.shape[0] and kill_masks.shape[1] != num_words:
        raise ValueError(f"kill rows have {kill_masks.shape[1]} words, expected {num_words}")
    text_bytes, text_start = index.vocabulary.text_spans
    next_contexts = index.next_contexts()
    next_ctx_start = np.zeros(num_terminals + 1, dtype=np.int64)
    np.cumsum([len(c) for c in next_contexts], out=next_ctx_start[1:])

    def i32(values: npt.ArrayLike) -> npt.NDArray[np.int32]:
        return np.ascontiguousarray(values, dtype=np.int32).reshape(-1)

    def i64(values: npt.ArrayLike) -> npt.NDArray[np.int64]:
        return np.ascontiguousarray(values, dtype=np.int64).reshape(-1)

    def u8(values: npt.ArrayLike) -> npt.NDArray[np.uint8]:
        return np.ascontiguousarray(values, dtype=np.uint8).reshape(-1)

    return ParserTables(
        action=i32(action),
        goto=i32(table.goto),
        rule_lhs=i32(table.rule_lhs),
        rule_len=i32(table.rule_len),
        context_of_state=i32(table.context_of_state),
        ctxset_start=groups.ctxset_start,
        ctxset_context=groups.ctxset_context,
        ignored=u8(ignored),
        dead=u8(dead),
        xset_free=u8(xset_free),
        xset_start=xset_start,
        pair_terminal=i32([t for t, _ in flat]),
        pair_ctx_start=pair_ctx_start,
        pair_any=u8([ctxs is None for _, ctxs in flat]),
        pair_context=i32([c for ctxs in pair_contexts for c in ctxs]),
        origin_run=groups.origin_run,
        run_seq=groups.run_seq,
        run_xset=groups.run_xset,
        run_skip=groups.run_skip,
        run_start=groups.run_start,
        run_groups=groups.run_groups,
        group_dense=groups.group_dense,
        group_token_start=groups.group_token_start,
        group_tokens=groups.group_tokens,
        masks=groups.masks,
        label=i32(lexer.label),
        state_kill=i32(index.state_kill),
        kill_masks=i32(kill_masks),
        restart=i32(lexer.restart_context),
        context_start=i32(context_start),
        next_ctx_start=next_ctx_start,
        next_ctx=i32([c for contexts in next_contexts for c in contexts]),
        eos_row=i32(eos_row),
        text_bytes=np.frombuffer(text_bytes, dtype=np.uint8),
        text_start=i64(text_start),
        moves=i32(lexer.transitions),
        move_starts=u8(lexer.char_start),
        class_of_byte=i32(lexer.class_of_byte),
        char_bound=i32(lexer.char_bound),
        state_xset=i32(index.state_xset),
        seq_parent=sequences.parent,
        seq_terminal=sequences.terminal,
        seq_context=sequences.context,
        num_symbols=num_symbols,
        num_nonterminals=int(table.goto.shape[1]),
        start_state=int(table.start_state),
        end_state=int(table.end_state),
        num_contexts=num_contexts,
        num_words=num_words,
    )


def eager_groups(index: GrammarIndex) -> GroupTables:
    """Every origin's runs and token groups of a `GrammarIndex`, as the parser reads them."""
    runs = entry_runs(index)
    return GroupTables(
        origin_run=origin_pairs(runs.origin_run),
        run_seq=_i64(runs.seq),
        run_xset=_i64(runs.xset),
        run_skip=_i64(runs.skip),
        run_start=_i64(runs.start),
        run_groups=_i32(runs.groups),
        group_dense=_i32(index.group_dense),
        group_token_start=_i64(index.group_token_start),
        group_tokens=_i32(index.group_tokens),
        masks=_i32(index.masks),
        ctxset_start=_i64(index.ctxset_start),
        ctxset_context=_i32(index.ctxset_context),
    )


def _i32(values: npt.ArrayLike) -> npt.NDArray[np.int32]:
    return np.ascontiguousarray(values, dtype=np.int32).reshape(-1)


def _i64(values: npt.ArrayLike) -> npt.NDArray[np.int64]:
    return np.ascontiguousarray(values, dtype=np.int64).reshape(-1)


def origin_pairs(origin_run: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """int64[2L]: the (first, past-last) run of each origin, from the CSR int64[L+1] of
    `Runs`. The parser takes pairs so that a lazy index can append an origin's runs when
    it first walks it, and mark the origins it has not walked (-1, -1)."""
    csr = np.asarray(origin_run, dtype=np.int64)
    return np.ascontiguousarray(np.stack([csr[:-1], csr[1:]], axis=1).reshape(-1))


@dataclass(frozen=True, slots=True)
class Runs:
    """The groups of every origin sorted by (sequence in path order, exit set), cut into
    runs sharing both: a row's plan is a slice of these, whatever the number of groups.

    Path order lists a sequence right before its extensions, siblings by (terminal,
    context): the runs of a sequence the stack rejects and of all its extensions are one
    stretch, skipped in one step, and siblings that differ only in the lexer context
    assumed after their last terminal are neighbours, decided by one parser step.
    """

    groups: npt.NDArray[np.int32]
    """int32[E]: the entries' groups, sorted per origin."""
    start: npt.NDArray[np.int64]
    """int64[R+1]: the groups of run r are groups[start[r]:start[r+1]]."""
    seq: npt.NDArray[np.int32]
    xset: npt.NDArray[np.int32]
    """int32[R]: the sequence and exit set of each run."""
    skip: npt.NDArray[np.int64]
    """int64[R]: the first run after r whose sequence does not extend (or equal) r's."""
    origin_run: npt.NDArray[np.int64]
    """int64[L+1]: the runs of origin o are origin_run[o]:origin_run[o+1]."""


def entry_runs(index: GrammarIndex) -> Runs:
    """The `Runs` of an index, in numpy (a few ms per 100k entries)."""
    return runs_of(
        (index.seq_parent, index.seq_terminal, index.seq_context),
        index.group_seq,
        index.group_xset,
        index.origin_entry_start,
        index.entry_group,
    )


def runs_of(
    sequences: tuple[npt.NDArray[np.integer], npt.NDArray[np.integer], npt.NDArray[np.integer]],
    group_seq: npt.NDArray[np.int32],
    group_xset: npt.NDArray[np.int32],
    starts: npt.NDArray[np.int64],
    entry_group: npt.NDArray[np.int32],
) -> Runs:
    """The `Runs` of token groups listed per origin (`starts`, `entry_group`), their
    sequences' path order read from the (parent, terminal, context) columns."""
    rank, end = sequence_preorder(*sequences)
    # Rank groups by (sequence, exit set, id), then sort each origin's entries by rank
    # with one stable sort of (origin, rank).
    num_groups = group_seq.shape[0]
    group_rank = np.empty(num_groups, dtype=np.int64)
    group_rank[np.lexsort((group_xset, rank[group_seq]))] = np.arange(num_groups)
    entry_origin = np.repeat(np.arange(starts.shape[0] - 1, dtype=np.int64), np.diff(starts))
    entry_key = entry_origin * max(num_groups, 1) + group_rank[entry_group]
    order = np.argsort(entry_key, kind="stable")
    groups = entry_group[order]
    entry_origin = entry_origin[order]
    run_start = np.flatnonzero(
        _changes(entry_origin) | _changes(group_seq[groups]) | _changes(group_xset[groups])
    )
    heads = groups[run_start]
    seq = group_seq[heads]
    # Runs are sorted by (origin, rank of their sequence): the subtree of a sequence ends
    # at the first run of its origin ranked at or past its subtree's end.
    num_seqs = max(int(rank.shape[0]), 1)
    origin = entry_origin[run_start]
    run_key = origin * num_seqs + rank[seq]
    skip = np.searchsorted(run_key, origin * num_seqs + end[seq], side="left")
    return Runs(
        groups=groups,
        start=np.append(run_start, groups.shape[0]).astype(np.int64),
        seq=seq,
        xset=group_xset[heads],
        skip=skip.astype(np.int64),
        origin_run=np.searchsorted(run_start, starts).astype(np.int64),
    )


def sequence_preorder(
    parent: npt.NDArray[np.integer],
    terminal: npt.NDArray[np.integer],
    context: npt.NDArray[np.integer],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(rank, end): each sequence's place in path order (a prefix first, then its
    extensions, siblings by (terminal, context)); the extensions of s hold the ranks
    rank[s] + 1 up to end[s] - 1.

    Raises:
        ValueError: a sequence's parent does not come before it (then the walks up the
            parents below would not end).
    """
    parent = parent.astype(np.int64)
    count = parent.shape[0]
    ids = np.arange(count, dtype=np.int64)
    if ((parent[1:] < 0) | (parent[1:] >= ids[1:])).any():
        raise ValueError("a sequence's parent does not come before it")
    label = terminal.astype(np.int64) * (int(context.max(initial=0)) + 1) + context + 1
    label[:1] = 0
    depth = np.zeros(count, dtype=np.int64)
    up = np.arange(count, dtype=np.int64)
    while (up > 0).any():
        depth += up > 0
        up = np.where(up > 0, parent[np.maximum(up, 0)], 0)
    longest = int(depth.max(initial=0))
    # Column k: the label of each sequence's ancestor at depth k (0 past its own depth).
    columns = []
    ancestor = np.arange(count, dtype=np.int64)
    for level in range(longest, 0, -1):
        deep = depth >= level
        columns.append(np.where(deep, label[ancestor], 0))
        ancestor = np.where(deep, parent[ancestor], ancestor)
    rank = np.empty(count, dtype=np.int64)
    rank[np.lexsort(columns) if columns else np.arange(count)] = np.arange(count)
    end = rank + 1
    for level in range(longest, 0, -1):
        at = np.flatnonzero(depth == level)
        np.maximum.at(end, parent[at], end[at])
    return rank, end


def _changes(values: npt.NDArray[np.integer]) -> npt.NDArray[np.bool_]:
    """bool[N]: where a value differs from the one before (always at 0)."""
    out = np.ones(values.shape[0], dtype=np.bool_)
    np.not_equal(values[1:], values[:-1], out=out[1:])
    return out


def exit_lists(
    index: GrammarIndex | LazyGrammarIndex,
) -> list[list[tuple[int, frozenset[int] | None]]]:
    """Per exit set, (terminal, contexts that may follow or None for any) pairs."""
    starts = index.xset_start.tolist()
    terminals = index.xset_terminal.tolist()
    contexts = index.xset_context.tolist()
    out: list[list[tuple[int, frozenset[int] | None]]] = []
    for lo, hi in zip(starts[:-1], starts[1:], strict=True):
        by_terminal: dict[int, set[int] | None] = {}
        for t, k in zip(terminals[lo:hi], contexts[lo:hi], strict=True):
            if k == ANY_CONTEXT:
                by_terminal[t] = None
            elif by_terminal.setdefault(t, set()) is not None and k >= 0:
                by_terminal[t].add(k)  # type: ignore[union-attr]
        # Terminals any context may follow first: the common case decides fastest.
        pairs = [(t, None if ks is None else frozenset(ks)) for t, ks in by_terminal.items()]
        out.append(sorted(pairs, key=lambda p: p[1] is not None))
    return out
