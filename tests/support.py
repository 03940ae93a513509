"""Shared test data: real tokenizers from tests/data (llama3 from ../shared when present)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsmcompile import Vocabulary

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
