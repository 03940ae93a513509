"""Async scheduling in real vLLM: both fsmcompile paths, one mixed batch, every output checked.

Async scheduling is vLLM's default on GPUs: the engine schedules step N+1 before step N's
token is known, so the model runner appends a -1 placeholder to each output list and
writes the real id into it only just before sampling. vLLM's CPU platform turns async
scheduling off whatever the flag says (`CpuPlatform.check_and_update_config`; the first
test pins that down), so the engine here is built with the platform hook wrapped to turn
it back on: the CPU model runner is vLLM's GPU runner with host tensors, and it then runs
the same async path (placeholders, the `AsyncScheduler`) as on a GPU. The worker's
runner is asked whether it really runs async.

One `generate` call mixes the logits processor (`extra_args`) and the structured-outputs
backend (`StructuredOutputsParams`, selected by `FSMCOMPILE_VLLM_BACKEND=1`); every
output is walked through a reference matcher and, when it ended, validated.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from checks import KINDS, MARKER, Tally, check_output, compile_reference
from engines import MAX_MODEL_LEN, MAX_NUM_SEQS, PROCESSOR, engine_env

pytestmark = pytest.mark.vllm

PER_KIND = 6
MAX_TOKENS = 40
IM_END = 151645  # a stop token of the backend's requests (generation config), not the EOS
PROCESSOR_KINDS = ("regex", "json_schema", "grammar", "start_after")
BACKEND_KINDS = {"regex": "regex", "json_schema": "json", "grammar": "grammar"}


def test_cpu_platform_turns_async_scheduling_off(tiny_model: Path) -> None:
    """Why the engine below wraps the platform hook: the flag alone is dropped on CPU."""
    from vllm.engine.arg_utils import EngineArgs

    args = EngineArgs(
        model=str(tiny_model), max_model_len=MAX_MODEL_LEN, enforce_eager=True, dtype="float32"
    )
    args.async_scheduling = True
    assert args.create_engine_config().scheduler_config.async_scheduling is False


@pytest.fixture(scope="module")
def async_llm(tiny_model: Path, index_dir: Path) -> Iterator[Any]:
    """An offline `LLM` that really schedules asynchronously, with both fsmcompile paths."""
    patch = pytest.MonkeyPatch()
    for key, value in engine_env(index_dir).items():
        patch.setenv(key, value)
    patch.setenv("FSMCOMPILE_VLLM_BACKEND", "1")
    patch.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # collective_rpc of a function
    from vllm import LLM
    from vllm.platforms.cpu import CpuPlatform

    hook = CpuPlatform.check_and_update_config.__func__  # type: ignore[attr-defined]

    def keep_async(cls: type, vllm_config: Any) -> None:
        hook(cls, vllm_config)
        vllm_config.scheduler_config.async_scheduling = True

    # The engine process gets the config built here (pickled), so the patch needs to
    # live only in this process.
    patch.setattr(CpuPlatform, "check_and_update_config", classmethod(keep_async))
    llm = LLM(
        model=str(tiny_model),
        max_model_len=MAX_MODEL_LEN,
        max_num_seqs=MAX_NUM_SEQS,
        enforce_eager=True,
        dtype="float32",
        seed=0,
        async_scheduling=True,
        logits_processors=[PROCESSOR],
    )
    try:
        yield llm
    finally:
        patch.undo()
        client = llm.llm_engine.engine_core
        client.shutdown()
        client.ctx.destroy(linger=0)  # vLLM leaves its zmq context open for the collector


def request_params(path: str, kind: str, n: int, eos: int, marker: int) -> Any:
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    spec = KINDS[kind]
    bias = {eos: 4.0, marker: 100.0} if spec.start_after else {eos: 4.0}
    common: dict[str, Any] = {
        "max_tokens": MAX_TOKENS,
        "temperature": 1.0,
        "seed": 2000 + n,
        "logit_bias": bias,
    }
    if path == "processor":
        extra: dict[str, Any] = {spec.kind: spec.text}
        if spec.start_after:
            extra["start_after"] = spec.start_after
        return SamplingParams(extra_args={"fsmcompile": extra}, **common)
    text = json.loads(spec.text) if kind == "json_schema" else spec.text
    constraint = StructuredOutputsParams(**{BACKEND_KINDS[kind]: text})
    return SamplingParams(structured_outputs=constraint, **common)


def test_async_scheduling_mixed_batch_every_output_obeys_its_spec(
    async_llm: Any, vocabulary: Any
) -> None:
    assert async_llm.llm_engine.vllm_config.scheduler_config.async_scheduling is True
    runs_async = async_llm.collective_rpc(
        lambda worker: worker.model_runner.use_async_scheduling  # type: ignore[no-any-return]
    )
    assert runs_async == [True]

    eos = vocabulary.eos_token_ids[0]
    [marker] = vocabulary.encode(MARKER)
    references = {name: compile_reference(KINDS[name], vocabulary) for name in PROCESSOR_KINDS}
    requests = [
        (path, kind, request_params(path, kind, n, eos, marker))
        for n in range(PER_KIND)
        for path, kinds in (("processor", PROCESSOR_KINDS), ("backend", BACKEND_KINDS))
        for kind in kinds
    ]
    outputs = async_llm.generate(
        ["Answer:"] * len(requests), [params for *_, params in requests], use_tqdm=False
    )
    tallies = {"processor": Tally(), "backend": Tally()}
    for i, ((path, kind, _), output) in enumerate(zip(requests, outputs, strict=True)):
        token_ids = list(output.outputs[0].token_ids)
        if path == "backend" and token_ids and token_ids[-1] == IM_END:
            token_ids[-1] = eos  # the backend ends at any stop token of the request
        check_output(KINDS[kind], token_ids, vocabulary, references[kind], tallies[path], f"#{i}")
    for path, tally in tallies.items():
        print(f"\nasync scheduling, {path}: {tally.line()}")
        for kind in tally.total:
            assert tally.valid[kind] == tally.total[kind] == PER_KIND, (path, tally.line())
            assert tally.ended[kind] >= PER_KIND // 2, (path, tally.line())
