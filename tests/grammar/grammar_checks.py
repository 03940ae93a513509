"""Shared helpers for grammar tests: compiled indexes, driving a matcher, comparing with lark."""

from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path

import numpy as np
from lark import Lark
from lark.exceptions import LarkError
from support import load_vocabulary

from fsmcompile.index.cfg import compile_lark_index
from fsmcompile.runtime.grammar_matcher import GrammarMatcher
from fsmcompile.tables.bits import is_bit_set
from fsmcompile.tables.grammar_index import GrammarIndex

GRAMMARS = Path(__file__).resolve().parents[2] / "grammars"
BUNDLED = ("json", "arithmetic", "sql_select", "tool_call")


def bundled_text(name: str) -> str:
    return (GRAMMARS / f"{name}.lark").read_text()


@lru_cache(maxsize=32)
def compiled(grammar: str, vocab_name: str) -> GrammarIndex:
    """The index of a grammar text for a test tokenizer, compiled once per session."""
    return compile_lark_index(grammar, load_vocabulary(vocab_name))


@lru_cache(maxsize=32)
def inside_walk(lexer, state: int, data: bytes) -> tuple | None:
    """The reading of bytes that stay inside the lexeme at `state` (no constraint open):
    ((0, end state, 0, items grown, -1),), or () where the lexeme dies; None where some
    byte could end the lexeme (only the walk of every reading follows that). The plain
    definition `Parser.advance_inside` is checked against."""
    grown = 0
    for byte in data:
        cls = int(lexer.class_of_byte[byte])
        nxt = int(lexer.transitions[state, cls])
        if lexer.label[state] >= 0 and (nxt < 0 or lexer.label[nxt] < 0):
            return None
        if nxt < 0:
            return ()
        grown += int(lexer.char_start[state, cls])
        state = nxt
    return ((0, state, 0, grown, -1),)


@lru_cache(maxsize=8)
def lark_parser(grammar: str) -> Lark:
    """lark's LALR parser of `grammar`, built once (40 ms each; the brute-force checks
    parse thousands of texts per grammar)."""
    return Lark(grammar, parser="lalr")


def lark_parses(grammar: str, text: str) -> bool:
    """The reference: does lark itself accept `text`?"""
    try:
        lark_parser(grammar).parse(text)
    except LarkError:
        return False
    return True


def matcher_accepts(matcher: GrammarMatcher, token_ids: list[int], eos: int) -> tuple[bool, str]:
    """Feed `token_ids` then EOS; every step also checks that the mask agrees with advance."""
    matcher.reset()
    words = np.zeros(matcher._tables.num_words, dtype=np.int32)
    for i, token in enumerate([*token_ids, eos]):
        matcher.fill_bitmask(words)
        in_mask = is_bit_set(words, token)
        accepted = matcher.advance(token)
        if in_mask != accepted:
            return False, f"step {i}: mask says {in_mask}, advance says {accepted}"
        if not accepted:
            return False, f"rejected at step {i} (token {token})"
    return True, "accepted"


def mutations(rng: random.Random, text: str, alphabet: str, count: int) -> list[str]:
    """Near misses: one character deleted, inserted or replaced, or a span duplicated."""
    out = []
    for _ in range(count):
        if not text:
            out.append(rng.choice(alphabet))
            continue
        i = rng.randrange(len(text))
        kind = rng.randrange(4)
        if kind == 0:
            out.append(text[:i] + text[i + 1 :])
        elif kind == 1:
            out.append(text[:i] + rng.choice(alphabet) + text[i:])
        elif kind == 2:
            out.append(text[:i] + rng.choice(alphabet) + text[i + 1 :])
        else:
            j = rng.randrange(i, len(text) + 1)
            out.append(text[:j] + text[i:j] + text[j:])
    return out


def random_walk(
    matcher: GrammarMatcher,
    rng: random.Random,
    eos: int,
    max_tokens: int,
    favored: frozenset[int] = frozenset(),
    eos_bias: float = 0.5,
) -> tuple[list[int], bool]:
    """Sample allowed tokens until EOS or `max_tokens`; returns (tokens, ended with EOS).

    Uniform sampling over 100k tokens wanders off into names and strings and rarely ends,
    so most steps pick among the allowed `favored` tokens (those real sentences of the
    grammar use) or the shortest allowed ones; the rest are uniform, so any allowed token
    can come up. Fails on an empty mask: a dead end the masks must never lead to.
    """
    matcher.reset()
    vocab = matcher.index.vocabulary
    out: list[int] = []
    for _ in range(max_tokens):
        allowed = matcher.allowed_token_ids().tolist()
        assert allowed, f"dead end after {vocab.decode_bytes(out)!r}"
        if eos in allowed and rng.random() < eos_bias:
            assert matcher.advance(eos)
            return out, True
        candidates = [t for t in allowed if t != eos] or [eos]
        roll = rng.random()
        if roll < 0.6 and favored:
            candidates = [t for t in candidates if t in favored] or candidates
        elif roll < 0.85:
            candidates = sorted(candidates, key=lambda t: len(vocab.token_bytes[t]))[:8]
        token = rng.choice(candidates)
        assert matcher.advance(token), f"mask allowed {token} but advance rejected it"
        if token == eos:
            return out, True
        out.append(token)
    return out, False
