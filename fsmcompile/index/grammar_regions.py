"""String interiors of a grammar lexer, served by region walks cached per vocabulary.

A generated JSON grammar has a string interior in many terminals (every property's value,
every free-form key), and from each one nearly the whole vocabulary stays inside: walked
entry by entry, each interior costs a full trie walk. As for DFAs (regions.py), equal
interiors share one walk of their shape, cached per vocabulary and per trie depth the
interior is entered at (0 at the start of a token, 1 after a token's opening quote...).
The grammar walk hands every entry that sits in an interior, with no constraint open, to
`RegionServer.serve`: tokens that stay inside become groups directly (nothing more is
emitted; the lexeme ends in the state of the token's end role), and tokens that leave
come back as entries at their exit node, where the walk goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.dfa import ByteDFA
from fsmcompile.index.grammar_lexer import LexerShapes
from fsmcompile.index.regions import Region, find_regions, walk_roles
from fsmcompile.vocabulary import Vocabulary

# Entries deeper than this are walked: their subtrees are small, and each served depth
# costs one cached walk per shape.
MAX_SERVED_DEPTH = 16


@dataclass(frozen=True, slots=True, eq=False)
class Entries:
    """Walk entries below the root: origins `bits[i]` have emitted `seq[i]` and are in
    shape `states[i]` at trie node `nodes[i]`, with no constraint open."""

    nodes: npt.NDArray[np.int64]
    states: npt.NDArray[np.int64]
    seq: npt.NDArray[np.int64]
    bits: npt.NDArray[np.uint64]


@dataclass(slots=True)
class StayGroups:
    """Groups of tokens that stay inside a region (G groups over P token patterns).

    Attributes:
        seq: the sequence emitted before the region was entered, per group.
        state: the shape the tokens end in, per group.
        origins: the origin bitset of each group (uint64 rows).
        pattern: index into `patterns` per group.
        patterns: token id arrays; groups from equal walks share one.
    """

    seq: list[int] = field(default_factory=list)
    state: list[int] = field(default_factory=list)
    origins: list[npt.NDArray[np.uint64]] = field(default_factory=list)
    pattern: list[int] = field(default_factory=list)
    patterns: list[npt.NDArray[np.int64]] = field(default_factory=list)


@dataclass(frozen=True, slots=True, eq=False)
class _RoleView:
    """One role's part of a cached walk: staying tokens (trie token positions) with their
    end roles, exits, and the depth-d ancestor (the served entry's node) of each."""

    inside: npt.NDArray[np.int64]
    inside_end: npt.NDArray[np.int64]
    inside_top: npt.NDArray[np.int64]
    exit_node: npt.NDArray[np.int64]
    exit_sink: npt.NDArray[np.int64]
    exit_top: npt.NDArray[np.int64]


class RegionServer:
    """The lexer's string interiors and the cached walks that serve them."""

    def __init__(self, shapes: LexerShapes, vocab: Vocabulary) -> None:
        dfa = ByteDFA(
            transitions=shapes.transitions,
            class_of_byte=shapes.class_of_byte,
            accepting=shapes.label >= 0,
        )
        # A region must be free of cut points (nothing is emitted inside) and of ignored
        # terminals (the context a cut restarts in would depend on the origin).
        barred = shapes.label >= 0
        barred[shapes.of_state[shapes.context_tag >= 0]] = True
        self.regions: list[Region] = find_regions(dfa, barred=barred)
        self.region_of = np.full(shapes.num_shapes, -1, dtype=np.int64)
        self.role_of = np.full(shapes.num_shapes, -1, dtype=np.int64)
        for i, region in enumerate(self.regions):
            self.region_of[region.states] = i
            self.role_of[region.states] = np.arange(region.states.shape[0])
        self.vocab = vocab
        trie = vocab.trie
        self._token_node = trie.token_node.astype(np.int64)
        self._token_ids = trie.token_ids
        self._num_nodes = trie.num_nodes
        self.stays = StayGroups()
        self._views: dict[tuple[str, int, int], _RoleView] = {}
        # Scratch: the group of each served node (-1 elsewhere), reset after each use.
        self._group_of_node = np.full(self._num_nodes, -1, dtype=np.int64)

    def _ancestors(self, depth: int, nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The depth-`depth` ancestor of each node (nodes deeper than `depth`).

        Nodes are numbered depth-first, so it is the last depth-`depth` node at or before.
        """
        trie = self.vocab.trie
        level = trie.level_nodes[trie.level_offsets[depth] : trie.level_offsets[depth + 1]]
        # Ids ascend within a level (trie.py), so the level is sorted already.
        return level[np.searchsorted(level, nodes, side="right") - 1].astype(np.int64)

    def _walk(self, region: Region, role: int, depth: int) -> _RoleView:
        """The cached walk of one role, with the depth-`depth` ancestors it needs."""
        key = (region.shape_key, role, depth)
        view = self._views.get(key)
        if view is None:
            walk = walk_roles(region, self.vocab, depth)
            ends = walk.end_role[:, role]
            inside = np.flatnonzero(ends >= 0)
            leaving = np.flatnonzero(walk.exit_role == role)
            view = _RoleView(
                inside=inside,
                inside_end=ends[inside].astype(np.int64),
                inside_top=self._ancestors(depth, self._token_node[inside]),
                exit_node=walk.exit_node[leaving],
                exit_sink=walk.exit_sink[leaving],
                exit_top=self._ancestors(depth, walk.exit_node[leaving]),
            )
            self._views[key] = view
        return view

    def serve(
        self,
        depth: int,
        nodes: npt.NDArray[np.int64],
        states: npt.NDArray[np.int64],
        seq: npt.NDArray[np.int64],
        bits: npt.NDArray[np.uint64],
    ) -> Entries:
        """Serve walk entries at trie depth `depth` whose shape is a region role.

        Records the groups of the tokens below each entry that stay in the region and
        returns the entries where tokens leave it. Entries with equal (shape, seq,
        origins) form one group: their nodes only select which subtrees count.
        """
        words = bits.shape[1]
        out_nodes, out_states, out_seq, out_bits = [], [], [], []
        span = int(seq.max()) + 1
        classes, class_of = np.unique(states * span + seq, return_inverse=True)
        class_of = class_of.reshape(-1)
        row = np.dtype((np.void, bits.dtype.itemsize * words))
        group_of_node = self._group_of_node
        for c, packed in enumerate(classes.tolist()):
            state, sq = divmod(packed, span)
            members = np.flatnonzero(class_of == c)
            # Within one (shape, seq) the walk's entries have distinct nodes; equal origin
            # bitsets make one group.
            member_bits = np.ascontiguousarray(bits[members])
            _, first, group = np.unique(
                member_bits.view(row).reshape(-1), return_index=True, return_inverse=True
            )
            uniq_bits = member_bits[first]
            group_of_node[nodes[members]] = group.reshape(-1)
            region = self.regions[int(self.region_of[state])]
            view = self._walk(region, int(self.role_of[state]), depth)
            g = group_of_node[view.inside_top]
            picked = g >= 0
            end = view.inside_end[picked]
            key = g[picked] * region.states.shape[0] + end
            order = np.argsort(key, kind="stable")
            key_sorted = key[order]
            tokens = self._token_ids[view.inside[picked][order]]
            starts = np.flatnonzero(np.concatenate([[True], key_sorted[1:] != key_sorted[:-1]]))
            bounds = np.append(starts, key_sorted.shape[0]).tolist() if key.shape[0] else [0]
            for a, b in zip(bounds[:-1], bounds[1:], strict=True):
                grp, role_end = divmod(int(key_sorted[a]), region.states.shape[0])
                self.stays.seq.append(sq)
                self.stays.state.append(int(region.states[role_end]))
                self.stays.origins.append(uniq_bits[grp])
                self.stays.pattern.append(len(self.stays.patterns))
                self.stays.patterns.append(tokens[a:b])
            g = group_of_node[view.exit_top]
            picked = g >= 0
            if picked.any():
                out_nodes.append(view.exit_node[picked])
                out_states.append(region.exit_targets[view.exit_sink[picked]])
                out_seq.append(np.full(int(picked.sum()), sq, dtype=np.int64))
                out_bits.append(uniq_bits[g[picked]])
            group_of_node[nodes[members]] = -1
        if not out_nodes:
            empty = np.zeros(0, dtype=np.int64)
            return Entries(empty, empty, empty, np.zeros((0, words), dtype=np.uint64))
        return Entries(
            nodes=np.concatenate(out_nodes),
            states=np.concatenate(out_states).astype(np.int64),
            seq=np.concatenate(out_seq),
            bits=np.concatenate(out_bits),
        )
