"""Recursive and free-form schemas compile as grammars: token-level exactness.

Completeness: instances tokenized by real tokenizers are allowed token by token, EOS at
the end. Soundness: random walks through the masks end in texts `jsonschema` validates.
"""

from __future__ import annotations

import json
import logging
import random
from typing import Any

import jsonschema
import numpy as np
import pytest
from pydantic import BaseModel
from support import allowed_all_the_way, load_vocabulary

from fsmcompile import artifact
from fsmcompile.compiler import compile_json_schema
from fsmcompile.grammar import lalr_merge
from fsmcompile.grammar.rule_writer import START, RuleWriter
from fsmcompile.runtime.matcher import matcher_for
from fsmcompile.tables.grammar_index import GrammarIndex
from fsmcompile.tables.token_index import TokenIndex
from fsmcompile.vocabulary import Vocabulary


class TreeNode(BaseModel):
    name: str
    weight: int = 0
    children: list[TreeNode] = []


TREE = TreeNode.model_json_schema()
FREE_FORM = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def random_tree(rng: random.Random, depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"name": rng.choice(["a", "root", "Ünïcode", 'q"uote', ""])}
    if rng.random() < 0.5:
        node["weight"] = rng.randint(-500, 500)
    if depth > 0 and rng.random() < 0.8:
        node["children"] = [random_tree(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return node


def random_json(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth <= 0 or roll < 0.4:
        return rng.choice([None, True, False, 0, -12, 3.5e-3, "x", "tab\there", "日本"])
    if roll < 0.7:
        return [random_json(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return {f"k{i}": random_json(rng, depth - 1) for i in range(rng.randint(0, 3))}


def random_walk(index: Any, vocab: Vocabulary, rng: random.Random) -> str | None:
    """Sample allowed tokens (mostly short ones, so walks end) until EOS; the text, or
    None when the walk ran out of steps."""
    matcher = matcher_for(index)
    eos = vocab.eos_token_ids[0]
    out: list[int] = []
    for _ in range(150):
        allowed = matcher.allowed_token_ids().tolist()
        assert allowed, f"dead end after {vocab.decode_bytes(out)!r}"
        choices = [t for t in allowed if t != eos]
        if eos in allowed and (rng.random() < 0.4 or not choices):
            assert matcher.advance(eos)
            return vocab.decode_bytes(out).decode("utf-8")
        if rng.random() < 0.8:
            choices = sorted(choices, key=lambda t: len(vocab.token_bytes[t]))[:12]
        token = rng.choice(choices)
        assert matcher.advance(token)
        out.append(token)
    return None


@pytest.fixture(scope="module", params=["gpt2", "phi3"])
def vocab(request: pytest.FixtureRequest) -> Vocabulary:
    return load_vocabulary(request.param)


def test_recursive_pydantic_model_is_a_grammar_with_unbounded_depth(vocab: Vocabulary) -> None:
    index = compile_json_schema(TreeNode, vocab, cache=False)
    assert isinstance(index, GrammarIndex) and index.kind == "json"
    rng = random.Random(7)
    trees = [random_tree(rng, 6) for _ in range(25)]
    chain: dict[str, Any] = {"name": "leaf"}
    for depth in range(15):
        chain = {"name": f"n{depth}", "children": [chain]}
    for tree in [*trees, chain]:
        text = TreeNode.model_validate(tree).model_dump_json()
        ok, why = allowed_all_the_way(index, vocab, text)
        assert ok, (text, why)
    for bad in ('{"weight":1}', '{"name":"a","children":[{"weight":2}]}', '{"name":1}'):
        assert not allowed_all_the_way(index, vocab, bad)[0], bad


def test_random_walks_through_a_recursive_schema_validate(vocab: Vocabulary) -> None:
    index = compile_json_schema(TREE, vocab, cache=False)
    rng = random.Random(11)
    ended = 0
    for _ in range(16):
        text = random_walk(index, vocab, rng)
        if text is None:
            continue
        ended += 1
        jsonschema.validate(json.loads(text), TREE)
    assert ended >= 6


def test_free_form_values_at_any_depth(vocab: Vocabulary) -> None:
    index = compile_json_schema(FREE_FORM, vocab, cache=False)
    assert isinstance(index, GrammarIndex)
    rng = random.Random(3)
    for _ in range(25):
        value = {"id": rng.randint(0, 99), "extra": random_json(rng, 7), "more": [[[[{}]]]]}
        ok, why = allowed_all_the_way(index, vocab, compact(value))
        assert ok, (value, why)
    for bad in ('{"extra":1}', '{"id":"1"}', '{"id":1,"x":[1,]}', '{"id":1,"id2":{"a"}}'):
        assert not allowed_all_the_way(index, vocab, bad)[0], bad
    walks = [random_walk(index, vocab, rng) for _ in range(10)]
    for text in walks:
        if text is not None:
            jsonschema.validate(json.loads(text), FREE_FORM)


@pytest.mark.parametrize("schema", [{}, True])
def test_any_json_schema(vocab: Vocabulary, schema: Any) -> None:
    index = compile_json_schema(schema, vocab, cache=False)
    rng = random.Random(5)
    for value in [random_json(rng, 6) for _ in range(20)] + ["", 0, [], {}]:
        ok, why = allowed_all_the_way(index, vocab, compact(value))
        assert ok, (value, why)
    for bad in ("[1,]", '{"a"}', "01", "nul", '"\\x"'):
        assert not allowed_all_the_way(index, vocab, bad)[0], bad


def test_grammar_schema_artifact_round_trips(vocab: Vocabulary) -> None:
    index = compile_json_schema(TREE, vocab, cache=False)
    again = artifact.from_bytes(artifact.to_bytes(index), vocab)
    assert isinstance(again, GrammarIndex) and again.kind == "json"
    assert np.array_equal(again.masks, index.masks)
    text = compact({"name": "a", "children": [{"name": "b"}]})
    assert allowed_all_the_way(again, vocab, text)[0]


def test_overlapping_alternatives_fall_back_to_bounded_nesting(
    vocab: Vocabulary, caplog: pytest.LogCaptureFixture
) -> None:
    # "some item is 1" over free-form items: a lexer cannot tell a `1` item from the
    # `1` that satisfies contains, so the rules are unrolled into a DFA (logged).
    schema = {"type": "array", "contains": {"const": 1}}
    with caplog.at_level(logging.WARNING, logger="fsmcompile.compiler"):
        index = compile_json_schema(schema, vocab, cache=False)
    assert isinstance(index, TokenIndex)
    assert "nesting limited" in caplog.text
    for text, ok in (("[1]", True), ('[2,[[1]],1,"x"]', True), ("[2]", False), ("[]", False)):
        assert allowed_all_the_way(index, vocab, text)[0] is ok, text


def test_branches_sharing_a_free_form_member_stay_a_grammar(vocab: Vocabulary) -> None:
    # Both branches start with {"a":<free object>: the writer's two copies of the object
    # rule (one per follow set) meet in one LALR state and are merged, so the schema
    # keeps its grammar and unbounded depth instead of falling back to 3 levels.
    free = {"type": "object"}
    schema = {
        "anyOf": [
            {"properties": {"a": free}, "required": ["a"], "additionalProperties": False},
            {
                "properties": {"a": free, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": False,
            },
        ]
    }
    index = compile_json_schema(schema, vocab, cache=False)
    assert isinstance(index, GrammarIndex)
    deep: Any = {"x": 1}
    for _ in range(6):
        deep = {"d": deep}
    validator = jsonschema.Draft202012Validator(schema)
    for value in ({"a": deep}, {"a": deep, "b": 2}, {"a": {}, "b": "2"}, {"b": 2}):
        text = compact(value)
        assert allowed_all_the_way(index, vocab, text)[0] is validator.is_valid(value), text


def test_a_branch_read_whole_beside_a_brace_followed_by_free_keys_stays_a_grammar(
    vocab: Vocabulary,
) -> None:
    # The second branch has no free-form part, so it is one terminal, `{"mode":"reference",
    # ...}`, beside the first branch's `{`. Elsewhere (the free object) a `{` is followed by
    # any key, `"mode":` included, so a check of what follows `{` anywhere in the grammar
    # saw a conflict. After this `{` only the first branch's keys can follow, and the check
    # reads followers per parser state: the schema keeps its grammar.
    free = {"type": "object"}
    branches = [
        {
            "type": "object",
            "properties": {"extra": free, "mode": {"const": "custom"}},
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"mode": {"const": "reference"}, "id": {"type": "string"}},
            "required": ["mode", "id"],
            "additionalProperties": False,
        },
    ]
    schema = {
        "type": "object",
        "properties": {"free": free, "who": {"anyOf": branches}},
        "additionalProperties": False,
    }
    index = compile_json_schema(schema, vocab, cache=False)
    assert isinstance(index, GrammarIndex)
    deep: Any = {"mode": "reference", "id": "x"}
    for _ in range(5):
        deep = {"mode": deep}
    validator = jsonschema.Draft202012Validator(schema)
    instances = [
        {"who": {"mode": "reference", "id": "x"}},
        {"who": {"mode": "custom"}},
        {"who": {}},
        {"who": {"extra": deep, "mode": "custom"}},
        {"free": deep, "who": {"mode": "reference", "id": ""}},
        {"free": {"mode": "reference", "id": "x"}},
        {"who": {"mode": "reference"}},
        {"who": {"mode": "custom", "id": "x"}},
        {"who": {"extra": {}, "mode": "reference", "id": "x"}},
        {"who": {"mode": "other"}},
    ]
    for value in instances:
        text = compact(value)
        assert allowed_all_the_way(index, vocab, text)[0] is validator.is_valid(value), text
    rng = random.Random(13)
    for text in [random_walk(index, vocab, rng) for _ in range(10)]:
        if text is not None:
            validator.validate(json.loads(text))


def test_grammar_build_past_its_deadline_is_a_budget_error(monkeypatch) -> None:
    """The LALR builds (seconds each for big generated grammars) honour the deadline:
    the clock the grammar builder reads is moved past it once the terminals are built."""
    import time
    from types import SimpleNamespace

    from fsmcompile.compiler import ROOT_RULE, lower_spec
    from fsmcompile.errors import BudgetExceededError
    from fsmcompile.grammar import from_rules

    node, rules = lower_spec("json", TREE, {})
    rules = {ROOT_RULE: node, **rules}
    deadline = time.monotonic() + 60
    from_rules.grammar_from_rules(rules, ROOT_RULE, deadline=deadline)  # builds in time
    monkeypatch.setattr(lalr_merge, "time", SimpleNamespace(monotonic=lambda: deadline + 1))
    with pytest.raises(BudgetExceededError, match="LALR table"):
        from_rules.grammar_from_rules(rules, ROOT_RULE, deadline=deadline)


def test_members_with_alternative_values_stay_a_small_grammar(vocab: Vocabulary) -> None:
    """lark multiplies out the inline groups of one rule (2^n alternatives for n members
    whose values are `anyOf`s) and its FOLLOW sets cost the cube of a rule's length,
    neither stoppable by a deadline (6 members took 4,115 lark rules and 21 s): the
    writer moves groups and long tails into helper rules, so the grammar stays linear in
    the members, and exact."""
    from fsmcompile.compiler import ROOT_RULE, lower_spec
    from fsmcompile.grammar import from_rules

    names = [f"m{i}" for i in range(6)]
    value = {"anyOf": [{"type": "array", "items": {}}, {"type": "null"}]}
    schema = {
        "type": "object",
        "properties": {name: value for name in names},
        "required": names[:5],
        "additionalProperties": False,
    }
    node, rules = lower_spec("json", schema, {})
    grammar = from_rules.grammar_from_rules({ROOT_RULE: node, **rules}, ROOT_RULE)
    assert len(grammar.table.rule_lhs) < 30 * len(names)
    index = compile_json_schema(schema, vocab, cache=False)
    assert isinstance(index, GrammarIndex)
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(5)
    for size in (5, 5, 6, 6):
        instance = {name: rng.choice([None, [], [random_json(rng, 2)]]) for name in names[:size]}
        assert validator.is_valid(instance)
        ok, why = allowed_all_the_way(index, vocab, compact(instance))
        assert ok, why
    for bad in (
        {n: None for n in names[:4]},
        {n: 1 for n in names},
        {**dict.fromkeys(names), "x": 1},
    ):
        assert not validator.is_valid(bad)
        assert not allowed_all_the_way(index, vocab, compact(bad))[0], bad


def test_optional_members_counted_with_free_extras_stay_a_linear_grammar(
    vocab: Vocabulary,
) -> None:
    """Each optional member chooses between itself and the rest of the members; listing
    every later member at each one (a flattened choice) made the grammar quadratic in
    the members: 929 lark rules for 40 members, and 3.7 s of lark's analysis for a
    91-member Snowplow schema."""
    from fsmcompile.compiler import ROOT_RULE, lower_spec
    from fsmcompile.grammar import from_rules

    names = [f"m{i}" for i in range(40)]
    schema = {
        "type": "object",
        "properties": {name: {"type": "integer"} for name in names},
        "minProperties": 1,
    }
    node, rules = lower_spec("json", schema, {})
    grammar = from_rules.grammar_from_rules({ROOT_RULE: node, **rules}, ROOT_RULE)
    assert len(grammar.table.rule_lhs) < 5 * len(names)
    index = compile_json_schema(schema, vocab, cache=False)
    assert isinstance(index, GrammarIndex)
    for good in ({"m39": 1}, {"m0": 1, "m7": 2, "m39": 3}, {"x": [{}]}, {"m3": 1, "y": None}):
        ok, why = allowed_all_the_way(index, vocab, compact(good))
        assert ok, (good, why)
    for bad in ({}, {"m1": "a"}, {"m1": 1, "m1 ": {"m2": 1}, "m2": "b"}):
        assert not jsonschema.Draft202012Validator(schema).is_valid(bad)
        assert not allowed_all_the_way(index, vocab, compact(bad))[0], bad


def test_a_vocabulary_walk_too_wide_for_memory_is_refused(
    vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bounded strings inside members unroll into lexer states per character; past
    `MAX_LEVEL_BYTES` of origin sets at one trie level the walk refuses before gathering
    them (one such level took 10 s and 5 GiB, past any deadline), and under it compiles."""
    from fsmcompile.compile_memos import CompileMemos
    from fsmcompile.errors import BudgetExceededError
    from fsmcompile.index.cfg import trie_walk as grammar_walk

    value = {"type": ["string", "null"], "maxLength": 40}
    schema = {"type": "object", "properties": {f"k{i}": value for i in range(6)}}
    index = compile_json_schema(schema, vocab, cache=False)
    assert isinstance(index, GrammarIndex)
    ok, why = allowed_all_the_way(index, vocab, compact({"k0": "x" * 40, "k3": None, "z": 1}))
    assert ok, why
    assert not allowed_all_the_way(index, vocab, compact({"k0": "x" * 41}))[0]
    monkeypatch.setattr(grammar_walk, "MAX_LEVEL_BYTES", 1 << 16)
    with (
        CompileMemos().active(),  # built again under the lower limit, not the index above
        pytest.raises(BudgetExceededError, match="GiB of lexer-state sets") as info,
    ):
        compile_json_schema(schema, vocab, cache=False)
    assert info.value.limit == "walk_bytes"


def test_bounded_string_values_are_one_terminal_for_all_members(vocab: Vocabulary) -> None:
    """A member's key and a bounded string value written as one terminal unroll the bound
    into the lexer once per member and position (6 members bounded at 40 took past 30 s
    to compile); written apart, every member shares the value's terminal, and the masks
    stay exact at the bound, with and without quotes flattened into the member."""
    nullable = {"type": ["string", "null"], "maxLength": 40}
    plain = {"type": "string", "minLength": 2, "maxLength": 30}
    schema = {
        "type": "object",
        "properties": {**{f"n{i}": nullable for i in range(8)}, "p": plain, "q": plain},
        "required": ["p"],
    }
    index = compile_json_schema(schema, vocab, cache=False)
    assert isinstance(index, GrammarIndex)
    assert index.lexer.transitions.shape[0] < 3_000  # 20,000+ with a terminal per member
    validator = jsonschema.Draft202012Validator(schema)
    good = [  # in schema order, extra keys last (the documented order)
        {"n0": "é" * 40, "n7": None, "p": "ab", "q": "x" * 30},
        {"n3": "", "p": 'q"\\uote', "extra": [1, {"n0": 5}]},
        {"n1": "a b", "n5": None, "p": "\u00e9\u00e9\n" * 10},
    ]
    bad = [
        {"n0": "é" * 41, "p": "ab"},
        {"p": "a"},
        {"p": "x" * 31},
        {"n2": 1, "p": "ab"},
        {"q": "ab"},
    ]
    for instance in good:
        assert validator.is_valid(instance), instance
        ok, why = allowed_all_the_way(index, vocab, compact(instance))
        assert ok, (instance, why)
    for instance in bad:
        assert not validator.is_valid(instance), instance
        assert not allowed_all_the_way(index, vocab, compact(instance))[0], instance


def test_a_wide_piece_that_would_overlap_its_follower_stays_joined() -> None:
    """Written apart, `[a-z]{0,300}` would run on into the `x` after it (the lexer could
    not tell where it ends); the writer then keeps the grammar it wrote before splitting."""
    from fsmcompile.errors import UnsupportedFeatureError
    from fsmcompile.grammar import from_rules
    from fsmcompile.ir.nodes import Alt, Ref, Repeat, chars, literal, seq

    letters = Repeat(chars((97, 122)), 0, 300)
    rules = {"r": seq(literal("<"), letters, literal("x>"), Alt((Ref("r"), literal("."))))}
    with pytest.raises(UnsupportedFeatureError, match="can both read"):
        from_rules._grammar(RuleWriter(rules, 200_000, None), "r", None)
    grammar = from_rules.grammar_from_rules(rules, "r")
    assert sorted(t.dfa.num_states for t in grammar.terminals if t.dfa is not None) == [2, 604]


def test_the_key_of_extra_members_stays_with_its_comma_and_quotes() -> None:
    """The keys an object's extra members may take exclude every listed name: a large
    automaton, yet not a value to share. Written apart it would leave `,` a terminal of
    its own beside the listed members' `,"name":` (a lexing conflict, then a second
    LALR build); the writer sizes a difference by what it keeps."""
    from fsmcompile.compiler import ROOT_RULE, lower_spec
    from fsmcompile.grammar import from_rules

    names = [f"property_number_{i}" for i in range(40)]
    schema = {"type": "object", "properties": {name: {"type": "integer"} for name in names}}
    node, rules = lower_spec("json", schema, {})
    writer = RuleWriter({ROOT_RULE: node, **rules}, 200_000, None)
    assert writer.split_terminals == set()
    from_rules._grammar(writer, ROOT_RULE, None)  # no lexing conflict to retry from


def _count_lark_builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts lark builds from here on, as `load_lark_grammar` receives them."""
    from fsmcompile.grammar import loading

    builds: list[str] = []
    load = loading.load_lark_grammar

    def counted(text: str, *args: Any, **kwargs: Any) -> Any:
        builds.append(text)
        return load(text, *args, **kwargs)

    monkeypatch.setattr(loading, "load_lark_grammar", counted)
    return builds


def test_a_drop_no_priority_can_mend_is_refused_at_once(monkeypatch) -> None:
    """`<` is tried before `<a>` and drops it; tried first instead, `<a>` would swallow
    the `<` `a` that the other reading needs next. Raising its priority cannot help, so
    the grammar is refused after its first build, not rebuilt to find that out."""
    from fsmcompile.errors import UnsupportedFeatureError
    from fsmcompile.grammar import from_rules
    from fsmcompile.ir.nodes import Alt, Ref, literal, seq

    builds = _count_lark_builds(monkeypatch)
    rules = {
        "s": Alt(
            (seq(literal("<"), Ref("s"), literal(">")), seq(literal("["), Ref("r"), literal("]")))
        ),
        "r": Alt((seq(literal("<"), Ref("r"), literal(">")), literal("<a>"), literal("a"))),
    }
    with pytest.raises(UnsupportedFeatureError, match="can both read '<a'"):
        from_rules.grammar_from_rules(rules, "s")
    assert len(builds) == 1


def test_a_priority_round_sorts_the_contexts_as_lark_would_and_builds_once(monkeypatch) -> None:
    """`<` (T0) is tried before `<ab>` (T2) and drops it, so T2 gets priority 1. That
    changes only the order lark's lexer tries terminals, not the parse table: the round
    re-sorts the contexts without a second LALR build, and they come out as lark orders
    them for the text with the priority written in."""
    import re

    from fsmcompile.grammar import from_rules
    from fsmcompile.grammar.loading import load_lark_grammar
    from fsmcompile.ir.nodes import Alt, Ref, literal, seq

    rules = {
        "s": Alt((seq(literal("<"), Ref("s"), literal(">")), seq(literal("<ab>"), Ref("t")))),
        "t": Alt((literal("x"), seq(literal("["), Ref("t"), literal("]")))),
    }
    writer = RuleWriter(rules, 200_000, None)
    text = writer.text("s")
    # lark itself, reading the text with the priority written in.
    prioritized = load_lark_grammar(
        re.sub(r"^T2: /", "T2.1: /", text, flags=re.MULTILINE), {"start": START}
    )
    builds = _count_lark_builds(monkeypatch)
    grammar = from_rules.grammar_from_rules(rules, "s")
    assert len(builds) == 1
    assert grammar.contexts == prioritized.contexts
    assert any(
        c.terminals.index(2) < c.terminals.index(0)
        for c in grammar.contexts
        if 0 in c.terminals and 2 in c.terminals
    )
    for name in ("action", "goto", "context_of_state"):
        assert (getattr(grammar.table, name) == getattr(prioritized.table, name)).all()


FREE = {"type": "object"}
GENERATED_SHAPES = {
    "recursive": TREE,
    "free_form_extras": FREE_FORM,
    "bounded_array": {"type": "array", "items": {"type": "object"}, "minItems": 1, "maxItems": 4},
    "unbounded_array": {"type": "array", "items": {"type": "object"}, "minItems": 2},
    "long_object": {
        "type": "object",
        "properties": {f"p{i}": {"type": "object"} for i in range(20)},
        "required": [f"p{i}" for i in range(20)],
    },
}
"""Schemas whose generated grammars hold each construct the writer writes: repeats with
`*`, `+` and `?`, bounded-repeat helpers (`_x`) and long-sequence helpers (`_h`)."""
TWINS = "start: r0\nr0: r1 T1 | r2 T1 T2\nr1: T0 (T2 r1)?\nr2: T0 (T2 r1)?\n" + "".join(
    f"{t}: /\ue000{t}\ue001/\n" for t in ("T0", "T1", "T2")
)
"""Two copies of one rule that collide in the LALR table until merged."""
ORDERED = "start: r0\nr0: T1 | T10 | T2 r0\n" + "".join(
    f"{t}: /\ue000{t}\ue001/\n" for t in ("T1", "T10", "T2")
)
"""One lexer context of terminals whose names sort apart from lark's order (longest
pattern first)."""
HANDWRITTEN = {"twins": TWINS, "ordered": ORDERED}


@pytest.mark.parametrize("shape", [*sorted(GENERATED_SHAPES), *HANDWRITTEN])
def test_generated_text_is_analysed_as_lark_analyses_it(shape: str) -> None:
    """A generated grammar is read without lark's grammar parser (`generated.py`): its
    terminals, lexer contexts and parse table are those `Lark(text)` gives, and an LALR
    collision is the same error, which the twin merging reads."""
    from fsmcompile.errors import GrammarError
    from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir
    from fsmcompile.grammar import loading

    if shape in HANDWRITTEN:
        text = HANDWRITTEN[shape]
    else:
        lowered = schema_to_ir(GENERATED_SHAPES[shape], options=JsonOptions())
        rules = {"root": lowered.node, **lowered.rules}
        text = RuleWriter(rules, 200_000, None).text("root")
    merges = 0
    for _ in range(lalr_merge.MERGE_ROUNDS):
        try:
            ours = loading._analyse_generated(text, START)
        except GrammarError as exc:
            with pytest.raises(GrammarError) as lark_error:
                loading._analyse(text, START, False)
            assert "Reduce/Reduce collision" in exc.reason
            assert "Reduce/Reduce collision" in lark_error.value.reason
            merged = lalr_merge.merge_twins(text, exc.reason)
            assert merged is not None
            text = merged
            merges += 1
            continue
        lark_made = loading._analyse(text, START, False)
        assert ours.terminals == lark_made.terminals
        assert ours.contexts == lark_made.contexts
        for name in ("action", "goto", "rule_lhs", "rule_len", "context_of_state"):
            assert np.array_equal(getattr(ours.table, name), getattr(lark_made.table, name))
        assert ours.table.start_state == lark_made.table.start_state
        assert ours.table.end_state == lark_made.table.end_state
        assert merges == (shape == "twins")
        return
    pytest.fail("twins still collide")
