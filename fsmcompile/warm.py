"""Warming: precompile a set of specs into every cache tier, before servers ask for them.

Run before a deploy (or from a cron job) so servers find their indexes published instead
of compiling them on the first request. Each spec goes through `compile_spec` with a
memory → disk (→ Redis) cache, so a miss is compiled once and written to every tier; a
spec found only on this machine's disk is copied up to Redis, since publishing it to the
fleet is the point of warming. With `jobs > 1` the specs are spread over worker
processes, each loading the tokenizer once.

This module sits above the compiler and the stores and is not imported by
`fsmcompile/__init__`: it starts processes, which a plain `import fsmcompile` must not
prepare for.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import sys
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmcompile import artifact
from fsmcompile.compiler import DEFAULT_MAX_STATES, DEFAULT_TIMEOUT_S, compile_spec, index_cache_key
from fsmcompile.errors import SpecPathError, StoreError, error_document
from fsmcompile.frontend.identity import Kind
from fsmcompile.spec_files import KIND_BY_SUFFIX, decode_spec, kind_of_file, spec_from_text
from fsmcompile.store import DiskStore, MemoryStore, Store, TieredCache
from fsmcompile.vocabulary import Vocabulary

__all__ = [
    "Finished",
    "WarmOutcome",
    "WarmSettings",
    "WarmTask",
    "Warmer",
    "collect_specs",
    "probe_redis",
    "warm_tasks",
]

logger = logging.getLogger(__name__)

_JSONL_SUFFIX = ".jsonl"
# Files picked up when walking a directory (.txt is left out: folders hold READMEs).
_DIRECTORY_SUFFIXES = frozenset({*KIND_BY_SUFFIX} - {".txt"} | {_JSONL_SUFFIX})
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

OptionsFor = Callable[[Kind], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class WarmTask:
    """One spec to warm; crosses to worker processes, so it holds plain data only.

    Attributes:
        label: how outcomes name it: a path, or `path:line (id)` for a JSONL line.
        kind: 'regex', 'json' or 'lark'.
        spec: the spec as `compile_spec` takes it.
        options: kind-specific compile options (part of the cache key).
    """

    label: str
    kind: Kind
    spec: Any
    options: dict[str, Any]


@dataclass(frozen=True, slots=True)
class WarmOutcome:
    """What warming one spec did; `error` is an `error_document` when it failed.

    Attributes:
        key: the cache key the index is stored under.
        cache_hit / cache_tier: whether a tier already held it, and which.
        compile_s: seconds spent compiling it (None on a hit).
        states / masks: the index's size.
    """

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


def _failed(label: str, kind: Kind | None, exc: BaseException) -> WarmOutcome:
    return WarmOutcome(label, kind, error=error_document(exc))


# -- finding the specs ---------------------------------------------------------------------


def collect_specs(
    paths: Sequence[str | Path], *, kind: Kind | None, options_for: OptionsFor
) -> list[WarmTask | WarmOutcome]:
    """Expand spec paths into tasks, in order; unreadable specs become failed outcomes.

    Args:
        paths: spec files (kind from the suffix unless `kind` is given), folders
            searched recursively for .json/.lark/.regex/.re/.jsonl files, or JSONL files
            with one spec per line: `{"json_schema": ...}`, `{"regex": ...}`,
            `{"grammar": ...}`, a JSONSchemaBench record `{"id", "schema"}` (an "id" or
            "name" labels any of these), or a bare schema.
        kind: the kind of every spec file (JSONL lines still say their own).
        options_for: the compile options of each kind.

    Raises:
        SpecPathError: a path does not exist, or a file's kind cannot be told.
    """
    items: list[WarmTask | WarmOutcome] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            files = sorted(_walk(path))
        elif path.exists():
            files = [path]
        else:
            raise SpecPathError(f"no such file or directory: {name}", str(name))
        for file in files:
            items.extend(_specs_in_file(file, kind=kind, options_for=options_for))
    return items


def _walk(directory: Path) -> Iterator[Path]:
    for path in directory.rglob("*"):
        hidden = any(part.startswith(".") for part in path.relative_to(directory).parts)
        if not hidden and path.is_file() and path.suffix.lower() in _DIRECTORY_SUFFIXES:
            yield path


def _specs_in_file(
    path: Path, *, kind: Kind | None, options_for: OptionsFor
) -> list[WarmTask | WarmOutcome]:
    label = str(path)
    is_jsonl = path.suffix.lower() == _JSONL_SUFFIX
    file_kind = None if is_jsonl else kind_of_file(path, kind)
    try:
        text = decode_spec(path.read_bytes(), label)
    except (OSError, ValueError) as exc:  # SpecEncodingError is a ValueError
        return [_failed(label, file_kind, exc)]
    if file_kind is not None:
        return [WarmTask(label, file_kind, spec_from_text(file_kind, text), options_for(file_kind))]
    items: list[WarmTask | WarmOutcome] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            items.append(_jsonl_spec(line, f"{path}:{number}", options_for))
    return items


def _jsonl_spec(line: str, label: str, options_for: OptionsFor) -> WarmTask | WarmOutcome:
    try:
        doc = json.loads(line)
    except ValueError as exc:
        return _failed(label, None, ValueError(f"not JSON: {exc}"))
    if isinstance(doc, bool):  # `true` and `false` are schemas too
        return WarmTask(label, "json", doc, options_for("json"))
    if not isinstance(doc, dict):
        return _failed(label, None, ValueError(f"expected an object, got {type(doc).__name__}"))
    named = [key for key in _JSONL_KINDS if key in doc]
    if len(named) > 1:
        message = f"the line names several specs ({', '.join(named)}); give one per line"
        return _failed(label, None, ValueError(message))
    if not named:
        return WarmTask(label, "json", doc, options_for("json"))
    kind = _JSONL_KINDS[named[0]]
    name = doc.get("id", doc.get("name"))
    if isinstance(name, str) and name:
        label = f"{label} ({name})"
    return WarmTask(label, kind, doc[named[0]], options_for(kind))


# -- warming -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WarmSettings:
    """What every warmer of one run shares; picklable, so workers rebuild theirs from it.

    Attributes:
        tokenizer: what `Vocabulary.load` takes (a worker loads it once).
        vocab_size: logits width when larger than the tokenizer.
        redis_url: the Redis tier to publish to; None: this machine only.
        cache_dir: the disk tier's folder; None: `default_cache_dir()`.
        timeout_s / max_states: each compile's budgets.
    """

    tokenizer: str
    vocab_size: int | None = None
    redis_url: str | None = None
    cache_dir: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_states: int = DEFAULT_MAX_STATES


@dataclass
class Warmer:
    """A vocabulary and the caches to warm, in this process or one worker.

    Raises:
        StoreUnavailableError: `settings.redis_url` is malformed.
    """

    settings: WarmSettings
    vocab: Vocabulary
    cache: TieredCache = field(init=False)
    publish: TieredCache | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        tiers: list[Store] = [MemoryStore(_MEMORY_TIER_BYTES), DiskStore(self.settings.cache_dir)]
        if self.settings.redis_url:
            from fsmcompile.store.redis import RedisStore

            redis_store = RedisStore(self.settings.redis_url)
            tiers.append(redis_store)
            # Redis alone: a hit on a faster tier is only copied *up*, never down to Redis.
            self.publish = TieredCache([redis_store])
        self.cache = TieredCache(tiers)

    def warm(self, task: WarmTask) -> WarmOutcome:
        """Compile `task` into every tier (or find it there); never raises: a failure is
        the outcome's `error`."""
        try:
            result = compile_spec(
                task.kind,
                task.spec,
                self.vocab,
                options=task.options,
                timeout_s=self.settings.timeout_s,
                max_states=self.settings.max_states,
                cache=self.cache,
            )
            key = self.key_of(task)
            if self.publish is not None and result.cache_tier == "disk":
                # Found on this machine only (a memory hit was handled earlier this run).
                def local_bytes() -> bytes:
                    return self.cache.get(key) or artifact.to_bytes(result.index)

                self.publish.get_or_compute(key, local_bytes)
        except Exception as exc:  # noqa: BLE001 - every failure is one spec's outcome
            return _failed(task.label, task.kind, exc)
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


def probe_redis(url: str) -> StoreError | None:
    """Check the Redis tier once, before any worker starts (so an outage is reported
    once, not once per worker).

    Returns:
        None when Redis answers; the error when it cannot be reached.

    Raises:
        StoreUnavailableError: the URL is malformed.
    """
    from fsmcompile.store.redis import RedisStore

    probe = RedisStore(url)
    try:
        probe.ping()
    except StoreError as exc:
        return exc
    finally:
        probe.close()
    return None


_worker: Warmer | None = None


def _init_worker(settings: WarmSettings, log_level: int) -> None:
    """Pool initializer: the tokenizer is loaded once per worker, not once per spec."""
    global _worker
    logging.basicConfig(
        level=log_level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    vocab = Vocabulary.load(settings.tokenizer, vocab_size=settings.vocab_size)
    _worker = Warmer(settings, vocab)


def _warm_in_worker(task: WarmTask) -> WarmOutcome:
    if _worker is None:
        raise RuntimeError("warm worker used before its initializer ran")
    return _worker.warm(task)


Finished = Generator[tuple[int, WarmOutcome], None, None]


def _warm_in_pool(settings: WarmSettings, tasks: Sequence[WarmTask], jobs: int) -> Finished:
    pool = ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(settings, logging.getLogger().getEffectiveLevel()),
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
                outcome = _failed(tasks[n].label, tasks[n].kind, exc)
            yield n, outcome
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _warm_here(warmer: Warmer, tasks: Sequence[WarmTask]) -> Finished:
    try:
        for n, task in enumerate(tasks):
            yield n, warmer.warm(task)
    finally:
        warmer.close()


def warm_tasks(
    settings: WarmSettings,
    tasks: Sequence[WarmTask],
    *,
    jobs: int = 1,
    vocab: Vocabulary | None = None,
) -> Finished:
    """Warm `tasks`; yield `(task position, outcome)` as each finishes.

    With `jobs` 1 the tasks run here, in order; otherwise `jobs` spawned workers each
    load the tokenizer once and outcomes arrive in completion order. Closing the
    iterator early (Ctrl-C) cancels what the workers have not started.

    Args:
        settings: tokenizer, tiers and budgets.
        tasks: from `collect_specs`.
        jobs: worker processes (capped at the number of tasks).
        vocab: the loaded tokenizer, reused when warming in this process.

    Raises:
        ValueError: `jobs` < 1.
        VocabularyError: the tokenizer does not load (in this process).
        StoreUnavailableError: `settings.redis_url` is malformed.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    if min(jobs, len(tasks)) <= 1:
        # Built before the first task, so a bad tokenizer or URL raises here, not later.
        if vocab is None:
            vocab = Vocabulary.load(settings.tokenizer, vocab_size=settings.vocab_size)
        return _warm_here(Warmer(settings, vocab), tasks)
    return _warm_in_pool(settings, tasks, min(jobs, len(tasks)))
