"""`Matcher(index)` for every index a compile function returns, and what every matcher
shares: writing into a bitmask whose memory moved, and ids outside the vocabulary."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import numpy as np
import pytest
import torch

import fsmcompile
from fsmcompile.runtime import Matcher
from fsmcompile.runtime.grammar_matcher import GrammarMatcher
from fsmcompile.runtime.index_tables import IndexTables
from fsmcompile.runtime.matcher import DfaMatcher, matcher_for
from fsmcompile.tables.bits import bitmask_words, set_bits, unpack_row
from fsmcompile.tables.grammar_index import GrammarIndex
from fsmcompile.tables.token_index import TokenIndex

RECURSIVE = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "children": {"type": "array", "items": {"$ref": "#"}},
    },
    "required": ["name"],
    "additionalProperties": False,
}
FLAT = {
    "type": "object",
    "properties": {"age": {"type": "integer"}},
    "required": ["age"],
    "additionalProperties": False,
}
LARK = 'start: "(" start ")" | "x"\n'

_INDEXES: dict[str, Any] = {}


def compiled(kind: str, vocab: Any) -> Any:
    if kind not in _INDEXES:
        if kind == "regex":
            _INDEXES[kind] = fsmcompile.compile_regex(r"[ab]{1,3}", vocab, cache=False)
        elif kind == "schema_dfa":
            _INDEXES[kind] = fsmcompile.compile_json_schema(FLAT, vocab, cache=False)
        elif kind == "schema_grammar":
            _INDEXES[kind] = fsmcompile.compile_json_schema(RECURSIVE, vocab, cache=False)
        else:
            _INDEXES[kind] = fsmcompile.compile_lark(LARK, vocab, cache=False)
    return _INDEXES[kind]


KINDS = {
    "regex": (TokenIndex, DfaMatcher),
    "schema_dfa": (TokenIndex, DfaMatcher),
    "schema_grammar": (GrammarIndex, GrammarMatcher),
    "lark": (GrammarIndex, GrammarMatcher),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_matcher_of_every_index_kind(kind: str, gpt2: Any) -> None:
    index = compiled(kind, gpt2)
    index_type, matcher_type = KINDS[kind]
    assert isinstance(index, index_type)
    matcher = Matcher(index)
    assert type(matcher) is matcher_type
    assert isinstance(matcher, Matcher)
    assert type(matcher_for(index)) is matcher_type
    assert matcher.index is index


def test_matcher_refuses_what_is_no_index() -> None:
    with pytest.raises(TypeError, match="TokenIndex or GrammarIndex"):
        Matcher(object())  # type: ignore[arg-type]


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_readme_example_on_a_recursive_schema(library: str, gpt2: Any) -> None:
    """README's lines, as written, on a schema that takes the grammar route."""
    vocab = gpt2
    index = fsmcompile.compile_json_schema(RECURSIVE, vocab)
    matcher = Matcher(index)
    words = bitmask_words(vocab.size)
    bitmask_row: Any = (
        np.zeros(words, np.int32) if library == "numpy" else torch.zeros(words, dtype=torch.int32)
    )
    doc = {"name": "Ada", "children": [{"name": "Bo", "children": []}]}
    text = json.dumps(doc, separators=(",", ":"))
    for token_id in [*vocab.encode(text), vocab.eos_token_ids[0]]:
        matcher.fill_bitmask(bitmask_row)
        row = np.asarray(bitmask_row)
        assert unpack_row(row, vocab.size)[token_id], token_id
        assert matcher.advance(token_id)
    assert matcher.is_terminated()
    assert not matcher.advance(vocab.encode("x")[0])


def _allowed(matcher: Matcher, vocab: Any) -> np.ndarray:
    """The matcher's row rebuilt from `allowed_token_ids`."""
    row = np.zeros(bitmask_words(vocab.size), dtype=np.int32)
    set_bits(row, matcher.allowed_token_ids())
    return row


@pytest.mark.parametrize("kind", ["regex", "schema_grammar"])
def test_fill_bitmask_follows_a_tensor_given_new_storage(kind: str, gpt2: Any) -> None:
    """`Tensor.set_` keeps the tensor object and moves its words: the next fill writes
    the new storage, and the old one is left alone."""
    matcher = Matcher(compiled(kind, gpt2))
    words = bitmask_words(gpt2.size)
    bitmask = torch.zeros((2, words), dtype=torch.int32)
    matcher.fill_bitmask(bitmask, 1)
    assert np.array_equal(bitmask[1].numpy(), _allowed(matcher, gpt2))
    old = bitmask.view(2, words)  # the first storage
    other = torch.zeros((3, words), dtype=torch.int32)
    bitmask.set_(other)
    assert matcher.advance(int(matcher.allowed_token_ids()[0]))
    matcher.fill_bitmask(bitmask, 2)
    assert np.array_equal(other[2].numpy(), _allowed(matcher, gpt2))
    assert not old[0].any()
    # Given narrower storage: the width is checked again.
    bitmask.set_(torch.zeros((2, 3), dtype=torch.int32))
    with pytest.raises(ValueError, match="bitmask shape"):
        matcher.fill_bitmask(bitmask, 0)


@pytest.mark.parametrize("kind", ["regex", "schema_grammar"])
def test_fill_bitmask_follows_an_array_resized_in_place(kind: str, gpt2: Any) -> None:
    """`ndarray.resize(refcheck=False)` reallocates under the same object: the next fill
    writes the new memory (a cached view of the old one would write freed memory)."""
    matcher = Matcher(compiled(kind, gpt2))
    words = bitmask_words(gpt2.size)
    bitmask = np.zeros((2, words), dtype=np.int32)
    matcher.fill_bitmask(bitmask, 0)
    bitmask.resize((4096, words), refcheck=False)
    matcher.fill_bitmask(bitmask, 4095)
    assert np.array_equal(bitmask[4095], _allowed(matcher, gpt2))
    bitmask.shape = (1, words * 4096)  # reshaped in place: one wide row
    bitmask[:] = -1
    matcher.fill_bitmask(bitmask, 0)
    assert np.array_equal(bitmask[0, :words], _allowed(matcher, gpt2))
    assert not bitmask[0, words:].any()


def test_dfa_matcher_refuses_ids_outside_the_vocabulary(gpt2: Any) -> None:
    """An id outside the vocabulary is refused, even one whose (state, token) key equals
    a cached step of another state."""
    index = compiled("regex", gpt2)
    matcher = Matcher(index)
    a = gpt2.encode("a")[0]
    assert matcher.advance(a)  # caches (start state, a)
    stride = gpt2.size + 1
    for token in (-1, a - stride, gpt2.size, gpt2.size + 1 + a):
        assert not matcher.advance(token), token
        assert matcher.validate_tokens([token]) == 0
    assert matcher.advance(a)


def test_grammar_matcher_refuses_ids_outside_the_vocabulary(gpt2: Any) -> None:
    matcher = Matcher(compiled("lark", gpt2))
    for token in (-1, -(2**40), gpt2.size, 2**40):
        assert not matcher.advance(token), token
    assert matcher.advance(gpt2.encode("(")[0])


def test_eos_ids_outside_the_vocabulary_are_ignored(gpt2: Any) -> None:
    """A vocabulary naming EOS ids outside it: no bit wraps onto a real token, and no
    `advance(-1)` is taken for EOS."""
    index = compiled("regex", gpt2)
    vocab = copy.copy(gpt2)
    real_eos = gpt2.eos_token_ids[0]
    object.__setattr__(vocab, "eos_token_ids", (-1, -33, real_eos, gpt2.size + 5))
    tables = IndexTables(dataclasses.replace(index, vocabulary=vocab))
    assert tables.eos_token_ids == frozenset({real_eos})
    assert unpack_row(tables.eos_row, gpt2.size).nonzero()[0].tolist() == [real_eos]
    matcher = DfaMatcher(index, tables=tables)
    matcher.advance(gpt2.encode("a")[0])
    assert not matcher.advance(-1)
    assert matcher.advance(real_eos)
