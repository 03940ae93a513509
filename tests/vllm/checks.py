"""The request kinds the end-to-end tests send, and how each output is checked.

An output that ended at EOS must be a complete match, checked by an independent
validator: `re.fullmatch` for regexes, `jsonschema` for JSON Schemas, lark's own parser
for grammars. An output cut at `max_tokens` must be a valid prefix: `regex`'s partial
match for regexes. Either way every output token is replayed through a reference
matcher of the same spec, which must accept each one (and EOS at the end).
`start_after` outputs are checked from the token after the one that completes the marker.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

MARKER = "##"  # one Qwen2 token (565): a logit bias can make the model write it first

REGEX = "[a-z]{1,6}( [a-z]{1,6}){0,2}"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Z][a-z]{0,5}$"},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 2},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
GRAMMAR = """start: expr
expr: term (OP term)*
term: NUMBER | "(" expr ")"
OP: "+" | "-" | "*"
NUMBER: /[0-9]{1,3}/
"""
ANSWER = "(yes|no)"
DIGITS = "[0-9]{2,4}(-[0-9]{2})?"  # served as a saved artifact ({"index": path})


@dataclass(frozen=True)
class Kind:
    """One kind of request: the spec it sends and the validator of a complete output."""

    name: str
    kind: str  # regex, json_schema or grammar: what the reference compiles
    text: str
    start_after: str | None = None

    def validate_complete(self, text: str) -> None:
        if self.kind == "regex":
            assert re.fullmatch(self.text, text), (self.name, text)
        elif self.kind == "json_schema":
            import jsonschema

            jsonschema.validate(json.loads(text), json.loads(self.text))
        else:
            import lark

            lark.Lark(self.text, parser="lalr").parse(text)

    def validate_prefix(self, text: str) -> None:
        if self.kind == "regex":
            import regex

            assert regex.fullmatch(self.text, text, partial=True), (self.name, text)


KINDS = {
    "regex": Kind("regex", "regex", REGEX),
    "json_schema": Kind("json_schema", "json_schema", json.dumps(SCHEMA)),
    "grammar": Kind("grammar", "grammar", GRAMMAR),
    "start_after": Kind("start_after", "regex", ANSWER, start_after=MARKER),
    "index": Kind("index", "regex", DIGITS),
}


@dataclass
class Tally:
    """valid/total counts per request kind, and how many ended at EOS."""

    total: Counter[str] = field(default_factory=Counter)
    valid: Counter[str] = field(default_factory=Counter)
    ended: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)  # the longest output per kind

    def line(self) -> str:
        counts = ", ".join(
            f"{k}: {self.valid[k]}/{self.total[k]} valid, {self.ended[k]} at EOS"
            for k in sorted(self.total)
        )
        examples = "; ".join(f"{k}: {v!r}" for k, v in sorted(self.examples.items()))
        return f"{counts}\n  longest: {examples}"


def compile_reference(kind: Kind, vocabulary: Any) -> Any:
    import fsmcompile

    compile_fn = {
        "regex": fsmcompile.compile_regex,
        "json_schema": fsmcompile.compile_json_schema,
        "grammar": fsmcompile.compile_lark,
    }[kind.kind]
    return compile_fn(kind.text, vocabulary)


def check_output(
    kind: Kind, token_ids: list[int], vocabulary: Any, index: Any, tally: Tally, label: str = ""
) -> None:
    """Assert that one output obeys `kind` (see the module docstring) and count it."""
    from fsmcompile.runtime.matcher import matcher_for

    tally.total[kind.name] += 1
    eos = set(vocabulary.eos_token_ids)
    tokens = list(token_ids)
    ended = bool(tokens) and tokens[-1] in eos
    if ended:
        tokens.pop()
    if kind.start_after is not None:
        marker = kind.start_after.encode()
        prefixes = (vocabulary.decode_bytes(tokens[: k + 1]) for k in range(len(tokens)))
        cut = next((k + 1 for k, text in enumerate(prefixes) if marker in text), None)
        assert cut is not None or not ended, (label, "ended before the marker", tokens)
        tokens = tokens[cut:] if cut is not None else []
    # A cut output may stop inside a multi-byte character.
    text = vocabulary.decode_bytes(tokens).decode("utf-8", errors="strict" if ended else "ignore")
    matcher = matcher_for(index)
    accepted = matcher.advance_many(tokens)
    assert accepted == len(tokens), (label, kind.name, "token refused at", accepted, text)
    if ended:
        assert matcher.advance(vocabulary.eos_token_ids[0]), (label, "EOS where not allowed", text)
        kind.validate_complete(text)
        tally.ended[kind.name] += 1
    else:
        kind.validate_prefix(text)
    tally.valid[kind.name] += 1
    if len(text) > len(tally.examples.get(kind.name, "")):
        tally.examples[kind.name] = text
