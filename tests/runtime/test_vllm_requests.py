"""What a vLLM request may ask for: spec spellings, API-boundary checks, `index` sources.

Everything here runs without vLLM: `validate_params` is what the API server calls on each
request (a ValueError becomes HTTP 400), and `resolve_index` is what the engine calls.
"""

from __future__ import annotations

import os
import threading
from types import SimpleNamespace

import pytest

import fsmcompile
from fsmcompile.runtime.vllm import (
    SUPPORTED_VLLM_VERSIONS,
    FSMLogitsProcessor,
    IndexReferenceError,
    RequestSpec,
    UnsupportedVllmError,
    check_vllm_version,
    register_index,
)
from fsmcompile.runtime.vllm.sources import resolve_index


def params(**extra_args):
    return SimpleNamespace(extra_args=extra_args)


def spec_of(**extra_args) -> RequestSpec | None:
    return RequestSpec.from_params(params(**extra_args))


def test_flat_keys_read_like_the_nested_entry():
    assert spec_of(fsmcompile_regex="[0-9]+") == RequestSpec("regex", "[0-9]+")
    assert spec_of(fsmcompile_grammar="start: /a/", fsmcompile_start_after="</think>") == (
        RequestSpec("grammar", "start: /a/", "</think>")
    )
    assert spec_of(fsmcompile_index="person") == RequestSpec("index", "person")
    flat = spec_of(fsmcompile_json_schema='{"type": "object", "required": ["b", "a"]}')
    nested = spec_of(fsmcompile={"json_schema": {"required": ["b", "a"], "type": "object"}})
    assert flat == nested and flat is not None
    assert flat.text == '{"required":["b","a"],"type":"object"}'
    as_text = spec_of(fsmcompile='{"regex": "a+", "start_after": "go"}')
    assert as_text == RequestSpec("regex", "a+", "go")
    assert spec_of(other_key="x") is None
    assert RequestSpec.from_params(SimpleNamespace(extra_args=None)) is None


@pytest.mark.parametrize(
    ("extra_args", "message"),
    [
        ({"fsmcompile_regex": "a", "fsmcompile_grammar": "b"}, "exactly one of"),
        ({"fsmcompile_start_after": "x"}, "exactly one of"),
        ({"fsmcompile_regexp": "a"}, r"unknown keys \['fsmcompile_regexp'\]"),
        ({"fsmcompile": {"regex": "a"}, "fsmcompile_regex": "a"}, "not both"),
        ({"fsmcompile_json_schema": '{"type": "object",}'}, "invalid JSON at line 1 column 19"),
        ({"fsmcompile_json_schema": "[1, 2]"}, "expected an object, found JSON list"),
        ({"fsmcompile_json_schema": 3}, "expected a string, found int"),
        ({"fsmcompile": "{not json"}, "invalid JSON at line 1 column 2"),
        ({"fsmcompile": 5}, "must be an object"),
        ({"fsmcompile_regex": ["a"]}, "expected a string, found list"),
        ({"fsmcompile_regex": "a", "fsmcompile_start_after": ""}, "non-empty string"),
        ({"fsmcompile_json_schema": '{"a": NaN}'}, "not JSON-serializable"),
        ({"fsmcompile_json_schema": "[" * 100_000}, "nested too deeply|invalid JSON"),
    ],
)
def test_malformed_specs_are_rejected_at_the_boundary(extra_args, message):
    with pytest.raises(fsmcompile.SpecError, match=message):
        FSMLogitsProcessor.validate_params(SimpleNamespace(extra_args=extra_args))


def test_regex_syntax_error_is_reported_with_its_position():
    with pytest.raises(fsmcompile.RegexSyntaxError) as caught:
        FSMLogitsProcessor.validate_params(params(fsmcompile_regex="[0-9]{3}(ab"))
    assert caught.value.pos == 8
    assert isinstance(caught.value, ValueError)  # what vLLM turns into HTTP 400
    FSMLogitsProcessor.validate_params(params(fsmcompile_regex="x" * 5000 + "("))  # engine's job


def test_index_paths_need_a_configured_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("FSMCOMPILE_INDEX_DIRS", raising=False)
    with pytest.raises(IndexReferenceError, match="index paths are disabled"):
        FSMLogitsProcessor.validate_params(params(fsmcompile_index=str(tmp_path / "a.fsm")))
    FSMLogitsProcessor.validate_params(params(fsmcompile_index="some-key"))  # keys pass


@pytest.fixture
def allowed(tmp_path, monkeypatch):
    """A directory allowed by FSMCOMPILE_INDEX_DIRS, beside one that is not."""
    inside = tmp_path / "indexes"
    outside = tmp_path / "private"
    inside.mkdir()
    outside.mkdir()
    monkeypatch.setenv("FSMCOMPILE_INDEX_DIRS", f"{tmp_path / 'elsewhere'}:{inside}")
    return SimpleNamespace(inside=inside, outside=outside)


@pytest.fixture(scope="module")
def saved_index(gpt2):
    return fsmcompile.compile_regex("[0-9]{3}", gpt2, cache=False)


def test_index_file_inside_an_allowed_dir_loads(allowed, gpt2, saved_index):
    path = allowed.inside / "digits.fsm"
    fsmcompile.save(saved_index, path)
    FSMLogitsProcessor.validate_params(params(fsmcompile_index=str(path)))
    loaded = resolve_index(str(path), gpt2)
    assert loaded.vocabulary.fingerprint == gpt2.fingerprint
    assert loaded.num_states == saved_index.num_states


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink", "dir_itself", "prefix"])
def test_index_paths_escaping_the_allowed_dirs_are_refused(allowed, gpt2, saved_index, how):
    secret = allowed.outside / "secret.fsm"
    fsmcompile.save(saved_index, secret)
    if how == "absolute":
        reference = str(secret)
    elif how == "dotdot":
        reference = f"{allowed.inside}/../private/secret.fsm"
    elif how == "symlink":
        link = allowed.inside / "link.fsm"
        link.symlink_to(secret)
        reference = str(link)
    elif how == "dir_itself":
        reference = str(allowed.inside) + "/"
    else:  # a sibling whose name merely starts with the allowed dir's name
        sibling = allowed.inside.parent / (allowed.inside.name + "-evil")
        sibling.mkdir()
        fsmcompile.save(saved_index, sibling / "a.fsm")
        reference = str(sibling / "a.fsm")
    with pytest.raises(IndexReferenceError, match="outside the directories"):
        FSMLogitsProcessor.validate_params(params(fsmcompile_index=reference))
    with pytest.raises(IndexReferenceError, match="outside the directories"):
        resolve_index(reference, gpt2)


def test_system_files_are_refused_without_being_opened(allowed, gpt2):
    for reference in ("/dev/zero", "/etc/passwd", "/proc/self/environ"):
        with pytest.raises(IndexReferenceError, match="outside the directories"):
            resolve_index(reference, gpt2)


def test_fifo_inside_an_allowed_dir_is_refused_without_blocking(allowed, gpt2):
    fifo = allowed.inside / "pipe.fsm"
    os.mkfifo(fifo)
    result: list[BaseException] = []
    worker = threading.Thread(
        target=lambda: result.append(_raises(resolve_index, str(fifo), gpt2)), daemon=True
    )
    worker.start()
    worker.join(timeout=5)
    assert not worker.is_alive(), "resolving a FIFO blocked"
    assert isinstance(result[0], IndexReferenceError)
    assert "not a regular file" in str(result[0])


def test_index_files_over_the_size_cap_are_refused(allowed, gpt2, saved_index, monkeypatch):
    path = allowed.inside / "digits.fsm"
    size = fsmcompile.save(saved_index, path)
    monkeypatch.setenv("FSMCOMPILE_INDEX_MAX_BYTES", str(size - 1))
    with pytest.raises(IndexReferenceError, match=f"is {size} bytes, over the {size - 1}-byte cap"):
        resolve_index(str(path), gpt2)
    monkeypatch.setenv("FSMCOMPILE_INDEX_MAX_BYTES", str(size))
    assert resolve_index(str(path), gpt2).num_states == saved_index.num_states


def test_missing_file_and_unknown_keys_are_per_request_errors(allowed, gpt2):
    with pytest.raises(IndexReferenceError, match="No such file"):
        resolve_index(str(allowed.inside / "absent.fsm"), gpt2)
    with pytest.raises(IndexReferenceError, match="no registered index or cache entry"):
        resolve_index("no-such-key", gpt2)
    with pytest.raises(IndexReferenceError, match="no cache entry"):
        resolve_index("regex-v1-abcdef012345-" + "0" * 64, gpt2)


def test_cache_keys_and_registered_keys_resolve(gpt2):
    result = fsmcompile.compile_spec("regex", "[a-c]{2}", gpt2)  # into the default cache
    from_cache = resolve_index(result.key, gpt2)
    assert from_cache.num_states == result.index.num_states
    register_index("digits/v1", result.index)  # a key may contain a slash
    FSMLogitsProcessor.validate_params(params(fsmcompile_index="digits/v1"))
    assert resolve_index("digits/v1", gpt2) is result.index


def test_registered_index_for_another_tokenizer_is_refused(gpt2, phi3):
    register_index("phi3-digits", fsmcompile.compile_regex("[0-9]", phi3, cache=False))
    with pytest.raises(fsmcompile.VocabularyMismatchError):
        resolve_index("phi3-digits", gpt2)


def test_vllm_version_check_names_the_supported_releases():
    for good in ("0.32.0", "0.32.1+cpu", "0.33.0", "0.33.2rc1"):
        check_vllm_version(good)
    for bad in ("0.31.2", "0.34.0", "1.0.0", "unknown", "0.3.2"):
        with pytest.raises(UnsupportedVllmError, match=r"supports vLLM 0\.32\.x, 0\.33\.x"):
            check_vllm_version(bad)
    assert SUPPORTED_VLLM_VERSIONS == ("0.32", "0.33")


def _raises(fn, *args) -> BaseException | None:
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - handed back to the test thread
        return exc
    return None
