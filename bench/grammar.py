"""Lark grammar compile time and per-token mask time (`python -m bench.grammar`).

Compiles the bundled json.lark for the Llama 3 tokenizer (../shared/tokenizers/llama3),
then walks real JSON documents (valid instances and the schemas themselves from
../shared/corpora/jsonschemabench, pretty-printed as a model would write them) token by
token through a GrammarMatcher, timing `fill_bitmask` (the mask) and `advance` separately.
The first pass starts with empty runtime caches; the second pass repeats the same
documents warm. Prints a summary and writes JSON to bench/results/grammar.json.
Numbers are for reading, never asserted by tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from fsmcompile import Vocabulary
from fsmcompile.index.cfg import compile_lark_index
from fsmcompile.runtime.grammar_matcher import GrammarMatcher, GrammarTables

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
LLAMA3 = SHARED / "tokenizers" / "llama3" / "tokenizer.json"
CORPUS = SHARED / "corpora" / "jsonschemabench"


def load_documents(limit: int) -> list[str]:
    """Valid instances and schemas, round-robin over subsets, pretty-printed (indent=2)."""
    per_subset: list[list[str]] = []
    for path in sorted(CORPUS.glob("*/schemas.jsonl")):
        docs = []
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                for test in record.get("tests", []):
                    if test.get("valid"):
                        docs.append(json.dumps(test["data"], indent=2, ensure_ascii=False))
                docs.append(json.dumps(record["schema"], indent=2, ensure_ascii=False))
                if len(docs) >= limit:
                    break
        per_subset.append(docs)
    out: list[str] = []
    for i in range(limit):
        for docs in per_subset:
            if i < len(docs) and len(out) < limit and len(docs[i]) < 20_000:
                out.append(docs[i])
    return out


def percentiles(samples_ns: list[int]) -> dict[str, float]:
    arr = np.asarray(samples_ns, dtype=np.float64) / 1e3
    return {
        "avg_us": float(arr.mean()),
        "p50_us": float(np.percentile(arr, 50)),
        "p99_us": float(np.percentile(arr, 99)),
        "max_us": float(arr.max()),
    }


def run_pass(
    index: object, vocab: Vocabulary, docs: list[str], tables: GrammarTables
) -> dict[str, object]:
    mask_ns: list[int] = []
    advance_ns: list[int] = []
    rejected = 0
    bitmask = np.zeros(tables.num_words, dtype=np.int32)
    eos = vocab.eos_token_ids[0]
    clock = time.perf_counter_ns
    for doc in docs:
        matcher = GrammarMatcher(index, tables=tables)  # type: ignore[arg-type]
        for token in [*vocab.encode(doc), eos]:
            t0 = clock()
            matcher.fill_bitmask(bitmask)
            t1 = clock()
            ok = matcher.advance(token)
            t2 = clock()
            mask_ns.append(t1 - t0)
            advance_ns.append(t2 - t1)
            if not ok:
                rejected += 1
                break
    return {
        "tokens": len(mask_ns),
        "rejected_docs": rejected,
        "mask": percentiles(mask_ns),
        "advance": percentiles(advance_ns),
        "step": percentiles([a + b for a, b in zip(mask_ns, advance_ns, strict=True)]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--compiles", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/grammar.json")
    args = parser.parse_args()
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, "
        f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}"
    )
    grammar = (ROOT / "grammars" / "json.lark").read_text()

    started = time.perf_counter()
    vocab = Vocabulary.from_file(LLAMA3)
    loaded = time.perf_counter()
    vocab.trie  # noqa: B018 - built once per tokenizer and shared by every compile
    trie_s = time.perf_counter() - loaded
    compile_s = []
    index = None
    for _ in range(args.compiles):
        t0 = time.perf_counter()
        index = compile_lark_index(grammar, vocab)
        compile_s.append(time.perf_counter() - t0)
    assert index is not None
    print(
        f"llama3 vocabulary: load {loaded - started:.2f} s, trie {trie_s:.2f} s (once per "
        f"tokenizer)"
    )
    print(
        f"compile json.lark: best {min(compile_s):.3f} s, median "
        f"{statistics.median(compile_s):.3f} s ({index.num_states} lexer states, "
        f"{index.num_groups} groups, {index.masks.shape[0]} dense masks)"
    )

    docs = load_documents(args.docs)
    tables = GrammarTables(index)
    cold = run_pass(index, vocab, docs, tables)
    warm = run_pass(index, vocab, docs, tables)
    for name, result in (("cold caches", cold), ("warm caches", warm)):
        mask, adv = result["mask"], result["advance"]
        assert isinstance(mask, dict) and isinstance(adv, dict)
        print(
            f"{name}: {result['tokens']} tokens over {len(docs)} documents "
            f"({result['rejected_docs']} rejected)"
        )
        print(
            f"  mask    avg {mask['avg_us']:7.1f} us  p50 {mask['p50_us']:7.1f} us  "
            f"p99 {mask['p99_us']:7.1f} us  max {mask['max_us']:9.1f} us"
        )
        print(
            f"  advance avg {adv['avg_us']:7.1f} us  p50 {adv['p50_us']:7.1f} us  "
            f"p99 {adv['p99_us']:7.1f} us  max {adv['max_us']:9.1f} us"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "python": platform.python_version(),
                "numpy": np.__version__,
                "cpus": os.cpu_count(),
                "load_average": os.getloadavg()[0],
                "tokenizer": "llama3",
                "grammar": "json.lark",
                "trie_s": trie_s,
                "compile_s": compile_s,
                "documents": len(docs),
                "cold": cold,
                "warm": warm,
            },
            indent=2,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
