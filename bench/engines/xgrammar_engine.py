"""XGrammar adapter: `GrammarCompiler` (its cache off) and `GrammarMatcher`.

Vocabulary: `TokenizerInfo.from_huggingface` on a transformers fast tokenizer built from
the same tokenizer.json, as a serving stack does; the transformers load is timed apart.
JSON Schema uses XGrammar's defaults (`any_whitespace=True`, `strict_mode=True`: no
additional properties or items unless the schema allows them). Lark cases need XGrammar's
own EBNF (`peer_specs["xgrammar"]`); JSON via CFG uses its built-in JSON grammar.
`max_threads` stays at its default of 8 even on a small machine, as users run it.
"""

from __future__ import annotations

import json
import time
from functools import partial
from typing import Any

from .base import CompileFailed, Engine, Session, Unsupported, read_tokenizer_text, tokenizer_facts


class XgrammarEngine(Engine):
    name = "xgrammar"
    package = "xgrammar"
    json_whitespace = "any whitespace (`any_whitespace=True`, the default)"
    #: Compile builds the adaptive token-mask cache of every grammar position; only
    #: context-dependent tokens are checked while decoding.
    builds_complete_index = True

    def prepare_vocab(self, tokenizer_path: str) -> dict[str, float]:
        self.eos_token_id = tokenizer_facts(tokenizer_path)["eos_token_id"]
        t0 = time.perf_counter()
        import xgrammar as xgr
        from tokenizers import Tokenizer
        from transformers import PreTrainedTokenizerFast

        text = read_tokenizer_text(tokenizer_path)
        hf = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(text))
        t1 = time.perf_counter()
        info = xgr.TokenizerInfo.from_huggingface(hf, stop_token_ids=[self.eos_token_id])
        self.compiler = xgr.GrammarCompiler(info, cache_enabled=False)
        t2 = time.perf_counter()
        self.xgr = xgr
        self.info = info
        self.decoded = info.decoded_vocab
        return {"hf_tokenizer_s": t1 - t0, "engine_s": t2 - t1, "total_s": t2 - t0}

    def compile(self, case: dict[str, Any]) -> Any:
        kind = case["kind"]
        try:
            if kind == "regex":
                return self.compiler.compile_regex(case["spec"])
            if kind == "json":
                return self.compiler.compile_json_schema(json.dumps(case["spec"]))
            grammar = case.get("peer_specs", {}).get("xgrammar")
            if grammar is None:
                raise Unsupported("no XGrammar EBNF for this grammar")
            if grammar == "builtin:json":
                return self.compiler.compile_builtin_json_grammar()
            return self.compiler.compile_grammar(grammar)
        except Unsupported:
            raise
        except Exception as exc:  # noqa: BLE001 - XGrammar raises RuntimeError and friends
            raise CompileFailed(f"{type(exc).__name__}: {str(exc)[:300]}") from exc

    def start(self, handle: Any) -> Session:
        matcher = self.xgr.GrammarMatcher(handle)
        bitmask = self.xgr.allocate_token_bitmask(1, self.info.vocab_size)
        eos = self.eos_token_id
        return Session(
            mask=bitmask.numpy()[0],
            fill=partial(matcher.fill_next_token_bitmask, bitmask),
            advance=matcher.accept_token,
            accept_eos=lambda: bool(matcher.accept_token(eos)),
            forced_bytes=lambda: matcher.find_jump_forward_string().encode("utf-8"),
        )

    def token_bytes(self, token_id: int) -> bytes:
        return bytes(self.decoded[token_id]) if token_id < len(self.decoded) else b""

    def artifact_size(self, handle: Any) -> int | None:
        return int(handle.memory_size_bytes)
