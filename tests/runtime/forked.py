"""Run a call in a forked child, so a test of code that could crash or hang survives it."""

from __future__ import annotations

import os
import select
import signal
from collections.abc import Callable


def outcome_in_child(call: Callable[[], object], *, timeout_s: float = 60.0) -> str:
    """What `call()` did in a forked child: "ok", "<ExceptionType>: <message>",
    "signal <n>" (it crashed) or "hang" (still running after `timeout_s`)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running the parent's teardown
        os.close(read_end)
        try:
            call()
            message = "ok"
        except BaseException as error:  # noqa: BLE001 - every outcome is reported
            message = f"{type(error).__name__}: {error}"
        os.write(write_end, message.encode("utf-8", "replace")[:4000])
        os._exit(0)
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], timeout_s)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "hang"
        chunks = []
        while chunk := os.read(read_end, 4096):
            chunks.append(chunk)
    finally:
        os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    if os.WEXITSTATUS(status) != 0:
        return f"exit {os.WEXITSTATUS(status)}"
    return b"".join(chunks).decode()
