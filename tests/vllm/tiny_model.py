"""Build a tiny random-weight Qwen2 model around the real Qwen2 tokenizer, for vLLM tests.

vLLM loads a model directory like any Hugging Face checkpoint, so the end-to-end tests need
one without a download: the real tokenizer (from `tests/data/qwen2`) gives real token
bytes and the real EOS, and random weights are enough because every check is on the
constraint, not on what the model says. Head size 32 is the smallest the CPU attention
backend takes; the embedding is tied to the output layer to keep the files small.

With `think_tokens=True` the tokenizer also has Qwen3's reasoning markers, `<think>` and
`</think>`, as the plain (not special) added tokens 151667 and 151668 that Qwen3 gives
them, in place of two of the Qwen2 file's padding entries: a reasoning parser finds its
markers by those ids, as it does in a Qwen3 checkpoint.

Run as a script to build one: `python tests/vllm/tiny_model.py OUT_DIR [--think]`.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

TOKENIZER_DIR = Path(__file__).resolve().parents[1] / "data" / "qwen2"
VOCAB_SIZE = 151936  # Qwen2's model rows (the tokenizer has 151,665 ids; the rest pad)
EOS_TOKEN_ID = 151643  # <|endoftext|>
IM_END_TOKEN_ID = 151645  # <|im_end|>, the chat turn end
THINK_TOKENS = {151667: "<think>", 151668: "</think>"}  # Qwen3's ids for them

# ChatML, as Qwen2 chat models use: the turn end is a stop token, not EOS.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def build_tiny_qwen2(out_dir: Path, *, seed: int = 0, think_tokens: bool = False) -> Path:
    """Write config, random weights and the tokenizer to `out_dir` (idempotent); return it."""
    out_dir = Path(out_dir)
    if (out_dir / "config.json").is_file() and (out_dir / "model.safetensors").is_file():
        return out_dir
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    out_dir.mkdir(parents=True, exist_ok=True)
    config = Qwen2Config(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=EOS_TOKEN_ID,
        eos_token_id=EOS_TOKEN_ID,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(torch.float32)
    model.save_pretrained(out_dir, safe_serialization=True)
    with gzip.open(TOKENIZER_DIR / "tokenizer.json.gz", "rb") as src:
        with open(out_dir / "tokenizer.json", "wb") as dst:
            shutil.copyfileobj(src, dst)
    if think_tokens:
        add_think_tokens(out_dir / "tokenizer.json")
    tokenizer_config = json.loads((TOKENIZER_DIR / "tokenizer_config.json").read_text())
    tokenizer_config["chat_template"] = CHAT_TEMPLATE
    (out_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))
    generation_config = {"eos_token_id": [EOS_TOKEN_ID, IM_END_TOKEN_ID]}
    (out_dir / "generation_config.json").write_text(json.dumps(generation_config))
    return out_dir


def add_think_tokens(tokenizer_json: Path) -> None:
    """Rename two padding entries of a Qwen2 tokenizer.json to Qwen3's `<think>`, `</think>`."""
    data = json.loads(tokenizer_json.read_text())
    vocab = data["model"]["vocab"]
    for entry in data["added_tokens"]:
        content = THINK_TOKENS.get(entry["id"])
        if content is not None:
            assert entry["content"] == f"[PAD{entry['id']}]", entry
            del vocab[entry["content"]]
            vocab[content] = entry["id"]
            entry.update(content=content, special=False)
    tokenizer_json.write_text(json.dumps(data, ensure_ascii=False))


if __name__ == "__main__":
    print(build_tiny_qwen2(Path(sys.argv[1]), think_tokens="--think" in sys.argv[2:]))
