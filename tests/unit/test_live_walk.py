"""The DFA route's vocabulary walk (C) against the level-by-level numpy walk it replaced."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from live_walk_reference import walk_live_tokens_reference
from support import load_vocabulary, random_moves

from fsmcompile.automaton import build_dfa
from fsmcompile.compiler import lower_spec
from fsmcompile.errors import BudgetExceededError
from fsmcompile.frontend.regex.parser import parse_regex
from fsmcompile.index.dfa.build import _injections, _region_plan
from fsmcompile.index.dfa.levels import LivenessLevels, liveness_levels
from fsmcompile.index.dfa.trie_walk import Injections, walk_live_tokens
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.vocabulary import Vocabulary
from fsmcompile.vocabulary.trie import TokenTrie

_STRING = {"type": "string"}
SCHEMAS = {
    # Strings with formats and patterns: regions whose exits inject pairs below the root.
    "formats": {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email"},
            "day": {"type": "string", "format": "date"},
            "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3,5}$"},
            "name": {"type": "string", "minLength": 2, "maxLength": 12},
            "bio": _STRING,
            "tags": {"type": "array", "items": _STRING, "maxItems": 3},
        },
        "required": ["email", "code", "bio"],
        "additionalProperties": False,
    },
    "enums": {
        "type": "object",
        "properties": {
            "kind": {"enum": ["alpha", "beta", "gamma-ray", 12, None]},
            "size": {"type": "integer", "minimum": -5, "maximum": 1200},
            "ratio": {"type": "number"},
            "note": _STRING,
        },
        "additionalProperties": False,
    },
}
REGEXES = (
    r"[0-9]{1,4}(\.[0-9]+)?(e[+-]?[0-9]+)?",
    r"(foo|bar|baz)+ qux[a-z ]{0,30}!",
    r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}){0,40}"',
)


def _levels_and_origins(dfa: ByteDFA, trie: TokenTrie) -> tuple[LivenessLevels, np.ndarray]:
    """The liveness levels and origins (root classes) as `build_token_index` makes them."""
    height = int(trie.node_height[0])
    levels = liveness_levels(dfa, height)
    origins = np.unique(levels.canon[levels.row_of_height[height]]).astype(np.int32)
    return levels, origins


def _assert_same_walk(
    dfa: ByteDFA, trie: TokenTrie, levels: LivenessLevels, origins: np.ndarray, **options
) -> tuple[np.ndarray, int]:
    """Equal rows and sink events from the C walk and the reference; (rows, event count)."""
    rows, events = walk_live_tokens(dfa, trie, levels, origins, **options)
    options.pop("out", None)
    want_rows, want_events = walk_live_tokens_reference(dfa, trie, levels, origins, **options)
    assert rows.dtype == np.uint64 and rows.shape == want_rows.shape
    assert np.array_equal(rows, want_rows)
    for name in ("nodes", "states", "bits"):
        got, want = getattr(events, name), getattr(want_events, name)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert np.array_equal(got, want), name
    return rows, int(events.nodes.shape[0])


def _schema_dfa(schema: dict) -> ByteDFA:
    node, _ = lower_spec("json", schema, {})
    return build_dfa(node)


def _sinks(dfa: ByteDFA, seed: int) -> np.ndarray:
    """bool[S]: a seeded tenth of the states, as sinks."""
    return np.random.default_rng(seed).random(dfa.num_states) < 0.1


@pytest.fixture(scope="module", params=["gpt2", "llama3"])
def vocab(request: pytest.FixtureRequest) -> Vocabulary:
    return load_vocabulary(request.param)


@pytest.mark.parametrize("pattern", REGEXES, ids=["number", "words", "string"])
def test_walk_regex_on_real_trie_matches_reference(vocab: Vocabulary, pattern: str) -> None:
    dfa = build_dfa(parse_regex(pattern))
    levels, origins = _levels_and_origins(dfa, vocab.trie)
    rows, _ = _assert_same_walk(dfa, vocab.trie, levels, origins)
    assert rows.any()
    _, count = _assert_same_walk(dfa, vocab.trie, levels, origins, sinks=_sinks(dfa, 1))
    assert count > 0


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_walk_schema_chunks_with_injections_and_sinks_match_reference(
    vocab: Vocabulary, name: str
) -> None:
    # The builder's own chunks: region origins start only from their exit events.
    dfa = _schema_dfa(SCHEMAS[name])
    trie = vocab.trie
    levels, origins = _levels_and_origins(dfa, trie)
    extra, served, _ = _region_plan(dfa, vocab, origins)
    assert served, "the schema should have string regions"
    chunk = 256
    injected = 0
    for lo in range(0, origins.shape[0], chunk):
        hi = min(lo + chunk, origins.shape[0])
        injections = _injections(served, lo, hi)
        injected += injections.nodes.shape[0]
        for sinks in (None, _sinks(dfa, lo)):
            _assert_same_walk(
                dfa,
                trie,
                levels,
                origins[lo:hi],
                from_root=extra[lo:hi] < 0,
                injections=injections,
                sinks=sinks,
            )
    assert injected > 0 or name == "enums"  # its regions have no exit events


def test_walk_many_origins_into_a_column_slice_matches_reference(vocab: Vocabulary) -> None:
    # 100-200 origins: two to four words per bitset, written into the middle columns of a
    # wider matrix (the builder's matrix of every chunk's words), the others untouched.
    dfa = _schema_dfa(SCHEMAS["formats"])
    trie = vocab.trie
    levels, origins = _levels_and_origins(dfa, trie)
    extra, served, _ = _region_plan(dfa, vocab, origins)
    for count in (65, 130, 200):
        assert origins.shape[0] >= count
        words = (count + 63) // 64
        wide = np.zeros((trie.token_ids.shape[0], words + 3), dtype=np.uint64)
        out = wide[:, 2 : 2 + words]
        rows, _ = _assert_same_walk(
            dfa,
            trie,
            levels,
            origins[:count],
            from_root=extra[:count] < 0,
            injections=_injections(served, 0, count),
            sinks=_sinks(dfa, count),
            out=out,
        )
        assert np.shares_memory(rows, wide) and np.array_equal(wide[:, 2 : 2 + words], rows)
        assert not wide[:, :2].any() and not wide[:, 2 + words :].any()
        assert (rows[:, -1] >> np.uint64((count - 1) % 64)).any()  # the last origin's bit


def test_walk_into_column_major_out_matches_reference(gpt2: Vocabulary) -> None:
    # Words of one row far apart: the C walk writes through both strides.
    dfa = build_dfa(parse_regex(REGEXES[2]))
    levels, origins = _levels_and_origins(dfa, gpt2.trie)
    words = (origins.shape[0] + 63) // 64
    assert words >= 2
    out = np.zeros((gpt2.trie.token_ids.shape[0], words), dtype=np.uint64, order="F")
    rows, _ = _assert_same_walk(dfa, gpt2.trie, levels, origins, out=out)
    assert rows is out and rows.any()


def test_walk_partial_from_root_matches_reference(gpt2: Vocabulary) -> None:
    dfa = build_dfa(parse_regex(REGEXES[1]))
    levels, origins = _levels_and_origins(dfa, gpt2.trie)
    from_root = np.arange(origins.shape[0]) % 3 != 1
    rows, _ = _assert_same_walk(dfa, gpt2.trie, levels, origins, from_root=from_root)
    skipped = np.flatnonzero(~from_root)
    assert not any((rows[:, r // 64] >> np.uint64(r % 64) & np.uint64(1)).any() for r in skipped)


def test_walk_past_deadline_raises_budget_exceeded(gpt2: Vocabulary) -> None:
    dfa = build_dfa(parse_regex(REGEXES[0]))
    levels, origins = _levels_and_origins(dfa, gpt2.trie)
    with pytest.raises(BudgetExceededError, match="walking the vocabulary"):
        walk_live_tokens(dfa, gpt2.trie, levels, origins, time.monotonic() - 1.0)
    _assert_same_walk(dfa, gpt2.trie, levels, origins, deadline=time.monotonic() + 60.0)


def test_walk_out_of_wrong_shape_raises_value_error(gpt2: Vocabulary) -> None:
    dfa = build_dfa(parse_regex(REGEXES[0]))
    levels, origins = _levels_and_origins(dfa, gpt2.trie)
    out = np.zeros((gpt2.trie.token_ids.shape[0], 2), dtype=np.uint64)
    with pytest.raises(ValueError, match="uint64"):
        walk_live_tokens(dfa, gpt2.trie, levels, origins[:3], out=out)


@st.composite
def _walks(draw: st.DrawFn) -> tuple:
    """A random small DFA over byte classes of 'abcd', a trie of random tokens over those
    bytes, and random origins, root starts, injections (the root's too) and sinks."""
    seed = draw(st.integers(0, 2**31 - 1))
    trans = random_moves(seed, 12, draw(st.sampled_from([0.1, 0.3, 0.6])))
    states, classes = trans.shape
    dfa = ByteDFA(
        transitions=trans,
        class_of_byte=np.arange(256, dtype=np.int32) % classes,
        accepting=np.zeros(states, dtype=np.bool_),
    )
    tokens = draw(st.lists(st.binary(min_size=1, max_size=7), min_size=1, max_size=30))
    tokens = [bytes(97 + b % 4 for b in t) for t in tokens]
    trie = TokenTrie.build(tokens, np.arange(len(tokens), dtype=np.int64))
    rng = np.random.default_rng(seed)
    num_origins = draw(st.integers(1, 150))
    origins = rng.integers(0, states, size=num_origins).astype(np.int32)
    from_root = rng.random(num_origins) < draw(st.sampled_from([0.0, 0.5, 1.0]))
    num_injections = draw(st.integers(0, 20))
    injections = Injections(
        states=rng.integers(0, states, size=num_injections).astype(np.int64),
        nodes=rng.integers(0, trie.num_nodes, size=num_injections).astype(np.int64),
        origins=rng.integers(0, num_origins, size=num_injections).astype(np.int64),
    )
    sinks = rng.random(states) < draw(st.sampled_from([0.0, 0.2, 0.5]))
    return dfa, trie, origins, from_root, injections, sinks


@settings(max_examples=300, deadline=None)
@given(_walks())
def test_walk_random_small_automata_match_reference(case: tuple) -> None:
    dfa, trie, origins, from_root, injections, sinks = case
    levels = liveness_levels(dfa, int(trie.node_height[0]))
    _assert_same_walk(
        dfa, trie, levels, origins, from_root=from_root, injections=injections, sinks=sinks
    )
