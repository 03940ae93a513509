"""Turn a benchmark run into latest.json, latest.md and two PNG plots (compile-time CDF,
per-token latency CDF); the Markdown summary is also what `python -m bench` prints.

Pass/fail follows MaskBench: a case passes when it compiles, every valid instance is
accepted token by token with EOS allowed at the end, and every invalid one is rejected.
A case that rejects a valid instance is over-constrained, one that accepts an invalid
instance under-constrained (it can be both). Ratios are peer / fsmcompile, so > 1 means
fsmcompile is faster; each is the median over the cases both engines compiled.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.measure import describe_machine, summarize

FAILED = ("unsupported", "error", "timeout", "crash")


def verdict(result: dict[str, Any]) -> str:
    """pass | over | under | over+under | unsupported | error | timeout | crash."""
    if result["status"] != "ok":
        return str(result["status"])
    over, under = bool(result["rejected_valid"]), bool(result["accepted_invalid"])
    if over and under:
        return "over+under"
    return "over" if over else "under" if under else "pass"


def one_line(result: dict[str, Any]) -> str:
    """A progress line for stderr."""
    if result["status"] != "ok":
        return f"{result['status'].upper()}: {result.get('error', '')[:70]}"
    token = summarize(result["token_us"])
    tok = f"{token['avg']:8.1f} us/token" if token else ""
    return f"{verdict(result):10s} compile {result['compile_s'][0] * 1e3:9.1f} ms {tok}"


def _case_token_avg(result: dict[str, Any]) -> float | None:
    token = summarize(result.get("token_us", []))
    return token["avg"] if token else None


def _ratio(by_case: dict[str, dict[str, dict[str, Any]]], engine: str, key: str) -> float | None:
    """Median over cases both compiled of engine / fsmcompile for `key`."""
    ratios = []
    for results in by_case.values():
        mine, ours = results.get(engine), results.get("fsmcompile")
        if not mine or not ours or mine["status"] != "ok" or ours["status"] != "ok":
            continue
        if key == "compile":
            a, b = mine["compile_s"][0], ours["compile_s"][0]
        elif key == "ttfm":
            a, b = mine["ttfm_s"][0], ours["ttfm_s"][0]
        else:
            a, b = _case_token_avg(mine) or 0.0, _case_token_avg(ours) or 0.0
        if a > 0 and b > 0:
            ratios.append(a / b)
    return statistics.median(ratios) if ratios else None


def _fmt(value: float | None, digits: int = 1, suffix: str = "") -> str:
    if value is None:
        return "–"
    if abs(value) >= 1000:
        return f"{value:,.0f}{suffix}"
    return f"{value:.{digits}f}{suffix}"


def _ratio_fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.2g}×" if value < 10 else f"{value:.0f}×"


def summarize_suite(
    results: list[dict[str, Any]], by_case: dict[str, Any], engine: str
) -> dict[str, Any]:
    """One row of the summary table: counts, compile, first mask, per-token, memory."""
    verdicts = [verdict(r) for r in results]
    ok = [r for r in results if r["status"] == "ok"]
    tokens = [x for r in ok for x in r["token_us"]]
    best_tokens = [x for r in ok for x in r.get("token_us_best", [])]
    forced = [r["forced"] for r in ok if r.get("forced")]
    forced_tokens = sum(f["tokens"] for f in forced)
    return {
        "cases": len(results),
        "pass": verdicts.count("pass"),
        "over": sum(v.startswith("over") for v in verdicts),
        "under": sum(v.endswith("under") for v in verdicts),
        "unsupported": verdicts.count("unsupported"),
        "error": verdicts.count("error") + verdicts.count("crash"),
        "timeout": verdicts.count("timeout"),
        "compile_ms": summarize([r["compile_s"][0] * 1e3 for r in ok]),
        "compile_median_ms": summarize([statistics.median(r["compile_s"]) * 1e3 for r in ok]),
        "ttfm_ms": summarize([r["ttfm_s"][0] * 1e3 for r in ok]),
        "token_us": summarize(tokens),
        "token_best_us": summarize(best_tokens),
        "mask_us": summarize([x for r in ok for x in r["mask_us"]]),
        "mask_warm_us": summarize([x for r in ok for x in r.get("mask_warm_us", [])]),
        "cpu_instance_ms": summarize([x * 1e3 for r in ok for x in r.get("cpu_instance_s", [])]),
        "index_ms": summarize([r["index_s"] * 1e3 for r in ok if r.get("index_s") is not None]),
        "advance_us": summarize([x for r in ok for x in r["advance_us"]]),
        "forced_bytes_share": (
            sum(f["forced_bytes"] for f in forced) / forced_tokens
            if forced_tokens and all(f["forced_bytes"] >= 0 for f in forced)
            else None
        ),
        "forced_tokens_share": (
            sum(f["forced_tokens"] for f in forced) / forced_tokens
            if forced_tokens and all(f["forced_tokens"] >= 0 for f in forced)
            else None
        ),
        "rss_mb": summarize([r["rss_walk_bytes"] / 2**20 for r in ok]),
        "artifact_kb": summarize(
            [r["artifact_bytes"] / 1024 for r in ok if r.get("artifact_bytes") is not None]
        ),
        "ratio_compile": _ratio(by_case, engine, "compile"),
        "ratio_ttfm": _ratio(by_case, engine, "ttfm"),
        "ratio_token": _ratio(by_case, engine, "token"),
    }


def build_summary(run: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """suite → engine → row."""
    grouped: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    by_case: dict[str, dict[str, dict[str, dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    for r in run["results"]:
        grouped[r["suite"]][r["engine"]].append(r)
        by_case[r["suite"]][r["id"]][r["engine"]] = r
    return {
        suite: {
            engine: summarize_suite(results, by_case[suite], engine)
            for engine, results in engines.items()
        }
        for suite, engines in grouped.items()
    }


def _stat(summary: dict[str, float] | None, key: str, scale: float = 1.0) -> float | None:
    return None if summary is None else summary[key] * scale


def summary_table(summary: dict[str, dict[str, dict[str, Any]]]) -> str:
    head = (
        "| suite | engine | pass / cases | over | under | unsup. | err | t/o | compile p50 "
        "ms | ×fsm | 1st mask p50 ms | ×fsm | token avg µs | p50 | p90 | p99 | max | ×fsm "
        "| forced tok / bytes % | RSS Δ max MB | artifact p50 KB |"
    )
    lines = [head, "|" + "---|" * 21]
    for suite, engines in summary.items():
        for engine, row in engines.items():
            tok = row["token_us"]
            forced = " / ".join(
                _fmt(None if row[k] is None else row[k] * 100)
                for k in ("forced_tokens_share", "forced_bytes_share")
            )
            lines.append(
                f"| {suite} | {engine} | {row['pass']} / {row['cases']} | {row['over']} | "
                f"{row['under']} | {row['unsupported']} | {row['error']} | {row['timeout']} | "
                f"{_fmt(_stat(row['compile_ms'], 'p50'))} | {_ratio_fmt(row['ratio_compile'])} | "
                f"{_fmt(_stat(row['ttfm_ms'], 'p50'))} | {_ratio_fmt(row['ratio_ttfm'])} | "
                f"{_fmt(_stat(tok, 'avg'))} | {_fmt(_stat(tok, 'p50'))} | "
                f"{_fmt(_stat(tok, 'p90'))} | {_fmt(_stat(tok, 'p99'))} | "
                f"{_fmt(_stat(tok, 'max'))} | {_ratio_fmt(row['ratio_token'])} | "
                f"{forced} | "
                f"{_fmt(_stat(row['rss_mb'], 'max'))} | {_fmt(_stat(row['artifact_kb'], 'p50'))} |"
            )
    return "\n".join(lines)


def ttfm_table(summary: dict[str, dict[str, dict[str, Any]]]) -> str:
    """Time to first mask with no same-spec memo, mask µs first walk and warm, CPU per
    instance and time to the complete index, per suite and engine."""
    lines = [
        "| suite | engine | TTFM p50 ms | p99 | ×fsm | mask µs 1st walk | warm | CPU / "
        "instance p50 ms | p99 | complete index p50 ms |",
        "|" + "---|" * 10,
    ]
    for suite, engines in summary.items():
        for engine, row in engines.items():
            cpu = row["cpu_instance_ms"]
            index = _fmt(_stat(row["index_ms"], "p50")) if row["index_ms"] else "–"
            lines.append(
                f"| {suite} | {engine} | {_fmt(_stat(row['ttfm_ms'], 'p50'))} | "
                f"{_fmt(_stat(row['ttfm_ms'], 'p99'))} | {_ratio_fmt(row['ratio_ttfm'])} | "
                f"{_fmt(_stat(row['mask_us'], 'avg'))} | "
                f"{_fmt(_stat(row['mask_warm_us'], 'avg'))} | "
                f"{_fmt(_stat(cpu, 'p50'))} | {_fmt(_stat(cpu, 'p99'))} | {index} |"
            )
    return "\n".join(lines)


def vocab_table(run: dict[str, Any]) -> str:
    """Vocabulary preparation per engine: median and best over the worker starts."""
    lines = [
        "| engine | version | vocabulary prep median s | best s | parts (median s) | "
        "RSS after prep MB | peak RSS MB | JSON whitespace default |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for engine, info in run["engines"].items():
        samples = info.get("vocab", [])
        if not samples:
            lines.append(f"| {engine} | – | failed: {info.get('fatal', '?')[:80]} | | | | | |")
            continue
        totals = [s["total_s"] for s in samples]
        parts = ", ".join(
            f"{k[:-2]} {statistics.median(s[k] for s in samples):.3f}"
            for k in samples[0]
            if k != "total_s"
        )
        lines.append(
            f"| {engine} | {info.get('version')} | {statistics.median(totals):.3f} | "
            f"{min(totals):.3f} | {parts} | {info.get('rss_vocab_bytes', 0) / 2**20:.0f} | "
            f"{info.get('peak_rss_bytes', 0) / 2**20:.0f} | {info.get('json_whitespace', '')} |"
        )
    extras = run.get("extras") or {}
    if extras:
        cold, warm = extras["vocab_cold_s"], extras["vocab_warm_s"]
        lines.append(
            f"\nfsmcompile vocabulary load + trie, {run['tokenizer']['label']}: cold (no disk "
            f"cache) best {cold['best']:.3f} s, median {cold['median']:.3f} s; warm (decoded-"
            f"table cache) best {warm['best']:.3f} s, median {warm['median']:.3f} s. The "
            "prep column above is the warm path (the default cache is filled after the first run)."
        )
    return "\n".join(lines)


def detail_tables(run: dict[str, Any], engines: list[str]) -> str:
    """Per case: verdict, first compile ms and average µs per token, per engine."""
    by_suite: dict[str, dict[str, dict[str, dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    for r in run["results"]:
        by_suite[r["suite"]][r["id"]][r["engine"]] = r
    out = []
    for suite, cases in by_suite.items():
        out.append(f"\n#### {suite}\n")
        out.append("| case | " + " | ".join(engines) + " |")
        out.append("|---|" + "---|" * len(engines))
        for case_id, results in cases.items():
            cells = []
            for engine in engines:
                r = results.get(engine)
                if r is None:
                    cells.append("–")
                elif r["status"] != "ok":
                    cells.append(r["status"])
                else:
                    cells.append(
                        f"{verdict(r)} {r['compile_s'][0] * 1e3:.1f} ms / "
                        f"{_fmt(_case_token_avg(r))} µs"
                    )
            out.append(f"| {case_id} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def fsmcompile_figures(run: dict[str, Any]) -> str:
    """The issue-2 numbers: regex suite compile times, matcher µs per token."""
    ours = [r for r in run["results"] if r["engine"] == "fsmcompile"]
    regex = [r for r in ours if r["suite"] == "regex"]
    lines = []
    if regex:
        lines += [
            "| regex case | compile first ms | compile median ms | 1st mask first ms "
            "| artifact KB |",
            "|---|---|---|---|---|",
        ]
        firsts = []
        for r in regex:
            if r["status"] != "ok":
                lines.append(f"| {r['id']} | {r['status']} | | | |")
                continue
            firsts.append(r["compile_s"][0] * 1e3)
            art = r.get("artifact_bytes")
            lines.append(
                f"| {r['id']} | {firsts[-1]:.1f} | "
                f"{statistics.median(r['compile_s']) * 1e3:.1f} | "
                f"{r['ttfm_s'][0] * 1e3:.1f} | "
                f"{_fmt(None if art is None else art / 1024)} |"
            )
        if firsts:
            lines.append(f"| **median of the suite** | **{statistics.median(firsts):.1f}** | | | |")
    lines += [
        "",
        "| suite | fill_bitmask avg / p50 µs | advance avg / p50 µs | "
        "step (both) avg / p50 / p99 µs |",
        "|---|---|---|---|",
    ]
    for suite in dict.fromkeys(r["suite"] for r in ours):
        ok = [r for r in ours if r["suite"] == suite and r["status"] == "ok"]
        mask = summarize([x for r in ok for x in r["mask_us"]])
        adv = summarize([x for r in ok for x in r["advance_us"]])
        step = summarize([x for r in ok for x in r["token_us"]])
        if mask and adv and step:
            lines.append(
                f"| {suite} | {mask['avg']:.2f} / {mask['p50']:.2f} | "
                f"{adv['avg']:.2f} / {adv['p50']:.2f} | {step['avg']:.2f} / "
                f"{step['p50']:.2f} / {step['p99']:.2f} |"
            )
    return "\n".join(lines)


def correctness_notes(run: dict[str, Any]) -> str:
    """Every over/under-constrained case, errors, and fsmcompile's rejected valid texts."""
    lines = []
    for r in run["results"]:
        v = verdict(r)
        if v == "pass":
            continue
        detail = ""
        if r["status"] == "ok":
            parts = []
            if r["rejected_valid"]:
                parts.append(
                    "rejects valid #"
                    + ", #".join(
                        f"{x['index']} (at token {x['at_token']})" for x in r["rejected_valid"]
                    )
                )
            if r["accepted_invalid"]:
                parts.append("accepts invalid #" + ", #".join(map(str, r["accepted_invalid"])))
            detail = "; ".join(parts)
        else:
            detail = r.get("error", "")[:160].replace("|", "\\|").replace("\n", " ")
        if r.get("disagreements"):
            detail += f"; {r['disagreements']} mask/advance disagreements"
        lines.append(f"- **{r['engine']}** `{r['id']}`: {v}. {detail}")
        if r["engine"] == "fsmcompile" and r["status"] == "ok":
            case = run["cases"].get(r["id"], {})
            for x in r["rejected_valid"]:
                text = case.get("valid", [""] * (x["index"] + 1))[x["index"]]
                lines.append(f"  - valid text #{x['index']}: `{text[:400]}`")
            for i in r["accepted_invalid"]:
                text = case.get("invalid", [""] * (i + 1))[i]
                lines.append(f"  - invalid text #{i}: `{text[:400]}`")
    return "\n".join(lines) if lines else "All cases pass for every engine."


def plot(run: dict[str, Any], out: Path) -> list[Path]:
    """compile_cdf.png and token_latency_cdf.png (log x); failures never reach the top."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    engines = list(run["engines"])
    compiled: dict[str, set[str]] = defaultdict(set)
    for r in run["results"]:
        if r["status"] == "ok":
            compiled[r["engine"]].add(r["id"])
    # Per-token latencies only over cases every engine compiled, so no engine's curve is
    # shifted by cases the others could not run (outlines has no CFG, time-outs, ...).
    common = set.intersection(*(compiled[e] for e in engines)) if engines else set()
    paths = []
    for name, title, xlabel, values_of in (
        (
            "compile_cdf.png",
            "Compile time (first compile), all cases; failures never count",
            "ms (log)",
            lambda rs: [r["compile_s"][0] * 1e3 for r in rs if r["status"] == "ok"],
        ),
        (
            "token_latency_cdf.png",
            f"Mask + advance per token, valid instances of the {len(common)} cases all compiled",
            "µs per token (log)",
            lambda rs: [x for r in rs if r["id"] in common for x in r["token_us"]],
        ),
    ):
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
        for engine in engines:
            results = [r for r in run["results"] if r["engine"] == engine]
            values = sorted(v for v in values_of(results) if v > 0)
            if not values:
                continue
            total = len(results) if name.startswith("compile") else len(values)
            ys = [(i + 1) / total for i in range(len(values))]
            ax.step(values, ys, where="post", label=f"{engine} ({len(values)})")
        ax.set_xscale("log")
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("fraction of cases" if name.startswith("compile") else "fraction of tokens")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        path = out / name
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    return paths


def render_markdown(run: dict[str, Any], summary: dict[str, Any]) -> str:
    engines = list(run["engines"])
    tok = run["tokenizer"]
    notes = [
        f"Tokenizer {tok['label']} ({tok['vocab_size']} ids, EOS {tok['eos_token_id']}); "
        f"per-case time-out {run['timeout_s']:g} s (a failure); compile and 1st mask are "
        "each case's first compile, with fsmcompile's stage memos emptied before every "
        f"compile (no same-spec memo); up to {run['reps']} repetitions give the median in "
        "latest.json; "
        f"{'quick run' if run['quick'] else 'full run'} in "
        f"{run.get('wall_s', 0):.0f} s.",
        "Instances: JSON compact (`,`/`:`, UTF-8), accepted by every engine's default "
        "whitespace; each token: fill the bitmask, test the token's bit, advance; EOS at the "
        "end. Per-token times are from the first walk of each instance (fresh matcher, as "
        "MaskBench); `token_best_us` in latest.json has the best of the repetitions.",
        "Ratios: peer / fsmcompile, median over the cases both compiled (> 1: fsmcompile "
        "faster). `forced tok / bytes %`: share of valid-instance tokens jump-forward would "
        "have produced: `tok` by the engine's token API (fsmcompile "
        "`Matcher.forced_token_ids`, llguidance `compute_ff_tokens`), `bytes` where the token "
        "lies inside the forced text (fsmcompile `forced_bytes`, llguidance "
        "`compute_ff_bytes`, XGrammar `find_jump_forward_string`); – where not offered.",
    ]
    if run.get("skipped_engines"):
        notes.append("Not installed, skipped: " + ", ".join(run["skipped_engines"]) + ".")
    return (
        "\n\n".join(
            [
                "# fsmcompile side by side with XGrammar, outlines-core and llguidance",
                describe_machine(run["machine"]),
                "\n".join(f"- {n}" for n in notes),
                "## Summary\n\n" + summary_table(summary),
                "## Time to first mask\n\n" + ttfm_table(summary),
                "## Vocabulary preparation\n\n" + vocab_table(run),
                "## fsmcompile figures (issue 2)\n\n" + fsmcompile_figures(run),
                "## Correctness\n\n" + correctness_notes(run),
                "## Per case (verdict, first compile, average µs per token)\n"
                + detail_tables(run, engines),
                "![compile-time CDF](compile_cdf.png)\n\n"
                "![per-token latency CDF](token_latency_cdf.png)",
            ]
        )
        + "\n"
    )


def write_all(run: dict[str, Any], out: Path) -> str:
    """Write latest.json, latest.md and the PNGs; return the Markdown for stdout (without
    the per-case tables, which only go to latest.md)."""
    summary = build_summary(run)
    markdown = render_markdown(run, summary)
    printed = markdown.split("## Per case")[0]
    (out / "latest.md").write_text(markdown, encoding="utf-8")
    doc = {**run, "summary": summary}
    (out / "latest.json").write_text(
        json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8"
    )
    paths = plot(run, out)
    written = ", ".join(str(p) for p in [out / "latest.md", out / "latest.json", *paths])
    return printed + f"wrote {written}\n"
