"""Runtime against the real compiler and the real gpt2 tokenizer (tests/data)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import fsmcompile
from fsmcompile.runtime import Matcher
from fsmcompile.runtime.vllm import BatchUpdate, FSMLogitsProcessor

GPT2_PATH = Path(__file__).parents[1] / "data" / "gpt2" / "tokenizer.json.gz"

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 10},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["a", "bc"]}, "maxItems": 2},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}
DOCUMENTS = [
    {"name": "Ada", "age": 36, "tags": ["a"]},
    {"name": "", "age": 0, "tags": []},
    {"name": "Grace Hop", "age": 120, "tags": ["bc", "a"]},
]


@pytest.fixture(scope="module")
def json_index(gpt2):
    return fsmcompile.compile_json_schema(SCHEMA, gpt2)


def test_e2e_canonical_tokens_of_valid_documents_accepted(gpt2, json_index):
    for doc in DOCUMENTS:
        text = json.dumps(doc, separators=(",", ":"))
        m = Matcher(json_index)
        if not m.validate_tokens(gpt2.encode(text)) == len(gpt2.encode(text)):
            text = json.dumps(doc)  # the schema's whitespace policy may want ", " and ": "
        ids = gpt2.encode(text)
        assert m.advance_many(ids) == len(ids), text
        assert m.is_accepting() and m.advance(gpt2.eos_token_ids[0])


def test_e2e_forced_tokens_are_accepted_prefixes_of_forced_text(gpt2, json_index):
    """Along each document's canonical tokens, jump-forward ids are always safe."""
    agree = total = 0
    for doc in DOCUMENTS:
        m = Matcher(json_index)
        ids = gpt2.encode(json.dumps(doc, separators=(",", ":")))
        if m.validate_tokens(ids) != len(ids):
            ids = gpt2.encode(json.dumps(doc))
        for position, token in enumerate(ids):
            forced = m.forced_token_ids()
            forced_bytes = m.forced_bytes()
            assert m.validate_tokens(forced) == len(forced)
            assert forced_bytes.startswith(gpt2.decode_bytes(forced))
            if forced:
                total += 1
                agree += ids[position : position + len(forced)] == forced
            assert m.advance(token)
    assert total > 0
    # The dropped last token keeps most forced runs canonical in context.
    assert agree / total >= 0.5, (agree, total)


@pytest.mark.parametrize("pattern", [r"[0-9]{3}-[a-z]{2,4}", r"(yes|no|maybe)!"])
def test_e2e_processor_with_real_tokenizer_outputs_match(pattern):
    """A few requests through the vLLM processor, sampling masked random logits."""
    vocab_size = 50257
    config = SimpleNamespace(
        model_config=SimpleNamespace(tokenizer=str(GPT2_PATH), get_vocab_size=lambda: vocab_size)
    )
    proc = FSMLogitsProcessor(config, torch.device("cpu"), False)
    vocab = fsmcompile.Vocabulary.load(GPT2_PATH, vocab_size=vocab_size)
    eos = vocab.eos_token_ids[0]
    params = SimpleNamespace(extra_args={"fsmcompile": {"regex": pattern}})
    outputs = [[] for _ in range(4)]
    proc.update_state(BatchUpdate(4, [], [(i, params, [1], outputs[i]) for i in range(4)], []))
    gen = torch.Generator().manual_seed(0)
    done = [False] * 4
    for _ in range(40):
        logits = torch.randn(4, vocab_size, generator=gen) * 3
        proc.apply(logits)
        tokens = torch.argmax(logits, dim=-1).tolist()
        for i, token in enumerate(tokens):
            if not done[i]:
                outputs[i].append(token)
                done[i] = token == eos
        if all(done):
            break
        proc.update_state(None)
    assert all(done)
    for out in outputs:
        assert re.fullmatch(pattern, vocab.decode_bytes(out[:-1]).decode()), out


def test_dfa_steps_are_the_index_walk_for_every_token(gpt2, json_index):
    """The C token steps (`DfaWalk`) against TokenIndex.is_allowed/next_state: every token
    (and ids out of range) from every tenth state; bad tables are refused."""
    from fsmcompile._native import DfaWalk
    from fsmcompile.runtime.matcher import tables_for

    tables = tables_for(json_index)
    eos = set(gpt2.eos_token_ids)
    moved = 0
    for state in range(0, json_index.dfa.num_states, 10):
        for token in [-1, *range(gpt2.size), gpt2.size, gpt2.size + 7]:
            if token in eos:
                continue
            allowed = 0 <= token < gpt2.size and json_index.is_allowed(state, token)
            expected = json_index.next_state(state, token) if allowed else -1
            assert tables._steps.next_state(state, token) == expected, (state, token)
            moved += expected >= 0
    assert moved > 100
    with pytest.raises(IndexError):
        tables._steps.next_state(json_index.dfa.num_states, 0)
    dfa = json_index.dfa
    words = int(json_index.masks.shape[1])
    good = {
        "transitions": np.ascontiguousarray(dfa.transitions, dtype=np.int32).reshape(-1),
        "class_of_byte": np.ascontiguousarray(dfa.class_of_byte, dtype=np.int32),
        "text_bytes": np.frombuffer(gpt2.text_spans[0], dtype=np.uint8),
        "text_start": gpt2.text_spans[1],
        "state_mask": np.ascontiguousarray(json_index.state_mask, dtype=np.int32),
        "masks": np.ascontiguousarray(json_index.masks, dtype=np.int32).reshape(-1),
        "num_classes": int(dfa.num_classes),
        "num_words": words,
    }
    # The mask decides: with every mask blank no token moves, not even one the DFA takes.
    blank = DfaWalk(**{**good, "masks": np.zeros_like(good["masks"])})
    taken = [t for t in range(gpt2.size) if tables._steps.next_state(0, t) >= 0]
    assert taken and all(blank.next_state(0, t) == -1 for t in taken)
    out_of_range = good["transitions"].copy()
    out_of_range[0] = dfa.num_states
    for name, value in [
        ("transitions", out_of_range),
        ("state_mask", good["state_mask"] + 10**6),
        ("num_words", words - 1),  # masks narrower than the vocabulary
    ]:
        with pytest.raises(ValueError):
            DfaWalk(**{**good, name: value})
    # A table of the wrong item type, or one missing, is named in the error.
    with pytest.raises(ValueError, match="'state_mask'"):
        DfaWalk(**{**good, "state_mask": good["state_mask"].astype(np.int64)})
    with pytest.raises(TypeError, match="'masks'"):
        DfaWalk(**{name: value for name, value in good.items() if name != "masks"})


def test_e2e_matcher_agrees_with_token_index_reference(gpt2, json_index):
    """Matcher's cached tables against TokenIndex.is_allowed/next_state on sampled pairs."""
    rng = np.random.default_rng(0)
    eos = gpt2.eos_token_ids[0]
    matcher = Matcher(json_index)
    for _ in range(60):
        if matcher.is_terminated():
            matcher.reset()
        state = matcher.state
        allowed = matcher.allowed_token_ids()
        np.testing.assert_array_equal(allowed, json_index.allowed_token_ids(state))
        for token in rng.integers(0, gpt2.size, size=20).tolist() + allowed[:20].tolist():
            if token == eos:
                continue
            expected = (
                json_index.next_state(state, token) if json_index.is_allowed(state, token) else -1
            )
            assert matcher.validate_tokens([token]) == int(expected != -1)
        matcher.advance(int(rng.choice(allowed)))
