"""Forced text → token ids for jump-forward, shared by the regex and the grammar tables.

Both kinds of index find the bytes every continuation must start with in their own way;
turning those bytes into tokens the model would itself have written is the same problem
for both: encode them the tokenizer's way, and drop the last token where BPE could merge
it with what the model writes next.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from fsmcompile.types import TokenId
from fsmcompile.vocabulary import Vocabulary
from fsmcompile.vocabulary.trie import TokenTrie

S = TypeVar("S")

FORCED_MAX_BYTES = 1 << 16
"""Bound on one forced-text walk; a trimmed automaton never needs it, a damaged one can't
loop."""


def byte_classes(
    class_of_byte: npt.NDArray[np.integer], num_classes: int
) -> tuple[list[int], list[int]]:
    """(bytes in each class, the first byte of each class) of an automaton's byte classes:
    a forced-text walk tries one byte per class and forces it only from a class of one."""
    sizes: list[int] = np.bincount(class_of_byte, minlength=num_classes).tolist()
    _, first = np.unique(class_of_byte, return_index=True)
    return sizes, first.tolist()


def utf8_prefix(data: bytes) -> tuple[str, bool]:
    """The longest valid UTF-8 prefix of `data` as text, and whether it is all of it."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            return data[:cut].decode("utf-8"), cut == len(data)
        except UnicodeDecodeError:
            continue
    return "", not data


def could_merge(trie: TokenTrie, data: bytes, next_byte_ok: Callable[[int], bool]) -> bool:
    """Whether some token spans the end of `data` (a token's bytes) and a byte allowed next.

    If no vocabulary token starts with a suffix of `data` followed by a byte
    `next_byte_ok` accepts, BPE cannot merge across that boundary, so the token can be
    forced as is. Cost: a trie walk per suffix (tokens are short).
    """
    for start in range(len(data)):
        node = 0
        for byte in data[start:]:
            lo, hi = int(trie.child_lo[node]), int(trie.child_hi[node])
            children = trie.level_nodes[lo:hi]
            at = int(np.searchsorted(trie.node_byte[children], byte))
            if at == hi - lo or trie.node_byte[children[at]] != byte:
                node = -1
                break
            node = int(children[at])
        if node < 0:
            continue
        lo, hi = int(trie.child_lo[node]), int(trie.child_hi[node])
        next_bytes = trie.node_byte[trie.level_nodes[lo:hi]]
        if any(next_byte_ok(b) for b in next_bytes.tolist()):
            return True
    return False


def forced_encoding(
    vocabulary: Vocabulary, data: bytes, *, must_stop: bool, next_byte_ok: Callable[[int], bool]
) -> list[TokenId]:
    """The canonical tokens of forced `data`, less a last token BPE could merge onward.

    Args:
        data: the forced bytes; a cut inside a UTF-8 character is encoded up to the last
            whole character.
        must_stop: nothing may follow `data` (only EOS): its last token is final.
        next_byte_ok: whether a byte may follow `data`.

    The caller still keeps only the prefix its matcher accepts (`accepted_prefix`): the
    tokenizer's encoding of a text is not bound to follow the automaton's reading.
    """
    text, complete = utf8_prefix(data)
    if not text:
        return []
    encoded = list(vocabulary.encode(text))
    if encoded and not (complete and must_stop):
        last = vocabulary.token_bytes[encoded[-1]]
        if not complete or could_merge(vocabulary.trie, last, next_byte_ok):
            # The last token could merge with bytes the model writes next; the canonical
            # encoding of the whole text would differ (DESIGN.md: naive forced
            # tokenization is non-canonical 97% of the time).
            encoded = encoded[:-1]
    return encoded


def accepted_prefix(
    tokens: list[TokenId], start: S, step: Callable[[S, TokenId], S | None]
) -> tuple[TokenId, ...]:
    """The leading `tokens` a matcher accepts one after another from `start` (`step` gives
    the state after a token, None where it refuses it)."""
    accepted: list[TokenId] = []
    cur = start
    for token in tokens:
        nxt = step(cur, token)
        if nxt is None:
            break
        accepted.append(token)
        cur = nxt
    return tuple(accepted)
