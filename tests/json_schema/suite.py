"""JSON Schema Test Suite harness: compile each group, match each instance, classify.

Shared by the ratcheting test (`test_suite_corpus.py`) and the baseline updater
(`python -m tests.json_schema.suite --update`). Outcomes per test:

* `pass`: valid accepted, or invalid rejected;
* `unsupported: <keywords>`: strict compile raised UnsupportedFeatureError;
* `over-constrained: <reason>`: a valid instance is rejected (sound, documented);
* `under-constrained: <relaxation>`: an invalid instance is accepted; only allowed for
  the documented relaxations in `DOCUMENTED_RELAXATIONS`;
* `error: <class>`: the compile failed otherwise (SchemaError, budget).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fsmcompile.errors import BudgetExceededError, SpecError, UnsupportedFeatureError
from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir

from .language import lowering_language

SUITE = Path(__file__).resolve().parents[3] / "shared" / "corpora" / "json-schema-test-suite"
if not SUITE.exists():  # the checkout may sit elsewhere; fall back to the shared path
    SUITE = Path("/work/shared/corpora/json-schema-test-suite")
BASELINE = Path(__file__).with_name("test_suite_baseline.json")

FILES = sorted(
    [p for p in (SUITE / "draft2020-12").glob("*.json") if p.name != "format.json"]
    + list((SUITE / "draft2020-12" / "optional").glob("*.json"))
    + list((SUITE / "draft2020-12" / "optional" / "format").glob("*.json"))
)
"""format.json is skipped: it expects formats *not* asserted; we assert them."""

DOCUMENTED_RELAXATIONS = {
    "hostname length": "a host name's 253-character total is not counted",
    "duplicate keys": "duplicate additional keys are not prevented",
}
MAX_STATES = 100_000
TIMEOUT_S = 10.0


def remote_schemas() -> dict[str, Any]:
    """http://localhost:1234/<path> → remotes/<path>; the 2020-12 remotes live in v1/."""
    remotes = SUITE / "remotes"
    out: dict[str, Any] = {}
    for path in sorted(remotes.rglob("*.json")):
        rel = path.relative_to(remotes).as_posix()
        doc = json.loads(path.read_text())
        out[f"http://localhost:1234/{rel}"] = doc
        if rel.startswith("v1/"):
            out[f"http://localhost:1234/draft2020-12/{rel[3:]}"] = doc
    return out


def case_id(path: Path, index: int) -> str:
    return f"{path.relative_to(SUITE / 'draft2020-12').as_posix()}#{index}"


def iter_groups() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in FILES:
        for index, group in enumerate(json.loads(path.read_text())):
            yield case_id(path, index), group


def compact(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def _key_order(schema: Any) -> list[str]:
    """Every property name in document order (a stand-in for each object's schema order)."""
    order: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "properties" and isinstance(value, dict):
                    order.extend(k for k in value if k not in order)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(schema)
    return order


def reorder(data: Any, order: list[str]) -> Any:
    """`data` with object keys sorted into schema order (unknown keys last)."""
    if isinstance(data, dict):
        rank = {k: i for i, k in enumerate(order)}
        keys = sorted(data, key=lambda k: (rank.get(k, len(rank)), list(data).index(k)))
        return {k: reorder(data[k], order) for k in keys}
    if isinstance(data, list):
        return [reorder(x, order) for x in data]
    return data


def key_orders(data: Any, limit: int = 200) -> Iterator[Any]:
    """`data` with its object keys permuted (every combination, up to `limit`)."""
    import itertools

    def variants(node: Any) -> list[Any]:
        if isinstance(node, dict):
            keys = list(node)
            inner = [variants(node[k]) for k in keys]
            out: list[Any] = []
            for perm in itertools.permutations(range(len(keys))):
                for values in itertools.product(*(inner[i] for i in perm)):
                    out.append({keys[i]: v for i, v in zip(perm, values, strict=True)})
                    if len(out) >= limit:
                        return out
            return out
        if isinstance(node, list):
            out = [[]]
            for item in node:
                out = [prefix + [v] for prefix in out for v in variants(item)][:limit]
            return out
        return [node]

    yield from variants(data)


RULES: list[tuple[str, str, str]] = [
    ("optional/format/time.json", "over", "leap second with a non-zero offset (subset)"),
    ("optional/format/date-time.json", "over", "leap second with a non-zero offset (subset)"),
    ("optional/format/hostname.json#1", "over", "A-labels (xn--) refused (subset)"),
    ("optional/format/idn-", "over", "IDN formats accept their ASCII subset"),
    ("optional/format/hostname.json", "under", "hostname length"),
    ("optional/format/idn-hostname.json", "under", "hostname length"),
    ("vocabulary.json", "over", "custom meta-schema vocabularies are not read"),
]
"""(case prefix, direction, reason) for mismatches that are known and documented."""


def _has_integral_float(data: Any) -> bool:
    if isinstance(data, float):
        return data.is_integer()
    if isinstance(data, dict):
        return any(_has_integral_float(v) for v in data.values())
    if isinstance(data, list):
        return any(_has_integral_float(v) for v in data)
    return False


def run_group(schema: Any, tests: list[dict[str, Any]], cid: str = "") -> dict[str, Any]:
    """Compile one group's schema and classify each of its tests."""
    options = JsonOptions(remote_schemas=remote_schemas_cached())
    started = time.perf_counter()
    try:
        lowering = schema_to_ir(schema, options=options)
        matches = lowering_language(lowering, max_states=MAX_STATES, timeout_s=TIMEOUT_S)
    except UnsupportedFeatureError as exc:
        keywords = sorted({k for _, k in exc.features}) or [exc.keyword or "?"]
        status = f"unsupported: {', '.join(keywords)}"
        return {"status": status, "tests": [status for _ in tests]}
    except BudgetExceededError as exc:
        status = f"error: budget ({exc.limit})"
        return {"status": status, "tests": [status for _ in tests]}
    except ModuleNotFoundError as exc:
        status = f"error: {exc}"
        return {"status": status, "tests": [status for _ in tests]}
    except SpecError as exc:
        if "accepts no JSON value" not in str(exc) and "matches no string" not in str(exc):
            status = f"error: {str(exc).splitlines()[0]}"
            return {"status": status, "tests": [status for _ in tests]}
        # An empty language: everything is rejected.
        status = f"empty: {type(exc).__name__}"
        outcomes = ["over-constrained: empty language" if t["valid"] else "pass" for t in tests]
        return {"status": status, "tests": outcomes}
    elapsed = time.perf_counter() - started
    order = _key_order(schema)
    outcomes = []
    for test in tests:
        text = compact(test["data"])
        accepted = matches(text)
        direction = "over" if test["valid"] else "under"
        rule = next((r for p, d, r in RULES if cid.startswith(p) and d == direction), None)
        if accepted == test["valid"]:
            outcomes.append("pass")
        elif rule is not None:
            outcomes.append(f"{direction}-constrained: {rule}")
        elif test["valid"]:
            if matches(compact(reorder(test["data"], order))) or any(
                matches(compact(v)) for v in key_orders(test["data"])
            ):
                outcomes.append("over-constrained: key order")
            elif _has_integral_float(test["data"]):
                outcomes.append("over-constrained: integer written as 1.0")
            else:
                outcomes.append("over-constrained: unclassified")
        else:
            outcomes.append("under-constrained: unclassified")
    return {"status": "compiled", "seconds": round(elapsed, 3), "tests": outcomes}


_REMOTES: dict[str, Any] | None = None


def remote_schemas_cached() -> dict[str, Any]:
    global _REMOTES
    if _REMOTES is None:
        _REMOTES = remote_schemas()
    return _REMOTES


def run_all() -> dict[str, Any]:
    """Every group's result, keyed by `file#index`, in the baseline's shape."""
    results: dict[str, Any] = {}
    for cid, group in iter_groups():
        result = run_group(group["schema"], group["tests"], cid)
        results[cid] = {
            "description": group["description"],
            "status": result["status"],
            "tests": [
                {"description": t["description"], "expected": outcome}
                for t, outcome in zip(group["tests"], result["tests"], strict=True)
            ],
        }
    return results


def kind(outcome: str) -> str:
    """The outcome without its reason: pass, unsupported, over-constrained, ..."""
    return outcome.split(":", 1)[0]


def summarize(results: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {"groups": len(results), "groups_all_pass": 0, "tests": 0}
    for group in results.values():
        outcomes = [t["expected"] for t in group["tests"]]
        counts["tests"] += len(outcomes)
        if all(o == "pass" for o in outcomes):
            counts["groups_all_pass"] += 1
        counts["groups_compiled"] = counts.get("groups_compiled", 0) + (
            group["status"] == "compiled"
        )
        for outcome in outcomes:
            counts[kind(outcome)] = counts.get(kind(outcome), 0) + 1
    return counts


def main(argv: list[str]) -> int:
    started = time.perf_counter()
    results = run_all()
    print(json.dumps(summarize(results), indent=1), file=sys.stderr)
    print(f"{time.perf_counter() - started:.1f}s", file=sys.stderr)
    if "--update" in argv:
        document = {
            "about": "JSON Schema Test Suite outcomes (DFA, or byte-level grammar), compact "
            "whitespace, "
            "strict mode; regenerate with `python -m tests.json_schema.suite --update`",
            "summary": summarize(results),
            "groups": results,
        }
        BASELINE.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    if "--show" in argv:
        for cid, group in results.items():
            for test in group["tests"]:
                if test["expected"] != "pass":
                    print(
                        f"{cid} [{group['description']}] {test['description']}: {test['expected']}"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
