"""Jump-forward on grammar indexes: forced text is exactly what every continuation starts with.

GPT-2 has a token for every byte, so the first bytes of the allowed tokens are the bytes
that may come next: text is forced exactly when EOS is not allowed and they are one byte.
"""

from __future__ import annotations

import numpy as np
import pytest
from grammar_checks import bundled_text, compiled
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmcompile.compiler import compile_spec
from fsmcompile.runtime.grammar_matcher import GrammarMatcher
from fsmcompile.tables.grammar_index import GrammarIndex

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"enum": ["alpha", "beta"]}},
    },
    "required": ["name", "age", "tags"],
}
"""Extra properties are allowed (no `additionalProperties`), so this is a grammar index."""

COUNTED = {
    "type": "object",
    "properties": {"code": {"type": "string", "maxLength": 300}, "tree": {"$ref": "#"}},
    "required": ["code"],
    "additionalProperties": False,
}
"""A recursive schema with a counted string."""

SPECS = {
    "person": ("json", PERSON),
    "counted": ("json", COUNTED),
    "json_grammar": ("lark", None),
    "tool_call": ("lark", None),
}


@pytest.fixture(scope="module")
def indexes(gpt2) -> dict[str, GrammarIndex]:
    out = {}
    for name, (kind, spec) in SPECS.items():
        if kind == "lark":
            index = compiled(bundled_text(name.removesuffix("_grammar")), "gpt2")
        else:
            index = compile_spec(kind, spec, gpt2, cache=False).index
        assert isinstance(index, GrammarIndex), name
        out[name] = index
    return out


@pytest.fixture(scope="module")
def first_bytes(gpt2) -> np.ndarray:
    """int[V]: each token's first byte, -1 for special tokens and empty ones."""
    out = np.full(gpt2.size, -1, dtype=np.int64)
    for token in gpt2.text_token_ids.tolist():
        data = gpt2.token_bytes[token]
        if data:
            out[token] = data[0]
    return out


def check_forced(m: GrammarMatcher, gpt2, first_bytes: np.ndarray) -> bytes:
    """The forced text of `m`, after checking it against the mask (see the module doc)."""
    forced = m.forced_bytes()
    allowed = m.allowed_token_ids()
    eos_allowed = any(t in gpt2.eos_token_ids for t in allowed.tolist())
    nexts = set(first_bytes[allowed].tolist()) - {-1}
    assert bool(forced) == (not eos_allowed and len(nexts) == 1), (forced, eos_allowed, nexts)
    for token in allowed.tolist():
        data = gpt2.token_bytes[token]
        if token not in gpt2.eos_token_ids:
            assert data[: len(forced)] == forced[: len(data)], (data, forced)
    ids = m.forced_token_ids()
    spelled = b"".join(gpt2.token_bytes[t] for t in ids)
    assert forced.startswith(spelled), (ids, forced)
    assert m.advance_many(ids) == len(ids)
    m.rollback(len(ids))
    return forced


def test_forced_text_of_an_object_with_free_extra_properties(indexes, gpt2, first_bytes):
    m = GrammarMatcher(indexes["person"])
    assert check_forced(m, gpt2, first_bytes) == b'{"name":"'
    # '":"' could merge with the string's first characters, so it stays with the model.
    assert m.forced_token_ids() == gpt2.encode('{"name')
    steps = {}
    for token in gpt2.encode('{"name":"Ada","age":36,"tags":["alpha"]}'):
        assert m.advance(token)
        steps[gpt2.decode_bytes([token])] = check_forced(m, gpt2, first_bytes)
    assert steps[b'","'] == b'age":'
    assert steps[b"alpha"] == b'"'
    assert steps[b"}"] == b""  # complete: EOS may follow


def test_forced_text_ends_where_only_eos_may_follow(gpt2, first_bytes):
    index = compile_spec("lark", 'start: "{" "\\"done\\"" "}"', gpt2, cache=False).index
    m = GrammarMatcher(index)
    assert check_forced(m, gpt2, first_bytes) == b'{"done"}'
    # Nothing can follow the text, so its last token is final: all of it is forced.
    assert m.advance_many(m.forced_token_ids()) == len(gpt2.encode('{"done"}'))
    assert m.is_complete() and m.forced_bytes() == b""
    assert m.advance(gpt2.eos_token_ids[0]) and m.forced_token_ids() == []


def test_nothing_is_forced_where_the_text_may_end(gpt2, first_bytes):
    index = compile_spec("lark", 'start: "x" ["y"]', gpt2, cache=False).index
    m = GrammarMatcher(index)
    assert check_forced(m, gpt2, first_bytes) == b"x"
    assert m.advance(gpt2.encode("x")[0])
    # 'y' is the only byte that may follow, but EOS may too: nothing is forced.
    assert check_forced(m, gpt2, first_bytes) == b""


REGEX = r'\{"id":[0-9]{1,3},"ok":(true|false)\}'
LARK = r"""
start: "{\"id\":" INT ",\"ok\":" BOOL "}"
INT: /[0-9]{1,3}/
BOOL: "true" | "false"
"""
"""One language twice: a regex (a DFA index) and a grammar (a grammar index)."""


@pytest.mark.parametrize("text", ['{"id":7,"ok":true}', '{"id":123,"ok":false}'])
def test_forced_text_is_the_same_for_a_dfa_and_a_grammar_of_one_language(gpt2, text):
    from fsmcompile.runtime.matcher import Matcher

    dfa = Matcher(compile_spec("regex", REGEX, gpt2, cache=False).index)
    grammar = GrammarMatcher(compile_spec("lark", LARK, gpt2, cache=False).index)
    seen = set()
    for token in [*gpt2.encode(text), None]:
        assert grammar.forced_bytes() == dfa.forced_bytes()
        assert grammar.forced_token_ids() == dfa.forced_token_ids()
        seen.add(dfa.forced_bytes())
        if token is not None:
            assert dfa.advance(token) and grammar.advance(token)
    assert b'{"id":' in seen and b'":' in seen, seen  # the comparison saw forced text


def test_forced_token_ids_spell_the_forced_text_for_every_tokenizer(real_vocab):
    """SentencePiece (Phi-3) and the large BPEs encode a fragment their own way; what is
    forced must still spell the forced text and be accepted, and keys must be forced."""
    index = compile_spec("json", PERSON, real_vocab, cache=False).index
    m = GrammarMatcher(index)
    assert m.forced_bytes() == b'{"name":"' and m.forced_token_ids()
    for token in real_vocab.encode('{"name":"Ada","age":36,"tags":["beta"]}'):
        assert m.advance(token)
        forced, ids = m.forced_bytes(), m.forced_token_ids()
        assert forced.startswith(b"".join(real_vocab.token_bytes[t] for t in ids))
        assert m.advance_many(ids) == len(ids)
        m.rollback(len(ids))


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(SPECS)), seed=st.integers(0, 2**32 - 1))
def test_forced_text_agrees_with_the_mask_along_random_walks(
    indexes, gpt2, first_bytes, name, seed
):
    rng = np.random.default_rng(seed)
    m = GrammarMatcher(indexes[name])
    for _ in range(40):
        forced = check_forced(m, gpt2, first_bytes)
        allowed = [t for t in m.allowed_token_ids().tolist() if t not in gpt2.eos_token_ids]
        if not allowed:
            break
        # Half the time take the forced tokens, as an engine with jump-forward would.
        ids = m.forced_token_ids()
        if forced and ids and rng.random() < 0.5:
            assert m.advance_many(ids) == len(ids)
            continue
        assert m.advance(int(rng.choice(allowed)))
