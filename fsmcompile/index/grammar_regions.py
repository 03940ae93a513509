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
from fsmcompile.index.bits import bitmask_words, pack_bool_rows
from fsmcompile.index.grammar_lexer import LexerShapes
from fsmcompile.index.regions import Region, find_regions, walk_roles
from fsmcompile.index.sorted_keys import positions_of
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
        sources: per pattern, the cached walk and slice it was cut from, or None when it
            gathers several entries' tokens.
    """

    seq: list[int] = field(default_factory=list)
    state: list[int] = field(default_factory=list)
    origins: list[npt.NDArray[np.uint64]] = field(default_factory=list)
    pattern: list[int] = field(default_factory=list)
    patterns: list[npt.NDArray[np.int64]] = field(default_factory=list)
    sources: list[tuple[_RoleView, int, int] | None] = field(default_factory=list)

    def packed_rows(self, chosen: list[int], vocab_size: int) -> npt.NDArray[np.int32]:
        """int32[len(chosen), W]: the chosen patterns as packed rows.

        A pattern cut from a cached walk keeps its row with the walk: every schema with a
        free string packs the same ~120k-token interior, which costs milliseconds.
        """
        kept = [_kept_row(self.sources[p]) for p in chosen]
        fresh = [p for p, row in zip(chosen, kept, strict=True) if row is None]
        made: dict[int, npt.NDArray[np.int32]] = {}
        if fresh:  # one scatter for all of them, not one per pattern
            sizes = [self.patterns[p].shape[0] for p in fresh]
            allowed = np.zeros((len(fresh), vocab_size), dtype=np.bool_)
            allowed[
                np.repeat(np.arange(len(fresh)), sizes),
                np.concatenate([self.patterns[p] for p in fresh]),
            ] = True
            made = dict(zip(fresh, pack_bool_rows(allowed), strict=True))
            for p, row in made.items():
                source = self.sources[p]
                if source is not None:
                    source[0].packed[source[1:]] = row
        rows = [made[p] if row is None else row for p, row in zip(chosen, kept, strict=True)]
        return np.stack(rows) if rows else np.zeros((0, bitmask_words(vocab_size)), np.int32)


def _kept_row(source: tuple[_RoleView, int, int] | None) -> npt.NDArray[np.int32] | None:
    """The packed row a cached walk keeps for this slice, if any."""
    return None if source is None else source[0].packed.get(source[1:])


@dataclass(frozen=True, slots=True, eq=False)
class _RoleView:
    """One role's part of a cached walk at one depth: the staying tokens and the exits,
    each sorted by their depth-d ancestor (the served entry's node, so an entry's tokens
    are one slice), staying tokens then by end role.
    """

    inside_end: npt.NDArray[np.int64]
    inside_tokens: npt.NDArray[np.int64]
    inside_top: npt.NDArray[np.int64]
    exit_node: npt.NDArray[np.int64]
    exit_sink: npt.NDArray[np.int64]
    exit_top: npt.NDArray[np.int64]
    packed: dict[tuple[int, int], npt.NDArray[np.int32]] = field(default_factory=dict)
    """Packed rows of the `inside_tokens` slices that became dense groups (StayGroups)."""


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
        self.stays = StayGroups()

    def _ancestors(self, depth: int, nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The depth-`depth` ancestor of each node (nodes deeper than `depth`).

        Nodes are numbered depth-first, so it is the last depth-`depth` node at or before.
        """
        trie = self.vocab.trie
        level = trie.level_nodes[trie.level_offsets[depth] : trie.level_offsets[depth + 1]]
        # Ids ascend within a level (trie.py), so the level is sorted already.
        return level[np.searchsorted(level, nodes, side="right") - 1].astype(np.int64)

    def _walk(self, region: Region, role: int, depth: int) -> _RoleView:
        """The cached walk of one role, with the depth-`depth` ancestors it needs (cached
        per vocabulary, like the walk)."""
        views: dict[tuple[str, int, int], _RoleView] = self.vocab.__dict__.setdefault(
            "_region_role_views", {}
        )
        key = (region.shape_key, role, depth)
        view = views.get(key)
        if view is None:
            walk = walk_roles(region, self.vocab, depth)
            ends = walk.end_role[:, role]
            inside = np.flatnonzero(ends >= 0)
            inside_top = self._ancestors(depth, self._token_node[inside])
            order = np.lexsort((ends[inside], inside_top))
            inside, inside_top = inside[order], inside_top[order]
            inside_end = ends[inside].astype(np.int64)
            tokens = self._token_ids[inside].astype(np.int64)
            leaving = np.flatnonzero(walk.exit_role == role)
            exit_top = self._ancestors(depth, walk.exit_node[leaving])
            leaving, exit_top = leaving[np.argsort(exit_top, kind="stable")], np.sort(exit_top)
            view = _RoleView(
                inside_end=inside_end,
                inside_tokens=tokens,
                inside_top=inside_top,
                exit_node=walk.exit_node[leaving],
                exit_sink=walk.exit_sink[leaving],
                exit_top=exit_top,
            )
            views[key] = view
        return view

    def _stay(
        self,
        seq: int,
        state: int,
        origins: npt.NDArray[np.uint64],
        tokens: npt.NDArray[np.int64],
        source: tuple[_RoleView, int, int] | None = None,
    ) -> None:
        self.stays.seq.append(seq)
        self.stays.state.append(state)
        self.stays.origins.append(origins)
        self.stays.pattern.append(len(self.stays.patterns))
        self.stays.patterns.append(tokens)
        self.stays.sources.append(source)

    def _serve_node(
        self,
        view: _RoleView,
        region: Region,
        seq: int,
        node: int,
        origins: npt.NDArray[np.uint64],
    ) -> Entries | None:
        """Serve one entry below the root (node `node`); returns its exits, if any."""
        lo, hi = np.searchsorted(view.inside_top, (node, node + 1)).tolist()
        cuts = np.searchsorted(view.inside_end[lo:hi], np.arange(region.states.shape[0] + 1)) + lo
        for role_end in np.flatnonzero(cuts[1:] > cuts[:-1]).tolist():
            a, b = int(cuts[role_end]), int(cuts[role_end + 1])
            state = int(region.states[role_end])
            self._stay(seq, state, origins, view.inside_tokens[a:b], (view, a, b))
        lo, hi = np.searchsorted(view.exit_top, (node, node + 1)).tolist()
        if hi == lo:
            return None
        return Entries(
            nodes=view.exit_node[lo:hi],
            states=region.exit_targets[view.exit_sink[lo:hi]].astype(np.int64),
            seq=np.full(hi - lo, seq, dtype=np.int64),
            bits=np.broadcast_to(origins, (hi - lo, origins.shape[0])),
        )

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
        by_class = np.argsort(class_of.reshape(-1), kind="stable")
        class_end = np.cumsum(np.bincount(class_of.reshape(-1), minlength=classes.shape[0]))
        row = np.dtype((np.void, bits.dtype.itemsize * words))
        for c, packed in enumerate(classes.tolist()):
            state, sq = divmod(packed, span)
            members = by_class[(class_end[c - 1] if c else 0) : class_end[c]]
            region = self.regions[int(self.region_of[state])]
            view = self._walk(region, int(self.role_of[state]), depth)
            if members.shape[0] == 1:
                # One entry: its tokens are one slice of the view, already by end role.
                exits = self._serve_node(view, region, sq, int(nodes[members[0]]), bits[members[0]])
                if exits is not None:
                    out_nodes.append(exits.nodes)
                    out_states.append(exits.states)
                    out_seq.append(exits.seq)
                    out_bits.append(exits.bits)
                continue
            # Within one (shape, seq) the walk's entries have distinct nodes; equal origin
            # bitsets make one group.
            member_bits = np.ascontiguousarray(bits[members])
            _, first, group = np.unique(
                member_bits.view(row).reshape(-1), return_index=True, return_inverse=True
            )
            group = group.reshape(-1)
            uniq_bits = member_bits[first]
            m = region.states.shape[0]
            at, owner = positions_of(view.inside_top, nodes[members])
            key = group[owner] * m + view.inside_end[at]
            order = np.argsort(key, kind="stable")
            key, tokens = key[order], view.inside_tokens[at[order]]
            starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
            bounds = np.append(starts, key.shape[0]).tolist() if key.shape[0] else [0]
            for a, b in zip(bounds[:-1], bounds[1:], strict=True):
                grp, role_end = divmod(int(key[a]), m)
                self._stay(sq, int(region.states[role_end]), uniq_bits[grp], tokens[a:b])
            at, owner = positions_of(view.exit_top, nodes[members])
            if at.shape[0]:
                out_nodes.append(view.exit_node[at])
                out_states.append(region.exit_targets[view.exit_sink[at]])
                out_seq.append(np.full(at.shape[0], sq, dtype=np.int64))
                out_bits.append(uniq_bits[group[owner]])
        if not out_nodes:
            empty = np.zeros(0, dtype=np.int64)
            return Entries(empty, empty, empty, np.zeros((0, words), dtype=np.uint64))
        return Entries(
            nodes=np.concatenate(out_nodes),
            states=np.concatenate(out_states).astype(np.int64),
            seq=np.concatenate(out_seq),
            bits=np.concatenate(out_bits),
        )
