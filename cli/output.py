"""How the CLI talks: results on stdout, progress and errors on stderr, or one JSON document."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from fsmcompile.errors import error_document

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "Console",
    "error_document",
    "human_bytes",
    "printable",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def printable(text: str) -> str:
    """`text` with surrogate code points written as `\\udXXX` escapes: a spec may hold
    them (bytes that are not UTF-8, a lone `\\ud800`), and no stream can print them."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass
class Console:
    """One command's output channel: text or `--json`, quiet or verbose."""

    as_json: bool = False
    quiet: bool = False
    verbosity: int = 0
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    _progress_started: float | None = None

    def line(self, text: str = "") -> None:
        """A line of the result (text mode only)."""
        if not self.as_json:
            print(text, file=self.out)

    def document(self, doc: dict[str, Any]) -> None:
        """The single JSON result (JSON mode only)."""
        if self.as_json:
            print(json.dumps(doc, ensure_ascii=False, sort_keys=True), file=self.out)

    def progress(self, stage: str) -> None:
        """A transient stage line on a terminal; silent in pipes, --json and --quiet."""
        if self.as_json or self.quiet or not self.err.isatty():
            return
        now = time.perf_counter()
        if self._progress_started is None:
            self._progress_started = now
        elapsed = now - self._progress_started
        print(f"\r\x1b[2K[{elapsed:6.2f}s] {stage}...", end="", file=self.err, flush=True)

    def end_progress(self) -> None:
        if self._progress_started is not None:
            print("\r\x1b[2K", end="", file=self.err, flush=True)
            self._progress_started = None

    def fail(self, exc: BaseException) -> int:
        """Report `exc` once; returns the exit code for it."""
        self.end_progress()
        if self.as_json:
            document = json.dumps({"ok": False, "error": error_document(exc)}, ensure_ascii=False)
            print(printable(document), file=self.out)
        else:
            print(f"error: {printable(str(exc))}", file=self.err)
        if self.verbosity >= 2:
            import traceback

            traceback.print_exception(exc, file=self.err)
        return EXIT_FAILED


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"
