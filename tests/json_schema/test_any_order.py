"""Objects whose listed properties may come in any order (`any_order_max`): exactly the
instances `jsonschema` accepts, written with each key at most once.

Every ordered selection of members from a pool (keys listed, extra, repeated with
another value) is checked: completeness over every order, soundness over duplicates,
missing required keys, forbidden extras and counts.
"""

from __future__ import annotations

import json
from itertools import permutations
from typing import Any

import jsonschema
import pytest
from support import allowed_all_the_way, load_vocabulary

from fsmcompile.compiler import compile_json_schema
from fsmcompile.errors import SchemaError
from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir

from .conftest import compact
from .language import schema_language
from .walks import gpt2_index, walk_to_end

Pool = list[tuple[str, Any]]

REGULAR = [True, True, True, False, False]
"""Which cases compile to one DFA (key checkers) and which to a grammar (shared sets)."""

CASES: list[tuple[dict[str, Any], Pool]] = [
    (  # closed, two required, a value holding key "a" itself: DFA
        {
            "type": "object",
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": "string"},
                "c": {
                    "type": "array",
                    "items": {
                        "type": ["integer", "object"],
                        "additionalProperties": {"type": "integer"},
                    },
                    "maxItems": 2,
                },
            },
            "required": ["a", "b"],
            "additionalProperties": False,
        },
        [("a", 1), ("a", 2), ("b", "x"), ("c", [1, {"a": 2}]), ("x", 1)],
    ),
    (  # extras by schema, counted: DFA
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"enum": ["u", "v"]}},
            "required": ["b"],
            "additionalProperties": {"type": "boolean"},
            "maxProperties": 3,
        },
        [("a", 1), ("b", "u"), ("b", "w"), ("x", True), ("y", False), ("z", 1)],
    ),
    (  # pattern properties and a minimum count: DFA
        {
            "type": "object",
            "properties": {"a": {"type": "null"}, "b": {"type": "null"}, "c": {"type": "null"}},
            "patternProperties": {"^n": {"type": "integer"}},
            "additionalProperties": False,
            "minProperties": 2,
        },
        [("a", None), ("b", None), ("c", None), ("n1", 5), ("n2", "s"), ("q", 1)],
    ),
    (  # free-form extras: a grammar
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {}},
            "required": ["a"],
        },
        [("a", 1), ("a", "s"), ("b", "x"), ("c", {"e": [1]}), ("x", {"a": 1})],
    ),
    (  # free-form extras, counted: a grammar
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "maxProperties": 2,
        },
        [("a", 1), ("b", "x"), ("b", 2), ("x", []), ("y", None)],
    ),
]


def _text(members: Pool) -> str:
    return "{" + ",".join(json.dumps(k) + ":" + compact(v) for k, v in members) + "}"


def _valid(schema: dict[str, Any], members: Pool) -> bool:
    keys = [k for k, _ in members]
    listed = schema.get("properties", {})
    duplicate_listed = any(keys.count(k) > 1 for k in listed)
    if duplicate_listed or len(set(keys)) < len(keys):
        return False
    return bool(jsonschema.Draft202012Validator(schema).is_valid(dict(members)))


def _selections(pool: Pool) -> list[Pool]:
    out: list[Pool] = []
    for size in range(len(pool) + 1):
        out.extend(list(p) for p in permutations(pool, size))
    return out


@pytest.mark.parametrize("case", range(len(CASES)))
def test_any_order_accepts_exactly_the_valid_orders(case: int) -> None:
    schema, pool = CASES[case]
    assert schema_to_ir(schema, options=JsonOptions(any_order_max=4)).regular is REGULAR[case]
    accepts = schema_language(schema, any_order_max=4)
    accepted = 0
    for members in _selections(pool):
        expected = _valid(schema, members)
        assert accepts(_text(members)) is expected, (schema, members)
        accepted += expected
    assert accepted > 10  # orders other than the schema's among them


def test_any_order_is_off_by_default_and_keeps_larger_objects_in_order() -> None:
    schema = CASES[0][0]
    assert not schema_language(schema)('{"b":"x","a":1}')
    assert schema_language(schema, any_order_max=3)('{"b":"x","a":1}')
    assert not schema_language(schema, any_order_max=2)('{"b":"x","a":1}')
    assert schema_language(schema, any_order_max=2)('{"a":1,"b":"x"}')


def test_any_order_max_is_capped() -> None:
    with pytest.raises(SchemaError, match="any_order_max"):
        JsonOptions(any_order_max=9)
    with pytest.raises(SchemaError, match="any_order_max"):
        JsonOptions(any_order_max=-1)


def test_any_order_flexible_whitespace() -> None:
    accepts = schema_language(CASES[0][0], any_order_max=3, whitespace="flexible")
    assert accepts('{ "c" : [1, {"d":2}] ,\n "b": "x",  "a":1 }')
    assert not accepts('{ "b": "x", "a":1, "b": "y" }')


def test_any_order_nested_objects_keep_their_own_keys_apart() -> None:
    inner = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}}
    inner["additionalProperties"] = False
    schema = {
        "type": "object",
        "properties": {"a": inner, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    accepts = schema_language(schema, any_order_max=2)
    assert accepts('{"b":1,"a":{"b":2,"a":3}}')
    assert not accepts('{"b":1,"a":{"b":2,"a":3,"a":4}}')
    assert not accepts('{"a":{"a":1},"b":1,"a":{}}')


def test_any_order_through_gpt2_matcher() -> None:
    vocab = load_vocabulary("gpt2")
    for schema, pool in CASES[:1] + CASES[3:4]:
        index = compile_json_schema(schema, vocab, cache=False, any_order_max=4)
        listed = [(k, v) for k, v in pool if k in schema["properties"]]
        for members in permutations(dict(listed).items()):
            text = _text(list(members))
            allowed, why = allowed_all_the_way(index, vocab, text)
            assert allowed is _valid(schema, list(members)), (text, why)
        allowed, _ = allowed_all_the_way(index, vocab, '{"b":"x","a":1,"a":1}')
        assert not allowed


def test_any_order_random_gpt2_walks_are_valid() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"enum": ["x", "y"]},
            "b": {"type": "boolean"},
            "c": {"type": "null"},
            "d": {"type": "integer", "minimum": 0, "maximum": 9},
        },
        "required": ["a", "c"],
        "additionalProperties": False,
    }
    index = gpt2_index(schema, any_order_max=4)
    orders = set()
    for seed in range(30):
        text = walk_to_end(index, seed, lean_closing=0.3).decode()
        pairs = json.loads(text, object_pairs_hook=lambda p: p)
        assert _valid(schema, pairs), text
        orders.add(tuple(k for k, _ in pairs))
    assert len(orders) > 3, orders


def test_any_order_with_listed_escapes_counts_every_spelling_of_a_key() -> None:
    accepts = schema_language(CASES[0][0], any_order_max=3, listed_escapes=True)
    assert accepts('{"\\u0062":"x","a":1}')
    assert not accepts('{"\\u0062":"x","a":1,"b":"y"}')
    assert not accepts('{"a":1,"\\u0061":2,"b":"y"}')
