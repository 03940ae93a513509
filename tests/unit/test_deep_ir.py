"""IR deeper than Python's recursion limit compiles: the walkers keep their own stacks.

An object's optional members are a chain in which each member chooses between itself and
the rest, two IR levels per member, so a schema with a few hundred of them is deeper than
the recursion limit. Each chain here is longer than the limit itself, but for the one
that goes through lark's LALR analysis, which recurses once per rule.
"""

from __future__ import annotations

import sys
import time

import pytest

from fsmcompile.automaton import build_dfa
from fsmcompile.budget import compile_deadline
from fsmcompile.errors import BudgetExceededError
from fsmcompile.grammar.from_rules import grammar_from_rules
from fsmcompile.grammar.rule_writer import RuleWriter
from fsmcompile.ir.dag_walk import Call, run
from fsmcompile.ir.nodes import EMPTY, Alt, CharSet, Concat, Node, Ref, Repeat, literal
from fsmcompile.ir.rules import expand_rules, prune_rules, references
from fsmcompile.tables.lark_grammar import LarkGrammar

VALUE = {"v": Alt((literal("0"), Concat((literal("["), Ref("v"), literal("]")))))}
"""`0`, `[0]`, `[[0]]`, ...: a rule that refers to itself."""


def chain(count: int, *, last: Node = EMPTY, keys: tuple[str, ...] = (",",)) -> Node:
    """`<`, then up to `count` optional members in order, each one of `keys` and a `v`
    value, then `>`. `last` ends the chain; with several keys every member's rest is
    shared by its options (one grammar rule per member)."""
    node = last
    for _ in range(count):
        node = Alt((*(Concat((literal(key), Ref("v"), node)) for key in keys), EMPTY))
    return Concat((literal("<"), node, literal(">")))


def deeper_than_the_limit() -> int:
    return sys.getrecursionlimit() + 100


def test_prune_rules_drops_a_dead_rule_at_the_end_of_a_deep_chain() -> None:
    dead = {"dead": Concat((literal("x"), Ref("dead")))}  # needs itself: never finishes
    root = chain(deeper_than_the_limit(), last=Alt((Ref("dead"), EMPTY)))
    pruned, rules = prune_rules(root, {**VALUE, **dead})
    assert set(rules) == {"v"}
    assert references(pruned) == {"v"}


def test_expand_rules_and_build_dfa_unroll_a_deep_chain() -> None:
    count = deeper_than_the_limit()
    dfa = build_dfa(expand_rules(chain(count), VALUE, 2))
    assert dfa.matches(b"<,0,[0]>")
    assert dfa.matches(b"<" + b",0" * count + b">")
    assert not dfa.matches(b"<" + b",0" * (count + 1) + b">")
    assert not dfa.matches(b"<,[[0]]>")  # three refs deep


def test_a_deep_chain_is_written_as_grammar_text() -> None:
    """One rule per member, written without recursion. (lark's own LALR analysis
    recurses once per rule of such a chain, so the whole build is tested shallower.)"""
    count = deeper_than_the_limit()
    text = RuleWriter({"root": chain(count, keys=("a", "b")), **VALUE}, 200_000, None).text("root")
    assert len(text.splitlines()) > count


def test_a_long_chain_compiles_as_a_grammar() -> None:
    root = chain(sys.getrecursionlimit() // 4, keys=("a", "b"))
    assert isinstance(grammar_from_rules({"root": root, **VALUE}, "root"), LarkGrammar)


def test_run_propagates_an_error_through_the_callers_that_do_not_catch_it() -> None:
    def depth(n: int) -> Call[int]:
        if n == 0:
            raise ValueError("bottom")
        return 1 + (yield depth(n - 1))

    def caught(n: int) -> Call[str]:
        try:
            yield depth(n)
        except ValueError as exc:
            return str(exc)
        return "not raised"

    assert run(caught(deeper_than_the_limit())) == "bottom"
    with pytest.raises(ValueError, match="bottom"):
        run(depth(deeper_than_the_limit()))


def test_run_stops_at_the_compile_deadline() -> None:
    """A walk that meets a shared sub-tree once per path takes exponential time: `run`
    checks the compile's deadline as `fold` does, so the compile's budget still holds."""

    def paths(n: int) -> Call[int]:
        if n == 0:
            return 1
        return (yield paths(n - 1)) + (yield paths(n - 1))

    started = time.monotonic()
    with compile_deadline(started + 0.2), pytest.raises(BudgetExceededError, match="timed out"):
        run(paths(60))
    assert time.monotonic() - started < 5


def test_a_shared_rest_split_around_wide_values_is_written_once() -> None:
    """Optional members whose values are wide strings (written as terminals of their
    own) and whose rest is shared by both keys of each member: the rest is a rule of its
    own, so 60 members write a few hundred lines, not 2**60 copies of the last member."""
    wide = Concat((literal('"'), Repeat(CharSet(((97, 122),)), 0, 300), literal('"')))
    node: Node = EMPTY
    for _ in range(60):
        node = Alt((*(Concat((literal(key), wide, node)) for key in ("a", "b")), EMPTY))
    with compile_deadline(time.monotonic() + 20):
        text = RuleWriter({"root": Concat((literal("<"), node, literal(">")))}, 200_000, None).text(
            "root"
        )
    assert 60 <= len(text.splitlines()) < 1_000
