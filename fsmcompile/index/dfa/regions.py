"""Interior regions: dense looping states (inside a JSON string) walked once per shape.

A state that loops on many bytes (an *anchor*: string content) keeps almost every token,
and no two anchors can share a walk, because what follows the closing quote differs. But
the walk only differs once a token *leaves* the anchor. So for each anchor we collect its
*satellites* (states that can only lead back to it: the bytes of a multi-byte character,
an escape sequence) and describe the region by its *shape*: the transitions inside it,
with every way out of the anchor marked as an exit. Equal shapes (every unbounded JSON
string of a schema) share one walk of the vocabulary trie, cached per vocabulary. Each
anchor then pays only for its exit events: the few trie nodes where a token leaves the
region (a token holding a closing quote), from the state it leaves into.

A token index also serves a region's *feeders*: states outside it that enter it on many
bytes, such as the first characters of a string with a `minLength`. Their tokens, too,
differ only once they leave.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import distinct_targets
from fsmcompile.index.dfa.role_functions import RoleWalk, walk_role_functions
from fsmcompile.index.dfa.trie_walk import SinkEvents
from fsmcompile.tables.byte_dfa import ByteDFA, classes_by_first_byte
from fsmcompile.vocabulary import Vocabulary

# A state is an anchor when at least this many byte values loop back to it: string
# content loops on ~90 ASCII bytes; digit and keyword states loop on at most ~62.
_MIN_LOOP_BYTES = 64
# Satellites are the states inside one character or escape sequence: never more than
# this many bytes from the anchor, so candidates come from a bounded BFS. An escaped
# surrogate pair (`\uD83D\uDE00`) is 12: at 6, its first half left the region, so did
# every escape state before it, and each of them walked the vocabulary on its own.
_MAX_SATELLITE_DEPTH = 12
_MAX_REGION_STATES = 63  # with the anchor, roles fit one uint64 bitset


@dataclass(frozen=True, slots=True, eq=False)
class Region:
    """One anchor and its satellites, in shape order (role 0 is the anchor).

    Attributes:
        states: int64[m], the DFA state playing each role.
        exit_targets: int64[k], where the anchor goes on each exit of the shape.
        shape_key: identifies the shape (equal keys: equal walks).
        table: int32[m + k, 256], the shape automaton over raw bytes: roles, then one
            sink per exit; -1 is dead.
    """

    states: npt.NDArray[np.int64]
    exit_targets: npt.NDArray[np.int64]
    shape_key: str
    table: npt.NDArray[np.int32]


@dataclass(frozen=True, slots=True, eq=False)
class ShapeWalk:
    """What the vocabulary does inside one region shape, from each role.

    Attributes:
        stay: uint64[T, 1], bit r set when trie token t stays inside the region from role r.
        events: (node, sink, role bits) where a token leaves the anchor through exit `sink`
            at trie node `node` (the node whose byte was the exit byte).
    """

    stay: npt.NDArray[np.uint64]
    events: SinkEvents


def _full_table(dfa: ByteDFA) -> npt.NDArray[np.int32]:
    """int32[S, 256]: transitions by raw byte."""
    return np.ascontiguousarray(dfa.transitions[:, dfa.class_of_byte])


def _satellites(
    anchor: int,
    targets_of: list[list[int]],
    loop_count: npt.NDArray[np.int64],
    by_first_byte: npt.NDArray[np.int32],
    barred: npt.NDArray[np.bool_],
) -> list[int] | None:
    """States near `anchor` that can only lead back into the region, in BFS order.

    None when the region is too large to be one character's worth of states.
    """
    order: list[int] = []
    seen = {anchor}
    frontier = [anchor]
    for _depth in range(_MAX_SATELLITE_DEPTH):
        nxt: list[int] = []
        for state in frontier:
            for target in targets_of[state]:
                if target in seen or loop_count[target] >= _MIN_LOOP_BYTES or barred[target]:
                    continue
                seen.add(target)
                order.append(target)
                nxt.append(target)
        frontier = nxt
    # Greatest fixpoint: drop candidates with a way out of anchor + candidates.
    members = set(order)
    changed = True
    while changed:
        changed = False
        allowed = members | {anchor}
        for state in list(members):
            if not set(targets_of[state]) <= allowed:
                members.discard(state)
                changed = True
    if len(members) > _MAX_REGION_STATES:
        return None
    return _canonical_order(anchor, members, by_first_byte)


def _canonical_order(
    anchor: int, members: set[int], by_first_byte: npt.NDArray[np.int32]
) -> list[int]:
    """Satellites in BFS order by byte value: equal regions get equal role numbers
    (`by_first_byte`: the moves by byte class, classes in the order of their first
    byte, so a row lists each target first where its first byte takes it)."""
    order: list[int] = []
    queue = [anchor]
    seen = {anchor}
    while queue:
        state = queue.pop(0)
        for target in dict.fromkeys(by_first_byte[state].tolist()):
            if target in members and target not in seen:
                seen.add(target)
                order.append(target)
                queue.append(target)
    return order


def find_regions(
    dfa: ByteDFA, barred: npt.NDArray[np.bool_] | None = None, *, feeders: bool = False
) -> list[Region]:
    """Every anchor of `dfa` with its satellites and shape.

    `barred` states are never part of a region (a grammar lexer bars the states where a
    lexeme can be cut): they can only be exit targets. With `feeders`, each region also
    takes the states that lead into it on many bytes (`_add_feeders`); a token index serves
    them from the shape walk too, where a grammar lexer keeps its exits at the anchor.
    Cost: O(S * C) to count loops (C byte classes) plus a small BFS per anchor; rows by
    raw byte only for the regions' states (a WashingtonPost lexer's 15k states by 256
    bytes cost 45 ms to make and sort).
    """
    trans = dfa.transitions
    class_size = np.bincount(dfa.class_of_byte, minlength=dfa.num_classes)
    loops = trans == np.arange(dfa.num_states)[:, None]
    loop_count = (loops * class_size[None, :]).sum(axis=1)
    if barred is None:
        barred = np.zeros(dfa.num_states, dtype=np.bool_)
    anchors = np.flatnonzero((loop_count >= _MIN_LOOP_BYTES) & ~barred).tolist()
    if not anchors:
        return []
    targets_of = distinct_targets(trans)
    by_first_byte = trans[:, classes_by_first_byte(dfa.class_of_byte)]
    members: list[list[int]] = []
    for anchor in anchors:
        satellites = _satellites(anchor, targets_of, loop_count, by_first_byte, barred)
        if satellites is not None:
            members.append([anchor, *satellites])
    if feeders:
        claimed = barred | (loop_count >= _MIN_LOOP_BYTES)
        claimed[[state for states in members for state in states]] = True
        _add_feeders(members, _full_table(dfa), claimed)
    return [_region(states, dfa) for states in members]


def _add_feeders(
    members: list[list[int]], full: npt.NDArray[np.int32], claimed: npt.NDArray[np.bool_]
) -> None:
    """Extend each region's states with its feeders: unclaimed states that lead into it
    on many bytes (marked claimed here).

    These are the first characters of a string with a `minLength`: each would otherwise
    walk most of the vocabulary on its own, since what follows the string differs. Found
    in rounds over all regions at once (a feeder of a feeder is an earlier character; one
    pass per region and round cost 0.15 s for a schema of 62 strings), each region's in
    the order of their rows in its role numbers, so equal regions number their feeders
    alike. A region whose next round would not fit its roles takes no more.
    """
    if not members:
        return
    num_states = full.shape[0]
    region_of = np.full(num_states + 1, -1, dtype=np.int64)  # last slot: dead
    role_of = np.full(num_states + 1, -1, dtype=np.int64)
    for i, states in enumerate(members):
        region_of[states] = i
        role_of[states] = np.arange(len(states))
    growing = np.ones(len(members), dtype=np.bool_)
    while True:
        rows = np.flatnonzero(~claimed)
        into = region_of[full[rows]]
        row, byte = np.nonzero(into >= 0)
        pairs, counts = np.unique(row * len(members) + into[row, byte], return_counts=True)
        pairs = pairs[counts >= _MIN_LOOP_BYTES]
        # A state that leads into two regions on that many bytes goes to the lower one
        # (`np.unique` keeps each row's first pair).
        first, at = np.unique(pairs // len(members), return_index=True)
        state, region = rows[first], pairs[at] % len(members)
        added = False
        for i in np.flatnonzero(growing).tolist():
            found = state[region == i]
            room = _MAX_REGION_STATES + 1 - len(members[i])
            if found.shape[0] == 0 or found.shape[0] > room:
                growing[i] = False
                continue
            targets = full[found]
            roles = np.where(region_of[targets] == i, role_of[targets], -1)
            found = found[np.lexsort(roles.T[::-1])]
            region_of[found] = i
            role_of[found] = len(members[i]) + np.arange(found.shape[0])
            claimed[found] = True
            members[i] += found.tolist()
            added = True
        if not added:
            return


def _region(states: list[int], dfa: ByteDFA) -> Region:
    """The region of these roles (anchor first): its shape table, with one sink per
    distinct target outside, numbered in role order, then by first byte."""
    role_of = np.full(dfa.num_states + 1, -1, dtype=np.int32)  # last slot: dead
    role_of[states] = np.arange(len(states), dtype=np.int32)
    rows = dfa.transitions[states][:, dfa.class_of_byte]
    table = role_of[rows]  # -1 (dead) stays -1 through the last slot
    # Only the anchor and feeders have exits: satellites lead back by construction.
    role, byte = np.nonzero((rows >= 0) & (table < 0))
    targets: list[int] = []
    for r, b in zip(role.tolist(), byte.tolist(), strict=True):
        target = int(rows[r, b])
        if target not in targets:
            targets.append(target)
        table[r, b] = len(states) + targets.index(target)
    sinks = np.full((len(targets), 256), -1, dtype=np.int32)
    shape = np.concatenate([table, sinks])
    key = hashlib.sha256(shape.tobytes()).hexdigest()
    return Region(
        np.asarray(states, dtype=np.int64), np.asarray(targets, dtype=np.int64), key, shape
    )


def walk_roles(region: Region, vocab: Vocabulary, depth: int = 0, *, up_to: int = 0) -> RoleWalk:
    """Walk the trie below `depth` through a region's shape from all roles at once (cached).

    A grammar lexer needs more than liveness: the state a token stops in decides which
    terminals its lexeme can still become, so the walk keeps each token's end role. A
    grammar also enters a region mid-token (after an opening quote), hence the depth.
    The walks of every depth from 0 to `max(depth, up_to)` are made in one pass and
    cached together (`role_functions.walk_role_functions`).
    """
    cache: dict[tuple[str, int], RoleWalk] = vocab.__dict__.setdefault("_shape_role_walks", {})
    found = cache.get((region.shape_key, depth))
    if found is not None:
        return found
    walks = walk_role_functions(
        region.table, int(region.states.shape[0]), vocab.trie, max(depth, up_to)
    )
    for d, walk in enumerate(walks):
        cache.setdefault((region.shape_key, d), walk)
    return cache[(region.shape_key, depth)]


def walk_shape(region: Region, vocab: Vocabulary) -> ShapeWalk:
    """Which tokens stay in a region's shape from each role, and where they leave (cached)."""
    cache: dict[str, ShapeWalk] = vocab.__dict__.setdefault("_shape_walks", {})
    found = cache.get(region.shape_key)
    if found is not None:
        return found
    roles = walk_roles(region, vocab)
    num_roles = int(region.states.shape[0])
    weights = np.left_shift(np.uint64(1), np.arange(num_roles, dtype=np.uint64))
    # Bit r of token t's word: packed from the flags (summing weighted uint64 columns took
    # 50 ms for a 23-role shape at 128k tokens, packing 4).
    packed = np.packbits(roles.end_role >= 0, axis=1, bitorder="little")
    words = np.zeros((packed.shape[0], 8), dtype=np.uint8)
    words[:, : packed.shape[1]] = packed
    stay = words.view("<u8").reshape(-1)
    # One event per (node, sink) with the bits of the roles that take it.
    key = roles.exit_node * np.int64(region.table.shape[0]) + roles.exit_sink
    uniq, inv = np.unique(key, return_inverse=True)
    bits = np.zeros(uniq.shape[0], dtype=np.uint64)
    np.bitwise_or.at(bits, inv.reshape(-1), weights[roles.exit_role])
    events = SinkEvents(
        nodes=uniq // region.table.shape[0],
        states=uniq % region.table.shape[0] + num_roles,
        bits=bits[:, None],
    )
    walk = ShapeWalk(stay=stay[:, None], events=events)
    cache[region.shape_key] = walk
    return walk
