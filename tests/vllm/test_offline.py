"""vLLM's offline engine with the fsmcompile processor: one mixed batch, every output checked.

One `LLM.generate` call carries every spelling and kind of spec at once (regex, JSON
Schema as a dict and as text, Lark grammar, a saved artifact under the allowed
directory, a `start_after` marker, flat keys) with unguided requests mixed in, plus
requests that pass the API checks but fail in the engine (a FIFO and a corrupt file
under the allowed directory, a schema with a dangling `$ref`): those must end at once
with EOS while every other request in the batch is unaffected.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from checks import KINDS, MARKER, Tally, check_output, compile_reference

pytestmark = pytest.mark.vllm

PER_KIND = 6
MAX_TOKENS = 48
PROMPTS = ["The answer is", "hello", "Write JSON:", "1 + 1 =", "Name:", "Q: yes or no?"]


def sampling_params(kind: str, n: int, eos: int, marker: int, index_path: Path) -> Any:
    """The n-th request of `kind`, alternating the spellings and samplers."""
    from vllm import SamplingParams

    spec = KINDS[kind]
    extra: dict[str, Any]
    if kind == "index":
        extra = {"fsmcompile": {"index": str(index_path)}}
    elif kind == "json_schema" and n % 2:
        extra = {"fsmcompile": {"json_schema": json.loads(spec.text)}}  # dict form
    elif n % 3 == 2:
        extra = {f"fsmcompile_{spec.kind}": spec.text}  # flat keys, as vllm_xargs sends
        if spec.start_after:
            extra["fsmcompile_start_after"] = spec.start_after
    else:
        extra = {"fsmcompile": {spec.kind: spec.text}}
        if spec.start_after:
            extra["fsmcompile"]["start_after"] = spec.start_after
    bias = {eos: 4.0}
    if spec.start_after:
        bias[marker] = 100.0  # the random model writes the marker first
    return SamplingParams(
        max_tokens=MAX_TOKENS,
        temperature=0.0 if n == 0 else 1.0,
        seed=1000 + n,
        logit_bias=bias,
        extra_args=extra,
    )


def test_mixed_batch_every_output_obeys_its_spec(
    offline_llm: Any, vocabulary: Any, index_dir: Path
) -> None:
    from vllm import SamplingParams

    import fsmcompile

    eos = vocabulary.eos_token_ids[0]
    [marker] = vocabulary.encode(MARKER)
    references = {name: compile_reference(kind, vocabulary) for name, kind in KINDS.items()}
    saved = index_dir / "digits.fsm"
    fsmcompile.save(references["index"], saved)
    fifo = index_dir / "pipe.fsm"
    if not fifo.exists():
        os.mkfifo(fifo)
    corrupt = index_dir / "corrupt.fsm"
    corrupt.write_bytes(saved.read_bytes()[:-7])

    requests: list[tuple[str, Any]] = []
    for n in range(PER_KIND):
        for kind in KINDS:
            requests.append((kind, sampling_params(kind, n, eos, marker, saved)))
        requests.append(("unguided", SamplingParams(max_tokens=8, temperature=1.0, seed=n)))
    broken = {
        "fifo": {"fsmcompile_index": str(fifo)},
        "corrupt": {"fsmcompile_index": str(corrupt)},
        "bad_ref": {"fsmcompile_json_schema": '{"$ref": "#/definitions/none"}'},
    }
    for name, extra in broken.items():
        requests.append((name, SamplingParams(max_tokens=MAX_TOKENS, extra_args=extra)))

    started = time.perf_counter()
    outputs = offline_llm.generate(
        [PROMPTS[i % len(PROMPTS)] for i in range(len(requests))],
        [params for _, params in requests],
        use_tqdm=False,
    )
    elapsed = time.perf_counter() - started
    tally = Tally()
    for i, ((kind, _), output) in enumerate(zip(requests, outputs, strict=True)):
        token_ids = list(output.outputs[0].token_ids)
        if kind == "unguided":
            assert token_ids, "unguided request produced nothing"
            tally.total[kind] += 1
            tally.valid[kind] += 1
        elif kind in broken:
            assert token_ids == [eos], (kind, token_ids)  # EOS-only, at once
            tally.total[kind] += 1
            tally.valid[kind] += 1
        else:
            check_output(KINDS[kind], token_ids, vocabulary, references[kind], tally, f"#{i}")
    print(f"\noffline: {len(requests)} requests in {elapsed:.1f}s; {tally.line()}")
    for kind in KINDS:
        assert tally.valid[kind] == tally.total[kind] == PER_KIND
        assert tally.ended[kind] >= PER_KIND // 2, tally.line()  # the EOS bias ends most
