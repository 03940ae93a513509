"""Schema documents from clients: parse their JSON text and refuse what cannot be a schema.

Runs before anything walks the schema. Lowering recurses once or more per nesting level,
and so do Python's own `json.loads` and `json.dumps`, so a document nested thousands of
levels deep would end in a RecursionError with no position. Every refusal here is a
`SchemaError` with the JSON pointer of the offending value (and, in JSON text that does
not parse, its line and column).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from fsmcompile.errors import SchemaError

MAX_SCHEMA_DEPTH = 100
"""Most JSON containers (objects and arrays) nested inside each other in one schema
document. Real schemas stay far below it (the deepest of the 7,213 JSONSchemaBench
schemas nests 63); lowering spends about seven Python frames per level, so this keeps a
schema at the limit well inside Python's default recursion limit of 1,000."""

MAX_INTEGER_BITS = 14_000
"""Largest integer magnitude in bits (about 4,200 decimal digits): Python refuses to
convert integers of more than 4,300 digits to text, which JSON is."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[{}\[\],:]|[^\s{}\[\],:"]+', re.DOTALL)
"""A JSON lexeme: a string (possibly unterminated), punctuation, or a bare word."""


def escape_pointer_segment(segment: str) -> str:
    """A key as a JSON pointer segment (RFC 6901: `~` is `~0`, `/` is `~1`)."""
    return segment.replace("~", "~0").replace("/", "~1")


def text_position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of character `offset` in `text`."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def parse_schema_text(text: str) -> Any:
    """Parse a schema given as JSON text (`check_document` is the caller's next step).

    Raises:
        SchemaError: malformed JSON (`line`/`column` say where), or text nested too
            deeply for `json.loads` (the pointer, line and column where it crosses
            `MAX_SCHEMA_DEPTH`).
    """

    def reject_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        document = json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError as exc:
        raise SchemaError(
            f"schema is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            "",
            line=exc.lineno,
            column=exc.colno,
        ) from exc
    except RecursionError:
        raise too_deep_in_text(text) from None
    except ValueError as exc:
        raise SchemaError(f"schema is not valid JSON: {exc}", "") from exc
    return document


def too_deep_in_text(text: str) -> SchemaError:
    """The error for JSON text too deep to parse: where it first nests past the limit.

    Scans the text with a stack of its own (the parser's recursion is what failed)."""
    segments: list[str | None] = []  # per open container: the current member's key/index
    in_object: list[bool] = []
    expecting_key = False
    for found in _TOKEN.finditer(text):
        lexeme = found.group()
        if lexeme in ("{", "["):
            if len(segments) == MAX_SCHEMA_DEPTH:
                pointer = "".join(f"/{escape_pointer_segment(s or '')}" for s in segments)
                line, column = text_position(text, found.start())
                return _too_deep(pointer, line=line, column=column)
            segments.append(None if lexeme == "{" else "0")
            in_object.append(lexeme == "{")
            expecting_key = lexeme == "{"
        elif lexeme in ("}", "]") and segments:
            segments.pop()
            in_object.pop()
            expecting_key = False
        elif lexeme == "," and segments:
            if in_object[-1]:
                expecting_key = True
            else:
                segments[-1] = str(int(segments[-1] or "0") + 1)
        elif lexeme.startswith('"') and expecting_key:
            try:
                segments[-1] = str(json.loads(lexeme))
            except ValueError:
                segments[-1] = lexeme.strip('"')
            expecting_key = False
    return SchemaError(
        "schema nests too deeply for Python's JSON parser (its recursion limit); flatten it",
        "",
    )


def _too_deep(pointer: str, *, line: int | None = None, column: int | None = None) -> SchemaError:
    return SchemaError(
        f"schema nests deeper than {MAX_SCHEMA_DEPTH} levels of objects and arrays; "
        "flatten it, or move the repeated part into $defs and $ref it",
        pointer,
        line=line,
        column=column,
    )


def check_document(document: Any) -> None:
    """Refuse a schema document (dict, list or scalar tree) no JSON text could hold.

    Walks the tree with its own stack, so any depth is safe to check.

    Raises:
        SchemaError at the offending value's pointer: containers nested deeper than
            `MAX_SCHEMA_DEPTH`, keys that are not strings, values that are not JSON
            (sets, bytes, objects), NaN or infinite numbers (`1e400` overflows to
            infinity), integers past `MAX_INTEGER_BITS`, and strings or keys holding
            surrogate code points (`"\\ud800"`: not Unicode text, no UTF-8 encodes it).
    """
    parents: list[tuple[int, str | None]] = [(-1, None)]  # container id -> (parent, segment)

    def pointer_of(parent: int, segment: str | None) -> str:
        parts = [] if segment is None else [segment]
        while parent > 0:
            parent, part = parents[parent]
            if part is not None:
                parts.append(part)
        return "".join(f"/{escape_pointer_segment(p)}" for p in reversed(parts))

    stack: list[tuple[Any, int, str | None, int]] = [(document, 0, None, 0)]
    while stack:
        value, parent, segment, depth = stack.pop()
        if isinstance(value, dict | list | tuple):
            if depth == MAX_SCHEMA_DEPTH:
                raise _too_deep(pointer_of(parent, segment))
            parents.append((parent, segment))
            here = len(parents) - 1
            if isinstance(value, dict):
                for key, member in value.items():
                    if not isinstance(key, str):
                        raise SchemaError(
                            f"object key {key!r} is a {type(key).__name__}; JSON keys are strings",
                            pointer_of(here, None),
                        )
                    if (found := _SURROGATE.search(key)) is not None:
                        raise _surrogate_error(found, "key", pointer_of(here, key))
                    stack.append((member, here, key, depth + 1))
            else:
                stack.extend((item, here, str(i), depth + 1) for i, item in enumerate(value))
        elif isinstance(value, str):
            if (found := _SURROGATE.search(value)) is not None:
                raise _surrogate_error(found, "string", pointer_of(parent, segment))
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, int):
            if value.bit_length() > MAX_INTEGER_BITS:
                raise SchemaError(
                    f"integer with about {int(value.bit_length() * 0.30103)} digits is too "
                    "large for a schema",
                    pointer_of(parent, segment),
                )
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise SchemaError(
                    f"{value} is not a JSON number (a literal like 1e400 overflows a "
                    "double); use a finite bound",
                    pointer_of(parent, segment),
                )
        else:
            raise SchemaError(
                f"a {type(value).__name__} is not a JSON value", pointer_of(parent, segment)
            )


def _surrogate_error(found: re.Match[str], what: str, pointer: str) -> SchemaError:
    """Surrogate code points in a key or string: no UTF-8 text holds them."""
    return SchemaError(
        f"{what} holds the surrogate code point U+{ord(found.group()):04X} at character "
        f"{found.start()}: it is not Unicode text and has no UTF-8 encoding",
        pointer,
    )
