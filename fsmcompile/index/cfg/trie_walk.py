"""Walk the vocabulary trie through a grammar's lexer, cutting lexemes the way lark does.

From each lexer state (the origin) every token's bytes are fed to the lexer automaton.
While the automaton lives the token stays inside the lexeme. Where a labelled state meets
a byte that kills it, lark cuts the lexeme there and the byte starts a new one. Where the
byte instead leads to an unlabelled live state (`1.` after the number `1`), lark's choice
depends on bytes not seen yet: it keeps the longer lexeme only if the automaton reaches
another labelled state before it dies. The walk follows both branches; the "cut" branch
carries the abandoned automaton state as a constraint that must die before it reaches a
label, and is dropped if it does not.

After a cut the next lexeme's context is the parser's business: it is the context of the
state the parser reaches by shifting the terminal. The walk tries every context some shift
of that terminal can lead to and records which one it assumed, so the parser can check;
contexts the next byte takes to the same lexer state are tried once, as a set
(`ContextSets`). A token's outcome is thus (terminals emitted with the context or context
set assumed after each, lexer state at the end, constraints still open); `seq` ids name
the emitted sequences.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import sorted_unique
from fsmcompile.errors import BudgetExceededError
from fsmcompile.index.cfg.context_sets import ContextSets
from fsmcompile.index.cfg.lexer import LexerShapes
from fsmcompile.index.cfg.regions import MAX_SERVED_DEPTH, Entries, RegionServer
from fsmcompile.index.dfa.levels import LivenessLevels, liveness_levels
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.tables.lexer_walks import step_constraints_of
from fsmcompile.tables.sequences import ConstraintTable, SequenceTable
from fsmcompile.tables.sorted_keys import concatenated_ranges
from fsmcompile.vocabulary.trie import TokenTrie


@dataclass(frozen=True, slots=True, eq=False)
class WalkRecords:
    """Token outcomes per origin, as parallel arrays (E records).

    Attributes:
        node: int64[E], the trie node where the token(s) end.
        state: int64[E], the lexer shape at the token's end.
        seq: int64[E], the emitted sequence id.
        origins: uint64[E, ceil(L/64)], which origin lexer states have this outcome.
    """

    node: npt.NDArray[np.int64]
    state: npt.NDArray[np.int64]
    seq: npt.NDArray[np.int64]
    origins: npt.NDArray[np.uint64]


def _or_runs(
    bits: npt.NDArray[np.uint64], order: npt.NDArray[np.int64], starts: npt.NDArray[np.int64]
) -> npt.NDArray[np.uint64]:
    """Rows `bits[order]` ORed over each run that begins at `starts`.

    Most runs hold one entry (a walk merges rarely when few states share a shape), so
    only the rows of longer runs are gathered and reduced: with wide origin bitsets,
    copying every row twice was most of the walk.
    """
    if order.shape[0] == starts.shape[0]:
        return np.take(bits, order, axis=0)
    out = np.take(bits, order[starts], axis=0)
    lengths = np.diff(np.append(starts, order.shape[0]))
    multi = np.flatnonzero(lengths > 1)
    members = order[np.repeat(lengths > 1, lengths)]
    local_starts = np.concatenate([[0], np.cumsum(lengths[multi])[:-1]])
    out[multi] = np.bitwise_or.reduceat(np.take(bits, members, axis=0), local_starts, axis=0)
    return out


def _picked(
    where: npt.NDArray[np.bool_] | npt.NDArray[np.int64], *arrays: npt.NDArray[Any]
) -> tuple[npt.NDArray[Any], ...]:
    """The rows of each array that `where` picks (a mask or indices), by one `np.take`
    each: on a level's entries a boolean index cost 4-5x as much (35 against 7 µs per
    30k int64, 190 against 40 for their eight-word bitsets)."""
    index = np.flatnonzero(where) if where.dtype == np.bool_ else where
    return tuple(np.take(a, index, axis=0) for a in arrays)


def _equal_runs(
    columns: tuple[npt.NDArray[np.int64], ...],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(order, starts): the rows of non-negative int64 `columns` in lexicographic order
    (stable), and where each run of equal rows begins in that order.

    When the columns' ranges fit, each row is packed into one int64 first, so the sort
    and the run boundaries read one column: stacking the columns into rows, gathering
    them in order and comparing them was a fifth of a typical vocabulary walk.
    """
    spans = [float(c.max(initial=0)) + 1 for c in columns]
    if float(np.prod(spans)) < 2.0**62:
        packed = columns[0].copy()
        for column, span in zip(columns[1:], spans[1:], strict=True):
            packed *= int(span)
            packed += column
        order = np.argsort(packed, kind="stable")
        ordered = packed[order]
        differs = ordered[1:] != ordered[:-1]
    else:
        keys = np.stack(columns, axis=1)
        order = np.lexsort(keys.T[::-1])
        ordered_rows = keys[order]
        differs = np.any(ordered_rows[1:] != ordered_rows[:-1], axis=1)
    starts = np.flatnonzero(np.concatenate([[True], differs])) if order.shape[0] else order
    return order, starts


def _root_live_edges(
    trie: TokenTrie,
    class_of: npt.NDArray[np.int64],
    trans: npt.NDArray[np.int64],
    state: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(entry, root child, byte class) of each first-level edge whose byte the entry's
    shape takes, by entry, then class, then byte.

    Every first-level entry sits at the root, whose children are nearly every byte, and a
    lexeme takes few of them (in a book-flight schema, 8,180 of 64,768 edges lived). The
    root's children are sorted by class once, and each live (entry, class) pair takes
    its class's slice, so dead edges are never made.
    """
    _, children = trie.children(np.zeros(1, dtype=np.int64))
    child_class = class_of[trie.node_byte[children]]
    order = np.argsort(child_class, kind="stable")
    children, child_class = children[order], child_class[order]
    class_start = np.searchsorted(child_class, np.arange(trans.shape[1] + 1))
    entry, live_class = np.nonzero(trans[state] >= 0)
    counts = class_start[live_class + 1] - class_start[live_class]
    at = np.repeat(class_start[live_class], counts) + concatenated_ranges(counts)
    return np.repeat(entry, counts).astype(np.int64), children[at], child_class[at]


MAX_LEVEL_BYTES = 4 << 30
"""Most bytes of origin bitsets one trie level may gather (its edges times the bitset
width). Past this, each numpy step of the level would take seconds, run past any deadline
and hold most of the machine's memory: tens of thousands of lexer states come from long
bounded strings unrolled inside terminals."""


def _check_deadline(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise BudgetExceededError(
            "compile timed out while walking the vocabulary", limit="timeout_s", value=0.0
        )


def _check_level_size(edges: int, words: int, states: int) -> None:
    size = edges * words * 8
    if size > MAX_LEVEL_BYTES:
        raise BudgetExceededError(
            f"the vocabulary walk would gather {size / 2**30:.1f} GiB of lexer-state sets "
            f"at one level ({states:,} lexer states wide, {edges:,} trie edges; at most "
            f"{MAX_LEVEL_BYTES >> 30} GiB): simplify the spec; each distinct bounded string "
            "or repeat costs lexer states per unit of its bound",
            limit="walk_bytes",
            value=float(size),
        )


def walk_grammar_tokens(
    shapes: LexerShapes,
    trie: TokenTrie,
    next_contexts: list[list[int]],
    ignored: list[bool],
    sequences: SequenceTable,
    constraints: ConstraintTable,
    deadline: float | None = None,
    *,
    levels: LivenessLevels | None = None,
    regions: RegionServer | None = None,
    origins: npt.NDArray[np.int64] | None = None,
    context_sets: ContextSets | None = None,
) -> WalkRecords:
    """Outcomes of every text token from every lexer state, level by level through the trie.

    Outcomes where a labelled origin's lexeme ends right before the token (its first byte
    kills the lexeme) are left out: they are the outcomes from the next context's start
    state, prefixed with that terminal, and the runtime composes them.

    Frontier entries are (node, shape, seq, constraint set) with a bitset of the origins
    (lexer states) that reach them, so origins that converge (every state inside a string
    reaches the same state on a letter) are walked once. When an ignored lexeme that began
    at the origin is cut, the bitset is split by the origins' contexts. Cost grows with
    distinct live entries. Inside-lexeme steps are numpy; cuts and constraints go through
    small Python loops over distinct (sequence, terminal, context) and (constraint set,
    byte class) pairs only. With `levels`, at each trie node a shape stands in for every
    shape equivalent to it at the node's height, so the levels of a bounded string merge;
    records then name that shape, which has the same exit set. With `origins`, only those
    lexer states are walked, bit i of a bitset standing for `origins[i]`.
    """
    if origins is None:
        origins = np.arange(shapes.of_state.shape[0], dtype=np.int64)
    of_state = shapes.of_state[origins]
    context_tag = shapes.context_tag[origins]
    num_origins = int(origins.shape[0])
    words = (num_origins + 63) // 64
    trans = shapes.transitions.astype(np.int64)
    label = shapes.label.astype(np.int64)
    has_label = np.append(label >= 0, False)  # index -1 (dead) maps to False
    # Per-node facts are read per edge (`class_of[node_byte[child]]`), not mapped over the
    # whole trie first: that cost ~2 ms a walk, more than the levels below depth 4.
    class_of = shapes.class_of_byte.astype(np.int64)
    node_byte = trie.node_byte
    is_token_node = trie.token_node_flags()
    ignored_arr = np.asarray(ignored + [False], dtype=np.bool_)
    num_terminals = len(next_contexts)
    num_contexts = int(shapes.context_start.shape[0])
    num_classes = int(trans.shape[1])
    if context_sets is None:
        context_sets = ContextSets(next_contexts, num_contexts, num_classes, merge=False)
    assert not (context_sets.merge and any(ignored)), "an ignored cut needs one context"
    assert (context_sets.num_contexts, context_sets.num_classes) == (num_contexts, num_classes)
    assert (sequences.num_terminals, sequences.num_contexts) == (
        num_terminals,
        context_sets.capacity,
    )
    onehot = np.zeros((num_origins, words), dtype=np.uint64)
    idx = np.arange(num_origins)
    onehot[idx, idx // 64] = np.left_shift(np.uint64(1), (idx % 64).astype(np.uint64))
    context_bits = np.zeros((num_contexts, words), dtype=np.uint64)
    for k in range(num_contexts):
        context_bits[k] = (
            np.bitwise_or.reduce(onehot[context_tag == k], axis=0)
            if (context_tag == k).any()
            else 0
        )

    # Per trie node, the shapes a walk may stand for one another there (`walk_levels`).
    if levels is None:
        canon = np.arange(shapes.num_shapes, dtype=np.int32)[None, :]
        row_of_height = np.zeros(1, dtype=np.int64)
    else:
        canon = levels.canon
        row_of_height = levels.row_of_height
    top_height = row_of_height.shape[0] - 1

    def canon_row(nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return row_of_height[np.minimum(trie.node_height[nodes], top_height)]

    root = np.zeros(1, dtype=np.int64)
    start_shape = canon[canon_row(root)[0], of_state] if trie.num_nodes else of_state
    order = np.argsort(start_shape, kind="stable")
    starts0 = np.flatnonzero(np.concatenate([[True], np.diff(start_shape[order]) != 0]))
    state = start_shape[order][starts0].astype(np.int64)
    bits = _or_runs(onehot, order, starts0)
    seq = np.zeros(state.shape[0], dtype=np.int64)
    node = np.zeros(state.shape[0], dtype=np.int64)
    cid = np.zeros(state.shape[0], dtype=np.int64)
    pending: dict[int, list[Entries]] = {}  # served entries' exits, by trie depth
    depth_of = trie.node_depths() if regions is not None else None

    def served(depth: int) -> npt.NDArray[np.bool_]:
        """Hand the frontier's region entries to `regions`; returns which they were."""
        if regions is None or depth_of is None or depth > MAX_SERVED_DEPTH:
            return np.zeros(state.shape[0], dtype=np.bool_)
        picked: npt.NDArray[np.bool_] = (regions.role_of[state] >= 0) & (cid == 0)
        if picked.any():
            left = regions.serve(depth, *_picked(picked, node, state, seq, bits))
            left_depth = depth_of[left.nodes]
            for d in sorted_unique(left_depth).tolist():
                at = left_depth == d
                pending.setdefault(d, []).append(
                    Entries(left.nodes[at], left.states[at], left.seq[at], left.bits[at])
                )
        return picked

    kept = ~served(0)
    state, bits, node, seq, cid = _picked(kept, state, bits, node, seq, cid)
    recorded: list[tuple[npt.NDArray[Any], ...]] = []  # (node, state, seq, bits) per level
    first_level = True
    depth = 0

    while state.shape[0] or any(d > depth for d in pending):
        depth += 1
        _check_deadline(deadline)
        # An edge lives on if the lexeme goes on, or ends (a cut) and the byte starts the
        # next one. At the first level only the former: a lexeme that ends exactly where
        # the token starts has the token read from the next context's start, whose
        # outcomes are recorded there already. The runtime composes those
        # (GrammarIndex.kill_masks); walking them again from every labelled origin would
        # repeat most of the vocabulary per terminal. Dead edges are dropped before the
        # rest of the step; at the first level they are never made.
        if first_level and trie.num_nodes:
            parent, child, cls = _root_live_edges(trie, class_of, trans, state)
        else:
            parent, child = trie.children(node)
            cls = class_of[node_byte[child]]
        _check_level_size(child.shape[0], words, num_origins)
        if child.shape[0] == 0 and not any(d >= depth for d in pending):
            break
        q = state[parent]
        nq = trans[q, cls]
        lab = label[q]
        if not first_level:
            live = np.flatnonzero((nq >= 0) | (lab >= 0))
            parent, child, cls, q, nq, lab = _picked(live, parent, child, cls, q, nq, lab)
        first_level = False
        cut = (lab >= 0) & ~has_label[nq]
        fork = np.where(cut & (nq >= 0), nq, -1)

        # Parts (edge indices): stay in the lexeme, cut after an ignored terminal, cut after
        # a parsed one (once per context the parser may be in next).
        stay = np.flatnonzero(nq >= 0)
        part_edge = [stay]
        part_state = [nq[stay]]
        part_seq = [seq[parent[stay]]]
        part_fork = [np.full(stay.shape[0], -1, dtype=np.int64)]
        # Where each entry's origin bitset is: an index into `bits`, then into `extra`.
        part_src = [parent[stay]]
        extra: list[npt.NDArray[np.uint64]] = []
        num_rows = bits.shape[0]
        is_ign = cut & ignored_arr[lab]
        known = np.flatnonzero(is_ign & (seq[parent] > 0))
        if known.shape[0]:
            # The context each known sequence ended in (looked up per distinct sequence:
            # the table holds every sequence of the walk so far).
            uniq, inv = np.unique(seq[parent[known]], return_inverse=True)
            ends_in = sequences.context
            ctx = np.asarray([ends_in[s] for s in uniq.tolist()], dtype=np.int64)[inv.reshape(-1)]
            part_edge.append(known)
            part_state.append(trans[shapes.context_start[ctx], cls[known]])
            part_seq.append(seq[parent[known]])
            part_fork.append(fork[known])
            part_src.append(parent[known])
        at_origin = np.flatnonzero(is_ign & (seq[parent] == 0))
        for k in range(num_contexts) if at_origin.shape[0] else ():
            split = bits[parent[at_origin]] & context_bits[k]
            some = split.any(axis=1)
            if not some.any():
                continue
            sel = at_origin[some]
            part_edge.append(sel)
            part_state.append(trans[shapes.context_start[k], cls[sel]])
            part_seq.append(seq[parent[sel]])
            part_fork.append(fork[sel])
            part_src.append(np.arange(num_rows, num_rows + sel.shape[0]))
            extra.append(split[some])
            num_rows += sel.shape[0]
        is_tok = np.flatnonzero(cut & ~ignored_arr[lab])
        if is_tok.shape[0]:
            # Each cut edge once per set of contexts the parser may be in after its
            # terminal whose start the byte takes to one state (`ContextSets.split`).
            edge, fresh, ctx = context_sets.split(
                lab[is_tok], cls[is_tok], shapes.context_start, trans
            )
            sel = is_tok[edge]
            keys = sequences.key(seq[parent[sel]], lab[sel], ctx)
            uniq, inv = np.unique(keys, return_inverse=True)
            new = sequences.extend_keys(uniq)
            part_edge.append(sel)
            part_state.append(fresh)
            part_seq.append(new[inv.reshape(-1)])
            part_fork.append(fork[sel])
            part_src.append(parent[sel])
        _check_deadline(deadline)  # each step of a wide level can take seconds
        e_edge = np.concatenate(part_edge)
        e_state = np.concatenate(part_state)
        e_seq = np.concatenate(part_seq)
        e_fork = np.concatenate(part_fork)
        e_src = np.concatenate(part_src)
        keep = e_state >= 0
        e_edge, e_state, e_seq, e_fork, e_src = _picked(keep, e_edge, e_state, e_seq, e_fork, e_src)
        e_cid = cid[parent[e_edge]]
        # Constraints: step the open ones with this byte, add the fork's new one.
        busy = (e_cid != 0) | (e_fork >= 0)
        if busy.any():
            b_idx = np.flatnonzero(busy)
            key = np.stack([e_cid[b_idx], cls[e_edge[b_idx]], e_fork[b_idx]], axis=1)
            uniq, inv = np.unique(key, axis=0, return_inverse=True)
            mapped = np.empty(uniq.shape[0], dtype=np.int64)
            for i, (c_id, c_cls, c_fork) in enumerate(uniq.tolist()):
                stepped = step_constraints_of(
                    shapes.transitions, shapes.label, constraints.sets[c_id], c_cls
                )
                if stepped is None:
                    mapped[i] = -1
                    continue
                if c_fork >= 0:
                    stepped = stepped | {c_fork}
                mapped[i] = constraints.intern(stepped)
            e_cid = e_cid.copy()
            e_cid[b_idx] = mapped[inv.reshape(-1)]
            alive = e_cid >= 0
            e_edge, e_state, e_seq, e_cid, e_src = _picked(
                alive, e_edge, e_state, e_seq, e_cid, e_src
            )
        _check_deadline(deadline)
        e_node = child[e_edge]
        for joined in pending.pop(depth, ()):
            e_node = np.concatenate([e_node, joined.nodes])
            e_seq = np.concatenate([e_seq, joined.seq])
            e_cid = np.concatenate([e_cid, np.zeros(joined.nodes.shape[0], dtype=np.int64)])
            e_state = np.concatenate([e_state, joined.states])
            e_src = np.concatenate([e_src, np.arange(num_rows, num_rows + joined.nodes.shape[0])])
            extra.append(joined.bits)
            num_rows += joined.nodes.shape[0]
        if e_state.shape[0] == 0:
            if any(d > depth for d in pending):
                state = node = seq = cid = e_state
                bits = np.zeros((0, words), dtype=np.uint64)
                continue
            break
        _check_deadline(deadline)
        # Merge equal (node, shape, seq, constraints) entries; OR their origin bitsets.
        e_state = canon[canon_row(e_node), e_state].astype(np.int64)
        order, starts = _equal_runs((e_node, e_seq, e_cid, e_state))
        # Entries point at their origin bitsets (`e_src`) until they merge: every filter
        # of the level moved indices, and each row is gathered once, here.
        source = np.concatenate([bits, *extra]) if extra else bits
        bits = _or_runs(source, e_src[order], starts)
        heads = order[starts]
        node, seq, cid, state = e_node[heads], e_seq[heads], e_cid[heads], e_state[heads]
        at_token = is_token_node[node]
        if at_token.any():
            recorded.append(_picked(at_token, node, state, seq, bits))
        kept = ~served(depth)
        node, seq, cid, state, bits = _picked(kept, node, seq, cid, state, bits)
    if not recorded:
        empty = np.zeros(0, dtype=np.int64)
        return WalkRecords(empty, empty, empty, np.zeros((0, words), dtype=np.uint64))
    return WalkRecords(*(np.concatenate(column) for column in zip(*recorded, strict=True)))


def walk_levels(
    shapes: LexerShapes,
    shape_xset: npt.NDArray[np.int32],
    regions: RegionServer,
    height: int,
    deadline: float | None = None,
) -> LivenessLevels:
    """Which shapes a walk may merge at a trie node of each height.

    A record keeps only the exit set of the shape a token ends in, and a step depends on
    the shape only through its transitions and label (the cut). So two shapes that agree
    on label and exit set along every path of h bytes leave the same records below a node
    of height h. The 200 levels of `"[^"]{0,200}"` are such shapes: a walk that kept them
    apart paid a full trie walk per level. Region roles keep their region, so a served
    shape is only replaced by one served the same way.
    """
    key = np.stack(
        [shapes.label.astype(np.int64), shape_xset.astype(np.int64), regions.region_of], axis=1
    )
    _, initial = np.unique(key, axis=0, return_inverse=True)
    dfa = ByteDFA(
        transitions=shapes.transitions,
        class_of_byte=shapes.class_of_byte,
        accepting=shapes.label >= 0,
    )
    return liveness_levels(dfa, height, deadline, initial=initial.reshape(-1).astype(np.int64))
