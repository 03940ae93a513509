"""Specs that lower to one language share one compiled index per compiler (`memos.indexes`)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from support import allowed_all_the_way, load_vocabulary

from fsmcompile.compiler import Compiler, JsonOptions, spec_hash
from fsmcompile.errors import BudgetExceededError
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
    compiler = Compiler(gpt2, cache=False)
    annotated = copy.deepcopy(schema)
    annotated["description"] = "the same language, described otherwise"
    annotated["examples"] = [{"name": "x"}]
    first = compiler.compile_json_schema(schema)
    second = compiler.compile_json_schema(annotated)
    assert second.masks is first.masks  # built once
    assert (compiler.memos.indexes.misses, compiler.memos.indexes.hits) == (1, 1)
    assert second.spec_hash == spec_hash("json", annotated, {}) != first.spec_hash
    assert second.vocabulary is gpt2
    assert allowed_all_the_way(second, gpt2, good)[0]
    assert not allowed_all_the_way(second, gpt2, bad)[0]


def test_another_language_or_option_builds_its_own_index(gpt2: Vocabulary) -> None:
    compiler = Compiler(gpt2, cache=False)
    first = compiler.compile_json_schema(TREE)
    bounded = copy.deepcopy(TREE)
    bounded["properties"]["name"]["maxLength"] = 4
    assert compiler.compile_json_schema(bounded).masks is not first.masks
    spaced = compiler.compile_json_schema(TREE, options=JsonOptions(whitespace="standard"))
    assert spaced.masks is not first.masks
    assert allowed_all_the_way(spaced, gpt2, '{"name": "a", "children": []}')[0]


def test_a_shared_index_is_held_to_the_calls_state_budget(gpt2: Vocabulary) -> None:
    roomy = Compiler(gpt2, cache=False)
    states = roomy.compile_spec("json", TREE).num_states
    tight = Compiler(gpt2, cache=False, max_states=states - 1, memos=roomy.memos)
    annotated = {**TREE, "description": "again"}
    with pytest.raises(BudgetExceededError) as info:
        tight.compile_json_schema(annotated)
    assert roomy.memos.indexes.hits == 1  # refused from the shared index, not a rebuild
    assert info.value.limit == "max_states"


@pytest.mark.parametrize("schema", [TREE, TREE["properties"]["name"]], ids=["grammar", "dfa"])
def test_indexes_of_one_language_share_warm_runtime_tables(
    gpt2: Vocabulary, schema: dict[str, Any]
) -> None:
    compiler = Compiler(gpt2, cache=False)
    first = compiler.compile_json_schema(schema)
    second = compiler.compile_json_schema({**schema, "title": "renamed"})
    matcher = matcher_for(second)
    assert matcher.index is second
    assert matcher.tables is matcher_for(first).tables
    # Another part (here the vocabulary's content) means other tables.
    phi3 = load_vocabulary("phi3")
    other = Compiler(phi3, cache=False, memos=compiler.memos).compile_json_schema(schema)
    assert matcher_for(other).tables is not matcher.tables
