"""Shared fixtures; the data they load lives in support.py (importable by test modules)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest
from support import BUNDLED, load_vocabulary

from fsmcompile import Vocabulary
from fsmcompile.compile_memos import CompileMemos

# Every test run gets its own cache directory: never the user's, never a stale one.
os.environ["FSMCOMPILE_CACHE_DIR"] = tempfile.mkdtemp(prefix="fsmcompile-test-cache-")
os.environ.pop("FSMCOMPILE_REDIS_URL", None)


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


@pytest.fixture()
def fresh_memos() -> Iterator[CompileMemos]:
    """A new, empty compile memo set, current for the test: what it builds is built for
    it, whatever earlier tests left in the default set."""
    with CompileMemos().active() as memos:
        yield memos
