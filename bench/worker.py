"""The worker process: one engine, one case-set, driven over a pipe by `python -m bench`.

Internal (the one entry point is `python -m bench`). The parent starts
`python -m bench.worker --engine NAME --tokenizer PATH ...`, reads one JSON line per
event from the worker's stdout and writes one JSON line per request to its stdin:

    worker → {"event": "ready", "vocab": {...}}         after prepare_vocab
    parent → {"op": "case", "case": {...}}               case with token ids of instances
    worker → {"event": "compiled", ...}                  first compile done (for time-outs)
    worker → {"event": "result", "result": {...}}
    parent → {"op": "extras"}  → {"event": "extras", ...}   engine-specific figures
    parent → {"op": "quit"}    → {"event": "bye", "peak_rss_bytes": N}

Engines print to stdout from native code, so the protocol uses a duplicate of the
original stdout and fd 1 is pointed at stderr (which the parent sends to a log file).
The parent enforces the per-case time-out by killing this process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from typing import Any, TextIO

from bench.engines import load_engine
from bench.engines.base import CompileFailed, Engine, Unsupported
from bench.measure import package_version, peak_rss_bytes, rss_bytes

#: Extra compiles (a median figure) only while the compiles so far took less than this.
REPEAT_COMPILE_BUDGET_S = 2.0
WARM_UPS: tuple[dict[str, Any], ...] = (
    {"id": "warm-up", "kind": "regex", "spec": "[a-z]{1,3}"},
    {"id": "warm-up-json", "kind": "json", "spec": {"type": "object", "properties": {"a": {}}}},
)
"""Compiled before the first case, so that imports and what an engine builds once per
process (fsmcompile: the any-JSON terminals a free-form member needs) are charged to no
case: each case's first compile is then what a new spec costs a running server."""


def _send(channel: TextIO, message: dict[str, Any]) -> None:
    channel.write(json.dumps(message) + "\n")
    channel.flush()


def _compile_and_first_mask(
    engine: Engine, case: dict[str, Any]
) -> tuple[Any, float, float, float]:
    """(handle, compile s, time-to-first-mask s, its process CPU s): compile, start, one
    fill, after the engine forgot what it kept of earlier compiles of this spec."""
    engine.forget_compiles()
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    handle = engine.compile(case)
    t1 = time.perf_counter()
    session = engine.start(handle)  # held: fill may write through a raw pointer into its mask
    session.fill()
    t2 = time.perf_counter()
    return handle, t1 - t0, t2 - t0, time.process_time() - cpu0


def run_case(
    engine: Engine, case: dict[str, Any], *, reps: int, timeout_s: float, channel: TextIO
) -> dict[str, Any]:
    """Compile, walk the valid and invalid instances, and measure; never raises."""
    result: dict[str, Any] = {"id": case["id"], "suite": case["suite"], "kind": case["kind"]}
    started = time.perf_counter()
    rss_before = rss_bytes()
    try:
        handle, compile_s, ttfm_s, ttfm_cpu_s = _compile_and_first_mask(engine, case)
    except Unsupported as exc:
        return {**result, "status": "unsupported", "error": str(exc)[:400]}
    except CompileFailed as exc:
        return {**result, "status": "error", "error": str(exc)[:400]}
    except Exception as exc:  # noqa: BLE001 - any engine failure is a reported outcome
        return {**result, "status": "error", "error": f"{type(exc).__name__}: {exc}"[:400]}
    _send(channel, {"event": "compiled", "id": case["id"], "compile_s": compile_s})
    rss_compiled = rss_bytes()

    token_us: list[float] = []
    mask_us: list[float] = []
    advance_us: list[float] = []
    rejected_valid = []
    disagreements = 0
    first_pass: list[list[float]] = []
    cpu_instance_s: list[float] = []
    for index, ids in enumerate(case["valid_ids"]):
        cpu0 = time.process_time()
        walk = engine.mask_walk(handle, ids)
        cpu_instance_s.append(ttfm_cpu_s + time.process_time() - cpu0)
        steps = [m + a for m, a in zip(walk.mask_us, [*walk.advance_us, 0.0], strict=False)]
        first_pass.append(steps)
        token_us += steps
        mask_us += walk.mask_us
        advance_us += walk.advance_us
        disagreements += walk.disagreement
        if not walk.accepted:
            rejected_valid.append({"index": index, "at_token": walk.rejected_at})
    accepted_invalid = []
    for index, ids in enumerate(case["invalid_ids"]):
        walk = engine.mask_walk(handle, ids)
        disagreements += walk.disagreement
        if walk.accepted:
            accepted_invalid.append(index)
    rss_walked = rss_bytes()
    # Warm: the same walks again, with whatever the engine filled lazily on the first ones.
    mask_warm_us = [x for ids in case["valid_ids"] for x in engine.mask_walk(handle, ids).mask_us]

    # Repetitions (best-of walks, median compile), only while well inside the time-out.
    best = [list(steps) for steps in first_pass]
    for _ in range(reps - 1):
        if time.perf_counter() - started > timeout_s / 4:
            break
        for index, ids in enumerate(case["valid_ids"]):
            walk = engine.mask_walk(handle, ids)
            steps = [m + a for m, a in zip(walk.mask_us, [*walk.advance_us, 0.0], strict=False)]
            if len(steps) == len(best[index]):
                best[index] = [min(x, y) for x, y in zip(best[index], steps, strict=True)]
    compile_samples, ttfm_samples = [compile_s], [ttfm_s]
    while (
        len(compile_samples) < reps
        and sum(ttfm_samples) < REPEAT_COMPILE_BUDGET_S
        and time.perf_counter() - started < timeout_s / 4
    ):
        _, again_s, again_ttfm_s, _ = _compile_and_first_mask(engine, case)
        compile_samples.append(again_s)
        ttfm_samples.append(again_ttfm_s)

    forced = None
    if case["valid_ids"]:
        counts = [engine.forced_walk(handle, ids) for ids in case["valid_ids"]]
        if all(c is not None for c in counts):
            forced = {
                k: sum(c[k] for c in counts if c)
                for k in ("tokens", "forced_bytes", "forced_tokens")
            }
            if any(c and c["forced_tokens"] < 0 for c in counts):
                forced["forced_tokens"] = -1
    return {
        **result,
        "status": "ok",
        "compile_s": compile_samples,
        "ttfm_s": ttfm_samples,
        "ttfm_cpu_s": ttfm_cpu_s,
        "index_s": compile_s if engine.builds_complete_index else None,
        "cpu_instance_s": cpu_instance_s,
        "mask_warm_us": mask_warm_us,
        "valid_total": len(case["valid_ids"]),
        "invalid_total": len(case["invalid_ids"]),
        "rejected_valid": rejected_valid,
        "accepted_invalid": accepted_invalid,
        "disagreements": disagreements,
        "token_us": token_us,
        "token_us_best": [x for steps in best for x in steps],
        "mask_us": mask_us,
        "advance_us": advance_us,
        "forced": forced,
        "rss_compile_bytes": rss_compiled - rss_before,
        "rss_walk_bytes": rss_walked - rss_before,
        "artifact_bytes": engine.artifact_size(handle),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="internal: see bench/__main__.py")
    parser.add_argument("--engine", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--timeout-s", type=float, default=30.0)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()

    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    try:
        engine = load_engine(args.engine, timeout_s=args.timeout_s)
        rss0 = rss_bytes()
        vocab = engine.prepare_vocab(args.tokenizer)
        for warm_up in WARM_UPS:
            try:
                engine.compile(warm_up)
            except Unsupported:
                pass
    except Exception as exc:  # noqa: BLE001
        traceback.print_exc()
        _send(channel, {"event": "fatal", "error": f"{type(exc).__name__}: {exc}"[:400]})
        return
    _send(
        channel,
        {
            "event": "ready",
            "vocab": vocab,
            "rss_vocab_bytes": rss_bytes() - rss0,
            "version": package_version(engine.package),
            "json_whitespace": engine.json_whitespace,
        },
    )
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "case":
            case = request["case"]
            print(f"case {case['id']}", file=sys.stderr, flush=True)
            result = run_case(
                engine, case, reps=args.reps, timeout_s=args.timeout_s, channel=channel
            )
            _send(channel, {"event": "result", "result": result})
        elif request["op"] == "extras":
            _send(channel, {"event": "extras", "extras": engine.extras()})
        else:
            break
    _send(channel, {"event": "bye", "peak_rss_bytes": peak_rss_bytes()})


if __name__ == "__main__":
    main()
