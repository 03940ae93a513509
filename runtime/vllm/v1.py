"""The V1 model runner's side: follow the persistent batch through `BatchUpdate`s.

The V1 runner keeps requests in a persistent batch whose slot i is logits row i. Each
step it hands over the changes (removed, then added, then moved) and each added request
brings its `output_tok_ids` list, which the engine keeps appending to: a row reads the
tokens appended since it last read from it.

The rows read their lists in `apply`, not in `update_state`: under async scheduling (the
default on GPUs) the previous step's token is still a -1 placeholder when `update_state`
runs, and vLLM writes the real id into the same list only just before sampling
(`InputBatch.update_async_output_token_ids` in `GPUModelRunner._sample`). A mask planned
in `update_state` would be one token behind, and the request could leave its language.
A placeholder still there at `apply` is read the step after.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from .processor import FSMLogitsProcessor
from .rows import GuidedRows, MaskPlan, Row

if TYPE_CHECKING:
    from ..batch import BatchUpdate


class V1Processor(FSMLogitsProcessor):
    """`FSMLogitsProcessor` as the V1 runner builds and drives it."""

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        """Read the tokenizer and logits width from the engine config.

        Args:
            vllm_config: the engine's VllmConfig; uses `model_config.tokenizer` (a path or
                name for `fsmcompile.Vocabulary.load`) and `model_config.get_vocab_size()`.
            device: where the logits live; the mask table is kept there.
            is_pin_memory: whether pinned host buffers may be used for the per-step copy.
        """
        model_config = vllm_config.model_config
        self._guided = GuidedRows(
            tokenizer=model_config.tokenizer,
            vocab_size=int(model_config.get_vocab_size()),
            device=torch.device(device),
            pin=bool(is_pin_memory),
        )
        self._rows: list[Row | None] = []
        self._batch_size = 0
        self._num_rows = 0

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        """Apply the batch changes (removed, added, moved); tokens are read in `apply`."""
        if batch_update is not None:
            self._apply_batch_update(batch_update)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Advance every guided row by its new output tokens, then mask its row of
        `logits` (float[B, V]) in place and return it."""
        plan = MaskPlan()
        if self._num_rows:
            guided = self._guided
            slots = self._rows
            for i in range(min(self._batch_size, len(slots))):
                row = slots[i]
                if row is not None:
                    self._read_output(row)
                    plan.add_row(guided, i, row)
        return self._guided.apply_masks(logits, plan)

    def _read_output(self, row: Row) -> None:
        output = row.output
        start = row.consumed
        end = len(output)
        if end <= start:
            return
        tokens = list(output[start:end])
        for k, token in enumerate(tokens):
            if token < 0:  # async-scheduling placeholder: read it next step
                tokens = tokens[:k]
                break
        row.consumed = start + len(tokens)
        self._guided.feed(row, tokens)

    # -- batch membership -------------------------------------------------------------

    def _apply_batch_update(self, update: BatchUpdate) -> None:
        slots = self._rows
        for index in update.removed:
            self._discard(index)
        for added in update.added:
            index, params, output = added[0], added[1], added[-1]
            self._discard(index)
            row = self._guided.new_row(params, f"batch index {index}", output=output)
            if row is not None:
                self._put(index, row)
        for src, dst, direction in update.moved:
            self._grow(max(src, dst) + 1)
            if direction.name == "SWAP":
                slots[src], slots[dst] = slots[dst], slots[src]
            else:
                if src == dst:
                    continue
                self._discard(dst)
                slots[dst], slots[src] = slots[src], None
        self._batch_size = update.batch_size
        for index in range(update.batch_size, len(slots)):
            self._discard(index)  # condensed away; vLLM leaves nothing here

    def _grow(self, size: int) -> None:
        if len(self._rows) < size:
            self._rows.extend([None] * (size - len(self._rows)))

    def _put(self, index: int, row: Row) -> None:
        self._grow(index + 1)
        self._rows[index] = row
        self._num_rows += 1

    def _discard(self, index: int) -> None:
        if index < len(self._rows):
            row = self._rows[index]
            if row is not None:
                self._rows[index] = None
                self._num_rows -= 1
                self._guided.release(row)
