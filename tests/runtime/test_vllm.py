"""FSMLogitsProcessor driven exactly as vLLM v1 drives it, with toy indexes on CPU.

`EngineSim` builds each step's BatchUpdate the way vLLM's "Logits Processors" design doc
says the model runner does: finished requests are replaced by new ones lowest index
first, extra new requests are appended, unreplaced finished requests are removed, the
batch is condensed by moving the highest occupied slot into the lowest hole
(UNIDIRECTIONAL) and shrunk, and then the attention backend may SWAP rows.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import fsmcompile
from fsmcompile.runtime import Matcher
from fsmcompile.runtime.bitmask import DeviceMaskTable
from fsmcompile.runtime.matcher import tables_for
from fsmcompile.runtime.vllm import (
    BatchUpdate,
    FSMLogitsProcessor,
    MoveDirectionality,
    RequestSpec,
    register_index,
)
from fsmcompile.tables.bits import unpack_row

UNI = MoveDirectionality.UNIDIRECTIONAL
SWAP = MoveDirectionality.SWAP
EOS = 0
VOCAB_SIZE = 40

# Each pattern is bounded, so every request ends at EOS within a few tokens.
PATTERNS = {
    "A": "a{1,3}",
    "B": "b{1,3}",
    "C": "c{1,3}",
    "D": "1{1,3}",
    "E": "2{1,3}",
    "F": "-{1,3}",
    "G": '\\{"a":(1|2){1,2}\\}',
    "H": "(ab|c){1,4}",
}


@dataclass(eq=False)
class Req:
    """A request as the engine holds it: params plus the output list vLLM shares."""

    name: str
    params: SimpleNamespace
    prompt: list[int] = field(default_factory=lambda: [5, 6])
    output: list[int] = field(default_factory=list)
    pattern: str | None = None


class EngineSim:
    """The persistent batch and the BatchUpdate it hands to logits processors."""

    def __init__(self) -> None:
        self.batch: list[Req | None] = []

    def step(
        self, new: list[Req], finished: set[str], swaps: list[tuple[int, int]] = ()
    ) -> BatchUpdate | None:
        batch = self.batch
        added, removed, moved = [], [], []
        waiting = list(new)
        # 1-3: replace finished requests with new ones, lowest index first.
        for i in sorted(i for i, r in enumerate(batch) if r is not None and r.name in finished):
            if waiting:
                req = waiting.pop(0)
                batch[i] = req
                added.append((i, req.params, req.prompt, req.output))
            else:
                batch[i] = None
                removed.append(i)
        # 4.2: extra new requests extend the batch at current max index + 1.
        for req in waiting:
            batch.append(req)
            added.append((len(batch) - 1, req.params, req.prompt, req.output))
        # 4.3: condense: highest occupied slot into the lowest hole, then shrink.
        while True:
            while batch and batch[-1] is None:
                batch.pop()
            if None not in batch:
                break
            hole = batch.index(None)
            src = len(batch) - 1
            batch[hole], batch[src] = batch[src], None
            moved.append((src, hole, UNI))
        # 5: the attention backend may reorder.
        for a, b in swaps:
            batch[a], batch[b] = batch[b], batch[a]
            moved.append((a, b, SWAP))
        if not (added or removed or moved):
            return None
        return BatchUpdate(len(batch), removed, added, moved)


def guided(name: str, pattern: str | None = None, **extra) -> Req:
    pattern = PATTERNS[name[0]] if pattern is None else pattern
    spec = {"regex": pattern, **extra}
    return Req(name, SimpleNamespace(extra_args={"fsmcompile": spec}), pattern=pattern)


def unguided(name: str) -> Req:
    return Req(name, SimpleNamespace(extra_args=None))


@pytest.fixture
def toy_engine(rt, monkeypatch):
    """fsmcompile.Vocabulary.load and compile_regex replaced by the toy fixtures."""
    vocab = rt.make_vocabulary(rt.TOY_TOKENS, eos=[EOS], size=VOCAB_SIZE)
    compiled = []

    def compile_regex(pattern, vocabulary):
        assert vocabulary is vocab
        compiled.append(pattern)
        return rt.index_from_regex(pattern, vocabulary)

    monkeypatch.setattr(
        fsmcompile, "Vocabulary", SimpleNamespace(load=lambda name, **options: vocab), raising=False
    )
    monkeypatch.setattr(fsmcompile, "compile_regex", compile_regex, raising=False)
    config = SimpleNamespace(
        model_config=SimpleNamespace(tokenizer="toy", get_vocab_size=lambda: VOCAB_SIZE)
    )
    return SimpleNamespace(vocab=vocab, config=config, compiled=compiled, rt=rt)


def new_processor(toy_engine, device: str = "cpu") -> FSMLogitsProcessor:
    return FSMLogitsProcessor(toy_engine.config, torch.device(device), device == "cuda")


def masked_rows(proc: FSMLogitsProcessor, batch_size: int) -> np.ndarray:
    """bool[B, V]: which tokens each row still allows after apply."""
    logits = torch.zeros(batch_size, VOCAB_SIZE)
    out = proc.apply(logits)
    assert out is logits
    return torch.isfinite(logits).numpy()


def first_tokens(toy_engine, pattern: str) -> np.ndarray:
    index = toy_engine.rt.index_from_regex(pattern, toy_engine.vocab)
    return toy_engine.rt.reference_allowed(index, 0)


def test_processor_interface_flags():
    assert FSMLogitsProcessor.validate_params(SimpleNamespace(extra_args=None)) is None
    with pytest.raises(ValueError, match="exactly one of"):
        FSMLogitsProcessor.validate_params(
            SimpleNamespace(extra_args={"fsmcompile": {"regex": "a", "grammar": "b"}})
        )
    with pytest.raises(ValueError, match="invalid JSON at line 1 column 1"):
        FSMLogitsProcessor.validate_params(SimpleNamespace(extra_args={"fsmcompile": "a+"}))
    with pytest.raises(ValueError, match="must be an object"):
        FSMLogitsProcessor.validate_params(SimpleNamespace(extra_args={"fsmcompile": "[1]"}))


def test_request_spec_json_schema_dict_canonicalised():
    a = RequestSpec.from_params(
        SimpleNamespace(extra_args={"fsmcompile": {"json_schema": {"b": 1, "a": 2}}})
    )
    b = RequestSpec.from_params(
        SimpleNamespace(extra_args={"fsmcompile": {"json_schema": {"a": 2, "b": 1}}})
    )
    assert a == b and a.text == '{"a":2,"b":1}'


def test_processor_not_argmax_invariant_and_idle_apply_is_identity(toy_engine):
    proc = new_processor(toy_engine)
    assert proc.is_argmax_invariant() is False
    proc.update_state(None)
    logits = torch.randn(3, VOCAB_SIZE)
    before = logits.clone()
    assert proc.apply(logits) is logits
    assert torch.equal(logits, before)


def test_doc_example_fewer_new_than_finished(toy_engine):
    """vLLM docs: [A,B,C,D], E new, A and C finish, backend swaps 0<->1.

    Add E at 0 (replaces A), remove 2 (C), condense 3->2, shrink to 3, swap 0<->1:
    final batch [B,E,D]; added [(0,E)], removed [2], moved [(3,2,UNI),(0,1,SWAP)].
    """
    sim, proc = EngineSim(), new_processor(toy_engine)
    reqs = {n: guided(n) for n in "ABCDE"}
    proc.update_state(sim.step([reqs[n] for n in "ABCD"], set()))
    update = sim.step([reqs["E"]], {"A", "C"}, swaps=[(0, 1)])
    assert update.batch_size == 3
    assert [(i, p) for i, p, *_ in update.added] == [(0, reqs["E"].params)]
    assert update.added[0][3] is reqs["E"].output  # held by reference
    assert list(update.removed) == [2]
    assert list(update.moved) == [(3, 2, UNI), (0, 1, SWAP)]
    proc.update_state(update)
    rows = masked_rows(proc, 3)
    for row, name in enumerate("BED"):
        np.testing.assert_array_equal(rows[row], first_tokens(toy_engine, PATTERNS[name]))


def test_doc_example_more_new_than_finished(toy_engine):
    """vLLM docs: [A,B,C,D], E and F new, C finishes, backend swaps 0<->1.

    Add E at 2 (replaces C), add F at 4 (max index + 1; the doc's step 2 says "Add E"
    but means F), no removes so no condensing, swap 0<->1: final batch [B,A,E,D,F];
    added [(2,E),(4,F)], removed [], moved [(0,1,SWAP)].
    """
    sim, proc = EngineSim(), new_processor(toy_engine)
    reqs = {n: guided(n) for n in "ABCDEF"}
    proc.update_state(sim.step([reqs[n] for n in "ABCD"], set()))
    update = sim.step([reqs["E"], reqs["F"]], {"C"}, swaps=[(0, 1)])
    assert update.batch_size == 5
    assert [(i, p) for i, p, *_ in update.added] == [(2, reqs["E"].params), (4, reqs["F"].params)]
    assert list(update.removed) == []
    assert list(update.moved) == [(0, 1, SWAP)]
    proc.update_state(update)
    rows = masked_rows(proc, 5)
    for row, name in enumerate("BAEDF"):
        np.testing.assert_array_equal(rows[row], first_tokens(toy_engine, PATTERNS[name]))


def test_doc_semantics_add_replaces_and_unidirectional_move_discards(toy_engine):
    proc = new_processor(toy_engine)
    a, b, c, d = (guided(n) for n in "ABCD")
    added = [(i, r.params, r.prompt, r.output) for i, r in enumerate((a, b, c))]
    proc.update_state(BatchUpdate(3, [], added, []))
    # Add D at 1 replaces B; then move 2 -> 0 discards A and empties 2.
    proc.update_state(BatchUpdate(2, [], [(1, d.params, d.prompt, d.output)], [(2, 0, UNI)]))
    rows = masked_rows(proc, 2)
    np.testing.assert_array_equal(rows[0], first_tokens(toy_engine, PATTERNS["C"]))
    np.testing.assert_array_equal(rows[1], first_tokens(toy_engine, PATTERNS["D"]))


def test_processor_none_update_advances_by_appended_tokens(toy_engine):
    proc = new_processor(toy_engine)
    req = guided("H")
    proc.update_state(BatchUpdate(1, [], [(0, req.params, req.prompt, req.output)], []))
    req.output.extend([4, 3])  # "ab", "c": two tokens in one step (speculative decoding)
    proc.update_state(None)
    index = toy_engine.rt.index_from_regex(PATTERNS["H"], toy_engine.vocab)
    state = index.dfa.walk(b"abc")
    np.testing.assert_array_equal(
        masked_rows(proc, 1)[0], toy_engine.rt.reference_allowed(index, state)
    )


def test_processor_unguided_rows_untouched(toy_engine):
    proc = new_processor(toy_engine)
    g, u = guided("A"), unguided("u")
    added = [(0, u.params, u.prompt, u.output), (1, g.params, g.prompt, g.output)]
    proc.update_state(BatchUpdate(2, [], added, []))
    logits = torch.randn(2, VOCAB_SIZE)
    before = logits.clone()
    proc.apply(logits)
    assert torch.equal(logits[0], before[0])
    assert torch.isfinite(logits[1]).sum() == int(first_tokens(toy_engine, "a{1,3}").sum())


def test_processor_invalid_spec_row_gets_eos_only_and_logs(toy_engine, caplog):
    proc = new_processor(toy_engine)
    bad_regex = guided("A", pattern="(")  # interegular cannot parse it
    bad_shape = Req("x", SimpleNamespace(extra_args={"fsmcompile": {"regex": 3}}))
    missing = Req("y", SimpleNamespace(extra_args={"fsmcompile": {"grammar": "start: A"}}))
    ok = guided("B")
    reqs = [bad_regex, bad_shape, missing, ok]
    added = [(i, r.params, r.prompt, r.output) for i, r in enumerate(reqs)]
    with caplog.at_level(logging.ERROR, logger="fsmcompile.runtime.vllm"):
        proc.update_state(BatchUpdate(4, [], added, []))
    rows = masked_rows(proc, 4)
    for row in range(3):
        assert np.flatnonzero(rows[row]).tolist() == [EOS]
    np.testing.assert_array_equal(rows[3], first_tokens(toy_engine, PATTERNS["B"]))
    assert len([r for r in caplog.records if "forcing EOS" in r.getMessage()]) == 3
    assert all("(" not in r.getMessage().split(":", 2)[-1] for r in caplog.records)


def test_processor_matcher_failure_fails_only_its_request(toy_engine, monkeypatch, caplog):
    """An index that compiles but whose matcher cannot be built fails only its request."""
    import fsmcompile.runtime.vllm.rows as rows_module

    real, calls = rows_module.matcher_for, []

    def fragile(index):
        calls.append(index)
        if len(calls) == 1:
            raise RuntimeError("matcher construction failed")
        return real(index)

    monkeypatch.setattr(rows_module, "matcher_for", fragile)
    proc = new_processor(toy_engine)
    reqs = [guided("A"), guided("B")]
    added = [(i, r.params, r.prompt, r.output) for i, r in enumerate(reqs)]
    with caplog.at_level(logging.ERROR, logger="fsmcompile.runtime.vllm"):
        proc.update_state(BatchUpdate(2, [], added, []))
    rows = masked_rows(proc, 2)
    assert np.flatnonzero(rows[0]).tolist() == [EOS]
    np.testing.assert_array_equal(rows[1], first_tokens(toy_engine, PATTERNS["B"]))
    assert "batch index 0 (regex): RuntimeError" in caplog.text


def test_processor_only_invalid_spec_still_gets_eos_only(toy_engine):
    proc = new_processor(toy_engine)
    bad = guided("A", pattern="(")
    proc.update_state(BatchUpdate(1, [], [(0, bad.params, bad.prompt, bad.output)], []))
    assert np.flatnonzero(masked_rows(proc, 1)[0]).tolist() == [EOS]


def test_processor_tokenizer_unloadable_logs_and_leaves_row_unmasked(toy_engine, monkeypatch):
    def fail(name, **options):
        raise fsmcompile.VocabularyError("no tokenizer here")

    monkeypatch.setattr(fsmcompile, "Vocabulary", SimpleNamespace(load=fail), raising=False)
    proc = new_processor(toy_engine)
    req = guided("A")
    proc.update_state(BatchUpdate(1, [], [(0, req.params, req.prompt, req.output)], []))
    assert masked_rows(proc, 1)[0].all()


def test_processor_disallowed_sampled_token_forces_eos(toy_engine, caplog):
    proc = new_processor(toy_engine)
    req = guided("A")
    proc.update_state(BatchUpdate(1, [], [(0, req.params, req.prompt, req.output)], []))
    req.output.append(2)  # "b" is not allowed by a{1,3}
    with caplog.at_level(logging.ERROR, logger="fsmcompile.runtime.vllm"):
        proc.update_state(None)
    assert np.flatnonzero(masked_rows(proc, 1)[0]).tolist() == [EOS]
    assert "sampled token 2 was not allowed" in caplog.text


def test_processor_finished_constraint_allows_only_eos(toy_engine):
    proc = new_processor(toy_engine)
    req = guided("A")
    proc.update_state(BatchUpdate(1, [], [(0, req.params, req.prompt, req.output)], []))
    req.output.extend([1, 1, 1])
    proc.update_state(None)
    assert np.flatnonzero(masked_rows(proc, 1)[0]).tolist() == [EOS]
    req.output.append(EOS)
    proc.update_state(None)
    assert np.flatnonzero(masked_rows(proc, 1)[0]).tolist() == [EOS]


def test_processor_async_placeholder_repaired_before_apply_is_read(toy_engine):
    # Async scheduling: at update_state the last step's token is a -1 placeholder; vLLM
    # writes the real id into the same list just before sampling (update_state, repair,
    # apply). The mask must follow the repaired token, not the state before it.
    index = toy_engine.rt.index_from_regex(PATTERNS["H"], toy_engine.vocab)
    proc = new_processor(toy_engine)
    req = guided("H")
    proc.update_state(BatchUpdate(1, [], [(0, req.params, req.prompt, req.output)], []))
    np.testing.assert_array_equal(masked_rows(proc, 1)[0], first_tokens(toy_engine, "(ab|c){1,4}"))
    for step, token in enumerate([3, 3, 3, 3]):  # "cccc": the fourth ends the text
        req.output.append(-1)
        proc.update_state(None)
        req.output[-1] = token
        expected = toy_engine.rt.reference_allowed(index, index.dfa.walk(b"c" * (step + 1)))
        np.testing.assert_array_equal(masked_rows(proc, 1)[0], expected)
    assert np.flatnonzero(expected).tolist() == [EOS]


def test_processor_async_placeholder_still_there_at_apply_waits(toy_engine):
    proc = new_processor(toy_engine)
    req = guided("H")
    proc.update_state(BatchUpdate(1, [], [(0, req.params, req.prompt, req.output)], []))
    req.output.append(-1)
    proc.update_state(None)
    np.testing.assert_array_equal(masked_rows(proc, 1)[0], first_tokens(toy_engine, "(ab|c){1,4}"))
    req.output[0] = 3  # "c" arrives
    proc.update_state(None)
    index = toy_engine.rt.index_from_regex(PATTERNS["H"], toy_engine.vocab)
    np.testing.assert_array_equal(
        masked_rows(proc, 1)[0], toy_engine.rt.reference_allowed(index, index.dfa.walk(b"c"))
    )


@pytest.mark.parametrize("split", [False, True])
def test_processor_start_after_enforces_after_marker(toy_engine, split):
    proc = new_processor(toy_engine)
    req = guided("A", start_after="--" if split else "ab")
    proc.update_state(BatchUpdate(1, [], [(0, req.params, req.prompt, req.output)], []))
    assert masked_rows(proc, 1)[0].all()  # not yet enforced
    req.output.extend([3, 9] if split else [3, 1])  # "c-" / "ca": no marker yet
    proc.update_state(None)
    assert masked_rows(proc, 1)[0].all()
    req.output.extend([9] if split else [2])  # completes "--" / "ab" across two tokens
    proc.update_state(None)
    np.testing.assert_array_equal(masked_rows(proc, 1)[0], first_tokens(toy_engine, "a{1,3}"))
    req.output.append(1)
    proc.update_state(None)
    assert masked_rows(proc, 1)[0][1]


def test_processor_index_key_and_compile_cache(toy_engine):
    index = toy_engine.rt.index_from_regex("c+", toy_engine.vocab)
    register_index("test-key", index)
    proc = new_processor(toy_engine)
    keyed = Req("k", SimpleNamespace(extra_args={"fsmcompile": {"index": "test-key"}}))
    missing = Req("m", SimpleNamespace(extra_args={"fsmcompile": {"index": "no-such-key"}}))
    same = [guided("A1", pattern="a+"), guided("A2", pattern="a+")]
    reqs = [keyed, missing, *same]
    added = [(i, r.params, r.prompt, r.output) for i, r in enumerate(reqs)]
    proc.update_state(BatchUpdate(4, [], added, []))
    rows = masked_rows(proc, 4)
    np.testing.assert_array_equal(rows[0], toy_engine.rt.reference_allowed(index, 0))
    assert np.flatnonzero(rows[1]).tolist() == [EOS]
    assert toy_engine.compiled == ["a+"]  # compiled once for both requests


def test_device_mask_table_evicts_unused_and_compacts(rt):
    vocab = rt.make_vocabulary(rt.TOY_TOKENS, eos=[EOS], size=VOCAB_SIZE)
    indexes = [rt.index_from_regex(p, vocab) for p in ("a+", "b+c", '\\{"a":1\\}', "(ab|c)+")]
    tables = [tables_for(i) for i in indexes]
    # Room for about 8 rows: forces eviction on the later uploads.
    table = DeviceMaskTable("cpu", VOCAB_SIZE, [EOS], max_table_bytes=8 * 2 * 4)
    segments = [table.acquire(t) for t in tables[:2]]
    table.release(segments[0])
    later = [table.acquire(t) for t in tables[2:]]
    for seg, tab in [(segments[1], tables[1]), *zip(later, tables[2:], strict=True)]:
        ids = torch.arange(seg.offset, seg.offset + seg.num_rows)
        np.testing.assert_array_equal(table.gather(ids).numpy(), np.stack(tab.mask_rows))
    eos_row = table.gather(torch.tensor([DeviceMaskTable.EOS_ROW])).numpy()[0]
    np.testing.assert_array_equal(eos_row, rt.eos_only_words(vocab))


def sample_allowed(rng, allowed: np.ndarray) -> int:
    choices = np.flatnonzero(allowed)
    # Prefer text tokens so requests make progress, but take EOS sometimes.
    if len(choices) > 1 and EOS in choices and rng.random() < 0.7:
        choices = choices[choices != EOS]
    return int(rng.choice(choices))


def test_randomized_batch_matches_reference_matchers(toy_engine):
    """Thousands of steps of arrivals, finishes, aborts and swaps.

    Every step, every row's mask must equal its own reference Matcher's, unguided rows
    stay untouched, and every request that ended at EOS matches its regex.
    """
    finished_ok, violated = run_randomized(toy_engine, "cpu", steps=2500, seed=1234)
    # About 0.8 arrivals a step and ~3-8 tokens a request: ~2000 requests in all.
    assert finished_ok > 1000
    assert violated > 20


class PerStepMatcher:
    """A Matcher in disguise: not a `Matcher`, so the processor takes the per-step path
    that Lark grammar matchers (masks depend on the parser stack) use."""

    def __init__(self, index):
        self._matcher = Matcher(index)

    def __getattr__(self, name):
        return getattr(self._matcher, name)


def test_randomized_batch_per_step_masks_match_reference(toy_engine, monkeypatch):
    import fsmcompile.runtime.vllm.rows as vllm_module

    monkeypatch.setattr(vllm_module, "matcher_for", PerStepMatcher)
    finished_ok, violated = run_randomized(toy_engine, "cpu", steps=600, seed=77)
    assert finished_ok > 200
    assert violated > 3


@pytest.mark.parametrize("per_step", [False, True])
def test_processor_fewer_logits_rows_than_batch_masks_existing_rows(
    toy_engine, monkeypatch, caplog, per_step
):
    import fsmcompile.runtime.vllm.rows as vllm_module

    if per_step:
        monkeypatch.setattr(vllm_module, "matcher_for", PerStepMatcher)
    proc = new_processor(toy_engine)
    reqs = [guided(n) for n in "ABC"]
    proc.update_state(
        BatchUpdate(3, [], [(i, r.params, r.prompt, r.output) for i, r in enumerate(reqs)], [])
    )
    with caplog.at_level(logging.WARNING, logger="fsmcompile.runtime.vllm"):
        rows = masked_rows(proc, 2)
    for row, name in enumerate("AB"):
        np.testing.assert_array_equal(rows[row], first_tokens(toy_engine, PATTERNS[name]))
    assert "logits have 2 rows but a guided request sits past them" in caplog.text


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("per_step", [False, True])
def test_randomized_batch_on_cuda_matches_reference_matchers(toy_engine, monkeypatch, per_step):
    import fsmcompile.runtime.vllm.rows as vllm_module

    if per_step:
        monkeypatch.setattr(vllm_module, "matcher_for", PerStepMatcher)
    finished_ok, violated = run_randomized(toy_engine, "cuda", steps=400, seed=99)
    assert finished_ok > 100


def run_randomized(toy_engine, device: str, steps: int, seed: int) -> tuple[int, int]:
    rng = np.random.default_rng(seed)
    rt = toy_engine.rt
    sim, proc = EngineSim(), new_processor(toy_engine, device)
    refs: dict[str, Matcher | None] = {}
    violated: set[str] = set()
    names = itertools.count()
    done: set[str] = set()
    finished_ok = 0
    ref_indexes = {k: rt.index_from_regex(p, toy_engine.vocab) for k, p in PATTERNS.items()}
    for _ in range(steps):
        new = []
        for _ in range(rng.poisson(0.8)):
            kind = str(rng.choice(list(PATTERNS)))
            name = f"{kind}{next(names)}"
            if rng.random() < 0.15:
                req = unguided(name)
                refs[name] = None
            else:
                req = guided(name, pattern=PATTERNS[kind])
                refs[name] = Matcher(ref_indexes[kind])
            new.append(req)
        live = [r for r in sim.batch if r is not None]
        finished = set(done)
        finished |= {r.name for r in live if rng.random() < 0.02}  # aborts / length caps
        size_after = len(live) - len(finished & {r.name for r in live}) + len(new)
        swaps = []
        if size_after > 1 and rng.random() < 0.3:
            swaps = [tuple(int(x) for x in rng.choice(size_after, 2, replace=False))]
        proc.update_state(sim.step(new, finished, swaps))
        done.clear()
        batch = sim.batch
        if not batch:
            continue
        host_logits = rng.standard_normal((len(batch), VOCAB_SIZE)).astype(np.float32)
        logits = torch.from_numpy(host_logits).to(device)
        before = logits.clone()
        assert proc.apply(logits) is logits
        finite = torch.isfinite(logits).cpu().numpy()
        for row, req in enumerate(batch):
            ref = refs[req.name]
            if ref is None:
                assert torch.equal(logits[row], before[row])
                req.output.append(int(rng.integers(1, 15)))
                continue
            words = np.zeros(2, dtype=np.int32)
            if req.name in violated:
                expected = rt.eos_only_words(toy_engine.vocab)
            else:
                ref.fill_bitmask(words)
                expected = words
            np.testing.assert_array_equal(finite[row], unpack_row(expected, VOCAB_SIZE))
            if rng.random() < 0.01 and req.name not in violated:
                token = int(rng.integers(1, 15))  # a sampler that ignored the mask
                if not ref.validate_tokens([token]):
                    violated.add(req.name)
                else:
                    ref.advance(token)
            else:
                token = sample_allowed(rng, finite[row])
                if req.name not in violated:
                    assert ref.advance(token)
            req.output.append(token)
            if token == EOS:
                done.add(req.name)
                if req.name not in violated:
                    text = b"".join(toy_engine.vocab.token_bytes[t] for t in req.output[:-1])
                    assert rt.fullmatch(req.pattern, text), (req.pattern, text)
                    finished_ok += 1
    return finished_ok, len(violated)
