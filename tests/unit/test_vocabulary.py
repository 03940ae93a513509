"""Vocabulary loading and decoding on the real bundled tokenizers."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from support import DATA, load_vocabulary

from fsmcompile import Vocabulary, VocabularyError


@pytest.mark.parametrize("name", ["gpt2", "qwen2", "phi3"])
def test_vocabulary_decode_roundtrips_real_encodings(name: str) -> None:
    vocab = load_vocabulary(name)
    for text in ["hello world", '{"a": [1, 2.5e-3], "é": "ü€😀"}', "  indented\n\ttabs", "日本語"]:
        ids = vocab.encode(text)
        assert vocab.decode_bytes(ids) == text.encode("utf-8"), (name, text, ids)


def test_vocabulary_byte_level_maps_every_byte(gpt2: Vocabulary) -> None:
    single = {data for data in gpt2.token_bytes if len(data) == 1}
    assert single == {bytes([b]) for b in range(256)}


def test_vocabulary_sentencepiece_byte_fallback(phi3: Vocabulary) -> None:
    assert phi3.scheme == "sentencepiece"
    fallback = {data for data in phi3.token_bytes if len(data) == 1}
    assert {bytes([b]) for b in range(256)} <= fallback
    assert b" the" in phi3.token_bytes  # ▁the


def test_vocabulary_special_tokens_are_not_text(gpt2: Vocabulary, phi3: Vocabulary) -> None:
    assert gpt2.eos_token_ids == (50256,)
    assert 50256 in gpt2.special_token_ids
    assert gpt2.token_bytes[50256] == b""
    assert phi3.eos_token_ids == (32000,)
    assert not set(phi3.text_token_ids.tolist()) & phi3.special_token_ids


def test_vocabulary_width_larger_than_tokenizer(tmp_path: Path) -> None:
    vocab = Vocabulary.from_file(DATA / "gpt2" / "tokenizer.json.gz", vocab_size=50304)
    assert vocab.size == 50304
    assert len(vocab.token_bytes) == 50257


def test_vocabulary_width_smaller_than_tokenizer_is_an_error() -> None:
    with pytest.raises(VocabularyError, match="smaller"):
        Vocabulary.from_file(DATA / "gpt2" / "tokenizer.json.gz", vocab_size=100)


def test_vocabulary_fingerprint_depends_on_width_and_bytes(gpt2: Vocabulary) -> None:
    wider = Vocabulary.from_file(DATA / "gpt2" / "tokenizer.json.gz", vocab_size=50304)
    again = Vocabulary.from_file(DATA / "gpt2" / "tokenizer.json.gz")
    assert gpt2.fingerprint == again.fingerprint
    assert gpt2.fingerprint != wider.fingerprint


def test_vocabulary_from_directory_plain_and_cache_agree(tmp_path: Path, gpt2: Vocabulary) -> None:
    folder = tmp_path / "tok"
    folder.mkdir()
    with gzip.open(DATA / "gpt2" / "tokenizer.json.gz", "rb") as src:
        (folder / "tokenizer.json").write_bytes(src.read())
    shutil.copy(DATA / "gpt2" / "tokenizer_config.json", folder)
    cold = Vocabulary.load(folder, cache_dir=tmp_path / "cache")
    warm = Vocabulary.load(folder, cache_dir=tmp_path / "cache")
    assert cold.fingerprint == warm.fingerprint == gpt2.fingerprint
    assert any((tmp_path / "cache" / "vocab").iterdir())


def test_vocabulary_from_hf_tokenizer_object(gpt2: Vocabulary) -> None:
    from tokenizers import Tokenizer

    with gzip.open(DATA / "gpt2" / "tokenizer.json.gz", "rt", encoding="utf-8") as src:
        tok = Tokenizer.from_str(src.read())
    vocab = Vocabulary.from_hf(tok, eos_token_ids=[50256])
    assert vocab.fingerprint == gpt2.fingerprint


def test_vocabulary_from_pretrained_reads_local_hf_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = tmp_path / "hub" / "models--acme--tiny" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    with gzip.open(DATA / "phi3" / "tokenizer.json.gz", "rb") as src:
        (snapshot / "tokenizer.json").write_bytes(src.read())
    shutil.copy(DATA / "phi3" / "tokenizer_config.json", snapshot)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    vocab = Vocabulary.load("acme/tiny")
    assert vocab.eos_token_ids == (32000,)


def test_vocabulary_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(VocabularyError, match="not found"):
        Vocabulary.load(tmp_path / "nope" / "tokenizer.json")
    with pytest.raises(VocabularyError, match="never downloads"):
        Vocabulary.load("no-such-org/no-such-model")


def test_vocabulary_unsupported_model_is_a_clear_error(tmp_path: Path) -> None:
    doc = {
        "model": {"type": "WordPiece", "vocab": {"a": 0, "[SEP]": 1}},
        "decoder": {"type": "WordPiece"},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "added_tokens": [],
    }
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(VocabularyError, match="unsupported tokenizer"):
        Vocabulary.load(path, eos_token_ids=[1])


def test_vocabulary_damaged_gzip_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json.gz"
    path.write_bytes((DATA / "gpt2" / "tokenizer.json.gz").read_bytes()[:1000])
    with pytest.raises(VocabularyError, match="damaged gzip"):
        Vocabulary.load(path)


def test_first_byte_by_id_reads_each_text_tokens_bytes(phi3: Vocabulary) -> None:
    # Phi-3 has special and byte-fallback ids, so some ids are outside the trie.
    table = phi3.trie.first_byte_by_id(phi3.size)
    text = set(phi3.text_token_ids.tolist())
    assert table.shape == (phi3.size,) and len(text) < phi3.size
    for token in range(phi3.size):
        expected = phi3.token_bytes[token][0] if token in text else 256
        assert table[token] == expected, token


def test_level_parents_spell_each_token_back_to_the_root(gpt2: Vocabulary) -> None:
    trie = gpt2.trie
    parent_at, position = trie.level_parents()
    assert (trie.level_nodes[position] == range(trie.num_nodes)).all()
    assert parent_at[0] == -1 and (parent_at[1:] >= 0).all()
    # Each token's bytes, read from its end node up through the parents, then reversed.
    pairs = list(zip(trie.token_ids.tolist(), trie.token_node.tolist(), strict=True))
    for token_id, node in pairs[::997]:
        spelled = []
        at = int(position[node])
        while at > 0:
            spelled.append(int(trie.node_byte[trie.level_nodes[at]]))
            at = int(parent_at[at])
        assert bytes(reversed(spelled)) == gpt2.token_bytes[token_id]


def test_subtree_ends_and_tokens_by_node_give_each_subtrees_tokens(gpt2: Vocabulary) -> None:
    # The tokens under node n are the ids of nodes n..end[n]-1: exactly the tokens whose
    # bytes start with n's spelling.
    trie = gpt2.trie
    ends = trie.subtree_ends()
    start, ids = trie.tokens_by_node()
    pairs = zip(trie.token_ids.tolist(), trie.token_node.tolist(), strict=True)
    spelling = {node: gpt2.token_bytes[token] for token, node in pairs}
    checked = 0
    for node in range(1, trie.num_nodes, 2999):
        prefix = spelling.get(node)
        if prefix is None:
            continue  # a node where no token ends: its spelling is not at hand
        checked += 1
        under = set(ids[start[node] : start[ends[node]]].tolist())
        expected = {t for t in trie.token_ids.tolist() if gpt2.token_bytes[t].startswith(prefix)}
        assert under == expected, node
    assert checked >= 10
    assert ends[0] == trie.num_nodes and start[-1] == ids.shape[0]
