"""What identifies a spec: its canonical text and hash, shared by the index and cache keys."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from fsmcompile.errors import GrammarError, RegexSyntaxError, SchemaError, SpecError
from fsmcompile.version import FORMAT_VERSION

Kind = Literal["regex", "json", "lark"]


_SURROGATE = re.compile("[\ud800-\udfff]")
"""Surrogate code points: a Python str may hold them, but no UTF-8 text (and so no cache
key, which hashes the spec's UTF-8) can."""


def canonical_spec(kind: Kind, spec: Any) -> str:
    """The text that identifies a spec: JSON with sorted keys, regex and grammar verbatim.

    The same JSON Schema with its keys in another order is the same spec.

    Raises:
        SchemaError: the schema is not JSON (or not a JSON document: too deep, NaN,
            surrogates, sets ...), with its pointer.
        RegexSyntaxError, GrammarError: the pattern or grammar holds a surrogate code
            point (`pos`, `line`/`column` say where).
        SpecError: a regex or grammar that is not a string.
    """
    if kind == "json":
        from fsmcompile.frontend.json_schema.document import check_document, parse_schema_text

        if isinstance(spec, str):
            spec = parse_schema_text(spec)
        try:
            text = json.dumps(
                spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
            )
        except (RecursionError, ValueError, TypeError) as exc:
            # Only here and below is the document walked (cache hits skip the walk; the
            # compile itself checks every document before lowering it).
            check_document(spec)  # says where, in all but the rarest case
            raise SchemaError(f"schema is not a JSON document: {exc}", "") from exc
        if _SURROGATE.search(text) is not None:
            check_document(spec)
        return text
    if not isinstance(spec, str):
        raise SpecError(f"a {kind} spec must be a string, got {type(spec).__name__}")
    found = _SURROGATE.search(spec)
    if found is not None:
        message = (
            f"surrogate code point U+{ord(found.group()):04X}: not Unicode text, no UTF-8 "
            "encodes it"
        )
        if kind == "regex":
            raise RegexSyntaxError(message, spec, found.start())
        line = spec.count("\n", 0, found.start()) + 1
        column = found.start() - (spec.rfind("\n", 0, found.start()) + 1) + 1
        raise GrammarError(message, line, column)
    return spec


def spec_hash(kind: Kind, spec: Any, options: Mapping[str, Any]) -> str:
    """sha256 of kind, canonical spec, options and artifact format version."""
    doc = json.dumps(
        {
            "kind": kind,
            "spec": canonical_spec(kind, spec),
            "options": dict(options),
            "format": FORMAT_VERSION,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()
