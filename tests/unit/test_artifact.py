"""Artifact round trips and every way a stored artifact can be wrong."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from exactness import dfa_from_edges, tiny_vocabulary

from fsmcompile import artifact
from fsmcompile.errors import (
    ArtifactCorruptError,
    ArtifactNotFoundError,
    ArtifactVersionError,
    VocabularyMismatchError,
)
from fsmcompile.index.dfa.build import build_token_index
from fsmcompile.tables.token_index import TokenIndex
from fsmcompile.version import FORMAT_VERSION
from fsmcompile.vocabulary import Vocabulary


@pytest.fixture()
def index(gpt2: Vocabulary) -> TokenIndex:
    edges = {0: {b"a": 1, b"b": 0}, 1: {b"c": 2}, 2: {}}
    edges[0].update({bytes([d]): 0 for d in b"0123456789"})
    dfa = dfa_from_edges(edges, accepting={0, 2})
    return build_token_index(dfa, gpt2, kind="regex", spec_hash="abc")


def test_artifact_roundtrip_is_identical(index: TokenIndex, tmp_path: Path) -> None:
    path = tmp_path / "x.fsm"
    size = artifact.save(index, path)
    loaded = artifact.load(path, index.vocabulary)
    assert size == path.stat().st_size
    assert np.array_equal(loaded.masks, index.masks)
    assert np.array_equal(loaded.state_mask, index.state_mask)
    assert np.array_equal(loaded.dfa.transitions, index.dfa.transitions)
    assert artifact.to_bytes(loaded) == artifact.to_bytes(index)


def test_artifact_stores_sparse_masks_as_lists(index: TokenIndex) -> None:
    doc = artifact.read_header(artifact.to_bytes(index))
    kinds = np.frombuffer(doc["masks"]["kinds"]["data"], dtype=np.uint8)
    assert (kinds == 1).any()  # the mask after "a" allows only "c"-tokens: a short list
    small = artifact.to_bytes(index)
    assert len(small) < index.masks.nbytes


@pytest.mark.parametrize("cut", [0, 10, 100, -1, -40])
def test_artifact_truncated_is_corrupt(index: TokenIndex, cut: int) -> None:
    data = artifact.to_bytes(index)
    with pytest.raises(ArtifactCorruptError):
        artifact.from_bytes(data[:cut], index.vocabulary, source="mem")


def test_artifact_flipped_byte_is_corrupt(index: TokenIndex) -> None:
    data = bytearray(artifact.to_bytes(index))
    data[len(data) // 2] ^= 0x40
    with pytest.raises(ArtifactCorruptError, match="checksum") as exc:
        artifact.from_bytes(bytes(data), index.vocabulary, source="k1")
    assert exc.value.source == "k1"


def test_artifact_not_an_artifact(index: TokenIndex, tmp_path: Path) -> None:
    path = tmp_path / "schema.json"
    path.write_text('{"type": "string"}' * 10)
    with pytest.raises(ArtifactCorruptError, match="bad magic"):
        artifact.load(path, index.vocabulary)
    with pytest.raises(ArtifactNotFoundError, match="no artifact file") as missing:
        artifact.load(tmp_path / "missing.fsm", index.vocabulary)
    assert isinstance(missing.value, FileNotFoundError)
    assert not isinstance(missing.value, ArtifactCorruptError)


def test_artifact_newer_format_is_a_version_error(index: TokenIndex) -> None:
    data = artifact.to_bytes(index)
    newer = struct.pack("<4sI", b"FSMC", 999) + data[8:]
    with pytest.raises(ArtifactVersionError, match="newer"):
        artifact.from_bytes(newer, index.vocabulary)


def test_artifact_older_format_is_a_version_error(index: TokenIndex) -> None:
    data = artifact.to_bytes(index)
    older = struct.pack("<4sI", b"FSMC", FORMAT_VERSION - 1) + data[8:]
    with pytest.raises(ArtifactVersionError, match="older than this fsmcompile reads"):
        artifact.from_bytes(older, index.vocabulary)


def test_artifact_other_tokenizer_is_a_mismatch(index: TokenIndex) -> None:
    other = tiny_vocabulary([b"a", b"b"])
    with pytest.raises(VocabularyMismatchError) as exc:
        artifact.from_bytes(artifact.to_bytes(index), other)
    assert exc.value.expected == other.fingerprint
    assert exc.value.found == index.vocabulary.fingerprint


def test_artifact_load_path_never_unpickles() -> None:
    for module in Path(artifact.__file__).parent.glob("*.py"):
        assert "pickle" not in module.read_text().replace("No pickle", "")
