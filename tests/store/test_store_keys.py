"""Cache keys: canonical JSON makes equal specs equal keys, every input changes the key."""

from __future__ import annotations

import re

import pytest

from fsmcompile import Vocabulary, artifact
from fsmcompile.compiler import Kind, compile_spec, index_cache_key
from fsmcompile.errors import ArtifactCorruptError
from fsmcompile.store import cache_key
from fsmcompile.store.entry_check import check_entry
from fsmcompile.store.keys import entry_digest, parse_key

FP = "f" * 64


def key(**overrides: object) -> str:
    args: dict[str, object] = {
        "vocab_fingerprint": FP,
        "kind": "json_schema",
        "spec": {"type": "object", "properties": {"a": {"type": "string"}, "b": {}}},
        "options": {"whitespace": "compact", "max_states": 1000},
        "format_version": 1,
    }
    args.update(overrides)
    return cache_key(**args)  # type: ignore[arg-type]


def test_cache_key_reordered_schema_same_key() -> None:
    reordered = {"properties": {"b": {}, "a": {"type": "string"}}, "type": "object"}
    text = '{ "properties": {"b": {}, "a": {"type": "string"}},\n "type": "object" }'
    assert key() == key(spec=reordered) == key(spec=text)


def test_cache_key_reordered_options_same_key() -> None:
    assert key() == key(options={"max_states": 1000, "whitespace": "compact"})


@pytest.mark.parametrize(
    "change",
    [
        {"vocab_fingerprint": "e" * 64},
        {"kind": "lark"},
        {"spec": {"type": "object"}},
        {"options": {"whitespace": "loose", "max_states": 1000}},
        {"format_version": 2},
    ],
)
def test_cache_key_any_input_changes_key(change: dict[str, object]) -> None:
    assert key(**change) != key()


def test_cache_key_regex_text_is_verbatim() -> None:
    a = key(kind="regex", spec="[a-z]+", options={})
    b = key(kind="regex", spec="[a-z]+ ", options={})
    assert a != b


def test_cache_key_is_readable_prefix_and_sha256() -> None:
    assert re.fullmatch(r"json_schema-v1-f{12}-[0-9a-f]{64}", key())


def test_cache_key_unserializable_option_raises_type_error() -> None:
    with pytest.raises(TypeError):
        key(options={"s": {1, 2}})


RECURSIVE_SCHEMA = {
    "type": "object",
    "properties": {"next": {"$ref": "#"}},
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("kind", "spec"),
    [
        ("regex", "(yes|no)"),
        ("json", {"type": "object", "properties": {"a": {"type": "integer"}}}),
        ("json", RECURSIVE_SCHEMA),  # compiled as a grammar
        ("lark", 'start: "x" | "y" start'),
    ],
)
def test_cache_key_digest_is_made_of_the_artifact_header(
    kind: Kind, spec: object, gpt2: Vocabulary
) -> None:
    """What lets a reader check an entry against its key: the two must never drift."""
    index = compile_spec(kind, spec, gpt2, cache=False).index
    key = index_cache_key(kind, spec, gpt2)
    parts = parse_key(key)
    assert parts is not None
    assert parts.digest == entry_digest(gpt2.fingerprint, index.spec_hash)
    check_entry(key, artifact.to_bytes(index))  # and the check passes on a fresh compile
    # Other options name another entry; a regex takes none, so another pattern stands in.
    other = (
        index_cache_key(kind, f"{spec}?", gpt2)
        if kind == "regex"
        else index_cache_key(
            kind, spec, gpt2, {"json": {"nesting_limit": 2}}.get(kind, {"strict": True})
        )
    )
    with pytest.raises(ArtifactCorruptError, match="another spec"):
        check_entry(other, artifact.to_bytes(index))


def test_parse_key_refuses_other_names() -> None:
    assert parse_key(key()) is not None
    for name in ("k", key() + "x", key().replace("-v1-", "-v-"), "a-v1-b-" + "g" * 64):
        assert parse_key(name) is None
