"""The JSON Schema meta-schemas, so a `$ref` to one resolves without I/O.

Schemas point at their dialect's meta-schema (`{"$ref":
"http://json-schema.org/draft-04/schema#"}` for "any schema"). Those documents ship with
`jsonschema-specifications`, which `jsonschema` itself depends on: they are read from
there, never fetched. Every other remote document still comes only from the caller's
`remote_schemas`.
"""

from __future__ import annotations

from typing import Any

from jsonschema_specifications import REGISTRY

_DRAFTS = ("draft-04", "draft-06", "draft-07", "draft/2019-09", "draft/2020-12")


def is_meta_schema_uri(uri: str) -> bool:
    """Whether `uri` (without fragment) names a bundled meta-schema or vocabulary of
    drafts 4 to 2020-12 (draft 3 is not a dialect the compiler reads)."""
    return any(f"json-schema.org/{draft}/" in uri for draft in _DRAFTS) and uri in REGISTRY


def meta_schema(uri: str) -> Any | None:
    """The bundled meta-schema document at `uri` (without fragment), or None."""
    if not is_meta_schema_uri(uri):
        return None
    return REGISTRY.contents(uri)
