"""The LALR table of a written grammar, after merging the rule copies it cannot tell apart
(twins: copies of one rule written for different follow sets, used at one place)."""

from __future__ import annotations

import re
import time

from fsmcompile.errors import BudgetExceededError, GrammarError, UnsupportedFeatureError
from fsmcompile.grammar.rule_writer import START, RuleWriter
from fsmcompile.tables.lark_grammar import LarkGrammar

MERGE_ROUNDS = 8
"""Rounds of `merge_twins` before a grammar's LALR collisions count as real."""
_COLLISION = re.compile(
    r"Reduce/Reduce collision in .*? between the following rules: ?((?:\n\t- <[^\n]*>)+)"
)
_COLLIDING_RULE = re.compile(r"\n\t- <(\w+) :")
_NAME = re.compile(r"\b\w+\b")


def lalr_grammar(writer: RuleWriter, text: str, deadline: float | None) -> LarkGrammar:
    """The grammar of `text` after merging the rule copies its LALR table cannot tell
    apart."""
    from fsmcompile.grammar.loading import load_lark_grammar

    for _ in range(MERGE_ROUNDS):
        # Each round is a whole LALR build (seconds for a thousand rules): the deadline
        # is checked between them, as lark cannot be stopped inside one.
        if deadline is not None and time.monotonic() > deadline:
            raise BudgetExceededError(
                "compile timed out while building the grammar's LALR table",
                limit="timeout_s",
                value=0.0,
            )
        try:
            return load_lark_grammar(text, {"start": START}, generated=writer.generated)
        except GrammarError as exc:
            merged = merge_twins(text, exc.reason)
            if merged is None:
                raise UnsupportedFeatureError(
                    "the alternatives around a recursive or free-form part need more than "
                    "one lexeme of lookahead to tell apart (LALR(1)): "
                    f"{exc.reason.splitlines()[0]}"
                ) from exc
            text = merged
    raise UnsupportedFeatureError(
        "the alternatives around a recursive or free-form part still collide after "
        f"{MERGE_ROUNDS} rounds of merging rule copies (LALR(1))"
    )


def merge_twins(text: str, message: str) -> str | None:
    """`text` with each set of rules that collide in lark's LALR table (`message`) and
    have the same definition merged into one; None when no collision is between twins.

    The writer copies a rule per follow set. Where two copies are used at one place
    (overlapping `anyOf` branches that share a recursive member), LALR cannot choose
    which copy to reduce to, though both read the same texts. Merging them loses
    nothing: the parser state where they meet merges their follow sets already, and the
    lexing check that follows still refuses any context the merge makes ambiguous.
    """
    bodies: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, body = line.partition(": ")
        if sep:
            bodies[name] = body
    alias: dict[str, str] = {}
    for collision in _COLLISION.finditer(message):
        names = sorted(set(_COLLIDING_RULE.findall(collision.group(1))))
        by_body: dict[str, list[str]] = {}
        for name in names:
            if name in bodies:
                by_body.setdefault(bodies[name], []).append(alias.get(name, name))
        for twins in by_body.values():
            keep = min(twins)
            alias.update((twin, keep) for twin in twins if twin != keep)
    if not alias:
        return None

    def resolve(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    def rename(body: str) -> str:
        return _NAME.sub(lambda word: resolve(word.group(0)), body)

    return "".join(f"{n}: {rename(b)}\n" for n, b in bodies.items() if n not in alias)
