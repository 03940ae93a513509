"""vLLM v1's persistent-batch change types, for when vLLM is not installed.

Field order and meaning follow `vllm.v1.sample.logits_processor.interface` (vLLM >= 0.10):
`BatchUpdate(batch_size, removed, added, moved)`, an added request is
`(index, params, prompt_tok_ids, output_tok_ids)` with `output_tok_ids` held by
reference, and a move is `(src, dst, MoveDirectionality)`. `fsmcompile.runtime.vllm`
re-exports vLLM's own classes instead when vLLM imports, so engine objects pass through
unchanged; this module keeps the processor testable without vLLM.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any


class MoveDirectionality(Enum):
    """How a move changes the batch (vLLM's enum uses auto(); compare by name)."""

    UNIDIRECTIONAL = 1
    """src -> dst: dst's old request is discarded, src becomes empty."""
    SWAP = 2
    """src <-> dst: the two requests exchange slots."""


AddedRequest = tuple[int, Any, list[int] | None, list[int]]
"""(index, SamplingParams, prompt token ids or None, output token ids held by reference)."""

MovedRequest = tuple[int, int, MoveDirectionality]
"""(src, dst, directionality)."""

RemovedRequest = int
"""A batch index whose request left without a replacement."""


@dataclass(frozen=True)
class BatchUpdate:
    """Changes to the persistent batch since the last step; apply removed, added, moved."""

    batch_size: int
    removed: Sequence[RemovedRequest]
    added: Sequence[AddedRequest]
    moved: Sequence[MovedRequest]
