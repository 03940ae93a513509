"""Where a grammar's `%import` may read other grammars from, and nowhere else.

Grammars come from clients. Left to itself, lark resolves `%import .name` against the
folder of the running script (or the working directory) and, when a name is found
nowhere, opens it relative to the working directory to raise its error: a client could
read any `.lark` file next to the server, or learn which files exist there. Here an
import reads only from the folders the caller names (`import_paths`), the grammars
bundled with fsmcompile (`fsmcompile.grammars`) and lark's own (`%import common.NUMBER`),
in that order; anything else is an `ImportRefused`, which loading turns into a
`GrammarError` at the `%import` line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fsmcompile.errors import SpecError

SOURCE_PATH = "<grammar>"
"""The name lark is given for a grammar passed as text: it has no folder, so a relative
`%import .name` in it asks the loader with an empty base path, which is refused."""

Loader = Callable[[Any, str], tuple[Any, str]]


class ImportRefused(Exception):
    """An `%import` that names no grammar in the allowed folders; `dotted` is its name."""

    def __init__(self, dotted: str, reason: str) -> None:
        self.dotted = dotted
        self.reason = reason
        super().__init__(f"%import {dotted}: {reason}")


def bundled_grammar_dir() -> str:
    """The folder of the grammars shipped as `fsmcompile.grammars`."""
    import fsmcompile.grammars

    return str(Path(fsmcompile.grammars.__file__).resolve().parent)


def checked_import_paths(value: Any) -> tuple[str, ...]:
    """The `import_paths` option as a tuple of existing folders.

    Raises:
        SpecError: not a list of strings, or one of them is not a folder.
    """
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise SpecError(f"lark option import_paths: expected a list of folders, found {value!r}")
    for folder in value:
        if not isinstance(folder, str):
            raise SpecError(f"lark option import_paths: {folder!r} is not a folder name")
        if not os.path.isdir(folder):
            raise SpecError(f"lark option import_paths: {folder!r} is not a folder")
    return tuple(value)


def _dotted(grammar_path: str) -> str:
    return grammar_path.removesuffix(".lark").replace(os.sep, ".")


def _read(path: str, dotted: str) -> str:
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportRefused(dotted, f"{path} is not UTF-8 text (byte {exc.start})") from exc


def _inside(folder: str, roots: Sequence[str]) -> bool:
    real = os.path.realpath(folder)
    return any(real == root or real.startswith(root + os.sep) for root in roots)


def import_loader(import_paths: Sequence[str]) -> Loader:
    """lark's import hook (an `import_paths` entry), confined to the allowed folders.

    lark tries its hooks in order and moves on only on `OSError`; this one raises
    `ImportRefused` instead, so lark never reaches its own fallbacks (the script's
    folder, the working directory).
    """
    from lark.load_grammar import PackageResource, stdlib_loader

    folders = (*import_paths, bundled_grammar_dir())
    roots = tuple(os.path.realpath(folder) for folder in folders)

    def load(base_path: Any, grammar_path: str) -> tuple[Any, str]:
        dotted = _dotted(grammar_path)
        if isinstance(base_path, PackageResource):  # inside one of lark's own grammars
            return stdlib_loader(base_path, grammar_path)
        if base_path is not None:
            if not base_path or not _inside(base_path, roots):
                raise ImportRefused(
                    "." + dotted,
                    "a grammar given as text has no folder for a relative import; write "
                    f"%import {dotted}.NAME and name its folder in import_paths",
                )
            candidate = os.path.join(base_path, grammar_path)
            if os.path.isfile(candidate):
                return candidate, _read(candidate, dotted)
            raise ImportRefused("." + dotted, f"no {grammar_path} beside the importing grammar")
        for folder in folders:
            candidate = os.path.join(folder, grammar_path)
            if os.path.isfile(candidate):
                return candidate, _read(candidate, dotted)
        try:
            return stdlib_loader(None, grammar_path)
        except OSError:
            pass
        named = ", ".join(repr(f) for f in import_paths) or "none"
        raise ImportRefused(
            dotted,
            f"no grammar {grammar_path} among fsmcompile's bundled grammars, lark's common "
            f"grammars or the import paths given ({named}); name its folder with "
            "import_paths=[...] (CLI: --import-path DIR)",
        )

    return load


def locate_import(text: str, dotted: str) -> tuple[int, int] | None:
    """1-based line and column of the name in the `%import` statement that names `dotted`."""
    found = re.search(rf"^[ \t]*%import[ \t]+({re.escape(dotted)})(?![\w])", text, re.MULTILINE)
    if found is None:
        return None
    offset = found.start(1)
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1
