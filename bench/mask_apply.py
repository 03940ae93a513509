"""Bitmask apply: our `apply_token_bitmask_inplace` against a bare `masked_fill_`.

The bare baseline gets a precomputed bool[B, V] mask, i.e. it skips the unpacking our
kernels do; the ratio is the price of the 32x smaller bit-packed mask. Masks are a mix of
realistic rows: dense (inside a JSON string, ~98% allowed), sparse (a few hundred ids,
like digits or keywords) and random (the worst case for a branchy fill).

    python -m bench.mask_apply [--vocab 128256] [--batches 1,64,256,1024] [--quick]
                               [--device cuda]

On CUDA every timed round ends in a device synchronize, so the figures are kernel time
plus launch, not launch alone; the numpy kernel is host-only and is left out there.

Prints machine, versions and ratios; writes bench/results/mask_apply.json. Nothing here
is asserted by a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fsmcompile.runtime import apply_token_bitmask_inplace
from fsmcompile.runtime.kernels import choose_backend
from fsmcompile.runtime.kernels import numpy as numpy_kernel
from fsmcompile.runtime.kernels import torch as torch_kernel
from fsmcompile.tables.bits import pack_bool_rows

RESULTS = Path(__file__).parent / "results"


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "numpy": np.__version__,
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def realistic_masks(rng: np.random.Generator, batch: int, vocab: int) -> np.ndarray:
    """bool[B, V] allowed: rows cycle dense / sparse / random."""
    allowed = np.zeros((batch, vocab), dtype=np.bool_)
    for row in range(batch):
        kind = row % 3
        if kind == 0:
            allowed[row] = rng.random(vocab) < 0.98
        elif kind == 1:
            allowed[row, rng.choice(vocab, 300, replace=False)] = True
        else:
            allowed[row] = rng.random(vocab) < 0.5
    return allowed


def best_of(fn: Callable[[], object], repeats: int, rounds: int, sync: Callable[[], None]) -> float:
    """Best mean seconds per call over `rounds` rounds of `repeats` calls (noise-robust).

    `sync` waits for queued device work, so asynchronous kernels are timed whole.
    """
    fn()
    sync()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def time_all(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    disallowed: torch.Tensor,
    repeats: int,
    rounds: int,
) -> dict[str, float]:
    """Seconds per call of each contender on the same logits (masking is idempotent)."""
    contenders: dict[str, Callable[[], object]] = {
        "bare_masked_fill": lambda: logits.masked_fill_(disallowed, float("-inf")),
        "ours": lambda: apply_token_bitmask_inplace(logits, bitmask),
        "torch_kernel": lambda: torch_kernel.apply_bitmask_inplace(logits, bitmask, None),
    }
    if logits.device.type == "cpu":
        host_logits, host_bitmask = logits.numpy(), bitmask.numpy()
        contenders["numpy_kernel"] = lambda: numpy_kernel.apply_bitmask_inplace(
            host_logits, host_bitmask, None
        )
    if logits.shape[0] > 1:
        # Half the rows through `indices`: the vLLM processor's mixed-batch path.
        half = torch.arange(0, logits.shape[0], 2, device=logits.device)
        half_bitmask = bitmask[half]
        contenders["ours_half_rows_indices"] = lambda: apply_token_bitmask_inplace(
            logits, half_bitmask, half
        )
    sync = torch.cuda.synchronize if logits.device.type == "cuda" else lambda: None
    return {name: best_of(fn, repeats, rounds, sync) for name, fn in contenders.items()}


def run(vocab: int, batches: list[int], rounds: int, device: str) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    rows = []
    for batch in batches:
        allowed = realistic_masks(rng, batch, vocab)
        bitmask = torch.from_numpy(pack_bool_rows(allowed)).to(device)
        disallowed = torch.from_numpy(~allowed).to(device)
        logits = torch.randn(batch, vocab).to(device)
        repeats = max(1, 64 // batch) if device == "cpu" else 100
        timings = time_all(logits, bitmask, disallowed, repeats, rounds)
        base = timings["bare_masked_fill"]
        row = {
            "batch": batch,
            "backend": choose_backend(logits),
            "us": {k: round(v * 1e6, 1) for k, v in timings.items()},
            "ratio_vs_bare": {k: round(v / base, 2) for k, v in timings.items()},
        }
        rows.append(row)
        print(
            f"batch {batch:5d}  backend {row['backend']:6s}  "
            + "  ".join(
                f"{k} {v:>10.1f}us ({row['ratio_vs_bare'][k]:.2f}x)" for k, v in row["us"].items()
            )
        )
    return {"vocab": vocab, "device": device, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", type=int, default=128_256)
    parser.add_argument("--batches", default="1,64,256,1024")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="batches 1,64 and 2 rounds")
    parser.add_argument("--device", default="cpu", help="torch device of logits and masks")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads (1 gives stable numbers on a shared box)",
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    batches = [int(b) for b in args.batches.split(",")]
    rounds = args.rounds
    if args.quick:
        batches, rounds = [b for b in batches if b <= 64], 2
    info = machine()
    print(json.dumps(info))
    result = {"machine": info, **run(args.vocab, batches, rounds, args.device)}
    RESULTS.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.device == "cpu" else f"_{args.device.split(':')[0]}"
    out = RESULTS / f"mask_apply{suffix}.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
