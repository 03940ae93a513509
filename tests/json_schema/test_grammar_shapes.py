"""Schemas whose grammar route once failed on the grammar's shape rather than its language.

* `anyOf`/`oneOf` branches that share a member holding a free-form object or array, one
  branch going on with more members after it: the bracket closing that value was written
  into one terminal with the next key (`},"b":`), read where any JSON object's `}` may be
  followed by `,`, so the grammar was refused and the rules unrolled 3 levels deep.
* Objects of hundreds of optional members: their IR is deeper than Python's recursion
  limit, and lowering stopped with a nesting error.
"""

from __future__ import annotations

import sys
from typing import Any

import jsonschema
import pytest

from fsmcompile.compiler import FALLBACK_DEPTH, build_machine
from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir
from fsmcompile.ir.nodes import Node, children
from fsmcompile.tables.lark_grammar import LarkGrammar


def shared_member(kind: str) -> dict[str, Any]:
    """Two closed branches sharing a free-form member `a` of type `kind`; one requires `b`
    after it."""
    return {
        "anyOf": [
            {
                "properties": {"a": {"type": kind}, "b": {"type": "integer"}},
                "required": ["b"],
                "additionalProperties": False,
            },
            {"properties": {"a": {"type": kind}}, "additionalProperties": False},
        ]
    }


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"k": [value, 1]}
    return value


@pytest.mark.parametrize("whitespace", ["compact", "standard"])
@pytest.mark.parametrize("kind", ["object", "array"])
def test_branches_sharing_a_free_form_member_compile_as_a_grammar(
    kind: str, whitespace: str
) -> None:
    lowering = schema_to_ir(shared_member(kind), options=JsonOptions(whitespace=whitespace))
    machine = build_machine(lowering.node, lowering.rules, max_states=200_000, deadline=None)
    assert isinstance(machine, LarkGrammar)


@pytest.mark.parametrize("kind", ["object", "array"])
def test_branches_sharing_a_free_form_member_accept_what_jsonschema_accepts(
    accepts: Any, kind: str
) -> None:
    schema = shared_member(kind)
    check, valid_by_jsonschema = accepts(schema), jsonschema.Draft202012Validator(schema).is_valid
    deep = nested(FALLBACK_DEPTH + 2)
    free: Any = {"x": [{"y": 1}, {"z": [2]}], "w": deep} if kind == "object" else [{"y": 1}, deep]
    other: Any = [] if kind == "object" else {}
    valid = [{}, {"b": 1}, {"a": free}, {"a": free, "b": 2}, [{"y": 1}, 2], 3]
    invalid = [
        {"a": free, "b": "2"},
        {"a": other},
        {"a": free, "c": 1},
        {"a": free, "b": 1, "c": 1},
    ]
    for value in valid:
        assert valid_by_jsonschema(value) and check(value), value
    for value in invalid:
        assert not valid_by_jsonschema(value) and not check(value), value


def ir_depth(root: Node) -> int:
    """The deepest path below `root`, counted without recursion."""
    depth: dict[int, int] = {}
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if ready:
            depth[id(node)] = 1 + max((depth[id(c)] for c in children(node)), default=0)
        elif id(node) not in depth:
            stack.append((node, True))
            stack.extend((c, False) for c in children(node) if id(c) not in depth)
    return depth[id(root)]


def test_an_object_of_hundreds_of_optional_members_lowers() -> None:
    count = sys.getrecursionlimit() // 2
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(count)}}
    lowering = schema_to_ir(schema, options=JsonOptions())
    assert lowering.rules  # the extra members' free-form values
    assert ir_depth(lowering.node) > sys.getrecursionlimit()
