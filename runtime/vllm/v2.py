"""The V2 model runner's side: requests by slot, tokens from the runner's request states.

The V2 runner (`vllm.v1.worker.gpu`) gives each request a persistent slot and calls
`add_request(slot, params)` when a request (new, or resumed after preemption) takes it;
there is no removal call, so a slot's row lives until the slot is reused. Sampled tokens
are not handed over: they are in `req_states.all_token_ids[slot]` on the device, valid
up to `req_states.total_len[slot]`, after the `prompt_len[slot]` prompt tokens. Logits
rows are not slots: `ctx.idx_mapping_np` maps each batch position to its slot, and under
speculative decoding a request owns several rows (`ctx.expanded_idx_mapping`), the k-th
sampling after the first k-1 draft tokens (`ctx.input_ids` of its later rows).

Reading the new tokens costs two small device-to-host copies per step with guided
requests (their lengths, then the tokens); steps without guided requests cost nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .processor import FSMLogitsProcessor
from .rows import GuidedRows, MaskPlan, Row, logger


class V2Processor(FSMLogitsProcessor):
    """`FSMLogitsProcessor` as the V2 runner builds and drives it."""

    def __init__(self, vllm_config: Any, req_states: Any) -> None:
        """Args:
        vllm_config: the engine's VllmConfig; uses `model_config.tokenizer`.
        req_states: the runner's `LogitsProcRequestState` (device, max_num_reqs,
            vocab_size, all_token_ids, prompt_len, total_len), read-only.
        """
        device = torch.device(req_states.device)
        self._states = req_states
        self._guided = GuidedRows(
            tokenizer=vllm_config.model_config.tokenizer,
            vocab_size=int(req_states.vocab_size),
            device=device,
            pin=device.type == "cuda",
        )
        self._rows: list[Row | None] = [None] * int(req_states.max_num_reqs)

    def add_request(self, req_idx: int, sampling_params: Any) -> bool:
        """Start the slot's row afresh; whether the request is guided (its logits change)."""
        old = self._rows[req_idx]
        if old is not None:
            self._guided.release(old)
        # prompt_len is set on the host before the sampler hears of the request; output
        # (including any produced before a preemption) starts there.
        prompt_len = int(self._states.prompt_len.np[req_idx])
        row = self._guided.new_row(sampling_params, f"slot {req_idx}", consumed=prompt_len)
        self._rows[req_idx] = row
        return row is not None

    def apply_staged_writes(self) -> None:
        """Nothing to flush: rows live on the host, masks are uploaded in `apply`."""

    def update_state(self, batch_update: Any) -> None:
        """The V1 runner's call; the V2 runner never makes it."""
        raise TypeError("V2Processor is driven by add_request/apply, not update_state")

    def apply(self, logits: torch.Tensor, ctx: Any) -> torch.Tensor:
        """Advance the guided requests of this step, then mask their rows in place."""
        rows = self._rows
        slots = [int(s) for s in ctx.idx_mapping_np]
        # A negative slot is a padding row the runner skips.
        guided = [(p, s) for p, s in enumerate(slots) if s >= 0 and rows[s] is not None]
        if not guided:
            return logits
        self._read_tokens([slot for _, slot in guided])
        plan = MaskPlan()
        if logits.shape[0] == len(slots):  # one row per request, in batch order
            for pos, slot in guided:
                row = rows[slot]
                assert row is not None
                plan.add_row(self._guided, pos, row)
        else:
            self._plan_speculative(plan, ctx, [slot for _, slot in guided])
        return self._guided.apply_masks(logits, plan)

    def _read_tokens(self, slots: list[int]) -> None:
        """Feed each guided slot the tokens committed since the last step."""
        states = self._states
        device = states.total_len.gpu.device
        lengths = states.total_len.gpu.index_select(0, torch.tensor(slots, device=device))
        ends = lengths.cpu().tolist()
        spans: list[tuple[Row, int, int]] = []
        for slot, end in zip(slots, ends, strict=True):
            row = self._rows[slot]
            assert row is not None
            if end < row.consumed:
                logger.error("fsmcompile: %s: output shrank; forcing EOS", row.label)
                row.failed = True
            elif end > row.consumed and not row.failed:
                spans.append((row, slot, int(end)))
        if not spans:
            return
        slot_ids = np.concatenate([np.full(end - row.consumed, slot) for row, slot, end in spans])
        positions = np.concatenate([np.arange(row.consumed, end) for row, _, end in spans])
        table = states.all_token_ids.gpu
        at_rows = torch.from_numpy(slot_ids).to(table.device)
        at_columns = torch.from_numpy(positions).to(table.device)
        tokens = table[at_rows, at_columns].tolist()
        start = 0
        for row, _, end in spans:
            count = end - row.consumed
            self._guided.feed(row, tokens[start : start + count])
            row.consumed = end
            start += count

    def _plan_speculative(self, plan: MaskPlan, ctx: Any, slots: list[int]) -> None:
        """Each guided request's rows, the k-th after its first k-1 draft tokens."""
        owners = ctx.expanded_idx_mapping.cpu().numpy()
        local = ctx.expanded_local_pos.cpu().numpy()
        inputs = ctx.input_ids.cpu().numpy()
        for slot in slots:
            row = self._rows[slot]
            assert row is not None
            mine = np.flatnonzero(owners == slot)
            mine = mine[np.argsort(local[mine], kind="stable")]
            drafts = [int(t) for t in inputs[mine[1:]]]
            self._guided.plan_drafts(plan, row, [int(r) for r in mine], drafts)
