"""The V2 model runner's interface, with vLLM's own V2 classes on CPU.

The V2 runner itself needs Triton kernels (vLLM's CPU build runs it only with triton-cpu,
which is not installed here: the engine refuses `VLLM_USE_V2_MODEL_RUNNER=1` with "Model
Runner V2 requires Triton"). What runs here is everything around those kernels: vLLM's
loaders and params validator build and check `FSMLogitsProcessor` for both runners, and
the processor reads a real `RequestState` (its `all_token_ids`, `total_len` and
`prompt_len` tensors, through `LogitsProcRequestState`) and real `LogitsContext`s. The
two device writes the runner does with Triton, the staged prompt write and the
post-sampling token append, are done here with plain tensor writes of the same cells.

Each step's masks are compared, row for row, with reference matchers fed the same
tokens, while requests arrive in reused slots, rows are reordered, requests are
preempted and resumed, and speculative decoding gives a request several rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.vllm

PROCESSOR = "fsmcompile.runtime.vllm:FSMLogitsProcessor"
MAX_NUM_REQS = 6
MAX_MODEL_LEN = 96

SPECS: dict[str, dict[str, Any]] = {
    "regex": {"regex": "[a-z]{1,6}( [a-z]{1,6}){0,2}"},
    "json": {
        "json_schema": json.dumps(
            {
                "type": "object",
                "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}},
                "required": ["n"],
                "additionalProperties": False,
            }
        )
    },
    "grammar": {"grammar": 'start: "(" NUM ("+" NUM)* ")"\nNUM: /[0-9]{1,2}/'},
    "after": {"regex": "(yes|no)", "start_after": "##"},
}


@pytest.fixture(scope="module")
def v2(tiny_model: Path) -> Any:
    """vLLM's V2 classes, as the CPU worker sets them up (its buffer patches included)."""
    import torch
    import vllm.v1.worker.cpu.shm  # noqa: F401 - the CPU worker's UVA-buffer patches
    from vllm.engine.arg_utils import EngineArgs
    from vllm.v1.worker.gpu.sample.logits_processor import (
        LogitsContext,
        LogitsProcRequestState,
        build_custom_logits_processors,
        build_custom_logits_processors_params_validator,
    )
    from vllm.v1.worker.gpu.states import RequestState

    config = EngineArgs(
        model=str(tiny_model), max_model_len=MAX_MODEL_LEN, enforce_eager=True
    ).create_engine_config()
    return type(
        "V2",
        (),
        {
            "torch": torch,
            "config": config,
            "LogitsContext": LogitsContext,
            "LogitsProcRequestState": LogitsProcRequestState,
            "RequestState": RequestState,
            "build": staticmethod(build_custom_logits_processors),
            "validator": staticmethod(build_custom_logits_processors_params_validator),
        },
    )


@pytest.fixture(scope="module")
def references(vocabulary: Any) -> dict[str, Any]:
    """Each spec compiled once; the processor compiles its own copy in the engine."""
    import fsmcompile

    compiled = {}
    for name, spec in SPECS.items():
        kind, text = next((k, v) for k, v in spec.items() if k != "start_after")
        compile_fn = {
            "regex": fsmcompile.compile_regex,
            "json_schema": fsmcompile.compile_json_schema,
            "grammar": fsmcompile.compile_lark,
        }[kind]
        compiled[name] = compile_fn(text, vocabulary)
    return compiled


class Runner:
    """The V2 runner's bookkeeping around the processor, minus the model."""

    def __init__(self, v2: Any, processor_paths: list[str], num_spec: int = 0) -> None:
        self.v2 = v2
        torch = v2.torch
        self.states = v2.RequestState(
            max_num_reqs=MAX_NUM_REQS,
            max_model_len=MAX_MODEL_LEN,
            max_num_batched_tokens=256,
            num_speculative_steps=num_spec,
            vocab_size=v2.config.model_config.get_vocab_size(),
            device=torch.device("cpu"),
        )
        [self.processor] = v2.build(v2.config, self.states, False, processor_paths)

    def add(self, req_id: str, prompt: list[int], params: Any, outputs: list[int] = ()) -> int:
        """A new (or resumed: `outputs` already produced) request, as `add_requests` does."""
        tokens = [*prompt, *outputs]
        self.states.add_request(
            req_id=req_id,
            prompt_len=len(prompt),
            all_token_ids=tokens,
            num_computed_tokens=0,
            max_tokens=64,
        )
        slot = self.states.req_id_to_index[req_id]
        guided = self.processor.add_request(slot, params)
        # The staged writes, done by a Triton kernel in the runner.
        self.states.all_token_ids.gpu[slot, : len(tokens)] = self.v2.torch.tensor(tokens)
        self.states.total_len.gpu[slot] = len(tokens)
        self.states.all_token_ids.clear_staged_writes()
        self.states.total_len.clear_staged_writes()
        self.processor.apply_staged_writes()
        assert guided == (params.extra_args is not None)
        return slot

    def remove(self, req_id: str) -> None:
        self.states.remove_request(req_id)

    def commit(self, slot: int, tokens: list[int]) -> None:
        """`post_update`: append sampled tokens at total_len (a Triton kernel there)."""
        total = int(self.states.total_len.gpu[slot])
        self.states.all_token_ids.gpu[slot, total : total + len(tokens)] = self.v2.torch.tensor(
            tokens
        )
        self.states.total_len.gpu[slot] = total + len(tokens)

    def masks(
        self, slots: list[int], drafts: dict[int, list[int]] | None = None, seed: int = 0
    ) -> np.ndarray:
        """bool[rows, V]: what `apply` leaves finite, for batch order `slots`."""
        torch = self.v2.torch
        drafts = drafts or {}
        owners, local, inputs = [], [], []
        for slot in slots:
            extra = drafts.get(slot, [])
            owners += [slot] * (1 + len(extra))
            local += list(range(1 + len(extra)))
            inputs += [0, *extra]
        ctx = self.v2.LogitsContext(
            expanded_idx_mapping=torch.tensor(owners, dtype=torch.int32),
            idx_mapping=torch.tensor(slots, dtype=torch.int32),
            idx_mapping_np=np.array(slots, dtype=np.int32),
            expanded_local_pos=torch.tensor(local, dtype=torch.int32),
            input_ids=torch.tensor(inputs, dtype=torch.int32),
            pos=torch.zeros(len(owners), dtype=torch.int64),
            seq_lens_upper_bound_np=np.zeros(len(slots), dtype=np.int32),
        )
        generator = torch.Generator().manual_seed(seed)
        width = self.states.vocab_size
        logits = torch.randn(len(owners), width, generator=generator)
        out = self.processor.apply(logits, ctx)
        return torch.isfinite(out).numpy()


def reference_mask(matcher: Any, vocab_size: int) -> np.ndarray:
    from fsmcompile.tables.bits import bitmask_words, unpack_row

    words = np.zeros((1, bitmask_words(vocab_size)), dtype=np.int32)
    matcher.fill_bitmask(words, 0)
    return unpack_row(words[0], vocab_size)


def sample(rng: np.random.Generator, allowed: np.ndarray, eos: int) -> int:
    choices = np.flatnonzero(allowed)
    if len(choices) > 1 and rng.random() < 0.85:
        choices = choices[choices != eos]
    return int(rng.choice(choices))


def test_both_loaders_build_the_processor(v2: Any) -> None:
    """vLLM's V1 and V2 loaders accept the one class path (V2 raised ValueError before)."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.sample.logits_processor import build_logitsprocs

    from fsmcompile.runtime.vllm.v1 import V1Processor
    from fsmcompile.runtime.vllm.v2 import V2Processor

    runner = Runner(v2, [PROCESSOR])
    assert type(runner.processor) is V2Processor
    v1 = build_logitsprocs(v2.config, v2.torch.device("cpu"), False, False, [PROCESSOR])
    assert [type(p) for p in v1.all if type(p).__module__.startswith("fsmcompile")] == [V1Processor]
    validate = v2.validator([PROCESSOR])
    validate(SamplingParams(extra_args={"fsmcompile_regex": "[0-9]+"}))
    from vllm.exceptions import VLLMValidationError

    with pytest.raises(VLLMValidationError, match="column 2"):
        validate(SamplingParams(extra_args={"fsmcompile_json_schema": "{oops"}))


def test_masks_follow_reference_matchers_through_slot_reuse_and_reordering(
    v2: Any, vocabulary: Any, references: dict[str, Any], index_dir: Path, monkeypatch: Any
) -> None:
    from vllm.sampling_params import SamplingParams

    import fsmcompile
    from fsmcompile.runtime.matcher import matcher_for

    monkeypatch.setenv("FSMCOMPILE_INDEX_DIRS", str(index_dir))
    saved = index_dir / "v2-regex.fsm"
    fsmcompile.save(references["regex"], saved)
    eos = vocabulary.eos_token_ids[0]
    size = v2.config.model_config.get_vocab_size()
    runner = Runner(v2, [PROCESSOR])
    rng = np.random.default_rng(7)
    plain_tokens = vocabulary.encode("hello world again")  # no '#': the marker stays unseen
    kinds = [*SPECS, "file", "plain", "bad_path"]
    live: dict[str, dict[str, Any]] = {}  # req_id -> slot, reference matcher, marker, output
    counts = {"ended": 0, "steps": 0, "masked_rows": 0}
    for step in range(70):
        while len(live) < MAX_NUM_REQS - 1 and rng.random() < 0.6:
            kind = kinds[int(rng.integers(len(kinds)))]
            req_id = f"{kind}-{step}-{len(live)}"
            spec = {"file": {"index": str(saved)}, "plain": None}.get(kind, SPECS.get(kind))
            if kind == "bad_path":
                spec = {"index": "/etc/passwd"}
            extra = {"fsmcompile": spec} if spec is not None else None
            runner.add(req_id, [11, 12, 13], SamplingParams(extra_args=extra))
            slot = runner.states.req_id_to_index[req_id]
            reference = None
            if kind in references or kind == "file":
                reference = matcher_for(references["regex" if kind == "file" else kind])
            live[req_id] = {
                "slot": slot,
                "kind": kind,
                "ref": reference,
                "waiting": kind == "after",
                "tail": "",
            }
        if not live:
            continue
        order = list(live)
        rng.shuffle(order)
        slots = [live[r]["slot"] for r in order]
        finite = runner.masks(slots, seed=step)
        counts["steps"] += 1
        for row, req_id in enumerate(order):
            req = live[req_id]
            if req["kind"] == "plain" or req["waiting"]:
                assert finite[row].all(), (req_id, "unguided row was masked")
                token = int(rng.choice(plain_tokens))
                if req["waiting"] and rng.random() < 0.3:
                    [token] = vocabulary.encode("##")
                    req["waiting"] = False
            elif req["kind"] == "bad_path":
                assert np.flatnonzero(finite[row]).tolist() == [eos], req_id
                token = eos
            else:
                expected = reference_mask(req["ref"], size)
                np.testing.assert_array_equal(finite[row], expected, err_msg=req_id)
                counts["masked_rows"] += 1
                token = sample(rng, finite[row], eos)
                assert req["ref"].advance(token)
            runner.commit(req["slot"], [token])
            if token == eos or rng.random() < 0.02:
                counts["ended"] += token == eos
                runner.remove(req_id)
                del live[req_id]
    assert counts["ended"] > 15 and counts["masked_rows"] > 100, counts


def test_resumed_request_reads_its_earlier_output(v2: Any, vocabulary: Any, references: Any):
    from vllm.sampling_params import SamplingParams

    from fsmcompile.runtime.matcher import matcher_for

    runner = Runner(v2, [PROCESSOR])
    params = SamplingParams(extra_args={"fsmcompile": SPECS["regex"]})
    before = vocabulary.encode("abc de")
    runner.add("r", [5, 6], params, outputs=before)  # resumed after a preemption
    reference = matcher_for(references["regex"])
    assert reference.advance_many(before) == len(before)
    [finite] = runner.masks([runner.states.req_id_to_index["r"]])
    np.testing.assert_array_equal(finite, reference_mask(reference, finite.shape[0]))


def test_padding_rows_are_left_alone(v2: Any, vocabulary: Any, references: Any) -> None:
    """A negative slot in the batch is padding: never read, never masked."""
    from vllm.sampling_params import SamplingParams

    from fsmcompile.runtime.matcher import matcher_for

    runner = Runner(v2, [PROCESSOR])
    runner.add("r", [5], SamplingParams(extra_args={"fsmcompile": SPECS["regex"]}))
    slot = runner.states.req_id_to_index["r"]
    finite = runner.masks([-1, slot])
    assert finite[0].all()
    expected = reference_mask(matcher_for(references["regex"]), finite.shape[1])
    np.testing.assert_array_equal(finite[1], expected)


def test_speculative_rows_follow_the_drafts(v2: Any, vocabulary: Any, references: Any) -> None:
    from vllm.sampling_params import SamplingParams

    from fsmcompile.runtime.matcher import matcher_for

    runner = Runner(v2, [PROCESSOR], num_spec=3)
    runner.add("s", [5], SamplingParams(extra_args={"fsmcompile": SPECS["json"]}))
    runner.add("u", [5], SamplingParams())
    slot, plain = runner.states.req_id_to_index["s"], runner.states.req_id_to_index["u"]
    drafts = vocabulary.encode('{"n"')
    bad = vocabulary.encode("zz")[:1]  # refused right after '{"n"'
    finite = runner.masks([plain, slot], drafts={slot: [*drafts, *bad], plain: [1, 2]})
    assert finite[:3].all()  # the unguided request's three rows
    reference = matcher_for(references["json"])
    for k in range(len(drafts) + 1):
        expected = reference_mask(reference, finite.shape[1])
        np.testing.assert_array_equal(finite[3 + k], expected, err_msg=f"row after {k} drafts")
        if k < len(drafts):
            assert reference.advance(drafts[k])
    eos = vocabulary.eos_token_ids[0]
    assert np.flatnonzero(finite[3 + len(drafts) + 1]).tolist() == [eos]  # after a refused draft
    # Drafts are not committed: the next step starts from the committed tokens.
    runner.commit(slot, drafts[:1])
    [row] = runner.masks([slot])
    reference = matcher_for(references["json"])
    assert reference.advance(drafts[0])
    np.testing.assert_array_equal(row, reference_mask(reference, row.shape[0]))


def test_matcher_failure_stays_with_its_request(
    v2: Any, vocabulary: Any, references: Any, monkeypatch: Any
) -> None:
    """An index that loads but whose matcher cannot be built fails only its request."""
    from vllm.sampling_params import SamplingParams

    import fsmcompile.runtime.vllm.rows as rows_module
    from fsmcompile.runtime.matcher import matcher_for

    calls = []

    def fragile(index: Any) -> Any:
        calls.append(index)
        if len(calls) == 1:  # the first request's
            raise RuntimeError("matcher construction failed")
        return matcher_for(index)

    monkeypatch.setattr(rows_module, "matcher_for", fragile)
    runner = Runner(v2, [PROCESSOR])
    runner.add("bad", [5], SamplingParams(extra_args={"fsmcompile": SPECS["json"]}))
    runner.add("good", [5], SamplingParams(extra_args={"fsmcompile": SPECS["regex"]}))
    slots = [runner.states.req_id_to_index[r] for r in ("bad", "good")]
    finite = runner.masks(slots)
    assert np.flatnonzero(finite[0]).tolist() == list(vocabulary.eos_token_ids[:1])
    expected = reference_mask(matcher_for(references["regex"]), finite.shape[1])
    np.testing.assert_array_equal(finite[1], expected)


def test_unsupported_vllm_version_fails_at_start_up() -> None:
    """Loading the processor under another vLLM release names the supported ones."""
    import subprocess
    import sys

    script = (
        "import vllm; vllm.__version__ = '0.31.2'\n"
        "from vllm.v1.worker.gpu.sample.logits_processor.loader import "
        "_load_v2_logitsprocs_by_fqcns as load\n"
        f"load([{PROCESSOR!r}])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode != 0
    assert "Failed to load 0th LogitsProcessor plugin" in done.stderr
    assert "supports vLLM 0.32.x, 0.33.x; found vLLM 0.31.2" in done.stderr
