"""Explosive specs end in BudgetExceededError within about twice their budget.

Each spec is compiled by the CLI in a child process under a 3 GB address-space cap, so a
stage that ignores the deadline shows as a late end and one that runs away with memory
as a MemoryError or a kill, never as a hung or swapping test run. The bound allows the
process start-up (measured once) plus 2 s for a noisy shared machine.
"""

from __future__ import annotations

import json
import math
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import DATA

from fsmcompile import BudgetExceededError, Vocabulary, compile_regex
from fsmcompile.automaton import build_dfa
from fsmcompile.cli.main import main as cli_main
from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir
from fsmcompile.frontend.json_schema.values import json_equal, json_key

TOKENIZER = str(DATA / "gpt2" / "tokenizer.json.gz")
MEMORY_CAP_BYTES = 3 << 30
BUDGET_S = 1.0


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))


def _run_cli(path: Path, *extra: str) -> tuple[int, dict[str, Any], float, str]:
    """(exit code, the --json document, seconds, stderr) of one capped CLI compile."""
    command = [
        sys.executable,
        "-m",
        "fsmcompile.cli.main",
        "--json",
        "compile",
        str(path),
        "--tokenizer",
        TOKENIZER,
        "--no-cache",
        *extra,
    ]
    started = time.monotonic()
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=120, preexec_fn=_cap_memory
    )
    elapsed = time.monotonic() - started
    document = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, document, elapsed, done.stderr


@pytest.fixture(scope="module")
def startup_s(tmp_path_factory: pytest.TempPathFactory) -> float:
    """Seconds a trivial CLI compile takes: interpreter, imports, tokenizer."""
    path = tmp_path_factory.mktemp("startup") / "tiny.regex"
    path.write_text("abc")
    code, document, elapsed, stderr = _run_cli(path)
    assert code == 0 and document["ok"], stderr
    return elapsed


def _random_words(count: int) -> list[str]:
    rng = random.Random(3)
    words: set[str] = set()
    while len(words) < count:
        words.add(
            "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 12)))
        )
    return sorted(words)


def _keyword_grammar(count: int) -> str:
    alternatives = " | ".join(f'"kw{i}"' for i in range(count))
    return f'start: kw+\nkw: {alternatives}\n%ignore " "\n'


EXPLOSIVE: dict[str, tuple[str, str]] = {
    # name: (file suffix, spec text)
    # 10,000 strings compile in about 2 s now (test below): 100,000 outlast the budget.
    "enum_100k_strings": (".json", json.dumps({"enum": [f"word{i}" for i in range(100_000)]})),
    "enum_10k_ints": (".json", json.dumps({"enum": list(range(10_000))})),
    "literal_regex_1mb": (".regex", "a" * 1_000_000),
    "alternation_10k_words": (".regex", "|".join(_random_words(10_000))),
    "optional_properties_2000": (
        ".json",
        json.dumps(
            {
                "type": "object",
                "properties": {f"property_{i}": {"type": "string"} for i in range(2000)},
            }
        ),
    ),
    "one_of_50": (
        ".json",
        json.dumps(
            {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {f"k{i}": {"type": "string"}},
                        "required": [f"k{i}"],
                    }
                    for i in range(50)
                ]
            }
        ),
    ),
    "lark_5000_keywords": (".lark", _keyword_grammar(5000)),
}


@pytest.mark.parametrize("name", sorted(EXPLOSIVE))
def test_explosive_spec_ends_in_budget_error_in_time(
    name: str, tmp_path: Path, startup_s: float
) -> None:
    suffix, text = EXPLOSIVE[name]
    path = tmp_path / f"spec{suffix}"
    path.write_text(text)
    code, document, elapsed, stderr = _run_cli(path, "--timeout", str(BUDGET_S))
    assert code == 1, (code, stderr[-2000:])  # not killed by the cap, not a usage error
    assert document["error"]["type"] == "BudgetExceededError", document
    assert document["error"]["limit"] in ("timeout_s", "max_states"), document
    assert elapsed < 2 * BUDGET_S + startup_s + 2.0, (elapsed, startup_s, document)


@pytest.mark.slow
def test_lark_analysis_refused_by_size_before_lark_runs_it(tmp_path: Path) -> None:
    """Under the default max_states the keyword grammar is refused by its size, naming
    max_states; with max_states raised it is refused by time, naming timeout_s."""
    path = tmp_path / "keywords.lark"
    path.write_text(_keyword_grammar(5000))
    code, document, _, stderr = _run_cli(path, "--timeout", "30")
    assert code == 1, stderr[-2000:]
    assert document["error"]["limit"] == "max_states", document
    code, document, _, stderr = _run_cli(
        path, "--timeout", str(BUDGET_S), "--max-states", "100000000"
    )
    assert code == 1, stderr[-2000:]
    assert document["error"]["limit"] == "timeout_s", document


def test_enum_of_10k_strings_compiles(tmp_path: Path) -> None:
    """Deduplication is linear: minutes of pairwise comparisons before, seconds now."""
    path = tmp_path / "enum.json"
    path.write_text(json.dumps({"enum": [f"word{i}" for i in range(10_000)]}))
    code, document, elapsed, stderr = _run_cli(path, "--timeout", "60")
    assert code == 0 and document["ok"], stderr[-2000:]
    assert elapsed < 60


def test_grammars_within_budget_still_compile(tmp_path: Path) -> None:
    path = tmp_path / "keywords.lark"
    path.write_text(_keyword_grammar(50))
    code, document, _, stderr = _run_cli(path, "--timeout", "30")
    assert code == 0 and document["ok"], stderr[-2000:]


# ---- enum exactness -----------------------------------------------------------------

VALUES: list[Any] = [
    *(1, 1.0, 1e0, True, False, 0, 0.0, -0.0, None, "1", "a", "a", 2**70, float(2**70)),
    *(0.1, 1e-1, math.inf, math.inf, -math.inf, math.nan),
    *([1], [1.0], [True], [], {}, [[]], [{}], {"a": 1}, {"a": 1.0}, {"a": True}),
    *({"a": 2, "b": 1}, {"b": 1, "a": 2}),
]


def test_json_key_equal_exactly_when_json_equal() -> None:
    for a in VALUES:
        for b in VALUES:
            assert (json_key(a) == json_key(b)) == json_equal(a, b), (a, b)


def _lowered_texts(schema: Any, texts: list[str]) -> list[bool]:
    node = schema_to_ir(schema, options=JsonOptions()).node
    dfa = build_dfa(node)
    return [dfa.matches(text.encode()) for text in texts]


def test_enum_keeps_json_equality() -> None:
    """1 and 1.0 are one value, true is not 1, and "1" is a string."""
    schema = {"enum": [1, 1.0, True, "1", [1.0], {"a": 1}]}
    texts = ["1", "1.0", "true", '"1"', "[1]", '{"a":1.0}', "false", "0", '"true"', "[true]"]
    expected = [True, True, True, True, True, True, False, False, False, False]
    assert _lowered_texts(schema, texts) == expected


def test_enum_intersection_by_json_equality() -> None:
    """allOf of two enums keeps the values both hold, by JSON equality (2.0 == 2,
    true != 1)."""
    schema = {"allOf": [{"enum": [3, 1, 2.0, True]}, {"enum": [2, 1.0, False]}]}
    texts = ["1", "2", "3", "true", "false"]
    assert _lowered_texts(schema, texts) == [True, True, False, False, False]


def test_enum_values_kept_in_order_without_duplicates() -> None:
    from fsmcompile.ir.nodes import Alt

    schema = {"enum": ["b", "a", "b", "c", "a"]}
    node = schema_to_ir(schema, options=JsonOptions()).node
    assert isinstance(node, Alt)
    dfa_of = [build_dfa(item) for item in node.items]
    order = [next(t for t in ('"a"', '"b"', '"c"') if d.matches(t.encode())) for d in dfa_of]
    assert order == ['"b"', '"a"', '"c"']


def test_enum_value_refused_by_its_schema_does_not_hide_an_equal_one() -> None:
    """draft-04 refuses 1.0 as an integer; the later 1 is still kept."""
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "integer",
        "enum": [1.0, 1],
    }
    assert _lowered_texts(schema, ["1", "2"]) == [True, False]


def test_enum_with_other_keywords_still_validated() -> None:
    """Values are checked against the rest of their schema (the enum itself aside)."""
    schema = {"type": "string", "minLength": 2, "enum": ["a", "bb", 5, "ccc"]}
    assert _lowered_texts(schema, ['"a"', '"bb"', "5", '"ccc"']) == [False, True, False, True]


# ---- budget arguments -----------------------------------------------------------------


@pytest.mark.parametrize("timeout_s", [math.nan, math.inf, -math.inf, -1.0, 0.0])
def test_api_refuses_timeouts_that_disable_the_budget(gpt2: Vocabulary, timeout_s: float) -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        compile_regex("a", gpt2, timeout_s=timeout_s, cache=False)


@pytest.mark.parametrize("max_states", [0, -5, 2**31])
def test_api_refuses_state_budgets_out_of_range(gpt2: Vocabulary, max_states: int) -> None:
    with pytest.raises(ValueError, match="max_states"):
        compile_regex("a", gpt2, max_states=max_states, cache=False)


@pytest.mark.parametrize(("timeout_s", "max_states"), [(True, 10), ("5", 10), (5.0, 1.5)])
def test_api_refuses_budget_arguments_of_the_wrong_type(
    gpt2: Vocabulary, timeout_s: Any, max_states: Any
) -> None:
    with pytest.raises(TypeError):
        compile_regex("a", gpt2, timeout_s=timeout_s, max_states=max_states, cache=False)


def test_api_budget_still_applies(gpt2: Vocabulary) -> None:
    with pytest.raises(BudgetExceededError) as caught:
        compile_regex("(a|b){0,100000}c", gpt2, max_states=100, cache=False)
    assert caught.value.limit == "max_states"


@pytest.mark.parametrize(
    "option",
    [
        ("--timeout", "nan"),
        ("--timeout", "inf"),
        ("--timeout", "-1"),
        ("--timeout", "0"),
        ("--max-states", "0"),
        ("--max-states", "-3"),
        ("--max-states", "1.5"),
    ],
)
def test_cli_refuses_bad_budgets_as_usage_errors(
    option: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli_main(["--json", "--regex", "a", "--tokenizer", TOKENIZER, "--no-cache", *option])
    assert code == 2
    assert option[0] in capsys.readouterr().err


def test_waiting_for_lark_counts_against_the_budget(gpt2: Vocabulary) -> None:
    """A grammar queued behind another thread's lark analysis gives up at its deadline."""
    from fsmcompile import compile_lark
    from fsmcompile.grammar import loading

    loading._LARK_LOCK.acquire()
    try:
        started = time.monotonic()
        with pytest.raises(BudgetExceededError) as caught:
            compile_lark('start: "queued" "behind"\n', gpt2, timeout_s=0.3, cache=False)
        assert time.monotonic() - started < 2.0
        assert caught.value.limit == "timeout_s"
    finally:
        loading._LARK_LOCK.release()


def test_mask_collection_refuses_an_unpacked_matrix_past_its_bound(
    gpt2: Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The signatures x origins matrix is sized before numpy allocates it."""
    from fsmcompile.index.dfa import trie_walk as walk

    monkeypatch.setattr(walk, "MAX_UNPACKED_BYTES", 8)
    with pytest.raises(BudgetExceededError) as caught:
        compile_regex("[a-z]{1,12}(-[0-9]{1,6})?", gpt2, cache=False)
    assert caught.value.limit == "walk_bytes"
