"""Tokenizers that are not a tokenizer.json: the backend reads them or refuses them clearly.

The backend reads the engine's tokenizer once, when the engine starts (`engine_vocabulary`),
so these are start-up outcomes. A Mistral tekken tokenizer is covered in
`test_backend_objects.py`.
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import pytest

pytestmark = pytest.mark.vllm

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}},
    "required": ["a"],
    "additionalProperties": False,
}


def test_a_sentencepiece_model_file_alone_is_read(tmp_path: Path) -> None:
    # A model folder with only tokenizer.model: transformers converts it to a fast
    # tokenizer, which is what vLLM hands the backend.
    spm = pytest.importorskip("sentencepiece")
    from transformers import AutoTokenizer

    from fsmcompile import compile_json_schema
    from fsmcompile.runtime.matcher import matcher_for
    from fsmcompile.runtime.vllm_backend import engine_vocabulary

    words = "the quick brown fox json value name age true false null".split()
    rng = random.Random(0)
    lines = [" ".join(rng.choice(words) for _ in range(10)) + ' {"a": 12}' for _ in range(800)]
    (tmp_path / "corpus.txt").write_text("\n".join(lines))
    spm.SentencePieceTrainer.train(
        input=str(tmp_path / "corpus.txt"),
        model_prefix=str(tmp_path / "tokenizer"),
        vocab_size=300,
        byte_fallback=True,
        model_type="bpe",
        minloglevel=2,
    )
    config = {"tokenizer_class": "LlamaTokenizer", "eos_token": "</s>", "unk_token": "<unk>"}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path))
    vocabulary = engine_vocabulary(tokenizer, 320)
    assert vocabulary.scheme == "sentencepiece" and vocabulary.size == 320
    matcher = matcher_for(compile_json_schema(SCHEMA, vocabulary, cache=False))
    # The tokenizer's own encoding starts with the word-start marker (a space); a model
    # decoding under the mask writes the text without it, longest tokens first here.
    text, ids = b'{"a":12}', []
    while text:
        token = max(
            (
                t
                for t, piece in enumerate(vocabulary.token_bytes)
                if piece and text.startswith(piece)
            ),
            key=lambda t: len(vocabulary.token_bytes[t]),
        )
        ids.append(token)
        text = text[len(vocabulary.token_bytes[token]) :]
    assert matcher.advance_many(ids) == len(ids) and matcher.is_accepting()
    assert tokenizer.decode(ids) == '{"a":12}'


def test_a_tiktoken_encoding_is_refused_naming_what_is_needed(tmp_path: Path) -> None:
    tiktoken_load = pytest.importorskip("tiktoken.load")
    import tiktoken

    from fsmcompile.errors import VocabularyError
    from fsmcompile.runtime.vllm_backend import engine_vocabulary

    ranks = [bytes([b]) for b in range(256)] + [b"ab", b"abc", b"  "]
    bpe = tmp_path / "tiny.tiktoken"
    bpe.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for r, t in enumerate(ranks)))
    encoding = tiktoken.Encoding(
        name="tiny",
        pat_str=r"\S+|\s+",
        mergeable_ranks=tiktoken_load.load_tiktoken_bpe(str(bpe)),
        special_tokens={"<|eos|>": len(ranks)},
    )
    assert encoding.encode("abc") == [257]
    with pytest.raises(VocabularyError, match="backed by a tokenizer.json"):
        engine_vocabulary(encoding, 320)
