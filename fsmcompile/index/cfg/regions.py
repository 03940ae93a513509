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

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import sorted_unique
from fsmcompile.index.cfg.lexer import LexerShapes
from fsmcompile.index.dfa.regions import Region, find_regions, walk_roles
from fsmcompile.index.wide_rows import unique_wide_rows
from fsmcompile.tables.bits import bitmask_words, or_token_runs, unpack_row
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.tables.sorted_keys import concatenated_ranges, positions_of
from fsmcompile.vocabulary import Vocabulary

MAX_SERVED_DEPTH = 4
"""Entries deeper than this are walked: their subtrees are small, and every served depth
widens the one walk of the trie each region shape costs (all depths in one pass,
`role_functions.py`: 60-120 ms per shape with Llama 3, cached per tokenizer). Serving
down to depth 16 cost a fresh process 75 per-depth walks for Github_ultra/o4826 (6.4 s
to compile, 5.8 s at depth 4), and warm compiles of typical schemas were 2% slower; the
groups an index ends with barely change (-2%)."""
KEPT_ROWS = 1024
"""Packed rows kept per vocabulary (16 KiB each at 128k tokens, 16 MiB in all): schemas
of one family meet the same slices again, and the bound keeps a server's memory flat."""
DENSE_MIN_TOKENS = 256
"""A group with this many tokens or more is stored as a packed row, a smaller one as a
token list: at ~20 ns per listed id, a list of 256 costs about one dense OR of a
128k-token row. Only packed stay patterns need a key in the kept rows."""

ViewKey = tuple[str, int, int]
"""A cached walk's (region shape, role, depth)."""
Slices = bytes
"""Sorted (start, stop) ranges of a view's `inside_tokens` that a stay group gathers, as
the bytes of an int64[n, 2] array: a key made in one copy, not one tuple per range."""


class KeptRows:
    """The packed rows of recent stay groups, by (view, slices), least recently used
    dropped first: every schema with a free string packs the same ~120k-token interior,
    which costs milliseconds each time."""

    def __init__(self, max_rows: int = KEPT_ROWS) -> None:
        self.max_rows = max_rows
        self._rows: OrderedDict[tuple[ViewKey, Slices], npt.NDArray[np.int32]] = OrderedDict()
        self._lock = threading.Lock()  # compiles of one vocabulary may run in threads

    def get(self, key: tuple[ViewKey, Slices]) -> npt.NDArray[np.int32] | None:
        with self._lock:
            row = self._rows.get(key)
            if row is not None:
                self._rows.move_to_end(key)
            return row

    def put(self, key: tuple[ViewKey, Slices], row: npt.NDArray[np.int32]) -> None:
        with self._lock:
            self._rows[key] = row
            self._rows.move_to_end(key)
            while len(self._rows) > self.max_rows:
                self._rows.popitem(last=False)


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
    """Groups of tokens that stay inside a region: a packed row for each dense group
    (`DENSE_MIN_TOKENS` tokens or more), the token ids of each other one.

    Attributes:
        seq: the sequence emitted before the region was entered, per group.
        state: the shape the tokens end in, per group.
        sizes: the number of tokens of each group.
        patterns: the token ids of each group below `DENSE_MIN_TOKENS`, else None.
        rows: the packed row of each dense group (packed when served, or kept from an
            earlier schema's walk), else None.
        kept: the vocabulary's kept rows.
        origin_blocks: the groups' origin bitsets (uint64 rows), one block per serve:
            `origins` joins them.
    """

    kept: KeptRows

    seq: list[int] = field(default_factory=list)
    state: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    patterns: list[npt.NDArray[np.int64] | None] = field(default_factory=list)
    rows: list[npt.NDArray[np.int32] | None] = field(default_factory=list)
    origin_blocks: list[npt.NDArray[np.uint64]] = field(default_factory=list)

    def origins(self, words: int) -> npt.NDArray[np.uint64]:
        """uint64[groups, words]: the origin bitset of each group."""
        if not self.origin_blocks:
            return np.zeros((0, words), dtype=np.uint64)
        return np.concatenate(self.origin_blocks)

    def tokens(self, group: int, vocab_size: int) -> npt.NDArray[np.int64]:
        """The token ids of a group, read back from its packed row for a dense one."""
        pattern = self.patterns[group]
        if pattern is not None:
            return pattern
        row = self.rows[group]
        assert row is not None
        return np.flatnonzero(unpack_row(row, vocab_size)).astype(np.int64)

    def packed_rows(
        self, chosen: list[int], vocab_size: int
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
        """(int32[R, W] distinct row objects, the index of each chosen dense group's row
        among them). Groups that met the same slices share one kept row: a schema's
        hundred dense groups hold about ten rows, and copying and hashing each group's
        16 KB again was most of grouping."""
        position: dict[int, int] = {}
        distinct: list[npt.NDArray[np.int32]] = []
        index = np.empty(len(chosen), dtype=np.int64)
        for i, g in enumerate(chosen):
            row = self.rows[g]
            assert row is not None, "a listed group has no packed row"
            at = position.setdefault(id(row), len(distinct))
            if at == len(distinct):
                distinct.append(row)
            index[i] = at
        if not distinct:
            return np.zeros((0, bitmask_words(vocab_size)), np.int32), index
        return np.stack(distinct), index


@dataclass(frozen=True, slots=True, eq=False)
class _RoleView:
    """One role's part of a cached walk at one depth: the staying tokens and the exits,
    each sorted by their depth-d ancestor (the served entry's node, so an entry's tokens
    are one slice), staying tokens then by end role.

    The staying tokens fall into runs of one (ancestor, end role): run r spans
    `inside_tokens[run_start[r] : run_start[r + 1]]`, ends in role `run_end[r]` and sits
    under node `run_top[r]`. Roles and sinks are the region's, not a lexer's shapes: the
    view serves every schema whose lexer has a region of this shape.
    """

    inside_tokens: npt.NDArray[np.int64]
    run_top: npt.NDArray[np.int64]
    run_end: npt.NDArray[np.int64]
    run_start: npt.NDArray[np.int64]
    exit_node: npt.NDArray[np.int64]
    exit_sink: npt.NDArray[np.int64]
    exit_top: npt.NDArray[np.int64]
    key: ViewKey


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
        # Regions of one shape share their walks: a served entry is looked up by its view
        # (shape, role), and its region maps the view's roles and sinks back to shapes.
        kinds: dict[str, int] = {}
        kind = [kinds.setdefault(r.shape_key, len(kinds)) for r in self.regions]
        width = max((r.states.shape[0] for r in self.regions), default=1)
        sinks = max([1, *(r.exit_targets.shape[0] for r in self.regions)])
        self.view_of = np.full(shapes.num_shapes, -1, dtype=np.int64)
        self.role_shape = np.full((len(self.regions), width), -1, dtype=np.int64)
        self.sink_shape = np.full((len(self.regions), sinks), -1, dtype=np.int64)
        for i, region in enumerate(self.regions):
            self.view_of[region.states] = kind[i] * width + np.arange(region.states.shape[0])
            self.role_shape[i, : region.states.shape[0]] = region.states
            self.sink_shape[i, : region.exit_targets.shape[0]] = region.exit_targets
        self.vocab = vocab
        trie = vocab.trie
        self._token_node = trie.token_node.astype(np.int64)
        self._token_ids = trie.token_ids
        self.stays = StayGroups(vocab.__dict__.setdefault("_region_kept_rows", KeptRows()))

    def take_stays(self) -> StayGroups:
        """The stay groups served so far, leaving an empty list for the next walk."""
        taken = self.stays
        self.stays = StayGroups(taken.kept)
        return taken

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
        views: dict[ViewKey, _RoleView] = self.vocab.__dict__.setdefault("_region_role_views", {})
        key = (region.shape_key, role, depth)
        view = views.get(key)
        if view is None:
            walk = walk_roles(region, self.vocab, depth, up_to=MAX_SERVED_DEPTH)
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
            changes = np.flatnonzero(
                (inside_top[1:] != inside_top[:-1]) | (inside_end[1:] != inside_end[:-1])
            )
            run_first = np.concatenate([[0], changes + 1]) if inside.shape[0] else changes
            view = _RoleView(
                inside_tokens=tokens,
                run_top=inside_top[run_first],
                run_end=inside_end[run_first],
                run_start=np.append(run_first, inside.shape[0]).astype(np.int64),
                exit_node=walk.exit_node[leaving],
                exit_sink=walk.exit_sink[leaving],
                exit_top=exit_top,
                key=key,
            )
            views[key] = view
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
        returns the entries where tokens leave it. Staying runs with equal (view, seq,
        end shape, origins) form one group: their entries' nodes only select which
        subtrees count. All entries of one view (region shape and role, shared by every
        region of that shape) are looked up at once: the Python work is per view and per
        group, not per entry.
        """
        view_at = self.view_of[states]
        by_view = np.argsort(view_at, kind="stable")
        # Where each view's entries start in `by_view` (view ids are >= 0), then the end.
        starts = np.flatnonzero(np.diff(view_at[by_view], prepend=-1))
        bounds = np.append(starts, view_at.shape[0]).tolist()
        region_at = self.region_of[states]
        views: list[_RoleView] = []
        run_entry, run_view, run_a, run_b, run_state = [], [], [], [], []
        exit_entry, exit_node, exit_state = [], [], []
        for k in range(len(bounds) - 1):
            members = by_view[bounds[k] : bounds[k + 1]]
            shape = int(states[members[0]])
            view = self._walk(
                self.regions[int(self.region_of[shape])], int(self.role_of[shape]), depth
            )
            views.append(view)
            at, owner = positions_of(view.run_top, nodes[members])
            runs_of = members[owner]
            run_entry.append(runs_of)
            run_view.append(np.full(at.shape[0], k, dtype=np.int64))
            run_a.append(view.run_start[at])
            run_b.append(view.run_start[at + 1])
            run_state.append(self.role_shape[region_at[runs_of], view.run_end[at]])
            at, owner = positions_of(view.exit_top, nodes[members])
            leaves = members[owner]
            exit_entry.append(leaves)
            exit_node.append(view.exit_node[at])
            exit_state.append(self.sink_shape[region_at[leaves], view.exit_sink[at]])
        entry = np.concatenate(run_entry)
        if entry.shape[0]:
            self._stay_runs(
                views,
                np.concatenate(run_view),
                np.concatenate(run_a),
                np.concatenate(run_b),
                np.concatenate(run_state),
                seq[entry],
                np.take(bits, entry, axis=0),
            )
        leaving = np.concatenate(exit_entry)
        return Entries(
            nodes=np.concatenate(exit_node),
            states=np.concatenate(exit_state),
            seq=seq[leaving],
            bits=np.take(bits, leaving, axis=0),
        )

    def _stay_runs(
        self,
        views: list[_RoleView],
        run_view: npt.NDArray[np.int64],
        run_a: npt.NDArray[np.int64],
        run_b: npt.NDArray[np.int64],
        state: npt.NDArray[np.int64],
        seq: npt.NDArray[np.int64],
        bits: npt.NDArray[np.uint64],
    ) -> None:
        """One stay group per distinct (view, seq, end shape, origins) of the staying runs
        (run i: `views[run_view[i]].inside_tokens[run_a[i] : run_b[i]]`).

        The end shape names the region, so a group's runs come from one lexer state and
        sit under distinct nodes: its tokens are distinct. A dense group's slices of the
        view are the key its packed row is kept under for the next schema that meets the
        same slices.
        """
        keys = np.stack([run_view, seq, state], axis=1).astype(np.uint64)
        first, group = unique_wide_rows(bits, keys)
        # Runs by group, then by slice start. A dense group's row is kept already or packed
        # from its slices; a listed group of one run is a slice of its view's tokens (no
        # copy), the runs of the other listed groups are gathered at once, by view.
        order = np.lexsort((run_a, group))
        run_a, run_b, run_view = run_a[order], run_b[order], run_view[order]
        runs = np.bincount(group, minlength=first.shape[0])
        run_start = np.concatenate([[0], np.cumsum(runs)])
        sizes = np.add.reduceat(run_b - run_a, run_start[:-1]) if first.shape[0] else runs
        run_start_list, size_list = run_start.tolist(), sizes.tolist()
        view_list = run_view.tolist()
        slices = np.stack([run_a, run_b], axis=1)
        sources: list[tuple[ViewKey, Slices] | None] = [None] * len(size_list)
        rows: list[npt.NDArray[np.int32] | None] = [None] * len(size_list)
        for g in np.flatnonzero(sizes >= DENSE_MIN_TOKENS).tolist():
            lo, hi = run_start_list[g], run_start_list[g + 1]
            source = sources[g] = (views[view_list[lo]].key, slices[lo:hi].tobytes())
            rows[g] = self.stays.kept.get(source)
        self._pack_new(views, rows, sources, runs, run_view, run_a, run_b)
        wanted = np.array([row is None for row in rows], dtype=np.bool_)
        lengths = np.where(np.repeat((runs > 1) & wanted, runs), run_b - run_a, 0)
        ends = np.cumsum(lengths)
        gathered = np.empty(int(ends[-1]) if ends.shape[0] else 0, dtype=np.int64)
        for k in sorted_unique(run_view[lengths > 0]).tolist():
            sel = np.flatnonzero((run_view == k) & (lengths > 0))
            step = concatenated_ranges(lengths[sel])
            at = np.repeat(ends[sel] - lengths[sel], lengths[sel]) + step
            gathered[at] = views[k].inside_tokens[np.repeat(run_a[sel], lengths[sel]) + step]
        gathered_start = np.concatenate([[0], ends])[run_start].tolist()
        a_list, b_list = run_a.tolist(), run_b.tolist()
        stays = self.stays
        stays.seq += seq[first].tolist()
        stays.state += state[first].tolist()
        stays.sizes += size_list
        stays.rows += rows
        stays.origin_blocks.append(np.take(bits, first, axis=0))
        for g, row in enumerate(rows):
            lo, hi = run_start_list[g], run_start_list[g + 1]
            if row is not None:  # a kept row needs no tokens
                stays.patterns.append(None)
            elif hi - lo == 1:
                stays.patterns.append(views[view_list[lo]].inside_tokens[a_list[lo] : b_list[lo]])
            else:
                stays.patterns.append(gathered[gathered_start[g] : gathered_start[g + 1]])

    def _pack_new(
        self,
        views: list[_RoleView],
        rows: list[npt.NDArray[np.int32] | None],
        sources: list[tuple[ViewKey, Slices] | None],
        runs: npt.NDArray[np.int64],
        run_view: npt.NDArray[np.int64],
        run_a: npt.NDArray[np.int64],
        run_b: npt.NDArray[np.int64],
    ) -> None:
        """Pack the dense groups no kept row answered straight from their runs' slices
        of the views (runs ordered by group), filling `rows` and the kept rows.

        Gathering a group's ids first and packing them through a bool matrix made
        several passes over ~120k ids per string interior, ~4 ms of a typical schema.
        """
        new = [g for g, source in enumerate(sources) if source is not None and rows[g] is None]
        if not new:
            return
        slot = np.full(len(rows), -1, dtype=np.int64)
        slot[new] = np.arange(len(new))
        run_slot = np.repeat(slot, runs)
        packed = np.zeros((len(new), bitmask_words(self.vocab.size)), dtype=np.int32)
        for k in sorted_unique(run_view[run_slot >= 0]).tolist():
            sel = np.flatnonzero((run_view == k) & (run_slot >= 0))
            or_token_runs(packed, views[k].inside_tokens, run_a[sel], run_b[sel], run_slot[sel])
        for g, row in zip(new, packed, strict=True):
            own = row.copy()  # a row of its own: the kept rows bound memory by count
            rows[g] = own
            source = sources[g]
            assert source is not None
            self.stays.kept.put(source, own)
