"""The coverage bench's per-engine check: MaskBench verdicts, TTFM with no same-spec memo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.coverage_engines import check_record, ttfm_ratio
from bench.coverage_report import summarize
from bench.engines import load_engine
from bench.engines.base import Engine
from bench.jsonschemabench_coverage import pick_engines

GPT2 = Path(__file__).resolve().parents[1] / "data" / "gpt2" / "tokenizer.json.gz"
SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 0}},
    "required": ["n"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def fsmcompile_engine() -> Engine:
    engine = load_engine("fsmcompile", timeout_s=10.0)
    engine.prepare_vocab(str(GPT2))
    return engine


def _tests(engine: Any, texts: list[tuple[str, bool]]) -> list[dict[str, Any]]:
    return [
        {"index": i, "valid": valid, "text": text, "ids": engine.vocab.encode(text)}
        for i, (text, valid) in enumerate(texts)
    ]


def test_valid_accepted_invalid_rejected_with_ttfm_cpu_and_index_times(
    fsmcompile_engine: Engine,
) -> None:
    tests = _tests(fsmcompile_engine, [('{"n":12}', True), ('{"n":-1}', False)])
    result = check_record(fsmcompile_engine, {"id": "t", "schema": SCHEMA}, tests, 10.0)
    assert result["outcome"] == "passed"
    assert 0 < result["compile_s"] <= result["ttfm_s"]
    assert result["index_s"] == result["compile_s"]
    assert len(result["cpu_instance_s"]) == 1
    assert result["cpu_instance_s"][0] >= result["ttfm_cpu_s"] > 0
    assert result["mask_ns"] and result["mask_warm_ns"]


def test_a_rejected_valid_instance_is_over_with_its_token(fsmcompile_engine: Engine) -> None:
    tests = _tests(fsmcompile_engine, [('{"n":1,"m":2}', True)])
    result = check_record(fsmcompile_engine, {"id": "t", "schema": SCHEMA}, tests, 10.0)
    assert result["outcome"] == "over"
    assert "masked" in result["first_failure"]["reason"]


def test_every_compile_starts_with_no_same_spec_memo(fsmcompile_engine: Engine) -> None:
    tests = _tests(fsmcompile_engine, [('{"n":3}', True)])
    indexes = fsmcompile_engine.compiler.memos.indexes  # type: ignore[attr-defined]
    indexes.get_or_make(b"left over", lambda: None)
    seen: list[int] = []
    original = fsmcompile_engine.compile

    def compile_and_look(case: dict[str, Any]) -> Any:
        seen.append(len(indexes))
        return original(case)

    fsmcompile_engine.compile = compile_and_look  # type: ignore[method-assign]
    try:
        check_record(fsmcompile_engine, {"id": "t", "schema": SCHEMA}, tests, 10.0)
        check_record(fsmcompile_engine, {"id": "t", "schema": SCHEMA}, tests, 10.0)
    finally:
        del fsmcompile_engine.compile
    assert seen == [0, 0]


def test_a_first_mask_past_the_budget_is_budget(fsmcompile_engine: Engine) -> None:
    tests = _tests(fsmcompile_engine, [('{"n":3}', True)])
    result = check_record(fsmcompile_engine, {"id": "t", "schema": SCHEMA}, tests, 0.0)
    assert (result["outcome"], result["limit"]) == ("budget", "timeout")


def test_summary_of_a_lazy_engine_has_no_index_time() -> None:
    row = {"outcome": "passed", "over": 0, "under": 0, "tests": 1, "compile_s": 0.001}
    lazy = {**row, "ttfm_s": 0.002, "index_s": None, "cpu_instance_s": [0.003, 0.005]}
    summary = summarize([lazy])
    assert summary["index_ms_p50"] is None
    assert summary["ttfm_ms_p50"] == pytest.approx(2.0)
    assert summary["cpu_ms_p50"] == pytest.approx(4.0)


def test_ttfm_ratio_is_over_the_records_both_compiled() -> None:
    by_engine = {
        "fsmcompile": [{"id": "a", "ttfm_s": 0.1}, {"id": "b", "ttfm_s": 0.2}],
        "xgrammar": [{"id": "a", "ttfm_s": 0.3}, {"id": "b", "outcome": "budget"}],
    }
    assert ttfm_ratio(by_engine, "xgrammar") == pytest.approx(3.0)


def test_unknown_engines_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown engines"):
        pick_engines("fsmcompile,nope")
    assert pick_engines("fsmcompile") == ["fsmcompile"]


def test_an_unsupported_schema_keeps_the_engine_message(fsmcompile_engine: Engine) -> None:
    schema = {"type": "array", "items": {"type": "object"}, "uniqueItems": True}
    result = check_record(fsmcompile_engine, {"id": "t", "schema": schema}, [], 10.0)
    assert result["outcome"] == "unsupported"
    assert result["keywords"] == ["uniqueItems"]
    assert "cannot be enforced" in result["error"]
