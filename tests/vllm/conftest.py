"""Fixtures for the end-to-end tests in real vLLM: a tiny model, an offline engine, a server.

These tests run in the venv that `scripts/vllm_env.sh` builds (`make test-vllm`); the
main suite deselects them with `-m "not vllm"`, and nothing here imports vLLM until a
fixture is used, so collecting them without vLLM is harmless.

Starting vLLM costs about a minute on two CPU cores, so each engine starts once: the
offline `LLM` per session (`offline_llm`), the OpenAI server per session (`vllm_server`).
Both get 1 GiB of KV cache (`VLLM_CPU_KVCACHE_SPACE`), eager mode and a 512-token
context, which keeps a run within a few GiB on a machine shared with other work.
Artifacts the tests save go to `index_dir`, the one directory `FSMCOMPILE_INDEX_DIRS`
allows.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from redis_server import free_port

PROCESSOR = "fsmcompile.runtime.vllm:FSMLogitsProcessor"
MAX_MODEL_LEN = 512
MAX_NUM_SEQS = 16
SERVER_START_TIMEOUT_S = 420.0
SERVED_MODEL_NAME = "tiny-qwen2"

# Warnings stay errors for fsmcompile's code; those vLLM and its stack raise while loading
# (deprecations inside torch.jit, transformers, pydantic, ...) are not ours to fix.
THIRD_PARTY_WARNINGS = [
    "ignore::DeprecationWarning:(torch|vllm|transformers|pydantic|huggingface_hub|importlib)",
    "ignore::FutureWarning:(torch|vllm|transformers)",
    "ignore::UserWarning:(torch|vllm|transformers)",
]
_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(item.path).resolve().parents:
            for spec in THIRD_PARTY_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(spec))


def engine_env(index_dir: Path) -> dict[str, str]:
    """Environment for a vLLM engine under test (also applied to this process)."""
    return {
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "FSMCOMPILE_INDEX_DIRS": str(index_dir),
        "TOKENIZERS_PARALLELISM": "false",
    }


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


@pytest.fixture(scope="session")
def offline_llm(tiny_model: Path, index_dir: Path) -> Iterator[Any]:
    """vLLM's offline `LLM` with the fsmcompile processor, started once per session."""
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
        shutdown = getattr(llm.llm_engine, "shutdown", None)
        if callable(shutdown):
            shutdown()
        del llm
        patch.undo()


@dataclass
class Server:
    """A running OpenAI-compatible vLLM server."""

    base_url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log_tail(self, num_chars: int = 6000) -> str:
        return self.log_path.read_text(errors="replace")[-num_chars:]

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.base_url + "/health", timeout=5) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False


def start_server(
    model: Path, env: dict[str, str], log_path: Path, extra_args: list[str] = ()
) -> Server:
    """Start `python -m vllm.entrypoints.openai.api_server` on 127.0.0.1 and a free port.

    (`vllm serve` is broken in the CPU wheel.) Waits for /health; raises with the log
    tail if the server exits or does not come up in time.
    """
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--model",
        str(model),
        "--served-model-name",
        SERVED_MODEL_NAME,
        "--max-model-len",
        str(MAX_MODEL_LEN),
        "--max-num-seqs",
        str(MAX_NUM_SEQS),
        "--enforce-eager",
        "--dtype",
        "float32",
        "--seed",
        "0",
        "--logits-processors",
        PROCESSOR,
        *extra_args,
    ]
    log = open(log_path, "wb")  # noqa: SIM115 - the server writes to it until stopped
    process = subprocess.Popen(
        command,
        env={**os.environ, **env},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its engine processes die with its process group
    )
    log.close()
    server = Server(f"http://127.0.0.1:{port}", process, log_path)
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"vLLM server exited ({process.returncode}):\n{server.log_tail()}")
        if server.healthy():
            return server
        time.sleep(2)
    stop_server(server)
    raise RuntimeError(
        f"vLLM server not healthy after {SERVER_START_TIMEOUT_S}s:\n{server.log_tail()}"
    )


def stop_server(server: Server) -> None:
    """SIGTERM the server's process group, then SIGKILL what is left after 30 s."""
    try:
        os.killpg(server.process.pid, signal.SIGTERM)
        server.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=30)
    except ProcessLookupError:
        pass


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


@pytest.fixture(scope="module")
def backend_server(
    tiny_model: Path, index_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """A server whose structured-outputs backend is fsmcompile, one per test module."""
    log_path = tmp_path_factory.mktemp("backend-server") / "server.log"
    backend = ["--structured-outputs-config", '{"backend": "fsmcompile"}']
    server = start_server(tiny_model, engine_env(index_dir), log_path, backend)
    try:
        yield server
    finally:
        stop_server(server)
