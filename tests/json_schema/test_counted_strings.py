"""`maxLength` bounds are counted by the runtime, not unrolled into the lexer.

A bound of N characters unrolled costs about 27 lexer states per character. A string
bounded by its length is a grammar terminal of its own, built unbounded (from
`OWN_RULE_FROM` on it is a rule of its own, so even an otherwise regular schema takes the
grammar route); the runtime counts its characters and masks the tokens that would pass
the bound. That is exact while no token can write more characters than the bound into a
string it starts (`max_fresh_items`: 3 for GPT-2 and Phi-3, 11 for Llama 3), so short
bounds are counted too; a shorter one is unrolled in a terminal of its own. These tests
hold the counter to the exact bound, long and short: every spelling of a character counts
once, strings of N characters are allowed token by token and N + 1 are not, the mask
agrees with `advance` on each token near the bound, and
random walks end in valid instances.
"""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import load_vocabulary

from fsmcompile import artifact
from fsmcompile.compiler import compile_json_schema
from fsmcompile.frontend.json_schema.strings import COUNTED_FROM, OWN_RULE_FROM
from fsmcompile.index.cfg.fresh_items import countable_for, lexeme_last_bytes, max_fresh_items
from fsmcompile.index.cfg.lexer_build import build_lexer_automaton
from fsmcompile.index.cfg.lexer_counted import item_starts
from fsmcompile.runtime.matcher import matcher_for
from fsmcompile.tables.bits import unpack_row
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.tables.grammar_index import GrammarIndex
from fsmcompile.tables.lark_grammar import LarkGrammar
from fsmcompile.vocabulary import Vocabulary

BOUND = 300
SHORT = 20
"""Below `OWN_RULE_FROM`, above what a GPT-2 or Phi-3 token can write into a string."""
TINY = 5
"""From `COUNTED_FROM` on, two characters more than a GPT-2 or Phi-3 token can write."""
LLAMA3_FRESH = 11
"""The most characters a Llama 3 token writes into a string it starts."""


def schema_with(max_length: int, min_length: int = 0) -> dict[str, Any]:
    text = {"type": ["string", "null"], "maxLength": max_length, "minLength": min_length}
    return {
        "type": "object",
        "properties": {"text": text, "n": {"type": "integer"}},
        "required": ["text"],
    }


# Spellings of one character each: raw ASCII, raw two- and four-byte UTF-8, a short
# escape, a \u escape, and a surrogate pair (one code point, twelve bytes).
UNITS = ["a", "é", "😀", "\\n", "\\u00e9", "\\ud83d\\ude00", " "]


def body(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(UNITS) for _ in range(length))


@pytest.fixture(scope="module", params=["gpt2", "phi3"])
def vocab(request: pytest.FixtureRequest) -> Vocabulary:
    return load_vocabulary(request.param)


@pytest.fixture(scope="module", params=[BOUND, SHORT, TINY])
def bound(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture(scope="module")
def index(vocab: Vocabulary, bound: int) -> GrammarIndex:
    compiled = compile_json_schema(schema_with(bound), vocab, cache=False)
    assert isinstance(compiled, GrammarIndex)
    return compiled


def feed(index: GrammarIndex, vocab: Vocabulary, text: str) -> tuple[bool, str]:
    """Whether every token of the real tokenization is in the mask, then EOS; at each
    step the mask bit of the token must agree with `advance`."""
    matcher = matcher_for(index)
    ids = vocab.encode(text)
    for i, token in enumerate([*ids, vocab.eos_token_ids[0]]):
        allowed = bool(unpack_row(matcher._row(), vocab.size)[token])
        assert matcher.advance(token) is allowed, f"mask and advance disagree at token {i}"
        if not allowed:
            return False, f"token {i} {vocab.decode_bytes(ids[: i + 1])[-20:]!r} masked out"
    return True, ""


def test_the_bound_is_counted_not_unrolled(index: GrammarIndex, bound: int) -> None:
    bounds = set(index.lexer.char_bound.tolist())
    assert bounds == {-1, bound}
    # Unrolled, the lexer held about 20 states per character: 6,000 for 300.
    assert index.lexer.num_states < 400


@pytest.mark.parametrize("seed", range(3))
def test_exactly_the_bound_is_allowed(
    index: GrammarIndex, vocab: Vocabulary, bound: int, seed: int
) -> None:
    rng = random.Random(seed)
    for length in (0, 1, bound - 1, bound, bound + 1, bound + 7):
        text = '{"text":"' + body(rng, length) + '","n":1}'
        ok, why = feed(index, vocab, text)
        assert ok is (length <= bound), (length, why)
    plain = '{"text":"' + "x" * bound + '"}'
    assert feed(index, vocab, plain)[0]
    assert not feed(index, vocab, plain.replace("x", "xy", 1))[0]
    spaced = '{"text":"' + " " * bound + '"}'  # runs of spaces are long single tokens
    assert feed(index, vocab, spaced)[0]
    assert not feed(index, vocab, spaced.replace(" ", "  ", 1))[0]


@pytest.mark.parametrize("most", [SHORT, OWN_RULE_FROM + 2])
def test_min_length_below_a_counted_bound(vocab: Vocabulary, most: int) -> None:
    index = compile_json_schema(schema_with(most, min_length=3), vocab, cache=False)
    assert isinstance(index, GrammarIndex)
    assert most in index.lexer.char_bound.tolist()
    for length, ok in ((2, False), (3, True), (most, True), (most + 1, False)):
        text = '{"text":"' + "é" * length + '"}'
        assert feed(index, vocab, text)[0] is ok, length


# One character each, no space, spelled as a pattern's characters may be: raw, or an
# escape JSON requires (docs/json_schema.md, string escapes).
NO_SPACE = ["a", "é", "😀", "\\n", '\\"', "\\\\"]


@pytest.mark.parametrize(
    ("keywords", "spell"),
    [
        ({"format": "uri"}, lambda rng, n: "https://example.com/" + "a" * (n - 20)),
        ({"pattern": "^[^ ]+$"}, lambda rng, n: "".join(rng.choice(NO_SPACE) for _ in range(n))),
    ],
    ids=["format", "pattern"],
)
def test_a_pattern_or_format_under_a_counted_bound_is_counted(
    vocab: Vocabulary, keywords: dict[str, str], spell: Any
) -> None:
    """`pattern`/`format` and `maxLength` meet in an intersection; unrolled, the bound
    copies the pattern's automaton once per character (a uri under 255 took 43,000 lexer
    states). Counted, the lexer holds the pattern once and the runtime counts."""
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "maxLength": BOUND, **keywords}},
        "required": ["s"],
        "additionalProperties": False,
    }
    index = compile_json_schema(schema, vocab, cache=False)
    assert isinstance(index, GrammarIndex)
    assert BOUND in index.lexer.char_bound.tolist()
    assert index.lexer.num_states < 1_000
    rng = random.Random(3)
    for length, ok in ((40, True), (BOUND, True), (BOUND + 1, False)):
        text = '{"s":"' + spell(rng, length) + '"}'
        assert feed(index, vocab, text)[0] is ok, (length, text[:60])
    assert not feed(index, vocab, '{"s":"not a uri, with spaces"}')[0]


def test_mask_agrees_with_advance_for_every_token_near_the_bound(
    index: GrammarIndex, vocab: Vocabulary, bound: int
) -> None:
    rng = random.Random(5)
    sample = rng.sample(range(vocab.size), 1500)
    for room in (0, 1, 2, 9):
        prefix = vocab.encode('{"text":"' + "a" * (bound - room))
        matcher = matcher_for(index)
        assert matcher.advance_many(prefix) == len(prefix)
        allowed = unpack_row(matcher._row(), vocab.size)
        for token in sample:
            took = matcher.advance(token)
            assert took is bool(allowed[token]), (room, token, vocab.token_bytes[token])
            if took:
                matcher.rollback(1)


def test_random_walks_near_the_bound_validate(vocab: Vocabulary) -> None:
    # minLength close to maxLength makes every walk write up to the bound.
    schema = schema_with(OWN_RULE_FROM + 4, min_length=OWN_RULE_FROM - 4)
    index = compile_json_schema(schema, vocab, cache=False)
    rng = random.Random(9)
    eos = vocab.eos_token_ids[0]
    ended = 0
    for _ in range(6):
        matcher = matcher_for(index)
        out: list[int] = []
        for _ in range(600):
            allowed = matcher.allowed_token_ids().tolist()
            assert allowed, f"dead end after {vocab.decode_bytes(out)!r}"
            if eos in allowed:
                assert matcher.advance(eos)
                ended += 1
                jsonschema.validate(json.loads(vocab.decode_bytes(out)), schema)
                break
            # Prefer tokens that close the string once it is long enough.
            closing = [t for t in allowed if b'"' in vocab.token_bytes[t]]
            pick = closing if closing and rng.random() < 0.3 else allowed
            token = rng.choice(pick)
            assert matcher.advance(token)
            out.append(token)
    assert ended >= 3


def test_counted_lexer_survives_the_artifact(
    index: GrammarIndex, vocab: Vocabulary, bound: int
) -> None:
    again = artifact.from_bytes(artifact.to_bytes(index), vocab)
    assert isinstance(again, GrammarIndex)
    assert np.array_equal(again.lexer.char_bound, index.lexer.char_bound)
    assert np.array_equal(again.lexer.char_start, index.lexer.char_start)
    assert not feed(again, vocab, '{"text":"' + "b" * (bound + 1) + '"}')[0]


def _string_terminal(most: int) -> tuple[LarkGrammar, ByteDFA, dict[int, frozenset[int]]]:
    """The grammar of `schema_with(most)`, and its counted terminal's unbounded automaton
    and item starts."""
    from fsmcompile.compiler import build_machine
    from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir

    lowering = schema_to_ir(schema_with(most), options=JsonOptions())
    grammar = build_machine(lowering.node, lowering.rules, max_states=200_000, deadline=None)
    (term,) = [t for t in grammar.terminals if t.counted is not None]
    assert term.dfa is not None
    starts = item_starts(term.dfa, term.node)
    assert starts is not None
    return grammar, term.dfa, starts


def _fresh_items_by_hand(
    dfa: ByteDFA,
    starts: dict[int, frozenset[int]],
    vocab: Vocabulary,
    after: frozenset[int] | None,
) -> int:
    """`max_fresh_items` the obvious way: every offset of every text token where a lexeme
    may start, one byte at a time."""
    best = 0
    for token in vocab.text_token_ids.tolist():
        data = vocab.token_bytes[token]
        for offset in range(len(data)):
            if offset and after is not None and data[offset - 1] not in after:
                continue
            state, count = 0, 0
            for byte in data[offset:]:
                cls = int(dfa.class_of_byte[byte])
                nxt = int(dfa.transitions[state, cls])
                if nxt < 0:
                    break
                count += cls in starts.get(state, frozenset())
                state = nxt
                best = max(best, count)
    return best


@pytest.mark.parametrize("name", ["gpt2", "phi3", "llama3"])
def test_max_fresh_items_is_what_a_token_can_write_into_a_string(name: str) -> None:
    vocab = load_vocabulary(name)
    grammar, dfa, starts = _string_terminal(BOUND)
    after = lexeme_last_bytes(grammar)
    assert after is not None and set(b'",:[]{}0123456789el') == after
    anywhere = max_fresh_items(dfa, starts, vocab)
    assert anywhere == _fresh_items_by_hand(dfa, starts, vocab, None)
    found = max_fresh_items(dfa, starts, vocab, after)
    assert found == _fresh_items_by_hand(dfa, starts, vocab, after)
    # A quote and 32 dashes is one Llama 3 token, but no JSON lexeme ends with the `(`
    # before it; GPT-2 and Phi-3 split words from quotes.
    assert (anywhere, found) == {"gpt2": (3, 3), "phi3": (3, 3), "llama3": (32, 11)}[name]


def test_a_bound_a_token_could_pass_is_unrolled() -> None:
    # Counting holds while no token can write more items than the bound into a lexeme it
    # starts; a bound a token could pass gets the unrolled lexer.
    from fsmcompile.compiler import build_machine
    from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir

    lowering = schema_to_ir(schema_with(SHORT), options=JsonOptions())
    grammar = build_machine(lowering.node, lowering.rules, max_states=200_000, deadline=None)
    seen: list[int] = []

    def countable(dfa: ByteDFA, starts: dict[int, frozenset[int]], bound: int) -> bool:
        seen.append(bound)
        return bound >= SHORT + 1

    unrolled = build_lexer_automaton(grammar, max_states=200_000, countable=countable)
    counted = build_lexer_automaton(
        grammar, max_states=200_000, countable=lambda dfa, starts, bound: True
    )
    assert seen == [SHORT]
    assert (counted.char_bound == SHORT).any()
    assert (unrolled.char_bound < 0).all() and not unrolled.char_start.any()
    assert unrolled.num_states > counted.num_states + 10 * SHORT


def test_llama3_counts_every_bound_its_tokens_cannot_overrun() -> None:
    vocab = load_vocabulary("llama3")
    grammar, dfa, starts = _string_terminal(BOUND)
    countable = countable_for(vocab, grammar)
    # A Llama 3 token writes at most 11 characters into a string it starts ...
    assert not countable(dfa, starts, LLAMA3_FRESH - 1)
    assert countable(dfa, starts, LLAMA3_FRESH)
    # ... so of the bounds the lowering marks as counted, those from 11 on are counted and
    # the shorter ones unrolled, each exactly.
    assert COUNTED_FROM < LLAMA3_FRESH
    for most, counted in ((COUNTED_FROM, False), (LLAMA3_FRESH - 1, False), (LLAMA3_FRESH, True)):
        index = compile_json_schema(schema_with(most), vocab, cache=False)
        assert isinstance(index, GrammarIndex)
        assert (most in index.lexer.char_bound.tolist()) is counted, most
        for length in (most - 1, most, most + 1, most + 5):
            for fill in ("-", "a", " ", "description"):
                text = '{"text":"' + (fill * length)[:length] + '"}'
                assert feed(index, vocab, text)[0] is (length <= most), (most, text)


def test_a_counted_string_beside_overlapping_alternatives_keeps_the_grammar(
    vocab: Vocabulary,
) -> None:
    # Written apart, the counted string would share a lexer context with the enum's
    # strings, a prefix of its own; the writer then joins it back (unrolled), rather
    # than falling back to a nesting-limited automaton.
    member = {"anyOf": [{"enum": ["a", "b"]}, {"type": "string", "maxLength": SHORT}]}
    schema = {"type": "object", "properties": {"s": member}, "required": ["s"]}
    index = compile_json_schema(schema, vocab, cache=False)
    assert isinstance(index, GrammarIndex)
    for value, ok in (("a", True), ("c" * SHORT, True), ("c" * (SHORT + 1), False)):
        assert (
            feed(index, vocab, json.dumps({"s": value, "x": [{}]}, separators=(",", ":")))[0] is ok
        ), value


def test_an_array_of_short_strings_is_counted(vocab: Vocabulary) -> None:
    items = {"type": "string", "maxLength": SHORT}
    schema = {"type": "object", "properties": {"s": {"type": "array", "items": items}}}
    index = compile_json_schema(schema, vocab, cache=False)
    assert isinstance(index, GrammarIndex)
    assert SHORT in index.lexer.char_bound.tolist()
    for values, ok in (([], True), (["x" * SHORT] * 3, True), (["x", "y" * (SHORT + 1)], False)):
        assert feed(index, vocab, json.dumps({"s": values}, separators=(",", ":")))[0] is ok


def test_equal_lexemes_of_different_grammars_share_one_key(vocab: Vocabulary) -> None:
    # Run-time rows of a counted lexeme are kept per process by `lexeme_key`, so the key
    # must name what `items_grown` reads and nothing of the grammar around it: states of
    # two grammars with one key grow every token alike.
    from fsmcompile.runtime.counted import items_grown
    from fsmcompile.tables.lexer_walks import lexeme_key

    items = {"type": "string", "maxLength": SHORT}
    other = {"type": "object", "properties": {"s": {"type": "array", "items": items}, "t": {}}}
    indexes = [
        compile_json_schema(schema_with(BOUND), vocab, cache=False),
        compile_json_schema(other, vocab, cache=False),
    ]
    groups: dict[bytes, list[tuple[GrammarIndex, int]]] = {}
    counted_keys: list[set[bytes]] = []
    for index in indexes:
        assert isinstance(index, GrammarIndex)
        keys = [lexeme_key(index.lexer, s) for s in range(index.lexer.num_states)]
        for state, key in enumerate(keys):
            groups.setdefault(key, []).append((index, state))
        counted_keys.append({keys[s] for s in np.flatnonzero(index.lexer.char_bound >= 0)})
    assert counted_keys[0] & counted_keys[1]  # the string lexeme, bounds apart
    assert len(groups) > 10
    for members in groups.values():
        grown = [
            items_grown(index.lexer, vocab.trie, vocab.size, state) for index, state in members[:3]
        ]
        assert all(np.array_equal(grown[0], g) for g in grown[1:])


def _items_by_bytes(index: GrammarIndex, vocab: Vocabulary, state: int) -> list[int]:
    """Per token id, the item starts its bytes make from `state` until the lexeme dies,
    read byte by byte: the definition `items_grown` walks the trie for."""
    lexer = index.lexer
    trans, classes, starts = lexer.transitions, lexer.class_of_byte, lexer.char_start
    grown = [0] * vocab.size
    for token in vocab.trie.token_ids.tolist():
        q, count = state, 0
        for byte in vocab.token_bytes[token]:
            c = int(classes[byte])
            nq = int(trans[q, c])
            if nq < 0:
                break
            count += bool(starts[q, c])
            q = nq
        grown[token] = count
    return grown


def test_items_grown_counts_what_each_token_writes(vocab: Vocabulary) -> None:
    # A digit pattern under maxLength is a narrow lexeme (few tokens go on), a free string
    # a wide one (most of the vocabulary goes on): both must count exactly.
    from fsmcompile.runtime.counted import items_grown

    narrow_bytes = 64  # fewer first bytes than this: a narrow lexeme

    digits = {"type": "string", "maxLength": BOUND, "pattern": "^[0-9]+$"}
    schema = {**schema_with(BOUND), "properties": {"d": digits, "text": {"maxLength": BOUND}}}
    index = compile_json_schema(schema, vocab, cache=False)
    assert isinstance(index, GrammarIndex)
    lexer = index.lexer
    counted = np.flatnonzero(lexer.char_bound >= 0).tolist()
    width = [int((lexer.transitions[s, lexer.class_of_byte] >= 0).sum()) for s in counted]
    narrow = [s for s, w in zip(counted, width, strict=True) if w < narrow_bytes]
    wide = [s for s, w in zip(counted, width, strict=True) if w >= narrow_bytes]
    assert narrow and wide, "both kinds of lexeme should be counted"
    most = {}
    for state in narrow[:6] + wide[:3]:
        grown = items_grown(lexer, vocab.trie, vocab.size, state)
        expected = _items_by_bytes(index, vocab, state)
        assert grown.tolist() == expected, state
        most[state] = max(expected)
    assert max(most[s] for s in narrow[:6]) > 1 and max(most[s] for s in wide[:3]) > 1


# Pieces that Llama 3 merges into long tokens around a quote: words, runs of dashes and
# spaces, escapes, multi-byte characters.
LLAMA3_PIECES = [
    "a",
    "-",
    "--------",
    " ",
    "    ",
    "é",
    "😀",
    "\\n",
    '\\"',
    "description",
    "http://",
]


@pytest.fixture(scope="module")
def llama3_short_index() -> tuple[GrammarIndex, Vocabulary]:
    vocab = load_vocabulary("llama3")
    index = compile_json_schema(schema_with(LLAMA3_FRESH), vocab, cache=False)
    assert isinstance(index, GrammarIndex)
    assert LLAMA3_FRESH in index.lexer.char_bound.tolist()
    return index, vocab


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(LLAMA3_PIECES), max_size=12), st.sampled_from(LLAMA3_PIECES))
def test_a_short_counted_bound_is_exact_under_llama3(
    llama3_short_index: tuple[GrammarIndex, Vocabulary], pieces: list[str], extra: str
) -> None:
    # Random pieces up to the bound, padded to exactly the bound, then one piece more.
    index, vocab = llama3_short_index

    def length(escaped: str) -> int:
        return len(json.loads('"' + escaped + '"'))

    fits = ""
    for piece in pieces:
        if length(fits + piece) <= LLAMA3_FRESH:
            fits += piece
    fits += "x" * (LLAMA3_FRESH - length(fits))
    for escaped, ok in ((fits, True), (fits + extra, False)):
        text = '{"text":"' + escaped + '","n":12}'
        assert feed(index, vocab, text)[0] is ok, (length(escaped), text)
