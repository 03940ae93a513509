"""Walk the trie through a region shape from every role and several entry depths at once.

A region's walk asks, for every token, which role it ends in from each starting role
(`regions.RoleWalk`), once per trie depth the region can be entered at. Walked role by
role, that is `roles x depths` whole-trie walks of per-role arrays: 0.2-0.3 s for a JSON
string shape with Llama 3, paid by the first schema of a process and by every new
format or pattern shape.

Here a node carries, per entry depth, one id: the function from the starting role to
the role its path leads to. A string's interior has few such functions (the bytes since
the last complete character decide them), so they are interned and their moves by byte
memoized: the trie costs one table lookup per node and entry depth, and the role
arithmetic runs once per distinct (function, byte). Even so, level-by-level numpy cost
3-70 ms a shape with Llama 3, a large share of a median JSON Schema compile, so the pass
is C (`native/role_walk.c`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fsmcompile import _native
from fsmcompile.vocabulary.trie import TokenTrie

MAX_ROLES = 128
"""Roles are int8: 0..127, and -1 for none."""


@dataclass(frozen=True, slots=True, eq=False)
class RoleWalk:
    """What every trie token does inside one region shape, from every role, when the
    region is entered at one trie depth (0: a token starts in it).

    Attributes:
        end_role: int8[T, m], the role token t ends in when it is in role r at its
            depth-`depth` node; -1 if it leaves the region or dies (or is not deeper).
        exit_node / exit_sink / exit_role: int64[E], a token leaves the anchor through
            exit `exit_sink` at trie node `exit_node` (whose byte was the exit byte),
            having been in role `exit_role` at depth `depth`.
    """

    end_role: npt.NDArray[np.int8]
    exit_node: npt.NDArray[np.int64]
    exit_sink: npt.NDArray[np.int64]
    exit_role: npt.NDArray[np.int64]


def walk_role_functions(
    table: npt.NDArray[np.int32], num_roles: int, trie: TokenTrie, top: int
) -> list[RoleWalk]:
    """The region walks entered at depths 0..`top`, in one pass over the trie.

    Args:
        table: the shape automaton over raw bytes (`Region.table`): m roles, then sinks.
        num_roles: m.
        trie: the vocabulary trie.
        top: the deepest entry depth.

    Each depth's walk is what walking the shape from every role at every node of that
    depth gives: per token the role it ends in (-1 when it leaves, dies or ends at or
    above the entry depth), and every exit (node, sink, starting role), level by level,
    by node then role.

    Raises:
        ValueError: `table` is not [rows >= num_roles, 256], `num_roles` is not 1 to
            `MAX_ROLES`, `top` is negative, or a move of `table` is
            not -1, a role or a sink.
    """
    table = np.ascontiguousarray(table, dtype=np.int32)
    if table.ndim != 2 or table.shape[1] != 256:
        raise ValueError(f"expected a shape table of [rows, 256]; got shape {table.shape}")
    if not 1 <= num_roles <= min(MAX_ROLES, table.shape[0]):
        raise ValueError(
            f"expected 1 to {min(MAX_ROLES, table.shape[0])} roles (table rows, at most "
            f"{MAX_ROLES}); got {num_roles}"
        )
    if top < 0:
        raise ValueError(f"expected an entry depth of at least 0; got top={top}")
    num_tokens = int(trie.token_node.shape[0])
    end_role = np.empty((top + 1, num_tokens, num_roles), dtype=np.int8)
    exits = _native.walk_role_functions(
        table,
        num_roles,
        np.ascontiguousarray(trie.node_byte, dtype=np.uint8),
        np.ascontiguousarray(trie.node_depths(), dtype=np.int64),
        trie.depth + 1,
        np.ascontiguousarray(trie.token_node, dtype=np.int32),
        end_role,
    )
    return [
        RoleWalk(
            end_role=end_role[depth],
            exit_node=np.frombuffer(node, dtype=np.int64),
            exit_sink=np.frombuffer(sink, dtype=np.int64),
            exit_role=np.frombuffer(role, dtype=np.int64),
        )
        for depth, (node, sink, role) in enumerate(exits)
    ]
