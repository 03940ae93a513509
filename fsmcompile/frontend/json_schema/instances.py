"""Validating concrete values (enum members, property names) with `jsonschema` itself.

When the language is a finite set of known values, there is no need to approximate:
each candidate is checked against the real subschema, with the same `$ref` targets the
lowering resolved. This makes `enum`/`const` exact even next to keywords the lowering
cannot express (`not`, `uniqueItems`, ...). Formats are asserted here too, matching the
lowering, which enforces the formats it knows.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import jsonschema
from referencing import Registry as ReferencingRegistry
from referencing import Resource
from referencing.jsonschema import DRAFT4, DRAFT6, DRAFT7, DRAFT201909, DRAFT202012

from fsmcompile.frontend.json_schema.refs import ROOT_URI, Location, Registry

_VALIDATORS: dict[str, type[Any]] = {
    "2020-12": jsonschema.Draft202012Validator,
    "2019-09": jsonschema.Draft201909Validator,
    "draft-07": jsonschema.Draft7Validator,
    "draft-06": jsonschema.Draft6Validator,
    "draft-04": jsonschema.Draft4Validator,
}
_VALUE_KEYWORDS = frozenset({"enum", "const"})
_SPECIFICATIONS = {
    "2020-12": DRAFT202012,
    "2019-09": DRAFT201909,
    "draft-07": DRAFT7,
    "draft-06": DRAFT6,
    "draft-04": DRAFT4,
}


class InstanceChecker:
    """Validates values against subschemas of one `Registry`'s documents."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._referencing: ReferencingRegistry[Any] | None = None
        self._validators: dict[tuple[str, str, bool], Any] = {}

    def _resources(self) -> ReferencingRegistry[Any]:
        if self._referencing is None:
            pairs = []
            for uri, document in self._registry.documents.items():
                draft = self._registry.root.draft if uri == ROOT_URI else "2020-12"
                resource = Resource.from_contents(
                    document, default_specification=_SPECIFICATIONS[draft]
                )
                pairs.append((uri, resource))
            root = self._registry.root
            if root.base_uri != ROOT_URI:  # a root `$id`: its relative refs resolve there
                pairs.append((root.base_uri, pairs[0][1]))
            self._referencing = ReferencingRegistry().with_resources(pairs).crawl()
        return self._referencing

    def _validator(self, loc: Location, *, apart_from_values: bool = False) -> Any:
        key = (*loc.key, apart_from_values)
        if key in self._validators:
            return self._validators[key]
        cls = _VALIDATORS[loc.draft]
        schema: Any = loc.schema
        if apart_from_values:
            schema = {k: v for k, v in schema.items() if k not in _VALUE_KEYWORDS}
        if loc.synthetic:
            validator = cls(schema, registry=self._resources(), format_checker=cls.FORMAT_CHECKER)
        else:
            document = loc.document or self._registry.root.base_uri
            owner = self._registry.resources.get(document or ROOT_URI)
            if owner is not None and owner.base_uri == loc.base_uri:
                # Same base as its document: validate the subschema itself, so no
                # pointer walk is needed (`referencing` mistakes a property named
                # "id" for a draft-04 identifier while walking one).
                root = cls(
                    owner.schema, registry=self._resources(), format_checker=cls.FORMAT_CHECKER
                )
                validator = root.evolve(schema=schema)
            elif apart_from_values:
                # Its relative `$ref`s resolve only through the pointer: keep the values.
                validator = self._validator(loc)
            else:
                pointer = {"$ref": f"{document}#{quote(loc.pointer, safe='/~')}"}
                validator = cls(
                    pointer, registry=self._resources(), format_checker=cls.FORMAT_CHECKER
                )
        self._validators[key] = validator
        return validator

    def is_valid(
        self, value: Any, loc: Location, *, negate: bool = False, apart_from_values: bool = False
    ) -> bool:
        """Whether `value` is valid against the subschema at `loc` (or, with `negate`,
        invalid). A validator failure counts as "not kept", which only ever removes
        values: sound.

        With `apart_from_values`, the subschema's own `enum` and `const` are left out:
        for values already taken from them (by JSON equality) they hold, and jsonschema
        checks `enum` by a linear scan, quadratic over a 10,000-value enum.
        """
        if not (isinstance(loc.schema, dict) and _VALUE_KEYWORDS & loc.schema.keys()):
            apart_from_values = False
        try:
            valid = bool(self._validator(loc, apart_from_values=apart_from_values).is_valid(value))
        except Exception:  # noqa: BLE001 - any validator failure must drop the value
            return False
        return not valid if negate else valid
