"""The one error hierarchy of fsmcompile; every error carries its position as data.

FsmcompileError
├── SpecError (ValueError)               a spec the user wrote is wrong
│   ├── RegexSyntaxError                 .pattern, .pos
│   ├── SchemaError                      .pointer, .keyword (.line, .column in JSON text)
│   ├── GrammarError                     .line, .column
│   └── SpecEncodingError                .source, .byte_offset: a spec file is not UTF-8
├── SpecPathError (ValueError)           .source: a path that names no spec (missing, or
│                                        its kind is not told by its suffix)
├── UnsupportedFeatureError (SpecError)  valid spec, construct we cannot enforce exactly
│                                        .pattern/.pos or .pointer/.keyword, .features
├── BudgetExceededError                  compile ran past timeout_s or max_states
├── VocabularyError                      tokenizer missing or unreadable
├── ArtifactError                        .source (path or key)
│   ├── ArtifactNotFoundError            no file at that path (also FileNotFoundError)
│   ├── ArtifactCorruptError             checksum, truncation, not an artifact, a table
│   │                                    out of range (.pointer, .expected, .found)
│   ├── ArtifactVersionError             written in a newer or older format
│   └── VocabularyMismatchError          compiled for another tokenizer
└── StoreError
    └── StoreUnavailableError            the store cannot be reached

`error_document(exc)` turns any of them into the `{"type", "message", ...}` object that
scripts and worker processes pass around instead of prose or exception objects.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from typing import Any


class FsmcompileError(Exception):
    """Root of every error raised by fsmcompile."""


class SpecError(FsmcompileError, ValueError):
    """A regex, schema or grammar is invalid."""


def _caret_line(pattern: str, pos: int) -> str:
    """Render `pattern` with a caret under `pos` (lark's get_context, for one line).

    Surrogate code points show as U+FFFD, one character each, so the message stays text
    any stream can print and the caret stays under its character."""
    shown = pattern if len(pattern) <= 120 else pattern[max(0, pos - 60) : pos + 60]
    shown = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in shown)
    offset = pos if len(pattern) <= 120 else pos - max(0, pos - 60)
    return f"  {shown}\n  {' ' * offset}^"


class RegexSyntaxError(SpecError):
    """A regex that does not parse; `pos` is the character offset of the problem."""

    def __init__(self, message: str, pattern: str, pos: int) -> None:
        self.pattern = pattern
        self.pos = pos
        self.reason = message
        super().__init__(f"{message} at position {pos}\n{_caret_line(pattern, pos)}")


class SchemaError(SpecError):
    """A JSON Schema that is malformed or contradictory; `pointer` is a JSON pointer.

    When the problem was found in the schema's JSON text (it does not parse, or nests
    too deeply to parse), `line` and `column` (1-based) say where in that text.
    """

    def __init__(
        self,
        message: str,
        pointer: str = "",
        keyword: str | None = None,
        *,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.pointer = pointer
        self.keyword = keyword
        self.line = line
        self.column = column
        self.reason = message
        where = f" at {pointer or '/'}" if pointer is not None else ""
        super().__init__(f"{message}{where}")


class GrammarError(SpecError):
    """A Lark grammar that does not build; `line` and `column` are 1-based when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        self.line = line
        self.column = column
        self.reason = message
        where = f" at line {line}, column {column}" if line is not None else ""
        super().__init__(f"{message}{where}")


class SpecEncodingError(SpecError):
    """Spec bytes that are not UTF-8 text; `byte_offset` is the first byte that is not.

    Specs are text, and their cache keys hash that text as UTF-8, so bytes that do not
    decode (or text holding surrogate code points, which no UTF-8 encodes) cannot be one.
    """

    def __init__(self, message: str, *, byte_offset: int, source: str | None = None) -> None:
        self.byte_offset = byte_offset
        self.source = source
        self.reason = message
        where = f" in {source}" if source else ""
        super().__init__(f"{message} at byte {byte_offset}{where}")


class SpecPathError(FsmcompileError, ValueError):
    """A path given as a spec that names none: it does not exist, or its suffix does not
    say whether it holds a regex, a JSON Schema or a grammar (name the kind)."""

    def __init__(self, message: str, source: str) -> None:
        self.source = source
        super().__init__(message)


class UnsupportedFeatureError(SpecError):
    """A valid spec using something no exact token mask can enforce here.

    `features` lists every offending (pointer or position, keyword) pair, so one error
    reports all of them at once instead of one per compile attempt.
    """

    def __init__(
        self,
        message: str,
        *,
        pattern: str | None = None,
        pos: int | None = None,
        pointer: str | None = None,
        keyword: str | None = None,
        features: Sequence[tuple[str, str]] = (),
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.pattern = pattern
        self.line = line
        self.column = column
        self.pos = pos
        self.pointer = pointer
        self.keyword = keyword
        self.features = list(features)
        self.reason = message
        text = message
        if pattern is not None and pos is not None:
            text = f"{message} at position {pos}\n{_caret_line(pattern, pos)}"
        elif pointer is not None:
            text = f"{message} at {pointer or '/'}"
        elif line is not None:
            text = f"{message} at line {line}, column {column}"
        super().__init__(text)


class BudgetExceededError(FsmcompileError):
    """A compile ran past its time or size budget; `limit` names which one."""

    def __init__(self, message: str, *, limit: str, value: float) -> None:
        self.limit = limit
        self.value = value
        super().__init__(message)


class VocabularyError(FsmcompileError, ValueError):
    """A tokenizer that cannot be found or decoded."""


class ArtifactError(FsmcompileError):
    """An artifact that cannot be used; `source` is the path or cache key it came from."""

    def __init__(self, message: str, source: str | None = None) -> None:
        self.source = source
        super().__init__(f"{message} ({source})" if source else message)


class ArtifactNotFoundError(ArtifactError, FileNotFoundError):
    """No artifact at that path: nothing is damaged, the path is wrong (or not yet written).

    Also a `FileNotFoundError` (errno ENOENT), so callers that already handle a missing
    file need no new branch."""

    def __init__(self, message: str, source: str | None = None) -> None:
        super().__init__(message, source)
        self.errno = errno.ENOENT
        self.strerror = message
        self.filename = source

    def __str__(self) -> str:
        # OSError's own text would read "[Errno 2] ...": keep the tree's "message (source)".
        return str(self.args[0]) if self.args else ""


class ArtifactCorruptError(ArtifactError):
    """Damaged, truncated or not an artifact at all: recompile it.

    Where a table of the body is wrong, `pointer` names it (`/index/group_tokens`, a JSON
    pointer into the artifact body) and `expected` / `found` say what the loader wanted
    and what the artifact holds.
    """

    def __init__(
        self,
        message: str,
        source: str | None = None,
        *,
        pointer: str | None = None,
        expected: str | None = None,
        found: str | None = None,
    ) -> None:
        self.pointer = pointer
        self.expected = expected
        self.found = found
        text = f"{message} at {pointer}" if pointer else message
        if expected is not None or found is not None:
            text = f"{text}: expected {expected}, found {found}"
        super().__init__(text, source)


class ArtifactVersionError(ArtifactError):
    """Written in an artifact format this version does not read: a newer one (upgrade),
    or an older one (recompile)."""


class VocabularyMismatchError(ArtifactError):
    """Compiled for another tokenizer: `expected` and `found` are fingerprints."""

    def __init__(self, message: str, *, expected: str, found: str, source: str | None = None):
        self.expected = expected
        self.found = found
        super().__init__(f"{message}: expected {expected[:16]}, found {found[:16]}", source)


class StoreError(FsmcompileError):
    """A cache tier failed."""


class StoreUnavailableError(StoreError):
    """The store cannot be reached (Redis down, bad URL, auth failure)."""


# Attributes that carry an error's position or subject, in the order documents list them.
_POSITION_ATTRS = (
    "pointer",
    "keyword",
    "pos",
    "line",
    "column",
    "byte_offset",
    "limit",
    "source",
    "features",
)


def error_document(exc: BaseException) -> dict[str, Any]:
    """The `{"type", "message", ...position}` object scripts read instead of prose.

    Position attributes (`pointer`, `pos`, `line`, `byte_offset`, `source`, ...) are
    copied when set. Surrogate code points in the message (a spec may hold them) are
    written as `\\udXXX` escapes, so the document always encodes as UTF-8. Plain data, so
    it crosses process boundaries where an exception with keyword arguments would not
    unpickle.
    """
    message = str(exc).encode("utf-8", "backslashreplace").decode("utf-8")
    doc: dict[str, Any] = {"type": type(exc).__name__, "message": message}
    for attr in _POSITION_ATTRS:
        value = getattr(exc, attr, None)
        if value is not None and value != []:
            doc[attr] = value
    return doc
