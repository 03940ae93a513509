"""Cache keys: one stable name per (vocabulary, spec kind, spec, options, format version).

Every input that changes the compiled bytes must be in the key, and nothing that does
not: the same JSON Schema written with its keys in another order, or with other
whitespace, is the same constraint and must hit the same entry across the fleet.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

__all__ = ["cache_key", "canonical_json"]

_UNSAFE = re.compile(r"[^a-z0-9_]+")


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
    in full, so two keys are equal exactly when the canonical inputs are.

    Args:
        vocab_fingerprint: `Vocabulary.fingerprint` of the tokenizer compiled for.
        kind: spec kind, e.g. "regex", "json_schema", "lark".
        spec: the spec text, or a JSON Schema as a dict.
        options: compile options that change the output (JSON-serializable).
        format_version: artifact format version the bytes are written in.

    Returns:
        e.g. `"json_schema-v1-3fa4c2d19b0e-<64 hex digits>"`.

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
    canonical = canonical_json(
        {
            "vocab": vocab_fingerprint,
            "kind": kind,
            "spec": _canonical_spec(kind, spec),
            "options": options,
            "format": format_version,
        }
    )
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    readable_kind = _UNSAFE.sub("_", kind.lower())[:32] or "spec"
    readable_vocab = _UNSAFE.sub("_", vocab_fingerprint.lower())[:12]
    return f"{readable_kind}-v{format_version}-{readable_vocab}-{digest}"
