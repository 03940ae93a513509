"""The automaton stage's C kernels against plain references: the minimizer's partition
refinement (Hopcroft), reachability, breadth-first numbering and gluing concatenation."""

from __future__ import annotations

import numpy as np
import pytest

from fsmcompile.automaton import build_dfa
from fsmcompile.frontend.regex.parser import parse_regex


def reference_classes(trans: np.ndarray, accepting: np.ndarray) -> list[int]:
    """Nerode classes by plain Moore refinement (slow, obviously right)."""
    blocks = [int(a) for a in accepting]
    while True:
        signatures: dict[tuple[int, tuple[int, ...]], int] = {}
        new = []
        for s in range(len(blocks)):
            row = tuple(blocks[t] if t >= 0 else -1 for t in trans[s].tolist())
            new.append(signatures.setdefault((blocks[s], row), len(signatures)))
        if len(signatures) == len(set(blocks)):
            return new
        blocks = new


def same_partition(left: list[int], right: list[int]) -> bool:
    pairs = set(zip(left, right, strict=True))
    return len(pairs) == len(set(left)) == len(set(right))


@pytest.mark.parametrize("seed", range(60))
def test_equivalence_classes_match_reference_on_random_dfas(seed: int) -> None:
    from fsmcompile.automaton.fragment import trimmed
    from fsmcompile.automaton.minimize import equivalence_classes
    from fsmcompile.budget import Budget

    rng = np.random.default_rng(seed)
    big = seed >= 40  # a few hundred states over up to 8 classes: many splits per block
    size = int(rng.integers(50, 400)) if big else int(rng.integers(2, 40))
    width = int(rng.integers(1, 9 if big else 4))
    trans = rng.integers(-1, size, size=(size, width)).astype(np.int32)
    if seed % 2:  # mostly chains, as bounded repeats and literals make them
        trans[:, 0] = np.minimum(np.arange(size) + 1, size - 1)
        trans[-1, 0] = -1
    if seed % 3 == 0:  # sparse: most transitions missing, so shapes differ
        trans[rng.random(trans.shape) < 0.6] = -1
    accepting = rng.random(size) < 0.3
    accepting[-1] = True
    frag = trimmed(trans, accepting, prune_dead_ends=True)
    if frag.is_nothing:
        return
    got = equivalence_classes(frag.trans, frag.accepting, Budget(10**6, None)).tolist()
    assert same_partition(got, reference_classes(frag.trans, frag.accepting))


@pytest.mark.parametrize("seed", range(10))
def test_hopcroft_refine_matches_reference(seed: int) -> None:
    from fsmcompile.automaton.fragment import trimmed
    from fsmcompile.automaton.hopcroft import refine
    from fsmcompile.automaton.minimize import shape_blocks
    from fsmcompile.budget import Budget

    rng = np.random.default_rng(100 + seed)
    size = int(rng.integers(2, 60))
    trans = rng.integers(-1, size, size=(size, 2)).astype(np.int32)
    accepting = rng.random(size) < 0.4
    frag = trimmed(trans, accepting, prune_dead_ends=True)
    if frag.is_nothing:
        return
    # Any labels of the shape partition will do, not only dense ones.
    start = shape_blocks(frag.trans, frag.accepting) * 7 + 3
    got = refine(frag.trans, start, Budget(10**6, None))
    assert got.dtype == np.int32 and sorted(set(got.tolist())) == list(range(got.max() + 1))
    assert same_partition(got.tolist(), reference_classes(frag.trans, frag.accepting))


@pytest.mark.parametrize(
    ("trans", "blocks", "num_blocks", "match"),
    [
        (np.zeros((2, 2), dtype=np.int64), np.zeros(2, dtype=np.int32), 1, "int32"),
        (np.zeros(4, dtype=np.int32), np.zeros(4, dtype=np.int32), 1, "int32"),
        (np.zeros((2, 2), dtype=np.int32), np.zeros(3, dtype=np.int32), 1, "one id per state"),
        (np.full((2, 2), 2, dtype=np.int32), np.zeros(2, dtype=np.int32), 1, "names no state"),
        (np.zeros((2, 2), dtype=np.int32), np.array([0, 1], dtype=np.int32), 1, "num_blocks"),
    ],
)
def test_refine_rejects_bad_tables(trans, blocks, num_blocks, match) -> None:
    from fsmcompile import _native

    with pytest.raises(ValueError, match=match):
        _native.refine_partition(trans, blocks, num_blocks)


def test_refine_on_a_long_chain_between_loops_is_exact() -> None:
    """(ab)*x{0,3000}(cd)*: a chain thousands of states long that both comes from and leads
    into cycles, the case Moore rounds split one link at a time."""
    from fsmcompile.automaton.minimize import equivalence_classes
    from fsmcompile.budget import Budget

    dfa = build_dfa(parse_regex("(ab)*x{0,3000}(cd)*"))
    # Unminimize: two copies of every state, each edge to either copy.
    n = dfa.num_states
    trans = np.vstack([dfa.transitions, dfa.transitions]).astype(np.int32)
    rng = np.random.default_rng(5)
    trans = np.where((trans >= 0) & (rng.random(trans.shape) < 0.5), trans + n, trans)
    accepting = np.concatenate([dfa.accepting, dfa.accepting])
    got = equivalence_classes(trans.astype(np.int32), accepting, Budget(10**6, None))
    assert np.array_equal(got[:n], got[n:])  # each state with its copy
    assert len(set(got.tolist())) == n  # and nothing else merged


def reference_reached(trans: np.ndarray, roots: list[int], backward: bool) -> list[bool]:
    """States reached from `roots` along (or against) the transitions, by a set search."""
    edges = [(s, int(t)) for s in range(trans.shape[0]) for t in trans[s] if t >= 0]
    step = {(t, s) if backward else (s, t) for s, t in edges}
    seen, todo = set(roots), list(roots)
    while todo:
        s = todo.pop()
        for a, b in step:
            if a == s and b not in seen:
                seen.add(b)
                todo.append(b)
    return [s in seen for s in range(trans.shape[0])]


@pytest.mark.parametrize("seed", range(30))
def test_reachable_and_coreachable_match_a_plain_search(seed: int) -> None:
    from fsmcompile.automaton.fragment import coreachable, reachable

    rng = np.random.default_rng(900 + seed)
    size, width = int(rng.integers(1, 60)), int(rng.integers(1, 5))
    trans = rng.integers(-1, size, size=(size, width)).astype(np.int32)
    trans[rng.random(trans.shape) < 0.6] = -1  # sparse: some states unreachable
    accepting = rng.random(size) < 0.2
    assert reachable(trans, [0]).tolist() == reference_reached(trans, [0], False)
    roots = np.flatnonzero(accepting).tolist()
    assert coreachable(trans, accepting).tolist() == reference_reached(trans, roots, True)


def test_reachability_follows_a_long_chain_and_rejects_bad_tables() -> None:
    from fsmcompile import _native
    from fsmcompile.automaton.fragment import coreachable, reachable

    n = 100_000
    chain = np.full((n, 1), -1, dtype=np.int32)
    chain[:-1, 0] = np.arange(1, n)
    assert reachable(chain, [0]).all() and not reachable(chain, [1])[0]
    accepting = np.zeros(n, dtype=np.bool_)
    accepting[-1] = True
    assert coreachable(chain, accepting).all()
    marks = np.zeros(2, dtype=np.bool_)
    with pytest.raises(ValueError, match="names no state"):
        _native.mark_reached(np.full((2, 1), 2, dtype=np.int32), marks, False)
    with pytest.raises(ValueError, match="int32"):
        _native.mark_reached(np.zeros((2, 1), dtype=np.int64), marks, False)
    with pytest.raises(ValueError, match="one byte per state"):
        _native.mark_reached(np.zeros((3, 1), dtype=np.int32), marks, True)


def reference_bfs(trans: np.ndarray, start: int) -> list[int]:
    """Breadth-first numbers from `start`, each row read in class order (-1: not reached)."""
    new_id = [-1] * trans.shape[0]
    new_id[start] = 0
    order = [start]
    for s in order:
        for t in trans[s].tolist():
            if t >= 0 and new_id[t] < 0:
                new_id[t] = len(order)
                order.append(t)
    return new_id


@pytest.mark.parametrize("seed", range(30))
def test_bfs_order_matches_a_plain_search(seed: int) -> None:
    from fsmcompile import _native

    rng = np.random.default_rng(1300 + seed)
    size, width = int(rng.integers(1, 60)), int(rng.integers(1, 6))
    trans = rng.integers(-1, size, size=(size, width)).astype(np.int32)
    trans[rng.random(trans.shape) < 0.5] = -1
    start = int(rng.integers(0, size))
    new_id = np.empty(size, dtype=np.int32)
    reached = _native.bfs_order(trans, start, new_id)
    expected = reference_bfs(trans, start)
    assert new_id.tolist() == expected
    assert reached == sum(i >= 0 for i in expected)
    with pytest.raises(ValueError, match="start names no state"):
        _native.bfs_order(trans, size, new_id)
    with pytest.raises(ValueError, match="int32"):
        _native.bfs_order(trans, 0, np.empty(size, dtype=np.int64))


@pytest.mark.parametrize("seed", range(40))
def test_glue_concat_matches_reference(seed: int) -> None:
    """The C glue gives the reference's arrays for any parts: nullable ones (whose start
    rows pass on), starts entered from inside their part (kept) or not (dropped)."""
    from glue_reference import glue_concat_reference

    from fsmcompile.automaton.fragment import Fragment
    from fsmcompile.automaton.glue import glue_concat
    from fsmcompile.budget import Budget

    rng = np.random.default_rng(seed)
    width = int(rng.integers(1, 6))
    parts = []
    for _ in range(int(rng.integers(2, 6))):
        size = int(rng.integers(1, 12))
        trans = rng.integers(-1, size, size=(size, width)).astype(np.int32)
        trans[rng.random(trans.shape) < 0.5] = -1
        if rng.random() < 0.5:
            trans[trans == 0] = -1  # a start nothing enters: dropped once glued
        parts.append(Fragment(trans, rng.random(size) < 0.4))
    got = glue_concat(parts, Budget(10**6, None))
    want = glue_concat_reference(parts)
    assert np.array_equal(got.trans, want.trans)
    assert np.array_equal(got.accepting, want.accepting)


@pytest.mark.parametrize(
    "parts",
    [
        [],
        [(np.zeros((1, 2), dtype=np.int32), np.ones(1, dtype=np.bool_))],
        [(np.zeros((1, 2), dtype=np.int32), np.ones(1, dtype=np.bool_))] * 2
        + [(np.zeros((1, 3), dtype=np.int32), np.ones(1, dtype=np.bool_))],
        [(np.array([[1]], dtype=np.int32), np.ones(1, dtype=np.bool_))] * 2,
        [(np.zeros((1, 1), dtype=np.int32), np.ones(2, dtype=np.bool_))] * 2,
        [(np.zeros((0, 1), dtype=np.int32), np.ones(0, dtype=np.bool_))] * 2,
    ],
    ids=["none", "one", "widths", "target", "flags", "empty"],
)
def test_glue_concat_refuses_parts_it_cannot_join(parts: list) -> None:
    from fsmcompile import _native

    with pytest.raises(ValueError):
        _native.glue_concat(parts)


@pytest.mark.parametrize("seed", range(40))
def test_canonical_numbering_matches_reference(seed: int) -> None:
    """The C numbering gives the reference's arrays: any start, unreachable states whose
    columns alone kept classes apart, several bytes per class."""
    from canonical_reference import canonical_dfa_reference

    from fsmcompile.automaton.canonical import canonical_dfa

    rng = np.random.default_rng(seed)
    size, width = int(rng.integers(1, 30)), int(rng.integers(1, 9))
    trans = rng.integers(-1, size, size=(size, width)).astype(np.int32)
    trans[rng.random(trans.shape) < 0.5] = -1
    if seed % 2:
        trans[:, width // 2] = trans[:, 0]  # equal columns to merge
    class_of_byte = np.sort(rng.integers(0, width, size=256)).astype(np.int32)
    class_of_byte[:width] = np.arange(width)  # every class has a byte
    rng.shuffle(class_of_byte)
    accepting = rng.random(size) < 0.4
    start = int(rng.integers(0, size))
    got = canonical_dfa(trans, accepting, start, class_of_byte)
    want = canonical_dfa_reference(trans, accepting, start, class_of_byte)
    assert np.array_equal(got.transitions, want.transitions)
    assert np.array_equal(got.class_of_byte, want.class_of_byte)
    assert np.array_equal(got.accepting, want.accepting)


@pytest.mark.parametrize("case", ["start", "classes", "class", "flags"])
def test_canonical_numbering_refuses_what_names_no_state_or_class(case: str) -> None:
    from fsmcompile import _native

    trans = np.array([[1, -1], [-1, 0]], dtype=np.int32)
    flags = np.array([False, True])
    classes = np.zeros(256, dtype=np.int32)
    start = 0
    if case == "start":
        start = 2
    elif case == "classes":
        classes = np.zeros(255, dtype=np.int32)
    elif case == "class":
        classes[7] = 2
    else:
        flags = np.array([False])
    with pytest.raises(ValueError):
        _native.canonical_numbering(trans, flags, start, classes)
