"""Lazy grammar indexes: a matcher over a `LazyGrammarIndex`, whose lexer states' token
groups are walked when a row first needs them, writes the eager `GrammarIndex`'s masks bit
for bit at every step, on the bundled grammars, on recursive and free-form schemas, and on
grammar-route JSONSchemaBench schemas (Llama 3 and GPT-2).

The eager index is the reference: each case compiles both from one spec and drives both
matchers along real texts (tokenized the tokenizer's way) and along random walks of
allowed tokens, so a lazily walked origin that drops a token, adds one, misplaces EOS or
loses a kill-composed row fails here.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from grammar.grammar_checks import BUNDLED, bundled_text
from grammar.grammar_corpus import VALID
from support import SHARED, load_vocabulary

from fsmcompile import Compiler
from fsmcompile.compiler import index_cache_key
from fsmcompile.errors import BudgetExceededError, SpecError, UnsupportedFeatureError
from fsmcompile.runtime import Matcher
from fsmcompile.runtime.grammar_matcher import GrammarMatcher
from fsmcompile.runtime.lazy_origins import ORIGIN_BATCH
from fsmcompile.store.cache import TieredCache
from fsmcompile.store.memory import MemoryStore
from fsmcompile.tables.grammar_index import GrammarIndex
from fsmcompile.tables.lazy_grammar_index import LazyGrammarIndex
from fsmcompile.vocabulary import Vocabulary

TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name"],
            "additionalProperties": False,
        }
    },
    "$ref": "#/$defs/node",
}
TREE_TEXTS = [
    '{"name":"root","children":[{"name":"a"},{"name":"b","children":[{"name":"c"}]}]}',
    '{"name":"x\\"y"}',
]
FREE_FORM = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "meta": {"type": "object"}},
    "required": ["id"],
}
FREE_FORM_TEXTS = ['{"id":7,"meta":{"a":[1,{"b":null}],"c":"d"}}', '{"id":-3}']


def lazy_and_eager(
    vocab: Vocabulary, kind: str, spec: object
) -> tuple[LazyGrammarIndex, GrammarIndex]:
    compiler = Compiler(vocab, cache=False)
    lazy = compiler.compile_lazy(kind, spec)  # type: ignore[arg-type]
    eager = compiler.compile_spec(kind, spec).index  # type: ignore[arg-type]
    assert isinstance(lazy, LazyGrammarIndex), type(lazy)
    assert isinstance(eager, GrammarIndex), type(eager)
    return lazy, eager


def agree_along(lazy: GrammarMatcher, eager: GrammarMatcher, tokens: list[int]) -> int:
    """Feed `tokens` to both matchers; masks, forced tokens and answers agree at every
    step (and after the last). Returns the steps compared."""
    words = (eager.index.vocabulary.size + 31) // 32
    got, want = np.zeros((2, words), np.int32), np.zeros((2, words), np.int32)
    steps = 0
    for token in tokens:
        lazy.fill_bitmask(got, 1)
        eager.fill_bitmask(want, 1)
        np.testing.assert_array_equal(got, want, f"step {steps}")
        assert lazy.forced_token_ids() == eager.forced_token_ids()
        assert lazy.is_complete() == eager.is_complete()
        accepted = eager.advance(token)
        assert lazy.advance(token) == accepted, token
        steps += 1
        if not accepted:
            break
    return steps


def agree_on_texts(lazy: LazyGrammarIndex, eager: GrammarIndex, texts: list[str]) -> int:
    vocab = eager.vocabulary
    eos = vocab.eos_token_ids[0]
    steps = 0
    for text in texts:
        tokens = [*vocab.encode(text), eos]
        steps += agree_along(Matcher(lazy), Matcher(eager), tokens)  # type: ignore[arg-type]
    return steps


def agree_on_walks(lazy: LazyGrammarIndex, eager: GrammarIndex, seed: int, walks: int) -> int:
    """Random walks of tokens the eager mask allows (short ones favoured, EOS half the
    time it is allowed), both matchers compared at every step."""
    vocab = eager.vocabulary
    eos = vocab.eos_token_ids[0]
    rng = random.Random(seed)
    steps = 0
    for _ in range(walks):
        lazy_matcher, eager_matcher = Matcher(lazy), Matcher(eager)
        tokens: list[int] = []
        for _ in range(40):
            allowed = eager_matcher.allowed_token_ids().tolist()
            assert allowed, "a dead end"
            if eos in allowed and rng.random() < 0.5:
                token = eos
            else:
                short = sorted(
                    (t for t in allowed if t != eos), key=lambda t: len(vocab.token_bytes[t])
                ) or [eos]
                token = rng.choice(short[:12] if rng.random() < 0.7 else short)
            tokens.append(token)
            assert eager_matcher.advance(token)
            if token == eos:
                break
        steps += agree_along(lazy_matcher, GrammarMatcher(eager), tokens)  # type: ignore[arg-type]
    return steps


@pytest.mark.parametrize("tokenizer", ["gpt2", "llama3"])
@pytest.mark.parametrize("name", BUNDLED)
def test_lazy_grammar_masks_equal_eager_masks_on_bundled_grammars(
    name: str, tokenizer: str
) -> None:
    vocab = load_vocabulary(tokenizer)
    lazy, eager = lazy_and_eager(vocab, "lark", bundled_text(name))
    steps = agree_on_texts(lazy, eager, VALID[name])
    steps += agree_on_walks(lazy, eager, seed=len(name), walks=4)
    assert steps >= 40, steps


@pytest.mark.parametrize("tokenizer", ["gpt2", "llama3"])
@pytest.mark.parametrize(
    ("schema", "texts"), [(TREE, TREE_TEXTS), (FREE_FORM, FREE_FORM_TEXTS)], ids=["tree", "free"]
)
def test_lazy_grammar_masks_equal_eager_masks_on_schemas(
    schema: dict[str, object], texts: list[str], tokenizer: str
) -> None:
    vocab = load_vocabulary(tokenizer)
    lazy, eager = lazy_and_eager(vocab, "json", schema)
    steps = agree_on_texts(lazy, eager, texts) + agree_on_walks(lazy, eager, seed=3, walks=3)
    assert steps >= 30, steps


def test_the_first_mask_walks_few_lexer_states() -> None:
    vocab = load_vocabulary("gpt2")
    compiler = Compiler(vocab, cache=False)
    lazy = compiler.compile_lazy("lark", bundled_text("sql_select"))
    assert isinstance(lazy, LazyGrammarIndex)
    matcher = Matcher(lazy)
    assert isinstance(matcher, GrammarMatcher)
    matcher.allowed_token_ids()
    loader = matcher.tables._loader
    assert loader is not None
    # One batch: the start state and the pending states nearest it, not the whole lexer.
    assert 1 <= loader.walked <= ORIGIN_BATCH < lazy.num_states, (loader.walked, lazy.num_states)
    tokens = vocab.encode("SELECT a FROM t")
    assert matcher.advance_many(tokens) == len(tokens)
    assert loader.walked < lazy.num_states


def test_complete_stores_the_eager_index_under_the_eager_key() -> None:
    vocab = load_vocabulary("gpt2")
    cache = TieredCache([MemoryStore()])
    compiler = Compiler(vocab, cache=cache)
    lazy = compiler.compile_lazy("json", TREE)
    assert isinstance(lazy, LazyGrammarIndex)
    reference = Compiler(vocab, cache=False).compile_spec("json", TREE).index
    assert isinstance(reference, GrammarIndex)
    agree_on_texts(lazy, reference, TREE_TEXTS[:1])
    key = index_cache_key("json", TREE, vocab)
    assert cache.get(key) is None, "nothing is stored before completion"
    full = lazy.complete()
    assert lazy.complete() is full
    again = compiler.compile_spec("json", TREE)
    assert again.cache_hit
    assert isinstance(again.index, GrammarIndex)
    np.testing.assert_array_equal(again.index.masks, reference.masks)
    np.testing.assert_array_equal(full.entry_group, reference.entry_group)
    # A later lazy compile of the spec is the cached full index.
    assert isinstance(compiler.compile_lazy("json", TREE), GrammarIndex)


def test_a_lazy_grammar_index_completes_in_the_background() -> None:
    vocab = load_vocabulary("gpt2")
    lazy = Compiler(vocab, cache=False).compile_lazy("lark", bundled_text("json"))
    assert isinstance(lazy, LazyGrammarIndex)
    matcher = Matcher(lazy)
    thread = lazy.complete_in_background()
    steps = 0
    for text in VALID["json"][:3]:
        tokens = [*vocab.encode(text), vocab.eos_token_ids[0]]
        eager_matcher = Matcher(lazy.complete()) if lazy.completed else None
        matcher.reset()
        for token in tokens:
            matcher.allowed_token_ids()
            assert matcher.advance(token)
            steps += 1
        assert eager_matcher is None or eager_matcher.advance(tokens[0])
    thread.join(timeout=120)
    assert lazy.completed is not None
    steps += agree_on_texts(lazy, lazy.completed, VALID["json"][:2])
    assert steps > 20


GRAMMAR_SUBSETS = ("Glaiveai2K", "Github_easy", "Kubernetes")
PER_SUBSET = 3


def grammar_schemas(subset: str, vocab: Vocabulary) -> list[tuple[dict[str, object], list[str]]]:
    """The first `PER_SUBSET` schemas of `subset` that compile through a grammar, with up
    to three valid instances each as compact JSON."""
    path = SHARED / "corpora" / "jsonschemabench" / subset / "schemas.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not present")
    found: list[tuple[dict[str, object], list[str]]] = []
    compiler = Compiler(vocab, cache=False, timeout_s=20)
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            try:
                index = compiler.compile_spec("json", record["schema"]).index
            except (SpecError, UnsupportedFeatureError, BudgetExceededError):
                continue
            if not isinstance(index, GrammarIndex) or index.num_states > 400:
                continue
            texts = [
                json.dumps(test["data"], separators=(",", ":"), ensure_ascii=False)
                for test in record["tests"]
                if test["valid"]
            ]
            found.append((record["schema"], texts[:3]))
            if len(found) == PER_SUBSET:
                break
    return found


@pytest.mark.corpus
@pytest.mark.parametrize("tokenizer", ["gpt2", "llama3"])
@pytest.mark.parametrize("subset", GRAMMAR_SUBSETS)
def test_lazy_grammar_masks_equal_eager_masks_on_jsonschemabench(
    subset: str, tokenizer: str
) -> None:
    vocab = load_vocabulary(tokenizer)
    steps = 0
    for schema, texts in grammar_schemas(subset, vocab):
        lazy, eager = lazy_and_eager(vocab, "json", schema)
        steps += agree_on_texts(lazy, eager, texts)
        steps += agree_on_walks(lazy, eager, seed=11, walks=2)
    assert steps >= 60, steps
