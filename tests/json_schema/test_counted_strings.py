"""Long `maxLength` bounds are counted by the runtime, not unrolled into the lexer.

A bound of N characters unrolled costs about 27 lexer states per character. From
`COUNTED_FROM` on, a string bounded only by its length is a grammar terminal of its own,
built unbounded; the runtime counts its characters and masks the tokens that would pass
the bound. These tests hold the counter to the exact bound: every spelling of a
character counts once, strings of N characters are allowed token by token and N + 1 are
not, the mask agrees with `advance` on each token near the bound, and random walks end in
valid instances.
"""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import numpy as np
import pytest
from support import load_vocabulary

from fsmcompile import artifact
from fsmcompile.compiler import compile_json_schema
from fsmcompile.index.bits import unpack_row
from fsmcompile.index.grammar_index import GrammarIndex
from fsmcompile.index.grammar_lexer import build_lexer_automaton
from fsmcompile.runtime.matcher import matcher_for
from fsmcompile.spec.json_schema.strings import COUNTED_FROM
from fsmcompile.vocabulary import Vocabulary

BOUND = 300


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


@pytest.fixture(scope="module")
def index(vocab: Vocabulary) -> GrammarIndex:
    compiled = compile_json_schema(schema_with(BOUND), vocab, cache=False)
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


def test_the_bound_is_counted_not_unrolled(index: GrammarIndex) -> None:
    assert BOUND >= COUNTED_FROM
    bounds = set(index.lexer.char_bound.tolist())
    assert bounds == {-1, BOUND}
    # Unrolled, the lexer held about 20 states per character: 6,000 here.
    assert index.lexer.num_states < 400


@pytest.mark.parametrize("seed", range(3))
def test_exactly_the_bound_is_allowed(index: GrammarIndex, vocab: Vocabulary, seed: int) -> None:
    rng = random.Random(seed)
    for length in (0, 1, BOUND - 1, BOUND, BOUND + 1, BOUND + 7):
        text = '{"text":"' + body(rng, length) + '","n":1}'
        ok, why = feed(index, vocab, text)
        assert ok is (length <= BOUND), (length, why)
    plain = '{"text":"' + "x" * BOUND + '"}'
    assert feed(index, vocab, plain)[0]
    assert not feed(index, vocab, plain.replace("x", "xy", 1))[0]


def test_min_length_below_a_counted_bound(vocab: Vocabulary) -> None:
    index = compile_json_schema(schema_with(COUNTED_FROM + 2, min_length=3), vocab, cache=False)
    assert isinstance(index, GrammarIndex)
    for length, ok in ((2, False), (3, True), (COUNTED_FROM + 2, True), (COUNTED_FROM + 3, False)):
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
    index: GrammarIndex, vocab: Vocabulary
) -> None:
    rng = random.Random(5)
    sample = rng.sample(range(vocab.size), 1500)
    for room in (0, 1, 2, 9):
        prefix = vocab.encode('{"text":"' + "a" * (BOUND - room))
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
    schema = schema_with(COUNTED_FROM + 4, min_length=COUNTED_FROM - 4)
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


def test_counted_lexer_survives_the_artifact(index: GrammarIndex, vocab: Vocabulary) -> None:
    again = artifact.from_bytes(artifact.to_bytes(index), vocab)
    assert isinstance(again, GrammarIndex)
    assert np.array_equal(again.lexer.char_bound, index.lexer.char_bound)
    assert np.array_equal(again.lexer.char_start, index.lexer.char_start)
    assert not feed(again, vocab, '{"text":"' + "b" * (BOUND + 1) + '"}')[0]


def test_a_token_longer_than_the_bound_unrolls_it() -> None:
    # Counting assumes no token can pass a bound inside a lexeme it enters; a tokenizer
    # with longer tokens gets the unrolled lexer.
    from fsmcompile.compiler import build_machine
    from fsmcompile.spec.json_schema import JsonOptions, schema_to_ir

    lowering = schema_to_ir(schema_with(COUNTED_FROM), options=JsonOptions())
    grammar = build_machine(lowering.node, lowering.rules, max_states=200_000, deadline=None)
    counted = build_lexer_automaton(grammar, max_states=200_000, count_from=COUNTED_FROM)
    unrolled = build_lexer_automaton(grammar, max_states=200_000, count_from=COUNTED_FROM + 1)
    assert (counted.char_bound == COUNTED_FROM).any()
    assert (unrolled.char_bound < 0).all() and not unrolled.char_start.any()
    assert unrolled.num_states > counted.num_states + 10 * COUNTED_FROM
