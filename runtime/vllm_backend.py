"""fsmcompile as a vLLM structured-outputs backend: compile through the cache, match per request.

`FsmcompileBackend` is what vLLM's `StructuredOutputManager` holds once the backend is
selected (`vllm_plugin` makes the selection possible): it reads the engine's tokenizer
into a `Vocabulary` once, at engine start-up, so a tokenizer fsmcompile cannot read stops
the engine there with a clear error instead of failing every request later. Each
request's constraint compiles with `fsmcompile.compile_spec` through the default cache
(memory → disk → Redis when `FSMCOMPILE_REDIS_URL` is set), so equal specs compile once
per fleet; vLLM runs `compile_grammar` in its thread pool.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from fsmcompile.compiler import compile_spec
from fsmcompile.errors import VocabularyError
from fsmcompile.tables.bits import bitmask_words
from fsmcompile.vocabulary import Vocabulary

from .matcher import matcher_for
from .vllm_grammar import RequestGrammar
from .vllm_specs import BACKEND_NAME, spec_for

if TYPE_CHECKING:
    _BackendBase = object
    _GrammarBase = object
else:
    from vllm.v1.structured_output.backend_types import (
        StructuredOutputBackend as _BackendBase,
    )
    from vllm.v1.structured_output.backend_types import (
        StructuredOutputGrammar as _GrammarBase,
    )

__all__ = ["BACKEND_NAME", "FsmcompileBackend", "FsmcompileGrammar", "engine_vocabulary"]

logger = logging.getLogger(__name__)


class FsmcompileGrammar(RequestGrammar, _GrammarBase):
    """`RequestGrammar` as vLLM's `StructuredOutputGrammar` (same methods)."""


def engine_vocabulary(tokenizer: Any, vocab_size: int) -> Vocabulary:
    """The engine's tokenizer as a `Vocabulary` whose size is the logits width.

    Args:
        tokenizer: vLLM's tokenizer object (a Hugging Face fast tokenizer).
        vocab_size: the model's logits width (`model_config.get_vocab_size()`). Ids past
            the tokenizer's are padding and never allowed; tokenizer ids past the logits
            can never be sampled and are left out.

    Raises:
        VocabularyError: the tokenizer is not backed by a tokenizer.json (a Mistral
            tekken or SentencePiece tokenizer in `--tokenizer-mode mistral`, a tiktoken
            or other slow tokenizer), or no EOS id lies inside the logits.
    """
    name = type(tokenizer).__name__
    if getattr(type(tokenizer), "IS_MISTRAL_TOKENIZER", False) or name == "MistralTokenizer":
        raise VocabularyError(
            f"the fsmcompile structured-outputs backend cannot read {name} (mistral-common's "
            "tekken/SentencePiece tokenizer): start vLLM with --tokenizer-mode hf when the "
            "model ships a tokenizer.json, or choose another structured-outputs backend"
        )
    try:
        vocabulary = Vocabulary.load(tokenizer)
    except VocabularyError as exc:
        raise VocabularyError(
            f"the fsmcompile structured-outputs backend cannot read the engine's tokenizer "
            f"({name}): {exc}. It needs a Hugging Face tokenizer backed by a tokenizer.json "
            "(a fast tokenizer; tiktoken and slow SentencePiece tokenizers have none); "
            "choose another structured-outputs backend for this model"
        ) from exc
    count = len(vocabulary.token_bytes)
    if count <= vocab_size:
        wide = dataclasses.replace(vocabulary, size=vocab_size)
        wide.__dict__["trie"] = vocabulary.trie  # the same text tokens: keep the loaded trie
        return wide
    logger.warning(
        "fsmcompile structured outputs: the tokenizer has %d ids, the logits %d; the ids "
        "past the logits are never allowed",
        count,
        vocab_size,
    )
    return Vocabulary(
        token_bytes=vocabulary.token_bytes[:vocab_size],
        eos_token_ids=tuple(t for t in vocabulary.eos_token_ids if t < vocab_size),
        special_token_ids=frozenset(t for t in vocabulary.special_token_ids if t < vocab_size),
        size=vocab_size,
        name=vocabulary.name,
        scheme=vocabulary.scheme,
        tokenizer_json=vocabulary.tokenizer_json,
    )


@dataclass
class FsmcompileBackend(_BackendBase):
    """Engine-level backend: one vocabulary, a compile per constraint (cached), a
    `FsmcompileGrammar` per request."""

    vllm_config: Any
    tokenizer: Any
    vocab_size: int

    def __post_init__(self) -> None:
        self.vocabulary = engine_vocabulary(self.tokenizer, self.vocab_size)
        logger.info(
            "fsmcompile structured outputs: %d tokenizer ids, logits width %d",
            len(self.vocabulary.token_bytes),
            self.vocab_size,
        )

    def compile_grammar(
        self,
        request_type: Any,
        grammar_spec: str,
        stop_token_ids: set[int] | None = None,
    ) -> FsmcompileGrammar:
        """Compile (or load from the cache) one request's constraint.

        Args:
            request_type: vLLM's `StructuredOutputOptions` member.
            grammar_spec: the constraint's text from vLLM's `structured_output_key`.
            stop_token_ids: the request's `all_stop_token_ids`, allowed only where the
                text may end (the index's EOS ids when None).

        Raises:
            SpecError: the constraint is invalid or unsupported.
            BudgetExceededError: the compile ran past its time or state budget.
        """
        spec = spec_for(request_type.name, grammar_spec)
        index = compile_spec(spec.kind, spec.spec, self.vocabulary).index
        return FsmcompileGrammar(
            matcher_for(index),
            vocab_size=self.vocabulary.size,
            eos_token_ids=self.vocabulary.eos_token_ids,
            stop_token_ids=stop_token_ids,
        )

    def allocate_token_bitmask(self, max_num_seqs: int) -> torch.Tensor:
        """int32[max_num_seqs, ceil(vocab_size / 32)] on the host, all bits set."""
        return torch.full((max_num_seqs, bitmask_words(self.vocab_size)), -1, dtype=torch.int32)

    def destroy(self) -> None:
        """Nothing to free: indexes live in the process-wide cache."""
