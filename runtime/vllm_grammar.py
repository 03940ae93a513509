"""One vLLM request's grammar state: a matcher plus vLLM's stop tokens, for its scheduler.

vLLM's structured-output manager drives a request through `accept_tokens` (sampled
tokens), `validate_tokens` (a speculative draft, no state change), `fill_bitmask` (one
row per position), `rollback` (after trying draft tokens) and `is_terminated`. Its stop
tokens are the request's `all_stop_token_ids` (EOS, the generation config's EOS ids and
the user's `stop_token_ids`), which may differ from the EOS ids the index was compiled
with; they are allowed exactly where the text may end and masked everywhere else. That
keeps a row never empty: a state either continues the text or accepts, so vLLM's
`min_tokens` restore (it unmasks the stop tokens the grammar allows when masking them
would empty a structured-output row) always has one to unmask.

This module imports nothing from vLLM; `vllm_backend` makes it a `StructuredOutputGrammar`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import numpy as np

from fsmcompile.errors import FsmcompileError
from fsmcompile.types import TokenId

from .matcher import TokenMatcher

__all__ = ["RequestGrammar"]

logger = logging.getLogger(__name__)


class RequestGrammar:
    """A request's matcher with vLLM's stop tokens in place of the index's EOS ids.

    Not thread-safe: vLLM's scheduler drives each request from one thread at a time.
    """

    def __init__(
        self,
        matcher: TokenMatcher,
        *,
        vocab_size: int,
        eos_token_ids: Iterable[TokenId],
        stop_token_ids: Iterable[TokenId] | None = None,
    ) -> None:
        """Wrap a fresh matcher.

        Args:
            matcher: a fresh `Matcher` or `GrammarMatcher` for the request's index.
            vocab_size: the index vocabulary's size; ids at or past it are never text.
            eos_token_ids: the EOS ids the index was compiled with (its masks allow them
                exactly where the text may end).
            stop_token_ids: the ids that end this request (vLLM's `all_stop_token_ids`);
                None or empty: the index's EOS ids.
        """
        self._matcher = matcher
        self._vocab_size = vocab_size
        self._eos = frozenset(eos_token_ids)
        self._stops = frozenset(stop_token_ids) if stop_token_ids else self._eos
        if not self._eos:
            raise ValueError("eos_token_ids: expected at least one id")
        # The index's rows already say where its EOS is allowed; only a different stop
        # set needs its bits rewritten per row (one EOS bit tells whether the text may end).
        self._probe = min(self._eos)
        self._eos_only: frozenset[int] = self._eos - self._stops
        self._stop_extra: frozenset[int] = self._stops - self._eos
        self._num_accepted = 0
        self._terminated = False
        self._failed = False

    @property
    def matcher(self) -> TokenMatcher:
        """The underlying matcher (advanced by text tokens only, never by a stop token)."""
        return self._matcher

    @property
    def stop_token_ids(self) -> frozenset[int]:
        """The ids that end this request where the text may end."""
        return self._stops

    @property
    def num_processed_tokens(self) -> int:
        """Tokens accepted since the start or the last reset, a stop token included."""
        return self._num_accepted

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        """Advance by sampled tokens; False (and a logged error) at the first rejected one.

        Tokens after a stop token are ignored, as vLLM's other backends do. A negative id
        (vLLM's -1 placeholder for a token not yet known) or an id past the vocabulary is
        rejected without touching the state: vLLM strips placeholders before calling, so
        one here is a bug upstream, and guessing would desynchronise the matcher.
        """
        for token in tokens:
            if self._terminated:
                return True
            if not self._step(token):
                logger.error(
                    "fsmcompile: request %s: token %d is not allowed here", request_id, token
                )
                return False
        return True

    def _step(self, token: int) -> bool:
        if token in self._stops:
            if not (self._failed or self._matcher.is_accepting()):
                return False  # a failed request's rows offered only its stop tokens
            self._terminated = True
        elif not 0 <= token < self._vocab_size or token in self._eos:
            return False  # an EOS that is not a stop token for this request is masked
        elif self._failed or not self._advance(token):
            return False
        self._num_accepted += 1
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        """The longest prefix of a draft this state accepts; the state is unchanged.

        A draft ends at its first placeholder (-1) or stop token (included when the text
        may end there).
        """
        if self._terminated or self._failed:
            return []
        advanced = 0
        accepted: list[int] = []
        matcher = self._matcher
        for token in tokens:
            if token in self._stops:
                if matcher.is_accepting():
                    accepted.append(token)
                break
            if not 0 <= token < self._vocab_size or token in self._eos:
                break
            if not self._advance(token):
                break
            advanced += 1
            accepted.append(token)
        matcher.rollback(advanced)
        return accepted

    def rollback(self, num_tokens: int) -> None:
        """Undo the last `num_tokens` accepted tokens, a final stop token included.

        Raises:
            ValueError: `num_tokens` is negative or more than were accepted since reset.
        """
        if not 0 <= num_tokens <= self._num_accepted:
            raise ValueError(
                f"cannot roll back {num_tokens} tokens: expected 0..{self._num_accepted}"
            )
        if num_tokens == 0:
            return
        self._num_accepted -= num_tokens
        if self._terminated:
            self._terminated = False
            num_tokens -= 1
        self._matcher.rollback(num_tokens)

    def fill_bitmask(self, bitmask: Any, index: int) -> None:
        """Write row `index` of `bitmask` (int32[B, W], host numpy or torch): the tokens
        allowed next, the request's stop tokens exactly where the text may end.

        Words past the index vocabulary's width (padded logits) are zeroed, so a logits
        width larger than the tokenizer never lets a padding id through.
        """
        if not self._failed:
            try:
                self._matcher.fill_bitmask(bitmask, index)
            except FsmcompileError as exc:
                self._fail(exc)
        row = _host_row(bitmask, index)
        if self._failed:
            self._stop_only(row)
            return
        if not self._eos_only and not self._stop_extra:
            return
        accepting = bool(row[self._probe >> 5] & (1 << (self._probe & 31)))
        for token in self._eos_only:
            row[token >> 5] &= ~np.uint32(1 << (token & 31))
        if accepting:
            width = row.shape[0] * 32
            for token in self._stop_extra:
                if 0 <= token < width:
                    row[token >> 5] |= np.uint32(1 << (token & 31))

    def is_terminated(self) -> bool:
        """Whether a stop token was accepted."""
        return self._terminated

    def reset(self) -> None:
        """Back to the start of the text."""
        self._matcher.reset()
        self._num_accepted = 0
        self._terminated = False

    def _advance(self, token: int) -> bool:
        try:
            return self._matcher.advance(token)
        except FsmcompileError as exc:
            self._fail(exc)
            return False

    def _fail(self, exc: FsmcompileError) -> None:
        """This request's index failed (a crafted or damaged cache entry): from now on
        its rows allow only its stop tokens, so it ends, and the batch goes on."""
        if not self._failed:
            self._failed = True
            logger.error("fsmcompile: request's index failed, ending it: %s", exc)

    def _stop_only(self, row: Any) -> None:
        row[:] = 0
        width = row.shape[0] * 32
        for token in self._stops:
            if 0 <= token < width:
                row[token >> 5] |= np.uint32(1 << (token & 31))


def _host_row(bitmask: Any, index: int) -> Any:
    """Row `index` of a host bitmask as a writable uint32 numpy view (shares memory)."""
    array = bitmask if isinstance(bitmask, np.ndarray) else bitmask.numpy()
    return array[index].view(np.uint32)
