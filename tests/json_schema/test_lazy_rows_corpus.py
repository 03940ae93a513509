"""Lazy rows on real schemas: JSONSchemaBench schemas that compile to a DFA get, from a
`LazyTokenIndex`, every row of the eager index bit for bit (Llama 3 and GPT-2), and a
matcher over the lazy index writes the eager masks along each valid instance."""

from __future__ import annotations

import json

import pytest
from lazy_checks import assert_matchers_agree, assert_rows_equal
from support import SHARED, load_vocabulary

from fsmcompile.compile_stages import build_machine, lower_spec
from fsmcompile.errors import BudgetExceededError, SpecError
from fsmcompile.frontend.json_schema import JsonOptions
from fsmcompile.index.dfa.build import build_token_index
from fsmcompile.index.dfa.lazy_rows import lazy_token_index
from fsmcompile.tables.byte_dfa import ByteDFA

pytestmark = pytest.mark.corpus

SUBSETS = ("Glaiveai2K", "Github_easy", "Github_medium")
PER_SUBSET = 6
MAX_STATES = 1_500  # every row is forced: keep each schema to about a second


def regular_schemas(subset: str) -> list[tuple[ByteDFA, list[str]]]:
    """The first `PER_SUBSET` schemas of `subset` that lower to a DFA of at most
    `MAX_STATES` states, with their valid instances as compact JSON."""
    path = SHARED / "corpora" / "jsonschemabench" / subset / "schemas.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not present")
    found: list[tuple[ByteDFA, list[str]]] = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            try:
                node, rules = lower_spec("json", record["schema"], JsonOptions())
                if rules:
                    continue
                dfa = build_machine(node, rules, max_states=MAX_STATES, deadline=None)
            except (SpecError, BudgetExceededError):
                continue
            assert isinstance(dfa, ByteDFA)
            texts = [
                json.dumps(test["data"], separators=(",", ":"), ensure_ascii=False)
                for test in record["tests"]
                if test["valid"]
            ]
            found.append((dfa, [text for text in texts if dfa.matches(text.encode())]))
            if len(found) == PER_SUBSET:
                break
    return found


@pytest.mark.parametrize("tokenizer", ["gpt2", "llama3"])
@pytest.mark.parametrize("subset", SUBSETS)
def test_lazy_rows_equal_eager_rows_on_jsonschemabench(subset: str, tokenizer: str) -> None:
    vocab = load_vocabulary(tokenizer)
    states = steps = 0
    for dfa, texts in regular_schemas(subset):
        eager = build_token_index(dfa, vocab, kind="json", spec_hash="")
        lazy = lazy_token_index(dfa, vocab, kind="json", spec_hash="")
        for text in texts[:3]:
            steps += assert_matchers_agree(lazy, eager, text)
        states += assert_rows_equal(lazy, eager)
    assert states >= 100 and steps >= 20, (states, steps)
