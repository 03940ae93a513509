"""Fixtures for the end-to-end tests in real vLLM: a tiny model, an offline engine, a server.

These tests run in the venv that `scripts/vllm_env.sh` builds (`make test-vllm`); the
main suite deselects them with `-m "not vllm"`, and nothing here imports vLLM until a
fixture is used, so collecting them without vLLM is harmless.

Starting vLLM costs one to two minutes on two CPU cores, so each engine starts once: the
offline `LLM` for its module (`offline_llm`), the OpenAI server per session
(`vllm_server`).
Both get 1 GiB of KV cache (`VLLM_CPU_KVCACHE_SPACE`), eager mode and a 512-token
context, which keeps a run within a few GiB on a machine shared with other work.
Artifacts the tests save go to `index_dir`, the one directory `FSMCOMPILE_INDEX_DIRS`
allows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engines import (
    MAX_MODEL_LEN,
    MAX_NUM_SEQS,
    PROCESSOR,
    Server,
    engine_env,
    start_server,
    stop_server,
)

# Warnings stay errors for fsmcompile's code; those vLLM and its stack raise while loading
# (deprecations inside torch.jit, transformers, pydantic, ...) are not ours to fix.
THIRD_PARTY_WARNINGS = [
    "ignore::DeprecationWarning:(torch|vllm|transformers|pydantic|huggingface_hub|importlib)",
    "ignore::FutureWarning:(torch|vllm|transformers)",
    "ignore::UserWarning:(torch|vllm|transformers)",
    "ignore::ResourceWarning:zmq",
    # zmq contexts vLLM's engine client leaves to the garbage collector
    "ignore:Exception ignored in. <function Context.__del__"
    ":pytest.PytestUnraisableExceptionWarning",
]
_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(item.path).resolve().parents:
            for spec in THIRD_PARTY_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(spec))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight Qwen2 checkpoint with the real Qwen2 tokenizer."""
    from tiny_model import build_tiny_qwen2

    return build_tiny_qwen2(tmp_path_factory.mktemp("tiny-qwen2"))


@pytest.fixture(scope="session")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory saved artifacts may be served from (FSMCOMPILE_INDEX_DIRS)."""
    return tmp_path_factory.mktemp("indexes")


@pytest.fixture(scope="session")
def vocabulary(tiny_model: Path) -> Any:
    """The tiny model's tokenizer as an fsmcompile Vocabulary (as the processor loads it)."""
    from fsmcompile import Vocabulary

    return Vocabulary.load(str(tiny_model), vocab_size=151936)


@pytest.fixture(scope="module")
def offline_llm(tiny_model: Path, index_dir: Path) -> Iterator[Any]:
    """vLLM's offline `LLM` with the fsmcompile processor, shut down after its module
    (so it never shares the machine's memory with the server's engine)."""
    patch = pytest.MonkeyPatch()
    for key, value in engine_env(index_dir).items():
        patch.setenv(key, value)
    from vllm import LLM

    llm = LLM(
        model=str(tiny_model),
        max_model_len=MAX_MODEL_LEN,
        max_num_seqs=MAX_NUM_SEQS,
        enforce_eager=True,
        dtype="float32",
        seed=0,
        logits_processors=[PROCESSOR],
    )
    try:
        yield llm
    finally:
        llm.llm_engine.engine_core.shutdown()
        del llm
        patch.undo()


@pytest.fixture(scope="session")
def vllm_server(
    tiny_model: Path, index_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """One OpenAI server with the fsmcompile processor, shared by every server test."""
    log_path = tmp_path_factory.mktemp("server") / "server.log"
    server = start_server(tiny_model, engine_env(index_dir), log_path)
    try:
        yield server
    finally:
        stop_server(server)
