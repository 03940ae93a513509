"""The coverage report's summary keeps first-walk and warm mask times apart."""

from __future__ import annotations

import pytest

from bench.coverage_report import summarize


def _compiled(mask_ns: list[int], warm_ns: list[int]) -> dict:
    return {
        "outcome": "passed",
        "compile_s": 0.1,
        "over": 0,
        "under": 0,
        "tests": 1,
        "mask_ns": mask_ns,
        "mask_warm_ns": warm_ns,
    }


def test_first_walk_and_warm_mask_times_are_averaged_per_token_apart() -> None:
    summary = summarize([_compiled([10_000, 30_000], [1_000]), _compiled([20_000], [3_000])])
    assert summary["mask_tokens"] == 3
    assert summary["mask_us_avg"] == pytest.approx(20.0)
    assert summary["mask_us_warm_avg"] == pytest.approx(2.0)
    assert summary["mask_us_warm_p99"] <= 3.0 < summary["mask_us_p99"]
