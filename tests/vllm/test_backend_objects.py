"""The structured-outputs backend's objects inside real vLLM, without starting an engine.

The plugin's patches against vLLM's own config, sampling params and backend interfaces;
the backend with the engine's real tokenizer object; the grammar object driven the way
vLLM's scheduler drives a speculative draft.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.vllm

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 6}, "ok": {"type": "boolean"}},
    "required": ["name", "ok"],
    "additionalProperties": False,
}
LOGITS = 151936  # the model's rows; transformers pads Qwen2's 151,665 ids up to it
STOPS = {151643, 151645}  # EOS and <|im_end|> (the generation config's EOS ids)


@pytest.fixture(scope="module")
def registered() -> None:
    from fsmcompile.runtime.vllm_plugin import register

    register()


@pytest.fixture(scope="module")
def engine_tokenizer(tiny_model: Path) -> Any:
    from vllm.tokenizers import get_tokenizer

    return get_tokenizer(str(tiny_model))


@pytest.fixture(scope="module")
def backend(registered, engine_tokenizer) -> Any:
    from fsmcompile.runtime.vllm_backend import FsmcompileBackend

    return FsmcompileBackend(None, tokenizer=engine_tokenizer, vocab_size=151936)


def test_register_is_idempotent_and_accepts_the_backend_name(registered) -> None:
    from pydantic import TypeAdapter, ValidationError
    from vllm.config import StructuredOutputsConfig
    from vllm.sampling_params import SamplingParams
    from vllm.v1.structured_output import StructuredOutputManager

    from fsmcompile.runtime.vllm_plugin import register

    validate = SamplingParams._validate_structured_outputs
    init = StructuredOutputManager.__init__
    register()
    assert SamplingParams._validate_structured_outputs is validate
    assert StructuredOutputManager.__init__ is init
    assert StructuredOutputsConfig(backend="fsmcompile").backend == "fsmcompile"
    parsed = TypeAdapter(StructuredOutputsConfig).validate_json('{"backend": "fsmcompile"}')
    assert parsed.backend == "fsmcompile"
    with pytest.raises(ValidationError):
        StructuredOutputsConfig(backend="fsmcompiler")


@pytest.mark.parametrize("opt_in", [False, True])
def test_an_unsupported_vllm_version_is_left_alone_or_refused(
    registered, monkeypatch, caplog, opt_in: bool
) -> None:
    import vllm

    from fsmcompile.runtime import vllm_plugin

    def patched(*args: Any) -> None:
        raise AssertionError("patched vLLM 0.31.0")

    for name in ("_accept_config_value", "_patch_front_end", "_patch_engine"):
        monkeypatch.setattr(vllm_plugin, name, patched)
    monkeypatch.setattr(vllm, "__version__", "0.31.0")
    monkeypatch.setenv("FSMCOMPILE_VLLM_BACKEND", "1" if opt_in else "")
    if opt_in:
        with pytest.raises(RuntimeError, match=r"supports vLLM 0\.32\.0, 0\.33\.0; this is"):
            vllm_plugin.register()
    else:
        vllm_plugin.register()
        assert "this is vLLM 0.31.0, so it is not installed" in caplog.text


def front_end_check(tiny_model: Path, tokenizer: Any, **constraint: Any) -> Any:
    from vllm.config import ModelConfig, StructuredOutputsConfig
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams

    params = SamplingParams(structured_outputs=StructuredOutputsParams(**constraint))
    params._validate_structured_outputs(
        ModelConfig(model=str(tiny_model)),
        StructuredOutputsConfig(backend="fsmcompile"),
        tokenizer,
    )
    return params.structured_outputs


@pytest.mark.parametrize(
    "constraint",
    [
        {"json": SCHEMA},
        {"json_object": True},
        {"regex": "[0-9]{3}"},
        {"choice": ["a", "b"]},
        {"grammar": 'start: "x"+'},
    ],
)
def test_the_front_end_selects_the_backend(
    registered, tiny_model, engine_tokenizer, constraint
) -> None:
    params = front_end_check(tiny_model, engine_tokenizer, **constraint)
    assert params._backend == "fsmcompile"
    assert not params._backend_was_auto


@pytest.mark.parametrize(
    ("constraint", "message"),
    [
        ({"regex": "[0-9"}, "at position"),
        ({"json": {"type": "object", "properties": {"a": {"type": "strin"}}}}, "/properties/a"),
        ({"json": '{"type": '}, "not valid JSON"),
        ({"grammar": 'root ::= "yes"'}, "GBNF/EBNF"),
        ({"grammar": "start: undefined_rule"}, "undefined_rule"),
        ({"choice": []}, "choice"),
        ({"structural_tag": '{"format": {}}'}, "structural_tag is not supported"),
    ],
)
def test_the_front_end_refuses_bad_specs_with_a_validation_error(
    registered, tiny_model, engine_tokenizer, constraint, message
) -> None:
    from vllm.exceptions import VLLMValidationError

    with pytest.raises(VLLMValidationError, match=message):
        front_end_check(tiny_model, engine_tokenizer, **constraint)


def test_the_backend_reads_the_engine_tokenizer(backend, engine_tokenizer) -> None:
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions as Options

    assert len(backend.vocabulary.token_bytes) == len(engine_tokenizer)
    assert backend.vocabulary.size == LOGITS
    bitmask = backend.allocate_token_bitmask(4)
    assert tuple(bitmask.shape) == (4, LOGITS // 32)
    assert bool((bitmask == -1).all())
    grammar = backend.compile_grammar(Options.JSON_OBJECT, "", stop_token_ids=STOPS)
    grammar.fill_bitmask(bitmask, 2)
    row = np.unpackbits(bitmask[2].numpy().view(np.uint8), bitorder="little")
    allowed = [engine_tokenizer.decode([t]) for t in np.flatnonzero(row)]
    assert "{" in allowed and all(text.startswith("{") for text in allowed), allowed
    assert bool((bitmask[3] == -1).all())  # other rows untouched


def test_a_speculative_draft_through_the_grammar_object(backend, engine_tokenizer) -> None:
    from vllm.v1.structured_output.backend_types import (
        StructuredOutputGrammar,
        StructuredOutputOptions,
    )

    grammar = backend.compile_grammar(
        StructuredOutputOptions.JSON, json.dumps(SCHEMA), stop_token_ids=STOPS
    )
    assert isinstance(grammar, StructuredOutputGrammar)
    text = engine_tokenizer.encode('{"name":"Ada","ok":true}', add_special_tokens=False)
    bad = engine_tokenizer.encode("]", add_special_tokens=False)
    draft = [*text, 151645]
    assert grammar.validate_tokens(draft) == draft
    assert grammar.validate_tokens([*text[:1], *bad, *text[1:]]) == text[:1]
    assert grammar.validate_tokens([*text[:2], -1, *text[2:]]) == text[:2]
    assert grammar.accept_tokens("r", text[:2])
    # vLLM's grammar_bitmask: a row per draft position, accepting as it goes, then back.
    bitmask = backend.allocate_token_bitmask(len(draft))
    for position, token in enumerate(draft[2:]):
        grammar.fill_bitmask(bitmask, position)
        word = bitmask[position, token >> 5].item() & 0xFFFFFFFF
        assert word >> (token & 31) & 1, position
        assert grammar.accept_tokens("r", [token])
    assert grammar.is_terminated()
    grammar.rollback(len(draft) - 2)
    assert not grammar.is_terminated() and grammar.num_processed_tokens == 2
    assert not grammar.accept_tokens("r", bad)
    assert grammar.accept_tokens("r", draft[2:]) and grammar.is_terminated()
    grammar.reset()
    assert grammar.validate_tokens(draft) == draft


def test_a_mistral_tokenizer_is_refused_at_start_up(registered, tmp_path) -> None:
    import mistral_common
    from vllm.tokenizers.mistral import MistralTokenizer

    from fsmcompile.errors import VocabularyError
    from fsmcompile.runtime.vllm_backend import FsmcompileBackend

    data = Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"
    (tmp_path / "tekken.json").write_bytes(data.read_bytes())
    tokenizer = MistralTokenizer.from_pretrained(str(tmp_path))
    with pytest.raises(VocabularyError, match="tokenizer-mode hf"):
        FsmcompileBackend(None, tokenizer=tokenizer, vocab_size=131072)


def test_tokenizer_ids_past_the_logits_are_left_out(engine_tokenizer) -> None:
    from fsmcompile.runtime.vllm_backend import engine_vocabulary

    vocabulary = engine_vocabulary(engine_tokenizer, 151650)
    assert vocabulary.size == len(vocabulary.token_bytes) == 151650
    assert vocabulary.eos_token_ids == (151643,)  # <|im_end|> (151645) lies past the logits
    assert engine_vocabulary(engine_tokenizer, LOGITS).eos_token_ids == (151643,)
