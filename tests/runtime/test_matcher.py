"""Matcher behaviour on hand-built toy indexes, checked against brute-force references."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmcompile.runtime import Matcher
from fsmcompile.runtime.matcher import clear_table_memos, tables_for
from fsmcompile.tables.bits import bitmask_words, unpack_row

TOY_TOKENS = ["", "a", "b", "c", "ab", "abc", "1", "2", "12", "-", '"', "{", "}", ":", " ", ""]
EOS = 0
TOK = {t: i for i, t in enumerate(TOY_TOKENS) if t}
SPECIAL = len(TOY_TOKENS) - 1


def ids(*tokens: str) -> list[int]:
    return [TOK[t] for t in tokens]


@pytest.fixture
def vocab(rt):
    assert rt.TOY_TOKENS == TOY_TOKENS
    return rt.make_vocabulary(TOY_TOKENS, eos=[EOS], size=40)


@pytest.fixture
def abc_index(rt, vocab):
    return rt.index_from_regex("(ab|c)+", vocab)


def current_allowed(matcher: Matcher, vocab_size: int) -> np.ndarray:
    words = np.zeros(bitmask_words(vocab_size), dtype=np.int32)
    matcher.fill_bitmask(words)
    return unpack_row(words, vocab_size)


def test_matcher_allowed_token_advances_state(abc_index):
    m = Matcher(abc_index)
    assert m.advance(TOK["ab"])
    assert m.state != 0
    assert m.is_accepting()


def test_matcher_rejected_token_keeps_state(abc_index):
    m = Matcher(abc_index)
    m.advance(TOK["a"])
    before = m.state
    assert not m.advance(TOK["c"])  # "ac" is not a prefix of (ab|c)+
    assert m.state == before
    assert m.advance(TOK["b"])


@pytest.mark.parametrize("token", [SPECIAL, 30, 39, 10_000, -1])
def test_matcher_special_padded_and_out_of_range_ids_rejected(abc_index, token):
    assert not Matcher(abc_index).advance(token)


def test_matcher_eos_in_non_accepting_state_rejected(abc_index):
    m = Matcher(abc_index)
    assert not m.advance(EOS)
    m.advance(TOK["a"])
    assert not m.advance(EOS)


def test_matcher_eos_in_accepting_state_terminates(abc_index, vocab):
    m = Matcher(abc_index)
    m.advance_many(ids("ab", "c"))
    assert m.advance(EOS)
    assert m.is_terminated() and m.is_accepting() and m.is_complete()
    assert not m.advance(TOK["c"]) and not m.advance(EOS)
    allowed = current_allowed(m, vocab.size)
    assert np.flatnonzero(allowed).tolist() == [EOS]
    assert m.allowed_token_ids().tolist() == [EOS]
    assert m.forced_bytes() == b"" and m.forced_token_ids() == []


def test_matcher_fill_bitmask_matches_reference_along_a_walk(rt, abc_index, vocab):
    m = Matcher(abc_index)
    for token in ids("c", "a", "b", "abc", "c"):
        expected = rt.reference_allowed(abc_index, m.state)
        np.testing.assert_array_equal(current_allowed(m, vocab.size), expected)
        np.testing.assert_array_equal(m.allowed_token_ids(), np.flatnonzero(expected))
        assert m.advance(token)


def test_matcher_fill_bitmask_writes_one_row_of_a_batch(rt, abc_index, vocab):
    m = Matcher(abc_index)
    m.advance(TOK["a"])
    out = np.full((3, bitmask_words(vocab.size)), -1, dtype=np.int32)
    m.fill_bitmask(out, row=1)
    assert (out[0] == -1).all() and (out[2] == -1).all()
    np.testing.assert_array_equal(
        unpack_row(out[1], vocab.size), rt.reference_allowed(abc_index, m.state)
    )


def test_matcher_fill_bitmask_torch_cpu_tensor_matches_numpy(abc_index, vocab):
    m = Matcher(abc_index)
    m.advance(TOK["c"])
    tensor = torch.full((2, bitmask_words(vocab.size)), -1, dtype=torch.int32)
    m.fill_bitmask(tensor, row=1)
    expected = np.zeros(bitmask_words(vocab.size), dtype=np.int32)
    m.fill_bitmask(expected)
    np.testing.assert_array_equal(tensor[1].numpy(), expected)
    assert (tensor[0] == -1).all()


def test_matcher_fill_bitmask_wider_row_zeroes_padding(abc_index, vocab):
    m = Matcher(abc_index)
    out = np.full(bitmask_words(vocab.size) + 3, -1, dtype=np.int32)
    m.fill_bitmask(out)
    assert (out[bitmask_words(vocab.size) :] == 0).all()


def test_matcher_fill_bitmask_strided_rows_and_columns(abc_index, vocab):
    """A bitmask that is a view with gaps (every other column of every other row) gets
    the same bits, and nothing between them is touched."""
    m = Matcher(abc_index)
    m.advance(TOK["c"])
    words = bitmask_words(vocab.size)
    expected = np.zeros(words + 1, dtype=np.int32)
    m.fill_bitmask(expected)
    base = np.full((4, 2 * (words + 1)), -1, dtype=np.int32)
    view = base[::2, ::2]
    m.fill_bitmask(view, row=1)
    np.testing.assert_array_equal(base[2, ::2], expected)
    assert (base[2, 1::2] == -1).all() and (base[[0, 1, 3]] == -1).all()


@pytest.mark.parametrize(
    ("out", "row", "error", "match"),
    [
        (np.zeros(2, dtype=np.int64), 0, TypeError, "expected int32, found int64"),
        (np.zeros(1, dtype=np.int32), 0, ValueError, r"expected \[2\] or \[B, 2\]"),
        (np.zeros((2, 2), dtype=np.int32), 2, ValueError, r"row 2 out of range: expected 0..1"),
        (np.zeros(2, dtype=np.int32), 1, ValueError, "expected 0"),
        ([0, 0], 0, TypeError, "numpy array or torch tensor"),
        (torch.zeros(2, dtype=torch.int64), 0, TypeError, "expected torch.int32"),
    ],
)
def test_matcher_fill_bitmask_bad_output_raises(abc_index, out, row, error, match):
    with pytest.raises(error, match=match):
        Matcher(abc_index).fill_bitmask(out, row=row)


def test_matcher_rollback_restores_states_and_termination(abc_index):
    m = Matcher(abc_index)
    seen = [m.state]
    for token in ids("a", "b", "c"):
        assert m.advance(token)
        seen.append(m.state)
    assert m.advance(EOS)
    m.rollback(1)
    assert not m.is_terminated() and m.state == seen[3]
    m.rollback(2)
    assert m.state == seen[1]
    m.rollback(0)
    assert m.state == seen[1]
    with pytest.raises(ValueError, match=r"expected 0..1"):
        m.rollback(2)
    m.rollback(1)
    assert m.state == 0


def test_matcher_reset_returns_to_start(abc_index):
    m = Matcher(abc_index)
    m.advance_many(ids("ab", "c"))
    m.advance(EOS)
    m.reset()
    assert m.state == 0 and not m.is_terminated()
    with pytest.raises(ValueError):
        m.rollback(1)


def test_matcher_advance_many_stops_at_first_rejected(abc_index):
    m = Matcher(abc_index)
    assert m.advance_many(ids("ab", "c", "1", "c")) == 2
    assert m.advance(TOK["c"])


def test_matcher_validate_tokens_counts_prefix_without_advancing(abc_index):
    m = Matcher(abc_index)
    m.advance(TOK["a"])
    state = m.state
    assert m.validate_tokens(ids("b", "c", "ab")) == 3
    assert m.validate_tokens(ids("b", "a", "c")) == 2
    assert m.validate_tokens([TOK["b"], EOS, TOK["c"]]) == 2  # nothing after EOS
    assert m.validate_tokens([EOS]) == 0
    assert m.state == state


def test_matcher_forced_tokens_keep_last_when_no_token_spans_the_boundary(rt, vocab):
    index = rt.index_from_regex('\\{"a":(1|2)\\}', vocab)
    m = Matcher(index)
    assert m.forced_bytes() == b'{"a":'
    # Greedy encoding is { " a " : and no token starts with ":" then a digit, so the
    # final ":" cannot merge with what follows and is forced too.
    assert m.forced_token_ids() == ids("{", '"', "a", '"', ":")
    assert m.advance_many(m.forced_token_ids()) == 5
    assert m.forced_bytes() == b""
    assert m.advance_many(ids("1")) == 1
    assert m.forced_bytes() == b"}"
    # Nothing can follow "}", so the last token is safe to force.
    assert m.forced_token_ids() == ids("}")
    m.advance(TOK["}"])
    assert m.is_complete() and m.forced_bytes() == b""


def test_matcher_forced_tokens_drop_last_when_a_token_spans_the_boundary(rt, vocab):
    # "ab" then "c" or "-": the token "abc" spans the boundary, so "ab" is left to the model.
    index = rt.index_from_regex("ab(c|-)", vocab)
    m = Matcher(index)
    assert m.forced_bytes() == b"ab"
    assert m.forced_token_ids() == []
    # "1" then "2" or "-": "12" spans it, and "1" alone is the whole forced text.
    m = Matcher(rt.index_from_regex("1(2|-)", vocab))
    assert m.forced_token_ids() == []
    m = Matcher(rt.index_from_regex("1(-|:)", vocab))
    assert m.forced_token_ids() == ids("1")


def test_matcher_forced_text_stops_at_accepting_state(rt, vocab):
    index = rt.index_from_regex("ab(c)?", vocab)
    m = Matcher(index)
    assert m.forced_bytes() == b"ab"
    m.advance(TOK["ab"])
    assert m.is_accepting() and not m.is_complete()
    assert m.forced_bytes() == b""


def test_matcher_state_with_empty_mask_gets_eos_only_row(rt, vocab):
    index = rt.index_from_regex("az", vocab)  # no token spells "z"
    m = Matcher(index)
    assert m.advance(TOK["a"])
    assert np.flatnonzero(current_allowed(m, vocab.size)).tolist() == [EOS]
    assert not m.advance(EOS)  # still not a match: the engine sees a rejected EOS


def test_matcher_tables_shared_per_index(abc_index):
    assert tables_for(abc_index) is tables_for(abc_index)
    assert Matcher(abc_index)._tables is Matcher(abc_index)._tables


def test_clear_table_memos_makes_the_next_matcher_build_its_tables(abc_index):
    # What a benchmark of a first mask relies on: no tables left from an earlier run.
    before = tables_for(abc_index)
    clear_table_memos()
    after = tables_for(abc_index)
    assert after is not before
    assert tables_for(abc_index) is after


PATTERNS = ["(ab|c)+", "a?b*c", '\\{"a":(1|2)+\\}', "(12|-)*"]


@settings(max_examples=60, deadline=None)
@given(
    pattern=st.sampled_from(PATTERNS),
    tokens=st.lists(st.integers(min_value=0, max_value=len(TOY_TOKENS) + 2), max_size=12),
)
def test_matcher_agrees_with_bytewise_reference(rt, pattern, tokens):
    vocab = rt.make_vocabulary(TOY_TOKENS, eos=[EOS], size=40)
    index = rt.index_from_regex(pattern, vocab)
    m = Matcher(index)
    text = b""
    for token in tokens:
        allowed = rt.reference_allowed(index, None if m.is_terminated() else m.state)
        np.testing.assert_array_equal(current_allowed(m, vocab.size), allowed)
        # Once terminated the mask stays EOS-only but nothing more is consumed.
        expected = bool(allowed[token]) and not m.is_terminated()
        assert m.validate_tokens([token]) == int(expected)
        accepted = m.advance(token)
        assert accepted == expected
        if accepted and token != EOS:
            text += vocab.token_bytes[token]
            assert index.dfa.walk(text) == m.state
