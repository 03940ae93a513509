"""Rules with refs → grammar index: refused, or exact, on generated rule sets.

The rules are small recursive languages over `<>ab` whose literals often start the way a
bracketed ref does (`<ab>` beside `<` r `>`), the overlap that makes a lexer drop or cut
a lexeme wrongly. The grammar route may refuse such rules (`UnsupportedFeatureError`);
when it builds them, its index must decide every text as the rules unrolled into a DFA
do. Each ref is bracketed, so a text of n bytes nests at most n/2 deep and the unrolled
DFA is exact for it.
"""

from __future__ import annotations

import random
from functools import cache

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support import load_vocabulary

from fsmcompile.automaton import ByteDFA, build_dfa
from fsmcompile.errors import UnsupportedFeatureError
from fsmcompile.grammar.from_rules import grammar_from_rules
from fsmcompile.index.cfg.build import build_grammar_index
from fsmcompile.ir.nodes import Alt, Node, Ref, literal, seq
from fsmcompile.ir.rules import expand_rules
from fsmcompile.runtime.matcher import matcher_for

NAMES = ("s", "r")
MAX_TEXT = 8


def _item(name: str | None, text: str) -> Node:
    return seq(literal("<"), Ref(name), literal(">")) if name is not None else literal(text)


@st.composite
def rule_sets(draw: st.DrawFn) -> dict[str, Node]:
    """Two rules, each a choice of sequences of literals and bracketed refs, with one
    ref-free member so that every rule can finish."""
    texts = st.text("<>ab", min_size=1, max_size=4) | st.text("<>ab", max_size=3).map("<".__add__)
    items = st.tuples(st.sampled_from([None, None, *NAMES]), texts)
    rules: dict[str, Node] = {}
    for name in NAMES:
        members = [literal(draw(texts))]
        for parts in draw(st.lists(st.lists(items, min_size=1, max_size=3), max_size=2)):
            members.append(seq(*(_item(ref, text) for ref, text in parts)))
        rules[name] = Alt(tuple(members))
    return rules


@cache
def vocabulary():  # type: ignore[no-untyped-def]
    return load_vocabulary("gpt2")


def _unrolled(rules: dict[str, Node]) -> ByteDFA:
    return build_dfa(expand_rules(rules["s"], rules, MAX_TEXT // 2 + 1))


def _texts(dfa: ByteDFA, rng: random.Random) -> set[bytes]:
    """Random texts, and texts of the language from random walks through `dfa`."""
    out = {bytes(rng.choice(b"<>ab[]") for _ in range(rng.randint(0, MAX_TEXT))) for _ in range(40)}
    bytes_of_class = {}
    for byte in b"<>ab[]":
        bytes_of_class.setdefault(int(dfa.class_of_byte[byte]), byte)
    for _ in range(40):
        state, text = 0, bytearray()
        while len(text) < MAX_TEXT:
            if dfa.accepting[state] and rng.random() < 0.3:
                break
            moves = [(b, int(dfa.transitions[state, c])) for c, b in bytes_of_class.items()]
            moves = [(b, t) for b, t in moves if t >= 0]
            if not moves:
                break
            byte, state = rng.choice(moves)
            text.append(byte)
        out.add(bytes(text))
    return out


def _accepted(index, text: bytes) -> bool:  # type: ignore[no-untyped-def]
    vocab = vocabulary()
    matcher = matcher_for(index)
    for byte in text:
        (token,) = vocab.encode(chr(byte))
        if not matcher.advance(token):
            return False
    return bool(matcher.is_accepting())


DROPPED = {
    # `<` is written (and numbered) first, for s; lark then tries it before r's `<ab>`,
    # and a lexer that cut at `<` would never read `[<ab>]`.
    "s": Alt(
        (seq(literal("<"), Ref("s"), literal(">")), seq(literal("["), Ref("r"), literal("]")))
    ),
    "r": Alt((seq(literal("<"), Ref("r"), literal(">")), literal("<ab>"))),
}


def test_rules_with_a_shift_reduce_conflict_are_refused() -> None:
    """After `<<`, a `>` may close r (shift) or end the inner s (reduce): lark would shift,
    and the grammar would refuse `<<>`, a text of s."""
    rules = {
        "s": Alt(
            (
                literal("<"),
                seq(literal("<"), Ref("s"), literal(">")),
                seq(literal("<"), Ref("r"), literal(">")),
            )
        ),
        "r": literal(">"),
    }
    assert _unrolled(rules).matches(b"<<>")
    with pytest.raises(UnsupportedFeatureError, match="Shift/Reduce"):
        grammar_from_rules(rules, "s")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rule_sets(), st.randoms(use_true_random=False))
@example(DROPPED, random.Random(0))
def test_a_grammar_built_from_rules_decides_texts_as_its_unrolled_rules(
    rules: dict[str, Node], rng: random.Random
) -> None:
    try:
        grammar = grammar_from_rules(rules, "s")
    except UnsupportedFeatureError:
        return  # refused: the compiler then unrolls the rules itself
    index = build_grammar_index(grammar, vocabulary(), spec_hash="property", max_states=10_000)
    dfa = _unrolled(rules)
    for text in sorted(_texts(dfa, rng)):
        assert _accepted(index, text) == dfa.matches(text), text
