"""Spec files: a file's kind from its suffix, and its bytes as spec text.

`fsmcompile compile` and the warmer read specs through here, so a file that is not UTF-8
fails the same way (`SpecEncodingError` with the offset of its first bad byte) and a
regex file loses the same trailing newline whichever reads it: the two must compute the
same cache key for the same file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fsmcompile.errors import SpecEncodingError, SpecPathError
from fsmcompile.frontend.identity import Kind

__all__ = ["KIND_BY_SUFFIX", "decode_spec", "kind_of_file", "read_spec_file", "spec_from_text"]

KIND_BY_SUFFIX: dict[str, Kind] = {
    ".json": "json",
    ".lark": "lark",
    ".regex": "regex",
    ".re": "regex",
    ".txt": "regex",
}


def kind_of_file(path: Path, kind: Kind | None = None) -> Kind:
    """`kind` when given, else the kind `path`'s suffix names.

    Raises:
        SpecPathError: no kind given and the suffix is not one of `KIND_BY_SUFFIX`.
    """
    found = kind or KIND_BY_SUFFIX.get(path.suffix.lower())
    if found is None:
        raise SpecPathError(f"cannot tell the kind of {path}; pass --kind", str(path))
    return found


def decode_spec(data: bytes, source: str) -> str:
    """A spec file's bytes as text.

    Raises:
        SpecEncodingError: the bytes are not UTF-8; `byte_offset` is the first bad one.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SpecEncodingError(
            f"spec is not UTF-8 text ({exc.reason}, line {line})",
            byte_offset=exc.start,
            source=source,
        ) from exc


def spec_from_text(kind: Kind, text: str) -> Any:
    """The spec a file's text holds: a regex file's trailing newlines are not part of it
    (editors add one); schemas and grammars are passed on whole."""
    return text.rstrip("\n") if kind == "regex" else text


def read_spec_file(path: Path, kind: Kind) -> Any:
    """Read the spec of `kind` in `path` (`decode_spec`, then `spec_from_text`).

    Raises:
        OSError: the file cannot be read.
        SpecEncodingError: it is not UTF-8.
    """
    return spec_from_text(kind, decode_spec(path.read_bytes(), str(path)))
