"""The text tokens as a flat byte trie, so an index walk shares every common prefix.

Nodes are numbered in DFS (lexicographic) order with the root as node 0. The index
builder walks it one depth level at a time, so nodes are also listed grouped by depth,
and the children of a node are a contiguous run of the next level.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

_ARRAY_DTYPES = {
    "node_byte": "<u1",
    "node_height": "<i4",
    "level_nodes": "<i4",
    "level_offsets": "<i8",
    "child_lo": "<i8",
    "child_hi": "<i8",
    "token_ids": "<i8",
    "token_node": "<i4",
}


@dataclass(frozen=True, slots=True, eq=False)
class TokenTrie:
    """Flat arrays describing the trie (N nodes, D = deepest level).

    Attributes:
        node_byte: uint8[N], the byte on the edge into each node (root: 0, unused).
        node_height: int32[N], the longest path below each node, in bytes.
        level_nodes: int32[N], node ids grouped by depth (ids ascending within a level).
        level_offsets: int64[D + 2], level d is level_nodes[level_offsets[d]:level_offsets[d+1]].
        child_lo / child_hi: int64[N], the children of node n are level_nodes[lo:hi].
        token_ids: int64[T], the text token ids in the trie.
        token_node: int32[T], the node where token_ids[i]'s bytes end.
    """

    node_byte: npt.NDArray[np.uint8]
    node_height: npt.NDArray[np.int32]
    level_nodes: npt.NDArray[np.int32]
    level_offsets: npt.NDArray[np.int64]
    child_lo: npt.NDArray[np.int64]
    child_hi: npt.NDArray[np.int64]
    token_ids: npt.NDArray[np.int64]
    token_node: npt.NDArray[np.int32]
    _derived: dict[str, tuple[npt.NDArray[Any], ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def to_arrays(self) -> dict[str, bytes]:
        """The arrays as raw little-endian bytes, for the vocabulary cache."""
        return {name: np.ascontiguousarray(getattr(self, name)).tobytes() for name in _ARRAY_DTYPES}

    @classmethod
    def from_arrays(cls, arrays: dict[str, bytes]) -> TokenTrie:
        """Inverse of `to_arrays`."""
        return cls(
            **{
                name: np.frombuffer(arrays[name], dtype=dtype)
                for name, dtype in _ARRAY_DTYPES.items()
            }
        )

    def children(
        self, nodes: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(parent position, child node) for every child of `nodes`, one level down.

        Every walk of the trie goes level by level through this: `parent[i]` indexes
        `nodes`, so per-entry data follows its children with one gather.
        """
        lo = self.child_lo[nodes]
        counts = self.child_hi[nodes] - lo
        total = int(counts.sum())
        parent = np.repeat(np.arange(nodes.shape[0]), counts)
        pos = lo[parent] + (np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts))
        return parent, self.level_nodes[pos].astype(np.int64)

    def _kept(
        self, key: str, make: Callable[[], tuple[npt.NDArray[Any], ...]]
    ) -> tuple[npt.NDArray[Any], ...]:
        """Arrays derived from the trie: made on first use, kept read-only."""
        found = self._derived.get(key)
        if found is None:
            found = make()
            for array in found:
                array.flags.writeable = False
            self._derived[key] = found
        return found

    def node_depths(self) -> npt.NDArray[np.int64]:
        """int64[N]: the depth of every node (root 0), from the level lists (computed once,
        read-only)."""

        def make() -> tuple[npt.NDArray[np.int64]]:
            depth = np.zeros(self.num_nodes, dtype=np.int64)
            depth[self.level_nodes] = np.repeat(
                np.arange(self.level_offsets.shape[0] - 1), np.diff(self.level_offsets)
            )
            return (depth,)

        return self._kept("depths", make)[0]

    def level_parents(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(int64[N] the position in `level_nodes` of each position's parent, the root's -1;
        int64[N] the position of every node id), computed once, read-only.

        A walk that visits every node can keep its per-node values in level order: a level
        is then one contiguous slice, and its parents' values one gather from the level
        above, read in ascending order (children of a node are adjacent).
        """

        def make() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
            position = np.empty(self.num_nodes, dtype=np.int64)
            position[self.level_nodes] = np.arange(self.num_nodes, dtype=np.int64)
            owner, child = self.children(np.arange(self.num_nodes, dtype=np.int64))
            parent_at = np.full(self.num_nodes, -1, dtype=np.int64)
            parent_at[position[child]] = position[owner]
            return parent_at, position

        parent_at, position = self._kept("level_parents", make)
        return parent_at, position

    def level_walk(self) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
        """(uint8[N] the byte into each node in level order, int64[T] the level-order
        position of each token's node), computed once, read-only: with `level_parents`,
        what a walk of every node in level order reads."""

        def make() -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
            position = self.level_parents()[1]
            return self.node_byte[self.level_nodes], position[self.token_node]

        level_bytes, token_positions = self._kept("level_walk", make)
        return level_bytes, token_positions

    def token_node_flags(self) -> npt.NDArray[np.bool_]:
        """bool[N]: whether some token's bytes end at each node (computed once, read-only)."""

        def make() -> tuple[npt.NDArray[np.bool_]]:
            flags = np.zeros(self.num_nodes, dtype=np.bool_)
            flags[self.token_node] = True
            return (flags,)

        return self._kept("token_node_flags", make)[0]

    def token_first_bytes(self) -> npt.NDArray[np.int64]:
        """int64[T]: the first byte of each trie token (computed once, read-only).

        Nodes are numbered depth-first, so a token's depth-1 ancestor is the last depth-1
        node at or before its end node.
        """

        def make() -> tuple[npt.NDArray[np.int64]]:
            depth1 = np.sort(self.level_nodes[self.level_offsets[1] : self.level_offsets[2]])
            ancestor = depth1[np.searchsorted(depth1, self.token_node, side="right") - 1]
            return (self.node_byte[ancestor].astype(np.int64),)

        return self._kept("first_bytes", make)[0]

    def first_byte_by_id(self, size: int) -> npt.NDArray[np.int64]:
        """int64[size]: the first byte of token id i, 256 for an id outside the trie (no
        text), so a bool[257] table indexed by it reads a per-byte property of every id
        in one gather (computed once per size, read-only)."""

        def make() -> tuple[npt.NDArray[np.int64]]:
            table = np.full(size, 256, dtype=np.int64)
            table[self.token_ids] = self.token_first_bytes()
            return (table,)

        return self._kept(f"first_byte_by_id/{size}", make)[0]

    def tokens_by_node(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(int64[N + 1] start, int64[T] ids): the token ids whose bytes end at node n are
        ids[start[n] : start[n + 1]] (several ids can share bytes), computed once,
        read-only: every walk's records look their tokens up by node."""

        def make() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
            start, rows = self.token_rows_by_node()
            return start, self.token_ids[rows]

        start, ids = self._kept("tokens_by_node", make)
        return start, ids

    def token_rows_by_node(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(int64[N + 1] start, int64[T] rows): the trie tokens (positions in `token_ids`)
        whose bytes end at node n are rows[start[n] : start[n + 1]], computed once,
        read-only: a walk that meets a node writes the rows of its tokens."""

        def make() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
            rows = np.argsort(self.token_node, kind="stable").astype(np.int64)
            counts = np.bincount(self.token_node, minlength=self.num_nodes)
            start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            return start, rows

        start, rows = self._kept("token_rows_by_node", make)
        return start, rows

    def subtree_ends(self) -> npt.NDArray[np.int64]:
        """int64[N]: one past the last node id under each node (computed once, read-only).

        Nodes are numbered depth-first, so a subtree is the id range [n, end[n]), and its
        tokens are one slice of `tokens_by_node`'s ids.
        """

        def make() -> tuple[npt.NDArray[np.int64]]:
            size = np.ones(self.num_nodes, dtype=np.int64)  # by position in level_nodes
            offsets = self.level_offsets.tolist()
            for d in range(len(offsets) - 3, -1, -1):
                lo, hi, below_hi = offsets[d], offsets[d + 1], offsets[d + 2]
                # Each node's children are a run of the next level: sum their sizes.
                below = np.concatenate([[0], np.cumsum(size[hi:below_hi])])
                level = self.level_nodes[lo:hi]
                first = np.clip(self.child_lo[level] - hi, 0, below_hi - hi)
                last = np.clip(self.child_hi[level] - hi, 0, below_hi - hi)
                size[lo:hi] += below[last] - below[first]
            ends = np.empty(self.num_nodes, dtype=np.int64)
            ends[self.level_nodes] = self.level_nodes + size
            return (ends,)

        return self._kept("subtree_ends", make)[0]

    @property
    def num_nodes(self) -> int:
        return int(self.node_byte.shape[0])

    @property
    def depth(self) -> int:
        return int(self.level_offsets.shape[0]) - 2

    @classmethod
    def build(cls, token_bytes: list[bytes], token_ids: npt.NDArray[np.int64]) -> TokenTrie:
        """Build the trie of `token_bytes[i]` for i in `token_ids` (all non-empty).

        Cost: one sort of the token strings plus O(total bytes) numpy work.
        """
        strings = [token_bytes[i] for i in token_ids]
        order = sorted(range(len(strings)), key=strings.__getitem__)
        ids_sorted = np.asarray(token_ids, dtype=np.int64)[order]
        strings = [strings[i] for i in order]
        n = len(strings)
        lengths = np.fromiter((len(s) for s in strings), dtype=np.int64, count=n)
        width = int(lengths.max()) if n else 0
        padded = np.zeros((n, width), dtype=np.uint8)
        if n:
            flat = np.frombuffer(b"".join(strings), dtype=np.uint8)
            row = np.repeat(np.arange(n), lengths)
            col = np.arange(flat.shape[0]) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            padded[row, col] = flat

        # lcp[i]: common prefix of strings i-1 and i (0 for the first).
        lcp = np.zeros(n, dtype=np.int64)
        if n > 1:
            differs = padded[1:] != padded[:-1]
            first_diff = np.where(differs.any(axis=1), differs.argmax(axis=1), width)
            lcp[1:] = np.minimum(first_diff, np.minimum(lengths[1:], lengths[:-1]))
        new_count = lengths - lcp
        start = 1 + np.concatenate([[0], np.cumsum(new_count)[:-1]])
        num_nodes = 1 + int(new_count.sum())

        rows = np.repeat(np.arange(n), new_count)
        first_of_row = np.repeat(start, new_count)
        node_ids = np.arange(1, num_nodes)
        depth_of = lcp[rows] + 1 + (node_ids - first_of_row)
        node_byte = np.zeros(num_nodes, dtype=np.uint8)
        node_depth = np.zeros(num_nodes, dtype=np.int64)
        node_byte[1:] = padded[rows, depth_of - 1]
        node_depth[1:] = depth_of

        parent = np.zeros(num_nodes, dtype=np.int64)
        parent[1:] = node_ids - 1
        # The first new node of string i hangs under its path node at depth lcp[i], made
        # by the latest earlier string k with lcp[k] < lcp[i].
        heads = np.flatnonzero((new_count > 0) & (lcp > 0))
        head_parent = np.zeros(heads.shape[0], dtype=np.int64)
        for d in np.unique(lcp[heads]):
            latest = np.maximum.accumulate(np.where(lcp < d, np.arange(n), -1))
            sel = lcp[heads] == d
            k = latest[heads[sel] - 1]
            head_parent[sel] = start[k] + (d - lcp[k] - 1)
        parent[start[heads]] = head_parent
        root_heads = np.flatnonzero((new_count > 0) & (lcp == 0))
        parent[start[root_heads]] = 0

        height = np.zeros(num_nodes, dtype=np.int32)
        by_depth = np.argsort(node_depth, kind="stable").astype(np.int32)
        level_offsets = np.searchsorted(node_depth[by_depth], np.arange(width + 2)).astype(np.int64)
        for d in range(width, 0, -1):
            level = by_depth[level_offsets[d] : level_offsets[d + 1]]
            np.maximum.at(height, parent[level], height[level] + 1)

        # Children of each node: a contiguous run of the next level (parents ascend there).
        child_lo = np.zeros(num_nodes, dtype=np.int64)
        child_hi = np.zeros(num_nodes, dtype=np.int64)
        for d in range(width):
            here = by_depth[level_offsets[d] : level_offsets[d + 1]]
            below = level_offsets[d + 1], level_offsets[d + 2]
            parents_below = parent[by_depth[below[0] : below[1]]]
            child_lo[here] = below[0] + np.searchsorted(parents_below, here, side="left")
            child_hi[here] = below[0] + np.searchsorted(parents_below, here, side="right")

        last_new = start + new_count - 1
        owner = np.maximum.accumulate(np.where(new_count > 0, np.arange(n), 0))
        token_node = last_new[owner].astype(np.int32)
        return cls(
            node_byte=node_byte,
            node_height=height,
            level_nodes=by_depth,
            level_offsets=level_offsets,
            child_lo=child_lo,
            child_hi=child_hi,
            token_ids=ids_sorted,
            token_node=token_node,
        )
