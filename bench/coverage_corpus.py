"""The JSONSchemaBench corpus and tokenizers the coverage benchmark reads: records per
subset (first N or a seeded sample), upstream subset sizes, and each labelled instance
serialized and tokenized as a model writes it."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpora" / "jsonschemabench"
SHARED_CORPUS = Path("/work/shared/corpora/jsonschemabench")
"""Where the corpus is looked for when `CORPUS` (beside the checkout) is missing."""
TOKENIZERS = {
    "llama3": ROOT.parent / "shared" / "tokenizers" / "llama3" / "tokenizer.json",
    "gpt2": ROOT / "tests" / "data" / "gpt2" / "tokenizer.json.gz",
}
SUBSETS = (
    "Glaiveai2K",
    "Github_trivial",
    "Github_easy",
    "Github_medium",
    "Github_hard",
    "Github_ultra",
    "JsonSchemaStore",
    "Kubernetes",
    "Snowplow",
    "WashingtonPost",
    "Handwritten",
    "Synthesized",
)


def resolve_corpus(corpus: Path | None = None) -> Path:
    """`corpus`, else `CORPUS` beside the checkout, else the machine's shared copy."""
    if corpus is not None:
        return corpus
    return CORPUS if CORPUS.exists() or not SHARED_CORPUS.exists() else SHARED_CORPUS


def load_records(
    subset: str,
    limit: int | None,
    ids: set[str] | None,
    *,
    sample_seed: int | None = None,
    corpus: Path | None = None,
) -> list[dict[str, Any]]:
    """The first `limit` records of a subset in the corpus' natural id order (or `ids`);
    with `sample_seed`, `limit` records drawn uniformly with that seed, in id order."""
    records = []
    with open(resolve_corpus(corpus) / subset / "schemas.jsonl", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if ids is not None and record["id"] not in ids:
                continue
            records.append(record)
            if limit is not None and sample_seed is None and len(records) >= limit:
                break
    if limit is not None and sample_seed is not None and len(records) > limit:
        picked = sorted(random.Random(f"{sample_seed}/{subset}").sample(range(len(records)), limit))
        records = [records[i] for i in picked]
    return records


def upstream_sizes(corpus: Path | None = None) -> dict[str, int]:
    """Schemas per subset in the full upstream benchmark (the corpus' `index.json`)."""
    index = json.loads((resolve_corpus(corpus) / "index.json").read_text(encoding="utf-8"))
    return {name: int(entry["total"]) for name, entry in index["subsets"].items()}


def serialize(data: Any, whitespace: str) -> str:
    """Instance text as the schema's whitespace option writes it.

    Compact (`,` and `:`) unless whitespace is "standard" (`json.dumps`' `", "`/`": "`);
    "flexible" accepts compact text too. Object keys keep the instance's own order: the
    compiler wants listed properties in schema order, and an instance written otherwise
    counts as over-constrained, as in the DFA-level report this replaces.
    """
    separators = (", ", ": ") if whitespace == "standard" else (",", ":")
    return json.dumps(data, separators=separators, ensure_ascii=False)


def resolve_tokenizer(name: str) -> tuple[str, Path]:
    """(label, path): `llama3`, `gpt2` or a path to a tokenizer.json."""
    if name in TOKENIZERS:
        path = TOKENIZERS[name]
        if not path.exists():
            raise SystemExit(f"tokenizer {name!r} not found at {path}")
        return name, path
    path = Path(name)
    if not path.exists():
        raise SystemExit(f"no tokenizer at {path}")
    return path.name, path


def prepare_tests(record: dict[str, Any], vocab: Any, whitespace: str) -> list[dict[str, Any]]:
    """Each labelled instance with its text and its real tokenization (`Vocabulary.encode`)."""
    tests = []
    for position, test in enumerate(record["tests"]):
        text = serialize(test["data"], whitespace)
        tests.append(
            {
                "index": position,
                "valid": bool(test["valid"]),
                "description": test.get("description", ""),
                "text": text,
                "ids": vocab.encode(text),
            }
        )
    return tests
