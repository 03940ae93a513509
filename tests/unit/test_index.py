"""The token index against brute force: exact masks from hand-built automata."""

from __future__ import annotations

import time

import numpy as np
import pytest
from exactness import (
    assert_index_matches_brute_force,
    dfa_from_edges,
    tiny_vocabulary,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from support import random_moves

from fsmcompile import _native
from fsmcompile.errors import BudgetExceededError
from fsmcompile.index.dfa import levels as levels_module
from fsmcompile.index.dfa.build import build_token_index
from fsmcompile.index.dfa.levels import liveness_levels
from fsmcompile.tables.bits import is_bit_set, pack_bool_rows, set_bits, unpack_row
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.types import DEAD
from fsmcompile.vocabulary import Vocabulary


def _chain(byte: bytes, length: int, tail: bytes | None = None) -> dict[int, dict[bytes, int]]:
    """`byte{0,length}` then optionally `tail`: a counted repetition as a chain."""
    edges: dict[int, dict[bytes, int]] = {}
    end = length + 1
    for i in range(length):
        edges[i] = {byte: i + 1}
        if tail:
            edges[i][tail] = end
    if tail:
        edges.setdefault(length, {})[tail] = end
    return edges


def test_index_accepting_state_keeps_continuations() -> None:
    # `1(x2)?`: after "1" the text is complete AND may continue with "x2".
    vocab = tiny_vocabulary([b"1", b"x", b"2", b"x2", b"1x", b"1x2", b"y"])
    dfa = dfa_from_edges({0: {b"1": 1}, 1: {b"x": 2}, 2: {b"2": 3}}, accepting={1, 3})
    index = build_token_index(dfa, vocab, kind="regex", spec_hash="t")
    after_one = dfa.walk(b"1")
    allowed = set(index.allowed_token_ids(after_one).tolist())
    eos = vocab.eos_token_ids[0]
    assert {1, 3, eos} <= allowed  # "x", "x2" and EOS together
    assert 2 not in allowed and 6 not in allowed
    assert_index_matches_brute_force(index)


def test_index_counted_chain_masks_shrink_with_remaining_length() -> None:
    tokens = [b"a" * n for n in range(1, 7)] + [b"ab", b"b", b"aab", b"ba"]
    vocab = tiny_vocabulary(tokens)
    dfa = dfa_from_edges(_chain(b"a", 40, tail=b"b"), accepting={41})
    index = build_token_index(dfa, vocab, kind="regex", spec_hash="t")
    assert_index_matches_brute_force(index)
    # Far from the end all states share one mask; near the end each differs.
    assert len({int(index.state_mask[s]) for s in range(0, 30)}) == 1
    assert index.masks.shape[0] <= 9


def test_index_padded_width_rows_never_allowed() -> None:
    vocab = tiny_vocabulary([b"a", b"b"], size=70)
    dfa = dfa_from_edges({0: {b"a": 0, b"b": 0}}, accepting={0})
    index = build_token_index(dfa, vocab, kind="regex", spec_hash="t")
    allowed = index.allowed_token_ids(0).tolist()
    assert allowed == [0, 1, 2]  # a, b, EOS; ids 3..69 are padding
    assert index.masks.shape[1] == 3


def test_index_special_and_empty_tokens_never_allowed() -> None:
    table = [b"a", b"", b"<s>", b"a"]
    vocab = Vocabulary(
        token_bytes=table + [b""], eos_token_ids=(4,), special_token_ids=frozenset({2, 4}), size=5
    )
    dfa = dfa_from_edges({0: {b"a": 0, b"<": 1}, 1: {b"s": 2}, 2: {b">": 0}}, accepting={0})
    index = build_token_index(dfa, vocab, kind="regex", spec_hash="t")
    assert index.allowed_token_ids(0).tolist() == [0, 3, 4]  # duplicate bytes both allowed
    assert index.next_state(0, 2) == DEAD


def test_index_multibyte_tokens_cross_states() -> None:
    # "é" is C3 A9: tokens holding half a character must work both ways.
    vocab = tiny_vocabulary([b"\xc3", b"\xa9", b"\xc3\xa9", b"\xa9x", b"x", b"\xc3\xa9\xc3"])
    dfa = dfa_from_edges({0: {b"\xc3": 1, b"x": 2}, 1: {b"\xa9": 0}}, accepting={0, 2})
    index = build_token_index(dfa, vocab, kind="regex", spec_hash="t")
    assert_index_matches_brute_force(index)
    assert index.next_state(0, 0) == 1 and index.is_allowed(1, 3)


def test_index_real_vocabulary_matches_brute_force_on_sampled_states(gpt2: Vocabulary) -> None:
    # digits{0,30} then a quote: sparse and dense states on a real 50k vocabulary.
    edges = _chain(b"0", 30, tail=b'"')
    for state, out in edges.items():
        if state < 30:
            for digit in b"123456789":
                out[bytes([digit])] = state + 1
    dfa = dfa_from_edges(edges, accepting={31})
    index = build_token_index(dfa, gpt2, kind="regex", spec_hash="t")
    assert_index_matches_brute_force(index, states=[0, 1, 15, 27, 28, 29, 30, 31])


def test_levels_refine_chain_one_position_per_level() -> None:
    dfa = dfa_from_edges(_chain(b"a", 10), accepting=set(range(11)))
    levels = liveness_levels(dfa, max_height=4)
    root = levels.canon[levels.row_of_height[4]]
    # States with at least 4 bytes left are 4-equivalent; the last four are not.
    assert len(set(root[:7].tolist())) == 1
    assert len(set(root[7:].tolist())) == 4


def _dense_levels(trans: np.ndarray, initial: np.ndarray, height: int) -> list[list[int]]:
    """Canonical representative per level by sorting whole signature rows: the obvious
    refinement, up to `height` levels or until stable."""
    _, cls = np.unique(initial, return_inverse=True)
    rows = []
    for _ in range(height + 1):
        first = {c: i for i, c in reversed(list(enumerate(cls.tolist())))}
        rows.append([first[c] for c in cls.tolist()])
        nxt = np.where(trans >= 0, cls[np.maximum(trans, 0)], -1)
        sig = [tuple(r) for r in np.concatenate([cls[:, None], nxt], axis=1).tolist()]
        ids = {key: i for i, key in enumerate(dict.fromkeys(sig))}
        refined = np.array([ids[key] for key in sig])
        if len(ids) == len(set(cls.tolist())):
            break
        cls = refined
    return rows


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("collide", [False, True])
def test_levels_match_dense_refinement(seed: int, collide: bool, monkeypatch) -> None:
    """The native rounds give each level's exact partition, also when every signature
    hashes alike (a zero hash mask), which the full comparison behind a match must catch."""
    trans = random_moves(seed, 80, 0.5)
    states, classes = trans.shape
    initial = np.random.default_rng(seed + 100).integers(0, 3, size=states)
    if collide:
        monkeypatch.setattr(levels_module, "_HASH_MASK", 0)
    dfa = ByteDFA(
        transitions=trans,
        class_of_byte=np.arange(256, dtype=np.int32) % classes,
        accepting=np.zeros(states, dtype=np.bool_),
    )
    height = 12
    levels = liveness_levels(dfa, max_height=height, initial=initial)
    want = _dense_levels(trans, initial, height)
    for h in range(height + 1):
        assert levels.canon[levels.row_of_height[h]].tolist() == want[min(h, len(want) - 1)], h


@pytest.mark.parametrize("width", [1, 7, 8, 31, 32, 33, 100, 129])
def test_bits_pack_unpack_roundtrip(width: int) -> None:
    rng = np.random.default_rng(width)
    rows = rng.random((4, width)) < 0.4
    packed = pack_bool_rows(rows)
    assert packed.dtype == np.int32 and packed.shape == (4, (width + 31) // 32)
    for r in range(4):
        assert np.array_equal(unpack_row(packed[r], width), rows[r])
        assert all(is_bit_set(packed[r], t) == rows[r, t] for t in range(width))
    words = np.zeros(packed.shape[1], dtype=np.int32)
    set_bits(words, np.flatnonzero(rows[0]))
    assert np.array_equal(words, packed[0])


@pytest.mark.parametrize("count", [0, 1, 5, 16, 17, 300])
def test_set_bits_matches_packing_with_repeats_and_the_sign_bit(count: int) -> None:
    # Both paths (a loop for a few ids, `ufunc.at` for more): repeated ids and bit 31 of a
    # word, the sign bit of the int32 layout.
    rng = np.random.default_rng(count)
    ids = np.concatenate([rng.integers(0, 200, count // 2), np.full(count - count // 2, 31)])
    expected = np.zeros((1, 200), dtype=np.bool_)
    expected[0, ids] = True
    words = np.zeros(7, dtype=np.int32)
    set_bits(words, ids.astype(np.int64))
    assert np.array_equal(words, pack_bool_rows(expected)[0])


def test_index_string_regions_match_brute_force(gpt2: Vocabulary) -> None:
    # JSON-like strings: anchors that loop on ~90 bytes, with UTF-8 and escape satellites,
    # exiting through the closing quote into different continuations.
    from fsmcompile.automaton import build_dfa
    from fsmcompile.frontend.regex.parser import parse_regex
    from fsmcompile.index.dfa.regions import find_regions

    string = r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
    dfa = build_dfa(parse_regex(rf"\[{string}(,{string}:1)?\]|{{{string}:{string}}}"))
    regions = find_regions(dfa)
    assert len(regions) >= 3
    index = build_token_index(dfa, gpt2, kind="regex", spec_hash="t")
    region_states = sorted({int(s) for r in regions for s in r.states[:4]})
    assert_index_matches_brute_force(index, states=region_states + [0])


def test_index_string_escapes_and_first_characters_are_served_exactly(gpt2: Vocabulary) -> None:
    # A JSON Schema string's escapes (surrogate pairs included) belong to its region, and
    # with `feeders` so do the first characters of a `minLength`: every state on those
    # paths is served from shape walks, and its mask is still the brute-force one.
    from fsmcompile.automaton import build_dfa
    from fsmcompile.compiler import lower_spec
    from fsmcompile.index.dfa.regions import find_regions

    member = {"type": "string", "minLength": 1}
    schema = {
        "type": "object",
        "properties": {"a": member, "b": {**member, "minLength": 3}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    node, _ = lower_spec("json", schema, {})
    dfa = build_dfa(node)
    first_a = dfa.walk(b'{"a":"')
    anchor_a = dfa.walk(b"x", first_a)
    first_b = dfa.walk(b'","b":"', anchor_a)
    escapes = [dfa.walk(text, anchor_a) for text in (b"\\", b"\\u", b"\\uD83D", b"\\uD83D\\")]
    plain = {int(s) for r in find_regions(dfa) for s in r.states}
    assert {anchor_a, *escapes} <= plain and first_a not in plain
    served = {int(s) for r in find_regions(dfa, feeders=True) for s in r.states}
    feeders = [first_a, first_b, dfa.walk(b"x", first_b), dfa.walk(b"xy", first_b)]
    assert set(feeders) <= served - plain
    index = build_token_index(dfa, gpt2, kind="json", spec_hash="t")
    assert_index_matches_brute_force(index, states=[*feeders, anchor_a, *escapes])


def test_set_bits_of_rows_lists_every_set_bit_by_row_then_bit() -> None:
    from fsmcompile.index.cfg.origins import _set_bits_of_rows

    rng = np.random.default_rng(1)
    for _ in range(200):
        groups, width = int(rng.integers(0, 20)), int(rng.integers(1, 300))
        flags = rng.random((groups, width)) < rng.random() * 0.2
        packed = np.packbits(flags, axis=1, bitorder="little")
        padded = np.zeros((groups, (width + 63) // 64 * 8), dtype=np.uint8)
        padded[:, : packed.shape[1]] = packed
        padded[:, -1] |= 0x80 if width % 64 else 0  # a stray bit past the width is ignored
        row, bit = _set_bits_of_rows(padded.view("<u8"), width)
        expected_row, expected_bit = np.nonzero(flags)
        assert row.tolist() == expected_row.tolist() and bit.tolist() == expected_bit.tolist()


@pytest.mark.parametrize("collide", [False, True])
def test_unique_mask_rows_matches_sorting_every_row(collide: bool, monkeypatch) -> None:
    from fsmcompile.automaton.fragment import unique_rows
    from fsmcompile.index import wide_rows

    if collide:  # every row hashes alike: the repeat check must catch it
        monkeypatch.setattr(
            wide_rows, "row_hashes", lambda rows: np.zeros(rows.shape[0], dtype=np.uint64)
        )
    rng = np.random.default_rng(7)
    for _ in range(50):
        distinct = rng.integers(-(2**31), 2**31, size=(int(rng.integers(1, 12)), 9), dtype=np.int64)
        distinct[:, 0] = np.arange(distinct.shape[0]) % 3  # shared leading words
        pick = rng.integers(0, distinct.shape[0], size=int(rng.integers(0, 40)))
        rows = distinct[pick].astype(np.int32)
        first, inverse = wide_rows.unique_mask_rows(rows)
        expected_first, expected_inverse = unique_rows(rows)
        assert first.tolist() == expected_first.tolist()
        assert inverse.tolist() == expected_inverse.tolist()


@pytest.mark.parametrize(("dtype", "width"), [(np.int32, 9), (np.int32, 4009), (np.uint64, 3)])
def test_row_hashes_equal_rows_alike_distinct_rows_apart(dtype, width) -> None:
    from fsmcompile import _native
    from fsmcompile.index.wide_rows import row_hashes

    rng = np.random.default_rng(width)
    info = np.iinfo(dtype)
    distinct = rng.integers(info.min, info.max, size=(300, width), dtype=dtype, endpoint=True)
    distinct[1::2] = distinct[::2]  # pairs of equal rows
    distinct[1::2, -1] ^= 1  # ... then one bit apart in the last word (the 4-byte tail)
    hashed = row_hashes(distinct)
    assert len(set(hashed.tolist())) == 300
    again = row_hashes(np.concatenate([distinct, distinct[::-1]]))
    assert np.array_equal(again[:300], hashed) and np.array_equal(again[300:], hashed[::-1])
    assert row_hashes(distinct[:0]).shape == (0,)
    with pytest.raises(ValueError, match="one value per row"):
        _native.row_hashes(distinct, np.empty(299, dtype=np.uint64))
    with pytest.raises(ValueError, match="4- or 8-byte"):
        _native.row_hashes(distinct.astype(np.int16), np.empty(300, dtype=np.uint64))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64])
def test_sorted_unique_is_np_unique(dtype) -> None:
    """Empty, single, all-equal and random arrays, with repeats and negative values."""
    from fsmcompile.automaton.fragment import sorted_unique

    rng = np.random.default_rng(11)
    low = 0 if dtype == np.uint64 else -50
    cases = [np.zeros(0, dtype), np.array([3], dtype), np.full(7, 5, dtype)]
    cases += [
        rng.integers(low, 50, size=int(rng.integers(1, 300))).astype(dtype) for _ in range(30)
    ]
    # Long arrays: sorted by 16-bit digits in [0, 2**32), by numpy's sort outside it.
    for high in (70_000, 2**31, 2**32 if dtype != np.int32 else 2**31 - 1):
        cases.append(rng.integers(low, high, size=9000).astype(dtype))
    for values in cases:
        got = sorted_unique(values)
        assert got.dtype == values.dtype
        assert got.tolist() == np.unique(values).tolist()


@settings(max_examples=50, deadline=None)
@given(
    terminals=st.integers(1, 40),
    contexts=st.integers(1, 40),
    steps=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), max_size=60),
)
def test_sequence_table_ids_agree_between_batches_single_steps_and_reloading(
    terminals: int, contexts: int, steps: list[tuple[int, int]]
) -> None:
    # The walk interns sequences by packed keys in batches, the runtime one at a time on a
    # table rebuilt from the stored columns: every path must give each sequence one id.
    from fsmcompile.tables.sequences import SequenceTable

    batched, single = SequenceTable(terminals, contexts), SequenceTable(terminals, contexts)
    half = len(steps) // 2
    for lo, hi in ((0, half), (half, len(steps))):
        known = len(batched.parent)
        triples = sorted({(a % known, b % terminals, (a + b) % contexts) for a, b in steps[lo:hi]})
        keys = np.array([batched.key(*t) for t in triples], dtype=np.int64)
        got = batched.extend_keys(keys).tolist()
        assert got == [single.extend(*t) for t in triples]
        for t, i in zip(triples, got, strict=True):
            assert (batched.parent[i], batched.terminal[i], batched.context[i]) == t
    assert (batched.parent, batched.terminal, batched.context) == (
        single.parent,
        single.terminal,
        single.context,
    )
    reloaded = SequenceTable.of(
        np.asarray(batched.parent),
        np.asarray(batched.terminal),
        np.asarray(batched.context),
        num_terminals=terminals,
        num_contexts=contexts,
    )
    for i in range(1, len(batched.parent)):
        parts = (batched.parent[i], batched.terminal[i], batched.context[i])
        assert reloaded.extend(*parts) == i
    assert len(reloaded.parent) == len(batched.parent)


def test_sequence_table_keeps_ids_across_merges_of_its_sorted_keys() -> None:
    # Past a few thousand new sequences the walk's table sorts their keys into arrays and
    # starts its dictionary over: every id must survive the merges, for batch and single
    # lookups alike, and a sequence must never be added twice.
    from fsmcompile.tables.sequences import SequenceTable

    rng = np.random.default_rng(7)
    terminals, contexts = 50, 7
    batched, single = SequenceTable(terminals, contexts), SequenceTable(terminals, contexts)
    for _ in range(12):
        known = len(batched.parent)
        triples = {
            (int(a) % known, int(b) % terminals, int(c) % contexts)
            for a, b, c in rng.integers(0, 10**6, size=(1500, 3))
        }
        ordered = sorted(triples)
        keys = np.array([batched.key(*t) for t in ordered], dtype=np.int64)
        order = np.argsort(keys)
        got = batched.extend_keys(keys[order]).tolist()
        assert got == [single.extend(*ordered[i]) for i in order.tolist()]
    assert batched._merged > 1  # the sorted arrays took part
    assert len(batched.parent) == len(single.parent)
    for i in rng.integers(1, len(batched.parent), size=500).tolist():
        parts = (batched.parent[i], batched.terminal[i], batched.context[i])
        assert batched.extend(*parts) == i
        again = batched.extend_keys(np.array([batched.key(*parts)], dtype=np.int64))
        assert again.tolist() == [i]
    assert len(batched.parent) == len(single.parent)


def test_levels_stop_at_the_deadline() -> None:
    dfa = dfa_from_edges(_chain(b"a", 10), accepting=set(range(11)))
    with pytest.raises(BudgetExceededError):
        liveness_levels(dfa, max_height=4, deadline=time.monotonic() - 1.0)


@pytest.mark.parametrize(
    "first", [[1, 1, 2], [0, 0, 5], [0, 0, 1]], ids=["ahead", "outside", "not-first"]
)
def test_liveness_rounds_refuse_a_first_row_that_names_no_class(first: list[int]) -> None:
    trans = np.array([[1], [2], [-1]], dtype=np.int32)
    with pytest.raises(ValueError):
        _native.liveness_rounds(trans, np.array(first, dtype=np.int32), 3, 4, float("inf"), -1)
