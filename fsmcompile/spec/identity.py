"""What identifies a spec: its canonical text and hash, shared by the index and cache keys."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from fsmcompile.errors import SchemaError, SpecError
from fsmcompile.version import FORMAT_VERSION

Kind = Literal["regex", "json", "lark"]


def canonical_spec(kind: Kind, spec: Any) -> str:
    """The text that identifies a spec: JSON with sorted keys, regex and grammar verbatim.

    The same JSON Schema with its keys in another order is the same spec.
    """
    if kind == "json":
        if isinstance(spec, str):
            try:
                spec = json.loads(spec)
            except ValueError as exc:
                raise SchemaError(f"schema is not valid JSON: {exc}", "") from exc
        return json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if not isinstance(spec, str):
        raise SpecError(f"a {kind} spec must be a string, got {type(spec).__name__}")
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
