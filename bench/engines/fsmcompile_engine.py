"""fsmcompile adapter: a `Compiler` with no cache, and the runtime matchers.

Regex and JSON Schema compile to a `TokenIndex` walked by `Matcher`; Lark compiles to a
`GrammarIndex` walked by `GrammarMatcher` (`runtime.matcher.matcher_for` picks). JSON
Schema uses the default compact whitespace, so instances are fed in compact form.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from .base import CompileFailed, Engine, Session, Unsupported, bitmask_words, tokenizer_facts


class FsmcompileEngine(Engine):
    name = "fsmcompile"
    package = "fsmcompile"
    json_whitespace = "compact only (`,` and `:`, no spaces; the default)"
    builds_complete_index = True

    def __init__(
        self,
        *,
        timeout_s: float = 30.0,
        options: dict[str, Any] | None = None,
        max_states: int | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.options = options
        self.max_states = max_states
        self.tokenizer_path = ""

    def forget_compiles(self) -> None:
        """Empty the compiler's stage memos (`CompileMemos.stage_memos`): the LALR
        analyses, built DFAs, conflict checks and whole indexes of specs seen before. What
        every server builds once stays warm: the automata of shared sub-trees (the
        any-JSON terminals, formats: `CompileMemos.kept`, built by the worker's warm-ups)
        and the `functools` caches of shared pieces (Unicode classes, format regexes,
        UTF-8 range automata). The runtime's per-index table memos are emptied as well: a
        first mask builds its tables."""
        from fsmcompile.runtime.matcher import clear_table_memos

        for memo in self.compiler.memos.stage_memos():
            memo.clear()
        clear_table_memos()

    def _compiler(self, vocab: Any) -> Any:
        from fsmcompile import Compiler

        limits: dict[str, Any] = {"timeout_s": self.timeout_s}
        if self.max_states is not None:
            limits["max_states"] = self.max_states
        return Compiler(vocab, cache=False, **limits)

    def prepare_vocab(self, tokenizer_path: str) -> dict[str, float]:
        from fsmcompile import Vocabulary

        self.tokenizer_path = tokenizer_path
        self.eos_token_id = tokenizer_facts(tokenizer_path)["eos_token_id"]
        t0 = time.perf_counter()
        vocab = Vocabulary.from_file(tokenizer_path, eos_token_ids=[self.eos_token_id])
        t1 = time.perf_counter()
        vocab.trie  # noqa: B018 - built (or loaded from the cache) once per tokenizer
        t2 = time.perf_counter()
        self.vocab = vocab
        self.words = bitmask_words(vocab.size)
        self.compiler = self._compiler(vocab)
        return {"load_s": t1 - t0, "trie_s": t2 - t1, "total_s": t2 - t0}

    def compile(self, case: dict[str, Any]) -> Any:
        from fsmcompile.errors import BudgetExceededError, UnsupportedFeatureError

        try:
            from fsmcompile.frontend.options import typed_options

            options = typed_options(case["kind"], self.options if case["kind"] == "json" else None)
            index = self._compile_index(case["kind"], case["spec"], options)
        except (ImportError, NotImplementedError, UnsupportedFeatureError) as exc:
            raise Unsupported(f"{type(exc).__name__}: {exc}") from exc
        except BudgetExceededError as exc:
            raise CompileFailed(f"budget: {exc}") from exc
        return index

    def _compile_index(self, kind: str, spec: Any, options: Any) -> Any:
        """The index a request starts from: the full index, compiled now."""
        return self.compiler.compile_spec(kind, spec, options=options).index

    def start(self, handle: Any) -> Session:
        try:
            from fsmcompile.runtime.matcher import matcher_for

            matcher: Any = matcher_for(handle)
        except ImportError:
            from fsmcompile.runtime import Matcher

            matcher = Matcher(handle)
        mask = np.zeros(self.words, dtype=np.int32)
        eos = self.eos_token_id
        return Session(
            mask=mask,
            fill=partial(matcher.fill_bitmask, mask),
            advance=matcher.advance,
            accept_eos=lambda: bool(matcher.advance(eos)),
            forced_bytes=getattr(matcher, "forced_bytes", None),
            forced_tokens=getattr(matcher, "forced_token_ids", None),
        )

    def token_bytes(self, token_id: int) -> bytes:
        table = self.vocab.token_bytes
        return table[token_id] if token_id < len(table) else b""

    def artifact_size(self, handle: Any) -> int | None:
        try:
            from fsmcompile import artifact

            return len(artifact.to_bytes(handle))
        except Exception:  # noqa: BLE001 - the artifact format is optional here
            return None

    def extras(self) -> dict[str, Any]:
        """Vocabulary load cold (no disk cache) and warm (cache filled), best and median.

        Each load includes the token trie, which a compile needs; a warm load reads both
        from the decoded-table cache.
        """
        from fsmcompile import Vocabulary

        def timed_load(**options: Any) -> float:
            t0 = time.perf_counter()
            vocab = Vocabulary.from_file(
                self.tokenizer_path, eos_token_ids=[self.eos_token_id], **options
            )
            vocab.trie  # noqa: B018
            return time.perf_counter() - t0

        cold = [timed_load(use_cache=False) for _ in range(3)]
        with tempfile.TemporaryDirectory() as cache_dir:
            timed_load(cache_dir=Path(cache_dir))  # fills the cache
            warm = [timed_load(cache_dir=Path(cache_dir)) for _ in range(5)]
        return {
            "vocab_cold_s": {"best": min(cold), "median": statistics.median(cold)},
            "vocab_warm_s": {"best": min(warm), "median": statistics.median(warm)},
        }
