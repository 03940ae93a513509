"""outlines-core adapter: `Index` (a full token index, built eagerly) and `Guide`.

outlines-core builds its `Vocabulary` from the Hub; this benchmark never touches the
network, so the adapter decodes the tokenizer.json byte table itself (GPT-2 byte-level or
SentencePiece `<0xNN>`/`▁`) and hands it over; that decode is part of the timed
preparation. JSON Schema goes through `build_regex_from_schema` with its default
whitespace (`[ ]?` at structural points) and then `Index`. There is no CFG front end and
no jump-forward API.
"""

from __future__ import annotations

import json
import pickle
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
    token_bytes_table,
    tokenizer_facts,
)


class OutlinesEngine(Engine):
    name = "outlines"
    package = "outlines_core"
    json_whitespace = "optional single space (`[ ]?`, the default WHITESPACE)"
    builds_complete_index = True  # `Index` walks the whole DFA against the vocabulary

    def prepare_vocab(self, tokenizer_path: str) -> dict[str, float]:
        facts = tokenizer_facts(tokenizer_path)
        self.eos_token_id = facts["eos_token_id"]
        t0 = time.perf_counter()
        import outlines_core

        table = token_bytes_table(read_tokenizer_text(tokenizer_path))
        by_bytes: dict[bytes, list[int]] = {}
        for token_id, piece in table.items():
            if token_id != self.eos_token_id and piece:
                by_bytes.setdefault(piece, []).append(token_id)
        self.vocabulary = outlines_core.Vocabulary(self.eos_token_id, by_bytes)
        t1 = time.perf_counter()
        self.oc = outlines_core
        self.table = table
        self.words = bitmask_words(facts["vocab_size"])
        return {"engine_s": t1 - t0, "total_s": t1 - t0}

    def compile(self, case: dict[str, Any]) -> Any:
        kind = case["kind"]
        if kind == "lark":
            raise Unsupported("outlines-core has no context-free grammar front end")
        try:
            if kind == "json":
                regex = self.oc.json_schema.build_regex_from_schema(json.dumps(case["spec"]))
            else:
                regex = case["spec"]
        except Exception as exc:  # noqa: BLE001 - ValueError for unsupported structures
            message = str(exc).splitlines()[0][:300]
            if "nsupported" in message:
                raise Unsupported(message) from exc
            raise CompileFailed(message) from exc
        try:
            return self.oc.Index(regex, self.vocabulary)
        except Exception as exc:  # noqa: BLE001
            raise CompileFailed(f"{type(exc).__name__}: {str(exc)[:300]}") from exc

    def start(self, handle: Any) -> Session:
        guide = self.oc.Guide(handle)
        mask = np.zeros(self.words, dtype=np.int32)
        advance = partial(guide.advance, return_tokens=False)
        return Session(
            mask=mask,
            fill=partial(guide.write_mask_into, mask.ctypes.data, mask.size, 4),
            advance=advance,
            # EOS is allowed in final states but Guide.advance(EOS) raises: ask is_finished.
            accept_eos=guide.is_finished,
        )

    def token_bytes(self, token_id: int) -> bytes:
        return self.table.get(token_id, b"")

    def artifact_size(self, handle: Any) -> int | None:
        return len(pickle.dumps(handle))
