"""One JSONSchemaBench schema checked by any engine, through the bench's adapters.

`bench.jsonschemabench_coverage` runs every engine on the same records with the same
MaskBench rules; this module holds what runs per engine: `check_record` (compile under
the time budget, first mask, then each labelled instance walked token by token by the
shared `base.timed_walk`) and `EngineWorker`, a forked process per engine that loads the
engine's vocabulary once and is killed and replaced past its hard time-out.

Time to first mask (TTFM) is measured as a server meets a spec for the first time: the
engine's same-spec memos are dropped first (`Engine.forget_compiles`), the process is warm
and the tokenizer prepared; TTFM runs from the spec to the first filled bitmask.
"""

from __future__ import annotations

import multiprocessing
import statistics
import sys
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

from bench.engines import load_engine
from bench.engines.base import CompileFailed, Engine, Unsupported
from bench.measure import percentile

WARM_UP_SCHEMAS: tuple[dict[str, Any], ...] = (
    {"type": "object", "properties": {"a": {"type": "string"}}},
    {},
)
"""Compiled and walked by each worker before its first record (imports, one-off setup)."""
STARTUP_TIMEOUT_S = 600.0


def _reason(engine: Engine, ids: list[int], rejected_at: int | None, disagreement: bool) -> str:
    if rejected_at is None or rejected_at >= len(ids):
        return "EOS not allowed at the end"
    piece = engine.token_bytes(ids[rejected_at]).decode("utf-8", "backslashreplace")
    what = "refused by advance" if disagreement else "masked"
    return f"token {rejected_at} {piece!r} {what}"


def _compile_failure(exc: BaseException, base: dict[str, Any], seconds: float) -> dict[str, Any]:
    text = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    if isinstance(exc, Unsupported):
        features = getattr(exc.__cause__, "features", ())
        keywords = sorted({k for _, k in features})
        return {**base, "outcome": "unsupported", "keywords": keywords, "error": text}
    if isinstance(exc, CompileFailed) and text.startswith("budget"):
        return {**base, "outcome": "budget", "limit": text, "seconds_spent": seconds}
    return {**base, "outcome": "error", "error": text}


def check_record(
    engine: Engine, record: dict[str, Any], tests: list[dict[str, Any]], timeout_s: float
) -> dict[str, Any]:
    """Compile one schema with `engine`, time its first mask, walk every instance.

    Never raises for a bad schema: the outcome is `passed`, `over`, `under`,
    `unsupported`, `budget` (TTFM past `timeout_s` included) or `error`.
    """
    base: dict[str, Any] = {"id": record["id"], "subset": record.get("subset")}
    case = {"id": record["id"], "kind": "json", "spec": record["schema"]}
    engine.forget_compiles()
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    try:
        handle = engine.compile(case)
        t1 = time.perf_counter()
        session = engine.start(handle)
        session.fill()
    except RecursionError:
        return {**base, "outcome": "error", "error": "RecursionError"}
    except Exception as exc:  # noqa: BLE001 - every engine failure is a reported outcome
        return _compile_failure(exc, base, time.perf_counter() - t0)
    t2 = time.perf_counter()
    ttfm_cpu_s = time.process_time() - cpu0
    if t2 - t0 > timeout_s:
        return {**base, "outcome": "budget", "limit": "timeout", "seconds_spent": t2 - t0}
    result = {
        **base,
        "compile_s": t1 - t0,
        "ttfm_s": t2 - t0,
        "ttfm_cpu_s": ttfm_cpu_s,
        "index_s": (t1 - t0) if engine.builds_complete_index else None,
        "tests": len(tests),
    }
    mask_ns: list[int] = []
    warm_ns: list[int] = []
    cpu_instance_s: list[float] = []
    over = under = disagreements = 0
    first_failure: dict[str, Any] | None = None
    for test in tests:
        cpu_start = time.process_time()
        walk = engine.mask_walk(handle, test["ids"])
        walk_cpu_s = time.process_time() - cpu_start
        disagreements += walk.disagreement
        if test["valid"]:
            mask_ns += [round(us * 1e3) for us in walk.mask_us]
            cpu_instance_s.append(ttfm_cpu_s + walk_cpu_s)
        if walk.accepted == test["valid"]:
            continue
        over += test["valid"]
        under += not test["valid"]
        if first_failure is None or (under == 1 and not test["valid"]):
            first_failure = {
                "instance": test["index"],
                "valid": test["valid"],
                "description": test.get("description", ""),
                "reason": (
                    _reason(engine, test["ids"], walk.rejected_at, walk.disagreement)
                    if test["valid"]
                    else "accepted"
                ),
                "text": test["text"][:300],
            }
    for test in tests:  # again: what an engine filled lazily on the first walks is warm now
        if test["valid"]:
            warm = engine.mask_walk(handle, test["ids"])
            warm_ns += [round(us * 1e3) for us in warm.mask_us]
    result.update(
        outcome="under" if under else "over" if over else "passed",
        over=over,
        under=under,
        disagreements=disagreements,
        tokens=len(mask_ns),
        mask_us_avg=statistics.fmean(mask_ns) / 1e3 if mask_ns else None,
        mask_us_p99=percentile(sorted(mask_ns), 99) / 1e3 if mask_ns else None,
        mask_ns=mask_ns,
        mask_warm_ns=warm_ns,
        cpu_instance_s=cpu_instance_s,
    )
    if first_failure is not None:
        result["first_failure"] = first_failure
    engine.forget_compiles()
    return result


def safe_check(
    engine: Engine, record: dict[str, Any], tests: list[dict[str, Any]], timeout_s: float
) -> dict[str, Any]:
    """`check_record`, with a harness or engine bug turned into an `error` outcome."""
    try:
        return check_record(engine, record, tests, timeout_s)
    except Exception as exc:  # noqa: BLE001 - one schema must not stop the run
        traceback.print_exc(file=sys.stderr)
        error = f"{type(exc).__name__}: {str(exc)[:300]}"
        return {
            "id": record["id"],
            "subset": record.get("subset"),
            "outcome": "error",
            "error": error,
        }


def ready_engine(name: str, tokenizer_path: str, settings: dict[str, Any], tokenize: Any) -> Engine:
    """An adapter with its vocabulary prepared and a few warm-up schemas run."""
    engine = load_engine(name, **settings["engine_options"])
    engine.prepare_vocab(tokenizer_path)
    for schema in WARM_UP_SCHEMAS:
        record = {"id": "warm-up", "schema": schema}
        tests = [{"index": 0, "valid": True, "text": '{"a":"b"}', "ids": tokenize('{"a":"b"}')}]
        check_record(engine, record, tests, 60.0)
    return engine


def _serve(conn: Connection, name: str, path: str, settings: dict[str, Any], tokenize: Any) -> None:
    """Worker loop: ready, then (record, tests) in and result out, until None."""
    try:
        engine = ready_engine(name, path, settings, tokenize)
    except Exception as exc:  # noqa: BLE001
        traceback.print_exc(file=sys.stderr)
        conn.send({"fatal": f"{type(exc).__name__}: {exc}"[:400]})
        return
    conn.send({"ready": True})
    while True:
        job = conn.recv()
        if job is None:
            return
        conn.send(safe_check(engine, job[0], job[1], settings["timeout_s"]))


class EngineWorker:
    """One engine's forked worker, replaced after a hard time-out or a crash.

    The vocabulary is prepared in the worker (so no engine's threads or imports exist in
    the parent, which forks the others); its start-up is not charged to any schema.
    """

    def __init__(
        self,
        name: str,
        tokenizer_path: str,
        settings: dict[str, Any],
        tokenize: Any,
        hard_timeout_s: float,
    ) -> None:
        self.name = name
        self.tokenizer_path = tokenizer_path
        self.settings = settings
        self.tokenize = tokenize
        self.hard_timeout_s = hard_timeout_s
        self.process: Any = None
        self.conn: Connection | None = None
        self.fatal: str | None = None

    def _start(self) -> None:
        ctx = multiprocessing.get_context("fork")
        parent, child = ctx.Pipe()
        args = (child, self.name, self.tokenizer_path, self.settings, self.tokenize)
        self.process = ctx.Process(target=_serve, args=args, daemon=True)
        self.process.start()
        child.close()
        self.conn = parent
        if not parent.poll(STARTUP_TIMEOUT_S):
            self._stop()
            self.fatal = "worker start-up timed out"
            return
        message = parent.recv()
        if "fatal" in message:
            self._stop()
            self.fatal = message["fatal"]

    def _stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.join(5)
        if self.conn is not None:
            self.conn.close()
        self.process = self.conn = None

    def run(self, record: dict[str, Any], tests: list[dict[str, Any]]) -> dict[str, Any]:
        base = {"id": record["id"], "subset": record.get("subset")}
        if self.process is None or not self.process.is_alive():
            self._stop()
            self._start()
        if self.fatal is not None or self.conn is None:
            return {**base, "outcome": "error", "error": f"engine unavailable: {self.fatal}"}
        started = time.perf_counter()
        try:
            self.conn.send((record, tests))
            if self.conn.poll(self.hard_timeout_s):
                result: dict[str, Any] = self.conn.recv()
                return result
        except (EOFError, OSError):
            code = None
            if self.process is not None:
                self.process.join(5)
                code = self.process.exitcode
            self._stop()
            return {**base, "outcome": "error", "error": f"worker died (exit code {code})"}
        self._stop()
        spent = time.perf_counter() - started
        return {**base, "outcome": "budget", "limit": "hard-timeout", "seconds_spent": spent}

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.send(None)
            except OSError:
                pass
        if self.process is not None:
            self.process.join(5)
        self._stop()


def ttfm_ratio(by_engine: dict[str, list[dict[str, Any]]], peer: str) -> float | None:
    """Median over records both compiled of peer TTFM / fsmcompile TTFM (> 1: fsmcompile
    is faster)."""
    ours = {r["id"]: r["ttfm_s"] for r in by_engine.get("fsmcompile", []) if "ttfm_s" in r}
    ratios = [
        r["ttfm_s"] / ours[r["id"]]
        for r in by_engine.get(peer, [])
        if "ttfm_s" in r and ours.get(r["id"])
    ]
    return statistics.median(ratios) if ratios else None
