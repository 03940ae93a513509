"""The Vocabulary: token id → bytes, EOS and special ids, logits width and fingerprint."""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from fsmcompile.errors import VocabularyError
from fsmcompile.vocabulary import loading
from fsmcompile.vocabulary.trie import TokenTrie


@dataclass(eq=False)
class Vocabulary:
    """What the compiler needs to know about one tokenizer, and nothing model-specific.

    Build one with `Vocabulary.load(...)` or the `from_*` constructors in `loading.py`.

    Attributes:
        token_bytes: raw bytes per token id; b"" for ids that are never text (special
            tokens, unknown, unused), which no mask ever allows except EOS.
        eos_token_ids: ids that end generation; allowed exactly where the spec accepts.
        special_token_ids: ids that are never allowed as text.
        size: the logits width (>= len(token_bytes)); padded rows are always masked.
        name: where it came from, for messages.
        scheme: 'byte_level' or 'sentencepiece'.
    """

    token_bytes: list[bytes]
    eos_token_ids: tuple[int, ...]
    special_token_ids: frozenset[int]
    size: int
    name: str = ""
    scheme: str = "byte_level"
    tokenizer_json: bytes | str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.size < len(self.token_bytes):
            raise VocabularyError(
                f"vocab_size {self.size} is smaller than the tokenizer's "
                f"{len(self.token_bytes)} ids"
            )
        if not self.eos_token_ids:
            raise VocabularyError(
                f"no EOS token known for {self.name or 'this tokenizer'}; pass eos_token_ids"
            )
        for eos in self.eos_token_ids:
            if not 0 <= eos < self.size:
                raise VocabularyError(f"EOS id {eos} is outside the vocabulary (size {self.size})")

    @classmethod
    def load(cls, source: Any, **options: Any) -> Vocabulary:
        """From a path, a folder, a locally cached Hub name or a tokenizer object.

        Options: `vocab_size` (logits width), `eos_token_ids`, `cache_dir`, `use_cache`.

        Raises:
            VocabularyError: nothing readable there, or no EOS can be determined.
        """
        return loading.load(cls, source, **options)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **options: Any) -> Vocabulary:
        """From a tokenizer.json (plain or gzip) or a folder holding one."""
        return loading.from_file(cls, path, **options)

    @classmethod
    def from_hf(cls, tokenizer: Any, **options: Any) -> Vocabulary:
        """From a loaded `tokenizers.Tokenizer` or transformers fast tokenizer."""
        return loading.from_hf(cls, tokenizer, **options)

    @classmethod
    def from_pretrained(cls, name: str, **options: Any) -> Vocabulary:
        """From a Hub name already in the local Hugging Face cache (never downloads)."""
        return loading.from_pretrained(cls, name, **options)

    @cached_property
    def fingerprint(self) -> str:
        """sha256 over every token's bytes, the EOS and special ids and the width.

        Every cache entry is keyed by it, so an index is never used with a tokenizer
        whose ids mean other bytes.
        """
        digest = hashlib.sha256()
        digest.update(b"fsmcompile-vocabulary-v1")
        digest.update(struct.pack("<qq", self.size, len(self.token_bytes)))
        digest.update(np.asarray(sorted(self.eos_token_ids), dtype="<i8").tobytes())
        digest.update(np.asarray(sorted(self.special_token_ids), dtype="<i8").tobytes())
        digest.update(self.lengths.astype("<i8").tobytes())
        digest.update(b"".join(self.token_bytes))
        return digest.hexdigest()

    @cached_property
    def lengths(self) -> npt.NDArray[np.int64]:
        """int64[len(token_bytes)], the byte length of each token."""
        return np.fromiter(
            (len(b) for b in self.token_bytes), dtype=np.int64, count=len(self.token_bytes)
        )

    @cached_property
    def text_token_ids(self) -> npt.NDArray[np.int64]:
        """Ids that may be emitted as text: non-empty and not special."""
        ids = np.flatnonzero(self.lengths > 0)
        if self.special_token_ids:
            ids = ids[~np.isin(ids, np.fromiter(self.special_token_ids, dtype=np.int64))]
        return ids

    @cached_property
    def text_spans(self) -> tuple[bytes, npt.NDArray[np.int64]]:
        """(the text tokens' bytes end to end, int64[size + 1] where each id's bytes start
        there): a token that is never text has an empty span. One flat table the runtime's
        C part reads a token's bytes from, shared by every grammar of this vocabulary."""
        ids = self.text_token_ids
        lengths = np.zeros(self.size, dtype=np.int64)
        lengths[ids] = self.lengths[ids]
        starts = np.zeros(self.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        return b"".join([self.token_bytes[i] for i in ids.tolist()]), starts

    @cached_property
    def trie(self) -> TokenTrie:
        """The text tokens as a flat byte trie (built once, shared by every compile)."""
        return TokenTrie.build(self.token_bytes, self.text_token_ids)

    @cached_property
    def max_token_bytes(self) -> int:
        """The longest text token, in bytes."""
        ids = self.text_token_ids
        return int(self.lengths[ids].max()) if len(ids) else 0

    @cached_property
    def _tokenizer(self) -> Any:
        if self.tokenizer_json is None:
            raise VocabularyError(
                f"{self.name or 'this vocabulary'} was built without a tokenizer; "
                "encode() needs one (load it from tokenizer.json)"
            )
        from tokenizers import Tokenizer

        text = self.tokenizer_json
        return Tokenizer.from_str(text.decode("utf-8") if isinstance(text, bytes) else text)

    def encode(self, text: str) -> list[int]:
        """Token ids the real tokenizer gives `text` as a continuation, no special tokens.

        SentencePiece tokenizers prepend `▁` to a whole input; a model's output is a
        continuation, so the text is encoded after a newline and that prefix removed.
        """
        tok = self._tokenizer
        if self.scheme != "sentencepiece":
            return list(tok.encode(text, add_special_tokens=False).ids)
        prefix = tok.encode("\n", add_special_tokens=False).ids
        ids = list(tok.encode("\n" + text, add_special_tokens=False).ids)
        if ids[: len(prefix)] != prefix:
            raise VocabularyError("could not encode a continuation with this tokenizer")
        return ids[len(prefix) :]

    def decode_bytes(self, token_ids: Sequence[int]) -> bytes:
        """The bytes a sequence of ids stands for (EOS and special ids add nothing)."""
        table = self.token_bytes
        return b"".join(table[i] for i in token_ids if i < len(table))
