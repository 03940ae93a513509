"""The OpenAI server with the fsmcompile processor, driven over HTTP as clients drive it.

Specs travel as flat `vllm_xargs` keys (the only shape the server accepts there); the
server must answer a malformed spec or a forbidden `index` path with HTTP 400 and stay
healthy, and a request that fails inside the engine must fail alone.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from checks import KINDS, MARKER, Tally, check_output, compile_reference
from engines import SERVED_MODEL_NAME, Server

pytestmark = pytest.mark.vllm

MAX_TOKENS = 48


@pytest.fixture(scope="module")
def references(vocabulary: Any) -> dict[str, Any]:
    return {name: compile_reference(kind, vocabulary) for name, kind in KINDS.items()}


@pytest.fixture(scope="module")
def saved_index(references: dict[str, Any], index_dir: Path) -> Path:
    import fsmcompile

    path = index_dir / "server-digits.fsm"
    fsmcompile.save(references["index"], path)
    return path


def post(server: Server, path: str, body: dict[str, Any]) -> Any:
    import httpx

    return httpx.post(server.base_url + path, json=body, timeout=300)


def xargs_for(kind: str, index_path: Path) -> dict[str, str]:
    spec = KINDS[kind]
    if kind == "index":
        return {"fsmcompile_index": str(index_path)}
    xargs = {f"fsmcompile_{spec.kind}": spec.text}
    if spec.start_after:
        xargs["fsmcompile_start_after"] = spec.start_after
    return xargs


def body_for(kind: str, n: int, vocabulary: Any, index_path: Path, chat: bool) -> dict[str, Any]:
    eos = vocabulary.eos_token_ids[0]
    bias = {str(eos): 4}
    if KINDS[kind].start_after:
        [marker] = vocabulary.encode(MARKER)
        bias[str(marker)] = 100
    body: dict[str, Any] = {
        "model": SERVED_MODEL_NAME,
        "max_tokens": MAX_TOKENS,
        "temperature": 1.0,
        "seed": 500 + n,
        "logit_bias": bias,
        "return_token_ids": True,
        "vllm_xargs": xargs_for(kind, index_path),
    }
    if chat:
        body["messages"] = [{"role": "user", "content": f"Give me a {kind} answer."}]
    else:
        body["prompt"] = f"Request {n}:"
    return body


def output_token_ids(response: Any) -> list[int]:
    assert response.status_code == 200, response.text
    [choice] = response.json()["choices"]
    return list(choice["token_ids"])


def test_flat_xargs_guide_completions_and_chat(
    vllm_server: Server, vocabulary: Any, references: dict[str, Any], saved_index: Path
) -> None:
    """Every kind, over /v1/completions and /v1/chat/completions, sent concurrently."""
    jobs = [
        (kind, chat, body_for(kind, n, vocabulary, saved_index, chat))
        for n in range(3)
        for chat in (False, True)
        for kind in KINDS
    ]
    with ThreadPoolExecutor(max_workers=8) as pool:
        responses = list(
            pool.map(
                lambda job: post(
                    vllm_server, "/v1/chat/completions" if job[1] else "/v1/completions", job[2]
                ),
                jobs,
            )
        )
    tally = Tally()
    for (kind, chat, _), response in zip(jobs, responses, strict=True):
        label = f"{'chat' if chat else 'completion'} {kind}"
        tokens = output_token_ids(response)
        check_output(KINDS[kind], tokens, vocabulary, references[kind], tally, label)
    print(f"\nserver: {len(jobs)} requests; {tally.line()}")
    for kind in KINDS:
        assert tally.valid[kind] == tally.total[kind] == 6
        assert tally.ended[kind] >= 3, tally.line()


def test_nested_spec_as_json_text_under_one_key(
    vllm_server: Server, vocabulary: Any, references: dict[str, Any]
) -> None:
    body = body_for("regex", 9, vocabulary, Path("/unused"), chat=False)
    body["vllm_xargs"] = {"fsmcompile": json.dumps({"regex": KINDS["regex"].text})}
    tally = Tally()
    tokens = output_token_ids(post(vllm_server, "/v1/completions", body))
    check_output(KINDS["regex"], tokens, vocabulary, references["regex"], tally)


@pytest.mark.parametrize(
    ("xargs", "message"),
    [
        ({"fsmcompile_regex": "[0-9]{3}(ab"}, "missing ), unterminated subpattern at position 8"),
        ({"fsmcompile_json_schema": '{"type": "object",'}, "invalid JSON at line 1"),
        ({"fsmcompile_regexp": "a+"}, "unknown keys"),
        ({"fsmcompile_regex": "a", "fsmcompile_grammar": "start: A"}, "exactly one of"),
        ({"fsmcompile": '{"regex": 5}'}, "expected a string"),
        ({"fsmcompile_index": "/etc/passwd"}, "outside the directories"),
        ({"fsmcompile_index": "/dev/zero"}, "outside the directories"),
    ],
)
def test_malformed_or_forbidden_spec_is_http_400_and_server_stays_healthy(
    vllm_server: Server, vocabulary: Any, references: dict[str, Any], xargs: Any, message: str
) -> None:
    bad = {"model": SERVED_MODEL_NAME, "prompt": "x", "max_tokens": 4, "vllm_xargs": xargs}
    response = post(vllm_server, "/v1/completions", bad)
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]["message"]
    assert vllm_server.healthy()
    good = body_for("regex", 3, vocabulary, Path("/unused"), chat=False)
    tokens = output_token_ids(post(vllm_server, "/v1/completions", good))
    check_output(KINDS["regex"], tokens, vocabulary, references["regex"], Tally())


def test_engine_side_failure_stays_with_its_request(
    vllm_server: Server, vocabulary: Any, references: dict[str, Any], index_dir: Path
) -> None:
    """A FIFO under the allowed dir passes the API check; the engine refuses it alone."""
    import os

    fifo = index_dir / "server-pipe.fsm"
    if not fifo.exists():
        os.mkfifo(fifo)
    eos = vocabulary.eos_token_ids[0]
    failing = {
        "model": SERVED_MODEL_NAME,
        "prompt": "x",
        "max_tokens": MAX_TOKENS,
        "return_token_ids": True,
        "vllm_xargs": {"fsmcompile_index": str(fifo)},
    }
    jobs = [failing] + [body_for("regex", n, vocabulary, fifo, chat=False) for n in range(4)]
    with ThreadPoolExecutor(max_workers=5) as pool:
        responses = list(pool.map(lambda b: post(vllm_server, "/v1/completions", b), jobs))
    assert output_token_ids(responses[0]) == [eos]
    tally = Tally()
    for response in responses[1:]:
        tokens = output_token_ids(response)
        check_output(KINDS["regex"], tokens, vocabulary, references["regex"], tally)
    assert tally.valid["regex"] == 4
    assert vllm_server.healthy()


def test_openai_client_with_extra_body(vllm_server: Server, vocabulary: Any) -> None:
    """The README's client example: vllm_xargs through `extra_body`."""
    import jsonschema
    from openai import OpenAI

    client = OpenAI(base_url=vllm_server.base_url + "/v1", api_key="unused")
    schema = json.loads(KINDS["json_schema"].text)
    eos = vocabulary.eos_token_ids[0]
    reply = client.chat.completions.create(
        model=SERVED_MODEL_NAME,
        messages=[{"role": "user", "content": "A person, as JSON."}],
        max_tokens=MAX_TOKENS,
        temperature=0,
        logit_bias={str(eos): 8},
        extra_body={"vllm_xargs": {"fsmcompile_json_schema": json.dumps(schema)}},
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "stop", choice
    jsonschema.validate(json.loads(choice.message.content or ""), schema)
    with pytest.raises(Exception, match="400"):
        client.completions.create(
            model=SERVED_MODEL_NAME,
            prompt="x",
            max_tokens=4,
            extra_body={"vllm_xargs": {"fsmcompile_regex": "("}},
        )
