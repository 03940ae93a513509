"""Start and stop vLLM engines under test: the environment they get, the OpenAI server.

`vllm serve` is broken in the CPU wheel, so the server is started as
`python -m vllm.entrypoints.openai.api_server`, on 127.0.0.1 and a free port, in its own
process group so that its engine processes stop with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from redis_server import free_port

PROCESSOR = "fsmcompile.runtime.vllm:FSMLogitsProcessor"
MAX_MODEL_LEN = 512
MAX_NUM_SEQS = 16
SERVER_START_TIMEOUT_S = 420.0
SERVED_MODEL_NAME = "tiny-qwen2"


def engine_env(index_dir: Path) -> dict[str, str]:
    """Environment for a vLLM engine under test: 1 GiB of KV cache, the allowed index dir."""
    return {
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "FSMCOMPILE_INDEX_DIRS": str(index_dir),
        "TOKENIZERS_PARALLELISM": "false",
    }


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
    model: Path, env: dict[str, str], log_path: Path, extra_args: Sequence[str] = ()
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
