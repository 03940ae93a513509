"""Shared test data: real tokenizers from tests/data (llama3 from ../shared when present),
and the check that a text is allowed token by token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fsmcompile import Vocabulary
from fsmcompile.runtime.matcher import matcher_for

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared"
LLAMA3 = SHARED / "tokenizers" / "llama3" / "tokenizer.json"
BUNDLED = ("gpt2", "qwen2", "phi3")

_vocabularies: dict[str, Vocabulary] = {}


def load_vocabulary(name: str) -> Vocabulary:
    """A bundled tokenizer by name (cached for the session), or llama3 from ../shared."""
    if name not in _vocabularies:
        if name == "llama3":
            if not LLAMA3.exists():
                pytest.skip("llama3 tokenizer not present in ../shared")
            _vocabularies[name] = Vocabulary.from_file(LLAMA3)
        else:
            _vocabularies[name] = Vocabulary.from_file(DATA / name / "tokenizer.json.gz")
    return _vocabularies[name]


def random_moves(seed: int, max_states: int, dead_share: float) -> np.ndarray:
    """int32[S, C]: a random transition table (S < max_states, C <= 5), some moves dead."""
    rng = np.random.default_rng(seed)
    states, classes = int(rng.integers(1, max_states)), int(rng.integers(1, 6))
    trans = rng.integers(-1, states, size=(states, classes)).astype(np.int32)
    trans[rng.random(trans.shape) < dead_share] = -1
    return trans


def allowed_all_the_way(index: Any, vocab: Vocabulary, text: str) -> tuple[bool, str]:
    """Every token of the real tokenization is in the mask, then EOS is."""
    matcher = matcher_for(index)
    bits = np.zeros((vocab.size + 31) // 32, dtype=np.int32)
    ids = vocab.encode(text)
    for i, token in enumerate([*ids, vocab.eos_token_ids[0]]):
        matcher.fill_bitmask(bits)
        if not (int(bits[token // 32]) >> (token % 32)) & 1:
            return False, f"token {i} {vocab.decode_bytes(ids[: i + 1])!r} masked out"
        assert matcher.advance(token)
    return True, ""
