"""The coverage report's weighted pass rate: subsets count by their upstream size."""

from __future__ import annotations

import pytest

from bench.coverage_report import weighted_pass_rate


def _summary(passed: int, schemas: int) -> dict[str, int]:
    return {"passed": passed, "schemas": schemas}


def test_rates_are_weighted_by_upstream_size() -> None:
    summaries = {"big": _summary(9, 10), "small": _summary(0, 10)}
    weighted = weighted_pass_rate(summaries, {"big": 900, "small": 100})
    assert weighted is not None
    assert weighted["rate"] == pytest.approx(0.9 * 0.9 + 0.1 * 0.0)
    assert weighted["upstream_schemas"] == 1000


def test_interval_narrows_with_the_sample_and_vanishes_for_a_census() -> None:
    sizes = {"a": 1000}
    few = weighted_pass_rate({"a": _summary(8, 10)}, sizes)
    many = weighted_pass_rate({"a": _summary(80, 100)}, sizes)
    census = weighted_pass_rate({"a": _summary(800, 1000)}, sizes)
    assert few and many and census
    assert few["half_width"] > many["half_width"] > census["half_width"] == 0.0
    # A subset that passed every sampled schema is still uncertain.
    perfect = weighted_pass_rate({"a": _summary(10, 10)}, sizes)
    assert perfect and perfect["half_width"] > 0


def test_subsets_not_run_do_not_count() -> None:
    assert weighted_pass_rate({"a": _summary(0, 0)}, {"a": 10}) is None
