"""Tokens that cut lexemes where many lexer contexts may follow, in a real schema's grammar.

After a `}` that closes one of many optional objects, a Kubernetes schema's grammar may
go on in a few hundred lexer contexts. A token walk that tried each context as its own
reading held that many after `}`, its square after `}}` and its cube after `}}}` (past any
bound a walk may hold: the requests errored on valid instances). The walk names the
contexts that share a future by the index's context set, as the index's own walk does, so
each brace adds a reading or two (`native/parser_walk.c`, `tables/lexer_walks.py`).
"""

from __future__ import annotations

import json

import pytest
from support import SHARED, load_vocabulary

from fsmcompile import compile_json_schema
from fsmcompile.runtime import Matcher

KUBERNETES = SHARED / "corpora" / "jsonschemabench" / "Kubernetes" / "schemas.jsonl"


@pytest.mark.corpus
@pytest.mark.parametrize("schema_id", ["Kubernetes/kb_143_Normalized"])
def test_closing_braces_after_nested_optional_objects_walk(schema_id: str) -> None:
    if not KUBERNETES.exists():
        pytest.skip("JSONSchemaBench corpus not present in ../shared")
    vocab = load_vocabulary("llama3")
    record = next(
        r for r in map(json.loads, KUBERNETES.read_text().splitlines()) if r["id"] == schema_id
    )
    index = compile_json_schema(record["schema"], vocab, cache=False)
    closing = vocab.token_bytes.index(b"}}}")
    probed = 0
    for test in record["tests"]:
        if not test["valid"]:
            continue
        text = json.dumps(test["data"], separators=(",", ":"))
        tokens = vocab.encode(text)
        matcher, offset = Matcher(index), 0
        for token in tokens:
            if text.startswith("}}}", offset):  # the model may write the three at once
                probe = Matcher(index)
                assert probe.advance_many(tokens[: tokens.index(token)]) == tokens.index(token)
                assert probe.advance(closing)
                probed += 1
            assert matcher.advance(token), (text, offset)
            offset += len(vocab.token_bytes[token])
        assert matcher.is_accepting()
    assert probed > 0
