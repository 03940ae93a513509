"""fsmcompile's runtime: enforce a compiled token index while a model decodes.

`Matcher` follows one request; the bitmask helpers mask a batch of logits. The engine
adapters are separate modules so that importing this package pulls in neither torch nor
an engine: `fsmcompile.runtime.vllm` (vLLM v1 logits processor) and
`fsmcompile.runtime.hf` (transformers).
"""

from __future__ import annotations

from .bitmask import allocate_token_bitmask, apply_token_bitmask_inplace
from .matcher import Matcher

__all__ = ["Matcher", "allocate_token_bitmask", "apply_token_bitmask_inplace"]
