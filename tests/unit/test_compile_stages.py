"""The stage-timing benchmark finds every stage it times, and splits time as it says."""

from __future__ import annotations

import pytest

from bench.compile_stages import ALL_STAGES, band_shares, median_band, stage_owner


@pytest.mark.parametrize("stage", ALL_STAGES, ids=[s[0] for s in ALL_STAGES])
def test_every_timed_stage_still_exists(stage: tuple[str, str, str]) -> None:
    """A renamed or moved stage function would silently drop out of the split."""
    owner, name = stage_owner(*stage)
    assert callable(getattr(owner, name))


def test_a_missing_stage_is_named() -> None:
    with pytest.raises(SystemExit, match="'gone'"):
        stage_owner("gone", "fsmcompile.index.cfg.build", "no_such_function")


def test_band_is_the_middle_half_and_shares_leave_nested_stages_out_of_other() -> None:
    rows = [{"compile_s": float(t), "stages": {"walk": t / 2, "automata": t / 4}} for t in range(8)]
    band = median_band(rows)
    assert [r["compile_s"] for r in band] == [2.0, 3.0, 4.0, 5.0]
    shares = band_shares(band)
    assert shares["walk"] == pytest.approx(0.5)
    assert shares["other"] == pytest.approx(0.5)  # automata runs inside another stage
    assert shares["automata"] == pytest.approx(0.25)
    assert median_band(rows[:3]) == rows[:3]
