"""A reasoning model behind the OpenAI server, fsmcompile as its structured-outputs backend.

The server runs `--reasoning-parser deepseek_r1`: vLLM's structured-output manager leaves
the grammar out until the model writes `</think>` (it checks each step's new tokens with
the parser's `is_reasoning_end_streaming`), then feeds the backend only what follows. So
the thinking must be free and the answer exact. The tiny model gets Qwen3's `<think>`
and `</think>` tokens (`tiny_model.add_think_tokens`); a logit bias on `</think>` makes
the random model end its thinking after a dozen free tokens or so.

Each output is split at its first `</think>`: the tokens after it are checked as every
e2e output is (`checks.check_output`: a path of the constraint, and complete when it
ended: `jsonschema`, `re.fullmatch`); the tokens before it must include some the
constraint refuses, or the thinking was not free. In the chat API the parser's split is
checked too: `reasoning` and `content` are the texts before and after the marker.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from checks import KINDS, Tally, check_output, compile_reference
from engines import SERVED_MODEL_NAME, Server, engine_env, start_server, stop_server

pytestmark = pytest.mark.vllm

ROUNDS = 8
MAX_TOKENS = 96
EOS = 151643
IM_END = 151645  # the chat turn end: a stop token (generation config), not the EOS
THINK_END = 151668  # </think>
# Thinking ends with probability ~0.08 a step (e^9.5 against ~150k near-equal logits).
# No bias on the stop tokens, which would end some thinking early: both constraints are
# bounded, so their answers reach a stop token well within MAX_TOKENS.
BIAS = {str(THINK_END): 9.5}


@pytest.fixture(scope="module")
def think_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_model import build_tiny_qwen2

    return build_tiny_qwen2(tmp_path_factory.mktemp("tiny-qwen2-think"), think_tokens=True)


@pytest.fixture(scope="module")
def think_vocabulary(think_model: Path) -> Any:
    from fsmcompile import Vocabulary

    return Vocabulary.load(str(think_model), vocab_size=151936)


@pytest.fixture(scope="module")
def reasoning_server(
    think_model: Path, index_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    log_path = tmp_path_factory.mktemp("reasoning-server") / "server.log"
    args = [
        "--reasoning-parser",
        "deepseek_r1",
        "--structured-outputs-config",
        '{"backend": "fsmcompile"}',
    ]
    server = start_server(think_model, engine_env(index_dir), log_path, args)
    try:
        yield server
    finally:
        stop_server(server)


def post(server: Server, path: str, body: dict[str, Any]) -> dict[str, Any]:
    import httpx

    body = {
        "model": SERVED_MODEL_NAME,
        "max_tokens": MAX_TOKENS,
        "temperature": 1.0,
        "logit_bias": BIAS,
        "return_token_ids": True,
        **body,
    }
    response = httpx.post(server.base_url + path, json=body, timeout=180)
    assert response.status_code == 200, response.text
    return dict(response.json()["choices"][0])


def check_answer(
    name: str, token_ids: list[int], vocabulary: Any, index: Any, tally: Tally, label: str
) -> tuple[list[int], bool]:
    """Check the tokens after the first `</think>`; return (the thinking, the answer's
    tokens walked and counted: False while the thinking had not ended)."""
    if THINK_END not in token_ids:
        return token_ids, False
    cut = token_ids.index(THINK_END)
    answer = token_ids[cut + 1 :]
    if answer and answer[-1] == IM_END:
        answer[-1] = EOS  # the request ends at any of its stop tokens
    check_output(KINDS[name], answer, vocabulary, index, tally, label)
    return token_ids[:cut], True


def refused_somewhere(index: Any, thinking: list[int]) -> bool:
    """Whether the constraint, from its start, refuses some token of the thinking."""
    from fsmcompile.runtime.matcher import matcher_for

    return matcher_for(index).advance_many(thinking) < len(thinking)


def test_reasoning_is_free_and_the_answer_exact(reasoning_server, think_vocabulary) -> None:
    import jsonschema

    schema = json.loads(KINDS["json_schema"].text)
    references = {
        n: compile_reference(KINDS[n], think_vocabulary) for n in ("json_schema", "regex")
    }
    tally = Tally()
    thinking_ended = {"json_schema": 0, "regex": 0}
    free_thinking = {"json_schema": 0, "regex": 0}
    for seed in range(ROUNDS):
        choice = post(
            reasoning_server,
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": "Answer."}],
                "seed": seed,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "person", "schema": schema},
                },
            },
        )
        tokens = choice["token_ids"]
        index = references["json_schema"]
        label = f"chat #{seed}"
        thinking, ended = check_answer("json_schema", tokens, think_vocabulary, index, tally, label)
        if ended:
            thinking_ended["json_schema"] += 1
            free_thinking["json_schema"] += refused_somewhere(index, thinking)
            message = choice["message"]
            assert message["reasoning"] == think_vocabulary.decode_bytes(thinking).decode(
                "utf-8", "replace"
            ), label
            if choice["finish_reason"] == "stop":
                jsonschema.validate(json.loads(message["content"]), schema)

        choice = post(
            reasoning_server,
            "/v1/completions",
            {
                "prompt": "Answer:",
                "seed": seed,
                "structured_outputs": {"regex": KINDS["regex"].text},
            },
        )
        tokens, index = choice["token_ids"], references["regex"]
        label = f"completion #{seed}"
        thinking, ended = check_answer("regex", tokens, think_vocabulary, index, tally, label)
        if ended:
            thinking_ended["regex"] += 1
            free_thinking["regex"] += refused_somewhere(index, thinking)
    print(f"\nreasoning: thinking ended {thinking_ended}, of it free {free_thinking} (of {ROUNDS})")
    print(f"answers after </think>: {tally.line()}")
    for name in thinking_ended:
        assert thinking_ended[name] >= ROUNDS - 2, thinking_ended
        assert tally.valid[name] == tally.total[name] == thinking_ended[name], tally.line()
        assert tally.ended[name] >= ROUNDS // 2, tally.line()
        assert free_thinking[name] >= ROUNDS // 2, free_thinking
