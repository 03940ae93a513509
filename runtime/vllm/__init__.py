"""vLLM logits processor: enforce fsmcompile indexes inside vLLM's model runners.

Load it with `--logits-processors fsmcompile.runtime.vllm:FSMLogitsProcessor` (vLLM
0.32 or 0.33; the V1 and the V2 model runner alike) and guide a request through its
sampling params, offline

    SamplingParams(extra_args={"fsmcompile": {"regex": "[0-9]{3}"}})

or over the OpenAI server with flat `vllm_xargs` keys

    {"vllm_xargs": {"fsmcompile_regex": "[0-9]{3}"}}

with exactly one of `regex`, `json_schema` (a dict, or JSON text), `grammar` (Lark) or
`index` (see `sources`), plus an optional `start_after` marker text (e.g. "</think>"):
the constraint then applies to the tokens after the one that completes the marker.

A spec is compiled in the engine the first time it is seen, with the engine's
tokenizer, and kept in a small LRU (the compiler's own cache tiers sit behind it); a
request that must not wait for a compile should name a precompiled `index`.

Modules: `spec` reads a request's params, `sources` resolves `index` references,
`rows` holds the per-request matchers and masks the logits, `v1` and `v2` follow each
runner's batch, `processor` is the one class both runners load.
"""

from __future__ import annotations

from ..batch import BatchUpdate as _FallbackBatchUpdate
from ..batch import MoveDirectionality as _FallbackMoveDirectionality
from .processor import (
    SUPPORTED_VLLM_VERSIONS,
    FSMLogitsProcessor,
    UnsupportedVllmError,
    check_vllm_version,
)
from .sources import IndexReferenceError, register_index
from .spec import EXTRA_ARGS_KEY, RequestSpec

try:  # Pass vLLM's own objects through when it is installed.
    from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality
except ImportError:
    BatchUpdate = _FallbackBatchUpdate
    MoveDirectionality = _FallbackMoveDirectionality

__all__ = [
    "EXTRA_ARGS_KEY",
    "SUPPORTED_VLLM_VERSIONS",
    "BatchUpdate",
    "FSMLogitsProcessor",
    "IndexReferenceError",
    "MoveDirectionality",
    "RequestSpec",
    "UnsupportedVllmError",
    "check_vllm_version",
    "register_index",
]
