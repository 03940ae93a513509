"""Walk the trie through a region shape from every role and several entry depths at once.

A region's walk asks, for every token, which role it ends in from each starting role
(`regions.RoleWalk`), once per trie depth the region can be entered at. Walked role by
role, that is `roles x depths` whole-trie walks of per-role arrays: 0.2-0.3 s for a JSON
string shape with Llama 3, paid by the first schema of a process and by every new
format or pattern shape.

Here a node carries, per entry depth, one id: the function from the starting role to
the role its path leads to. A string's interior has few such functions (the bytes since
the last complete character decide them), so they are interned and their moves by byte
memoized: a level of the trie costs one table lookup per node and entry depth, and the
role arithmetic runs once per distinct (function, byte).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import sorted_unique
from fsmcompile.vocabulary.trie import TokenTrie

DEAD = 0
"""The function that sends every role out of the region (all walks from it are over)."""
IDENTITY = 1
"""The function of the empty path: where the region is entered."""
_UNKNOWN = -2
"""A (function, byte) move not computed yet."""


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


@dataclass(slots=True)
class _Functions:
    """Interned role functions of one region shape and their memoized moves.

    Attributes:
        step: int32[m, 256], the shape's move of each role by byte: a role, -1 (dead) or
            m + sink (an exit).
        values: the role each function sends each starting role to (-1: gone), by id.
        moves: int32[F, 256], twice the function after one more byte, plus 1 when some
            role leaves the region on it; `_UNKNOWN` until computed.
        exits: per (function, byte) with exits, the (roles, sinks) leaving on that byte,
            roles ascending; `exit_of` holds its index in `exits`, or -1.
    """

    step: npt.NDArray[np.int32]
    values: list[tuple[int, ...]] = field(default_factory=list)
    ids: dict[tuple[int, ...], int] = field(default_factory=dict)
    moves: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros((0, 256), dtype=np.int32))
    exit_of: npt.NDArray[np.int32] = field(
        default_factory=lambda: np.zeros((0, 256), dtype=np.int32)
    )
    exits: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = field(default_factory=list)

    @classmethod
    def of(cls, table: npt.NDArray[np.int32], num_roles: int) -> _Functions:
        funcs = cls(step=np.ascontiguousarray(table[:num_roles], dtype=np.int32))
        funcs.intern((-1,) * num_roles)  # DEAD
        funcs.intern(tuple(range(num_roles)))  # IDENTITY
        funcs.moves[DEAD] = 2 * DEAD
        funcs.exit_of[DEAD] = -1
        return funcs

    @property
    def num_roles(self) -> int:
        return int(self.step.shape[0])

    def intern(self, value: tuple[int, ...]) -> int:
        found = self.ids.get(value)
        if found is None:
            found = len(self.values)
            self.ids[value] = found
            self.values.append(value)
            if found >= self.moves.shape[0]:
                grow = max(16, self.moves.shape[0])
                self.moves = np.vstack([self.moves, np.full((grow, 256), _UNKNOWN, dtype=np.int32)])
                self.exit_of = np.vstack([self.exit_of, np.full((grow, 256), -1, dtype=np.int32)])
        return found

    def resolve(self, keys: npt.NDArray[np.int32]) -> None:
        """Compute the moves of the (function * 256 + byte) `keys` not known yet."""
        pairs = sorted_unique(keys)
        func, byte = pairs // 256, pairs % 256
        values = np.asarray([self.values[f] for f in func.tolist()], dtype=np.int64)
        moved = np.where(values >= 0, self.step[np.maximum(values, 0), byte[:, None]], -1).astype(
            np.int64
        )
        leaving = moved >= self.num_roles
        results = []
        rows: list[list[int]] = moved.tolist()
        leaves_any: list[bool] = np.any(leaving, axis=1).tolist()
        for i, (row, leaves) in enumerate(zip(rows, leaves_any, strict=True)):
            flag = 0
            if leaves:
                roles = np.flatnonzero(leaving[i]).astype(np.int64)
                self.exit_of[func[i], byte[i]] = len(self.exits)
                self.exits.append((roles, moved[i, roles] - self.num_roles))
                row = [-1 if r >= self.num_roles else r for r in row]
                flag = 1
            results.append(2 * self.intern(tuple(row)) + flag)
        # Interning may have grown the tables: write through the current ones.
        self.moves[func, byte] = results

    def step_all(self, keys: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
        """The moves of `keys` (function * 256 + byte), each 2 * next function + 1 if
        some role leaves the region on that byte."""
        got = self.moves.reshape(-1)[keys]
        unknown = got == _UNKNOWN
        if unknown.any():
            self.resolve(keys[unknown])
            got[unknown] = self.moves.reshape(-1)[keys[unknown]]
        return got

    def values_array(self) -> npt.NDArray[np.int8]:
        """int8[F, m]: the role each function sends each starting role to."""
        return np.asarray(self.values, dtype=np.int8).reshape(-1, self.num_roles)


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
    """
    funcs = _Functions.of(table, num_roles)
    width = top + 1
    at_node = np.full((trie.num_nodes, width), -1, dtype=np.int32)  # -1: not entered
    exits: list[list[tuple[npt.NDArray[np.int64], ...]]] = [[] for _ in range(width)]
    node = np.zeros(1, dtype=np.int64)
    ids = np.full((1, width), -1, dtype=np.int32)
    ids[0, 0] = IDENTITY
    depth = 0
    while node.shape[0]:
        parent, child = trie.children(node)
        if not child.shape[0]:
            break
        depth += 1
        before = ids[parent]
        keys = before * 256 + trie.node_byte[child].astype(np.int32)[:, None]
        if depth <= width:  # some entry depths start below: their columns hold -1
            entered = before >= 0
            moved = np.full(before.shape, -1, dtype=np.int32)
            moved[entered] = funcs.step_all(keys[entered])
        else:
            moved = funcs.step_all(keys)
        after = moved >> 1  # -1 stays -1
        leaves = (moved >= 0) & (moved & 1 == 1)  # some role leaves the region here
        for column in np.flatnonzero(leaves.any(axis=0)).tolist():
            edges = np.flatnonzero(leaves[:, column])
            found = [funcs.exits[k] for k in funcs.exit_of.reshape(-1)[keys[edges, column]]]
            counts = [roles.shape[0] for roles, _ in found]
            exits[column].append(
                (
                    np.repeat(child[edges], counts),
                    np.concatenate([sinks for _, sinks in found]),
                    np.concatenate([roles for roles, _ in found]),
                )
            )
        if depth < width:
            after[:, depth] = IDENTITY
        at_node[child] = after
        alive = (after > DEAD).any(axis=1)
        node, ids = child[alive], after[alive]
    token_depth = trie.node_depths()[trie.token_node]
    values = funcs.values_array()
    at_token = at_node[trie.token_node]
    walks = []
    for column in range(width):
        func = at_token[:, column]
        end_role = values[np.maximum(func, DEAD)]
        end_role[(func < 0) | (token_depth <= column)] = -1
        parts = exits[column]
        walks.append(
            RoleWalk(
                end_role=end_role,
                exit_node=_joined(parts, 0),
                exit_sink=_joined(parts, 1),
                exit_role=_joined(parts, 2),
            )
        )
    return walks


def _joined(parts: list[tuple[npt.NDArray[np.int64], ...]], field: int) -> npt.NDArray[np.int64]:
    if not parts:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([part[field] for part in parts]).astype(np.int64)
