"""Soundness and completeness of regex token indexes on real tokenizers.

Soundness: every random walk through the masks that ends at EOS is a full match.
Completeness: every string of the language, tokenized the real tokenizer's way, is allowed
token by token and ends with EOS allowed; strings outside the language are rejected.
"""

from __future__ import annotations

import random
import re
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import load_vocabulary

from fsmcompile import compile_regex
from fsmcompile.tables.token_index import TokenIndex
from fsmcompile.types import DEAD

PATTERNS = {
    "iso_date": r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])",
    "float": r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?",
    "email": r"[a-z0-9._%+-]+@[a-z0-9-]+(\.[a-z0-9-]+)*\.[a-z]{2,}",
    "ipv4": r"((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)",
    "words": r"(alpha|beta|gamma|delta|épsilon|日本語)( (alpha|beta|gamma))*",
    "unicode_class": r"[\u4e00-\u9fff\u00e0-\u00ff]{1,6}!",
    "quoted": r'"[^"\\]{0,40}"',
    "optional_tail": r"1(x2)?",
    "word_space": r"\w+ \w+",
}
TOKENIZERS = ["gpt2", "qwen2", "phi3", "llama3"]


@cache
def index_for(tokenizer: str, name: str) -> TokenIndex:
    return compile_regex(PATTERNS[name], load_vocabulary(tokenizer), cache=False)


def walk_text(index: TokenIndex, text: str) -> tuple[bool, str]:
    """Feed the real tokenization of `text`; (accepted, reason)."""
    vocab = index.vocabulary
    state = 0
    for position, token in enumerate(vocab.encode(text)):
        if not index.is_allowed(state, token):
            return False, f"token {position} {vocab.token_bytes[token]!r} masked"
        state = index.next_state(state, token)
        assert state != DEAD, "an allowed token led to the dead state"
    if not index.is_allowed(state, vocab.eos_token_ids[0]):
        return False, "EOS masked at the end"
    return True, ""


def distance_to_accept(index: TokenIndex) -> list[int]:
    """Fewest bytes from each DFA state to an accepting one (BFS over reversed edges)."""
    trans = index.dfa.transitions
    far = 10**9
    dist = [0 if acc else far for acc in index.dfa.accepting.tolist()]
    changed = True
    while changed:
        changed = False
        for state in range(index.num_states):
            for target in set(trans[state].tolist()) - {DEAD}:
                if dist[target] + 1 < dist[state]:
                    dist[state] = dist[target] + 1
                    changed = True
    return dist


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_regex_index_random_walks_are_full_matches(tokenizer: str, name: str) -> None:
    index = index_for(tokenizer, name)
    vocab = index.vocabulary
    eos = vocab.eos_token_ids[0]
    rng = random.Random(f"{tokenizer}/{name}")
    dist = distance_to_accept(index)
    single_bytes = [
        t
        for t, b in enumerate(vocab.token_bytes)
        if len(b) == 1 and t not in vocab.special_token_ids
    ]
    finished = 0
    for _ in range(40):
        state, produced = 0, []
        for _step in range(60):
            allowed = index.allowed_token_ids(state)
            assert allowed.size, f"state {state} allows nothing"
            if eos in allowed and (rng.random() < 0.3 or allowed.size == 1):
                text = vocab.decode_bytes(produced)
                assert re.fullmatch(PATTERNS[name], text.decode("utf-8")), text
                finished += 1
                break
            candidates = rng.sample(
                [t for t in allowed.tolist() if t != eos],
                k=min(24, allowed.size - (eos in allowed)),
            )
            if rng.random() < 0.5:  # half the steps head for EOS, so walks do finish
                # single-byte tokens always include one step of a shortest path
                candidates += [t for t in single_bytes if index.is_allowed(state, t)]
                candidates.sort(key=lambda t: dist[index.next_state(state, t)])
            token = int(candidates[0])
            produced.append(token)
            state = index.next_state(state, token)
            assert state != DEAD
    assert finished >= 10  # the walks really reached EOS, so the check above ran


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
@pytest.mark.parametrize("name", sorted(PATTERNS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_regex_index_accepts_real_tokenizations(
    tokenizer: str, name: str, data: st.DataObject
) -> None:
    text = data.draw(st.from_regex(PATTERNS[name], fullmatch=True))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates are not text a model can emit
        return
    accepted, reason = walk_text(index_for(tokenizer, name), text)
    assert accepted, f"{text!r}: {reason}"


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
@pytest.mark.parametrize("name", sorted(PATTERNS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(alphabet='0123456789-.eE+@abcxyz" 日é!', max_size=14))
def test_regex_index_rejects_non_matches(tokenizer: str, name: str, text: str) -> None:
    if re.fullmatch(PATTERNS[name], text):
        return
    accepted, _ = walk_text(index_for(tokenizer, name), text)
    assert not accepted, f"{text!r} accepted but does not match {PATTERNS[name]}"


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
@pytest.mark.parametrize(
    ("name", "prefix", "continuations"),
    [
        ("optional_tail", "1", ["x2"]),
        ("float", "12", [".5", "e3", "0"]),
        ("float", "0.25", ["e-3", "1"]),
        ("email", "ada@example", [".org", ".co.uk"]),
    ],
)
def test_regex_index_complete_state_keeps_continuations(
    tokenizer: str, name: str, prefix: str, continuations: list[str]
) -> None:
    # The state after a complete match that can go on must allow EOS *and* the tokens that
    # continue it: the classic over-constraint bug.
    index = index_for(tokenizer, name)
    for tail in continuations:
        accepted, reason = walk_text(index, prefix + tail)
        assert accepted, f"{prefix + tail!r}: {reason}"
    if re.fullmatch(PATTERNS[name], prefix):
        assert walk_text(index, prefix)[0]
