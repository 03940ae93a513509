"""Hand-built TokenIndex-like fixtures for the runtime tests.

The runtime consumes a compiled `TokenIndex`; these fixtures build the same fields from a
small ASCII regex (through interegular's FSM, then a brute-force token walk) so runtime
tests pin behaviour on 5-20 token vocabularies without depending on the compiler.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace

import interegular
import numpy as np
import pytest

from fsmcompile.tables.bits import bitmask_words, pack_bool_rows, set_bits
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.vocabulary.trie import TokenTrie

DEAD = -1


@dataclass(frozen=True, eq=False)
class FakeVocabulary:
    """The slice of `fsmcompile.Vocabulary` the runtime reads."""

    token_bytes: list[bytes]
    eos_token_ids: tuple[int, ...]
    size: int
    fingerprint: str = field(default="")

    def decode_bytes(self, token_ids: Sequence[int]) -> bytes:
        return b"".join(self.token_bytes[t] for t in token_ids if t < len(self.token_bytes))

    @property
    def trie(self) -> TokenTrie:
        ids = np.asarray([i for i, tb in enumerate(self.token_bytes) if tb], dtype=np.int64)
        return TokenTrie.build(self.token_bytes, ids)

    @property
    def text_spans(self) -> tuple[bytes, np.ndarray]:
        lengths = np.zeros(self.size, dtype=np.int64)
        lengths[: len(self.token_bytes)] = [len(tb) for tb in self.token_bytes]
        starts = np.zeros(self.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        return b"".join(self.token_bytes), starts

    def encode(self, text: str) -> list[int]:
        """Greedy longest match: the toy tokenizer's canonical encoding."""
        data = text.encode("utf-8")
        by_bytes = {tb: i for i, tb in enumerate(self.token_bytes) if tb}
        longest = max(len(tb) for tb in by_bytes)
        ids: list[int] = []
        pos = 0
        while pos < len(data):
            for length in range(min(longest, len(data) - pos), 0, -1):
                token = by_bytes.get(data[pos : pos + length])
                if token is not None:
                    ids.append(token)
                    pos += length
                    break
            else:
                raise ValueError(f"toy vocabulary cannot spell {data[pos:]!r}")
        return ids


@dataclass(frozen=True, eq=False)
class FakeIndex:
    """Same fields and `next_state` contract as `fsmcompile.tables.token_index.TokenIndex`."""

    dfa: ByteDFA
    state_mask: np.ndarray
    masks: np.ndarray
    vocabulary: FakeVocabulary
    kind: str = "regex"
    spec_hash: str = ""

    def next_state(self, state: int, token_id: int) -> int:
        words = self.masks[self.state_mask[state]]
        if not (int(words[token_id >> 5]) >> (token_id & 31)) & 1:
            return DEAD
        if token_id in self.vocabulary.eos_token_ids:
            return DEAD
        return self.dfa.walk(self.vocabulary.token_bytes[token_id], state)


def make_vocabulary(
    tokens: Sequence[str | bytes], *, eos: Sequence[int] = (), size: int | None = None
) -> FakeVocabulary:
    """A toy vocabulary; tokens given as "" are special (never text)."""
    token_bytes = [t.encode() if isinstance(t, str) else t for t in tokens]
    digest = hashlib.sha256(repr((token_bytes, tuple(eos), size)).encode()).hexdigest()
    return FakeVocabulary(token_bytes, tuple(eos), size or len(token_bytes), digest)


def dfa_from_regex(pattern: str) -> ByteDFA:
    """A trimmed byte DFA (start 0) for an ASCII regex, via interegular."""
    fsm = interegular.parse_pattern(pattern).to_fsm()
    # Trim: keep states that can reach a final state.
    reverse: dict[int, set[int]] = {}
    for src, row in fsm.map.items():
        for dst in row.values():
            reverse.setdefault(dst, set()).add(src)
    live = set(fsm.finals)
    todo = list(live)
    while todo:
        for prev in reverse.get(todo.pop(), ()):
            if prev not in live:
                live.add(prev)
                todo.append(prev)
    if fsm.initial not in live:
        raise ValueError(f"empty language: {pattern!r}")
    order = [fsm.initial] + sorted(s for s in live if s != fsm.initial)
    number = {s: i for i, s in enumerate(order)}
    symbols = sorted(set(fsm.alphabet.values()))
    sym_index = {s: i for i, s in enumerate(symbols)}
    class_of_byte = np.array(
        [
            sym_index[fsm.alphabet[chr(b)]] if b < 128 else sym_index[fsm.alphabet[chr(0x10FFFF)]]
            for b in range(256)
        ],
        dtype=np.int32,
    )
    transitions = np.full((len(order), len(symbols)), DEAD, dtype=np.int32)
    for s in order:
        for sym, dst in fsm.map.get(s, {}).items():
            if dst in live:
                transitions[number[s], sym_index[sym]] = number[dst]
    accepting = np.array([s in fsm.finals for s in order], dtype=np.bool_)
    return ByteDFA(transitions, class_of_byte, accepting)


def index_from_regex(pattern: str, vocabulary: FakeVocabulary) -> FakeIndex:
    """Brute-force token index: walk every token from every state (toy sizes only)."""
    dfa = dfa_from_regex(pattern)
    allowed = np.zeros((dfa.num_states, vocabulary.size), dtype=np.bool_)
    for state in range(dfa.num_states):
        for token, data in enumerate(vocabulary.token_bytes):
            if data and token not in vocabulary.eos_token_ids:
                allowed[state, token] = dfa.walk(data, state) != DEAD
        if dfa.accepting[state]:
            allowed[state, list(vocabulary.eos_token_ids)] = True
    packed = pack_bool_rows(allowed)
    unique, state_mask = np.unique(packed, axis=0, return_inverse=True)
    masks = np.ascontiguousarray(unique, dtype=np.int32)
    spec_hash = hashlib.sha256(pattern.encode()).hexdigest()
    return FakeIndex(
        dfa, state_mask.astype(np.int32).reshape(-1), masks, vocabulary, "regex", spec_hash
    )


def reference_allowed(index: FakeIndex, state: int | None) -> np.ndarray:
    """bool[V] allowed tokens from `state` by brute force; None means terminated (EOS only)."""
    vocab = index.vocabulary
    out = np.zeros(vocab.size, dtype=np.bool_)
    if state is None:
        out[list(vocab.eos_token_ids)] = True
        return out
    for token, data in enumerate(vocab.token_bytes):
        if data and token not in vocab.eos_token_ids:
            out[token] = index.dfa.walk(data, state) != DEAD
    if index.dfa.accepting[state]:
        out[list(vocab.eos_token_ids)] = True
    return out


def eos_only_words(vocab: FakeVocabulary) -> np.ndarray:
    words = np.zeros(bitmask_words(vocab.size), dtype=np.int32)
    set_bits(words, np.array(vocab.eos_token_ids, dtype=np.int64))
    return words


TOY_TOKENS = ["", "a", "b", "c", "ab", "abc", "1", "2", "12", "-", '"', "{", "}", ":", " ", ""]
"""id 0 is EOS and the last id a special token: both b"" (never text), as in Vocabulary."""


def fullmatch(pattern: str, data: bytes) -> bool:
    return re.fullmatch(pattern.encode(), data) is not None


@pytest.fixture(scope="session")
def rt() -> SimpleNamespace:
    """The fixture builders, as one namespace (test modules never import conftest)."""
    return SimpleNamespace(
        TOY_TOKENS=TOY_TOKENS,
        make_vocabulary=make_vocabulary,
        dfa_from_regex=dfa_from_regex,
        index_from_regex=index_from_regex,
        reference_allowed=reference_allowed,
        eos_only_words=eos_only_words,
        fullmatch=fullmatch,
    )


@pytest.fixture
def toy_vocab() -> FakeVocabulary:
    """TOY_TOKENS with EOS id 0 and logits width 40 (ids 16..39 are padding)."""
    return make_vocabulary(TOY_TOKENS, eos=[0], size=40)
