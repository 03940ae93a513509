"""Load test of the Redis tier: many client processes loading published artifacts at once.

Starts a private redis-server on loopback, publishes a few values of realistic artifact
size (1-16 MB random bytes, so nothing compresses), then runs N client processes that
load random keys for a fixed time, twice: through `RedisStore.get` (chunked, checksum
verified) and, as the peer, through a plain redis-py `GET` of the same bytes stored as
one key (no chunking, no checksum). Prints loads/s, MB/s, p50/p99 latency and errors,
and writes bench/results/cache_load.json. Stops by itself: every client has a deadline
and stragglers are killed.

    python -m bench.cache_load --clients 32 --duration-s 10 --sizes-mb 1,4,16
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "cache_load.json"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_redis(directory: str) -> tuple[subprocess.Popen[bytes], int]:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("error: redis-server not found on PATH")
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        + ["--dir", directory],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return proc, port
        except OSError:
            time.sleep(0.02)
    proc.kill()
    sys.exit("error: private redis-server did not start")


def _client(
    mode: str,
    url: str,
    keys: list[str],
    sizes: dict[str, int],
    duration_s: float,
    go: Any,
    queue: Any,
    seed: int,
) -> None:
    """Load random keys until the deadline; report (latencies by size, errors)."""
    import redis

    from fsmcompile.store import RedisStore

    rng = random.Random(seed)
    store = RedisStore(url, socket_timeout_s=10.0)
    raw = redis.Redis.from_url(url, socket_timeout=10.0)
    latencies: dict[int, list[float]] = {}
    errors = 0
    store.ping()
    queue.put("ready")
    if not go.wait(timeout=300):
        return
    deadline = time.monotonic() + duration_s
    while time.monotonic() < deadline:
        key = rng.choice(keys)
        t0 = time.perf_counter()
        try:
            value = store.get(key) if mode == "fsmcompile" else raw.get(f"raw:{key}")
            ok = value is not None and len(value) == sizes[key]
        except Exception:  # a load test counts failures instead of stopping
            ok = False
        elapsed = time.perf_counter() - t0
        if ok:
            latencies.setdefault(sizes[key], []).append(elapsed)
        else:
            errors += 1
    store.close()
    raw.close()
    queue.put((latencies, errors))


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summarize(
    per_client: list[tuple[dict[int, list[float]], int]], wall_s: float
) -> dict[str, Any]:
    by_size: dict[int, list[float]] = {}
    errors = 0
    for latencies, errs in per_client:
        errors += errs
        for size, values in latencies.items():
            by_size.setdefault(size, []).extend(values)
    everything = [v for values in by_size.values() for v in values]
    total_bytes = sum(size * len(values) for size, values in by_size.items())

    def row(values: list[float]) -> dict[str, float]:
        return {
            "loads": len(values),
            "p50_ms": _percentile(values, 0.50) * 1000,
            "p99_ms": _percentile(values, 0.99) * 1000,
            "max_ms": max(values, default=float("nan")) * 1000,
            "mean_ms": (statistics.fmean(values) if values else float("nan")) * 1000,
        }

    return {
        **row(everything),
        "loads_per_s": len(everything) / wall_s,
        "mb_per_s": total_bytes / wall_s / 1e6,
        "errors": errors,
        "clients_reported": len(per_client),
        "by_size_mb": {str(size // 2**20): row(v) for size, v in sorted(by_size.items())},
    }


def _run_phase(
    mode: str, url: str, keys: list[str], sizes: dict[str, int], clients: int, duration_s: float
) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    queue = ctx.Queue()
    procs = [
        ctx.Process(
            target=_client, args=(mode, url, keys, sizes, duration_s, go, queue, i), daemon=True
        )
        for i in range(clients)
    ]
    for p in procs:
        p.start()
    # Start the clock once every client has imported and connected (spawning 32
    # interpreters on a small machine takes seconds); give up if one dies first.
    ready, ready_deadline = 0, time.monotonic() + 300
    while ready < clients and time.monotonic() < ready_deadline:
        try:
            queue.get(timeout=0.5)
            ready += 1
        except Exception:
            if any(p.exitcode not in (None, 0) for p in procs):
                break
    go.set()
    start = time.monotonic()
    per_client: list[tuple[dict[int, list[float]], int]] = []
    hard_deadline = start + duration_s + 60
    while len(per_client) < clients and time.monotonic() < hard_deadline:
        try:
            message = queue.get(timeout=max(0.1, hard_deadline - time.monotonic()))
        except Exception:
            break  # a client hung or died: report what arrived
        if message != "ready":  # a straggler that connected after the start
            per_client.append(message)
    wall_s = max(duration_s, 1e-9)
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
            p.join()
    summary = _summarize(per_client, wall_s)
    summary["errors"] += clients - len(per_client)  # clients that never reported
    return summary


def _versions(port: int) -> dict[str, str]:
    import msgpack
    import redis

    with redis.Redis(port=port) as r:
        server = str(r.info("server").get("redis_version"))
    return {
        "python": platform.python_version(),
        "redis_py": redis.__version__,
        "msgpack": ".".join(map(str, msgpack.version)),
        "redis_server": server,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cache_load", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--clients", type=int, default=32, help="client processes (default 32)")
    parser.add_argument("--duration-s", type=float, default=10.0, help="seconds per phase")
    parser.add_argument("--sizes-mb", default="1,4,16", help="published value sizes, MB")
    parser.add_argument("--no-peer", action="store_true", help="skip the plain-GET peer phase")
    parser.add_argument("--out", type=Path, default=RESULTS, help="JSON output path")
    args = parser.parse_args(argv)

    sizes_mb = [int(s) for s in args.sizes_mb.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="fsmcompile-bench-") as tmp:
        proc, port = _start_redis(tmp)
        try:
            import redis

            from fsmcompile.store import RedisStore

            url = f"redis://127.0.0.1:{port}/0"
            keys, sizes = [], {}
            with RedisStore(url) as store, redis.Redis(port=port) as raw:
                for mb in sizes_mb:
                    key = f"bench-{mb}mb"
                    value = os.urandom(mb * 2**20)
                    store.put(key, value)
                    raw.set(f"raw:{key}", value)
                    keys.append(key)
                    sizes[key] = len(value)
            print(
                f"machine: {platform.machine()} {platform.processor() or ''} "
                f"{os.cpu_count()} cpus, {platform.system()} {platform.release()}",
                file=sys.stderr,
            )
            versions = _versions(port)
            print("versions:", " ".join(f"{k}={v}" for k, v in versions.items()), file=sys.stderr)
            phases = {}
            for mode in ["fsmcompile"] + ([] if args.no_peer else ["raw_get"]):
                print(
                    f"running {mode}: {args.clients} clients x {args.duration_s:.0f} s ...",
                    file=sys.stderr,
                )
                phases[mode] = _run_phase(mode, url, keys, sizes, args.clients, args.duration_s)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    header = f"{'mode':<12}{'loads/s':>10}{'MB/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}"
    print(header)
    for mode, s in phases.items():
        print(
            f"{mode:<12}{s['loads_per_s']:>10.1f}{s['mb_per_s']:>10.0f}"
            f"{s['p50_ms']:>10.1f}{s['p99_ms']:>10.1f}{s['errors']:>8d}"
        )
    for mode, s in phases.items():
        for mb, r in s["by_size_mb"].items():
            print(
                f"  {mode} {mb:>2} MB: {r['loads']} loads, p50 {r['p50_ms']:.1f} ms, "
                f"p99 {r['p99_ms']:.1f} ms"
            )
    if "raw_get" in phases and phases["raw_get"]["loads_per_s"]:
        ratio = phases["fsmcompile"]["loads_per_s"] / phases["raw_get"]["loads_per_s"]
        print(f"fsmcompile / raw GET throughput: {ratio:.2f}x")
    report = {
        "benchmark": "cache_load",
        "machine": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
        },
        "versions": versions,
        "config": {
            "clients": args.clients,
            "duration_s": args.duration_s,
            "sizes_mb": sizes_mb,
            "transport": "loopback TCP",
        },
        "phases": phases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
