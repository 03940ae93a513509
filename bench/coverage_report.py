"""The coverage benchmark's summaries and report: counts and percentiles per subset, the
size-weighted pass rate, the terminal table and the Markdown beside the JSON."""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from bench.coverage_engines import ttfm_ratio
from bench.measure import describe_machine, percentile


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
        "ttfm_ms_p90": percentile(ttfm, 90) if ttfm else None,
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
    ("ttfm_ms_p90", "TTFM p90", 8),
    ("ttfm_ms_p99", "TTFM p99", 8),
    ("cpu_ms_p50", "CPU/inst", 8),
    ("index_ms_p50", "index ms", 8),
)


def cell(key: str, value: Any) -> str:
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
        cells += [f"{cell(k, summary[k]):>{w}}" for k, _, w in COLUMNS[1:]]
        lines.append(" ".join(cells))
    return lines


def failure_lines(results: list[dict[str, Any]]) -> list[str]:
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
        "| TTFM p50 ms | TTFM p90 ms | TTFM p99 ms | TTFM ×fsm | mask µs | warm µs "
        "| CPU/inst p50 ms | index p50 ms |",
        "| --- |" + " ---: |" * 15,
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
            *(cell(k, t.get(k)) for k in ("ttfm_ms_p50", "ttfm_ms_p90", "ttfm_ms_p99")),
            f"{ratio:.2f}" if ratio else "-",
            *(cell(k, t[k]) for k in ("mask_us_avg", "mask_us_warm_avg", "cpu_ms_p50")),
            cell("index_ms", t["index_ms_p50"]),
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
            cells = [sub] + [cell(k, summary[k]) for k, _, _ in COLUMNS[1:]]
            out.append("| " + " | ".join(cells) + " |")
        if engine.get("weighted_pass"):
            out += ["", weighted_line(engine["weighted_pass"])]
        keywords = engine.get("total", {}).get("top_unsupported")
        if keywords:
            out += [
                "",
                "Unsupported keywords (schemas): " + ", ".join(f"{k} {n}" for k, n in keywords),
            ]
        failing = failure_lines([r for s in engine["subsets"].values() for r in s["results"]])
        if failing:
            out += ["", f"### {name}: schemas that did not pass", "", *failing]
    return "\n".join(out) + "\n"


def weighted_line(weighted: dict[str, float]) -> str:
    return (
        f"passed, weighted by upstream subset size ({weighted['upstream_schemas']:.0f} "
        f"schemas): {100 * weighted['rate']:.1f}% ± {100 * weighted['half_width']:.1f}% (95%)"
    )


def write_report(report: dict[str, Any], json_path: Path, md_path: Path) -> None:
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
