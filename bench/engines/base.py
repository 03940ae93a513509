"""The one interface every engine adapter implements, and the one timed walk they all share.

An adapter knows how to build its engine's vocabulary, compile a case and start a
per-request session; it does not time anything itself. `Engine.mask_walk` drives a
`Session` token by token with the same loop for every engine, so loop overhead, clock
calls and the bit test are identical across engines:

    for each token t:   fill the bitmask (timed) -> bit t set? (not timed) -> advance (timed)
    at the end:         fill the bitmask (timed) -> EOS bit set and the engine accepts EOS

A token whose bit is clear is rejected without calling the engine's advance, as MaskBench
does; a token whose bit is set but which advance refuses is recorded as a disagreement
(an engine bug, reported).
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

_COMMON_EOS = ("<|end_of_text|>", "<|endoftext|>", "</s>", "<|eot_id|>", "<|im_end|>", "<eos>")


class Unsupported(Exception):  # noqa: N818 - a reported outcome, not a failure of the harness
    """The engine does not offer this kind of case or feature (counted as a failure)."""


class CompileFailed(Exception):  # noqa: N818
    """The engine refused or could not finish the case (budget, error state, bad spec)."""


@dataclass(slots=True)
class Session:
    """One request's matcher, bound to one bitmask row.

    Attributes:
        mask: int32[ceil(V/32)] host view of the row `fill` writes (token i = bit i % 32
            of word i // 32, the layout every engine here uses).
        fill: computes the mask for the next token into `mask`. Some engines write
            through a raw pointer, so keep the Session referenced while calling `fill`.
        advance: consumes one token; a falsy return other than None means refused.
        accept_eos: whether the engine accepts EOS now (called after its bit was checked).
        forced_bytes: text every continuation must start with, where the engine offers it.
        forced_tokens: jump-forward token ids, where the engine offers them.
    """

    mask: npt.NDArray[np.int32]
    fill: Callable[[], Any]
    advance: Callable[[int], Any]
    accept_eos: Callable[[], bool]
    forced_bytes: Callable[[], bytes] | None = None
    forced_tokens: Callable[[], list[int]] | None = None


@dataclass(slots=True)
class WalkResult:
    """One instance walked token by token.

    Attributes:
        accepted: every token's bit was set and advance took it, then EOS was allowed.
        rejected_at: index of the first refused token (len(tokens) means EOS); None if none.
        disagreement: a token's bit was set but advance refused it.
        mask_us: mask time per step (one per token walked, plus the final EOS step).
        advance_us: advance time per token walked.
    """

    accepted: bool
    rejected_at: int | None
    disagreement: bool
    mask_us: list[float] = field(default_factory=list)
    advance_us: list[float] = field(default_factory=list)


class Engine:
    """Base of the adapters: `prepare_vocab`, `compile`, `start`; the walks live here."""

    name = "engine"
    package = ""
    #: Whitespace the engine's JSON Schema compiler allows by default (for the report).
    json_whitespace = ""
    eos_token_id = -1
    #: Whether `compile` builds the whole index (then its time is the time to the complete
    #: index); False for engines that build masks lazily while decoding.
    builds_complete_index = False

    def forget_compiles(self) -> None:
        """Drop what the engine memoizes across compiles of the same spec, so the next
        compile costs what a server seeing the spec for the first time pays (default: the
        engine keeps nothing, or the adapter turned its cache off)."""

    def prepare_vocab(self, tokenizer_path: str) -> dict[str, float]:
        """Build the engine's vocabulary for one tokenizer; returns timed parts in seconds."""
        raise NotImplementedError

    def compile(self, case: dict[str, Any]) -> Any:
        """Compile one case into a handle.

        Raises:
            Unsupported: the engine has no front end for this kind or feature.
            CompileFailed: the engine gave up (budget, error state).
        """
        raise NotImplementedError

    def start(self, handle: Any) -> Session:
        """A fresh per-request session over a compiled handle (not timed by the walks)."""
        raise NotImplementedError

    def artifact_size(self, handle: Any) -> int | None:
        """Bytes of the compiled artifact where the engine can say; None otherwise."""
        return None

    def extras(self) -> dict[str, Any]:
        """Engine-specific figures printed beside the comparison (default: none)."""
        return {}

    def mask_walk(self, handle: Any, token_ids: list[int]) -> WalkResult:
        """Walk one instance: per-token mask and advance µs, and whether it was accepted."""
        return timed_walk(self.start(handle), token_ids, self.eos_token_id)

    def forced_walk(self, handle: Any, token_ids: list[int]) -> dict[str, int] | None:
        """Untimed walk counting tokens that jump-forward would have produced.

        Returns counts over the instance's tokens: `forced_bytes` (the token's bytes lie
        inside the engine's forced text) and `forced_tokens` (the token is the engine's
        first jump-forward id), each None-valued when the engine has no such API.
        """
        session = self.start(handle)
        if session.forced_bytes is None and session.forced_tokens is None:
            return None
        by_bytes = by_tokens = 0
        for token in token_ids:
            if session.forced_bytes is not None:
                forced = session.forced_bytes()
                piece = self.token_bytes(token)
                if forced and piece and forced.startswith(piece):
                    by_bytes += 1
            if session.forced_tokens is not None:
                ids = session.forced_tokens()
                if ids and ids[0] == token:
                    by_tokens += 1
            if session.advance(token) is False:
                break
        return {
            "tokens": len(token_ids),
            "forced_bytes": by_bytes if session.forced_bytes is not None else -1,
            "forced_tokens": by_tokens if session.forced_tokens is not None else -1,
        }

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token in the engine's own table (for `forced_walk`)."""
        return b""


def timed_walk(session: Session, token_ids: list[int], eos_token_id: int) -> WalkResult:
    """The shared timed loop (see the module docstring); µs from perf_counter_ns."""
    mask, fill, advance = session.mask, session.fill, session.advance
    clock = time.perf_counter_ns
    mask_ns: list[int] = []
    advance_ns: list[int] = []
    result = WalkResult(accepted=False, rejected_at=None, disagreement=False)
    for position, token in enumerate(token_ids):
        t0 = clock()
        fill()
        t1 = clock()
        mask_ns.append(t1 - t0)
        if not (int(mask[token >> 5]) >> (token & 31)) & 1:
            result.rejected_at = position
            break
        t2 = clock()
        ok = advance(token)
        t3 = clock()
        advance_ns.append(t3 - t2)
        if ok is False:
            result.rejected_at = position
            result.disagreement = True
            break
    else:
        t0 = clock()
        fill()
        t1 = clock()
        mask_ns.append(t1 - t0)
        eos = eos_token_id
        if (int(mask[eos >> 5]) >> (eos & 31)) & 1 and session.accept_eos():
            result.accepted = True
        else:
            result.rejected_at = len(token_ids)
    result.mask_us = [ns / 1e3 for ns in mask_ns]
    result.advance_us = [ns / 1e3 for ns in advance_ns]
    return result


def bitmask_words(vocab_size: int) -> int:
    """int32 words per bitmask row for `vocab_size` tokens."""
    return (vocab_size + 31) // 32


def read_tokenizer_text(path: str | Path) -> str:
    """The text of a tokenizer.json, plain or gzip."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8")


def _read_config(path: Path) -> dict[str, Any]:
    for name in ("tokenizer_config.json", "tokenizer_config.json.gz"):
        candidate = path.parent / name
        if candidate.exists():
            loaded: dict[str, Any] = json.loads(read_tokenizer_text(candidate))
            return loaded
    return {}


def tokenizer_facts(path: str | Path) -> dict[str, Any]:
    """EOS id and vocabulary size of a tokenizer.json, read the same way for every engine.

    EOS is the tokenizer_config.json `eos_token` beside the file, else the first common
    end-of-text name the tokenizer has. Every engine is handed this one id.
    """
    path = Path(path)
    doc = json.loads(read_tokenizer_text(path))
    ids: dict[str, int] = dict(doc["model"]["vocab"])
    for added in doc.get("added_tokens", []):
        ids[added["content"]] = added["id"]
    eos = _read_config(path).get("eos_token")
    if isinstance(eos, dict):
        eos = eos.get("content")
    names = [eos] if isinstance(eos, str) else []
    names += [n for n in _COMMON_EOS if n not in names]
    eos_id = next((ids[n] for n in names if n in ids), None)
    if eos_id is None:
        raise ValueError(f"no EOS token found for {path}")
    return {"eos_token_id": eos_id, "vocab_size": max(ids.values()) + 1, "path": str(path)}


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, character → byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def token_bytes_table(text: str) -> dict[int, bytes]:
    """id → bytes for the non-special tokens of a byte-level or SentencePiece tokenizer.json.

    Used by adapters whose engine needs the byte table handed in (outlines-core builds
    it from the Hub, which this benchmark never touches).
    """
    doc = json.loads(text)
    special = {a["id"] for a in doc.get("added_tokens", []) if a.get("special")}
    decoder_types = json.dumps(doc.get("decoder") or {})
    byte_level = "ByteLevel" in decoder_types
    table: dict[int, bytes] = {}
    if byte_level:
        decode = _byte_decoder()
        for piece, token_id in doc["model"]["vocab"].items():
            if token_id not in special:
                try:
                    table[token_id] = bytes(decode[ch] for ch in piece)
                except KeyError:
                    table[token_id] = piece.encode("utf-8")
        return table
    for piece, token_id in doc["model"]["vocab"].items():
        if token_id in special:
            continue
        if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            table[token_id] = bytes([int(piece[3:5], 16)])
        else:
            table[token_id] = piece.replace("\u2581", " ").encode("utf-8")
    return table
