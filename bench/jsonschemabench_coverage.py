"""JSONSchemaBench coverage at the token level (`python -m bench.jsonschemabench_coverage`).

What a decoder sees is tokens, not bytes: a schema "works" only if the compiled index lets
the model write each valid instance token by token and stops it on each invalid one. So,
MaskBench-style, for the first `--limit` schemas of each subset of
`../shared/corpora/jsonschemabench` (or `--sample N` drawn at random with a fixed seed):

1. compile through the public API (`compile_spec("json", ..., cache=False)`) for a real
   tokenizer (Llama 3 by default) under a time and state budget, timed;
2. serialize every labelled instance compactly, tokenize it with the real tokenizer (no
   special tokens, as a model writes it) and walk a fresh matcher (`matcher_for`): per
   token fill the bitmask (timed) and test the token's bit, then advance; at the end fill
   once more and require EOS's bit and the matcher's acceptance of EOS.

A schema is *passed* when every valid instance is accepted and every invalid one rejected;
*over-constrained* when some valid instance is rejected (sound, but the model could not
write it); *under-constrained* when some invalid instance is accepted (unsound: must stay
at zero apart from documented relaxations); else *unsupported*, *budget* (time or state
budget, or the hard time-out of the worker) or *error*. A token whose bit and `advance`
disagree is counted as a mask/advance disagreement (a bug either way).

The first schemas of a subset are not a fair sample of it, and equal counts per subset are
not a fair sample of the benchmark (Handwritten has 147 schemas upstream, Github_easy
1,943). The total therefore also gives the pass rate weighted by each subset's upstream
size, the figure MaskBench reports over the whole set, with a 95% interval for the
sampling; it means most with `--sample`.

Each schema runs in a forked worker that inherits the vocabulary loaded once here; a worker
that overruns its hard time-out or dies is replaced and the schema recorded, so one bad
schema never stops the run. Prints a table per subset, progress on stderr, and writes JSON
and Markdown under bench/results/. Numbers are for reading, never asserted by tests.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the worker is forked

from bench.coverage_corpus import (  # noqa: E402
    ROOT,
    SUBSETS,
    load_records,
    prepare_tests,
    resolve_corpus,
    resolve_tokenizer,
    upstream_sizes,
)
from bench.coverage_engines import EngineWorker  # noqa: E402
from bench.coverage_report import (  # noqa: E402
    comparison_lines,
    summarize,
    table_lines,
    weighted_line,
    weighted_pass_rate,
    write_report,
)
from bench.engines import ENGINES, is_installed  # noqa: E402
from bench.measure import machine, package_version  # noqa: E402


def _progress(done: int, total: int, result: dict[str, Any]) -> None:
    outcome = result["outcome"]
    if "compile_s" in result:
        detail = f"{result['compile_s'] * 1e3:.0f} ms, {result['tests']} tests"
        if "first_failure" in result:
            detail += f"; {result['first_failure']['reason']}"
    else:
        detail = result.get("error") or result.get("limit") or ",".join(result.get("keywords", []))
    print(f"  [{done}/{total}] {result['id']}: {outcome} ({detail})", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--subsets", default=None, help="comma-separated; default: all")
    parser.add_argument("--subset", action="append", choices=SUBSETS, help="repeatable")
    parser.add_argument("--id", action="append", dest="ids", help="only these ids (repeatable)")
    parser.add_argument("--limit", type=int, default=50, help="first N schemas per subset")
    parser.add_argument(
        "--sample",
        type=int,
        default=None,
        metavar="N",
        help="N schemas per subset drawn at random (see --seed) instead of the first N",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of --sample")
    parser.add_argument("--all", action="store_true", help="every schema (no --limit)")
    parser.add_argument("--tokenizer", default="llama3", help="llama3, gpt2 or a tokenizer.json")
    parser.add_argument("--corpus", type=Path, default=None, help="JSONSchemaBench folder")
    parser.add_argument(
        "--engines",
        default=None,
        help="comma-separated; default: fsmcompile and every installed peer",
    )
    parser.add_argument("--lenient", action="store_true", help="strict=False")
    parser.add_argument("--whitespace", default="compact")
    parser.add_argument("--max-states", type=int, default=100_000)
    parser.add_argument("--timeout-s", type=float, default=10.0, help="compile + first mask")
    parser.add_argument(
        "--hard-timeout-s",
        type=float,
        default=None,
        help="kill the worker past this (compile + walks); default 3 x timeout + 30",
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "bench" / "results" / "jsonschemabench_coverage.json"
    )
    args = parser.parse_args(argv)

    subsets = list(args.subset or [])
    if args.subsets:
        subsets += [s.strip() for s in args.subsets.split(",") if s.strip()]
    unknown = [s for s in subsets if s not in SUBSETS]
    if unknown:
        parser.error(f"unknown subsets {unknown}; expected some of {', '.join(SUBSETS)}")
    subsets = list(dict.fromkeys(subsets)) or list(SUBSETS)
    try:
        engines = pick_engines(args.engines)
    except ValueError as exc:
        parser.error(str(exc))
    limit = None if args.all else args.sample or args.limit
    sample_seed = args.seed if args.sample and not args.all else None
    ids = set(args.ids) if args.ids else None
    corpus = resolve_corpus(args.corpus)

    from fsmcompile import Vocabulary

    label, path = resolve_tokenizer(args.tokenizer)
    started = time.perf_counter()
    vocab = Vocabulary.from_file(path)
    vocab.encode("{}")  # the tokenizer itself, inherited by the workers
    print(
        f"tokenizer {label} ({path}): {vocab.size} ids, loaded in "
        f"{time.perf_counter() - started:.1f} s; engines {', '.join(engines)}",
        file=sys.stderr,
    )
    options = {"whitespace": args.whitespace, "strict": not args.lenient}
    settings = {
        "timeout_s": args.timeout_s,
        "engine_options": {
            "timeout_s": args.timeout_s,
            "options": options,
            "max_states": args.max_states,
        },
    }
    hard = args.hard_timeout_s or 3 * args.timeout_s + 30
    workers = {
        name: EngineWorker(name, str(path), settings, vocab.encode, hard) for name in engines
    }
    report: dict[str, Any] = {
        "machine": machine(),
        "tokenizer": {"label": label, "path": str(path), "size": vocab.size},
        "versions": {name: package_version(ENGINES[name][1].replace("_", "-")) for name in engines},
        "options": {
            **options,
            "max_states": args.max_states,
            "timeout_s": args.timeout_s,
            "hard_timeout_s": hard,
            "limit": limit,
            "sample_seed": sample_seed,
            "corpus": str(corpus),
        },
        "engines": {name: {"subsets": {}} for name in engines},
    }
    md_path = args.out.with_suffix(".md")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    print("\n".join(["engine      " + table_lines({})[0]]), flush=True)
    try:
        for subset in subsets:
            records = load_records(subset, limit, ids, sample_seed=sample_seed, corpus=corpus)
            print(f"{subset}: {len(records)} schemas", file=sys.stderr, flush=True)
            results: dict[str, list[dict[str, Any]]] = {name: [] for name in engines}
            for done, record in enumerate(records, 1):
                record = {**record, "subset": subset}
                tests = prepare_tests(record, vocab, args.whitespace)
                for name, worker in workers.items():
                    result = worker.run(record, tests)
                    result.setdefault("subset", subset)
                    _progress(done, len(records), {**result, "id": f"{name} {result['id']}"})
                    results[name].append(result)
            for name in engines:
                summary = summarize(results[name])
                report["engines"][name]["subsets"][subset] = {
                    "summary": summary,
                    "results": results[name],
                }
                print(f"{name:<11} " + table_lines({subset: summary})[1], flush=True)
            write_report(report, args.out, md_path)
    finally:
        for worker in workers.values():
            worker.close()
    sizes = upstream_sizes(corpus)
    for name, engine in report["engines"].items():
        everything = [r for s in engine["subsets"].values() for r in s["results"]]
        engine["total"] = summarize(everything)
        summaries = {sub: s["summary"] for sub, s in engine["subsets"].items()}
        engine["weighted_pass"] = weighted_pass_rate(summaries, sizes)
        print(f"{name:<11} " + table_lines({"total": engine["total"]})[1], flush=True)
        if engine["weighted_pass"]:
            print(f"{name:<11} " + weighted_line(engine["weighted_pass"]), flush=True)
        if engine["total"]["disagreements"]:
            print(f"{name}: {engine['total']['disagreements']} mask/advance disagreements")
    print("\n".join(comparison_lines(report)), flush=True)
    write_report(report, args.out, md_path)
    print(f"wrote {args.out} and {md_path}", file=sys.stderr)
    return 0


def pick_engines(spec: str | None) -> list[str]:
    """Engine names from `--engines`; by default fsmcompile and every installed peer."""
    if spec is None:
        return [n for n in ("fsmcompile", "llguidance", "xgrammar") if is_installed(n)]
    names = list(dict.fromkeys(n.strip() for n in spec.split(",") if n.strip()))
    unknown = [n for n in names if n not in ENGINES]
    if unknown:
        raise ValueError(f"unknown engines {unknown}; expected some of {', '.join(ENGINES)}")
    missing = [n for n in names if not is_installed(n)]
    if missing:
        raise ValueError(f"not installed: {missing} (pip install -e '.[bench]')")
    return names


if __name__ == "__main__":
    raise SystemExit(main())
