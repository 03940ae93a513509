"""`fsmcompile warm SPECS... --tokenizer T`: precompile a set of specs into every cache tier.

Parses the arguments, hands the specs to `fsmcompile.warm` and prints one line per spec
in the order given (workers finish out of order), a progress bar on a terminal, and a
summary or one JSON document.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, TextIO

from fsmcompile.errors import SpecPathError, StoreError
from fsmcompile.store import DiskStore
from fsmcompile.warm import (
    Finished,
    WarmOutcome,
    WarmSettings,
    WarmTask,
    collect_specs,
    probe_redis,
    warm_tasks,
)

from ..options import add_compile_options, add_kind_option, load_vocabulary, spec_options
from ..output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Console

_EPILOG = """\
SPECS are spec files (.json schema, .lark grammar, .regex/.re/.txt pattern), directories
searched recursively for .json/.lark/.regex/.re/.jsonl files, or JSONL files with one spec
per line: {"json_schema": {...}}, {"regex": "..."}, {"grammar": "..."}, a JSONSchemaBench
record {"id": ..., "schema": {...}} (an "id" or "name" labels any of these), or a bare
schema object.

Prints one line per spec, in the order given, starting with "cache: hit (TIER)",
"cache: miss (compiled in X ms)" or "error: SPEC: MESSAGE", then a summary.

exit codes: 0 every spec is cached; 1 a spec failed (or the tokenizer did not load);
2 usage error (no such path, unknown kind, bad --redis URL).
"""


class _UsageError(Exception):
    """Arguments that name nothing usable (exit 2)."""


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "warm",
        help="precompile specs into the cache (disk, and Redis with --redis)",
        description="Precompile a set of specs and publish them to every cache tier.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("specs", nargs="+", metavar="SPECS", help="files, directories, JSONL")
    add_kind_option(
        parser, "kind of every spec file (default: from its suffix; JSONL lines say their own)"
    )
    parser.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=1,
        metavar="N",
        help="worker processes (default 1: compile in this process)",
    )
    add_compile_options(parser)


def outcome_line(outcome: WarmOutcome) -> str:
    """The spec's one stdout line (a multi-line error message keeps its first line)."""
    if outcome.error is not None:
        message = outcome.error["message"]
        return f"error: {outcome.label}: {str(message).splitlines()[0] if message else ''}"
    if outcome.cache_hit:
        return f"cache: hit ({outcome.cache_tier}) {outcome.label}"
    return f"cache: miss (compiled in {(outcome.compile_s or 0.0) * 1e3:.1f} ms) {outcome.label}"


def outcome_document(outcome: WarmOutcome) -> dict[str, Any]:
    doc: dict[str, Any] = {"spec": outcome.label, "kind": outcome.kind, "ok": outcome.ok}
    if outcome.error is not None:
        doc["error"] = outcome.error
        return doc
    doc.update(
        key=outcome.key,
        cache={
            "hit": outcome.cache_hit,
            "tier": outcome.cache_tier,
            "compile_s": outcome.compile_s,
        },
        states=outcome.states,
        masks=outcome.masks,
    )
    return doc


class _ProgressBar:
    """`[#####.....] 5/10 specs` on stderr, redrawn in place; only on a terminal."""

    def __init__(self, console: Console, total: int) -> None:
        self.err: TextIO = console.err
        self.enabled = not (console.as_json or console.quiet) and console.err.isatty()
        self.total = total
        self.started = time.perf_counter()
        self.shown = False

    def draw(self, done: int) -> None:
        if not self.enabled:
            return
        width = 30
        filled = width * done // max(1, self.total)
        elapsed = time.perf_counter() - self.started
        bar = "#" * filled + "." * (width - filled)
        text = f"\r\x1b[2K[{bar}] {done}/{self.total} specs  {elapsed:.1f} s"
        print(text, end="", file=self.err, flush=True)
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            print("\r\x1b[2K", end="", file=self.err, flush=True)
            self.shown = False


def _redacted(url: str) -> str:
    """`url` without its password (imported here: redis-py loads only when Redis is used)."""
    from fsmcompile.store.redis_connect import redact_url

    return redact_url(url)


def _usable_redis(url: str, console: Console, warnings: list[str]) -> str | None:
    """The URL to use, or None when Redis is down (warned once here, not once per worker).

    Raises:
        _UsageError: the URL is malformed.
    """
    try:
        down = probe_redis(url)
    except StoreError as exc:
        raise _UsageError(str(exc)) from exc
    if down is None:
        return url
    message = (
        f"Redis at {_redacted(url)} is unreachable; compiling locally and caching on "
        f"this machine only ({down})"
    )
    warnings.append(message)
    print(f"warning: {message}", file=console.err)
    return None


def run(args: argparse.Namespace, console: Console) -> int:
    try:
        if args.jobs < 1:
            raise _UsageError(f"--jobs must be at least 1, got {args.jobs}")
        if args.no_cache:
            raise _UsageError("--no-cache would make warm store nothing; drop it")
        items = collect_specs(
            args.specs, kind=args.kind, options_for=lambda kind: spec_options(kind, args)
        )
        if not items:
            raise _UsageError(f"no spec files found in {' '.join(args.specs)}")
        warnings: list[str] = []
        redis_url = _usable_redis(args.redis, console, warnings) if args.redis else None
    except (_UsageError, SpecPathError) as exc:
        print(f"error: {exc}", file=console.err)
        return EXIT_USAGE
    started = time.perf_counter()
    settings = WarmSettings(
        tokenizer=args.tokenizer,
        vocab_size=args.vocab_size,
        redis_url=redis_url,
        cache_dir=args.cache_dir,
        timeout_s=args.timeout,
        max_states=args.max_states,
    )
    tasks = [item for item in items if isinstance(item, WarmTask)]
    jobs = max(1, min(args.jobs, len(tasks)))
    try:
        # Loaded here even when workers load their own: a bad --tokenizer fails once,
        # and the summary names the tokenizer.
        vocab = load_vocabulary(args)
        finished = warm_tasks(settings, tasks, jobs=jobs, vocab=vocab)
    except Exception as exc:  # noqa: BLE001 - reported once, never a traceback
        return console.fail(exc)

    outcomes = _print_in_order(items, finished, console)
    wall_s = time.perf_counter() - started
    failed = sum(not outcome.ok for outcome in outcomes)
    hits = sum(outcome.ok and outcome.cache_hit for outcome in outcomes)
    compiled = len(outcomes) - failed - hits
    console.line(
        f"warmed {len(outcomes)} specs for {vocab.name} in {wall_s:.2f} s: {compiled} "
        f"compiled, {hits} cache hits, {failed} failed"
    )
    console.document(
        {
            "ok": failed == 0,
            "tokenizer": vocab.name,
            "vocab_fingerprint": vocab.fingerprint,
            "jobs": jobs,
            "cache_dir": DiskStore(args.cache_dir).location,
            "redis": None if redis_url is None else _redacted(redis_url),
            "specs": [outcome_document(outcome) for outcome in outcomes],
            "summary": {
                "specs": len(outcomes),
                "compiled": compiled,
                "hits": hits,
                "failed": failed,
            },
            "wall_s": wall_s,
            "warnings": warnings,
        }
    )
    return EXIT_FAILED if failed else EXIT_OK


def _print_in_order(
    items: list[WarmTask | WarmOutcome],
    finished: Finished,
    console: Console,
) -> list[WarmOutcome]:
    """Print each outcome as soon as every earlier one is known; return them in order.

    `finished` yields `(task position, outcome)`; the failed outcomes already among
    `items` (unreadable specs) are printed in their place.
    """
    position = [n for n, item in enumerate(items) if isinstance(item, WarmTask)]
    outcomes: list[WarmOutcome | None] = [
        item if isinstance(item, WarmOutcome) else None for item in items
    ]
    progress = _ProgressBar(console, len(items))
    printed = 0
    done = len(items) - len(position)

    def emit_ready() -> None:
        nonlocal printed
        progress.clear()
        while printed < len(outcomes) and (ready := outcomes[printed]) is not None:
            console.line(outcome_line(ready))
            printed += 1
        progress.draw(done)

    emit_ready()
    try:
        for n, outcome in finished:
            outcomes[position[n]] = outcome
            done += 1
            emit_ready()
    finally:
        finished.close()  # on Ctrl-C: cancel what the workers have not started
        progress.clear()
    return [outcome for outcome in outcomes if outcome is not None]
