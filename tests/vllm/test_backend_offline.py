"""vLLM's offline `LLM` with `StructuredOutputsParams`, fsmcompile chosen by the environment.

`FSMCOMPILE_VLLM_BACKEND=1` routes the default backend ("auto") to fsmcompile; nothing
here calls `register`: vLLM loads the plugin through its entry point in this process and
in its engine process. The engine runs ngram speculative decoding, so drafts go through
the backend's `validate_tokens`, `accept_tokens` and `rollback` inside vLLM's scheduler.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.vllm

REGEX = r"(ab|cd){2,6}-[0-9]{1,4}"
SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "ok": {"type": "boolean"}},
    "required": ["id", "ok"],
    "additionalProperties": False,
}
ROUNDS = 6


@pytest.fixture(scope="module")
def backend_llm(tiny_model: Path) -> Iterator[Any]:
    patch = pytest.MonkeyPatch()
    patch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    patch.setenv("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    patch.setenv("FSMCOMPILE_VLLM_BACKEND", "1")
    from vllm import LLM

    llm = LLM(
        model=str(tiny_model),
        max_model_len=512,
        max_num_seqs=8,
        enforce_eager=True,
        dtype="float32",
        seed=0,
        speculative_config={
            "method": "ngram",
            "num_speculative_tokens": 3,
            "prompt_lookup_max": 3,
            "prompt_lookup_min": 1,
        },
    )
    yield llm
    client = llm.llm_engine.engine_core
    client.shutdown()  # the engine process ends with the module
    client.ctx.destroy(linger=0)  # vLLM leaves its zmq context open for the collector
    patch.undo()


def generate(llm: Any, prompt: str, **constraint: Any) -> list[Any]:
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    params = [
        SamplingParams(
            max_tokens=40,
            temperature=1.0,
            seed=seed,
            structured_outputs=StructuredOutputsParams(**constraint),
        )
        for seed in range(ROUNDS)
    ]
    return [output.outputs[0] for output in llm.generate([prompt] * ROUNDS, params)]


def test_offline_regex_and_json_through_the_backend(backend_llm) -> None:
    import jsonschema

    from fsmcompile.store.disk import DiskStore

    cached = set(DiskStore().keys())

    # A prompt that repeats what the constraint allows gives the ngram drafter drafts.
    counts = {}
    outputs = generate(backend_llm, "abcdab-12 cdcd-7 abab-99 ", regex=REGEX)
    assert all(o.finish_reason in ("stop", "length") for o in outputs)
    ended = [o for o in outputs if o.finish_reason == "stop"]
    assert all(re.fullmatch(REGEX, o.text) for o in ended), [o.text for o in ended]
    assert all(re.fullmatch(r"(ab|cd){0,6}(-[0-9]{0,4})?", o.text) for o in outputs)
    counts["regex"] = f"{len(ended)}/{ROUNDS}"
    outputs = generate(backend_llm, '{"id":1,"ok":true} {"id":2,"ok":false} ', json=SCHEMA)
    ended = [o for o in outputs if o.finish_reason == "stop"]
    for output in ended:
        jsonschema.validate(json.loads(output.text), SCHEMA)
    counts["json"] = f"{len(ended)}/{ROUNDS}"
    print(counts)
    assert ended
    assert len(set(DiskStore().keys()) - cached) == 2  # both compiled by fsmcompile
