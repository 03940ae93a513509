"""`%import` reads only the bundled grammars, lark's own and folders the caller names."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsmcompile import compile_lark
from fsmcompile.errors import GrammarError, SpecError


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding `secret.lark`, which no import may read."""
    (tmp_path / "secret.lark").write_text('SECRET: "hunter2"\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("statement", ["%import secret.SECRET", "%import .secret.SECRET"])
def test_import_from_the_working_directory_is_a_grammar_error(gpt2, elsewhere, statement):
    grammar = f"start: SECRET\n{statement}\n"
    with pytest.raises(GrammarError, match="%import .?secret") as info:
        compile_lark(grammar, gpt2, cache=False)
    assert (info.value.line, info.value.column) == (2, len("%import ") + 1)


def test_import_of_lark_common_and_bundled_grammars_still_works(gpt2, elsewhere) -> None:
    common = compile_lark("start: NUMBER\n%import common.NUMBER\n", gpt2, cache=False)
    bundled = compile_lark("%import json.value\nstart: value\n", gpt2, cache=False)
    assert common.num_states > 1 and bundled.num_states > 1


def test_import_from_a_folder_the_caller_names_works(gpt2, elsewhere) -> None:
    lib = elsewhere / "lib"
    lib.mkdir()
    (lib / "words.lark").write_text('%import .letters.A\nWORD: A "b"\n')
    (lib / "letters.lark").write_text('A: "a"\n')
    grammar = "%import words.WORD\nstart: WORD\n"
    index = compile_lark(grammar, gpt2, cache=False, import_paths=[str(lib)])
    assert index.num_states > 1
    with pytest.raises(GrammarError, match="%import words"):
        compile_lark(grammar, gpt2, cache=False)


@pytest.mark.parametrize("paths", ["lib", ["missing"], [3]])
def test_import_paths_that_are_not_folders_are_refused(gpt2, elsewhere, paths) -> None:
    with pytest.raises(SpecError, match="import_paths"):
        compile_lark('start: "a"\n', gpt2, cache=False, import_paths=paths)


@pytest.mark.parametrize(
    ("grammar", "line", "column", "message"),
    [
        ('start: "a\x00"\n', 1, 10, "NUL character"),
        ("start: " + "(" * 3_000 + '"a"' + ")" * 3_000 + "\n", 1, 3_007, "nests too deeply"),
        ('start: "\ud800"\n', 1, 9, "surrogate code point"),
    ],
    ids=["nul", "deep", "surrogate"],
)
def test_hostile_grammar_text_has_a_position(gpt2, grammar, line, column, message) -> None:
    with pytest.raises(GrammarError, match=message) as info:
        compile_lark(grammar, gpt2, cache=False)
    assert (info.value.line, info.value.column) == (line, column)
