"""transformers adapter: a `LogitsProcessor` for `generate()` and a jump-forward loop.

`FSMLogitsProcessor` plugs into `model.generate(logits_processor=[...])`. HF's loop
decodes one token per forward pass, so it cannot skip forced text; `generate_constrained`
is a small greedy/sampling loop over the model's KV cache that feeds every forced token
(jump-forward) in one forward pass and reports the passes it saved.

This module imports transformers and torch; `fsmcompile.runtime` never imports it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
from transformers import LogitsProcessor

from fsmcompile.tables.bits import bitmask_words, set_bits

from .bitmask import apply_token_bitmask_inplace
from .matcher import TokenMatcher, matcher_for

if TYPE_CHECKING:
    from fsmcompile.tables.token_index import TokenIndex

StopReason = Literal["eos", "max_new_tokens", "rejected"]


class FSMLogitsProcessor(LogitsProcessor):
    """Masks `generate()` scores so every sequence in the batch follows one index.

    Each call reads the tokens generated since the previous call from `input_ids` (the
    first call's width is taken as the prompt length). A sequence whose history changed
    (beam search reorders rows) is replayed from the start. A sequence that produced a
    token the mask did not allow gets an EOS-only mask from then on.
    """

    def __init__(self, index: TokenIndex) -> None:
        """Args: index: the compiled index (regex, JSON Schema or Lark) to follow."""
        self._index = index
        vocabulary = index.vocabulary
        self._num_words = bitmask_words(vocabulary.size)
        self._eos_row = np.zeros(self._num_words, dtype=np.int32)
        set_bits(self._eos_row, np.array(vocabulary.eos_token_ids, dtype=np.int64))
        self._prompt_len: int | None = None
        self._matchers: list[TokenMatcher] = []
        self._seen: list[list[int]] = []
        self._failed: list[bool] = []
        self._bitmask = np.zeros((0, self._num_words), dtype=np.int32)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        batch = input_ids.shape[0]
        if self._prompt_len is None or len(self._matchers) != batch:
            self._prompt_len = input_ids.shape[1]
            self._matchers = [matcher_for(self._index) for _ in range(batch)]
            self._seen = [[] for _ in range(batch)]
            self._failed = [False] * batch
            self._bitmask = np.zeros((batch, self._num_words), dtype=np.int32)
        generated = input_ids[:, self._prompt_len :].tolist()
        for row, tokens in enumerate(generated):
            self._sync(row, tokens)
            if self._failed[row]:
                self._bitmask[row] = self._eos_row
            else:
                self._matchers[row].fill_bitmask(self._bitmask, row)
        bitmask = torch.from_numpy(self._bitmask).to(scores.device)
        apply_token_bitmask_inplace(scores, bitmask)
        return scores

    def _sync(self, row: int, tokens: list[int]) -> None:
        seen = self._seen[row]
        matcher = self._matchers[row]
        if tokens[: len(seen)] != seen:  # beam search moved another history here
            matcher.reset()
            seen.clear()
            self._failed[row] = False
        for token in tokens[len(seen) :]:
            seen.append(token)
            if self._failed[row] or matcher.is_terminated():
                continue  # padding after EOS, or already failed
            if not matcher.advance(token):
                self._failed[row] = True


@dataclass(frozen=True, slots=True)
class ConstrainedGeneration:
    """The result of `generate_constrained`.

    Attributes:
        token_ids: generated text tokens (EOS excluded).
        text: their bytes decoded as UTF-8 (invalid sequences replaced).
        stop_reason: "eos" (the constraint or the model ended it), "max_new_tokens", or
            "rejected" (no allowed token could be sampled: the vocabulary cannot spell
            any continuation from here, or the logits were NaN).
        forward_passes: model calls made, the prompt's included.
        forced_tokens: tokens fed by jump-forward without being sampled.
    """

    token_ids: list[int]
    text: str
    stop_reason: StopReason
    forward_passes: int
    forced_tokens: int

    @property
    def steps_saved(self) -> int:
        """Forward passes saved against one pass per output token (EOS counted)."""
        needed = len(self.token_ids) + (1 if self.stop_reason == "eos" else 0)
        return needed - self.forward_passes


@torch.inference_mode()
def generate_constrained(
    model: Any,
    tokenizer: Any,
    index: TokenIndex,
    prompt: str,
    max_new_tokens: int,
    *,
    jump_forward: bool = True,
    do_sample: bool = False,
    generator: torch.Generator | None = None,
) -> ConstrainedGeneration:
    """Generate one completion of `prompt` that follows `index`.

    With `jump_forward`, after each sampled token the forced continuation
    (`Matcher.forced_token_ids`) is appended and fed in the same next forward pass, and
    once only EOS can follow the loop stops without asking the model. Regex and grammar
    indexes (JSON Schemas with free-form or recursive values, Lark grammars) both jump.

    Args:
        model: a transformers causal LM (called with input_ids, its KV cache and
            use_cache=True).
        tokenizer: encodes the prompt: an HF tokenizer or a `tokenizers.Tokenizer`.
        index: the compiled index; its vocabulary must be the tokenizer's.
        prompt: the prompt text (must encode to at least one token).
        max_new_tokens: cap on generated text tokens.
        jump_forward: feed forced tokens without sampling them.
        do_sample: sample from the masked softmax instead of taking the argmax.
        generator: RNG for sampling.

    Raises:
        ValueError: the prompt encodes to no tokens or `max_new_tokens` < 0.
    """
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens: expected >= 0, found {max_new_tokens}")
    encoded = tokenizer.encode(prompt)
    prompt_ids = list(getattr(encoded, "ids", encoded))
    if not prompt_ids:
        raise ValueError("prompt encodes to no tokens: expected at least one")
    device = next(model.parameters()).device
    matcher = matcher_for(index)
    vocabulary = index.vocabulary
    bitmask = np.zeros(bitmask_words(vocabulary.size), dtype=np.int32)
    output: list[int] = []
    pending = prompt_ids
    past: Any = None
    cache_name = _cache_argument(model)
    passes = 0
    forced_count = 0
    stop: StopReason = "max_new_tokens"
    while len(output) < max_new_tokens:
        if jump_forward and matcher.is_complete():
            stop = "eos"  # only EOS can follow: no need to ask the model
            break
        inputs = torch.tensor([pending], device=device)
        result = model(input_ids=inputs, use_cache=True, **{cache_name: past})
        passes += 1
        past = getattr(result, cache_name)
        logits = result.logits[0, -1].float()
        matcher.fill_bitmask(bitmask)
        apply_token_bitmask_inplace(logits, torch.from_numpy(bitmask).to(logits.device))
        token = _choose(logits, do_sample, generator)
        if not matcher.advance(token):
            # An EOS-only row on a state the vocabulary cannot continue, or NaN logits.
            stop = "rejected"
            break
        if matcher.is_terminated():
            stop = "eos"
            break
        output.append(token)
        pending = [token]
        if jump_forward:
            forced = matcher.forced_token_ids()[: max_new_tokens - len(output)]
            if forced:
                matcher.advance_many(forced)
                output.extend(forced)
                pending.extend(forced)
                forced_count += len(forced)
    text = b"".join(vocabulary.token_bytes[t] for t in output).decode("utf-8", "replace")
    return ConstrainedGeneration(output, text, stop, passes, forced_count)


def _cache_argument(model: Any) -> str:
    """The name of the KV cache, as the model's `forward` argument and its output's field:
    transformers 5.24 renamed `past_key_values` to `cache` (and warns at the old name)."""
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in parameters else "past_key_values"


def _choose(logits: torch.Tensor, do_sample: bool, generator: torch.Generator | None) -> int:
    if not do_sample:
        return int(torch.argmax(logits).item())
    probs = torch.softmax(logits, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator).item())
