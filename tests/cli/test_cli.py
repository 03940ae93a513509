"""The `fsmcompile` console script, run in-process: exit codes, stdout and stderr apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import DATA

from fsmcompile import artifact
from fsmcompile.cli.main import main
from fsmcompile.store import DiskStore

TOKENIZER = str(DATA / "gpt2" / "tokenizer.json.gz")
EXAMPLES = Path(__file__).resolve().parents[2] / "grammars" / "examples"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_compile_regex_file_prints_summary_and_writes_artifact(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "date.fsm"
    code, out, err = run(
        capsys, str(EXAMPLES / "iso_date.regex"), "-t", TOKENIZER, "-o", str(target), "--no-cache"
    )
    assert code == 0, err
    assert "states:" in out and "masks:" in out
    assert any(line.startswith("cache: miss (compiled in") for line in out.splitlines())
    assert target.stat().st_size > 0


def test_cli_second_compile_is_a_cache_hit(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--regex", "(yes|no|perhaps)!", "-t", TOKENIZER)
    first = run(capsys, *args)
    second = run(capsys, *args)
    assert first[0] == second[0] == 0
    assert "cache: miss" in first[1]
    assert any(line.startswith("cache: hit (") for line in second[1].splitlines())


def test_cli_json_output_is_one_document(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--json", "--regex", "[0-9]{2}", "-t", TOKENIZER, "--no-cache")
    doc = json.loads(out)
    assert code == 0 and doc["ok"] is True and doc["kind"] == "regex"
    assert doc["states"] >= 3 and doc["cache"]["hit"] is False


def test_cli_bad_regex_exit_1_with_position(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--regex", "ab(c", "-t", TOKENIZER, "--no-cache")
    assert code == 1 and out == ""
    assert err.startswith("error:") and "position 2" in err
    code, out, _ = run(capsys, "--json", "--regex", "ab(c", "-t", TOKENIZER, "--no-cache")
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False
    assert doc["error"]["type"] == "RegexSyntaxError" and doc["error"]["pos"] == 2


def test_cli_budget_exceeded_is_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "--regex", "[a-z]{0,3000}", "-t", TOKENIZER, "--max-states", "100", "--no-cache"
    )
    assert code == 1 and "max-states" in err.replace("max_states", "max-states")


def test_cli_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys)[0] == 2
    assert run(capsys, "--regex", "a")[0] == 2  # no --tokenizer
    assert run(capsys, "--regex", "a", "-t", TOKENIZER, "--kind", "xml")[0] == 2


def test_cli_missing_tokenizer_is_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "--regex", "a", "-t", str(tmp_path / "none.json"))
    assert code == 1 and "not found" in err


def test_cli_inspect_and_check_contract(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "d.fsm"
    assert run(capsys, str(EXAMPLES / "iso_date.regex"), "-t", TOKENIZER, "-o", str(target))[0] == 0
    code, out, _ = run(capsys, "inspect", str(target))
    assert code == 0 and "kind: regex" in out and "states:" in out
    code, out, _ = run(capsys, "check", str(target), "2024-02-29", "-t", TOKENIZER)
    assert code == 0 and out.startswith("accepted")
    code, out, _ = run(
        capsys, "check", str(target), "2024-02-29", "2024-13-01", "2024-02", "-t", TOKENIZER
    )
    lines = out.splitlines()
    assert code == 1 and len(lines) == 3
    assert lines[0].startswith("accepted")
    assert lines[1].startswith("rejected") and "'13'" in lines[1] and "allowed" in lines[1]
    assert lines[2].startswith("rejected") and "EOS" in lines[2]


def test_cli_inspect_damaged_artifact_is_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "d.fsm"
    assert run(capsys, "--regex", "abc", "-t", TOKENIZER, "-o", str(target))[0] == 0
    target.write_bytes(target.read_bytes()[:-5])
    code, _, err = run(capsys, "inspect", str(target))
    assert code == 1 and "checksum" in err


def test_cli_lark_grammar_compile_inspect_check(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    grammar = Path(__file__).resolve().parents[2] / "grammars" / "json.lark"
    target = tmp_path / "json.fsm"
    code, out, err = run(capsys, str(grammar), "-t", TOKENIZER, "-o", str(target), "--no-cache")
    assert code == 0, err
    assert out.startswith("compiled lark")
    code, out, _ = run(capsys, "inspect", str(target))
    assert code == 0 and "kind: lark" in out and "parser_states:" in out
    code, out, _ = run(
        capsys, "check", str(target), '{"a": [1, 2.5e3, "x\\u00e9"]}', '{"a": }', "-t", TOKENIZER
    )
    lines = out.splitlines()
    assert code == 1 and lines[0].startswith("accepted") and lines[1].startswith("rejected")


def test_cli_artifact_for_other_tokenizer_is_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "d.fsm"
    assert run(capsys, "--regex", "abc", "-t", TOKENIZER, "-o", str(target))[0] == 0
    other = str(DATA / "phi3" / "tokenizer.json.gz")
    code, _, err = run(capsys, "check", str(target), "abc", "-t", other)
    assert code == 1 and "another tokenizer" in err


def test_cli_compile_serializes_once_and_writes_what_it_reports(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    to_bytes = artifact.to_bytes

    def counting_to_bytes(index: Any) -> bytes:
        data = to_bytes(index)
        calls.append(len(data))
        return data

    monkeypatch.setattr(artifact, "to_bytes", counting_to_bytes)
    target = tmp_path / "d.fsm"
    argv = ["--json", "--regex", "(on|off)", "-t", TOKENIZER, "-o", str(target), "--no-cache"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert calls == [target.stat().st_size] == [json.loads(out)["artifact_bytes"]]

    # Through the cache: the miss serializes once to store the entry and writes those
    # bytes; the hit serializes nothing and writes what the cache returned.
    written = target.read_bytes()
    cached = ["--json", "--regex", "(on|off)", "-t", TOKENIZER, "-o", str(target)]
    cached += ["--cache-dir", str(tmp_path / "cache")]
    for expected_calls in ([len(written)], []):
        calls.clear()
        target.unlink()
        code, out, err = run(capsys, *cached)
        assert code == 0, err
        assert calls == expected_calls
        assert target.read_bytes() == written


def test_cli_cache_dir_option_places_the_disk_tier(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ("--regex", "(left|right)", "-t", TOKENIZER, "--cache-dir", str(tmp_path / "c"))
    assert run(capsys, *argv)[0] == 0
    keys = list(DiskStore(tmp_path / "c").keys())
    assert len(keys) == 1 and keys[0].startswith("regex-")


@pytest.mark.parametrize(
    ("flag", "schema", "text"),
    [
        ("--integer-fractions", {"type": "integer"}, "1.0"),
        ("--listed-escapes", {"enum": ["ab"]}, '"\\u0061b"'),
        ("--exponent-numbers", {"type": "number", "maximum": 500}, "1.5e2"),
        (
            "--any-order-max=2",
            {"properties": {"a": {}, "b": {}}, "additionalProperties": False},
            '{"b":1,"a":2}',
        ),
        ("--lenient-formats", {"type": "string", "format": "regex"}, '"a+"'),
    ],
)
def test_cli_json_option_flags_change_the_language_and_the_cache_key(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    flag: str,
    schema: dict[str, Any],
    text: str,
) -> None:
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps(schema))
    cache = ["--cache-dir", str(tmp_path / "cache")]
    default, relaxed = tmp_path / "default.fsm", tmp_path / "relaxed.fsm"
    code, _, err = run(capsys, str(spec), "-t", TOKENIZER, "-o", str(default), *cache)
    if flag == "--lenient-formats":
        # Off, `format: regex` is refused outright (strict mode).
        assert code == 1 and "regex" in err
    else:
        assert code == 0, err
        code, out, _ = run(capsys, "check", str(default), text, "-t", TOKENIZER)
        assert code == 1 and out.startswith("rejected")
    code, out, err = run(capsys, str(spec), "-t", TOKENIZER, "-o", str(relaxed), flag, *cache)
    assert code == 0, err
    assert "cache: miss" in out
    code, out, _ = run(capsys, "check", str(relaxed), text, "-t", TOKENIZER)
    assert code == 0 and out.startswith("accepted")
    entries = list(DiskStore(tmp_path / "cache").keys())
    assert len(entries) == (1 if flag == "--lenient-formats" else 2)
