"""Schema locations and `$ref` resolution: `$id`, `$anchor`, `$defs`, pointers, remotes.

Every subschema the lowering touches is a `Location`: the schema plus where it sits
(document URI and JSON pointer, for error messages) and the base URI its relative refs
resolve against. `Registry` indexes the root document and the caller's
`remote_schemas` once, crawling only keywords that hold schemas (so an `$id` inside an
`enum` value is not mistaken for an identifier), and then resolves refs without I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, uses_relative

from fsmcompile.errors import SchemaError

ROOT_URI = "https://fsmcompile.invalid/root.json"
"""Base URI of a root schema without an absolute `$id`; `.invalid` never resolves."""

_DIALECTS = {
    "https://json-schema.org/draft/2020-12/schema": "2020-12",
    "https://json-schema.org/draft/2019-09/schema": "2019-09",
    "http://json-schema.org/draft-07/schema": "draft-07",
    "http://json-schema.org/draft-06/schema": "draft-06",
    "http://json-schema.org/draft-04/schema": "draft-04",
}
_LEGACY = ("draft-07", "draft-06", "draft-04")

_SCHEMA_VALUED = (
    "additionalProperties",
    "additionalItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
)
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def is_legacy(draft: str) -> bool:
    """Drafts 4-7, where `$ref` replaces its siblings and `items` may be an array."""
    return draft in _LEGACY


def dialect_of(schema: Any, default: str) -> str:
    """The draft named by a document's `$schema`, or `default`."""
    if isinstance(schema, dict) and isinstance(schema.get("$schema"), str):
        uri = schema["$schema"].rstrip("#")
        return _DIALECTS.get(uri, _DIALECTS.get(uri.replace("https://", "http://"), default))
    return default


def escape_token(token: str | int) -> str:
    """One JSON pointer reference token (RFC 6901)."""
    return str(token).replace("~", "~0").replace("/", "~1")


def join_uri(base: str, ref: str) -> str:
    """Resolve `ref` against `base`, including bases urllib will not join (urn:, tag:)."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    scheme = base.split(":", 1)[0] if ":" in base else ""
    if ":" in ref.split("/", 1)[0] or scheme not in uses_relative:
        return ref
    return urljoin(base, ref)


@dataclass(frozen=True, slots=True)
class Location:
    """A subschema and where it is.

    Attributes:
        schema: the subschema (a dict or a bool).
        base_uri: the URI its relative `$ref`s resolve against.
        document: "" for the root document, else the remote document's URI.
        pointer: the JSON pointer of `schema` inside its document.
        draft: the dialect in force ("2020-12", "draft-07", ...).
        synthetic: made up by the lowering (not in any document); holds no `$ref`.
    """

    schema: Any
    base_uri: str
    document: str
    pointer: str
    draft: str
    synthetic: bool = False

    @property
    def where(self) -> str:
        """The pointer shown in errors: `/properties/a`, or `uri#/…` in a remote document."""
        return self.pointer if not self.document else f"{self.document}#{self.pointer}"

    @property
    def key(self) -> tuple[str, str]:
        """Identity of the subschema (document, pointer)."""
        return (self.document, self.pointer)

    def child(self, *tokens: str | int) -> Location:
        """The subschema at `self.schema[tokens[0]][tokens[1]]...`."""
        node = self.schema
        base = self.base_uri
        for token in tokens:
            node = node[token]
        if isinstance(node, dict) and isinstance(node.get("$id", node.get("id")), str):
            base = _rebase(base, node, self.draft)
        pointer = self.pointer + "".join("/" + escape_token(t) for t in tokens)
        return replace(self, schema=node, base_uri=base, pointer=pointer)


def _rebase(base: str, node: dict[str, Any], draft: str) -> str:
    ident = node.get("$id") if "$id" in node else (node.get("id") if draft == "draft-04" else None)
    if not isinstance(ident, str) or ident.startswith("#"):
        return base
    return urldefrag(join_uri(base, ident))[0]


def subschemas(loc: Location) -> Iterator[Location]:
    """The direct subschemas of `loc` under keywords that hold schemas."""
    schema = loc.schema
    if not isinstance(schema, dict):
        return
    for keyword in _SCHEMA_VALUED:
        if isinstance(schema.get(keyword), dict | bool):
            yield loc.child(keyword)
    items = schema.get("items")
    if isinstance(items, dict | bool):
        yield loc.child("items")
    elif isinstance(items, list):
        yield from (loc.child("items", i) for i in range(len(items)))
    for keyword in _SCHEMA_LISTS:
        if isinstance(schema.get(keyword), list):
            yield from (loc.child(keyword, i) for i in range(len(schema[keyword])))
    for keyword in (*_SCHEMA_MAPS, "dependencies"):
        value = schema.get(keyword)
        if isinstance(value, dict):
            for name, sub in value.items():
                if isinstance(sub, dict | bool):
                    yield loc.child(keyword, name)


class Registry:
    """Every resource and anchor of the root document and the remote documents."""

    def __init__(
        self, root: Any, *, remote_schemas: Mapping[str, Any], draft: str = "auto"
    ) -> None:
        default = "2020-12" if draft == "auto" else draft
        self.resources: dict[str, Location] = {}
        self.anchors: dict[tuple[str, str], Location] = {}
        self.documents: dict[str, Any] = {}
        root_draft = dialect_of(root, default) if draft == "auto" else draft
        self.root = self._add_document(root, ROOT_URI, "", root_draft)
        for uri, document in remote_schemas.items():
            clean = urldefrag(uri)[0]
            self._add_document(document, clean, clean, dialect_of(document, default))

    def _add_document(self, document: Any, uri: str, name: str, draft: str) -> Location:
        self.documents[uri] = document
        loc = Location(document, uri, name, "", draft)
        if isinstance(document, dict):
            loc = replace(loc, base_uri=_rebase(uri, document, draft))
        self.resources.setdefault(uri, loc)
        self._crawl(loc)
        return loc

    def _crawl(self, root: Location) -> None:
        stack = [root]
        while stack:
            loc = stack.pop()
            schema = loc.schema
            if isinstance(schema, dict):
                self.resources.setdefault(loc.base_uri, loc)
                ident = schema.get("$id", schema.get("id") if loc.draft == "draft-04" else None)
                if isinstance(ident, str) and "#" in ident:
                    fragment = ident.split("#", 1)[1]
                    if fragment and not fragment.startswith("/"):
                        self.anchors[(loc.base_uri, fragment)] = loc
                for keyword in ("$anchor", "$dynamicAnchor"):
                    if isinstance(schema.get(keyword), str):
                        self.anchors.setdefault((loc.base_uri, schema[keyword]), loc)
            stack.extend(subschemas(loc))

    def resolve(self, ref: str, origin: Location, keyword: str = "$ref") -> Location:
        """The subschema `ref` names, seen from `origin`.

        Raises:
            SchemaError: the ref names no known document, anchor or pointer target.
        """
        uri = join_uri(origin.base_uri, ref)
        document, fragment = urldefrag(uri)
        resource = self.resources.get(document)
        if resource is None:
            raise SchemaError(
                f"cannot resolve {keyword} {ref!r}: no schema is known at {document!r}; "
                "pass remote documents in remote_schemas (nothing is fetched)",
                origin.where,
                keyword,
            )
        fragment = unquote(fragment)
        if not fragment:
            return resource
        if not fragment.startswith("/"):
            anchor = self.anchors.get((document, fragment))
            if anchor is None:
                raise SchemaError(
                    f"cannot resolve {keyword} {ref!r}: no anchor {fragment!r} in {document!r}",
                    origin.where,
                    keyword,
                )
            return anchor
        loc = resource
        for raw in fragment[1:].split("/"):
            token = raw.replace("~1", "/").replace("~0", "~")
            schema = loc.schema
            if isinstance(schema, dict) and token in schema:
                loc = loc.child(token)
            elif isinstance(schema, list) and token.isdigit() and int(token) < len(schema):
                loc = loc.child(int(token))
            else:
                raise SchemaError(
                    f"cannot resolve {keyword} {ref!r}: {token!r} not found",
                    origin.where,
                    keyword,
                )
        return loc
