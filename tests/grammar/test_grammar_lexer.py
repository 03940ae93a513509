"""The lexer automaton cuts the first lexeme exactly where lark's own scanner does.

The reference is lark itself: for every lexer context, `BasicLexer.match` (Python `re`
over the alternation of the context's terminals, in lark's order) plus lark's
UnlessCallback renaming. Random strings are built from pieces of the grammar's terminals
so that prefixes, keywords and near-keywords come up often.
"""

from __future__ import annotations

import random
import re
from typing import Any

import numpy as np
import pytest
from grammar_checks import bundled_text
from grammar_corpus import TRICKY
from lark import Lark
from lark.lexer import TextSlice, Token
from support import random_moves

from fsmcompile.automaton.fragment import coreachable
from fsmcompile.compile_memos import current_memos
from fsmcompile.errors import BudgetExceededError
from fsmcompile.frontend.lark.terminals import equivalent_pattern
from fsmcompile.grammar import load_lark_grammar
from fsmcompile.index.cfg.lexer_build import build_lexer_automaton
from fsmcompile.index.cfg.lexer_from_dfas import build_lexer_from_dfas
from fsmcompile.index.cfg.lexer_from_nfa import build_lexer_from_nfa
from fsmcompile.index.cfg.lexer_minimize import minimized_blocks
from fsmcompile.index.cfg.lexer_shapes import lexer_shapes


def lark_first_lexeme(basic_lexer, text: str) -> tuple[int, str] | None:
    """(length, terminal) of the lexeme lark's scanner cuts at the start of `text`."""
    found = basic_lexer.match(TextSlice(text, 0, len(text)), 0)
    if not found:
        return None
    value, type_ = found
    callback = basic_lexer.callback.get(type_)
    if callback is not None:
        type_ = callback(Token(type_, value)).type
    return len(value), type_


def automaton_first_lexeme(lexer, names, context: int, text: str) -> tuple[int, str] | None:
    """The last labelled position before the automaton dies, and its label."""
    data = text.encode("utf-8")
    state = int(lexer.context_start[context])
    best = None
    for i, byte in enumerate(data):
        state = int(lexer.transitions[state, lexer.class_of_byte[byte]])
        if state < 0:
            break
        if lexer.label[state] >= 0:
            best = (len(data[: i + 1].decode("utf-8")), names[lexer.label[state]])
    return best


def _pieces(grammar: str) -> list[str]:
    """Literal fragments of the grammar's terminals and a few characters around them."""
    parser = Lark(grammar, parser="lalr")
    pieces = {" ", "\n", "x", "1", ".", "e", "-", '"', "\\", "'", "*", "/"}
    for terminal in parser.terminals:
        if terminal.pattern.type == "str":
            value = terminal.pattern.value
            pieces.update({value, value.upper(), value[:-1] or value, value + "x"})
    return sorted(pieces)


CASES = {
    **{f"tricky_{k}": v for k, v in TRICKY.items()},
    **{name: bundled_text(name) for name in ("json", "sql_select", "tool_call")},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_grammar_lexer_first_lexeme_matches_lark_scanner(name):
    grammar = CASES[name]
    reference = Lark(grammar, parser="lalr").parser
    loaded = load_lark_grammar(grammar)
    lexer = build_lexer_automaton(loaded, max_states=100_000)
    names = [t.name for t in loaded.terminals]
    # Another Lark instance numbers its states differently: match contexts by terminals.
    context_of_names = {
        (
            tuple(names[t] for t in ctx.terminals),
            tuple((names[r], tuple(names[k] for k in ks)) for r, ks in ctx.unless),
        ): k
        for k, ctx in enumerate(loaded.contexts)
    }
    context_of_lexer = {}
    for basic in reference.lexer.lexers.values():
        scanner = tuple(t.name for t in basic.scanner.terminals)
        unless = tuple(
            (r, tuple(t.name for t in cb.scanner.terminals))
            for r, cb in sorted(basic.callback.items())
            if hasattr(cb, "scanner")
        )
        context_of_lexer.setdefault(id(basic), (basic, context_of_names[scanner, unless]))
    pieces = _pieces(grammar)
    rng = random.Random(1)
    for basic, context in context_of_lexer.values():
        for _ in range(150):
            text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 5)))
            expected = lark_first_lexeme(basic, text)
            got = automaton_first_lexeme(lexer, names, context, text)
            assert got == expected, f"context {context}, {text!r}: lark {expected}, got {got}"


@pytest.mark.parametrize("alphabet", ['"\\a\n', '"\\"\\\\a'])
def test_grammar_escaped_string_rewrite_matches_lark_pattern(alphabet):
    lark_pattern = r'".*?(?<!\\)(\\\\)*?"'
    ours = re.compile(equivalent_pattern(lark_pattern))
    theirs = re.compile(lark_pattern)
    rng = random.Random(2)
    for _ in range(3000):
        text = '"' + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        a, b = theirs.match(text), ours.match(text)
        assert (a and a.group()) == (b and b.group()), repr(text)


def test_grammar_c_comment_rewrite_matches_lark_pattern():
    lark_pattern = "/\\*(.|\n)*?\\*/"
    ours = re.compile(equivalent_pattern(lark_pattern))
    theirs = re.compile(lark_pattern)
    rng = random.Random(3)
    for _ in range(3000):
        text = "/*" + "".join(rng.choice("*/a\n") for _ in range(rng.randint(0, 8)))
        a, b = theirs.match(text), ours.match(text)
        assert (a and a.group()) == (b and b.group()), repr(text)


def test_grammar_lexer_shapes_merge_ignored_states_across_contexts():
    grammar = load_lark_grammar(bundled_text("sql_select"))
    lexer = build_lexer_automaton(grammar, max_states=100_000)
    shapes = lexer_shapes(lexer)
    # Each context has its own copy of the comment and whitespace states (lark restarts
    # in that context after them); the walk sees one.
    assert shapes.num_shapes < lexer.num_states
    comment = [t.name for t in grammar.terminals].index("COMMENT")
    tagged = lexer.label == comment
    assert len(set(shapes.of_state[tagged].tolist())) == 1 < int(tagged.sum())


def _reference_blocks(trans: np.ndarray, output: np.ndarray) -> list[int]:
    """Moore's refinement by sorting whole signature rows, blocks by first state."""
    block = np.unique(output, return_inverse=True)[1].reshape(-1)
    while True:
        nxt = np.where(trans >= 0, block[np.maximum(trans, 0)], -1)
        sig = np.concatenate([block[:, None], nxt], axis=1)
        _, first, new = np.unique(sig, axis=0, return_index=True, return_inverse=True)
        new = new.reshape(-1)
        if first.shape[0] == len(set(block.tolist())):
            break
        block = new
    ids: dict[int, int] = {}
    return [ids.setdefault(int(b), len(ids)) for b in block]


def _chains(length: int) -> tuple[np.ndarray, np.ndarray]:
    """Two chains of `length` moves on one byte class, told apart only by their last
    states' outputs, and a cycle of `length` states with one output apart: each round
    of Moore refinement splits one state."""
    trans = np.full((3 * length + 2, 2), -1, dtype=np.int32)
    for chain in range(2):
        base = chain * (length + 1)
        trans[base : base + length, 0] = np.arange(base + 1, base + length + 1)
    cycle = 2 * length + 2
    trans[cycle : cycle + length, 1] = np.roll(np.arange(cycle, cycle + length), -1)
    output = np.zeros(trans.shape[0], dtype=np.int64)
    output[2 * length + 1] = 1  # the second chain's end
    output[cycle] = 2
    return trans, output


@pytest.mark.parametrize("seed", range(-1, 12))
def test_lexer_minimization_matches_a_sorting_reference(seed: int) -> None:
    """The automaton stage's minimizer on labels gives Moore's partition, blocks
    numbered by first state, on random tables and on chains that split one state per
    round."""
    if seed < 0:
        trans, output = _chains(200)
    else:
        trans = random_moves(seed, 60, 0.4)
        output = np.random.default_rng(seed + 100).integers(0, 3, size=trans.shape[0])
    assert minimized_blocks(trans, output).tolist() == _reference_blocks(trans, output)


def test_lexer_minimization_stops_at_the_deadline() -> None:
    trans, output = _chains(3)
    with pytest.raises(BudgetExceededError, match="minimizing the lexer"):
        minimized_blocks(trans, output, deadline=0.0)


@pytest.mark.parametrize("seed", range(12))
def test_co_reachable_matches_a_fixpoint(seed: int) -> None:
    rng = np.random.default_rng(seed)
    states, classes = int(rng.integers(1, 80)), int(rng.integers(1, 5))
    trans = rng.integers(-1, states, size=(states, classes)).astype(np.int32)
    trans[rng.random(trans.shape) < 0.6] = -1
    seeds = rng.random(states) < 0.1
    live = seeds.copy()
    while True:
        reach = live | np.where(trans >= 0, live[np.maximum(trans, 0)], False).any(axis=1)
        if np.array_equal(reach, live):
            break
        live = reach
    assert np.array_equal(coreachable(trans, seeds), live)


GENERATED = {
    "objects": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": "^[0-9]{3}$"},
            "tags": {"type": "array", "items": {"enum": ["a", "ab", "abc"]}},
            "note": {"type": "string", "maxLength": 40},
            "size": {"type": "integer", "minimum": 1},
        },
        "required": ["id"],
    },
    "overlapping_keys": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "ab": {}, "abc": {"type": "boolean"}},
        "additionalProperties": {"type": "string", "maxLength": 12},
    },
    "recursive": {
        "$defs": {"node": {"type": "object", "properties": {"kids": {"items": {"$ref": "#"}}}}},
        "anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}],
    },
}


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_grammar_lexer_from_automata_equals_the_nfa_construction(name, gpt2) -> None:
    # Generated terminals have automata, which the lexer walks as threads directly; the
    # byte-NFA construction is the general one. Both must give the same lexer, array for
    # array, counted strings included.
    from fsmcompile.compiler import ROOT_RULE, lower_spec
    from fsmcompile.grammar.from_rules import grammar_from_rules
    from fsmcompile.index.cfg.fresh_items import countable_for

    node, rules = lower_spec("json", GENERATED[name], {})
    grammar = grammar_from_rules({ROOT_RULE: node, **rules}, ROOT_RULE, max_states=100_000)
    countable = countable_for(gpt2, grammar)
    direct = build_lexer_from_dfas(grammar, 100_000, None, countable)
    general = build_lexer_from_nfa(grammar, 100_000, None, countable)
    assert direct.num_states > 20
    for field in ("transitions", "class_of_byte", "label", "context_start", "char_bound"):
        assert np.array_equal(getattr(direct, field), getattr(general, field)), field
    assert np.array_equal(direct.char_start, general.char_start)
    assert np.array_equal(direct.restart_context, general.restart_context)


def test_lexer_from_automata_drops_threads_behind_an_ended_lexeme(gpt2) -> None:
    # Two terminals of one context where one's lexeme runs on into the other's: past the
    # end of the first in priority order, the lower one is dropped, as the NFA
    # construction's leftmost-first closure drops it.
    from fsmcompile.automaton import build_dfa
    from fsmcompile.frontend.regex.parser import parse_regex

    # Generated terminals are tried longest name first: TAI, then NA, then W.
    patterns = {"W": "ab", "NA": "a[a-z]*", "TAI": "[0-9]+"}
    generated = {}
    for name, pattern in patterns.items():
        node = parse_regex(pattern)
        generated[name] = (node, build_dfa(node))
    text = "start: W TAI | NA\n" + "".join(f"{n}: /\ue000{n}\ue001/\n" for n in patterns)
    from fsmcompile.grammar.loading import load_lark_grammar as load_generated

    grammar = load_generated(text, generated=generated)
    direct = build_lexer_from_dfas(grammar, 1_000, None, None)
    general = build_lexer_from_nfa(grammar, 1_000, None, None)
    assert np.array_equal(direct.transitions, general.transitions)
    assert np.array_equal(direct.label, general.label)
    assert np.array_equal(direct.context_start, general.context_start)


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_lexer_without_tags_or_counts_is_already_its_own_shapes(name, gpt2) -> None:
    # `lexer_shapes` skips its minimization for such lexers: minimizing again on labels
    # alone must merge nothing.
    from fsmcompile.compiler import ROOT_RULE, lower_spec
    from fsmcompile.grammar.from_rules import grammar_from_rules

    node, rules = lower_spec("json", GENERATED[name], {})
    grammar = grammar_from_rules({ROOT_RULE: node, **rules}, ROOT_RULE, max_states=100_000)
    lexer = build_lexer_automaton(grammar, max_states=100_000)  # counts nothing
    assert (lexer.restart_context < 0).all() and (lexer.char_bound < 0).all()
    block = minimized_blocks(lexer.transitions, lexer.label.astype(np.int64))
    assert np.array_equal(block, np.arange(lexer.num_states))
    shapes = lexer_shapes(lexer)
    assert np.array_equal(shapes.of_state, np.arange(lexer.num_states))
    assert np.array_equal(shapes.transitions, lexer.transitions)


def _accepts(index, vocab, text: str) -> bool:
    """Every token of the real tokenization is in the mask (and `advance` agrees), then EOS."""
    from fsmcompile.runtime.matcher import matcher_for
    from fsmcompile.tables.bits import unpack_row

    matcher = matcher_for(index)
    for token in [*vocab.encode(text), vocab.eos_token_ids[0]]:
        allowed = bool(unpack_row(matcher._row(), vocab.size)[token])
        assert matcher.advance(token) is allowed
        if not allowed:
            return False
    return True


def test_a_counted_item_starting_beside_another_lexeme_unrolls_that_terminal_only(gpt2) -> None:
    # `(,a){2,40}` and `,a,b` share a lexer context, and after `,a` the counted lexeme
    # starts its second item while the other one is still alive: no one bound fits that
    # state, so that terminal's bound is unrolled, and only that one: `(;b){0,50}` keeps
    # its count. Without the other lexeme beside it, the first is counted too.
    from fsmcompile.grammar.from_rules import grammar_from_rules
    from fsmcompile.index.cfg.build import build_grammar_index
    from fsmcompile.index.cfg.fresh_items import countable_for
    from fsmcompile.ir.nodes import Alt, Concat, CountedRepeat, chars, literal

    shared = CountedRepeat(literal(",a"), 2, 40)
    alone = CountedRepeat(literal(";b"), 0, 50)
    grammars = {}
    for name, middle in (("beside", Alt((shared, literal(",a,b")))), ("alone", shared)):
        root = Concat((chars("["), middle, chars("]"), alone))
        grammars[name] = grammar_from_rules({"root": root}, "root", max_states=100_000)
    bounds = {
        name: set(
            build_lexer_automaton(
                g, max_states=100_000, countable=countable_for(gpt2, g)
            ).char_bound.tolist()
        )
        for name, g in grammars.items()
    }
    assert bounds == {"beside": {-1, 50}, "alone": {-1, 40, 50}}

    index = build_grammar_index(grammars["beside"], gpt2, spec_hash="t", max_states=100_000)
    for items, ok in ((1, False), (2, True), (40, True), (41, False)):
        assert _accepts(index, gpt2, "[" + ",a" * items + "]") is ok, items
    assert _accepts(index, gpt2, "[,a,b]")
    for items, ok in ((0, True), (50, True), (51, False)):
        assert _accepts(index, gpt2, "[,a,a]" + ";b" * items) is ok, items


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_lexing_check_rounds_share_their_grammars_pair_answers(name, monkeypatch) -> None:
    # A priority round checks the same terminals and table again in another order: the
    # answers of the round before carry over (`answers`), even when the process-wide memo
    # no longer holds them, so the round computes no pair twice.
    from fsmcompile.compiler import ROOT_RULE, lower_spec
    from fsmcompile.grammar import from_rules, lexing_check

    node, rules = lower_spec("json", GENERATED[name], {})
    grammar = from_rules.grammar_from_rules(
        {ROOT_RULE: node, **rules}, ROOT_RULE, max_states=100_000
    )
    computed: list[object] = []
    real = lexing_check.lexing_conflict

    def counted(*args: Any) -> Any:
        computed.append(args)
        return real(*args)

    monkeypatch.setattr(lexing_check, "lexing_conflict", counted)
    current_memos().conflicts.clear()
    answers: lexing_check.Answers = {}
    lexing_check.check_contexts(grammar, answers)
    assert computed and len(answers) >= len(computed)
    first = len(computed)
    current_memos().conflicts.clear()
    lexing_check.check_contexts(grammar, answers)
    assert len(computed) == first
    lexing_check.check_contexts(grammar)  # no answers given: all computed again
    assert len(computed) == 2 * first
