"""JSONSchemaBench smoke check: the first schemas of two subsets, at the DFA level.

Among the schemas that compile, no invalid labelled instance may be accepted (zero
under-constrained). Over-constraint and unsupported schemas are allowed here; the full
numbers come from `python -m bench.jsonschemabench_coverage`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsmcompile.errors import BudgetExceededError, SpecError
from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir

from .language import lowering_language

pytestmark = pytest.mark.corpus

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpora" / "jsonschemabench"
FIRST = 50


def _records(subset: str) -> list[dict]:
    path = CORPUS / subset / "schemas.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not present")
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for _, line in zip(range(FIRST), handle, strict=False)]


@pytest.mark.parametrize("subset", ["Glaiveai2K", "Github_easy"])
def test_jsonschemabench_first_schemas_never_accept_invalid_instances(subset: str) -> None:
    under: list[str] = []
    compiled = 0
    for record in _records(subset):
        try:
            lowering = schema_to_ir(record["schema"], options=JsonOptions())
            matches = lowering_language(lowering, max_states=50_000)
        except (SpecError, BudgetExceededError):
            continue
        compiled += 1
        for test in record["tests"]:
            text = json.dumps(test["data"], separators=(",", ":"), ensure_ascii=False)
            if not test["valid"] and matches(text):
                under.append(f"{record['id']}: {test['description']}")
    assert compiled >= FIRST * 0.8, compiled
    assert not under, under
