"""Single flight across processes and machines, and serving through Redis outages.

"Machines" are spawned processes with their own disk folders, so only Redis can
coordinate them; "one machine" shares a disk folder and has no Redis, so only the flock
can. Process tests bound their run time and kill stragglers, so a bug fails, never hangs.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from store_workers import payload, run_worker

from fsmcompile.store import DiskStore, MemoryStore, RedisStore, TieredCache

N_PROCS = 8


def run_fleet(
    tmp_path: Path,
    *,
    redis_url: str | None,
    shared_disk: bool,
    hang_first: bool,
    n_procs: int = N_PROCS,
) -> tuple[list[str], list[dict[str, Any]], list[int]]:
    """Start `n_procs` workers on one key; return compute pids, results, exit codes."""
    ctx = multiprocessing.get_context("spawn")
    out = tmp_path / "out"
    out.mkdir()
    cfg = {
        "key": f"json_schema-v1-{uuid.uuid4().hex}",
        "disk_dir": str(tmp_path / "disk"),
        "shared_disk": shared_disk,
        "redis_url": redis_url,
        "prefix": "fleet:",
        "lock_ttl_s": 1.0,
        "wait_timeout_s": 20.0,
        "compute_s": 0.5,
        "hang_first": hang_first,
        "out_dir": str(out),
    }
    barrier = ctx.Barrier(n_procs)
    procs = [ctx.Process(target=run_worker, args=(i, cfg, barrier)) for i in range(n_procs)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 40
    try:
        if hang_first:
            while not (out / "first").exists():
                assert time.monotonic() < deadline, "nobody started computing"
                time.sleep(0.02)
            pid = int((out / "computes.log").read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
        for p in procs:
            p.join(max(0.1, deadline - time.monotonic()))
        assert not [p for p in procs if p.is_alive()], "workers still running: single flight hung"
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    computes = (out / "computes.log").read_text().split()
    results = [json.loads(f.read_text()) for f in sorted(out.glob("result-*.json"))]
    return computes, results, [p.exitcode or 0 for p in procs]


@pytest.mark.redis
def test_fleet_machines_same_missing_key_compute_once(tmp_path: Path, redis_url: str) -> None:
    computes, results, codes = run_fleet(
        tmp_path, redis_url=redis_url, shared_disk=False, hang_first=False
    )
    assert codes == [0] * N_PROCS
    assert len(computes) == 1
    assert len(results) == N_PROCS
    assert len({r["sha256"] for r in results}) == 1
    assert sorted(r["hit"] for r in results) == [False] + [True] * (N_PROCS - 1)
    assert {r["tier"] for r in results if r["hit"]} == {"redis"}


def test_fleet_one_machine_without_redis_computes_once(tmp_path: Path) -> None:
    computes, results, codes = run_fleet(
        tmp_path, redis_url=None, shared_disk=True, hang_first=False
    )
    assert codes == [0] * N_PROCS
    assert len(computes) == 1
    assert len({r["sha256"] for r in results}) == 1
    assert {r["tier"] for r in results if r["hit"]} == {"disk"}


@pytest.mark.redis
@pytest.mark.parametrize("shared_disk", [False, True], ids=["machines", "one_machine"])
def test_fleet_computer_killed_lock_expires_and_another_computes(
    tmp_path: Path, redis_url: str, shared_disk: bool
) -> None:
    n_procs = 4  # enough to race for the takeover; fewer interpreters to spawn
    computes, results, codes = run_fleet(
        tmp_path, redis_url=redis_url, shared_disk=shared_disk, hang_first=True, n_procs=n_procs
    )
    assert sorted(codes) == [-signal.SIGKILL] + [0] * (n_procs - 1)
    assert len(computes) == 2  # the killed one and exactly one taker
    assert len(results) == n_procs - 1
    assert len({r["sha256"] for r in results}) == 1
    assert sum(not r["hit"] for r in results) == 1


@pytest.mark.redis
def test_fleet_redis_killed_serves_locally_then_resumes_publishing(
    tmp_path: Path, redis_server_factory: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    server = redis_server_factory()
    cache = TieredCache(
        [MemoryStore(), DiskStore(tmp_path), RedisStore(server.url, socket_timeout_s=0.5)],
        retry_after_s=0.3,
    )
    probe = RedisStore(server.url)
    with cache, probe, caplog.at_level(logging.INFO, logger="fsmcompile.store.cache"):
        cache.get_or_compute("before", lambda: payload("before"))
        assert probe.get("before") == payload("before")

        server.kill()
        for key in ("during-1", "during-2", "during-3"):
            value, event = cache.get_or_compute(key, lambda k=key: payload(k))
            assert (value, event.hit) == (payload(key), False)
        assert cache.get_or_compute("before", lambda: b"")[1].tier == "memory"
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "redis cache tier unavailable" in warnings[0].message

        server.start()  # same port, empty (no persistence)
        time.sleep(0.35)  # past retry_after_s
        _, event = cache.get_or_compute("after", lambda: payload("after"))
        assert event.hit is False
        deadline = time.monotonic() + 5  # writes missed during the outage are replayed
        while not all(probe.get(k) for k in ("after", "during-1", "during-2", "during-3")):
            assert time.monotonic() < deadline, "publishing did not resume"
            time.sleep(0.05)
        assert probe.get("after") == payload("after")
        assert "tier is back" in caplog.text


@pytest.mark.redis
def test_fleet_redis_frozen_times_out_and_falls_back(
    tmp_path: Path, redis_server_factory: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    server = redis_server_factory()
    cache = TieredCache(
        [MemoryStore(), DiskStore(tmp_path), RedisStore(server.url, socket_timeout_s=0.2)],
        retry_after_s=60,
    )
    with cache, caplog.at_level(logging.WARNING, logger="fsmcompile.store.cache"):
        server.pause()  # accepts nothing, answers nothing: a "slow" Redis
        try:
            start = time.monotonic()
            for i in range(5):
                _, event = cache.get_or_compute(f"k{i}", lambda: b"local")
                assert event.hit is False
            assert time.monotonic() - start < 3  # one timeout, then Redis is skipped
        finally:
            server.resume()
        assert len(caplog.records) == 1
