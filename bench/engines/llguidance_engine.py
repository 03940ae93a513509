"""llguidance adapter: `LLTokenizer` from the tokenizer.json text and `LLMatcher`.

llguidance compiles lazily (Earley parser + lexer built on demand), so most of its work
shows up in the first mask and the per-token times, not in `compile`. JSON Schema uses
its defaults (flexible whitespace, `,` and `:` separators). Lark cases get the same .lark
text fsmcompile compiles unless `peer_specs["llguidance"]` overrides it. Never raises
on a bad grammar: the matcher enters an error state, turned here into CompileFailed.
"""

from __future__ import annotations

import json
import time
from functools import partial
from typing import Any

import numpy as np

from .base import (
    CompileFailed,
    Engine,
    Session,
    Unsupported,
    bitmask_words,
    read_tokenizer_text,
    tokenizer_facts,
)


class LlguidanceEngine(Engine):
    name = "llguidance"
    package = "llguidance"
    json_whitespace = "flexible whitespace (`whitespace_flexible=True`, the default)"

    def prepare_vocab(self, tokenizer_path: str) -> dict[str, float]:
        self.eos_token_id = tokenizer_facts(tokenizer_path)["eos_token_id"]
        t0 = time.perf_counter()
        import llguidance

        text = read_tokenizer_text(tokenizer_path)
        self.tokenizer = llguidance.LLTokenizer(text, eos_token=self.eos_token_id)
        t1 = time.perf_counter()
        self.llg = llguidance
        self.words = bitmask_words(self.tokenizer.vocab_size)
        return {"engine_s": t1 - t0, "total_s": t1 - t0}

    def compile(self, case: dict[str, Any]) -> Any:
        kind = case["kind"]
        if kind == "regex":
            grammar = self.llg.grammar_from("regex", case["spec"])
        elif kind == "json":
            grammar = self.llg.grammar_from("json_schema", json.dumps(case["spec"]))
        else:
            lark = case.get("peer_specs", {}).get("llguidance", case["spec"])
            grammar = self.llg.grammar_from("lark", lark)
        matcher = self.llg.LLMatcher(self.tokenizer, grammar, log_level=0)
        if matcher.is_error():
            error = matcher.get_error()
            if "nimplemented" in error or "not supported" in error:
                raise Unsupported(error[:300])
            raise CompileFailed(error[:300])
        return matcher

    def start(self, handle: Any) -> Session:
        matcher = handle.deep_copy()
        mask = np.zeros(self.words, dtype=np.int32)
        eos = self.eos_token_id
        return Session(
            mask=mask,
            fill=partial(matcher.unsafe_compute_mask_ptr, mask.ctypes.data, mask.nbytes),
            advance=matcher.consume_token,
            accept_eos=lambda: bool(matcher.consume_token(eos)),
            forced_bytes=matcher.compute_ff_bytes,
            forced_tokens=matcher.compute_ff_tokens,
        )

    def token_bytes(self, token_id: int) -> bytes:
        return bytes(self.tokenizer.decode_bytes([token_id]))
