"""Entry points for the multi-process single-flight tests (spawned, so importable here)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from pathlib import Path
from typing import Any

from fsmcompile.store import DiskStore, MemoryStore, RedisStore, Store, TieredCache


def payload(key: str, size: int = 200_000) -> bytes:
    """The bytes every process computes for `key`: deterministic, so copies compare equal."""
    return random.Random(key).randbytes(size)


def run_worker(idx: int, cfg: dict[str, Any], barrier: Any) -> None:
    """Ask for cfg["key"] once, after all workers are ready; write the outcome to a file."""
    tiers: list[Store] = [MemoryStore()]
    if cfg["disk_dir"]:
        shared = cfg["shared_disk"]
        tiers.append(DiskStore(cfg["disk_dir"] if shared else Path(cfg["disk_dir"]) / str(idx)))
    if cfg["redis_url"]:
        tiers.append(RedisStore(cfg["redis_url"], prefix=cfg["prefix"]))
    cache = TieredCache(tiers, lock_ttl_s=cfg["lock_ttl_s"], wait_timeout_s=cfg["wait_timeout_s"])
    out = Path(cfg["out_dir"])

    def compute() -> bytes:
        with open(out / "computes.log", "a") as f:
            f.write(f"{os.getpid()}\n")
        if cfg["hang_first"]:
            try:  # the first computer hangs here until the test SIGKILLs it
                os.close(os.open(out / "first", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                time.sleep(60)
            except FileExistsError:
                pass
        time.sleep(cfg["compute_s"])
        return payload(cfg["key"])

    barrier.wait(timeout=60)
    with cache:
        value, event = cache.get_or_compute(cfg["key"], compute)
    result = {
        "sha256": hashlib.sha256(value).hexdigest(),
        "hit": event.hit,
        "tier": event.tier,
        "compile_s": event.compile_s,
        "waited_s": event.waited_s,
    }
    (out / f"result-{idx}.json").write_text(json.dumps(result))
