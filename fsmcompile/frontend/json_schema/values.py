"""Concrete JSON values (`enum`, `const`) as IR, and JSON Schema value equality.

A value is written in the chosen whitespace form, with object keys in the order the
schema gives them (the one order a regex can afford; documented). Numbers match by
value, not by spelling: `const: 1` accepts `1`, `1.0` and `-0`-style spellings of the
same value, since JSON Schema compares numbers mathematically.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from fsmcompile.frontend.json_schema.exponents import exponent_range
from fsmcompile.frontend.json_schema.keywords import Atom
from fsmcompile.frontend.json_schema.numbers import Bound, number_range, to_decimal
from fsmcompile.frontend.json_schema.strings import literal_string
from fsmcompile.frontend.json_schema.syntax import JsonSyntax
from fsmcompile.ir.nodes import NOTHING, Node, alt, literal, seq


def atom_of(value: Any) -> Atom:
    """The type atom of a JSON value (booleans are not numbers, `1.0` is an integer)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "fraction"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON Schema defines it for `enum`, `const` and `uniqueItems`."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return to_decimal(a) == to_decimal(b) if _finite(a) and _finite(b) else a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def json_key(value: Any) -> Hashable:
    """A hashable key with `json_key(a) == json_key(b)` exactly when `json_equal(a, b)`:
    numbers by exact decimal value (`1`, `1.0` and `1e0` share one; Decimal hashes
    follow numeric equality), booleans apart from numbers, objects regardless of key
    order. Deduplicating or intersecting `enum` lists by key takes linear time where
    pairwise `json_equal` took quadratic (10,000 values: minutes). NaN equals nothing,
    not even itself, so each NaN gets a new key."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, int | float):
        if value != value:
            return ("number", object())
        return ("number", to_decimal(value) if _finite(value) else value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(json_key(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, json_key(v)) for k, v in value.items()))
    return ("other", type(value), value)


def _finite(x: int | float) -> bool:
    return isinstance(x, int) or x == x and x not in (float("inf"), float("-inf"))


def value_depth(value: Any) -> int:
    """How many containers `value` nests."""
    if isinstance(value, list):
        return 1 + max((value_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((value_depth(v) for v in value.values()), default=0)
    return 0


def value_ir(value: Any, syntax: JsonSyntax) -> Node:
    """The texts of exactly `value` (see the module docstring for spelling)."""
    if value is None:
        return literal("null")
    if isinstance(value, bool):
        return literal("true" if value else "false")
    if isinstance(value, int | float):
        if not _finite(value):
            return NOTHING
        exact = Bound(to_decimal(value), False)
        node = number_range(exact, exact)
        if syntax.options.exponent_numbers and exact.value != 0:
            node = alt(node, exponent_range(exact, exact))
        return node
    every = syntax.options.listed_escapes
    if isinstance(value, str):
        return literal_string(value, every_spelling=every)
    if isinstance(value, list):
        if not value:
            return syntax.container("[", "]", literal(""), may_be_empty=True)
        items = [value_ir(v, syntax) for v in value]
        body = items[0]
        for item in items[1:]:
            body = seq(body, syntax.comma, item)
        return syntax.container("[", "]", body, may_be_empty=False)
    if isinstance(value, dict):
        if not value:
            return syntax.container("{", "}", literal(""), may_be_empty=True)
        members = [
            syntax.member(literal_string(k, every_spelling=every), value_ir(v, syntax))
            for k, v in value.items()
        ]
        body = members[0]
        for member in members[1:]:
            body = seq(body, syntax.comma, member)
        return syntax.container("{", "}", body, may_be_empty=False)
    raise TypeError(f"not a JSON value: {type(value).__name__}")
