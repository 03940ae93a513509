"""CPU side of a decoding step: Matcher per token and the vLLM processor per batch.

Two numbers, on a real tokenizer (llama3's 128k vocabulary when ../shared has it, else
gpt2's 50k):

* `matcher`: one `advance` + one `fill_bitmask` per token, cold (fresh per-index tables,
  every (state, token) walked once) and warm (tables shared with earlier requests, as in
  a server). Target: <= 5 us per token warm.
* `processor`: `FSMLogitsProcessor.update_state(None)` after every guided request got a
  token, plus the whole `apply` (rows + mask ids -> one tensor, the gather, the masking
  of float logits[B, V]) at batch 1/64/256: us per step and per guided request. On the
  CPU the masking of B x V logits dominates `apply` (bench/mask_apply times the kernel
  alone); with `--device cuda` the mask table sits on the GPU and each step ends in a
  device synchronize.

    python -m bench.runtime_step [--tokenizer PATH] [--batches 1,64,256] [--quick]
                                 [--device cuda]

Writes bench/results/runtime_step.json. Nothing here is asserted by a test.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

import fsmcompile
from fsmcompile.runtime import Matcher
from fsmcompile.runtime.matcher import IndexTables
from fsmcompile.runtime.vllm import BatchUpdate, FSMLogitsProcessor, register_index
from fsmcompile.tables.bits import bitmask_words

from .mask_apply import machine

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
LLAMA3 = ROOT.parent / "shared" / "tokenizers" / "llama3" / "tokenizer.json"
GPT2 = ROOT / "tests" / "data" / "gpt2" / "tokenizer.json.gz"

# A JSON-object-shaped regex: forced punctuation, free strings, digits and a list.
PATTERN = (
    r'\{"id": [1-9][0-9]{0,5}, "name": "[A-Za-z ]{1,24}", '
    r'"email": "[a-z0-9.]{1,16}@[a-z]{2,10}\.(com|org|net)", '
    r'"tags": \[("[a-z]{1,10}"(, "[a-z]{1,10}"){0,4})?\], "score": -?[0-9]{1,3}\.[0-9]{1,4}\}'
)


def sample_sequences(index: Any, count: int, rng: np.random.Generator) -> list[list[int]]:
    """Valid token sequences ending in EOS, by random walks over the allowed tokens."""
    eos = set(index.vocabulary.eos_token_ids)
    sequences = []
    for _ in range(count):
        matcher = Matcher(index)
        tokens: list[int] = []
        while not matcher.is_terminated() and len(tokens) < 400:
            allowed = matcher.allowed_token_ids()
            text = [t for t in allowed.tolist() if t not in eos]
            pick = int(rng.choice(text)) if text and rng.random() < 0.97 else None
            if pick is None:
                pick = next((t for t in allowed.tolist() if t in eos), int(rng.choice(allowed)))
            assert matcher.advance(pick)
            tokens.append(pick)
        sequences.append(tokens)
    return sequences


def time_matcher(index: Any, sequences: list[list[int]]) -> dict[str, float]:
    out = np.zeros(bitmask_words(index.vocabulary.size), dtype=np.int32)
    results = {}
    tables = IndexTables(index)  # fresh: the first pass walks every (state, token) once
    for label in ("cold", "warm"):
        total_tokens = 0
        start = time.perf_counter()
        for tokens in sequences:
            matcher = Matcher(index, tables=tables)
            for token in tokens:
                matcher.advance(token)
                matcher.fill_bitmask(out)
            total_tokens += len(tokens)
        results[f"{label}_us_per_token"] = (time.perf_counter() - start) / total_tokens * 1e6
    return results


def time_processor(
    index: Any,
    tokenizer: str,
    sequences: list[list[int]],
    batch: int,
    steps: int,
    device: str = "cpu",
) -> dict[str, float]:
    config = SimpleNamespace(
        model_config=SimpleNamespace(
            tokenizer=tokenizer, get_vocab_size=lambda: index.vocabulary.size
        )
    )
    register_index("bench", index)
    proc = FSMLogitsProcessor(config, torch.device(device), False)
    logits = torch.randn(batch, index.vocabulary.size, device=device)
    cuda = device != "cpu"
    params = SimpleNamespace(extra_args={"fsmcompile": {"index": "bench"}})
    outputs: list[list[int]] = [[] for _ in range(batch)]
    added = [(i, params, [1], outputs[i]) for i in range(batch)]
    proc.update_state(BatchUpdate(batch, [], added, []))
    # Untimed: the kernel's compile for these shapes and the mask table's upload.
    proc.apply(logits)
    if cuda:
        torch.cuda.synchronize()
    seqs = [sequences[i % len(sequences)] for i in range(batch)]
    steps = min(steps, min(len(s) for s in seqs) - 1)
    update_s = 0.0
    prep_s = 0.0
    for step in range(steps):
        for i in range(batch):
            outputs[i].append(seqs[i][step])
        start = time.perf_counter()
        proc.update_state(None)
        mid = time.perf_counter()
        proc.apply(logits)
        if cuda:
            torch.cuda.synchronize()
        prep_s += time.perf_counter() - mid
        update_s += mid - start
    return {
        "batch": batch,
        "device": device,
        "steps": steps,
        "update_state_us_per_step": update_s / steps * 1e6,
        "update_state_us_per_request": update_s / steps / batch * 1e6,
        "apply_prep_us_per_step": prep_s / steps * 1e6,
        "total_us_per_request": (update_s + prep_s) / steps / batch * 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer", default=str(LLAMA3 if LLAMA3.exists() else GPT2))
    parser.add_argument("--batches", default="1,64,256")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--device", default="cpu", help="where the processor's logits live")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads (1 gives stable numbers on a shared box)",
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    info = machine()
    print(json.dumps(info))
    vocab = fsmcompile.Vocabulary.load(args.tokenizer)
    start = time.perf_counter()
    index = fsmcompile.compile_regex(PATTERN, vocab)
    compile_s = time.perf_counter() - start
    print(
        f"tokenizer {vocab.name or args.tokenizer}: {vocab.size} ids; "
        f"index {index.num_states} states, {index.masks.shape[0]} masks ({compile_s:.2f}s)"
    )
    rng = np.random.default_rng(0)
    sequences = sample_sequences(index, 8 if args.quick else 32, rng)
    mean_len = sum(map(len, sequences)) / len(sequences)
    matcher = time_matcher(index, sequences)
    print(
        f"matcher: {mean_len:.0f} tokens/request; advance+fill_bitmask "
        f"cold {matcher['cold_us_per_token']:.2f} us/token, "
        f"warm {matcher['warm_us_per_token']:.2f} us/token"
    )
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        row = time_processor(
            index, args.tokenizer, sequences, batch, 16 if args.quick else 48, args.device
        )
        rows.append(row)
        print(
            f"processor batch {batch:4d}: update_state {row['update_state_us_per_step']:9.1f} "
            f"us/step ({row['update_state_us_per_request']:.2f} us/request), "
            f"{'apply' if args.device != 'cpu' else 'apply prep'} "
            f"{row['apply_prep_us_per_step']:.1f} us/step; "
            f"total {row['total_us_per_request']:.2f} us per guided request"
        )
    result = {
        "machine": info,
        "tokenizer": args.tokenizer,
        "vocab_size": vocab.size,
        "pattern": PATTERN,
        "index": {"states": index.num_states, "masks": int(index.masks.shape[0])},
        "matcher": matcher,
        "processor": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / ("runtime_step.json" if args.device == "cpu" else "runtime_step_cuda.json")
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
