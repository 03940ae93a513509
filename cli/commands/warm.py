"""`fsmcompile warm SPECS... --tokenizer T`: precompile a set of specs into every cache tier.

Run before a deploy (or from a cron job) so servers find their indexes published instead
of compiling them on the first request. Each spec goes through `compile_spec` with a
memory → disk (→ Redis) cache, so a miss is compiled once and written to every tier; a
spec found only on this machine's disk is copied up to Redis, since publishing it to the
fleet is the point of warming. With `--jobs N` the specs are spread over N worker
processes, each loading the tokenizer once.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import sys
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from fsmcompile import artifact
from fsmcompile.compiler import Kind, compile_spec, index_cache_key
from fsmcompile.errors import StoreError
from fsmcompile.store import DiskStore, MemoryStore, Store, TieredCache
from fsmcompile.vocabulary import Vocabulary

from ..output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Console, error_document
from .compile import add_common, load_vocabulary, spec_options

_KIND_BY_SUFFIX: dict[str, Kind] = {
    ".json": "json",
    ".lark": "lark",
    ".regex": "regex",
    ".re": "regex",
    ".txt": "regex",
}
_JSONL_SUFFIX = ".jsonl"
# Files picked up when walking a directory (.txt is left out: folders hold READMEs).
_DIRECTORY_SUFFIXES = frozenset({".json", ".lark", ".regex", ".re", _JSONL_SUFFIX})
# The keys a JSONL line may use to say its kind; "schema" is JSONSchemaBench's record field.
_JSONL_KINDS: dict[str, Kind] = {
    "json_schema": "json",
    "schema": "json",
    "regex": "regex",
    "grammar": "lark",
}
# Warming reads each entry once, so the memory tier only dedupes repeats within one run;
# keep it small rather than hold the whole set in RAM.
_MEMORY_TIER_BYTES = 64 * 1024 * 1024

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
    """A SPECS argument that names nothing usable (exit 2)."""


@dataclass(frozen=True, slots=True)
class WarmTask:
    """One spec to warm; crosses to worker processes, so it holds plain data only."""

    label: str
    kind: Kind
    spec: Any
    options: dict[str, Any]


@dataclass(frozen=True, slots=True)
class WarmOutcome:
    """What warming one spec did; `error` is an `error_document` when it failed."""

    label: str
    kind: Kind | None
    key: str | None = None
    cache_hit: bool = False
    cache_tier: str | None = None
    compile_s: float | None = None
    states: int | None = None
    masks: int | None = None
    error: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def line(self) -> str:
        """The spec's one stdout line (a multi-line error message keeps its first line)."""
        if self.error is not None:
            message = str(self.error["message"]).splitlines()[0] if self.error["message"] else ""
            return f"error: {self.label}: {message}"
        if self.cache_hit:
            return f"cache: hit ({self.cache_tier}) {self.label}"
        return f"cache: miss (compiled in {(self.compile_s or 0.0) * 1e3:.1f} ms) {self.label}"

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"spec": self.label, "kind": self.kind, "ok": self.ok}
        if self.error is not None:
            doc["error"] = self.error
            return doc
        doc.update(
            key=self.key,
            cache={"hit": self.cache_hit, "tier": self.cache_tier, "compile_s": self.compile_s},
            states=self.states,
            masks=self.masks,
        )
        return doc


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "warm",
        help="precompile specs into the cache (disk, and Redis with --redis)",
        description="Precompile a set of specs and publish them to every cache tier.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("specs", nargs="+", metavar="SPECS", help="files, directories, JSONL")
    parser.add_argument(
        "--kind",
        choices=["regex", "json", "lark"],
        default=None,
        help="kind of every spec file (default: from its suffix; JSONL lines say their own)",
    )
    parser.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=1,
        metavar="N",
        help="worker processes (default 1: compile in this process)",
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        metavar="DIR",
        help="disk tier folder (default $FSMCOMPILE_CACHE_DIR, else ~/.cache/fsmcompile)",
    )
    add_common(parser)


# -- finding the specs ---------------------------------------------------------------------


def collect_specs(
    paths: Sequence[str],
    *,
    kind: Kind | None,
    options_for: Callable[[Kind], dict[str, Any]],
) -> list[WarmTask | WarmOutcome]:
    """Expand SPECS into tasks, in order; unreadable specs become failed outcomes.

    Raises:
        _UsageError: a path does not exist, or a file's kind cannot be told.
    """
    items: list[WarmTask | WarmOutcome] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            files = sorted(_walk(path))
        elif path.exists():
            files = [path]
        else:
            raise _UsageError(f"no such file or directory: {name}")
        for file in files:
            items.extend(_specs_in_file(file, kind=kind, options_for=options_for))
    return items


def _walk(directory: Path) -> Iterator[Path]:
    for path in directory.rglob("*"):
        hidden = any(part.startswith(".") for part in path.relative_to(directory).parts)
        if not hidden and path.is_file() and path.suffix.lower() in _DIRECTORY_SUFFIXES:
            yield path


def _specs_in_file(
    path: Path, *, kind: Kind | None, options_for: Callable[[Kind], dict[str, Any]]
) -> list[WarmTask | WarmOutcome]:
    label = str(path)
    is_jsonl = path.suffix.lower() == _JSONL_SUFFIX
    file_kind = None if is_jsonl else kind or _KIND_BY_SUFFIX.get(path.suffix.lower())
    if not is_jsonl and file_kind is None:
        raise _UsageError(f"cannot tell the kind of {path}; pass --kind")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [WarmOutcome(label, file_kind, error=error_document(exc))]
    if file_kind is not None:
        spec = text.rstrip("\n") if file_kind == "regex" else text
        return [WarmTask(label, file_kind, spec, options_for(file_kind))]
    items: list[WarmTask | WarmOutcome] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            items.append(_jsonl_spec(line, f"{path}:{number}", options_for))
    return items


def _jsonl_spec(
    line: str, label: str, options_for: Callable[[Kind], dict[str, Any]]
) -> WarmTask | WarmOutcome:
    try:
        doc = json.loads(line)
    except ValueError as exc:
        return WarmOutcome(label, None, error=error_document(ValueError(f"not JSON: {exc}")))
    if isinstance(doc, bool):  # `true` and `false` are schemas too
        return WarmTask(label, "json", doc, options_for("json"))
    if not isinstance(doc, dict):
        message = f"expected an object, got {type(doc).__name__}"
        return WarmOutcome(label, None, error=error_document(ValueError(message)))
    named = [key for key in _JSONL_KINDS if key in doc]
    if len(named) > 1:
        message = f"the line names several specs ({', '.join(named)}); give one per line"
        return WarmOutcome(label, None, error=error_document(ValueError(message)))
    if not named:
        return WarmTask(label, "json", doc, options_for("json"))
    kind = _JSONL_KINDS[named[0]]
    name = doc.get("id", doc.get("name"))
    if isinstance(name, str) and name:
        label = f"{label} ({name})"
    return WarmTask(label, kind, doc[named[0]], options_for(kind))


# -- warming -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _WarmerConfig:
    """What a worker needs to rebuild the parent's warmer (picklable)."""

    tokenizer: str
    vocab_size: int | None
    redis_url: str | None
    cache_dir: str | None
    timeout_s: float
    max_states: int


@dataclass
class _Warmer:
    """A vocabulary and the caches to warm, in this process or one worker."""

    config: _WarmerConfig
    vocab: Vocabulary
    cache: TieredCache = field(init=False)
    publish: TieredCache | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        tiers: list[Store] = [MemoryStore(_MEMORY_TIER_BYTES), DiskStore(self.config.cache_dir)]
        if self.config.redis_url:
            from fsmcompile.store.redis import RedisStore

            redis_store = RedisStore(self.config.redis_url)
            tiers.append(redis_store)
            # Redis alone: a hit on a faster tier is only copied *up*, never down to Redis.
            self.publish = TieredCache([redis_store])
        self.cache = TieredCache(tiers)

    def warm(self, task: WarmTask) -> WarmOutcome:
        try:
            result = compile_spec(
                task.kind,
                task.spec,
                self.vocab,
                options=task.options,
                timeout_s=self.config.timeout_s,
                max_states=self.config.max_states,
                cache=self.cache,
            )
            key = self.key_of(task)
            if self.publish is not None and result.cache_tier == "disk":
                # Found on this machine only (a memory hit was handled earlier this run).
                def local_bytes() -> bytes:
                    return self.cache.get(key) or artifact.to_bytes(result.index)

                self.publish.get_or_compute(key, local_bytes)
        except Exception as exc:  # noqa: BLE001 - every failure is one spec's outcome
            return WarmOutcome(task.label, task.kind, error=error_document(exc))
        return WarmOutcome(
            task.label,
            task.kind,
            key=key,
            cache_hit=result.cache_hit,
            cache_tier=result.cache_tier,
            compile_s=result.compile_s,
            states=result.num_states,
            masks=result.num_masks,
        )

    def key_of(self, task: WarmTask) -> str:
        """The key `compile_spec` stores `task` under (the tests pin the two together)."""
        return index_cache_key(task.kind, task.spec, self.vocab, task.options)

    def close(self) -> None:
        self.cache.close()


_worker: _Warmer | None = None


def _init_worker(config: _WarmerConfig, log_level: int) -> None:
    """Pool initializer: the tokenizer is loaded once per worker, not once per spec."""
    global _worker
    logging.basicConfig(
        level=log_level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    vocab = Vocabulary.load(config.tokenizer, vocab_size=config.vocab_size)
    _worker = _Warmer(config, vocab)


def _warm_in_worker(task: WarmTask) -> WarmOutcome:
    if _worker is None:
        raise RuntimeError("warm worker used before its initializer ran")
    return _worker.warm(task)


def _warm_in_pool(
    config: _WarmerConfig, tasks: list[WarmTask], jobs: int
) -> Generator[tuple[int, WarmOutcome], None, None]:
    """Yield `(task position, outcome)` as workers finish, in completion order."""
    pool = ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(config, logging.getLogger().getEffectiveLevel()),
    )
    try:
        futures: dict[Future[WarmOutcome], int] = {
            pool.submit(_warm_in_worker, task): n for n, task in enumerate(tasks)
        }
        for future in as_completed(futures):
            n = futures[future]
            try:
                outcome = future.result()
            except Exception as exc:  # noqa: BLE001 - a worker died: that spec failed
                outcome = WarmOutcome(tasks[n].label, tasks[n].kind, error=error_document(exc))
            yield n, outcome
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


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


# -- the command ---------------------------------------------------------------------------


def _usage(console: Console, message: str) -> int:
    print(f"error: {message}", file=console.err)
    return EXIT_USAGE


def _check_redis(url: str, console: Console, warnings: list[str]) -> str | None:
    """The URL to use, or None when Redis is down (warned once here, not once per worker).

    Raises:
        _UsageError: the URL is malformed.
    """
    from fsmcompile.store.redis import RedisStore, redact_url

    try:
        probe = RedisStore(url)
    except StoreError as exc:
        raise _UsageError(str(exc)) from exc
    try:
        probe.ping()
    except StoreError as exc:
        message = (
            f"Redis at {redact_url(url)} is unreachable; compiling locally and caching on "
            f"this machine only ({exc})"
        )
        warnings.append(message)
        print(f"warning: {message}", file=console.err)
        return None
    finally:
        probe.close()
    return url


def run(args: argparse.Namespace, console: Console) -> int:
    if args.jobs < 1:
        return _usage(console, f"--jobs must be at least 1, got {args.jobs}")
    if args.no_cache:
        return _usage(console, "--no-cache would make warm store nothing; drop it")
    try:
        items = collect_specs(
            args.specs, kind=args.kind, options_for=lambda kind: spec_options(kind, args)
        )
        if not items:
            raise _UsageError(f"no spec files found in {' '.join(args.specs)}")
        warnings: list[str] = []
        redis_url = _check_redis(args.redis, console, warnings) if args.redis else None
    except _UsageError as exc:
        return _usage(console, str(exc))
    started = time.perf_counter()
    config = _WarmerConfig(
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
        warmer = _Warmer(config, vocab) if jobs == 1 else None
    except Exception as exc:  # noqa: BLE001 - reported once, never a traceback
        return console.fail(exc)

    outcomes = _warm_all(items, tasks, config, warmer, jobs, console)
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
            "cache_dir": str(DiskStore(args.cache_dir).directory),
            "redis": _redacted(redis_url),
            "specs": [outcome.document() for outcome in outcomes],
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


def _warm_all(
    items: list[WarmTask | WarmOutcome],
    tasks: list[WarmTask],
    config: _WarmerConfig,
    warmer: _Warmer | None,
    jobs: int,
    console: Console,
) -> list[WarmOutcome]:
    """Warm `tasks` here (`warmer`) or in `jobs` workers; print each outcome in input order."""
    position = [n for n, item in enumerate(items) if isinstance(item, WarmTask)]
    outcomes: list[WarmOutcome | None] = [
        item if isinstance(item, WarmOutcome) else None for item in items
    ]
    progress = _ProgressBar(console, len(items))
    printed = 0
    done = len(items) - len(tasks)

    def emit_ready() -> None:
        """Print outcomes as soon as every earlier one is known (workers finish out of order)."""
        nonlocal printed
        progress.clear()
        while printed < len(outcomes) and (ready := outcomes[printed]) is not None:
            console.line(ready.line())
            printed += 1
        progress.draw(done)

    emit_ready()
    finished: Generator[tuple[int, WarmOutcome], None, None]
    if warmer is None:
        finished = _warm_in_pool(config, tasks, jobs)
    else:
        finished = ((n, warmer.warm(task)) for n, task in enumerate(tasks))
    try:
        for n, outcome in finished:
            outcomes[position[n]] = outcome
            done += 1
            emit_ready()
    finally:
        finished.close()  # on Ctrl-C: cancel what the workers have not started
        progress.clear()
        if warmer is not None:
            warmer.close()
    return [outcome for outcome in outcomes if outcome is not None]


def _redacted(url: str | None) -> str | None:
    if url is None:
        return None
    from fsmcompile.store.redis import redact_url

    return redact_url(url)
