"""Compile vs load from Redis: what sharing a compiled index saves a fleet.

For every spec of a regex suite and a JSON Schema suite (10 hand-picked schemas and the
first Glaiveai2K schemas of JSONSchemaBench that compile), with the Llama 3 tokenizer:

    compile  `compile_spec(..., cache=False)`, best of up to 3 runs (only fast specs get
             more than one), after an untimed warm-up compile so one-time vocabulary
             set-up is not charged to the first spec.
    load     `compile_spec(..., cache=TieredCache([RedisStore(url)]))` on a hit: key
             derivation, Redis GET, checksum, artifact decode into a TokenIndex. There
             is no memory tier, so every load goes to Redis; median of --loads runs.

A private redis-server is started on a free port and stopped at the end. Prints the
machine, versions, a per-spec table and per-suite p50/p99 of both plus the median
ratio (target >= 20x); writes bench/results/cache_vs_compile.json. For reading only:
no test asserts these numbers.

    python -m bench.cache_vs_compile [--tokenizer PATH] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import redis

from bench.automaton import PATTERNS as REGEX_SUITE
from fsmcompile import artifact
from fsmcompile.compiler import Kind, canonical_spec, compile_spec, index_cache_key
from fsmcompile.store import RedisStore, TieredCache
from fsmcompile.version import __version__
from fsmcompile.vocabulary import Vocabulary

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "cache_vs_compile.json"
LLAMA3 = ROOT.parent / "shared" / "tokenizers" / "llama3" / "tokenizer.json"
GPT2 = ROOT / "tests" / "data" / "gpt2" / "tokenizer.json.gz"
GLAIVE = ROOT.parent / "shared" / "corpora" / "jsonschemabench" / "Glaiveai2K" / "schemas.jsonl"
TARGET_RATIO = 20.0
_REPEAT_BELOW_S = 0.2  # compiles faster than this are repeated (best of 3): timer noise

HAND_SCHEMAS: dict[str, dict[str, Any]] = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 40},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
        },
        "required": ["name", "age"],
    },
    "address": {
        "type": "object",
        "properties": {
            "street": {"type": "string"},
            "city": {"type": "string"},
            "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
            "country": {"enum": ["US", "CA", "MX"]},
        },
        "required": ["street", "city", "zip", "country"],
        "additionalProperties": False,
    },
    "tool_call": {
        "type": "object",
        "properties": {
            "name": {"const": "get_weather"},
            "arguments": {
                "type": "object",
                "properties": {
                    "location": {"type": "string"},
                    "unit": {"enum": ["celsius", "fahrenheit"]},
                },
                "required": ["location"],
            },
        },
        "required": ["name", "arguments"],
    },
    "order": {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string"},
                        "qty": {"type": "integer", "minimum": 1},
                    },
                    "required": ["sku", "qty"],
                },
                "minItems": 1,
                "maxItems": 10,
            },
            "total": {"type": "number"},
        },
        "required": ["items", "total"],
    },
    "sentiment": {
        "type": "object",
        "properties": {
            "label": {"enum": ["positive", "negative", "neutral"]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "required": ["label", "confidence"],
    },
    "event": {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "start": {"type": "string", "format": "date-time"},
            "end": {"type": "string", "format": "date-time"},
        },
        "required": ["title", "start"],
    },
    "spam_flags": {
        "type": "object",
        "properties": {
            "is_spam": {"type": "boolean"},
            "reasons": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        },
        "required": ["is_spam"],
    },
    "profile": {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "handle": {"type": "string", "pattern": "^@[a-z0-9_]{3,15}$"},
            "bio": {"type": "string", "maxLength": 160},
            "links": {"type": "array", "items": {"type": "string", "format": "uri"}},
        },
        "required": ["id", "handle"],
        "additionalProperties": False,
    },
    "country_code": {
        "enum": "US CA MX BR AR GB FR DE ES IT NL SE NO PL JP CN KR IN AU ZA".split(),
    },
    "shape": {
        "oneOf": [
            {
                "type": "object",
                "properties": {"kind": {"const": "circle"}, "radius": {"type": "number"}},
                "required": ["kind", "radius"],
            },
            {
                "type": "object",
                "properties": {"kind": {"const": "square"}, "side": {"type": "number"}},
                "required": ["kind", "side"],
            },
        ]
    },
}


# -- a private redis-server ----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def private_redis() -> Iterator[str]:
    """Yield the URL of a fresh redis-server on a free loopback port; stop it afterwards."""
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("error: redis-server not found on PATH")
    with tempfile.TemporaryDirectory(prefix="fsmcompile-bench-") as directory:
        port = _free_port()
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
            + ["--appendonly", "no", "--dir", directory],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"redis://127.0.0.1:{port}/0"
            client = redis.Redis.from_url(url)
            deadline = time.monotonic() + 10
            while True:
                with contextlib.suppress(redis.exceptions.ConnectionError):
                    if client.ping():
                        break
                if time.monotonic() > deadline or proc.poll() is not None:
                    sys.exit("error: the private redis-server did not start")
                time.sleep(0.02)
            client.close()
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# -- the suites ----------------------------------------------------------------------------


def regex_suite(quick: bool) -> list[tuple[str, Kind, Any]]:
    names = list(REGEX_SUITE)[:9] if quick else list(REGEX_SUITE)
    return [(f"regex/{name}", "regex", REGEX_SUITE[name]) for name in names]


def json_suite(glaive: int, hand: int) -> list[tuple[str, Kind, Any]]:
    """Hand-picked schemas, then up to `glaive` Glaiveai2K schemas (more are read so that
    `glaive` remain after skipping failures and duplicates)."""
    specs: list[tuple[str, Kind, Any]] = [
        (f"json/{name}", "json", schema) for name, schema in list(HAND_SCHEMAS.items())[:hand]
    ]
    if glaive and GLAIVE.exists():
        with GLAIVE.open(encoding="utf-8") as f:
            for n, line in enumerate(f):
                if n >= glaive * 2:
                    break
                record = json.loads(line)
                specs.append((record["id"], "json", record["schema"]))
    elif glaive:
        print(f"note: {GLAIVE} not found; JSON suite is the hand-picked schemas", file=sys.stderr)
    return specs


# -- measuring -----------------------------------------------------------------------------


def time_compile(kind: Kind, spec: Any, vocab: Vocabulary) -> tuple[float, Any]:
    """(best seconds, index): fast specs get up to 3 runs, slow ones 1."""
    samples: list[float] = []
    index = None
    while len(samples) < 3:
        start = time.perf_counter()
        index = compile_spec(kind, spec, vocab, cache=False).index
        samples.append(time.perf_counter() - start)
        if samples[0] > _REPEAT_BELOW_S:
            break
    return min(samples), index


def time_load(kind: Kind, spec: Any, vocab: Vocabulary, cache: TieredCache, loads: int) -> float:
    """Median seconds of `loads` Redis loads; raises if one is not a hit (key out of sync)."""
    samples = []
    for _ in range(loads):
        start = time.perf_counter()
        result = compile_spec(kind, spec, vocab, cache=cache)
        samples.append(time.perf_counter() - start)
        if not result.cache_hit:
            raise RuntimeError("load compiled instead of hitting Redis: bench key out of sync")
    return statistics.median(samples)


def publish(kind: Kind, spec: Any, vocab: Vocabulary, index: Any, store: RedisStore) -> int:
    """Store `index` under the key `compile_spec` looks up; returns the artifact size."""
    key = index_cache_key(kind, spec, vocab)
    data = artifact.to_bytes(index)
    store.put(key, data)
    return len(data)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (p99 of 40 values is the largest)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(np.ceil(q * len(ordered))) - 1))]


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    compile_ms = [row["compile_ms"] for row in rows]
    load_ms = [row["load_ms"] for row in rows]
    ratios = [row["ratio"] for row in rows]
    return {
        "specs": len(rows),
        "compile_p50_ms": percentile(compile_ms, 0.50),
        "compile_p99_ms": percentile(compile_ms, 0.99),
        "load_p50_ms": percentile(load_ms, 0.50),
        "load_p99_ms": percentile(load_ms, 0.99),
        "median_ratio": statistics.median(ratios),
        "min_ratio": min(ratios),
        "specs_below_target": sum(ratio < TARGET_RATIO for ratio in ratios),
    }


def machine(url: str) -> dict[str, Any]:
    cpu = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with redis.Redis.from_url(url) as client:
        server = str(client.info("server").get("redis_version"))
    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "fsmcompile": __version__,
        "numpy": np.__version__,
        "redis_py": redis.__version__,
        "msgpack": ".".join(map(str, msgpack.version)),
        "redis_server": server,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cache_vs_compile", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--tokenizer", type=Path, default=None, help="default: Llama 3")
    parser.add_argument("--quick", action="store_true", help="fewer specs and loads")
    parser.add_argument("--glaive", type=int, default=None, help="Glaiveai2K schemas (40)")
    parser.add_argument("--loads", type=int, default=None, help="loads per spec (7)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="JSON output path")
    args = parser.parse_args(argv)
    glaive = args.glaive if args.glaive is not None else (8 if args.quick else 40)
    loads = args.loads if args.loads is not None else (3 if args.quick else 7)
    tokenizer = args.tokenizer or (LLAMA3 if LLAMA3.exists() else GPT2)

    vocab = Vocabulary.load(str(tokenizer))
    print(f"tokenizer: {tokenizer} ({len(vocab.token_bytes)} tokens)")
    # Warm-up: vocabulary trie, lazily imported front ends; not charged to any spec.
    compile_spec("regex", "warm-up [0-9]+", vocab, cache=False)
    compile_spec("json", {"type": "object", "properties": {"a": {}}}, vocab, cache=False)

    specs = regex_suite(args.quick) + json_suite(glaive, 5 if args.quick else len(HAND_SCHEMAS))
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    seen: set[str] = set()
    glaive_kept = 0
    started = time.perf_counter()
    with private_redis() as url:
        info = machine(url)
        print(
            f"machine: {info['cpu']}, {info['cpus']} cpus, {info['platform']}\nversions: "
            + " ".join(f"{k}={info[k]}" for k in ("python", "fsmcompile", "numpy", "redis_py"))
            + f" redis-server={info['redis_server']}",
        )
        store = RedisStore(url, socket_timeout_s=30.0)
        cache = TieredCache([store])  # no memory tier: every load is a Redis round trip
        header = f"{'spec':44s} {'states':>7s} {'artifact':>10s} {'compile ms':>11s} "
        print(header + f"{'load ms':>9s} {'ratio':>8s}")
        for name, kind, spec in specs:
            suite = "regex" if kind == "regex" else "json"
            from_glaive = name.startswith("Glaiveai2K/")
            if from_glaive and glaive_kept >= glaive:
                break
            canonical = f"{kind}:{canonical_spec(kind, spec)}"
            if canonical in seen:
                skipped.append({"spec": name, "reason": "duplicate of an earlier spec"})
                continue
            seen.add(canonical)
            try:
                compile_s, index = time_compile(kind, spec, vocab)
            except Exception as exc:  # noqa: BLE001 - a spec we cannot compile is skipped
                skipped.append({"spec": name, "reason": f"{type(exc).__name__}: {exc}"[:200]})
                continue
            size = publish(kind, spec, vocab, index, store)
            load_s = time_load(kind, spec, vocab, cache, loads)
            glaive_kept += from_glaive
            row = {
                "spec": name,
                "suite": suite,
                "states": index.num_states,
                "masks": int(index.masks.shape[0]),
                "artifact_bytes": size,
                "compile_ms": compile_s * 1e3,
                "load_ms": load_s * 1e3,
                "ratio": compile_s / load_s,
            }
            rows.append(row)
            print(
                f"{name[:44]:44s} {row['states']:7d} {size / 1024:8.1f} KB "
                f"{row['compile_ms']:11.1f} {row['load_ms']:9.2f} {row['ratio']:7.1f}x",
                flush=True,
            )
        cache.close()
    wall_s = time.perf_counter() - started

    summary = {
        suite: summarize([row for row in rows if row["suite"] == suite])
        for suite in ("regex", "json")
        if any(row["suite"] == suite for row in rows)
    }
    summary["all"] = summarize(rows)
    print(f"\n{'suite':8s} {'specs':>5s} {'compile p50/p99 ms':>20s} {'load p50/p99 ms':>17s} ")
    for suite, s in summary.items():
        verdict = "meets" if s["median_ratio"] >= TARGET_RATIO else "MISSES"
        print(
            f"{suite:8s} {s['specs']:5d} {s['compile_p50_ms']:9.1f} / {s['compile_p99_ms']:8.1f} "
            f"{s['load_p50_ms']:7.2f} / {s['load_p99_ms']:7.2f}   median ratio "
            f"{s['median_ratio']:6.1f}x (min {s['min_ratio']:.1f}x; {verdict} the "
            f"{TARGET_RATIO:.0f}x target)"
        )
    if skipped:
        print(f"skipped {len(skipped)} specs (failed to compile or duplicates); see the JSON")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "machine": info,
                "tokenizer": str(tokenizer),
                "vocab_tokens": len(vocab.token_bytes),
                "quick": args.quick,
                "loads_per_spec": loads,
                "target_ratio": TARGET_RATIO,
                "summary": summary,
                "rows": rows,
                "skipped": skipped,
                "wall_s": wall_s,
            },
            indent=2,
        )
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
