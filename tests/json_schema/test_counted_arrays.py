"""Long `maxItems` bounds over prefix-code items are counted by the runtime, not unrolled.

An array of up to 200 ids under a `pattern` unrolled into the lexer holds 200 copies of
the item in every lexer context that can read it. From `COUNTED_ITEMS_FROM` on, the
items after the first are a `CountedRepeat`: the lexer builds them unbounded and the
runtime counts item starts (each comma between items), as it counts the characters of a
string under `maxLength`. Its lexeme starts beside the closing bracket's, in a lexer state
both share; counting is still exact there, since no item has started yet. Items that are
no prefix code (`,1` of `,12`) keep the bound unrolled. These tests hold the counter to
the exact bound, token by token, and compare the lexer's size with the unrolled one.
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

from fsmcompile.compiler import compile_json_schema
from fsmcompile.frontend.json_schema.syntax import COUNTED_ITEMS_FROM
from fsmcompile.runtime.matcher import matcher_for
from fsmcompile.tables.bits import unpack_row
from fsmcompile.tables.grammar_index import GrammarIndex
from fsmcompile.vocabulary import Vocabulary

ID = {"type": "string", "pattern": "^[0-9a-f]{6}$"}
MOST = 40


def schema_with(items: dict[str, Any], most: int) -> dict[str, Any]:
    """An array member beside a free-form one (`{}`), so the schema takes the grammar
    route, where bounds can be counted."""
    array = {"type": "array", "items": items, "maxItems": most}
    return {"type": "object", "properties": {"ids": array, "meta": {}}, "required": ["ids"]}


@pytest.fixture(scope="module", params=["gpt2", "phi3"])
def vocab(request: pytest.FixtureRequest) -> Vocabulary:
    return load_vocabulary(request.param)


@pytest.fixture(scope="module")
def index(vocab: Vocabulary) -> GrammarIndex:
    compiled = compile_json_schema(schema_with(ID, MOST), vocab, cache=False)
    assert isinstance(compiled, GrammarIndex)
    return compiled


def feed(index: GrammarIndex, vocab: Vocabulary, text: str) -> bool:
    """Whether every token of the real tokenization is in the mask, then EOS; at each
    step the mask bit must agree with `advance`."""
    matcher = matcher_for(index)
    for i, token in enumerate([*vocab.encode(text), vocab.eos_token_ids[0]]):
        allowed = bool(unpack_row(matcher._row(), vocab.size)[token])
        assert matcher.advance(token) is allowed, f"mask and advance disagree at token {i}"
        if not allowed:
            return False
    return True


def ids_text(rng: random.Random, count: int, meta: Any = None) -> str:
    ids = ["".join(rng.choice("0123456789abcdef") for _ in range(6)) for _ in range(count)]
    value: dict[str, Any] = {"ids": ids} if meta is None else {"ids": ids, "meta": meta}
    return json.dumps(value, separators=(",", ":"))


def test_the_items_after_the_first_are_counted(index: GrammarIndex, vocab: Vocabulary) -> None:
    assert set(index.lexer.char_bound.tolist()) == {-1, MOST - 1}
    unrolled = compile_json_schema(schema_with(ID, COUNTED_ITEMS_FROM), vocab, cache=False)
    assert isinstance(unrolled, GrammarIndex)
    assert set(unrolled.lexer.char_bound.tolist()) == {-1}
    # Counted, the lexer is the same size for any bound; unrolled, it grows with it.
    assert index.lexer.num_states < unrolled.lexer.num_states


@pytest.mark.parametrize("seed", range(3))
def test_exactly_the_bound_is_allowed(index: GrammarIndex, vocab: Vocabulary, seed: int) -> None:
    rng = random.Random(seed)
    for count in (0, 1, 2, MOST - 1, MOST, MOST + 1, MOST + 5):
        assert feed(index, vocab, ids_text(rng, count)) is (count <= MOST), count
        assert feed(index, vocab, ids_text(rng, count, meta=[1, {"a": None}])) is (count <= MOST)
    bad = ids_text(rng, 3).replace('"]', 'g"]')  # the last id is no longer an id
    assert not feed(index, vocab, bad)


def test_items_that_are_no_prefix_code_stay_unrolled_and_exact(vocab: Vocabulary) -> None:
    index = compile_json_schema(schema_with({"type": "integer"}, MOST), vocab, cache=False)
    assert isinstance(index, GrammarIndex)
    assert set(index.lexer.char_bound.tolist()) == {-1}
    for count, ok in ((MOST, True), (MOST + 1, False)):
        text = json.dumps({"ids": list(range(10, 10 + count))}, separators=(",", ":"))
        assert feed(index, vocab, text) is ok


def _ids_starting_with(vocab: Vocabulary, *prefixes: bytes) -> np.ndarray:
    return np.asarray(
        [t for t in vocab.trie.token_ids.tolist() if vocab.token_bytes[t].startswith(prefixes)]
    )


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_walks_end_in_valid_instances(index: GrammarIndex, seed: int) -> None:
    vocab = index.vocabulary
    rng = np.random.default_rng(seed)
    # Lean towards the comma between two ids for a while, so that walks press the bound,
    # then towards closing brackets, so that they end.
    between = _ids_starting_with(vocab, b'",', b',"')
    closing = _ids_starting_with(vocab, b"]", b"}", b'"]')
    pressing = int(rng.integers(0, 8 * MOST))
    eos = vocab.eos_token_ids[0]
    matcher = matcher_for(index)
    out: list[int] = []
    while True:
        allowed = np.flatnonzero(unpack_row(matcher._row(), vocab.size))
        lean = np.intersect1d(allowed, between if len(out) < pressing else closing)
        pool = lean if lean.size and rng.random() < 0.9 else allowed
        token = int(rng.choice(pool))
        if token == eos:
            break
        assert matcher.advance(token)
        out.append(token)
    jsonschema.validate(json.loads(vocab.decode_bytes(out)), schema_with(ID, MOST))
