"""The one-pass walk of interned role functions equals walking each role and depth apart.

The reference below walks a region shape from every role at every node of one depth,
level by level, carrying the role vectors themselves: the obvious construction. The
function walk must give the same end roles and the same exits, in the same order, for
every entry depth, on real tokenizers' tries and real schemas' string shapes, and on
random small shapes.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fsmcompile import _native
from fsmcompile.compiler import ROOT_RULE, lower_spec
from fsmcompile.grammar.from_rules import grammar_from_rules
from fsmcompile.index.cfg.lexer_build import build_lexer_automaton
from fsmcompile.index.cfg.lexer_shapes import lexer_shapes
from fsmcompile.index.dfa.regions import Region, find_regions
from fsmcompile.index.dfa.role_functions import RoleWalk, walk_role_functions
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.vocabulary import Vocabulary
from fsmcompile.vocabulary.trie import TokenTrie


def _reference(
    table: npt.NDArray[np.int32], num_roles: int, trie: TokenTrie, depth: int
) -> RoleWalk:
    step = np.vstack([table, np.full((1, 256), -1, dtype=np.int32)]).astype(np.int16)
    role_at = np.full((trie.num_nodes, num_roles), -1, dtype=np.int8)
    node = trie.level_nodes[trie.level_offsets[depth] : trie.level_offsets[depth + 1]].astype(
        np.int64
    )
    roles = np.broadcast_to(np.arange(num_roles, dtype=np.int16), (node.shape[0], num_roles))
    exit_node, exit_sink, exit_role = [], [], []
    while node.shape[0]:
        parent, child = trie.children(node)
        if child.shape[0] == 0:
            break
        nxt = step[roles[parent], trie.node_byte[child][:, None]]
        left = nxt >= num_roles
        if left.any():
            at, role = np.nonzero(left)
            exit_node.append(child[at])
            exit_sink.append(nxt[at, role].astype(np.int64) - num_roles)
            exit_role.append(role.astype(np.int64))
            nxt[left] = -1
        alive = (nxt >= 0).any(axis=1)
        node, roles = child[alive], nxt[alive]
        role_at[node] = roles
    empty = np.zeros(0, dtype=np.int64)
    return RoleWalk(
        end_role=role_at[trie.token_node],
        exit_node=np.concatenate(exit_node) if exit_node else empty,
        exit_sink=np.concatenate(exit_sink) if exit_sink else empty,
        exit_role=np.concatenate(exit_role) if exit_role else empty,
    )


def _assert_same(table: npt.NDArray[np.int32], num_roles: int, trie: TokenTrie, top: int) -> None:
    walks = walk_role_functions(table, num_roles, trie, top)
    assert len(walks) == top + 1
    for depth, walk in enumerate(walks):
        want = _reference(table, num_roles, trie, depth)
        assert np.array_equal(walk.end_role, want.end_role), depth
        assert np.array_equal(walk.exit_node, want.exit_node), depth
        assert np.array_equal(walk.exit_sink, want.exit_sink), depth
        assert np.array_equal(walk.exit_role, want.exit_role), depth


SCHEMAS = {
    "string": {"type": "object", "properties": {"a": {"type": "string"}}},
    "uri": {"type": "object", "properties": {"u": {"type": "string", "format": "uri"}}},
    "email_and_pattern": {
        "type": "object",
        "properties": {
            "e": {"type": "string", "format": "email"},
            "p": {"type": "string", "pattern": "^[\\S]+$"},
        },
    },
}


def _regions(schema: dict[str, object]) -> list[Region]:
    """The regions of a schema's grammar lexer, one per shape."""
    node, rules = lower_spec("json", schema, {})
    grammar = grammar_from_rules({ROOT_RULE: node, **rules}, ROOT_RULE, max_states=100_000)
    shapes = lexer_shapes(build_lexer_automaton(grammar, max_states=100_000))
    dfa = ByteDFA(
        transitions=shapes.transitions,
        class_of_byte=shapes.class_of_byte,
        accepting=shapes.label >= 0,
    )
    regions = find_regions(dfa, barred=shapes.label >= 0)
    assert regions
    return list({r.shape_key: r for r in regions}.values())


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_function_walk_equals_role_walks_on_schema_shapes(name: str, gpt2: Vocabulary) -> None:
    for region in _regions(SCHEMAS[name]):
        _assert_same(region.table, int(region.states.shape[0]), gpt2.trie, 4)


def test_function_walk_equals_role_walks_with_qwen2(qwen2: Vocabulary) -> None:
    region = _regions(SCHEMAS["string"])[0]
    _assert_same(region.table, int(region.states.shape[0]), qwen2.trie, 2)


@st.composite
def shape_tables(draw: st.DrawFn) -> tuple[npt.NDArray[np.int32], int]:
    """Random shapes over a few byte groups: m roles, k sinks, moves anywhere."""
    roles = draw(st.integers(1, 4))
    sinks = draw(st.integers(0, 2))
    groups = draw(
        st.lists(st.integers(-1, roles + sinks - 1), min_size=roles * 4, max_size=roles * 4)
    )
    table = np.full((roles + sinks, 256), -1, dtype=np.int32)
    for role in range(roles):
        for group in range(4):
            table[role, group * 64 : (group + 1) * 64] = groups[role * 4 + group]
    return table, roles


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(drawn=shape_tables(), top=st.integers(0, 3))
def test_function_walk_equals_role_walks_on_random_shapes(
    drawn: tuple[npt.NDArray[np.int32], int], top: int, gpt2: Vocabulary
) -> None:
    table, roles = drawn
    _assert_same(table, roles, gpt2.trie, top)


def _cycling_table(num_roles: int, sinks: int) -> npt.NDArray[np.int32]:
    """Role r moves to r + 1 (wrapping) on letters, leaves to sink r % sinks on '"', dies
    elsewhere: every role stays distinct along a path, so functions do not collapse."""
    table = np.full((num_roles + sinks, 256), -1, dtype=np.int32)
    roles = np.arange(num_roles, dtype=np.int32)
    table[:num_roles, ord("a") : ord("z") + 1] = ((roles + 1) % num_roles)[:, None]
    table[:num_roles, ord('"')] = num_roles + roles % sinks
    return table


def test_function_walk_with_most_int8_roles_equals_role_walks(gpt2: Vocabulary) -> None:
    _assert_same(_cycling_table(128, 3), 128, gpt2.trie, 2)


def test_function_walk_on_a_deep_trie_equals_role_walks() -> None:
    tokens = [b"a" * 3000, b"a" * 5 + b'"', b"ab", b'"', b"b" * 40 + b'"x']
    trie = TokenTrie.build(tokens, np.arange(len(tokens), dtype=np.int64))
    _assert_same(_cycling_table(5, 2), 5, trie, 6)


@pytest.mark.parametrize(
    ("table", "num_roles", "top", "message"),
    [
        (np.full((3, 256), -1, dtype=np.int32), 0, 0, "1 to 3 roles"),
        (np.full((130, 256), -1, dtype=np.int32), 129, 0, "at most 128"),
        (np.full((2, 256), -1, dtype=np.int32), 3, 0, "1 to 2 roles"),
        (np.full((2, 255), -1, dtype=np.int32), 1, 0, r"\[rows, 256\]"),
        (np.full((2, 256), 2, dtype=np.int32), 1, 0, "role 0 moves to 2 on byte 0"),
        (np.full((2, 256), -2, dtype=np.int32), 2, 0, "moves to -2"),
        (np.full((2, 256), -1, dtype=np.int32), 2, -1, "top=-1"),
    ],
)
def test_function_walk_bad_input_raises_value_error(
    table: npt.NDArray[np.int32], num_roles: int, top: int, message: str, gpt2: Vocabulary
) -> None:
    with pytest.raises(ValueError, match=message):
        walk_role_functions(table, num_roles, gpt2.trie, top)


def _native_arguments(trie: TokenTrie, node_depth: npt.NDArray[np.int64]) -> tuple[object, ...]:
    table = _cycling_table(1, 1)
    end_role = np.empty((1, trie.token_node.shape[0], 1), dtype=np.int8)
    return (table, 1, trie.node_byte, node_depth, trie.depth + 1, trie.token_node, end_role)


def test_native_walk_depths_not_depth_first_raise_value_error() -> None:
    trie = TokenTrie.build([b"ab", b"b"], np.arange(2, dtype=np.int64))
    depths = trie.node_depths().copy()
    depths[1] = 2  # deeper than a child of the root
    with pytest.raises(ValueError, match="depth-first"):
        _native.walk_role_functions(*_native_arguments(trie, depths))


def test_native_walk_wrong_item_size_raises_type_error() -> None:
    trie = TokenTrie.build([b"ab", b"b"], np.arange(2, dtype=np.int64))
    depths = trie.node_depths().astype(np.int32)
    with pytest.raises(TypeError, match="node_depth has items of 4 bytes, not 8"):
        _native.walk_role_functions(*_native_arguments(trie, depths))
