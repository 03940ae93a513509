"""Rules of regex IR with `Ref`s → a `LarkGrammar` whose terminals match by longest match.

JSON Schema lowers recursive schemas and free-form (`{}`) values to rules: regex IR in
which `Ref(name)` stands for another rule's language. Everything between two refs is
regular, so each maximal ref-free piece becomes one terminal (the ref-free alternatives
of an `Alt` are joined into one; closing brackets after a ref end theirs: `_closer_apart`)
and the refs become the grammar's structure. A wide piece (a bounded string value) is
written apart from the text around it, so the members sharing it share one terminal
instead of each unrolling it into the lexer. lark builds the LALR table and the lexer
contexts over placeholder patterns; each terminal then gets its real automaton, matched
longest first: a JSON number or string cannot run on into the lexeme after it, so
longest match is the lexing JSON needs.

That lexing is exact only when the lexer's choice is forced: in each lexer context no
terminal's string may equal or be a prefix of another terminal's string. Grammars that
break this (overlapping `anyOf` branches around a recursive part) are refused with
`UnsupportedFeatureError` naming a text both could start with; so are LALR conflicts,
but for those between copies of one rule, which are merged (`merge_twins`). lark tries
a context's terminals in order (priority, then pattern length, then name), and one that
ends a lexeme drops those after it: where that would drop a terminal that reads on (`<`
before `<ab>`), the dropped one gets a higher priority and the contexts are sorted again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace

from fsmcompile.errors import UnsupportedFeatureError
from fsmcompile.grammar.generated import lexer_order
from fsmcompile.grammar.lalr_merge import lalr_grammar
from fsmcompile.grammar.lexing_check import Answers, LexingConflict, check_contexts
from fsmcompile.grammar.rule_writer import RuleWriter
from fsmcompile.ir.nodes import Node
from fsmcompile.tables.lark_grammar import LarkGrammar, LexerContext

__all__ = ["grammar_from_rules"]

logger = logging.getLogger(__name__)

_PRIORITY_ROUNDS = 4
"""Rounds of raised terminal priorities (`_grammar`) before a dropped terminal counts as
a real lexing conflict: a rank per round, and chains of terminals that each read on
further than the last are short."""


def grammar_from_rules(
    rules: Mapping[str, Node],
    start: str,
    *,
    max_states: int = 200_000,
    deadline: float | None = None,
) -> LarkGrammar:
    """The grammar of `rules` (name → IR over code points, `Ref`s between them) from `start`.

    Raises:
        UnsupportedFeatureError: two terminals of one lexer context overlap, an LALR
            conflict, or an intersection over a ref (see the module docstring).
        BudgetExceededError: a terminal's automaton passes `max_states`, or `deadline`
            passes (checked between LALR builds too).
    """
    writer = RuleWriter(rules, max_states, deadline)
    try:
        return _grammar(writer, start, deadline)
    except LexingConflict as exc:
        if not exc.terminals & writer.split_terminals:
            raise
    except UnsupportedFeatureError:
        if not writer.split_terminals:
            raise
    # A wide piece written apart may meet the text around it in a lexer context where
    # the joined terminal did not: the grammar as written before splitting. (A lexing
    # conflict between terminals no split wrote is there either way: no second try.)
    return _grammar(RuleWriter(rules, max_states, deadline, split_wide=False), start, deadline)


def _grammar(writer: RuleWriter, start: str, deadline: float | None) -> LarkGrammar:
    """The grammar of `writer`'s text; lexing conflicts where a terminal drops one that
    could read on (`LexingConflict.dropped`) are met by raising the dropped one's
    priority, in up to `_PRIORITY_ROUNDS` more rounds of the lexing check."""
    grammar = lalr_grammar(writer, writer.text(start), deadline)
    ranks: dict[str, int] = {}
    # Priorities change only the order of terminals in a context: the rounds share
    # the answers for (a, b, a first, followers), as terminal ids and the table stay.
    answers: Answers = {}
    for round_ in range(_PRIORITY_ROUNDS + 1):
        try:
            check_contexts(grammar, answers)
        except LexingConflict as exc:
            if not exc.dropped or round_ == _PRIORITY_ROUNDS:
                raise
            for first, dropped in exc.dropped:
                ranks[dropped] = max(ranks.get(dropped, 0), ranks.get(first, 0) + 1)
            grammar = _reprioritized(grammar, ranks)
            continue
        logger.debug(
            "generated grammar: %d rules, %d terminals, %d parser states",
            len(writer.instances) + writer.helpers,
            len(writer.generated),
            grammar.table.num_states,
        )
        return grammar
    raise AssertionError("unreachable: the last round returns or raises")


def _reprioritized(grammar: LarkGrammar, ranks: dict[str, int]) -> LarkGrammar:
    """`grammar` with each ranked terminal given its rank as lark priority.

    Terminal priorities only change the order a lexer context tries its terminals, not
    the parse table or which terminals a context holds, so the table is kept and each
    context re-sorted the way lark's lexer sorts them (`lexer_order`). Rebuilding the
    table instead cost seconds for a schema of hundreds of members.
    """
    key = lexer_order([t.name for t in grammar.terminals], ranks)
    contexts = tuple(
        LexerContext(tuple(sorted(c.terminals, key=key)), c.unless) for c in grammar.contexts
    )
    return replace(grammar, contexts=contexts)
