"""Shared fixtures: real tokenizers from tests/data (llama3 from ../shared when present)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from fsmcompile import Vocabulary

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared"
LLAMA3 = SHARED / "tokenizers" / "llama3" / "tokenizer.json"
BUNDLED = ("gpt2", "qwen2", "phi3")

# Every test run gets its own cache directory: never the user's, never a stale one.
os.environ["FSMCOMPILE_CACHE_DIR"] = tempfile.mkdtemp(prefix="fsmcompile-test-cache-")
os.environ.pop("FSMCOMPILE_REDIS_URL", None)

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


@pytest.fixture(scope="session")
def gpt2() -> Vocabulary:
    return load_vocabulary("gpt2")


@pytest.fixture(scope="session")
def phi3() -> Vocabulary:
    return load_vocabulary("phi3")


@pytest.fixture(scope="session")
def qwen2() -> Vocabulary:
    return load_vocabulary("qwen2")


@pytest.fixture(scope="session", params=[*BUNDLED, "llama3"])
def real_vocab(request: pytest.FixtureRequest) -> Vocabulary:
    """Each real tokenizer in turn (llama3 skipped when ../shared lacks it)."""
    return load_vocabulary(request.param)
