"""Shared fixtures; the data they load lives in support.py (importable by test modules)."""

from __future__ import annotations

import gc
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import BUNDLED, load_vocabulary

import fsmcompile.cli  # noqa: F401  (loaded for the installed-package check below)
import fsmcompile.runtime  # noqa: F401
from fsmcompile import Vocabulary
from fsmcompile.compile_memos import CompileMemos

# The folders the package is built from (a venv under build/ is not one of them).
SOURCES = tuple(
    Path(__file__).resolve().parents[1] / d for d in ("fsmcompile", "runtime", "cli", "grammars")
)

# Every test run gets its own cache directory: never the user's, never a stale one.
os.environ["FSMCOMPILE_CACHE_DIR"] = tempfile.mkdtemp(prefix="fsmcompile-test-cache-")
os.environ.pop("FSMCOMPILE_REDIS_URL", None)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under FSMCOMPILE_TEST_INSTALLED=1 (scripts/test_wheel.sh), stop the run before any
    test when a loaded fsmcompile module comes from the source tree, not the installed
    package: a stray path entry would otherwise test the tree and pass for the wrong one."""
    if os.environ.get("FSMCOMPILE_TEST_INSTALLED") != "1":
        return
    from_tree = sorted(
        f"{name} from {module.__file__}"
        for name, module in sys.modules.items()
        if name.split(".")[0] == "fsmcompile"
        and getattr(module, "__file__", None)
        and any(Path(module.__file__).resolve().is_relative_to(d) for d in SOURCES)
    )
    if from_tree:
        shown = ", ".join(from_tree[:3])
        pytest.exit(
            f"testing the tree, not the installed package: {len(from_tree)} fsmcompile "
            f"modules come from the tree ({shown}, ...)",
            returncode=3,
        )


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


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Collect the last garbage before pytest's own end-of-run collection, with unclosed
    sockets not reported: a Redis client a test left to the collector (its connection to a
    private server already stopped) would otherwise fail a green run after its summary,
    as an "exception ignored" in a finalizer that `filterwarnings = error` turns into an
    exit code. Leaks during the run still fail the test that made them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
