"""Specs that lower to one language share one compiled index per process (`_indexes`)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from support import allowed_all_the_way, load_vocabulary

from fsmcompile.compiler import compile_spec, spec_hash
from fsmcompile.errors import BudgetExceededError
from fsmcompile.memo import clear_stage_memos
from fsmcompile.runtime.matcher import matcher_for
from fsmcompile.vocabulary import Vocabulary

TREE: dict[str, Any] = {
    "title": "Node",
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "what the node is called"},
        "children": {"type": "array", "items": {"$ref": "#"}, "maxItems": 3},
    },
    "required": ["name"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        (TREE, '{"name":"a","children":[{"name":"b"}]}', '{"name":"a","extra":1}'),
        (TREE["properties"]["name"], '"a"', "5"),
    ],
    ids=["grammar", "dfa"],
)
def test_schemas_differing_only_in_annotations_build_one_index(
    gpt2: Vocabulary, schema: dict[str, Any], good: str, bad: str
) -> None:
    clear_stage_memos()
    annotated = copy.deepcopy(schema)
    annotated["description"] = "the same language, described otherwise"
    annotated["examples"] = [{"name": "x"}]
    first = compile_spec("json", schema, gpt2, cache=False).index
    second = compile_spec("json", annotated, gpt2, cache=False).index
    assert second.masks is first.masks  # built once
    assert second.spec_hash == spec_hash("json", annotated, {}) != first.spec_hash
    assert second.vocabulary is gpt2
    assert allowed_all_the_way(second, gpt2, good)[0]
    assert not allowed_all_the_way(second, gpt2, bad)[0]


def test_another_language_or_option_builds_its_own_index(gpt2: Vocabulary) -> None:
    clear_stage_memos()
    first = compile_spec("json", TREE, gpt2, cache=False).index
    bounded = copy.deepcopy(TREE)
    bounded["properties"]["name"]["maxLength"] = 4
    assert compile_spec("json", bounded, gpt2, cache=False).index.masks is not first.masks
    spaced = compile_spec("json", TREE, gpt2, cache=False, options={"whitespace": "standard"})
    assert spaced.index.masks is not first.masks
    assert allowed_all_the_way(spaced.index, gpt2, '{"name": "a", "children": []}')[0]


def test_a_shared_index_is_held_to_the_calls_state_budget(gpt2: Vocabulary) -> None:
    clear_stage_memos()
    states = compile_spec("json", TREE, gpt2, cache=False).num_states
    annotated = {**TREE, "description": "again"}
    with pytest.raises(BudgetExceededError) as info:
        compile_spec("json", annotated, gpt2, cache=False, max_states=states - 1)
    assert info.value.limit == "max_states"


@pytest.mark.parametrize("schema", [TREE, TREE["properties"]["name"]], ids=["grammar", "dfa"])
def test_indexes_of_one_language_share_warm_runtime_tables(
    gpt2: Vocabulary, schema: dict[str, Any]
) -> None:
    clear_stage_memos()
    first = compile_spec("json", schema, gpt2, cache=False).index
    second = compile_spec("json", {**schema, "title": "renamed"}, gpt2, cache=False).index
    matcher = matcher_for(second)
    assert matcher.index is second
    assert matcher.tables is matcher_for(first).tables
    # Another part (here the vocabulary's content) means other tables.
    phi3 = load_vocabulary("phi3")
    assert matcher_for(compile_spec("json", schema, phi3, cache=False).index).tables is not (
        matcher.tables
    )
