"""Turn a Hugging Face `tokenizer.json` document into the raw bytes of every token id.

Masks are computed over bytes, so each id must map to exactly the bytes the model
emits when it samples that id. Byte-level BPE stores bytes through the GPT-2 printable
map; SentencePiece stores `▁` for a space and `<0xNN>` for byte-fallback tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fsmcompile.errors import VocabularyError

_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def gpt2_unicode_to_byte() -> dict[str, int]:
    """The inverse of GPT-2's byte → printable-character map used by byte-level BPE."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


@dataclass(frozen=True, slots=True)
class TokenTable:
    """Decoded tokens: `token_bytes[i]` is b"" for special ids (never allowed as text)."""

    token_bytes: list[bytes]
    special_ids: frozenset[int]
    added_by_content: dict[str, int]
    scheme: str


def _component_types(node: Any) -> set[str]:
    """All `type` values in a (possibly nested Sequence) tokenizer.json component."""
    if not isinstance(node, dict):
        return set()
    types = {str(node.get("type"))}
    for key in ("pretokenizers", "decoders", "normalizers", "processors"):
        for child in node.get(key) or []:
            types |= _component_types(child)
    return types


def detect_scheme(doc: dict[str, Any]) -> str:
    """'byte_level' or 'sentencepiece', from the decoder and pre-tokenizer."""
    types = _component_types(doc.get("decoder")) | _component_types(doc.get("pre_tokenizer"))
    if "ByteLevel" in types:
        return "byte_level"
    if types & {"ByteFallback", "Metaspace", "Replace"}:
        return "sentencepiece"
    raise VocabularyError(
        f"unsupported tokenizer: decoder/pre-tokenizer types {sorted(types - {'None'})}; "
        "fsmcompile reads byte-level BPE and SentencePiece tokenizers"
    )


def decode_tokenizer_json(doc: dict[str, Any]) -> TokenTable:
    """Decode every id of a parsed `tokenizer.json` to bytes.

    Raises:
        VocabularyError: the model type or decoder is not one we can map to bytes.
    """
    model = doc.get("model") or {}
    vocab = model.get("vocab")
    if isinstance(vocab, list):  # Unigram: [[piece, score], ...]
        pieces = {entry[0]: i for i, entry in enumerate(vocab)}
    elif isinstance(vocab, dict):
        pieces = {str(k): int(v) for k, v in vocab.items()}
    else:
        raise VocabularyError("tokenizer.json has no model.vocab")
    scheme = detect_scheme(doc)
    added = doc.get("added_tokens") or []
    size = max([*pieces.values(), *(int(a["id"]) for a in added)], default=-1) + 1
    token_bytes: list[bytes] = [b""] * size
    if scheme == "byte_level":
        # str.translate to latin-1 code points is a C loop: ~10x faster than per-char bytes().
        to_latin1 = {ord(c): b for c, b in gpt2_unicode_to_byte().items()}
        for piece, idx in pieces.items():
            try:
                token_bytes[idx] = piece.translate(to_latin1).encode("latin-1")
            except UnicodeEncodeError:  # a piece outside the byte map: take its UTF-8 text
                token_bytes[idx] = piece.encode("utf-8")
    else:
        for piece, idx in pieces.items():
            fallback = _BYTE_FALLBACK.match(piece)
            if fallback:
                token_bytes[idx] = bytes([int(fallback.group(1), 16)])
            else:
                token_bytes[idx] = piece.replace("▁", " ").encode("utf-8")
    special: set[int] = set()
    added_by_content: dict[str, int] = {}
    for entry in added:
        idx = int(entry["id"])
        content = str(entry["content"])
        added_by_content[content] = idx
        if entry.get("special", False):
            special.add(idx)
            token_bytes[idx] = b""
        else:
            token_bytes[idx] = content.encode("utf-8")
    if scheme == "sentencepiece" and "<unk>" in pieces:
        special.add(pieces["<unk>"])
        token_bytes[pieces["<unk>"]] = b""
    return TokenTable(token_bytes, frozenset(special), added_by_content, scheme)
