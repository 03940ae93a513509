"""`listed_escapes`: every JSON spelling of a listed string, and nothing else.

Listed strings (`enum`/`const` values, property names, `propertyNames` enums) are spelled
narrowly by default: raw characters, the escapes a character needs, and `\\/`. With
`listed_escapes=True` each character may also be written as its short escape or as
`\\uXXXX` in either case (a surrogate pair above U+FFFF). Every text accepted must
decode to a listed value and be valid for `jsonschema`; every spelling of a listed value
must be accepted.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmcompile.types import DEAD

from .language import schema_language
from .walks import gpt2_index

WORDS = ["a/b", 'q"é', "😀x", "t\nab", "ab"]
ENUM = {"enum": WORDS}
SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n"}


def _u(code: int, upper: bool) -> str:
    text = f"\\u{code:04x}"
    return text.upper().replace("\\U", "\\u") if upper else text


@st.composite
def spellings(draw: st.DrawFn, word: str) -> str:
    """One JSON spelling of `word`, each character written any valid way."""
    out = []
    for char in word:
        code = ord(char)
        forms = [] if char in '"\\' or code < 0x20 else [char]
        if char in SHORT:
            forms.append(SHORT[char])
        for upper in (False, True):
            if code > 0xFFFF:
                high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
                forms.append(_u(high, upper) + _u(low, upper))
            else:
                forms.append(_u(code, upper))
        out.append(draw(st.sampled_from(forms)))
    return "".join(out)


def _decoded(content: str) -> Any:
    try:
        return json.loads(f'"{content}"')
    except json.JSONDecodeError:
        return None


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_listed_escapes_accept_every_spelling_of_listed_words(data: st.DataObject) -> None:
    accepts = _language(ENUM, listed_escapes=True)
    word = data.draw(st.sampled_from(WORDS))
    text = data.draw(spellings(word))
    assert _decoded(text) == word
    assert accepts(f'"{text}"'), text


_PIECES = ["a", "b", "/", "\\/", "\\u0061", "\\u0062", "\\u00E9", "é", '\\"', "\\u0022", "x"]
_PIECES += ["\\uD83D\\uDE00", "\\ud83d", "\\n", "\\u000a", "t", "q", "\\u0041", "\\a"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=6))
def test_listed_escapes_accept_only_listed_words(pieces: list[str]) -> None:
    accepts = _language(ENUM, listed_escapes=True)
    text = "".join(pieces)
    value = _decoded(text)
    listed = value in WORDS
    assert accepts(f'"{text}"') is listed, text
    if listed:
        jsonschema.validate(value, ENUM)


def test_listed_escapes_default_keeps_narrow_spellings() -> None:
    narrow, every = _language({"const": "ab"}), _language({"const": "ab"}, listed_escapes=True)
    assert narrow('"ab"') and every('"ab"')
    assert not narrow('"\\u0061b"') and every('"\\u0061b"') and every('"\\u0041b"') is False


def test_listed_escapes_property_names_decode_to_the_listed_key() -> None:
    schema = {
        "type": "object",
        "properties": {"é/k": {"type": "integer"}},
        "additionalProperties": False,
    }
    accepts = _language(schema, listed_escapes=True)
    for key in ("é/k", "\\u00e9\\/k", "\\u00E9/\\u006b"):
        assert accepts(f'{{"{key}":1}}'), key
        assert not accepts(f'{{"{key}":"s"}}'), key
    assert not accepts('{"\\u00e9/K":1}')


_CACHE: dict[str, Any] = {}


def _language(schema: dict[str, Any], **options: Any) -> Any:
    key = json.dumps([schema, options], sort_keys=True)
    if key not in _CACHE:
        _CACHE[key] = schema_language(schema, **options)
    return _CACHE[key]


def test_listed_escapes_through_gpt2_token_index() -> None:
    schema = {"type": "object", "properties": {"kind": ENUM}, "required": ["kind"]}
    schema["additionalProperties"] = False
    index = gpt2_index(schema, listed_escapes=True)
    vocab = index.vocabulary
    for text, ok in (
        ('{"kind":"a\\/b"}', True),
        ('{"\\u006bind":"\\u0061\\u002Fb"}', True),
        ('{"kind":"\\uD83D\\uDE00x"}', True),
        ('{"kind":"\\u0061\\u002Fc"}', False),
    ):
        state = 0  # state 0 starts every DFA
        for token in vocab.encode(text):
            assert index.is_allowed(state, token) is (index.next_state(state, token) != DEAD)
            state = index.next_state(state, token)
            if state == DEAD:
                break
        accepted = state != DEAD and index.is_accepting(state)
        assert accepted is ok, text
        if ok:
            jsonschema.validate(json.loads(text), schema)
