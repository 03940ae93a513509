"""The OpenAI server with fsmcompile as its structured-outputs backend, driven as clients do.

One server for the module (`backend_server`, `--structured-outputs-config
'{"backend": "fsmcompile"}'`). Every output is checked against what it must be: texts that
ended at a stop token are complete (JSON Schema validation, regex full match, Lark
parse), and every output, cut at `max_tokens` or not, is token by token a path of the
constraint (the returned token ids walked through a fresh fsmcompile matcher). Each spec
is looked up in the disk cache afterwards: the artifact there is fsmcompile's own, so the
request went through our compiler and cache, not vLLM's built-in backends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engines import Server, engine_env, start_server, stop_server

pytestmark = pytest.mark.vllm

MODEL = "tiny-qwen2"
IM_END = 151645  # the chat turn end: a stop token (generation config), not the EOS
EOS = 151643
ROUNDS = 6  # requests per kind, one seed each
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
REGEX = r"[0-9]{3}-[a-z]{2,6}"
CHOICES = ["red", "green", "blue"]
GRAMMAR = """
start: pair ("," pair)*
pair: NAME "=" NUMBER
NAME: /[a-z]{1,5}/
NUMBER: /[0-9]{1,3}/
"""


def post(server: Any, path: str, body: dict[str, Any]) -> Any:
    import httpx

    return httpx.post(server.base_url + path, json=body, timeout=180)


@pytest.fixture(scope="module")
def backend_server(
    tiny_model: Path, index_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """A server whose structured-outputs backend is fsmcompile."""
    log_path = tmp_path_factory.mktemp("backend-server") / "server.log"
    backend = ["--structured-outputs-config", '{"backend": "fsmcompile"}']
    server = start_server(tiny_model, engine_env(index_dir), log_path, backend)
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture(scope="module")
def engine_vocabulary(tiny_model: Path) -> Any:
    """The vocabulary the backend builds from the engine's tokenizer (same fingerprint)."""
    from vllm.tokenizers import get_tokenizer

    from fsmcompile.runtime.vllm_backend import engine_vocabulary

    return engine_vocabulary(get_tokenizer(str(tiny_model)), 151936)


def cached_index(kind: str, spec: str, vocabulary: Any) -> Any:
    """The index the server's compile left in the disk tier (None: not compiled by us)."""
    from fsmcompile import artifact
    from fsmcompile.compiler import index_cache_key
    from fsmcompile.store.disk import DiskStore

    data = DiskStore().get(index_cache_key(kind, spec, vocabulary))  # type: ignore[arg-type]
    return None if data is None else artifact.from_bytes(data, vocabulary)


def walk(index: Any, token_ids: list[int]) -> tuple[bool, bool]:
    """(every text token allowed in turn, the text complete) for an output's token ids."""
    from fsmcompile.runtime.matcher import matcher_for

    matcher = matcher_for(index)
    text = [t for t in token_ids if t not in (IM_END, EOS)]
    return matcher.advance_many(text) == len(text), matcher.is_accepting()


def tally(results: dict[str, list[bool]]) -> None:
    print({kind: f"{sum(ok)}/{len(ok)}" for kind, ok in results.items()})


def chat(server: Any, seed: int, **body: Any) -> dict[str, Any]:
    response = post(
        server,
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": "Answer."}],
            "max_tokens": 48,
            "temperature": 1.0,
            "seed": seed,
            "logit_bias": {str(IM_END): 12},  # end as soon as the text may end
            "return_token_ids": True,
            **body,
        },
    )
    assert response.status_code == 200, response.text
    return dict(response.json()["choices"][0])


def completion(server: Any, seed: int, constraint: dict[str, Any], **body: Any) -> dict[str, Any]:
    response = post(
        server,
        "/v1/completions",
        {
            "model": MODEL,
            "prompt": "Answer:",
            "max_tokens": 32,
            "temperature": 1.0,
            "seed": seed,
            "logit_bias": {str(EOS): 12},
            "return_token_ids": True,
            "structured_outputs": constraint,
            **body,
        },
    )
    assert response.status_code == 200, response.text
    return dict(response.json()["choices"][0])


def test_json_schema_response_format(backend_server, engine_vocabulary) -> None:
    import jsonschema

    ended = []
    for seed in range(ROUNDS):
        choice = chat(
            backend_server,
            seed,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "person", "schema": SCHEMA},
            },
        )
        content, tokens = choice["message"]["content"], choice["token_ids"]
        index = cached_index("json", json.dumps(SCHEMA), engine_vocabulary)
        assert index is not None
        path_ok, complete = walk(index, tokens)
        assert path_ok, content
        if choice["finish_reason"] == "stop":
            assert complete
            jsonschema.validate(json.loads(content), SCHEMA)
            ended.append(True)
        else:
            assert choice["finish_reason"] == "length"
            ended.append(False)
    tally({"json_schema ended valid": ended})
    assert sum(ended) >= ROUNDS // 2


def test_json_object_response_format(backend_server, engine_vocabulary) -> None:
    from fsmcompile.runtime.vllm_specs import JSON_OBJECT_SCHEMA

    ended = []
    for seed in range(ROUNDS):
        choice = chat(backend_server, seed, response_format={"type": "json_object"})
        index = cached_index("json", JSON_OBJECT_SCHEMA, engine_vocabulary)
        assert index is not None
        assert walk(index, choice["token_ids"])[0]
        if choice["finish_reason"] == "stop":
            assert isinstance(json.loads(choice["message"]["content"]), dict)
        ended.append(choice["finish_reason"] == "stop")
    tally({"json_object ended valid": ended})
    assert any(ended)


def test_regex_choice_and_grammar(backend_server, engine_vocabulary) -> None:
    import lark

    from fsmcompile.runtime.vllm_specs import choice_regex

    parser = lark.Lark(GRAMMAR, parser="lalr")
    cases = {
        "regex": ({"regex": REGEX}, ("regex", REGEX), lambda t: re.fullmatch(REGEX, t)),
        "choice": ({"choice": CHOICES}, ("regex", choice_regex(CHOICES)), CHOICES.__contains__),
        "grammar": ({"grammar": GRAMMAR}, ("lark", GRAMMAR), parser.parse),
    }
    results: dict[str, list[bool]] = {}
    for name, (constraint, (kind, spec), complete) in cases.items():
        results[name] = []
        for seed in range(ROUNDS):
            choice = completion(backend_server, seed, constraint)
            index = cached_index(kind, spec, engine_vocabulary)
            assert index is not None, name
            assert walk(index, choice["token_ids"])[0], (name, choice["text"])
            if choice["finish_reason"] == "stop":
                assert complete(choice["text"]), (name, choice["text"])
            results[name].append(choice["finish_reason"] == "stop")
    tally(results)
    assert all(sum(ok) >= ROUNDS // 2 for ok in results.values()), results


def test_min_tokens_past_a_complete_text_stops_instead_of_failing(backend_server) -> None:
    # After "red" only the stop tokens are allowed and min_tokens masks them: vLLM unmasks
    # the ones our row allows instead of leaving every logit at -inf.
    for seed in range(3):
        choice = completion(backend_server, seed, {"choice": CHOICES}, min_tokens=12)
        assert choice["text"] in CHOICES
        assert choice["finish_reason"] == "stop"


@pytest.mark.parametrize(
    ("constraint", "message"),
    [
        ({"json": {"type": "object", "properties": {"a": {"type": "strin"}}}}, "/properties/a"),
        ({"regex": "[0-9"}, "position"),
        ({"grammar": 'root ::= "yes" | "no"'}, "GBNF/EBNF"),
    ],
)
def test_a_bad_spec_is_a_400_and_the_server_carries_on(backend_server, constraint, message) -> None:
    response = post(
        backend_server,
        "/v1/completions",
        {"model": MODEL, "prompt": "x", "max_tokens": 4, "structured_outputs": constraint},
    )
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]["message"]
    assert backend_server.healthy()
    assert completion(backend_server, 0, {"choice": CHOICES})["text"] in CHOICES


def test_an_invalid_response_format_schema_is_a_400(backend_server) -> None:
    response = post(
        backend_server,
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": "x"}],
            "max_tokens": 4,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "bad", "schema": {"type": "object", "minProperties": -1}},
            },
        },
    )
    assert response.status_code == 400, response.text
    assert "fsmcompile" in response.json()["error"]["message"]
    assert backend_server.healthy()
