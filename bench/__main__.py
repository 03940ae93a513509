"""fsmcompile side by side with XGrammar, outlines-core and llguidance: `python -m bench`.

    python -m bench [--quick] [--tokenizer llama3|gpt2|PATH] [--engines fsmcompile,xgrammar,...]
                    [--out bench/results] [--timeout-s 30] [--per-subset 3] [--reps 3]

Runs the same cases (bench/cases.py) with the same tokenizer through every installed
engine, one engine after another. Each engine runs each case-set in its own worker
process (bench/worker.py; the same layout for every engine), so imports, vocabulary
preparation and allocator state never mix. A case that runs past --timeout-s has its
worker killed and counts as a failure ("timeout"); a fresh worker takes the next case.
Instances are tokenized once, here, with the `tokenizers` library, and every engine gets
the same token ids. Prints the machine, versions and the summary table; writes
latest.md, latest.json and two PNG plots under --out (see bench/README.md).
Numbers are for reading; no test asserts them.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from bench import report
from bench.cases import ROOT, Case, case_sets
from bench.engines import ENGINES, is_installed
from bench.engines.base import read_tokenizer_text, tokenizer_facts
from bench.measure import describe_machine, machine

TOKENIZERS = {
    "llama3": ROOT.parent / "shared" / "tokenizers" / "llama3" / "tokenizer.json",
    "gpt2": ROOT / "tests" / "data" / "gpt2" / "tokenizer.json.gz",
}
READY_TIMEOUT_S = 180.0


def resolve_tokenizer(name: str) -> tuple[str, Path]:
    """(label, path); llama3 falls back to the bundled gpt2 when ../shared lacks it."""
    if name in TOKENIZERS:
        path = TOKENIZERS[name]
        if name == "llama3" and not path.exists():
            print(f"note: {path} not found, falling back to gpt2", file=sys.stderr)
            return "gpt2", TOKENIZERS["gpt2"]
        return name, path
    return Path(name).name, Path(name)


def tokenize_cases(cases: list[Case], path: Path) -> list[dict[str, Any]]:
    """Each case as JSON with `valid_ids` / `invalid_ids`: the real tokenizer's encoding.

    SentencePiece tokenizers prepend "▁" to a whole input; a model's output is a
    continuation, so such texts are encoded after a newline and that prefix dropped.
    """
    from tokenizers import Tokenizer

    text = read_tokenizer_text(path)
    tokenizer = Tokenizer.from_str(text)
    sentencepiece = "\u2581" in json.dumps(json.loads(text).get("pre_tokenizer")) or (
        "\u2581" in json.dumps(json.loads(text).get("normalizer"))
    )
    prefix = tokenizer.encode("\n", add_special_tokens=False).ids if sentencepiece else []

    def encode(item: str) -> list[int]:
        if not sentencepiece:
            return list(tokenizer.encode(item, add_special_tokens=False).ids)
        ids = list(tokenizer.encode("\n" + item, add_special_tokens=False).ids)
        return ids[len(prefix) :]

    out = []
    for case in cases:
        doc = case.to_json()
        doc["valid_ids"] = [encode(t) for t in case.valid]
        doc["invalid_ids"] = [encode(t) for t in case.invalid]
        out.append(doc)
    return out


class Worker:
    """One worker process and a thread that turns its stdout lines into queue items."""

    def __init__(self, engine: str, tokenizer: Path, args: argparse.Namespace, log: TextIO):
        command = [
            sys.executable,
            "-m",
            "bench.worker",
            "--engine",
            engine,
            "--tokenizer",
            str(tokenizer),
            "--timeout-s",
            str(args.timeout_s),
            "--reps",
            str(args.reps),
        ]
        self.proc = subprocess.Popen(
            command,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
        )
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.put(json.loads(line))
        self.events.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def wait_for(self, event: str, deadline: float) -> tuple[str, dict[str, Any] | None]:
        """('ok', message) | ('timeout', last progress) | ('crash', last progress)."""
        progress: dict[str, Any] | None = None
        while True:
            try:
                message = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return "timeout", progress
            if message is None:
                return "crash", progress
            if message["event"] == event:
                return "ok", message
            if message["event"] == "fatal":
                return "crash", message
            progress = message

    def stop(self) -> dict[str, Any] | None:
        bye = None
        try:
            self.send({"op": "quit"})
            _, bye = self.wait_for("bye", time.monotonic() + 30)
        except (BrokenPipeError, OSError):
            pass
        self.kill()
        return bye

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def run_case_set(
    engine: str,
    set_name: str,
    cases: list[dict[str, Any]],
    tokenizer: Path,
    args: argparse.Namespace,
    run: dict[str, Any],
) -> None:
    """Run one case-set through one engine, restarting the worker after a time-out."""
    log_path = args.out / "logs" / f"{engine}-{set_name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    info = run["engines"].setdefault(engine, {"vocab": [], "peak_rss_bytes": 0})
    pending = list(cases)
    with log_path.open("w", encoding="utf-8") as log:
        while pending:
            worker = Worker(engine, tokenizer, args, log)
            status, ready = worker.wait_for("ready", time.monotonic() + READY_TIMEOUT_S)
            if status != "ok" or ready is None:
                worker.kill()
                error = (ready or {}).get("error", f"worker {status} before ready")
                info["fatal"] = error
                for case in pending:
                    run["results"].append(_failed(engine, case, "error", error))
                return
            info["vocab"].append(ready["vocab"])
            info.update(
                version=ready["version"],
                json_whitespace=ready["json_whitespace"],
                rss_vocab_bytes=ready["rss_vocab_bytes"],
            )
            if engine == "fsmcompile" and "extras" not in run:
                worker.send({"op": "extras"})
                _, extras = worker.wait_for("extras", time.monotonic() + READY_TIMEOUT_S)
                run["extras"] = (extras or {}).get("extras", {})
            while pending:
                case = pending.pop(0)
                worker.send({"op": "case", "case": case})
                status, message = worker.wait_for("result", time.monotonic() + args.timeout_s)
                if status == "ok" and message is not None:
                    result = {"engine": engine, **message["result"]}
                    run["results"].append(result)
                    print(
                        f"  {engine:11s} {case['id'][:48]:48s} {report.one_line(result)}",
                        file=sys.stderr,
                        flush=True,
                    )
                    continue
                failed = _failed(
                    engine,
                    case,
                    status,
                    f"{status} after {args.timeout_s:g} s"
                    if status == "timeout"
                    else "worker died",
                )
                if message and "compile_s" in message:
                    failed["compile_s"] = [message["compile_s"]]
                run["results"].append(failed)
                print(
                    f"  {engine:11s} {case['id'][:48]:48s} {status.upper()}",
                    file=sys.stderr,
                    flush=True,
                )
                worker.kill()
                break
            else:
                bye = worker.stop()
                if bye:
                    info["peak_rss_bytes"] = max(info["peak_rss_bytes"], bye["peak_rss_bytes"])


def _failed(engine: str, case: dict[str, Any], status: str, error: str) -> dict[str, Any]:
    return {
        "engine": engine,
        "id": case["id"],
        "suite": case["suite"],
        "kind": case["kind"],
        "status": status,
        "error": error,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="few cases and instances (~1 min)")
    parser.add_argument("--tokenizer", default="llama3", help="llama3, gpt2 or a tokenizer.json")
    parser.add_argument(
        "--engines",
        default=",".join(ENGINES),
        help="comma-separated subset of " + ", ".join(ENGINES),
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "bench" / "results",
        help="where latest.md, latest.json, the PNGs and logs/ go",
    )
    parser.add_argument("--timeout-s", type=float, default=30.0, help="per case (a failure)")
    parser.add_argument(
        "--per-subset",
        type=int,
        default=3,
        help="JSONSchemaBench ids per subset in the full run (3 keeps it under 10 min)",
    )
    parser.add_argument(
        "--reps",
        type=int,
        default=None,
        help="repetitions: best-of token figures, median compile (default 3, quick 1)",
    )
    args = parser.parse_args()
    args.reps = args.reps or (1 if args.quick else 3)
    args.out.mkdir(parents=True, exist_ok=True)

    label, tokenizer = resolve_tokenizer(args.tokenizer)
    info = machine()
    print(describe_machine(info))
    facts = tokenizer_facts(tokenizer)
    print(
        f"tokenizer {label} ({tokenizer}): {facts['vocab_size']} ids, EOS {facts['eos_token_id']}"
    )
    requested = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = [e for e in requested if e not in ENGINES]
    if unknown:
        parser.error(f"unknown engine(s) {', '.join(unknown)}; expected {', '.join(ENGINES)}")
    engines = [e for e in requested if is_installed(e)]
    missing = [e for e in requested if e not in engines]
    if missing:
        print(f"not installed, skipped: {', '.join(missing)} (pip install -e '.[bench]')")

    sets = case_sets(quick=args.quick, per_subset=args.per_subset)
    tokenized = {name: tokenize_cases(cases, tokenizer) for name, cases in sets.items()}
    run: dict[str, Any] = {
        "machine": info,
        "tokenizer": {"label": label, **facts},
        "quick": args.quick,
        "timeout_s": args.timeout_s,
        "reps": args.reps,
        "engines": {},
        "results": [],
        "skipped_engines": missing,
        "cases": {
            c.id: {"suite": c.suite, "valid": list(c.valid), "invalid": list(c.invalid)}
            for cases in sets.values()
            for c in cases
        },
    }
    started = time.monotonic()
    for engine in engines:
        for set_name, cases in tokenized.items():
            print(f"{engine}: {set_name} ({len(cases)} cases)", file=sys.stderr, flush=True)
            run_case_set(engine, set_name, cases, tokenizer, args, run)
    run["wall_s"] = time.monotonic() - started
    print(report.write_all(run, args.out))


if __name__ == "__main__":
    main()
