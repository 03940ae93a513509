"""`not` of a bound keyword holds only values of the type the bound speaks about.

`{minimum: 3}` accepts every string, so `{not: {minimum: 3}}` accepts numbers below 3
and nothing else; the same for lengths, item and property counts, and for the `else`
of an `if` whose condition is a bound. Checked token by token with GPT-2.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from support import load_vocabulary

from fsmcompile.compiler import compile_json_schema
from fsmcompile.runtime.matcher import matcher_for


def token_walk_accepts(schema: Any, text: str) -> bool:
    """Whether every token of `text` (GPT-2's own tokenization) is in the mask of the
    matcher it is read by, and EOS at the end."""
    index = compile_json_schema(schema, load_vocabulary("gpt2"), cache=False)
    matcher = matcher_for(index)
    for token in index.vocabulary.encode(text):
        if token not in set(matcher.allowed_token_ids().tolist()):
            return False
        assert matcher.advance(token), "a token in the mask is refused"
    return index.vocabulary.eos_token_ids[0] in set(matcher.allowed_token_ids().tolist())


TEXTS = ['"ab"', '"abcde"', "null", "true", "2", "2.5", "5", "[]", "[1,2,3,4]", "{}", '{"a":1}']


@pytest.mark.parametrize(
    "schema",
    [
        {"not": {"minimum": 3}},
        {"not": {"exclusiveMaximum": 3}},
        {"not": {"maxLength": 3}},
        {"not": {"minLength": 3}},
        {"not": {"minItems": 2}},
        {"not": {"maxProperties": 0}},
        {"not": {"enum": ["a", 2], "maxLength": 3}},
        {"if": {"maximum": 3}, "then": {"type": "integer"}, "else": {"type": "string"}},
    ],
    ids=lambda schema: json.dumps(schema),
)
def test_negated_bound_is_exact_token_by_token(schema: dict[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    for text in TEXTS:
        assert token_walk_accepts(schema, text) == validator.is_valid(json.loads(text)), text
