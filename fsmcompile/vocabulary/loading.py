"""Where vocabularies come from: tokenizer.json files, folders, HF objects, the HF cache.

Never touches the network: a Hub name is looked up in the local Hugging Face cache only.
Decoded tables are cached on disk keyed by the file's content hash, so a warm load skips
parsing a 17 MB JSON document.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgpack
import numpy as np

from fsmcompile.errors import VocabularyError
from fsmcompile.paths import default_cache_dir
from fsmcompile.vocabulary.decode import decode_tokenizer_json
from fsmcompile.vocabulary.trie import TokenTrie

if TYPE_CHECKING:
    # Only for annotations: `Vocabulary`'s constructors call these with the class itself
    # (`cls`), so the two modules do not import each other when they run.
    from fsmcompile.vocabulary.vocabulary import Vocabulary

logger = logging.getLogger(__name__)

_TABLE_CACHE_VERSION = 2
_COMMON_EOS = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<|eot_id|>", "<|im_end|>", "<eos>")


def _read_text(path: Path) -> bytes:
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise VocabularyError(f"tokenizer file not found: {path}") from exc
    except OSError as exc:
        raise VocabularyError(f"cannot read tokenizer file {path}: {exc}") from exc
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise VocabularyError(f"damaged gzip tokenizer file {path}: {exc}") from exc
    return raw


def _eos_from_config(config: dict[str, Any], by_content: dict[str, int]) -> list[int]:
    eos = config.get("eos_token")
    if isinstance(eos, dict):
        eos = eos.get("content")
    names = eos if isinstance(eos, list) else [eos] if eos else []
    return [by_content[n] for n in names if n in by_content]


def _table_cache_path(digest: str, cache_dir: Path | None) -> Path:
    return (cache_dir or default_cache_dir()) / "vocab" / f"{digest}.msgpack"


def _load_cached_table(path: Path) -> dict[str, Any] | None:
    try:
        doc = msgpack.unpackb(path.read_bytes(), raw=False)
        if doc.get("v") != _TABLE_CACHE_VERSION:
            return None
        return dict(doc)
    except (OSError, ValueError, msgpack.UnpackException):
        return None


def _store_cached_table(path: Path, doc: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(msgpack.packb(doc, use_bin_type=True))
        os.replace(tmp, path)
    except OSError as exc:  # a read-only cache only costs speed
        logger.debug("cannot cache the decoded vocabulary at %s: %s", path, exc)


def from_tokenizer_json_text(
    cls: type[Vocabulary],
    text: str | bytes,
    *,
    config: dict[str, Any] | None = None,
    eos_token_ids: list[int] | None = None,
    vocab_size: int | None = None,
    name: str = "",
    cache_dir: Path | None = None,
    use_cache: bool = True,
) -> Vocabulary:
    """Build a Vocabulary from the text of a tokenizer.json (+ its tokenizer_config)."""
    raw = text.encode("utf-8") if isinstance(text, str) else text
    config = config or {}
    digest = hashlib.sha256(raw).hexdigest()
    cache_path = _table_cache_path(digest, cache_dir)
    cached = _load_cached_table(cache_path) if use_cache else None
    if cached is not None:
        lengths = np.frombuffer(cached["lengths"], dtype="<i8")
        blob = cached["blob"]
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        token_bytes = [blob[offsets[i] : offsets[i + 1]] for i in range(len(lengths))]
        special = frozenset(cached["special"])
        by_content = dict(cached["added"])
        scheme = str(cached["scheme"])
        trie_arrays = cached["trie"]
    else:
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise VocabularyError(f"{name or 'tokenizer'} is not valid JSON: {exc}") from exc
        table = decode_tokenizer_json(doc)
        token_bytes, special = table.token_bytes, table.special_ids
        by_content, scheme = table.added_by_content, table.scheme
        trie_arrays = None
    eos = list(eos_token_ids or _eos_from_config(config, by_content))
    if not eos:
        eos = [by_content[n] for n in _COMMON_EOS if n in by_content][:1]
    size = vocab_size if vocab_size is not None else len(token_bytes)
    vocab = cls(
        token_bytes=token_bytes,
        eos_token_ids=tuple(eos),
        special_token_ids=special | frozenset(eos),
        size=size,
        name=name,
        scheme=scheme,
        tokenizer_json=raw,
    )
    # The trie depends on the EOS choice (EOS is never text), so it is cached per EOS set.
    trie_key = ",".join(map(str, sorted(vocab.special_token_ids)))
    if trie_arrays is not None and trie_key in trie_arrays:
        vocab.__dict__["trie"] = TokenTrie.from_arrays(trie_arrays[trie_key])
    elif use_cache:
        _store_cached_table(
            cache_path,
            {
                "v": _TABLE_CACHE_VERSION,
                "lengths": np.fromiter((len(b) for b in token_bytes), dtype="<i8").tobytes(),
                "blob": b"".join(token_bytes),
                "special": sorted(special),
                "added": by_content,
                "scheme": scheme,
                "trie": {**(trie_arrays or {}), trie_key: vocab.trie.to_arrays()},
            },
        )
    return vocab


def from_file(cls: type[Vocabulary], path: str | os.PathLike[str], **options: Any) -> Vocabulary:
    """A tokenizer.json (plain or .gz); a tokenizer_config.json beside it names the EOS."""
    path = Path(path)
    if path.is_dir():
        return from_directory(cls, path, **options)
    config: dict[str, Any] = {}
    for candidate in (
        path.parent / "tokenizer_config.json",
        path.parent / "tokenizer_config.json.gz",
    ):
        if candidate.exists():
            config = json.loads(_read_text(candidate))
            break
    options.setdefault("name", str(path))
    return from_tokenizer_json_text(cls, _read_text(path), config=config, **options)


def from_directory(
    cls: type[Vocabulary], path: str | os.PathLike[str], **options: Any
) -> Vocabulary:
    """A folder holding tokenizer.json (or .gz) and optionally tokenizer_config.json."""
    folder = Path(path)
    for name in ("tokenizer.json", "tokenizer.json.gz"):
        if (folder / name).exists():
            return from_file(cls, folder / name, **options)
    raise VocabularyError(f"no tokenizer.json in {folder}")


def from_hf(cls: type[Vocabulary], tokenizer: Any, **options: Any) -> Vocabulary:
    """An already loaded tokenizer: `tokenizers.Tokenizer` or a transformers fast tokenizer.

    Duck-typed so transformers stays optional.
    """
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    to_str = getattr(backend, "to_str", None)
    if to_str is None:
        raise VocabularyError(
            f"cannot read {type(tokenizer).__name__}: need a fast (tokenizers-backed) tokenizer"
        )
    if "eos_token_ids" not in options:
        eos_id = getattr(tokenizer, "eos_token_id", None)
        if isinstance(eos_id, int):
            options["eos_token_ids"] = [eos_id]
    options.setdefault(
        "name", str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)
    )
    if options.get("vocab_size") is None:
        options.pop("vocab_size", None)
    return from_tokenizer_json_text(cls, to_str(), **options)


def _hf_cache_roots() -> list[Path]:
    roots = []
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            roots.append(Path(os.environ[var]))
    hf_home = os.environ.get("HF_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache", "huggingface"
    )
    roots.append(Path(hf_home) / "hub")
    return roots


def from_pretrained(cls: type[Vocabulary], name: str, **options: Any) -> Vocabulary:
    """A Hub model name whose files are already in the local Hugging Face cache."""
    folder_name = "models--" + name.replace("/", "--")
    for root in _hf_cache_roots():
        snapshots = root / folder_name / "snapshots"
        if snapshots.is_dir():
            for snap in sorted(snapshots.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True):
                if (snap / "tokenizer.json").exists():
                    options.setdefault("name", name)
                    return from_directory(cls, snap, **options)
    raise VocabularyError(
        f"tokenizer {name!r} is not a file, a folder, or a model in the local Hugging Face "
        "cache (fsmcompile never downloads); pass the path to its tokenizer.json"
    )


def load(cls: type[Vocabulary], source: Any, **options: Any) -> Vocabulary:
    """Any source: a Vocabulary, a path (file or folder), a Hub name, or a tokenizer object."""
    if isinstance(source, cls):
        return source
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.exists():
            return from_file(cls, path, **options)
        if isinstance(source, str) and source.count("/") <= 1 and not source.endswith(".json"):
            return from_pretrained(cls, source, **options)
        raise VocabularyError(f"tokenizer file not found: {path}")
    return from_hf(cls, source, **options)
