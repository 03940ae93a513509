"""JSONSchemaBench coverage at the DFA level (`python -m bench.jsonschemabench_coverage`).

For each schema of each subset: lower it (strict), build the byte DFA under a state
and time budget, and check every labelled instance in compact form. A schema is
*passed* when all valid instances match and all invalid ones are rejected,
*over-constrained* when some valid instance is rejected (sound, but the decoder could
not produce it), *under-constrained* when some invalid instance is accepted (unsound:
must stay at zero apart from documented relaxations). Prints a table per subset and
writes JSON to bench/results/. Numbers are for reading, never asserted by tests.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from fsmcompile.automaton import build_dfa
from fsmcompile.errors import BudgetExceededError, SpecError, UnsupportedFeatureError
from fsmcompile.spec.json_schema import JsonOptions, schema_to_ir

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "jsonschemabench"
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


def load_records(subset: str, limit: int | None) -> list[dict[str, Any]]:
    """The first `limit` records of a subset, in the corpus' natural id order."""
    records = []
    with open(CORPUS / subset / "schemas.jsonl", encoding="utf-8") as handle:
        for line in handle:
            records.append(json.loads(line))
            if limit is not None and len(records) >= limit:
                break
    return records


def check_record(
    record: dict[str, Any], *, options: JsonOptions, max_states: int, timeout_s: float
) -> dict[str, Any]:
    """Compile one schema and classify it; never raises for a bad schema."""
    started = time.perf_counter()
    try:
        deadline = time.monotonic() + timeout_s
        lowering = schema_to_ir(record["schema"], options=options, deadline=deadline)
        dfa = build_dfa(lowering.node, max_states=max_states, deadline=deadline)
    except UnsupportedFeatureError as exc:
        keywords = sorted({k for _, k in exc.features})
        return {"id": record["id"], "status": "unsupported", "keywords": keywords}
    except BudgetExceededError as exc:
        return {"id": record["id"], "status": "budget", "limit": exc.limit}
    except SpecError as exc:
        return {"id": record["id"], "status": "error", "error": str(exc).splitlines()[0]}
    except RecursionError:
        return {"id": record["id"], "status": "error", "error": "RecursionError"}
    seconds = time.perf_counter() - started
    rejected_valid = accepted_invalid = 0
    for test in record["tests"]:
        text = json.dumps(test["data"], separators=(",", ":"), ensure_ascii=False)
        accepted = dfa.matches(text.encode("utf-8"))
        if test["valid"] and not accepted:
            rejected_valid += 1
        elif not test["valid"] and accepted:
            accepted_invalid += 1
    return {
        "id": record["id"],
        "status": "compiled",
        "seconds": seconds,
        "states": dfa.num_states,
        "tests": len(record["tests"]),
        "over_constrained": rejected_valid,
        "under_constrained": accepted_invalid,
        "relaxed": [list(r) for r in lowering.relaxed],
    }


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    compiled = [r for r in results if r["status"] == "compiled"]
    times = [r["seconds"] for r in compiled]
    keywords: Counter[str] = Counter()
    for r in results:
        keywords.update(r.get("keywords", []))
    return {
        "schemas": len(results),
        "compiled": len(compiled),
        "passed": sum(
            1 for r in compiled if not r["over_constrained"] and not r["under_constrained"]
        ),
        "over_constrained": sum(1 for r in compiled if r["over_constrained"]),
        "under_constrained": sum(1 for r in compiled if r["under_constrained"]),
        "unsupported": sum(1 for r in results if r["status"] == "unsupported"),
        "budget": sum(1 for r in results if r["status"] == "budget"),
        "error": sum(1 for r in results if r["status"] == "error"),
        "compile_s_p50": percentile(times, 0.5),
        "compile_s_p90": percentile(times, 0.9),
        "compile_s_p99": percentile(times, 0.99),
        "top_unsupported": keywords.most_common(8),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subset", action="append", choices=SUBSETS, help="repeatable")
    parser.add_argument("--limit", type=int, default=None, help="first N schemas per subset")
    parser.add_argument("--lenient", action="store_true", help="strict=False")
    parser.add_argument("--whitespace", default="compact")
    parser.add_argument("--max-states", type=int, default=100_000)
    parser.add_argument("--timeout-s", type=float, default=20.0)
    parser.add_argument(
        "--out", type=Path, default=Path("bench/results/jsonschemabench_coverage.json")
    )
    parser.add_argument("--verbose", action="store_true", help="list failing ids on stderr")
    args = parser.parse_args(argv)
    options = JsonOptions(whitespace=args.whitespace, strict=not args.lenient)
    report: dict[str, Any] = {
        "machine": platform.platform(),
        "python": platform.python_version(),
        "options": {
            "whitespace": args.whitespace,
            "strict": not args.lenient,
            "max_states": args.max_states,
            "timeout_s": args.timeout_s,
            "limit": args.limit,
        },
        "subsets": {},
    }
    header = (
        f"{'subset':16} {'n':>5} {'comp':>5} {'pass':>5} {'over':>5} {'under':>5} "
        f"{'unsup':>5} {'budg':>5} {'err':>5} {'p50 s':>7} {'p90 s':>7} {'p99 s':>7}"
    )
    print(header)
    for subset in args.subset or list(SUBSETS):
        results = []
        for record in load_records(subset, args.limit):
            result = check_record(
                record, options=options, max_states=args.max_states, timeout_s=args.timeout_s
            )
            results.append(result)
            if args.verbose and (
                result["status"] != "compiled"
                or result["under_constrained"]
                or result["over_constrained"]
            ):
                print(
                    json.dumps({k: v for k, v in result.items() if k != "relaxed"}), file=sys.stderr
                )
        summary = summarize(results)
        report["subsets"][subset] = {"summary": summary, "results": results}

        def fmt(x: float | None) -> str:
            return "-" if x is None else f"{x:.3f}"

        print(
            f"{subset:16} {summary['schemas']:5} {summary['compiled']:5} {summary['passed']:5} "
            f"{summary['over_constrained']:5} {summary['under_constrained']:5} "
            f"{summary['unsupported']:5} {summary['budget']:5} {summary['error']:5} "
            f"{fmt(summary['compile_s_p50']):>7} {fmt(summary['compile_s_p90']):>7} "
            f"{fmt(summary['compile_s_p99']):>7}",
            flush=True,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
