"""Hostile spec files through the CLI: exit 1 and one `--json` error document with the
position as data, never a traceback."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from support import DATA

from fsmcompile.cli.main import main
from fsmcompile.frontend.json_schema.document import MAX_SCHEMA_DEPTH
from fsmcompile.frontend.regex.parser import MAX_GROUP_DEPTH

TOKENIZER = str(DATA / "gpt2" / "tokenizer.json.gz")


def failed(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    """Run `fsmcompile --json ARGV`; expects exit 1 and returns the error document."""
    code = main(["--json", *argv, "-t", TOKENIZER, "--no-cache"])
    out, err = capsys.readouterr()
    assert code == 1, (out, err)
    assert "Traceback" not in err
    doc = json.loads(out)
    assert doc["ok"] is False
    return doc["error"]


def test_cli_spec_file_not_utf8_reports_the_byte_offset(capsys, tmp_path: Path) -> None:
    spec = tmp_path / "bad.json"
    spec.write_bytes(b'{"type": "string",\n "const": "caf\xe9"}')
    error = failed(capsys, str(spec))
    assert error["type"] == "SpecEncodingError"
    assert error["byte_offset"] == 33 and error["source"] == str(spec)
    assert "line 2" in error["message"]


def test_cli_surrogate_in_schema_file_is_a_schema_error(capsys, tmp_path: Path) -> None:
    spec = tmp_path / "surrogate.json"
    spec.write_text('{"enum": ["a", "\\ud800"]}')
    error = failed(capsys, str(spec))
    assert error["type"] == "SchemaError" and error["pointer"] == "/enum/1"


def test_cli_surrogate_in_regex_is_a_regex_syntax_error(capsys) -> None:
    """Arguments that are not UTF-8 reach Python as surrogate escapes (PEP 383)."""
    error = failed(capsys, "--regex", "ab\udcff")
    assert error["type"] == "RegexSyntaxError" and error["pos"] == 2


@pytest.mark.parametrize(
    ("text", "pointer", "column"),
    [
        ('{"properties":{"a":' * 3_000 + "{}" + "}}" * 3_000, "/properties/a", 951),
        ("[" * 100_000 + "]" * 100_000, "/0", MAX_SCHEMA_DEPTH + 1),
    ],
    ids=["properties", "array"],
)
def test_cli_deep_schema_file_is_a_schema_error_with_pointer(
    capsys, tmp_path: Path, text: str, pointer: str, column: int
) -> None:
    spec = tmp_path / "deep.json"
    spec.write_text(text)
    error = failed(capsys, str(spec))
    assert error["type"] == "SchemaError" and "deeper than" in error["message"]
    segments = MAX_SCHEMA_DEPTH // pointer.count("/")
    assert error["pointer"] == pointer * segments
    assert (error["line"], error["column"]) == (1, column)


def test_cli_deep_regex_is_a_regex_syntax_error_at_the_crossing(capsys) -> None:
    error = failed(capsys, "--regex", "(" * 5_000 + "a" + ")" * 5_000)
    assert error["type"] == "RegexSyntaxError" and error["pos"] == MAX_GROUP_DEPTH


def test_cli_infinite_bound_is_a_schema_error(capsys, tmp_path: Path) -> None:
    spec = tmp_path / "huge.json"
    spec.write_text('{"type": "number", "maximum": 1e400}')
    error = failed(capsys, str(spec))
    assert error["type"] == "SchemaError" and error["pointer"] == "/maximum"


def test_cli_lark_import_reads_only_named_folders(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "words.lark").write_text('WORD: "word"\n')
    spec = tmp_path / "g.lark"
    spec.write_text("start: WORD\n%import words.WORD\n")
    error = failed(capsys, str(spec))
    assert error["type"] == "GrammarError" and (error["line"], error["column"]) == (2, 9)
    code = main(["--json", str(spec), "-t", TOKENIZER, "--no-cache", "--import-path", "lib"])
    assert code == 0 and json.loads(capsys.readouterr().out)["ok"] is True


def test_cli_spec_from_stdin_is_decoded_like_a_file(capsys, monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ab\xffc")))
    error = failed(capsys, "-", "--kind", "regex")
    assert error["type"] == "SpecEncodingError" and error["byte_offset"] == 2
    assert error["source"] == "<stdin>"


@pytest.mark.parametrize("as_json", [True, False])
def test_cli_error_holding_a_surrogate_prints_on_a_strict_utf8_stream(as_json: bool) -> None:
    """A surrogate key in a pointer cannot be written as UTF-8; it is escaped instead."""
    from fsmcompile.cli.output import Console
    from fsmcompile.errors import SchemaError

    out, err = io.BytesIO(), io.BytesIO()
    console = Console(
        as_json=as_json,
        out=io.TextIOWrapper(out, encoding="utf-8"),
        err=io.TextIOWrapper(err, encoding="utf-8"),
    )
    assert console.fail(SchemaError("bad key", "/properties/\ud800")) == 1
    console.out.flush()
    console.err.flush()
    if as_json:
        assert json.loads(out.getvalue())["error"]["pointer"] == "/properties/\ud800"
    else:
        assert err.getvalue() == b"error: bad key at /properties/\\ud800\n"
