"""Lazy DFA indexes: every row made on demand equals the eager index's row, bit for bit,
and a matcher over a lazy index writes the eager masks step by step.

The eager `TokenIndex` is the reference: each test builds both from one automaton (or one
compiler) and compares every state, so a row source that drops a token, adds one, or
misplaces EOS fails here.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from lazy_checks import assert_matchers_agree, assert_rows_equal
from property.test_regex_index_property import PATTERNS
from support import load_vocabulary

from fsmcompile import Compiler
from fsmcompile.compile_stages import build_machine, lower_spec
from fsmcompile.index.dfa.build import build_token_index
from fsmcompile.index.dfa.lazy_rows import lazy_token_index
from fsmcompile.runtime import Matcher
from fsmcompile.runtime.dfa_matcher import DfaMatcher
from fsmcompile.store.cache import TieredCache
from fsmcompile.store.memory import MemoryStore
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.tables.grammar_index import GrammarIndex
from fsmcompile.tables.lazy_grammar_index import LazyGrammarIndex
from fsmcompile.tables.lazy_index import LazyTokenIndex
from fsmcompile.tables.token_index import TokenIndex
from fsmcompile.types import DEAD
from fsmcompile.vocabulary import Vocabulary

TEXTS = {
    "iso_date": ["2024-02-29", "1999-12-31"],
    "float": ["-12.5e+3", "0", "3.14159"],
    "email": ["jane.doe@example.co.uk", "x@y.org"],
    "ipv4": ["192.168.0.1", "255.255.255.0"],
    "words": ["alpha beta gamma", "日本語 alpha"],
    "unicode_class": ["日本語!", "àéî!"],
    "quoted": ['"hello, world"', '""'],
    "optional_tail": ["1", "1x2"],
    "word_space": ["hello world", "a_1 b2"],
}
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"enum": ["a", "bc"]}, "maxItems": 3},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
SCHEMA_TEXTS = ['{"name":"Zoë \\"Z\\" Ng","age":41,"tags":["bc","a"]}', '{"name":"ab","age":0}']


def dfa_of(kind: str, spec: object) -> ByteDFA:
    node, rules = lower_spec(kind, spec, None)  # type: ignore[arg-type]
    machine = build_machine(node, rules, max_states=100_000, deadline=None)
    assert isinstance(machine, ByteDFA)
    return machine


@pytest.mark.parametrize("tokenizer", ["gpt2", "llama3"])
def test_lazy_rows_equal_eager_rows_on_the_regex_corpus(tokenizer: str) -> None:
    vocab = load_vocabulary(tokenizer)
    states = steps = 0
    for name, pattern in sorted(PATTERNS.items()):
        dfa = dfa_of("regex", pattern)
        eager = build_token_index(dfa, vocab, kind="regex", spec_hash="")
        lazy = lazy_token_index(dfa, vocab, kind="regex", spec_hash="")
        for text in TEXTS[name]:
            steps += assert_matchers_agree(lazy, eager, text)
        assert lazy.num_rows_made <= lazy.num_states
        states += assert_rows_equal(lazy, eager)
        assert lazy.num_rows_made == lazy.num_states
    assert states > 200 and steps > 40, (states, steps)


def test_a_matcher_makes_only_the_rows_it_visits() -> None:
    vocab = load_vocabulary("gpt2")
    dfa = dfa_of("json", SCHEMA)
    lazy = lazy_token_index(dfa, vocab, kind="json", spec_hash="")
    eager = build_token_index(dfa, vocab, kind="json", spec_hash="")
    for text in SCHEMA_TEXTS:
        assert_matchers_agree(lazy, eager, text)
    assert 0 < lazy.num_rows_made < dfa.num_states // 2, (lazy.num_rows_made, dfa.num_states)
    assert assert_rows_equal(lazy, eager) > 50


def test_a_token_without_text_is_refused_as_the_eager_index_refuses_it() -> None:
    vocab = load_vocabulary("gpt2")
    dfa = dfa_of("regex", r"[a-z<|>]+")
    lazy = Matcher(lazy_token_index(dfa, vocab, kind="regex", spec_hash=""))
    assert isinstance(lazy, DfaMatcher)
    eos = vocab.eos_token_ids[0]  # <|endoftext|>: special, no text, though its name is letters
    assert lazy.advance(vocab.encode("abc")[0]) and lazy.is_accepting()
    # The C step, not the matcher's EOS check, must refuse it: an empty walk stays put.
    assert lazy.tables.next_state(0, eos) == DEAD
    assert lazy.tables.next_state(lazy.state, eos) == DEAD
    assert not lazy.advance(vocab.size)


def compiler_with_cache(vocab: Vocabulary) -> tuple[Compiler, TieredCache]:
    cache = TieredCache([MemoryStore()])
    return Compiler(vocab, cache=cache), cache


def test_compile_lazy_returns_rows_on_demand_and_completion_fills_the_cache() -> None:
    vocab = load_vocabulary("gpt2")
    compiler, cache = compiler_with_cache(vocab)
    lazy = compiler.compile_json_schema(SCHEMA, lazy=True)
    assert isinstance(lazy, LazyTokenIndex) and lazy.num_rows_made == 0
    first = lazy.mask_row(0)
    assert lazy.num_rows_made == 1

    reference = Compiler(vocab, cache=False).compile_json_schema(SCHEMA)
    full = lazy.complete()
    assert lazy.complete() is full and lazy.completed is full
    assert full.spec_hash == reference.spec_hash and lazy.spec_hash == reference.spec_hash
    np.testing.assert_array_equal(full.masks, reference.masks)
    np.testing.assert_array_equal(full.state_mask, reference.state_mask)
    np.testing.assert_array_equal(first, reference.mask_row(0))
    assert_rows_equal(lazy, reference)

    # The fleet compiles once: the eager path and a second lazy compile now hit.
    result = compiler.compile_spec("json", SCHEMA)
    assert result.cache_hit
    np.testing.assert_array_equal(result.index.masks, reference.masks)
    again = compiler.compile_json_schema(SCHEMA, lazy=True)
    assert isinstance(again, TokenIndex)
    assert cache.get(result.key) is not None


def test_background_completion_stores_the_full_index_while_rows_are_served() -> None:
    vocab = load_vocabulary("gpt2")
    compiler, _ = compiler_with_cache(vocab)
    lazy = compiler.compile_regex(PATTERNS["email"], lazy=True)
    assert isinstance(lazy, LazyTokenIndex)
    reference = Compiler(vocab, cache=False).compile_regex(PATTERNS["email"])
    thread = lazy.complete_in_background()
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            assert_matchers_agree(lazy, reference, TEXTS["email"][0])
        except BaseException as exc:  # handed to the main thread
            errors.append(exc)

    servers = [threading.Thread(target=serve) for _ in range(3)]
    for server in servers:
        server.start()
    for server in [*servers, thread]:
        server.join(60)
    assert not errors, errors
    assert lazy.completed is not None
    assert compiler.compile_spec("regex", PATTERNS["email"]).cache_hit


def test_a_grammar_spec_gives_a_lazy_grammar_index_stored_on_completion() -> None:
    vocab = load_vocabulary("gpt2")
    compiler, _ = compiler_with_cache(vocab)
    recursive = {"type": "object", "properties": {"a": {"$ref": "#"}}}
    index = compiler.compile_json_schema(recursive, lazy=True)
    assert isinstance(index, LazyGrammarIndex)  # lexer states walked on demand
    tokens = vocab.encode('{"a":{"a":{}}}')
    assert Matcher(index).advance_many(tokens) == len(tokens)
    full = index.complete()
    assert isinstance(full, GrammarIndex)
    assert compiler.compile_spec("json", recursive).cache_hit


def test_a_lazy_index_without_completer_says_so() -> None:
    vocab = load_vocabulary("gpt2")
    dfa = dfa_of("regex", "ab")
    lazy = LazyTokenIndex(dfa, vocab, "regex", "", row_source=lambda state: np.zeros(1))
    with pytest.raises(ValueError, match="no completer"):
        lazy.complete()
    with pytest.raises(IndexError):
        lazy.mask_row(dfa.num_states)


def test_nearest_unmade_goes_breadth_first_and_stops_at_the_limit() -> None:
    from fsmcompile.tables.nearby import nearest_unmade

    graph = {0: [1, 2], 1: [3, 0], 2: [4], 3: [5], 4: [5], 5: [0]}
    made = {2}
    assert nearest_unmade(0, graph.__getitem__, lambda q: q not in made, 10) == [0, 1, 3, 4, 5]
    assert nearest_unmade(0, graph.__getitem__, lambda q: q not in made, 3) == [0, 1, 3]
    assert nearest_unmade(5, graph.__getitem__, lambda q: True, 1) == [5]


def test_next_states_lists_each_state_s_distinct_targets_ascending() -> None:
    from fsmcompile.tables.nearby import NextStates

    trans = np.array([[2, -1, 1, 2], [-1, -1, -1, -1], [0, 0, 2, -1]], dtype=np.int32)
    moves = NextStates(trans)
    assert [moves(0), moves(1), moves(2)] == [[1, 2], [], [0, 2]]
    trans[0] = -1  # listed once and kept: the table is read on the first ask only
    assert moves(0) == [1, 2]
