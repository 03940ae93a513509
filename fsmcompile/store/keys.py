"""Cache keys: one stable name per (vocabulary, spec kind, spec, options, format version).

Every input that changes the compiled bytes must be in the key, and nothing that does
not: the same JSON Schema written with its keys in another order, or with other
whitespace, is the same constraint and must hit the same entry across the fleet.

The key's digest is computed from exactly the two identity fields an artifact's header
carries (`vocab_fingerprint` and `spec_hash`, the latter covering kind, spec, options and
format version), so a reader can check that an entry found under a key was compiled for
that key without knowing the spec (`entry_check.py`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KeyParts",
    "cache_key",
    "canonical_json",
    "entry_digest",
    "parse_key",
    "readable_kind",
    "readable_vocab",
    "spec_digest",
]

_UNSAFE = re.compile(r"[^a-z0-9_]+")
_KEY_SHAPE = re.compile(r"([a-z0-9_]{1,32})-v([0-9]{1,9})-([a-z0-9_]{0,12})-([0-9a-f]{64})")


@dataclass(frozen=True, slots=True)
class KeyParts:
    """The fields of a key made by `cache_key`: readable prefix and full digest."""

    kind: str
    format_version: int
    vocab_prefix: str
    digest: str


def canonical_json(value: Any) -> str:
    """Serialize `value` as JSON with sorted keys and no whitespace.

    Raises:
        TypeError: `value` holds something JSON cannot represent (a set, an object).
        ValueError: `value` holds NaN or infinity, which has no canonical JSON form.
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def _canonical_spec(kind: str, spec: str | dict[str, Any]) -> str:
    if isinstance(spec, dict):
        return canonical_json(spec)
    if "json" in kind:
        # A JSON Schema handed over as text: reorder it too. Text that does not parse
        # is kept verbatim; the compiler, not the cache, reports the syntax error.
        try:
            return canonical_json(json.loads(spec))
        except ValueError:
            return spec
    return spec  # regex and Lark text: every byte is meaningful


def readable_kind(kind: str) -> str:
    """The kind as it appears in a key: lower case, `[a-z0-9_]`, at most 32 characters."""
    return _UNSAFE.sub("_", kind.lower())[:32] or "spec"


def readable_vocab(vocab_fingerprint: str) -> str:
    """The first 12 key-safe characters of a vocabulary fingerprint, as in a key."""
    return _UNSAFE.sub("_", vocab_fingerprint.lower())[:12]


def spec_digest(
    *, kind: str, spec: str | dict[str, Any], options: dict[str, Any], format_version: int
) -> str:
    """sha256 hex of kind, canonical spec, options and format version.

    The same document, hashed the same way, as `fsmcompile.frontend.identity.spec_hash`, which
    every compiled artifact records as its `spec_hash` (a test pins the two together).
    """
    doc = canonical_json(
        {
            "kind": kind,
            "spec": _canonical_spec(kind, spec),
            "options": options,
            "format": format_version,
        }
    )
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()


def entry_digest(vocab_fingerprint: str, spec_hash: str) -> str:
    """The digest part of a key, from the identity fields of an artifact's header."""
    doc = canonical_json({"vocab": vocab_fingerprint, "spec_hash": spec_hash})
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()


def parse_key(key: str) -> KeyParts | None:
    """Split a key made by `cache_key`; None for any other string."""
    match = _KEY_SHAPE.fullmatch(key)
    if match is None:
        return None
    kind, version, vocab_prefix, digest = match.groups()
    return KeyParts(kind, int(version), vocab_prefix, digest)


def cache_key(
    *,
    vocab_fingerprint: str,
    kind: str,
    spec: str | dict[str, Any],
    options: dict[str, Any],
    format_version: int,
) -> str:
    """Return the cache key for one compile: a readable prefix and a sha256 hex digest.

    The prefix (`kind`, format version, first 12 characters of the vocabulary
    fingerprint) only helps humans and `keys(prefix=...)`; the digest covers every input
    in full (through `spec_digest` and the whole fingerprint), so two keys are equal
    exactly when the canonical inputs are.

    Args:
        vocab_fingerprint: `Vocabulary.fingerprint` of the tokenizer compiled for.
        kind: spec kind, e.g. "regex", "json", "lark".
        spec: the spec text, or a JSON Schema as a dict.
        options: compile options that change the output (JSON-serializable).
        format_version: artifact format version the bytes are written in.

    Returns:
        e.g. `"json-v3-3fa4c2d19b0e-<64 hex digits>"`.

    Raises:
        TypeError: `spec` or `options` holds a value JSON cannot represent.
        ValueError: they hold NaN or infinity.

    >>> a = cache_key(vocab_fingerprint="ab" * 32, kind="json_schema",
    ...               spec={"type": "object", "required": ["a"]}, options={}, format_version=1)
    >>> b = cache_key(vocab_fingerprint="ab" * 32, kind="json_schema",
    ...               spec='{"required": ["a"], "type": "object"}', options={}, format_version=1)
    >>> a == b, a[:28]
    (True, 'json_schema-v1-abababababab-')
    """
    digest = entry_digest(
        vocab_fingerprint,
        spec_digest(kind=kind, spec=spec, options=options, format_version=format_version),
    )
    return f"{readable_kind(kind)}-v{format_version}-{readable_vocab(vocab_fingerprint)}-{digest}"
