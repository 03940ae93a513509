"""transformers adapter: tiny randomly initialised Llama models, built locally, no download."""

from __future__ import annotations

import re

import pytest
import torch

transformers = pytest.importorskip("transformers")

from fsmcompile.runtime.hf import FSMLogitsProcessor, generate_constrained  # noqa: E402

EOS = 0
TOY_PATTERN = '\\{"a":(1|2){1,2}\\}'


def tiny_llama(vocab_size: int, seed: int = 0):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
        bos_token_id=None,
        eos_token_id=EOS,
        pad_token_id=EOS,
    )
    return transformers.LlamaForCausalLM(config).eval()


@pytest.fixture
def toy(rt, toy_vocab):
    index = rt.index_from_regex(TOY_PATTERN, toy_vocab)
    return index, tiny_llama(toy_vocab.size)


@pytest.mark.parametrize("seed", [0, 1])
def test_hf_generate_with_processor_matches_pattern(rt, toy_vocab, seed):
    index = rt.index_from_regex(TOY_PATTERN, toy_vocab)
    model = tiny_llama(toy_vocab.size, seed)
    prompt = torch.tensor([[1, 2, 3], [3, 2, 1]])
    out = model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        logits_processor=transformers.LogitsProcessorList([FSMLogitsProcessor(index)]),
        max_new_tokens=20,
        do_sample=True,
        eos_token_id=EOS,
        pad_token_id=EOS,
    )
    for row in out[:, prompt.shape[1] :].tolist():
        assert EOS in row, row
        text = toy_vocab.decode_bytes(row[: row.index(EOS)])
        assert rt.fullmatch(TOY_PATTERN, text), text


def test_hf_processor_disallowed_history_gets_eos_only(rt, toy_vocab):
    index = rt.index_from_regex(TOY_PATTERN, toy_vocab)
    proc = FSMLogitsProcessor(index)
    proc(torch.tensor([[5, 5]]), torch.zeros(1, toy_vocab.size))
    scores = proc(torch.tensor([[5, 5, 1]]), torch.zeros(1, toy_vocab.size))  # "a" not allowed
    assert torch.isfinite(scores[0]).nonzero().flatten().tolist() == [EOS]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_generate_constrained_jump_forward_saves_passes(toy, toy_vocab, seed):
    index, _ = toy
    model = tiny_llama(toy_vocab.size, seed)
    plain = generate_constrained(model, toy_vocab, index, "ab", 30, jump_forward=False)
    jumped = generate_constrained(model, toy_vocab, index, "ab", 30)
    for result in (plain, jumped):
        assert result.stop_reason == "eos"
        assert re.fullmatch(TOY_PATTERN, result.text), result.text
    # Without jump-forward every token, EOS included, costs one forward pass.
    assert plain.forward_passes == len(plain.token_ids) + 1 and plain.steps_saved == 0
    assert plain.forced_tokens == 0
    # '{"a"' is forced at the start and '}' at the end; the EOS needs no pass either.
    assert jumped.forced_tokens >= 4
    assert jumped.steps_saved == jumped.forced_tokens + 1


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_generate_constrained_on_cuda_matches_pattern(toy, toy_vocab):
    index, model = toy
    result = generate_constrained(model.cuda(), toy_vocab, index, "ab", 30, do_sample=True)
    assert result.stop_reason == "eos"
    assert re.fullmatch(TOY_PATTERN, result.text), result.text


def test_generate_constrained_stops_at_max_new_tokens(toy, toy_vocab):
    index, model = toy
    result = generate_constrained(model, toy_vocab, index, "ab", 3, jump_forward=False)
    assert result.stop_reason == "max_new_tokens" and len(result.token_ids) == 3
    result = generate_constrained(model, toy_vocab, index, "ab", 2)
    assert result.stop_reason == "max_new_tokens" and len(result.token_ids) == 2


def test_generate_constrained_empty_prompt_raises(toy, toy_vocab):
    index, model = toy
    with pytest.raises(ValueError, match="at least one"):
        generate_constrained(model, toy_vocab, index, "", 5)


# -- end to end with the real gpt2 tokenizer and the real compiler ---------------------

E2E_PATTERNS = [
    r"[0-9]{3}-[a-z]{2,4}",
    r'\{"name": "[A-Za-z ]{1,12}", "age": [0-9]{1,2}\}',
    r"(yes|no|maybe)!",
]


@pytest.fixture(scope="module")
def gpt2_model():
    return tiny_llama(50257, seed=7)


@pytest.mark.parametrize("pattern", E2E_PATTERNS)
@pytest.mark.parametrize("jump_forward", [False, True])
def test_e2e_gpt2_regex_generation_matches(gpt2, gpt2_model, pattern, jump_forward):
    import fsmcompile

    index = fsmcompile.compile_regex(pattern, gpt2)
    for seed in range(2):
        gen = torch.Generator().manual_seed(seed)
        result = generate_constrained(
            gpt2_model,
            gpt2,
            index,
            "Answer:",
            64,
            jump_forward=jump_forward,
            do_sample=True,
            generator=gen,
        )
        assert result.stop_reason == "eos", result
        assert re.fullmatch(pattern, result.text), result.text
        if jump_forward and "name" in pattern:
            assert result.steps_saved > 0


E2E_SCHEMAS = {
    # Closed and bounded: a DFA index.
    "TokenIndex": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 8},
            "ok": {"type": "boolean"},
        },
        "required": ["name", "ok"],
        "additionalProperties": False,
    },
    # No `additionalProperties`: members with any JSON value may follow, a grammar index.
    "GrammarIndex": {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 0, "maximum": 99},
            "ok": {"type": "boolean"},
        },
        "required": ["id", "ok"],
    },
}


@pytest.mark.parametrize("kind", sorted(E2E_SCHEMAS))
def test_e2e_gpt2_json_schema_generation_validates_and_jumps_forward(gpt2, gpt2_model, kind):
    import json

    import fsmcompile

    jsonschema = pytest.importorskip("jsonschema")
    schema = E2E_SCHEMAS[kind]
    index = fsmcompile.compile_json_schema(schema, gpt2)
    assert type(index).__name__ == kind
    for seed in range(2):
        gen = torch.Generator().manual_seed(seed)
        result = generate_constrained(
            gpt2_model, gpt2, index, "JSON:", 96, do_sample=True, generator=gen
        )
        assert result.stop_reason == "eos", result
        jsonschema.validate(json.loads(result.text), schema)
        # The keys and the punctuation around them are forced.
        assert result.forced_tokens >= 2 and result.steps_saved > 0, result


def test_e2e_gpt2_hf_generate_with_processor(gpt2, gpt2_model):
    import fsmcompile

    pattern = E2E_PATTERNS[0]
    index = fsmcompile.compile_regex(pattern, gpt2)
    prompt = torch.tensor([gpt2.encode("Code:")] * 2)
    out = gpt2_model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        logits_processor=transformers.LogitsProcessorList([FSMLogitsProcessor(index)]),
        max_new_tokens=16,
        do_sample=True,
        eos_token_id=gpt2.eos_token_ids[0],
        pad_token_id=gpt2.eos_token_ids[0],
    )
    eos = gpt2.eos_token_ids[0]
    for row in out[:, prompt.shape[1] :].tolist():
        assert eos in row
        text = gpt2.decode_bytes(row[: row.index(eos)]).decode()
        assert re.fullmatch(pattern, text), text
