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
import json
import math
import os
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the worker is forked

from bench.coverage_engines import EngineWorker, ttfm_ratio  # noqa: E402
from bench.engines import ENGINES, is_installed  # noqa: E402
from bench.measure import describe_machine, machine, package_version, percentile  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpora" / "jsonschemabench"
SHARED_CORPUS = Path("/work/shared/corpora/jsonschemabench")
"""Where the corpus is looked for when `CORPUS` (beside the checkout) is missing."""
TOKENIZERS = {
    "llama3": ROOT.parent / "shared" / "tokenizers" / "llama3" / "tokenizer.json",
    "gpt2": ROOT / "tests" / "data" / "gpt2" / "tokenizer.json.gz",
}
SUBSETS = (
    "Glaiveai2K",
    "Github_trivial",
    "Github_easy",
    "Github_medium",
    "Github_hard",
    "Github_ultra",
    "JsonSchemaStore",
    "Kubernetes",
    "Snowplow",
    "WashingtonPost",
    "Handwritten",
    "Synthesized",
)
SNIPPET = 300
"""Characters of a failing instance's text kept in the report."""


# --- inputs ---------------------------------------------------------------------------


def resolve_corpus(corpus: Path | None = None) -> Path:
    """`corpus`, else `CORPUS` beside the checkout, else the machine's shared copy."""
    if corpus is not None:
        return corpus
    return CORPUS if CORPUS.exists() or not SHARED_CORPUS.exists() else SHARED_CORPUS


def load_records(
    subset: str,
    limit: int | None,
    ids: set[str] | None,
    *,
    sample_seed: int | None = None,
    corpus: Path | None = None,
) -> list[dict[str, Any]]:
    """The first `limit` records of a subset in the corpus' natural id order (or `ids`);
    with `sample_seed`, `limit` records drawn uniformly with that seed, in id order."""
    records = []
    with open(resolve_corpus(corpus) / subset / "schemas.jsonl", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if ids is not None and record["id"] not in ids:
                continue
            records.append(record)
            if limit is not None and sample_seed is None and len(records) >= limit:
                break
    if limit is not None and sample_seed is not None and len(records) > limit:
        picked = sorted(random.Random(f"{sample_seed}/{subset}").sample(range(len(records)), limit))
        records = [records[i] for i in picked]
    return records


def upstream_sizes(corpus: Path | None = None) -> dict[str, int]:
    """Schemas per subset in the full upstream benchmark (the corpus' `index.json`)."""
    index = json.loads((resolve_corpus(corpus) / "index.json").read_text(encoding="utf-8"))
    return {name: int(entry["total"]) for name, entry in index["subsets"].items()}


def weighted_pass_rate(
    summaries: dict[str, dict[str, Any]], sizes: dict[str, int]
) -> dict[str, float] | None:
    """The pass rate of the subsets run, each weighted by its upstream size, with the
    half-width of a 95% normal interval for stratified sampling (each subset's rate
    smoothed as (passed + 1) / (n + 2) for the variance, so a 10-of-10 subset still
    counts as uncertain)."""
    strata = [(sizes[name], s) for name, s in summaries.items() if s["schemas"] and name in sizes]
    total = sum(size for size, _ in strata)
    if not total:
        return None
    rate = variance = 0.0
    for size, s in strata:
        weight, n = size / total, s["schemas"]
        rate += weight * s["passed"] / n
        smoothed = (s["passed"] + 1) / (n + 2)
        variance += weight**2 * smoothed * (1 - smoothed) / n * max(0.0, 1 - n / size)
    return {"rate": rate, "half_width": 1.96 * math.sqrt(variance), "upstream_schemas": total}


def serialize(data: Any, whitespace: str) -> str:
    """Instance text as the schema's whitespace option writes it.

    Compact (`,` and `:`) unless whitespace is "standard" (`json.dumps`' `", "`/`": "`);
    "flexible" accepts compact text too. Object keys keep the instance's own order: the
    compiler wants listed properties in schema order, and an instance written otherwise
    counts as over-constrained, as in the DFA-level report this replaces.
    """
    separators = (", ", ": ") if whitespace == "standard" else (",", ":")
    return json.dumps(data, separators=separators, ensure_ascii=False)


def resolve_tokenizer(name: str) -> tuple[str, Path]:
    """(label, path): `llama3`, `gpt2` or a path to a tokenizer.json."""
    if name in TOKENIZERS:
        path = TOKENIZERS[name]
        if not path.exists():
            raise SystemExit(f"tokenizer {name!r} not found at {path}")
        return name, path
    path = Path(name)
    if not path.exists():
        raise SystemExit(f"no tokenizer at {path}")
    return path.name, path


def prepare_tests(record: dict[str, Any], vocab: Any, whitespace: str) -> list[dict[str, Any]]:
    """Each labelled instance with its text and its real tokenization (`Vocabulary.encode`)."""
    tests = []
    for position, test in enumerate(record["tests"]):
        text = serialize(test["data"], whitespace)
        tests.append(
            {
                "index": position,
                "valid": bool(test["valid"]),
                "description": test.get("description", ""),
                "text": text,
                "ids": vocab.encode(text),
            }
        )
    return tests


# --- one schema (runs in the worker) ----------------------------------------------------


def walk(matcher: Any, mask: Any, ids: list[int], vocab: Any, mask_ns: list[int]) -> dict[str, Any]:
    """Feed `ids` the way a decoder would; accepted iff every bit is set and EOS at the end.

    The verdict comes from the bitmask `fill_bitmask` writes. `advance` is still called on
    every token, also a masked one (the walk stops right after), and any difference
    between the bit and advance's answer is reported as a disagreement.
    """
    clock = time.perf_counter_ns
    eos = vocab.eos_token_ids[0]
    table = vocab.token_bytes
    offset = 0
    for position, token in enumerate(ids):
        t0 = clock()
        matcher.fill_bitmask(mask)
        mask_ns.append(clock() - t0)
        allowed = bool((int(mask[token >> 5]) >> (token & 31)) & 1)
        advanced = bool(matcher.advance(token))
        piece = table[token] if token < len(table) else b""
        if not allowed or not advanced:
            return {
                "accepted": False,
                "disagreement": allowed != advanced,
                "reason": (
                    f"token {position} {piece.decode('utf-8', 'backslashreplace')!r} "
                    f"at byte {offset} {'masked' if not allowed else 'refused by advance'}"
                ),
            }
        offset += len(piece)
    t0 = clock()
    matcher.fill_bitmask(mask)
    mask_ns.append(clock() - t0)
    eos_bit = bool((int(mask[eos >> 5]) >> (eos & 31)) & 1)
    accepting = bool(matcher.is_accepting())
    eos_ok = bool(matcher.advance(eos))
    disagreement = not (eos_bit == accepting == eos_ok)
    if eos_bit and eos_ok:
        return {"accepted": True, "disagreement": disagreement}
    return {
        "accepted": False,
        "disagreement": disagreement,
        "reason": f"EOS not allowed at the end (byte {offset})",
    }


def check_schema(
    record: dict[str, Any],
    tests: list[dict[str, Any]],
    vocab: Any,
    *,
    options: dict[str, Any],
    timeout_s: float,
    max_states: int,
) -> dict[str, Any]:
    """Compile one schema and walk its instances; never raises for a bad schema."""
    import numpy as np

    from fsmcompile.compiler import compile_spec
    from fsmcompile.errors import BudgetExceededError, SpecError, UnsupportedFeatureError
    from fsmcompile.runtime.matcher import matcher_for

    result: dict[str, Any] = {"id": record["id"], "subset": record.get("subset")}
    started = time.perf_counter()
    try:
        compiled = compile_spec(
            "json",
            record["schema"],
            vocab,
            options=options,
            timeout_s=timeout_s,
            max_states=max_states,
            cache=False,
        )
    except UnsupportedFeatureError as exc:
        keywords = sorted({k for _, k in getattr(exc, "features", ())})
        return {**result, "outcome": "unsupported", "keywords": keywords}
    except BudgetExceededError as exc:
        seconds = time.perf_counter() - started
        limit = getattr(exc, "limit", None)
        return {**result, "outcome": "budget", "limit": limit, "seconds_spent": seconds}
    except SpecError as exc:
        return {**result, "outcome": "error", "error": _first_line(exc)}
    except RecursionError:
        return {**result, "outcome": "error", "error": "RecursionError"}
    compile_s = time.perf_counter() - started
    if compile_s > timeout_s:
        return {**result, "outcome": "budget", "limit": "timeout", "seconds_spent": compile_s}
    index = compiled.index
    result.update(
        compile_s=compile_s,
        index=type(index).__name__,
        states=compiled.num_states,
        masks=compiled.num_masks,
        tests=len(tests),
    )
    mask = np.zeros(-(-vocab.size // 32), dtype=np.int32)
    mask_ns: list[int] = []
    over = under = disagreements = tokens = 0
    first_failure: dict[str, Any] | None = None
    for test in tests:
        samples = mask_ns if test["valid"] else []
        verdict = walk(matcher_for(index), mask, test["ids"], vocab, samples)
        tokens += len(test["ids"]) if test["valid"] else 0
        disagreements += verdict["disagreement"]
        wrong = verdict["accepted"] != test["valid"]
        if not wrong:
            continue
        if test["valid"]:
            over += 1
        else:
            under += 1
        if first_failure is None or (under == 1 and not test["valid"]):
            # The first failure, or the first under-constraint, which matters more.
            first_failure = {
                "instance": test["index"],
                "valid": test["valid"],
                "description": test["description"],
                "reason": verdict.get("reason", "accepted"),
                "text": test["text"][:SNIPPET],
            }
    # Again over the same instances: the tables the first walks filled are now warm, as
    # they are for every later request of a schema a server keeps serving.
    warm_ns: list[int] = []
    for test in tests:
        if test["valid"]:
            walk(matcher_for(index), mask, test["ids"], vocab, warm_ns)
    drop_runtime_caches()
    outcome = "under" if under else "over" if over else "passed"
    result.update(
        outcome=outcome,
        over=over,
        under=under,
        disagreements=disagreements,
        tokens=tokens,
        mask_us_avg=statistics.fmean(mask_ns) / 1e3 if mask_ns else None,
        mask_us_p99=percentile(sorted(mask_ns), 99) / 1e3 if mask_ns else None,
        mask_ns=mask_ns,
        mask_us_warm_avg=statistics.fmean(warm_ns) / 1e3 if warm_ns else None,
        mask_us_warm_p99=percentile(sorted(warm_ns), 99) / 1e3 if warm_ns else None,
        mask_warm_ns=warm_ns,
    )
    if first_failure is not None:
        result["first_failure"] = first_failure
    return result


def drop_runtime_caches() -> None:
    """Empty the runtime's per-index table LRUs (up to 32 indexes each), which would
    otherwise keep the last schemas' indexes alive in a long run."""
    for name in ("fsmcompile.runtime.matcher", "fsmcompile.runtime.grammar_tables"):
        module = sys.modules.get(name)
        cache = getattr(module, "_tables_cache", None)
        if cache is not None:
            cache.clear()


def warm_up(vocab: Any, options: dict[str, Any]) -> None:
    """Compile and walk a flat and a free-form schema, so the worker inherits the imports
    and the first schema's compile time is not charged with them."""
    for schema in ({"type": "object", "properties": {"a": {"type": "string"}}}, {}):
        record = {"id": "warm-up", "schema": schema, "tests": [{"valid": True, "data": {"a": "b"}}]}
        check_schema(
            record,
            prepare_tests(record, vocab, options["whitespace"]),
            vocab,
            options=options,
            timeout_s=30.0,
            max_states=100_000,
        )


def _first_line(exc: BaseException) -> str:
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


# --- summary and report -----------------------------------------------------------------


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts per outcome, compile-time percentiles (ms) and mask time per token (µs)."""
    compiled = [r for r in results if "compile_s" in r]
    times = sorted(r["compile_s"] * 1e3 for r in compiled)
    mask_ns = sorted(ns for r in compiled for ns in r.get("mask_ns", ()))
    warm_ns = sorted(ns for r in compiled for ns in r.get("mask_warm_ns", ()))
    ttfm = sorted(r["ttfm_s"] * 1e3 for r in compiled if "ttfm_s" in r)
    cpu = sorted(s * 1e3 for r in compiled for s in r.get("cpu_instance_s", ()))
    index = sorted(r["index_s"] * 1e3 for r in compiled if r.get("index_s") is not None)
    keywords: Counter[str] = Counter()
    for r in results:
        keywords.update(r.get("keywords", []))
    return {
        "schemas": len(results),
        "compiled": len(compiled),
        "passed": sum(1 for r in results if r["outcome"] == "passed"),
        "over": sum(1 for r in compiled if r["over"]),
        "under": sum(1 for r in compiled if r["under"]),
        "unsupported": sum(1 for r in results if r["outcome"] == "unsupported"),
        "budget": sum(1 for r in results if r["outcome"] == "budget"),
        "error": sum(1 for r in results if r["outcome"] == "error"),
        "no_tests": sum(1 for r in compiled if not r["tests"]),
        "disagreements": sum(r.get("disagreements", 0) for r in compiled),
        "compile_ms_p50": percentile(times, 50) if times else None,
        "compile_ms_p90": percentile(times, 90) if times else None,
        "compile_ms_p99": percentile(times, 99) if times else None,
        "mask_tokens": len(mask_ns),
        "mask_us_avg": statistics.fmean(mask_ns) / 1e3 if mask_ns else None,
        "mask_us_p99": percentile(mask_ns, 99) / 1e3 if mask_ns else None,
        "mask_us_warm_avg": statistics.fmean(warm_ns) / 1e3 if warm_ns else None,
        "mask_us_warm_p99": percentile(warm_ns, 99) / 1e3 if warm_ns else None,
        "ttfm_ms_p50": percentile(ttfm, 50) if ttfm else None,
        "ttfm_ms_p99": percentile(ttfm, 99) if ttfm else None,
        "cpu_ms_p50": percentile(cpu, 50) if cpu else None,
        "index_ms_p50": percentile(index, 50) if index else None,
        "top_unsupported": keywords.most_common(8),
    }


COLUMNS = (
    ("subset", "subset", 15),
    ("schemas", "n", 4),
    ("compiled", "comp", 4),
    ("passed", "pass", 4),
    ("over", "over", 4),
    ("under", "under", 5),
    ("unsupported", "unsup", 5),
    ("budget", "budg", 4),
    ("error", "err", 4),
    ("no_tests", "notest", 6),
    ("compile_ms_p50", "p50 ms", 8),
    ("compile_ms_p90", "p90 ms", 8),
    ("compile_ms_p99", "p99 ms", 8),
    ("mask_us_avg", "mask µs", 7),
    ("mask_us_p99", "p99 µs", 7),
    ("mask_us_warm_avg", "warm µs", 7),
    ("mask_us_warm_p99", "warm p99", 8),
    ("ttfm_ms_p50", "TTFM p50", 8),
    ("ttfm_ms_p99", "TTFM p99", 8),
    ("cpu_ms_p50", "CPU/inst", 8),
    ("index_ms_p50", "index ms", 8),
)


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key.startswith(("compile_ms", "ttfm_ms", "cpu_ms", "index_ms")):
        return f"{value:.0f}" if value >= 100 else f"{value:.1f}"
    if key.startswith("mask_us"):
        return f"{value:.2f}"
    return str(value)


def table_lines(rows: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        " ".join(
            f"{title:>{width}}" if i else f"{title:<{width}}"
            for i, (_, title, width) in enumerate(COLUMNS)
        )
    ]
    for name, summary in rows.items():
        cells = [f"{name:<{COLUMNS[0][2]}}"]
        cells += [f"{_cell(k, summary[k]):>{w}}" for k, _, w in COLUMNS[1:]]
        lines.append(" ".join(cells))
    return lines


def _failure_lines(results: list[dict[str, Any]]) -> list[str]:
    """Every schema that did not pass (over, under, error, disagreement, budget)."""
    out = []
    for r in results:
        if r["outcome"] in ("over", "under", "error") or r.get("disagreements"):
            detail = r.get("error") or ""
            if "first_failure" in r:
                f = r["first_failure"]
                label = "valid" if f["valid"] else "invalid"
                detail = f"{label} #{f['instance']}: {f['reason']} in `{f['text'][:120]}`"
            extra = (
                f", {r['disagreements']} mask/advance disagreements"
                if r.get("disagreements")
                else ""
            )
            out.append(f"* `{r['id']}` {r['outcome']}{extra}: {detail}")
        elif r["outcome"] == "budget":
            out.append(
                f"* `{r['id']}` budget: {r.get('limit')} after {r.get('seconds_spent', 0):.1f} s"
            )
    return out


def comparison_lines(report: dict[str, Any]) -> list[str]:
    """One Markdown row per engine: weighted pass rate, over/under, TTFM and its ratio."""
    by_engine = {
        name: [r for s in e["subsets"].values() for r in s["results"]]
        for name, e in report["engines"].items()
    }
    out = [
        "| engine | pass / n | weighted pass | over | under | unsup | budg | err "
        "| TTFM p50 ms | TTFM p99 ms | TTFM ×fsm | mask µs | warm µs | CPU/inst p50 ms "
        "| index p50 ms |",
        "| --- |" + " ---: |" * 14,
    ]
    for name, e in report["engines"].items():
        t = e.get("total") or summarize(by_engine[name])
        w = e.get("weighted_pass")
        weighted = f"{100 * w['rate']:.1f}% ± {100 * w['half_width']:.1f}%" if w else "-"
        ratio = ttfm_ratio(by_engine, name) if name != "fsmcompile" else None
        cells = [
            name,
            f"{t['passed']} / {t['schemas']}",
            weighted,
            *(str(t[k]) for k in ("over", "under", "unsupported", "budget", "error")),
            *(_cell(k, t[k]) for k in ("ttfm_ms_p50", "ttfm_ms_p99")),
            f"{ratio:.2f}" if ratio else "-",
            *(_cell(k, t[k]) for k in ("mask_us_avg", "mask_us_warm_avg", "cpu_ms_p50")),
            _cell("index_ms", t["index_ms_p50"]),
        ]
        out.append("| " + " | ".join(cells) + " |")
    return out


def markdown(report: dict[str, Any]) -> str:
    """The report as Markdown: settings, the engines side by side, a table per engine,
    then every schema that did not pass."""
    opts = report["options"]
    out = [
        "# JSONSchemaBench coverage, token level",
        "",
        f"Tokenizer {report['tokenizer']['label']} ({report['tokenizer']['size']} ids); "
        f"fsmcompile whitespace {opts['whitespace']}, strict {opts['strict']}, "
        f"max_states {opts['max_states']}; every engine: TTFM budget {opts['timeout_s']} s, "
        f"hard time-out {opts['hard_timeout_s']:g} s, "
        + (
            f"{opts['limit']} schemas per subset drawn with seed {opts['sample_seed']}."
            if opts.get("sample_seed") is not None
            else f"first {opts['limit']} schemas per subset."
        ),
        f"Engines: {', '.join(f'{n} {v}' for n, v in report['versions'].items())}.",
        "",
        describe_machine(report["machine"]),
        "",
        *comparison_lines(report),
        "",
        "TTFM ×fsm: median over schemas both compiled of the engine's TTFM / fsmcompile's "
        "(> 1: fsmcompile is faster). Columns are defined in bench/README.md.",
    ]
    for name, engine in report["engines"].items():
        out += [
            "",
            f"## {name}",
            "",
            "| " + " | ".join(title for _, title, _ in COLUMNS) + " |",
            "| --- |" + " ---: |" * (len(COLUMNS) - 1),
        ]
        rows = {sub: s["summary"] for sub, s in engine["subsets"].items()}
        if "total" in engine:
            rows["**total**"] = engine["total"]
        for sub, summary in rows.items():
            cells = [sub] + [_cell(k, summary[k]) for k, _, _ in COLUMNS[1:]]
            out.append("| " + " | ".join(cells) + " |")
        if engine.get("weighted_pass"):
            out += ["", _weighted_line(engine["weighted_pass"])]
        keywords = engine.get("total", {}).get("top_unsupported")
        if keywords:
            out += [
                "",
                "Unsupported keywords (schemas): " + ", ".join(f"{k} {n}" for k, n in keywords),
            ]
        failing = _failure_lines([r for s in engine["subsets"].values() for r in s["results"]])
        if failing:
            out += ["", f"### {name}: schemas that did not pass", "", *failing]
    return "\n".join(out) + "\n"


def _weighted_line(weighted: dict[str, float]) -> str:
    return (
        f"passed, weighted by upstream subset size ({weighted['upstream_schemas']:.0f} "
        f"schemas): {100 * weighted['rate']:.1f}% ± {100 * weighted['half_width']:.1f}% (95%)"
    )


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
            _write(report, args.out, md_path)
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
            print(f"{name:<11} " + _weighted_line(engine["weighted_pass"]), flush=True)
        if engine["total"]["disagreements"]:
            print(f"{name}: {engine['total']['disagreements']} mask/advance disagreements")
    print("\n".join(comparison_lines(report)), flush=True)
    _write(report, args.out, md_path)
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


def _write(report: dict[str, Any], json_path: Path, md_path: Path) -> None:
    """JSON (per-token mask samples left out) and Markdown, after every subset."""
    heavy = ("mask_ns", "mask_warm_ns")
    slim = {
        **report,
        "engines": {
            name: {
                **engine,
                "subsets": {
                    sub: {
                        "summary": s["summary"],
                        "results": [
                            {k: v for k, v in r.items() if k not in heavy} for r in s["results"]
                        ],
                    }
                    for sub, s in engine["subsets"].items()
                },
            }
            for name, engine in report["engines"].items()
        },
    }
    json_path.write_text(json.dumps(slim, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    md_path.write_text(markdown(report), encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
