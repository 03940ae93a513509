"""The library warmer: specs in, every tier filled, outcomes as plain data."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from support import DATA

from fsmcompile import Vocabulary
from fsmcompile.errors import SpecPathError
from fsmcompile.store import DiskStore
from fsmcompile.warm import WarmSettings, WarmTask, collect_specs, warm_tasks

TOKENIZER = str(DATA / "gpt2" / "tokenizer.json.gz")


def test_warm_tasks_fill_the_disk_tier_then_hit_it(tmp_path: Path, gpt2: Vocabulary) -> None:
    (tmp_path / "yes.regex").write_text("(yes|no)\n")
    (tmp_path / "flag.json").write_text('{"type": "boolean"}')
    items = collect_specs([tmp_path], kind=None, options_for=lambda kind: {})
    tasks = [item for item in items if isinstance(item, WarmTask)]
    assert [task.spec for task in tasks] == ['{"type": "boolean"}', "(yes|no)"]
    settings = WarmSettings(TOKENIZER, cache_dir=str(tmp_path / "cache"))

    first = dict(warm_tasks(settings, tasks, vocab=gpt2))
    assert [first[n].cache_hit for n in range(2)] == [False, False]
    assert {first[n].key for n in range(2)} == set(DiskStore(tmp_path / "cache").keys())

    # A fresh warmer (fresh memory tier) finds both on disk.
    again = dict(warm_tasks(settings, tasks, vocab=gpt2))
    assert [(again[n].cache_hit, again[n].cache_tier) for n in range(2)] == [(True, "disk")] * 2
    assert pickle.loads(pickle.dumps(again[0])) == again[0]  # crosses process boundaries


def test_warm_failed_spec_is_an_outcome_not_an_exception(tmp_path: Path, gpt2: Vocabulary) -> None:
    task = WarmTask("bad", "regex", "ab(c", {})
    settings = WarmSettings(TOKENIZER, cache_dir=str(tmp_path))
    ((n, outcome),) = warm_tasks(settings, [task], vocab=gpt2)
    assert n == 0 and not outcome.ok and outcome.error is not None
    assert outcome.error["type"] == "RegexSyntaxError" and outcome.error["pos"] == 2


def test_warm_collect_specs_refuses_paths_that_name_no_spec(tmp_path: Path) -> None:
    with pytest.raises(SpecPathError, match="no such file") as missing:
        collect_specs([tmp_path / "gone"], kind=None, options_for=lambda kind: {})
    assert missing.value.source == str(tmp_path / "gone")
    (tmp_path / "spec.xml").write_text("<a/>")
    with pytest.raises(SpecPathError, match="cannot tell the kind"):
        collect_specs([tmp_path / "spec.xml"], kind=None, options_for=lambda kind: {})
    with pytest.raises(ValueError, match="jobs"):
        warm_tasks(WarmSettings(TOKENIZER), [], jobs=0)
