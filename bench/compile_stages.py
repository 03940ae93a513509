"""Where a JSON Schema compile spends its time, stage by stage (`python -m bench.compile_stages`).

The coverage benchmark says how long compiles take; this says where. It compiles the same
JSONSchemaBench records in this process (vocabulary loaded and warmed up first, as the
coverage benchmark's workers inherit it) with the named stage functions wrapped in wall
clocks, and prints per schema its compile time, route (DFA or grammar) and slowest
stages, then per route the share of compile time each stage took over the schemas of the
median band: the middle half by compile time, the ones a p50 target is about.

Only the listed stages are timed, so a schema's stages need not sum to its compile time;
what is left is reported as `other`. The indented ones (`NESTED`) run inside others and
are not part of that sum: the writer and the lexer build terminal automata. Numbers are
for reading, never asserted by tests. Stage functions are found by name: a renamed one
stops the run with an error naming it, so this list is kept in step with the code.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from bench.coverage_corpus import SUBSETS, load_records, resolve_tokenizer  # noqa: E402

STAGES: tuple[tuple[str, str, str], ...] = (
    ("lower", "fsmcompile.compile_stages", "lower_spec"),
    ("writer", "fsmcompile.grammar.from_rules", "RuleWriter.__init__"),
    ("lalr", "fsmcompile.grammar.from_rules", "lalr_grammar"),
    ("lexing_check", "fsmcompile.grammar.from_rules", "check_contexts"),
    ("dfa_index", "fsmcompile.compile_stages", "build_token_index"),
    ("lexer", "fsmcompile.index.cfg.origins", "build_lexer_automaton"),
    ("shapes", "fsmcompile.index.cfg.origins", "lexer_shapes"),
    ("exit_sets", "fsmcompile.index.cfg.origins", "exit_sets"),
    ("regions", "fsmcompile.index.cfg.origins", "RegionServer.__init__"),
    ("levels", "fsmcompile.index.cfg.origins", "walk_levels"),
    ("walk", "fsmcompile.index.cfg.origins", "walk_grammar_tokens"),
    ("groups", "fsmcompile.index.cfg.origins", "_groups"),
    ("kill_masks", "fsmcompile.index.cfg.build", "_kill_masks"),
)
"""(label, module, attribute path) of each timed stage, as the compile looks it up."""
NESTED: tuple[tuple[str, str, str], ...] = (("automata", "fsmcompile.automaton", "build_dfa"),)
"""Stages timed inside others: byte automata, built for a DFA route's whole schema and, in
the grammar route, for each terminal (in `writer`) and counted lexeme (in `lexer`)."""
GRAMMAR_MARK = ("fsmcompile.index.cfg.build", "build_grammar_index")


def _wrap(owner: Any, name: str, label: str, spent: dict[str, float]) -> None:
    """Replace `owner.name` by the same callable charging its wall time to `label`."""
    inner: Callable[..., Any] = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - started

    setattr(owner, name, timed)


def stage_owner(label: str, module_name: str, path: str) -> tuple[Any, str]:
    """(object holding the stage's function, its attribute name), as the compile looks
    the function up; SystemExit naming the stage when the code no longer has it."""
    owner: Any = importlib.import_module(module_name)
    *parents, name = path.split(".")
    for part in parents:
        owner = getattr(owner, part, None)
    if owner is None or not hasattr(owner, name):
        raise SystemExit(f"stage {label!r}: {module_name}.{path} no longer exists")
    return owner, name


ALL_STAGES = (*STAGES, *NESTED, ("grammar", *GRAMMAR_MARK))


def install_timers(spent: dict[str, float]) -> None:
    """Wrap every stage of `STAGES` (and the grammar-route mark) to add into `spent`."""
    for label, module_name, path in ALL_STAGES:
        _wrap(*stage_owner(label, module_name, path), label, spent)


def band_shares(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per stage, its share of the summed compile time of `rows` (plus `other`)."""
    total = sum(r["compile_s"] for r in rows)
    if total <= 0:
        return {}
    summed: dict[str, float] = {}
    for r in rows:
        for label, seconds in r["stages"].items():
            summed[label] = summed.get(label, 0.0) + seconds
    shares = {label: summed[label] / total for label, _, _ in STAGES if summed.get(label)}
    shares["other"] = max(0.0, 1.0 - sum(shares.values()))
    for label, _, _ in NESTED:
        if summed.get(label):
            shares[label] = summed[label] / total
    return shares


def median_band(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The middle half of `rows` by compile time (all of them when fewer than four)."""
    ordered = sorted(rows, key=lambda r: r["compile_s"])
    if len(ordered) < 4:
        return ordered
    return ordered[len(ordered) // 4 : len(ordered) - len(ordered) // 4]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--subsets", default=None, help="comma-separated; default: all")
    parser.add_argument("--id", action="append", dest="ids", help="only these ids (repeatable)")
    parser.add_argument("--limit", type=int, default=10, help="first N schemas per subset")
    parser.add_argument("--sample", type=int, default=None, metavar="N", help="N drawn at random")
    parser.add_argument("--seed", type=int, default=0, help="seed of --sample")
    parser.add_argument("--tokenizer", default="llama3", help="llama3, gpt2 or a tokenizer.json")
    parser.add_argument("--timeout-s", type=float, default=10.0, help="per compile")
    parser.add_argument("--max-states", type=int, default=100_000)
    args = parser.parse_args(argv)

    from fsmcompile import Vocabulary
    from fsmcompile.compiler import compile_spec
    from fsmcompile.errors import BudgetExceededError, SpecError

    subsets = [s.strip() for s in args.subsets.split(",")] if args.subsets else list(SUBSETS)
    unknown = [s for s in subsets if s not in SUBSETS]
    if unknown:
        parser.error(f"unknown subsets {unknown}; expected some of {', '.join(SUBSETS)}")
    logging.disable(logging.WARNING)  # fallback warnings would bury the table
    _, path = resolve_tokenizer(args.tokenizer)
    vocab = Vocabulary.from_file(path)
    for warm in ({"type": "object", "properties": {"a": {"type": "string"}}}, {}):
        compile_spec("json", warm, vocab, cache=False)
    spent: dict[str, float] = {}
    install_timers(spent)
    ids = set(args.ids) if args.ids else None
    rows: list[dict[str, Any]] = []
    for subset in subsets:
        limit = args.sample or args.limit
        seed = args.seed if args.sample else None
        for record in load_records(subset, limit, ids, sample_seed=seed):
            spent.clear()
            started = time.perf_counter()
            try:
                compile_spec(
                    "json",
                    record["schema"],
                    vocab,
                    cache=False,
                    timeout_s=args.timeout_s,
                    max_states=args.max_states,
                )
            except (SpecError, BudgetExceededError) as exc:
                print(f"{record['id']:48s} {type(exc).__name__}", flush=True)
                continue
            seconds = time.perf_counter() - started
            route = "grammar" if spent.get("grammar") else "dfa"
            stages = {k: v for k, v in spent.items() if k != "grammar"}
            rows.append(
                {"id": record["id"], "compile_s": seconds, "route": route, "stages": stages}
            )
            slowest = sorted(stages.items(), key=lambda kv: -kv[1])[:5]
            print(
                f"{record['id']:48s} {seconds * 1e3:8.1f} ms {route:7s} "
                + " ".join(f"{k}={v * 1e3:.1f}" for k, v in slowest),
                flush=True,
            )
    if not rows:
        return 1
    times = sorted(r["compile_s"] for r in rows)
    band = median_band(rows)
    print(
        f"\n{len(rows)} compiled, p50 {statistics.median(times) * 1e3:.1f} ms; median band "
        f"{band[0]['compile_s'] * 1e3:.0f}-{band[-1]['compile_s'] * 1e3:.0f} ms "
        f"({len(band)} schemas: "
        + ", ".join(f"{n} {route}" for route, n in Counter(r["route"] for r in band).items())
        + ")"
    )
    for route in ("grammar", "dfa"):
        picked = [r for r in band if r["route"] == route]
        if not picked:
            continue
        shares = band_shares(picked)
        median_ms = statistics.median(r["compile_s"] for r in picked) * 1e3
        print(f"  {route} route, median {median_ms:.0f} ms, share of compile time:")
        nested = {label for label, _, _ in NESTED}
        for label, share in sorted(shares.items(), key=lambda kv: (kv[0] in nested, -kv[1])):
            indent = "      " if label in nested else "    "
            print(f"{indent}{label:{18 - len(indent)}s} {share * 100:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
