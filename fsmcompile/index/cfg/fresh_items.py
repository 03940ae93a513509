"""How many items of a counted terminal one token can write into a lexeme it starts.

A counted terminal (a JSON string under `maxLength`) is built unbounded and the runtime
counts its items. It checks the count only for a lexeme a token goes on with; a lexeme
that starts inside a token ends that token with at most as many items as the token can
write from the lexeme's first byte on. So a bound is safe to count when no token can write
more items than the bound into the terminal from any byte offset where a lexeme can start:
the token's first byte, or one right after a byte that ends some terminal's lexeme. That
number depends on the vocabulary, not on the longest token: in a JSON grammar a Llama 3
token writes at most 11 string characters, though its longest token has 128 bytes (and
a quote with 32 dashes is one token, the quote after a `(`, where no lexeme ends).
"""

from __future__ import annotations

import threading

import numpy as np
import numpy.typing as npt

from fsmcompile.index.cfg.lexer import Countable
from fsmcompile.tables.byte_dfa import ByteDFA, dfa_key
from fsmcompile.tables.lark_grammar import LarkGrammar
from fsmcompile.vocabulary import Vocabulary

__all__ = ["countable_for", "lexeme_last_bytes", "max_fresh_items"]

_lock = threading.Lock()

Starts = dict[int, frozenset[int]]
"""State → the byte classes whose move begins an item (`lexer_counted.item_starts`)."""


def lexeme_last_bytes(grammar: LarkGrammar) -> frozenset[int] | None:
    """The bytes some terminal's lexeme can end with (a move into an accepting state), or
    None when a terminal has no automaton to read them from (any byte may then end one)."""
    found: set[int] = set()
    for term in grammar.terminals:
        dfa = term.dfa
        if dfa is None:
            return None
        into_accepting = dfa.accepting[np.maximum(dfa.transitions, 0)] & (dfa.transitions >= 0)
        classes = np.flatnonzero(into_accepting.any(axis=0))
        found.update(np.flatnonzero(np.isin(dfa.class_of_byte, classes)).tolist())
    return frozenset(found)


def countable_for(vocab: Vocabulary, grammar: LarkGrammar) -> Countable:
    """Whether the runtime may count a bound of one of `grammar`'s terminals for `vocab`'s
    tokens (`lexer.Countable`). The bytes lexemes end with are read only once a
    bound below the longest token asks (most grammars count none)."""
    after: list[frozenset[int] | None] = []

    def countable(dfa: ByteDFA, starts: Starts, bound: int) -> bool:
        if bound >= vocab.max_token_bytes:
            return True
        if not after:
            after.append(lexeme_last_bytes(grammar))
        return bound >= max_fresh_items(dfa, starts, vocab, after[0])

    return countable


def max_fresh_items(
    dfa: ByteDFA, starts: Starts, vocab: Vocabulary, after: frozenset[int] | None = None
) -> int:
    """The most items that reading a text token from `dfa`'s start state counts before the
    automaton dies or the token ends, from the token's first byte or from any byte that
    follows one of `after` (None: from every byte). Memoized per vocabulary."""
    key = (
        dfa_key(dfa),
        tuple(sorted((q, tuple(sorted(c))) for q, c in starts.items())),
        after,
    )
    with _lock:
        memo: dict[object, int] = vocab.__dict__.setdefault("_max_fresh_items", {})
        found = memo.get(key)
    if found is None:
        data, ends, first = _token_bytes(vocab)
        # Only offsets whose byte the start state moves on can count an item: a JSON
        # string's lanes start at quotes, a few thousand of the vocabulary's 800k bytes.
        # Stepping every lexeme start instead cost 13 ms a counted terminal.
        order, byte_start = _byte_positions(vocab)
        moves = np.flatnonzero(dfa.transitions[0, dfa.class_of_byte] >= 0).tolist()
        offsets = np.concatenate(
            [order[byte_start[b] : byte_start[b + 1]] for b in moves] or [order[:0]]
        )
        if after is not None:
            behind_end = np.zeros(offsets.shape[0], dtype=np.bool_)
            inner = offsets > 0
            behind_end[inner] = np.isin(
                data[offsets[inner] - 1], np.fromiter(after, dtype=np.uint8)
            )
            offsets = offsets[first[offsets] | behind_end]
        found = _max_fresh_items(dfa, starts, data, ends, offsets)
        with _lock:
            memo[key] = found
    return found


def _token_bytes(
    vocab: Vocabulary,
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """(every text token's bytes, one after another; per byte, where its token ends;
    whether it is its token's first byte), cached per vocabulary."""
    cached = vocab.__dict__.get("_fresh_item_lanes")
    if cached is None:
        ids = vocab.text_token_ids.tolist()
        data = np.frombuffer(b"".join(vocab.token_bytes[i] for i in ids), dtype=np.uint8)
        lengths = vocab.lengths[ids]
        ends = np.cumsum(lengths)
        first = np.zeros(data.shape[0], dtype=np.bool_)
        first[ends - lengths] = True
        cached = vocab.__dict__["_fresh_item_lanes"] = (data, np.repeat(ends, lengths), first)
    return cached


def _byte_positions(vocab: Vocabulary) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(offsets into `_token_bytes`' data ordered by their byte, where each byte value's
    offsets begin [257]), cached per vocabulary."""
    cached = vocab.__dict__.get("_fresh_item_positions")
    if cached is None:
        data = _token_bytes(vocab)[0]
        order = np.argsort(data, kind="stable").astype(np.int64)
        byte_start = np.concatenate([[0], np.cumsum(np.bincount(data, minlength=256))])
        cached = vocab.__dict__["_fresh_item_positions"] = (order, byte_start.astype(np.int64))
    return cached


def _max_fresh_items(
    dfa: ByteDFA,
    starts: Starts,
    data: npt.NDArray[np.uint8],
    ends: npt.NDArray[np.int64],
    offsets: npt.NDArray[np.int64],
) -> int:
    """One lane per start offset, all stepped together; a lane stops where the automaton
    dies or its token ends."""
    is_start = np.zeros(dfa.transitions.shape, dtype=np.int64)
    for q, classes in starts.items():
        is_start[q, sorted(classes)] = 1
    trans = dfa.transitions
    class_of = dfa.class_of_byte
    pos = offsets.astype(np.int64)
    end = ends[pos]
    state = np.zeros(pos.shape[0], dtype=np.int64)
    count = np.zeros(pos.shape[0], dtype=np.int64)
    best = 0
    while pos.shape[0]:
        cls = class_of[data[pos]]
        count += is_start[state, cls]
        state = trans[state, cls].astype(np.int64)
        live = state >= 0
        # A dead move counts nothing: the item began only if the automaton took it.
        best = max(best, int(count[live].max(initial=0)))
        pos += 1
        live &= pos < end
        pos, end, state, count = pos[live], end[live], state[live], count[live]
    return best
