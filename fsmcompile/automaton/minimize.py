"""DFA minimization: the Nerode classes of a trimmed DFA, in passes matched to its shape.

Round-based refinement (Moore) needs as many rounds as the longest chain of states it
must tell apart, and `"[^"]{0,2000}"` is a chain 8,000 bytes long: 8,000 numpy rounds.
So states are split into three kinds and each gets the algorithm that suits it:

1. *Finite*: cannot reach a cycle (finite residual language). Peeled from the sinks
   upwards (Kahn's order) and hash-consed by (shape, classes of targets): Revuz's
   algorithm, exact in one Python pass over the edges whatever the chain length.
2. *Core*: reachable from a cycle. Usually the small loop at a pattern's end (`\\s*`,
   `\\d+`). Vectorized Moore rounds with the finite classes fixed; Hopcroft if a long
   chain between two loops keeps Moore splitting one link per round.
3. *Upstream*: can reach a cycle but no cycle reaches them: the long prefix chains.
   Peeled from the sources, then hash-consed in reverse order like the finite ones.
   Exact because every class of kinds 1 and 2 is already in the hash table, and a
   state's class is fixed by its acceptance and its targets' classes.

A state's *shape* is its accepting flag and the set of classes with a transition.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.budget import Budget
from fsmcompile.automaton.fragment import Flags, Fragment, Table, sorted_unique, unique_rows
from fsmcompile.automaton.hopcroft import refine

Blocks = npt.NDArray[np.int32]
"""int32[S]: the equivalence class of each state."""

_MOORE_ROUNDS = 64  # past this, Hopcroft is cheaper than more numpy rounds
_SLOW_SPLIT = 512  # a round adding fewer than states/512 blocks means a long chain
_CHECK_EVERY = 4096  # Python-loop states between deadline checks


def equivalence_classes(trans: Table, accepting: Flags, budget: Budget) -> Blocks:
    """The Nerode classes of a DFA whose every state can reach an accepting state.

    Args:
        trans: int32[S, C], -1 dead.
        accepting: bool[S].
        budget: checked between passes and inside the Python loops.

    Returns:
        int32[S] class ids 0..K-1 (not canonically ordered: `canonical.py` renumbers).
    """
    graph = _Graph(trans, accepting)
    if graph.forward_only:
        # Chains and glued literals are numbered in reading order: every edge goes to a
        # higher number, so descending numbers already put each state after its targets.
        finite = list(range(graph.num_states - 1, -1, -1))
    else:
        finite = graph.peel_from_sinks(budget)
    graph.hash_in_order(finite, budget)
    rest = [s for s in range(graph.num_states) if graph.canon[s] < 0]
    if rest:
        upstream = graph.peel_from_sources(rest, budget)
        core_mask = np.zeros(graph.num_states, dtype=np.bool_)
        core_mask[rest] = True
        core_mask[upstream] = False
        core = np.nonzero(core_mask)[0]
        if core.size:
            graph.classify_core(trans, core, budget)
        graph.hash_in_order(reversed(upstream), budget)
    return np.array(graph.canon, dtype=np.int32)


def quotient(trans: Table, accepting: Flags, blocks: Blocks) -> tuple[Table, Flags, int]:
    """The DFA over classes: (trans int32[K, C], accepting bool[K], start class)."""
    _, dense = np.unique(blocks, return_inverse=True)
    dense = dense.reshape(-1).astype(np.int32)
    _, representative = np.unique(dense, return_index=True)
    lookup = np.append(dense, np.int32(-1))
    return (
        lookup[trans[representative]].astype(np.int32),
        accepting[representative],
        int(dense[0]),
    )


def minimized(frag: Fragment, budget: Budget) -> Fragment:
    """`frag` minimized, start still state 0 (used on repetition bodies before copying)."""
    if frag.minimal or frag.num_states <= 1:
        return frag
    blocks = equivalence_classes(frag.trans, frag.accepting, budget)
    trans, accepting, start = quotient(frag.trans, frag.accepting, blocks)
    if start != 0:  # swap the start class into slot 0
        perm = np.arange(trans.shape[0], dtype=np.int32)
        perm[[0, start]] = perm[[start, 0]]
        lookup = np.append(perm, np.int32(-1))  # old id -> new id (a swap is its own inverse)
        trans = lookup[trans[perm]].astype(np.int32)
        accepting = accepting[perm]
    return Fragment(trans, accepting, minimal=True)


def max_word_length(frag: Fragment) -> int | None:
    """The longest accepted word in bytes, or None when the language is infinite."""
    graph = _Graph(frag.trans, frag.accepting)
    order = graph.peel_from_sinks(Budget(frag.num_states, None))
    if len(order) < frag.num_states:
        return None  # some state reaches a cycle (all states are live)
    longest = [0] * frag.num_states
    succ, succ_ptr = graph.succ, graph.succ_ptr
    for s in order:  # targets come first
        targets = succ[succ_ptr[s] : succ_ptr[s + 1]]
        if targets:
            longest[s] = 1 + max(longest[t] for t in targets)
    return longest[0]


class _Graph:
    """The DFA as Python lists for the per-state passes, plus the class table."""

    def __init__(self, trans: Table, accepting: Flags) -> None:
        num_states = self.num_states = int(trans.shape[0])
        live = trans >= 0
        src, cls = np.nonzero(live)
        dst = trans[src, cls]
        points = np.arange(num_states + 1)
        self.ptr: list[int] = np.searchsorted(src, points).tolist()
        self.dst: list[int] = dst.tolist()
        # Peeling needs each (state, target) pair once: UTF-8 continuation ranges often
        # split into several classes with one target, and every edge is a Python step.
        pairs = sorted_unique(src.astype(np.int64) * num_states + dst)
        pair_src, pair_dst = pairs // num_states, pairs % num_states
        self.succ_ptr: list[int] = np.searchsorted(pair_src, points).tolist()
        self.succ: list[int] = pair_dst.tolist()
        order = np.argsort(pair_dst, kind="stable")
        self.preds: list[int] = pair_src[order].tolist()
        self.pred_ptr: list[int] = np.searchsorted(pair_dst[order], points).tolist()
        self.out_degree: list[int] = np.diff(np.asarray(self.succ_ptr)).tolist()
        self.forward_only = bool((pair_dst > pair_src).all())
        self.pair_dst = pair_dst
        self.pair_src = pair_src
        shape_rows = np.concatenate([accepting[:, None], live], axis=1).astype(np.int32)
        self.shape: list[int] = unique_rows(shape_rows)[1].tolist()
        self.canon = [-1] * num_states
        self.table: dict[tuple[int, ...], int] = {}

    def key(self, s: int) -> tuple[int, ...]:
        canon = self.canon
        return (self.shape[s], *[canon[t] for t in self.dst[self.ptr[s] : self.ptr[s + 1]]])

    def peel_from_sinks(self, budget: Budget) -> list[int]:
        """States with finite residuals, each after all its targets (Kahn, reversed edges)."""
        pending = list(self.out_degree)
        order = [s for s in range(self.num_states) if pending[s] == 0]
        preds, pred_ptr = self.preds, self.pred_ptr
        for count, s in enumerate(order):
            if count % _CHECK_EVERY == 0:
                budget.check_time()
            for p in preds[pred_ptr[s] : pred_ptr[s + 1]]:
                pending[p] -= 1
                if not pending[p]:
                    order.append(p)
        return order

    def peel_from_sources(self, states: list[int], budget: Budget) -> list[int]:
        """Of `states` (closed under predecessors), those no cycle reaches, sources first."""
        inside_np = np.zeros(self.num_states, dtype=np.bool_)
        inside_np[states] = True
        from_inside = inside_np[self.pair_src] & inside_np[self.pair_dst]
        in_degree = np.bincount(self.pair_dst[from_inside], minlength=self.num_states).tolist()
        inside = inside_np.tolist()
        succ, succ_ptr = self.succ, self.succ_ptr
        order = [s for s in states if in_degree[s] == 0]
        for count, s in enumerate(order):
            if count % _CHECK_EVERY == 0:
                budget.check_time()
            for t in succ[succ_ptr[s] : succ_ptr[s + 1]]:
                if inside[t]:
                    in_degree[t] -= 1
                    if not in_degree[t]:
                        order.append(t)
        return order

    def hash_in_order(self, states: Iterable[int], budget: Budget) -> None:
        """Class each state by its key; every target must already have a class."""
        canon, shape, ptr, dst = self.canon, self.shape, self.ptr, self.dst
        table = self.table
        intern = table.setdefault
        for count, s in enumerate(states):
            if count % _CHECK_EVERY == 0:
                budget.check_time()
            key = (shape[s], *[canon[t] for t in dst[ptr[s] : ptr[s + 1]]])
            canon[s] = intern(key, len(table))

    def classify_core(self, trans: Table, core: npt.NDArray[np.intp], budget: Budget) -> None:
        """Exact classes for the states reachable from a cycle, then register their keys."""
        fixed = len(self.table)
        blocks = np.array(self.canon, dtype=np.int32)
        blocks[core] = fixed + np.array([self.shape[s] for s in core], dtype=np.int32)
        if not _moore(trans, blocks, core, fixed, budget):
            blocks = _hopcroft_on(trans, blocks, core, fixed, budget)
        new_ids: dict[int, int] = {}
        canon = self.canon
        for s in core.tolist():
            canon[s] = new_ids.setdefault(int(blocks[s]), fixed + len(new_ids))
        seen: set[int] = set()
        for s in core.tolist():
            if canon[s] not in seen:
                seen.add(canon[s])
                self.table[self.key(s)] = canon[s]


def _moore(
    trans: Table, blocks: Blocks, core: npt.NDArray[np.intp], fixed: int, budget: Budget
) -> bool:
    """Refine `blocks` on the `core` states in place; True once the partition is stable.

    States outside `core` keep their (final) labels, all below `fixed`.
    """
    rows = trans[core]
    width = rows.shape[1] + 1
    count = len(sorted_unique(blocks[core]))
    for round_number in range(_MOORE_ROUNDS):
        budget.check_time()
        lookup = np.append(blocks, np.int32(-1))
        signature = np.empty((core.size, width), dtype=np.int32)
        signature[:, 0] = blocks[core]
        signature[:, 1:] = lookup[rows]
        _, inverse = unique_rows(signature)
        new_count = int(inverse.max()) + 1
        blocks[core] = fixed + inverse.astype(np.int32)
        if new_count == count:
            return True
        if round_number >= 2 and (new_count - count) * _SLOW_SPLIT < core.size:
            return False  # one chain link per round: let Hopcroft finish
        count = new_count
    return False


def _hopcroft_on(
    trans: Table, blocks: Blocks, core: npt.NDArray[np.intp], fixed: int, budget: Budget
) -> Blocks:
    """Hopcroft on the core plus one representative per fixed class (the splitters)."""
    settled = np.nonzero((blocks >= 0) & (blocks < fixed))[0]
    classes, first = np.unique(blocks[settled], return_index=True)
    reps = settled[first]
    members = np.concatenate([core, reps])
    rep_of_class = np.full(max(fixed, 1), -1, dtype=np.int32)
    rep_of_class[classes] = np.arange(core.size, members.size, dtype=np.int32)
    sub = np.full(trans.shape[0] + 1, -1, dtype=np.int32)  # last slot: dead stays dead
    sub[core] = np.arange(core.size, dtype=np.int32)
    sub[settled] = rep_of_class[blocks[settled]]
    refined = refine(sub[trans[members]], blocks[members].astype(np.int32), budget)
    out = blocks.copy()
    out[core] = fixed + refined[: core.size]
    return out
