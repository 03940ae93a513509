"""A private redis-server on a free loopback port, for tests: never the shared one on 6379.

Shared by the store tests (`tests/store/conftest.py` builds its fixtures on it) and the
CLI cache tests; `tests/` is on pytest's pythonpath, so `from redis_server import ...`.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

__all__ = ["REDIS_SERVER", "RedisServer", "free_port"]

REDIS_SERVER = shutil.which("redis-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One private redis-server process on a fixed port, restartable on that port."""

    def __init__(self, directory: Path, *extra_args: str) -> None:
        if REDIS_SERVER is None:
            pytest.skip("redis-server not found on PATH; install it to run the Redis tests")
        self.port = free_port()
        self.directory = directory
        self.extra_args = extra_args
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = directory / f"redis-{self.port}.log"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert REDIS_SERVER is not None
        args = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--save", "", "--appendonly", "no", "--dir", str(self.directory)]
        args += ["--logfile", str(self.log_path)]
        if "--cluster-enabled" in self.extra_args:  # the bus port must be free and <= 65535
            args += ["--cluster-port", str(free_port())]
            args += ["--cluster-config-file", f"nodes-{self.port}.conf"]
        self.proc = subprocess.Popen(
            [*args, *self.extra_args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = self.log_path.read_text()[-2000:] if self.log_path.exists() else ""
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}:\n{log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    reply = s.recv(64)
                if reply.startswith((b"+PONG", b"-NOAUTH")):
                    return
            except OSError:
                pass
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"redis-server on port {self.port} did not answer PING")

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)  # a paused server cannot die otherwise
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)
