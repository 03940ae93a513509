"""An index that loads but fails in use fails its own vLLM request, never the batch.

The crafted artifact of `test_native_walk.py` passes every loader check, yet a 64-dash
token makes the runtime refuse its walk (more than 4,096 readings a byte). Through the
logits processor that request must end (EOS-only rows) while its neighbour keeps its
exact masks.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from test_native_walk import branching_artifact, dash_token

import fsmcompile
from fsmcompile import artifact
from fsmcompile.runtime import Matcher
from fsmcompile.runtime.vllm import BatchUpdate, FSMLogitsProcessor, register_index
from fsmcompile.tables.bits import unpack_row

GPT2 = Path(__file__).resolve().parents[1] / "data" / "gpt2" / "tokenizer.json.gz"


def test_a_failing_index_ends_its_request_and_spares_the_batch(gpt2) -> None:
    register_index("branching", artifact.from_bytes(branching_artifact(gpt2), gpt2))
    good_index = fsmcompile.compile_regex("-+[0-9]", gpt2)
    register_index("dashes", good_index)
    config = SimpleNamespace(
        model_config=SimpleNamespace(tokenizer=str(GPT2), get_vocab_size=lambda: gpt2.size)
    )
    proc = FSMLogitsProcessor(config, torch.device("cpu"), False)
    outputs: list[list[int]] = [[], []]
    added = [
        (i, SimpleNamespace(extra_args={"fsmcompile": {"index": key}}), [1], outputs[i])
        for i, key in enumerate(("branching", "dashes"))
    ]
    proc.update_state(BatchUpdate(2, [], added, []))
    dashes = dash_token(gpt2, 64)
    for output in outputs:
        output.append(dashes)
    proc.update_state(None)  # raised out of the processor before: the batch was lost
    logits = torch.zeros(2, gpt2.size)
    proc.apply(logits)
    allowed = torch.isfinite(logits).numpy()
    assert np.flatnonzero(allowed[0]).tolist() == sorted(gpt2.eos_token_ids)
    reference = Matcher(good_index)
    assert reference.advance(dashes)
    words = np.zeros((1, (gpt2.size + 31) // 32), dtype=np.int32)
    reference.fill_bitmask(words, 0)
    np.testing.assert_array_equal(allowed[1], unpack_row(words[0], gpt2.size))
