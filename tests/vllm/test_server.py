"""The OpenAI server with the fsmcompile processor, driven over HTTP as clients drive it."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.vllm


def post(server: Any, path: str, body: dict[str, Any]) -> Any:
    import httpx

    return httpx.post(server.base_url + path, json=body, timeout=120)


def test_unguided_completion(vllm_server: Any) -> None:
    response = post(
        vllm_server,
        "/v1/completions",
        {"model": "tiny-qwen2", "prompt": "hello", "max_tokens": 4, "temperature": 0},
    )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["text"]
    assert vllm_server.healthy()
