"""GrammarMatcher's interface: the regex Matcher's method names and contracts."""

from __future__ import annotations

import numpy as np
import pytest
from grammar_checks import bundled_text, compiled

from fsmcompile.runtime.grammar_matcher import GrammarMatcher
from fsmcompile.tables.bits import bitmask_words, is_bit_set


@pytest.fixture(scope="module")
def json_matcher(gpt2):
    return GrammarMatcher(compiled(bundled_text("json"), "gpt2"))


def test_grammar_matcher_eos_only_when_complete_then_terminated(json_matcher, gpt2):
    m = json_matcher
    m.reset()
    eos = gpt2.eos_token_ids[0]
    assert not m.is_accepting()
    assert not m.advance(eos)
    assert m.advance_many(gpt2.encode('{"a": 1')) == len(gpt2.encode('{"a": 1'))
    assert not m.is_accepting()
    assert m.advance(gpt2.encode("}")[0])
    assert m.is_accepting() and not m.is_terminated()
    assert not m.is_complete()  # trailing whitespace may still follow
    assert m.advance(eos)
    assert m.is_terminated() and m.is_accepting()
    assert not m.advance(gpt2.encode(" ")[0])
    assert m.allowed_token_ids().tolist() == [eos]


def test_grammar_matcher_rejected_token_leaves_state_unchanged(json_matcher, gpt2):
    m = json_matcher
    m.reset()
    m.advance_many(gpt2.encode("[1,"))
    before = m.configurations
    assert not m.advance(gpt2.encode("]")[0])
    assert m.configurations == before
    assert not m.advance(gpt2.size + 5)  # past the logits width
    assert m.configurations == before


def test_grammar_matcher_rollback_and_reset_restore_earlier_states(json_matcher, gpt2):
    m = json_matcher
    m.reset()
    ids = gpt2.encode('{"k": [true, null]}')
    start = m.configurations
    states = []
    for token in ids:
        states.append(m.configurations)
        assert m.advance(token)
    assert m.advance(gpt2.eos_token_ids[0])
    m.rollback(3)
    assert m.configurations == states[-2] and not m.is_terminated()
    with pytest.raises(ValueError, match="cannot roll back"):
        m.rollback(len(ids) + 5)
    m.reset()
    assert m.configurations == start
    assert m.validate_tokens(ids + ids) == len(ids)
    assert m.configurations == start


def test_grammar_matcher_fill_bitmask_agrees_with_allowed_ids(json_matcher, gpt2):
    m = json_matcher
    m.reset()
    m.advance_many(gpt2.encode('{"name": "Ad'))
    words = bitmask_words(gpt2.size)
    out = np.zeros((3, words + 2), dtype=np.int32)
    m.fill_bitmask(out, row=1)
    allowed = m.allowed_token_ids()
    assert allowed.shape[0] > 1000  # inside a string: most of the vocabulary
    unpacked = np.unpackbits(out[1].view(np.uint8), bitorder="little")[: gpt2.size]
    assert np.array_equal(np.flatnonzero(unpacked), allowed)
    assert not out[0].any() and not out[2].any() and not out[1, words:].any()
    assert is_bit_set(out[1], gpt2.encode('"')[0])


def test_grammar_matcher_fill_bitmask_checks_its_argument(json_matcher, gpt2):
    m = json_matcher
    words = bitmask_words(gpt2.size)
    with pytest.raises(TypeError, match="int32"):
        m.fill_bitmask(np.zeros(words, dtype=np.int64))
    with pytest.raises(ValueError, match="shape"):
        m.fill_bitmask(np.zeros(words - 1, dtype=np.int32))
    with pytest.raises(ValueError, match="row"):
        m.fill_bitmask(np.zeros((2, words), dtype=np.int32), row=2)


def test_grammar_matcher_fill_bitmask_accepts_torch_tensor(json_matcher, gpt2):
    torch = pytest.importorskip("torch")
    m = json_matcher
    m.reset()
    out = torch.zeros((2, bitmask_words(gpt2.size)), dtype=torch.int32)
    m.fill_bitmask(out, row=0)
    expected = np.zeros(bitmask_words(gpt2.size), dtype=np.int32)
    m.fill_bitmask(expected)
    assert np.array_equal(out[0].numpy(), expected)


def test_grammar_matcher_special_tokens_never_allowed(gpt2):
    m = GrammarMatcher(compiled(bundled_text("tool_call"), "gpt2"))
    allowed = set(m.allowed_token_ids().tolist())
    assert not allowed & set(gpt2.special_token_ids)


def test_grammar_matcher_is_complete_when_only_eos_can_follow(gpt2):
    m = GrammarMatcher(compiled('start: "ab"\n', "gpt2"))
    assert m.advance_many(gpt2.encode("ab")) == len(gpt2.encode("ab"))
    assert m.is_complete()
    assert m.allowed_token_ids().tolist() == list(gpt2.eos_token_ids)
