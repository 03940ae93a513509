"""The JSON Schema Test Suite (draft 2020-12), ratcheted against a baseline.

Every group is compiled in strict mode to a byte DFA and every instance is matched in
compact form. The outcome of each test must equal the baseline's: a regression fails,
and so does an improvement, which must be committed deliberately by regenerating the
baseline (`python -m tests.json_schema.suite --update`).
"""

from __future__ import annotations

import json

import pytest

from .suite import BASELINE, DOCUMENTED_RELAXATIONS, iter_groups, kind, run_group

pytestmark = pytest.mark.corpus

GROUPS = dict(iter_groups())
EXPECTED = json.loads(BASELINE.read_text())["groups"]


def test_suite_baseline_lists_every_group() -> None:
    assert sorted(EXPECTED) == sorted(GROUPS)


def test_suite_under_constrained_only_for_documented_relaxations() -> None:
    for cid, group in EXPECTED.items():
        for test in group["tests"]:
            if kind(test["expected"]) == "under-constrained":
                reason = test["expected"].split(": ", 1)[1]
                assert reason in DOCUMENTED_RELAXATIONS, (cid, test["description"])


@pytest.mark.parametrize("cid", sorted(GROUPS))
def test_suite_group_outcomes_match_baseline(cid: str) -> None:
    group = GROUPS[cid]
    result = run_group(group["schema"], group["tests"], cid)
    expected = EXPECTED[cid]["tests"]
    changed = []
    for test, want, got in zip(group["tests"], expected, result["tests"], strict=True):
        if kind(got) != kind(want["expected"]):
            direction = "improvement" if got == "pass" else "regression"
            changed.append(f"{direction}: {test['description']!r}: {want['expected']} -> {got}")
    assert not changed, (
        "outcomes differ from tests/json_schema/test_suite_baseline.json; if these are "
        "improvements, regenerate it with `python -m tests.json_schema.suite --update`:\n  "
        + "\n  ".join(changed)
    )
