"""The vLLM grammar object against the reference matchers, with real tokenizers.

`RequestGrammar` is what vLLM's structured-output manager drives; these tests call it the
way the manager does (accept, validate a draft, fill a row per draft position, roll back)
and compare every row with a fresh reference `Matcher` / `GrammarMatcher` walked over the
same tokens. No vLLM needed.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fsmcompile import Vocabulary, compile_json_schema, compile_lark, compile_regex
from fsmcompile.runtime.matcher import matcher_for
from fsmcompile.runtime.vllm_grammar import RequestGrammar
from fsmcompile.runtime.vllm_specs import choice_regex
from fsmcompile.tables.bits import bitmask_words, unpack_row

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
GRAMMAR = r"""
start: pair ("," pair)*
pair: NAME "=" NUMBER
NAME: /[a-z]+/
NUMBER: /[0-9]+/
"""


@pytest.fixture(scope="module")
def indexes(gpt2: Vocabulary) -> dict[str, object]:
    return {
        "regex": compile_regex(r"[0-9]{1,3}(\.[0-9]{1,2})?", gpt2),
        "json": compile_json_schema(SCHEMA, gpt2),
        "choice": compile_regex(choice_regex(["yes", "no"]), gpt2),
        "lark": compile_lark(GRAMMAR, gpt2),
    }


TEXTS = {
    "regex": "12.5",
    "json": '{"name":"Ada","age":36}',
    "choice": "yes",
    "lark": "ab=1,cd=22",
}


def grammar_for(index, vocab: Vocabulary, stops=None) -> RequestGrammar:
    return RequestGrammar(
        matcher_for(index),
        vocab_size=vocab.size,
        eos_token_ids=vocab.eos_token_ids,
        stop_token_ids=stops,
    )


def row_of(grammar: RequestGrammar, vocab: Vocabulary, width: int | None = None) -> np.ndarray:
    bitmask = torch.full((3, width or bitmask_words(vocab.size)), -1, dtype=torch.int32)
    grammar.fill_bitmask(bitmask, 1)
    return unpack_row(bitmask[1].numpy(), vocab.size if width is None else width * 32)


def reference_row(index, vocab: Vocabulary, tokens: list[int]) -> np.ndarray:
    matcher = matcher_for(index)
    assert matcher.advance_many(tokens) == len(tokens)
    words = np.zeros(bitmask_words(vocab.size), dtype=np.int32)
    matcher.fill_bitmask(words)
    return unpack_row(words, vocab.size)


@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_grammar_rows_match_the_reference_matcher_along_a_text(gpt2, indexes, kind) -> None:
    index, tokens = indexes[kind], gpt2.encode(TEXTS[kind])
    grammar = grammar_for(index, gpt2)
    eos = gpt2.eos_token_ids[0]
    for step in range(len(tokens) + 1):
        np.testing.assert_array_equal(
            row_of(grammar, gpt2), reference_row(index, gpt2, tokens[:step])
        )
        if step < len(tokens):
            assert grammar.accept_tokens("r", [tokens[step]])
    assert row_of(grammar, gpt2)[eos]
    assert grammar.accept_tokens("r", [eos])
    assert grammar.is_terminated()
    assert grammar.num_processed_tokens == len(tokens) + 1
    assert grammar.accept_tokens("r", [tokens[0]])  # after the stop token: ignored
    assert grammar.num_processed_tokens == len(tokens) + 1


@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_validate_tokens_returns_the_accepted_prefix_and_leaves_the_state(
    gpt2, indexes, kind
) -> None:
    index, tokens = indexes[kind], gpt2.encode(TEXTS[kind])
    grammar = grammar_for(index, gpt2)
    before = row_of(grammar, gpt2)
    eos = gpt2.eos_token_ids[0]
    assert grammar.validate_tokens([*tokens, eos, tokens[0]]) == [*tokens, eos]
    bad = gpt2.encode("}}}")[0]
    assert grammar.validate_tokens([*tokens[:1], bad, *tokens[1:]]) == tokens[:1]
    assert grammar.validate_tokens([*tokens[:1], -1, *tokens[1:]]) == tokens[:1]
    assert grammar.validate_tokens([eos]) == []  # the text may not end before it starts
    np.testing.assert_array_equal(row_of(grammar, gpt2), before)
    assert grammar.num_processed_tokens == 0 and not grammar.is_terminated()


@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_draft_accept_fill_rollback_as_the_scheduler_does(gpt2, indexes, kind) -> None:
    # vLLM's grammar_bitmask: fill a row, accept the draft token, ..., fill the bonus
    # row, then roll every draft token back.
    index, tokens = indexes[kind], gpt2.encode(TEXTS[kind])
    grammar = grammar_for(index, gpt2)
    grammar.accept_tokens("r", tokens[:1])
    draft = tokens[1:] + [gpt2.eos_token_ids[0]]
    bitmask = torch.zeros((len(draft) + 1, bitmask_words(gpt2.size)), dtype=torch.int32)
    for position, token in enumerate(draft):
        grammar.fill_bitmask(bitmask, position)
        assert grammar.accept_tokens("r", [token])
    grammar.fill_bitmask(bitmask, len(draft))
    grammar.rollback(len(draft))
    assert not grammar.is_terminated()
    for position in range(len(draft)):
        np.testing.assert_array_equal(
            unpack_row(bitmask[position].numpy(), gpt2.size),
            reference_row(index, gpt2, tokens[: 1 + position]),
        )
    np.testing.assert_array_equal(row_of(grammar, gpt2), reference_row(index, gpt2, tokens[:1]))
    with pytest.raises(ValueError, match="cannot roll back 2 tokens"):
        grammar.rollback(2)


def test_placeholder_and_out_of_range_ids_are_rejected_without_moving(gpt2, indexes) -> None:
    closed = {**SCHEMA, "additionalProperties": False}  # regular: a DFA `Matcher`
    index, tokens = compile_json_schema(closed, gpt2), gpt2.encode(TEXTS["json"])
    grammar = grammar_for(index, gpt2)
    # The matcher looks transitions up at state * stride + token: an id out of range
    # aliases another state's cached transition (walk a matcher to cache them).
    walker, states = matcher_for(index), []
    for token in tokens:
        states.append(walker.state)
        walker.advance(token)
    grammar.accept_tokens("r", tokens[:2])
    here, stride = states[2], grammar.matcher.tables._stride
    aliases = [
        (state - here) * stride + t
        for state, t in zip(states, tokens, strict=True)
        if state != here
    ]
    assert any(a < 0 for a in aliases) and any(a >= gpt2.size for a in aliases)
    before = row_of(grammar, gpt2)
    for token in (-1, -2, gpt2.size, *aliases):
        assert not grammar.accept_tokens("r", [token])
        assert grammar.validate_tokens([token]) == []
        np.testing.assert_array_equal(row_of(grammar, gpt2), before)
    assert grammar.num_processed_tokens == 2
    assert grammar.accept_tokens("r", tokens[2:])


def test_other_stop_tokens_replace_eos_exactly_where_the_text_may_end(gpt2, indexes) -> None:
    index = indexes["choice"]
    eos = gpt2.eos_token_ids[0]
    stop = gpt2.encode("!")[0]  # a user stop_token_ids entry, here an ordinary token
    yes = gpt2.encode("yes")
    grammar = grammar_for(index, gpt2, stops={stop})
    start = row_of(grammar, gpt2)
    assert not start[stop] and not start[eos]
    assert not grammar.accept_tokens("r", [stop])
    assert grammar.validate_tokens([*yes, stop]) == [*yes, stop]
    assert grammar.accept_tokens("r", yes)
    done = row_of(grammar, gpt2)
    # "yes" is complete: only the stop token, never the EOS this request does not stop on.
    assert np.flatnonzero(done).tolist() == [stop]
    assert not grammar.accept_tokens("r", [eos])
    assert grammar.accept_tokens("r", [stop]) and grammar.is_terminated()
    grammar.rollback(1)
    assert not grammar.is_terminated()
    np.testing.assert_array_equal(row_of(grammar, gpt2), done)


def test_eos_and_extra_stop_tokens_are_both_allowed_at_the_end(gpt2, indexes) -> None:
    eos = gpt2.eos_token_ids[0]
    extra = 50255
    grammar = grammar_for(indexes["choice"], gpt2, stops={eos, extra})
    grammar.accept_tokens("r", gpt2.encode("no"))
    assert np.flatnonzero(row_of(grammar, gpt2)).tolist() == [extra, eos]
    grammar.reset()
    assert grammar.num_processed_tokens == 0
    np.testing.assert_array_equal(row_of(grammar, gpt2), reference_row(indexes["choice"], gpt2, []))


@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_no_reachable_row_is_empty(gpt2, indexes, kind) -> None:
    # A row with every token masked would make vLLM sample garbage (and min_tokens'
    # restore needs an allowed stop token to unmask): walk random allowed tokens.
    rng = np.random.default_rng(7)
    for _ in range(5):
        grammar = grammar_for(indexes[kind], gpt2, stops={gpt2.eos_token_ids[0], 13})
        for _ in range(40):
            allowed = np.flatnonzero(row_of(grammar, gpt2))
            assert allowed.size > 0
            token = int(rng.choice(allowed))
            assert grammar.accept_tokens("r", [token])
            if grammar.is_terminated():
                break


def test_logits_wider_than_the_tokenizer_are_masked_past_it(gpt2) -> None:
    wide = Vocabulary.load(gpt2, vocab_size=gpt2.size)  # same object: sizes below differ
    assert wide is gpt2
    vocab = Vocabulary(
        token_bytes=gpt2.token_bytes,
        eos_token_ids=gpt2.eos_token_ids,
        special_token_ids=gpt2.special_token_ids,
        size=len(gpt2.token_bytes) + 100,
        name="gpt2 with padded logits",
        scheme=gpt2.scheme,
    )
    index = compile_regex(".{1,4}", vocab)
    grammar = grammar_for(index, vocab)
    row = row_of(grammar, vocab, width=bitmask_words(vocab.size))
    assert row[: len(gpt2.token_bytes)].any()
    assert not row[len(gpt2.token_bytes) :].any()
    assert not grammar.accept_tokens("r", [len(gpt2.token_bytes) + 5])


def test_a_failing_index_ends_its_request_and_raises_nothing(gpt2) -> None:
    """A cache entry whose tables pass the loader but fail in use (the branching walk of
    `test_native_walk.py`) must not raise into vLLM's scheduler, which would stop every
    request: the token is rejected, a draft is cut there, and the rows allow only the
    request's stop tokens from then on."""
    from test_native_walk import branching_artifact, dash_token

    from fsmcompile import artifact

    index = artifact.from_bytes(branching_artifact(gpt2), gpt2)
    grammar = grammar_for(index, gpt2)
    dashes = dash_token(gpt2, 64)
    assert grammar.validate_tokens([dashes]) == []
    assert grammar.accept_tokens("r1", [dashes]) is False
    assert np.flatnonzero(row_of(grammar, gpt2)).tolist() == sorted(gpt2.eos_token_ids)
    assert grammar.accept_tokens("r1", [gpt2.eos_token_ids[0]]) is True
    assert grammar.is_terminated()
