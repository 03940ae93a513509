"""Reading artifact files: regular files only, under a size cap; clear errors otherwise.

`fsmcompile inspect /dev/zero` used to grow memory without end, a FIFO blocked the reader,
a missing file was reported as corrupt, and `inspect` on a body missing fields printed a
traceback. The CLI cases run the console script in-process.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from artifact_mutations import artifact_bytes, body_of, edit_array, reframe
from support import DATA, load_vocabulary

from fsmcompile import artifact
from fsmcompile.artifact.files import MAX_ARTIFACT_BYTES_ENV
from fsmcompile.cli.main import main
from fsmcompile.errors import ArtifactCorruptError, ArtifactError, ArtifactNotFoundError

TOKENIZER = str(DATA / "gpt2" / "tokenizer.json.gz")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_read_artifact_file_returns_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "a.fsm"
    path.write_bytes(artifact_bytes("regex"))
    assert artifact.read_artifact_file(path) == artifact_bytes("regex")
    assert artifact.read_artifact_file(str(path), max_bytes=path.stat().st_size)


def test_read_artifact_file_missing_is_not_found_not_corrupt(tmp_path: Path) -> None:
    with pytest.raises(ArtifactNotFoundError, match="no artifact file") as exc:
        artifact.read_artifact_file(tmp_path / "nope.fsm")
    assert isinstance(exc.value, FileNotFoundError) and exc.value.errno == 2
    assert not isinstance(exc.value, ArtifactCorruptError)
    assert exc.value.source == str(tmp_path / "nope.fsm")


@pytest.mark.parametrize("kind", ["directory", "FIFO", "character device", "socket"])
def test_read_artifact_file_refuses_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "thing"
    listener = None
    if kind == "directory":
        path.mkdir()
    elif kind == "FIFO":
        os.mkfifo(path)  # opening it for reading used to block forever
    elif kind == "character device":
        path = Path("/dev/zero")  # reading it used to grow memory without end
    else:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(path))
    try:
        with pytest.raises(ArtifactError) as exc:
            artifact.read_artifact_file(path)
    finally:
        if listener is not None:
            listener.close()
    assert not isinstance(exc.value, ArtifactCorruptError)
    assert exc.value.source == str(path)
    if kind != "socket":  # a socket cannot even be opened
        assert f"not a regular file (a {kind})" in str(exc.value)


def test_read_artifact_file_size_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a.fsm"
    path.write_bytes(artifact_bytes("regex"))
    size = path.stat().st_size
    with pytest.raises(ArtifactError, match=f"over the {size - 1}-byte limit"):
        artifact.read_artifact_file(path, max_bytes=size - 1)
    monkeypatch.setenv(MAX_ARTIFACT_BYTES_ENV, str(size - 1))
    with pytest.raises(ArtifactError, match=MAX_ARTIFACT_BYTES_ENV):
        artifact.load(path, load_vocabulary("gpt2"))


def test_cli_inspect_of_a_fifo_and_dev_zero_is_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        code, out, err = run(capsys, "inspect", path)
        assert code == 1 and out == ""
        assert err.startswith("error: not a regular file")


def test_cli_inspect_missing_file_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--json", "inspect", "/nonexistent/x.fsm")
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False
    assert doc["error"]["type"] == "ArtifactNotFoundError"
    assert doc["error"]["source"] == "/nonexistent/x.fsm"


@pytest.mark.parametrize("missing", ["spec_hash", "masks", "dfa"])
def test_cli_inspect_artifact_missing_fields_is_an_error_document(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, missing: str
) -> None:
    doc = body_of("regex")
    del doc[missing]
    path = tmp_path / "partial.fsm"
    path.write_bytes(reframe(doc))
    code, out, err = run(capsys, "inspect", str(path))
    assert code == 1 and out == ""
    assert err.startswith("error: artifact lacks a field at /") and "Traceback" not in err
    code, out, _ = run(capsys, "--json", "inspect", str(path))
    error = json.loads(out)["error"]
    assert code == 1 and error["type"] == "ArtifactCorruptError"
    assert error["pointer"].startswith(f"/{missing}")


def test_cli_check_crafted_artifact_is_refused_not_a_crash(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A group token past the row used to write out of bounds on the first mask."""
    doc = body_of("lark")

    def put(tokens):  # type: ignore[no-untyped-def]
        tokens[0] = 1 << 30

    edit_array(doc, "/index/group_tokens", put)
    path = tmp_path / "crafted.fsm"
    path.write_bytes(reframe(doc))
    code, out, _ = run(capsys, "--json", "check", str(path), "1 + 2", "-t", TOKENIZER)
    error = json.loads(out)["error"]
    assert code == 1
    assert error["type"] == "ArtifactCorruptError" and error["pointer"] == "/index/group_tokens/0"


@pytest.mark.parametrize("value", ["1G", "nan", "-5x"])
@pytest.mark.parametrize("env", [MAX_ARTIFACT_BYTES_ENV, "FSMCOMPILE_MAX_DECODED_BYTES"])
def test_byte_limits_refuse_a_malformed_setting(
    env: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator's typo is an error naming the variable, never a silently lifted cap."""
    from fsmcompile.artifact.files import byte_limit

    monkeypatch.setenv(env, value)
    with pytest.raises(ValueError, match=f"{env}='{value}' is not a byte count"):
        byte_limit(env, 1 << 20)
    monkeypatch.setenv(env, "-1")
    assert byte_limit(env, 1 << 20) == 0  # a negative cap refuses everything
