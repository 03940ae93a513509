"""Exit sets and shape tags equal their Python reference definitions
(tests/exits_reference.py) array for array, ids and dtypes included, on the bundled
grammars, a recursive and a free-form schema, and grammar-route JSONSchemaBench schemas."""

from __future__ import annotations

import json

import numpy as np
import pytest
from exits_reference import context_tag_reference, exit_sets_reference
from grammar.grammar_checks import BUNDLED, bundled_text, compiled
from grammar.test_lazy_grammar_index import FREE_FORM, GRAMMAR_SUBSETS, TREE
from support import SHARED, load_vocabulary

from fsmcompile import Compiler
from fsmcompile.errors import BudgetExceededError, SpecError, UnsupportedFeatureError
from fsmcompile.index.cfg.exits import exit_sets
from fsmcompile.index.cfg.lexer_shapes import lexer_shapes
from fsmcompile.tables.grammar_index import GrammarIndex

CORPUS_PER_SUBSET = 40


def assert_like_reference(index: GrammarIndex) -> None:
    lexer, num_terminals = index.lexer, len(index.terminal_names)
    found, expected = exit_sets(lexer, num_terminals), exit_sets_reference(lexer, num_terminals)
    for name in ("state_xset", "pair_start", "pair_terminal", "pair_context"):
        a, b = getattr(found, name), getattr(expected, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert np.array_equal(lexer_shapes(lexer).context_tag, context_tag_reference(lexer))


@pytest.mark.parametrize("name", BUNDLED)
def test_exit_sets_equal_the_reference_on_bundled_grammars(name: str) -> None:
    assert_like_reference(compiled(bundled_text(name), "gpt2"))


@pytest.mark.parametrize("schema", [TREE, FREE_FORM], ids=["tree", "free_form"])
def test_exit_sets_equal_the_reference_on_schemas(schema: dict[str, object]) -> None:
    index = Compiler(load_vocabulary("gpt2"), cache=False).compile_spec("json", schema).index
    assert isinstance(index, GrammarIndex)
    assert_like_reference(index)


@pytest.mark.corpus
@pytest.mark.parametrize("subset", GRAMMAR_SUBSETS)
def test_exit_sets_equal_the_reference_on_jsonschemabench(subset: str) -> None:
    path = SHARED / "corpora" / "jsonschemabench" / subset / "schemas.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not present")
    compiler = Compiler(load_vocabulary("llama3"), cache=False, timeout_s=20)
    checked = 0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                index = compiler.compile_spec("json", json.loads(line)["schema"]).index
            except (SpecError, UnsupportedFeatureError, BudgetExceededError):
                continue
            if isinstance(index, GrammarIndex):
                assert_like_reference(index)
                checked += 1
                if checked == CORPUS_PER_SUBSET:
                    break
    assert checked
