"""Grammar index pinpoint tests on hand-built vocabularies, and its artifact round trip."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from exactness import tiny_vocabulary
from grammar_checks import bundled_text, compiled, lark_parses
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmcompile.artifact import grammar as grammar_artifact
from fsmcompile.errors import ArtifactCorruptError, VocabularyMismatchError
from fsmcompile.index.cfg import compile_lark_index
from fsmcompile.runtime.grammar_matcher import GrammarMatcher

NUMBERS = r"""
start: NUMBER ("," NUMBER)*
%import common.NUMBER
%ignore " "
"""
NUMBERS_TOKENS = [
    b"1",
    b"2",
    b"12",
    b",",
    b", ",
    b" ",
    b"1,",
    b",1",
    b".",
    b"1.",
    b"e",
    b"1e",
    b"+",
]

BACKTRACK = r"""
start: (NUMBER | NAME | "." | "+")+
NAME: /[a-z]+/
%import common.NUMBER
"""
BACKTRACK_TOKENS = [b"1", b"e", b"1e", b"x", b"ex", b".", b"5", b"e5", b"+", b"1.", b"e+"]


def _brute_force(
    grammar: str, tokens: list[bytes], prefix: tuple[int, ...], eos: int, depth: int
) -> set[int]:
    """Tokens after `prefix` from which some continuation of <= depth tokens parses."""
    text = b"".join(tokens[t] for t in prefix)
    allowed = {eos} if lark_parses(grammar, text.decode()) else set()
    for t in range(len(tokens)):
        for n in range(depth + 1):
            if any(
                lark_parses(
                    grammar, (text + tokens[t] + b"".join(tokens[c] for c in cont)).decode()
                )
                for cont in itertools.product(range(len(tokens)), repeat=n)
            ):
                allowed.add(t)
                break
    return allowed


@pytest.mark.parametrize(
    ("grammar", "tokens"),
    [(NUMBERS, NUMBERS_TOKENS), (BACKTRACK, BACKTRACK_TOKENS)],
    ids=["numbers", "backtracking"],
)
def test_grammar_index_tiny_vocabulary_masks_match_brute_force(grammar, tokens):
    vocab = tiny_vocabulary(tokens)
    eos = vocab.eos_token_ids[0]
    index = compile_lark_index(grammar, vocab)
    matcher = GrammarMatcher(index)
    frontier: list[tuple[int, ...]] = [()]
    checked = 0
    for _ in range(3):
        nxt = []
        for prefix in frontier:
            matcher.reset()
            assert matcher.advance_many(prefix) == len(prefix)
            got = set(matcher.allowed_token_ids().tolist())
            expected = _brute_force(grammar, tokens, prefix, eos, depth=2)
            assert got == expected, (
                b"".join(tokens[t] for t in prefix),
                sorted(tokens[t] if t < len(tokens) else "EOS" for t in got ^ expected),
            )
            checked += 1
            nxt.extend(prefix + (t,) for t in sorted(got - {eos}))
        frontier = nxt[:40]
    assert checked > 20


def test_grammar_index_backtracking_keeps_both_readings():
    # "1e" is an unfinished number (1e5) or the number 1 then the name e: both stay open.
    vocab = tiny_vocabulary(BACKTRACK_TOKENS)
    matcher = GrammarMatcher(compile_lark_index(BACKTRACK, vocab))
    assert matcher.advance(BACKTRACK_TOKENS.index(b"1e"))
    assert len(matcher.configurations) == 2
    assert matcher.is_accepting()  # as NUMBER "1", NAME "e"
    assert matcher.advance(BACKTRACK_TOKENS.index(b"5"))  # now the number 1e5
    assert len(matcher.configurations) == 1


def test_grammar_index_artifact_round_trip_is_identical():
    index = compiled(bundled_text("json"), "gpt2")
    data = grammar_artifact.to_bytes(index)
    loaded = grammar_artifact.from_bytes(data, index.vocabulary)
    assert grammar_artifact.to_bytes(loaded) == data
    text = b'{"a": [1, 2.5, "x"]}'
    ids = index.vocabulary.encode(text.decode())
    assert GrammarMatcher(loaded).advance_many(ids) == len(ids)
    assert np.array_equal(loaded.masks, index.masks)


def test_grammar_index_artifact_damage_and_foreign_vocabulary_raise(phi3):
    index = compiled(bundled_text("arithmetic"), "gpt2")
    data = bytearray(grammar_artifact.to_bytes(index))
    data[len(data) // 2] ^= 0xFF
    with pytest.raises(ArtifactCorruptError, match="checksum"):
        grammar_artifact.from_bytes(bytes(data), index.vocabulary)
    with pytest.raises(VocabularyMismatchError):
        grammar_artifact.from_bytes(grammar_artifact.to_bytes(index), phi3)


def test_grammar_index_regex_artifact_is_refused(gpt2):
    from fsmcompile import artifact, compile_regex

    data = artifact.to_bytes(compile_regex("[ab]+", gpt2, cache=False))
    with pytest.raises(ArtifactCorruptError, match="not a grammar artifact"):
        grammar_artifact.from_bytes(data, gpt2)


@pytest.mark.parametrize(
    ("grammar_name", "prefixes"),
    [
        ("json", ["", '{"a', '{"a": 1', '{"a": 1.', "[1e", '{"x": [true, "y"', '"\\u00']),
        ("sql_select", ["SELECT a", "SELECT a FROM t WHERE x <", "SELECT 1.", "select a -"]),
        ("tool_call", ["f(", 'f(x="a"', "f(x=1)\n", "f(x=tr"]),
    ],
)
def test_grammar_index_mask_equals_advance_on_whole_vocabulary(grammar_name, prefixes, gpt2):
    # The mask comes from the vectorized walk, the kill composition and the group table;
    # advance walks the token's bytes one by one. They must agree on every token.
    matcher = GrammarMatcher(compiled(bundled_text(grammar_name), "gpt2"))
    for prefix in prefixes:
        matcher.reset()
        ids = gpt2.encode(prefix)
        assert matcher.advance_many(ids) == len(ids)
        allowed = set(matcher.allowed_token_ids().tolist())
        for token in range(gpt2.size):
            accepted = matcher.advance(token)
            if accepted:
                matcher.rollback(1)
            assert accepted == (token in allowed), (prefix, gpt2.token_bytes[token])


def _origin_outcomes(index) -> list[set[tuple[int, int, frozenset[int]]]]:
    """Per lexer state, its groups as (emitted sequence id, exit set id, token ids)."""
    out = []
    for origin in range(index.num_states):
        groups = index.entry_group[
            index.origin_entry_start[origin] : index.origin_entry_start[origin + 1]
        ]
        found = set()
        for g in groups.tolist():
            row = int(index.group_dense[g])
            if row >= 0:
                bits = np.unpackbits(index.masks[row].view(np.uint8), bitorder="little")
                tokens = frozenset(np.flatnonzero(bits).tolist())
            else:
                start, stop = index.group_token_start[g], index.group_token_start[g + 1]
                tokens = frozenset(index.group_tokens[start:stop].tolist())
            found.add((int(index.group_seq[g]), int(index.group_xset[g]), tokens))
        out.append(found)
    return out


def _sequence_readings(index, seq: int) -> list[tuple[tuple[int, int], ...]]:
    """The (terminal, context) sequences an emitted sequence stands for: one per choice of
    a context from each step's context set."""
    num_contexts = index.lexer.context_start.shape[0]
    sets = index.context_sets()
    steps = []
    while seq > 0:
        terminal, ctx = int(index.seq_terminal[seq]), int(index.seq_context[seq])
        contexts = sorted(sets[ctx - num_contexts]) if ctx >= num_contexts else [ctx]
        steps.append([(terminal, c) for c in contexts])
        seq = int(index.seq_parent[seq])
    return list(itertools.product(*reversed(steps)))


def _spelled(index) -> list[dict[tuple, set[int]]]:
    """Per origin, the tokens of each spelled-out outcome: (terminals with the context
    after each, exit set as (terminal, context) pairs)."""
    xsets = [
        frozenset(
            zip(
                index.xset_terminal[index.xset_start[x] : index.xset_start[x + 1]].tolist(),
                index.xset_context[index.xset_start[x] : index.xset_start[x + 1]].tolist(),
                strict=True,
            )
        )
        for x in range(index.xset_start.shape[0] - 1)
    ]
    out = []
    for groups in _origin_outcomes(index):
        tokens: dict[tuple, set[int]] = {}
        for s, x, t in groups:
            for reading in _sequence_readings(index, s):
                tokens.setdefault((reading, xsets[x]), set()).update(t)
        out.append(tokens)
    return out


@pytest.mark.parametrize("grammar_name", ["json", "tool_call"])
def test_grammar_index_walked_in_origin_chunks_gives_each_origin_the_same_groups(
    grammar_name, gpt2, monkeypatch
):
    # Large lexers are walked a chunk of origins at a time. What each origin's tokens
    # emit and where they end must not depend on the chunking; how its tokens split into
    # groups and the sequence ids may, so tokens are compared per spelled-out outcome.
    import fsmcompile.index.cfg.build as grammar_index

    whole = compile_lark_index(bundled_text(grammar_name), gpt2)
    monkeypatch.setattr(grammar_index, "_ORIGIN_CHUNK", 5)
    chunked = compile_lark_index(bundled_text(grammar_name), gpt2)
    assert whole.num_states > 10
    assert chunked.num_groups > whole.num_groups  # the chunks did split the walk
    assert _spelled(chunked) == _spelled(whole)
    matcher = GrammarMatcher(chunked)
    text = '{"a": [1, 2.5, "x"]}' if grammar_name == "json" else 'f(x="a")\n'
    ids = gpt2.encode(text)
    assert matcher.advance_many(ids) == len(ids)


NESTED_OBJECTS = {
    "type": "object",
    "properties": {
        "a": {"type": "object", "properties": {"x": {"type": "integer"}, "n": {"$ref": "#"}}},
        "b": {"type": "array", "items": {"type": "object", "properties": {"y": {"$ref": "#"}}}},
        "c": {"type": "object", "properties": {"z": {"type": "boolean"}}},
        "d": {"type": "string"},
    },
}


def test_grammar_index_context_sets_stand_for_each_context(gpt2, monkeypatch):
    # After `}` the parser may be in any context that can follow some object; the walk
    # keeps one entry per set of those contexts the next byte takes to one lexer state.
    # Spelled out context by context, the outcomes are those of a walk that kept every
    # context apart, and the matcher takes a document that needs a set's member.
    import fsmcompile.index.cfg.origins as grammar_walks
    from fsmcompile.compiler import Compiler
    from fsmcompile.index.cfg.context_sets import ContextSets

    merged = Compiler(gpt2, cache=False).compile_json_schema(NESTED_OBJECTS)
    assert merged.ctxset_start.shape[0] > 1  # some sets were made
    monkeypatch.setattr(
        grammar_walks, "ContextSets", lambda *args, merge: ContextSets(*args, merge=False)
    )
    apart = Compiler(gpt2, cache=False).compile_json_schema(NESTED_OBJECTS)  # no index above
    assert apart.ctxset_start.shape[0] == 1
    assert apart.seq_parent.shape[0] > merged.seq_parent.shape[0]
    assert _spelled(merged) == _spelled(apart)
    matcher = GrammarMatcher(merged)
    for text in (
        '{"a":{"x":1,"n":{"c":{"z":true}}},"b":[{"y":{"d":"s"}}],"d":"t"}',
        '{"b":[{"y":{}},{}],"c":{}}',
        '{"a":{"n":{"b":[{"y":{"a":{}}}]}}}',
    ):
        matcher.reset()
        for token in gpt2.encode(text):  # masks read the groups, and so the sets
            assert token in set(matcher.allowed_token_ids().tolist()), text
            assert matcher.advance(token)
        assert matcher.is_accepting()
    matcher.reset()
    assert matcher.advance_many(gpt2.encode('{"a":{"n":{')) == 6
    allowed = {gpt2.token_bytes[t] for t in matcher.allowed_token_ids().tolist()}
    assert {b"}", b"}}", b"}}}"} <= allowed
    assert not {b'},{"', b"}{"} & allowed


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 12).flatmap(
        lambda n: st.tuples(
            st.lists(
                st.lists(st.integers(-1, n - 1), min_size=3, max_size=3), min_size=n, max_size=n
            ),
            st.lists(st.integers(0, 2**130 - 1), min_size=n, max_size=n),
        )
    )
)
def test_exit_reach_is_the_reachability_fixpoint(graph: tuple[list[list[int]], list[int]]) -> None:
    """One pass over the components gives what iterating "OR in every successor" to a
    fixpoint gives, on random graphs with cycles, self-loops and dead transitions, with
    bitsets three words wide."""
    from fsmcompile.index.cfg.exits import _as_int, _reach

    rows, seeds = graph
    trans = np.asarray(rows, dtype=np.int32)
    expected = list(seeds)
    changed = True
    while changed:
        changed = False
        for q, row in enumerate(rows):
            value = expected[q]
            for target in row:
                if target >= 0:
                    value |= expected[target]
            if value != expected[q]:
                expected[q], changed = value, True
    seed_rows = np.frombuffer(b"".join(s.to_bytes(24, "little") for s in seeds), dtype="<i8")
    reach = _reach(trans, seed_rows.reshape(len(seeds), 3).copy())
    assert [_as_int(row) for row in reach] == expected


def test_exit_reach_refuses_tables_that_do_not_fit() -> None:
    from fsmcompile import _native

    seeds = np.zeros((2, 1), dtype=np.int64)
    with pytest.raises(ValueError, match="names no state"):
        _native.reach_or(np.full((2, 1), 2, dtype=np.int32), seeds, np.empty_like(seeds))
    with pytest.raises(ValueError, match="int64"):
        _native.reach_or(np.zeros((2, 1), dtype=np.int32), seeds, np.empty((2, 2), np.int64))
    with pytest.raises(ValueError, match="int32"):
        _native.reach_or(np.zeros((2, 1), dtype=np.int64), seeds, np.empty_like(seeds))


def test_grammar_exit_sets_mark_terminals_nothing_can_follow():
    from fsmcompile.grammar import load_lark_grammar
    from fsmcompile.index.cfg.exits import exit_sets
    from fsmcompile.index.cfg.lexer_build import build_lexer_automaton
    from fsmcompile.tables.grammar_index import ANY_CONTEXT, END_ONLY

    # After an A, lark's lexer would extend it with any "a": only EOS can follow.
    grammar = load_lark_grammar("start: A | A A\nA: /a+/\n")
    lexer = build_lexer_automaton(grammar, max_states=1000)
    exits = exit_sets(lexer, len(grammar.terminals))
    labelled = int(np.flatnonzero(lexer.label >= 0)[0])
    x = exits.state_xset[labelled]
    pairs = set(
        zip(
            exits.pair_terminal[exits.pair_start[x] : exits.pair_start[x + 1]].tolist(),
            exits.pair_context[exits.pair_start[x] : exits.pair_start[x + 1]].tolist(),
            strict=True,
        )
    )
    assert pairs == {(0, END_ONLY)}
    # JSON: every terminal can be followed by whatever its next context starts with, except
    # whitespace after the complete document, where only EOS may come.
    json_index = compiled(bundled_text("json"), "gpt2")
    limited = json_index.xset_terminal[json_index.xset_context != ANY_CONTEXT]
    assert {json_index.terminal_names[t] for t in limited.tolist()} == {"WS"}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 2**64 - 1)),
        min_size=1,
        max_size=40,
    ),
    st.integers(1, 3),
)
def test_unique_wide_rows_partitions_like_a_plain_unique(rows: list, words: int) -> None:
    from fsmcompile.index.wide_rows import unique_wide_rows

    keys = np.array([[a, b] for a, b, _ in rows], dtype=np.uint64)
    wide = np.array([[c >> (i * 7) for i in range(words)] for *_, c in rows], dtype=np.uint64)
    first, cls = unique_wide_rows(wide, keys)
    both = np.concatenate([keys, wide], axis=1)
    assert all(np.array_equal(both[first[c]], both[i]) for i, c in enumerate(cls))
    assert len(set(cls.tolist())) == len({tuple(r) for r in both.tolist()})


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([0, 1, 2**63, 2**64 - 1, 12345]), min_size=1, max_size=40))
def test_first_and_inverse_is_numpy_unique(values: list[int]) -> None:
    from fsmcompile.index.wide_rows import first_and_inverse

    array = np.array(values, dtype=np.uint64)
    _, first, inverse = np.unique(array, return_index=True, return_inverse=True)
    got_first, got_inverse = first_and_inverse(array)
    assert got_first.tolist() == first.tolist()
    assert got_inverse.tolist() == inverse.reshape(-1).tolist()


def test_first_and_inverse_of_many_hashes_is_numpy_unique() -> None:
    """Hundreds of distinct 64-bit hashes repeated over 100k rows, ordered by their top
    halves (no two share one here), then with two sharing one (the full sort decides)."""
    from fsmcompile.index.wide_rows import first_and_inverse

    rng = np.random.default_rng(5)
    distinct = rng.integers(0, 2**63, size=700, dtype=np.uint64)
    for shared in (False, True):
        if shared:
            distinct[1] = (distinct[0] & np.uint64(0xFFFFFFFF00000000)) | np.uint64(7)
        array = distinct[rng.integers(0, distinct.shape[0], size=100_000)]
        _, first, inverse = np.unique(array, return_index=True, return_inverse=True)
        got_first, got_inverse = first_and_inverse(array)
        assert got_first.tolist() == first.tolist()
        assert got_inverse.tolist() == inverse.reshape(-1).tolist()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=12), st.randoms(use_true_random=False))
def test_or_runs_matches_a_reduce_per_run(lengths: list[int], rng) -> None:
    from fsmcompile.index.cfg.trie_walk import _or_runs

    n = sum(lengths)
    bits = np.array([[rng.getrandbits(64) for _ in range(2)] for _ in range(n)], dtype=np.uint64)
    order = np.array(rng.sample(range(n), n), dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    expected = [
        np.bitwise_or.reduce(bits[order[s : s + k]], axis=0)
        for s, k in zip(starts.tolist(), lengths, strict=True)
    ]
    assert np.array_equal(_or_runs(bits, order, starts), np.array(expected))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 12), st.integers(1, 130), st.integers(0, 2**32 - 1))
def test_exit_sets_any_shared_is_the_boolean_product(rows: int, cols: int, width: int, seed: int):
    # `_any_shared` multiplies the distinct rows only (packed into words to find them) and
    # spreads the answers back: it must equal the plain boolean product, for row widths
    # around the 64-bit word boundaries too.
    from fsmcompile.index.cfg.exits import _any_shared

    rng = np.random.default_rng(seed)
    a = rng.random((rows, width)) < rng.random()
    a[rng.integers(0, rows, size=rows)] = a[0]  # repeated rows
    b = rng.random((cols, width)) < 0.1
    expected = (a[:, None, :] & b[None, :, :]).any(axis=2)
    assert np.array_equal(_any_shared(a, b), expected)
