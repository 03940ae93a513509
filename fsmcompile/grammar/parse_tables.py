"""lark's LALR parse table and contextual lexers → canonical dense arrays.

lark numbers its parser states in hash order, so two processes loading one grammar get
different numbers. The table is renumbered here (states breadth-first from the start
state, symbols and rules by name) so equal grammars give equal indexes and artifacts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from fsmcompile.budget import check_deadline
from fsmcompile.tables.lark_grammar import LexerContext, ParseTable, reduce_action, shift_action

_STATES_PER_CHECK = 64
"""Parser states read between deadline checks: a state of a large grammar holds
thousands of actions, and building its lexer context compiles a regex of its terminals."""


def _rule_key(rule: Any) -> tuple[str, tuple[str, ...], int]:
    return rule.origin.name, tuple(s.name for s in rule.expansion), rule.order


def _state_order(
    states: dict[int, dict[str, tuple[Any, Any]]], start: int, symbol_rank: dict[str, int]
) -> list[int]:
    """States breadth-first from `start`, following shifts and gotos in symbol order."""
    order: list[int] = []
    seen = {start}
    queue = deque([start])
    while queue:
        if len(order) % _STATES_PER_CHECK == 0:
            check_deadline("ordering the parser states")
        state = queue.popleft()
        order.append(state)
        for symbol in sorted(states[state], key=symbol_rank.__getitem__):
            kind, arg = states[state][symbol]
            if kind.name == "Shift" and arg not in seen:
                seen.add(arg)
                queue.append(arg)
    order.extend(sorted(set(states) - seen))  # unreachable from this start (other starts)
    return order


def _context(lexer: Any, names: dict[str, int]) -> LexerContext:
    scanner = lexer.scanner  # builds lark's scanner and its UnlessCallbacks
    unless = tuple(
        (names[type_], tuple(names[t.name] for t in callback.scanner.terminals))
        for type_, callback in sorted(lexer.callback.items())
        if hasattr(callback, "scanner")
    )
    return LexerContext(terminals=tuple(names[t.name] for t in scanner.terminals), unless=unless)


def extract_tables(
    parser_frontend: Any, names: dict[str, int], start: str
) -> tuple[tuple[LexerContext, ...], ParseTable]:
    """The distinct lexer contexts and the parse table of a built `Lark(...).parser`.

    Args:
        parser_frontend: lark's ParsingFrontend (LALR, contextual lexer).
        names: terminal name → terminal id; `$END` gets column len(names).
        start: the start rule.
    """
    table = parser_frontend.parser.parser.parse_table
    lexers = parser_frontend.lexer.lexers
    return tables_from_states(
        table.states,
        table.start_states[start],
        table.end_states[start],
        names,
        lambda old: _context(lexers[old], names),
    )


def tables_from_states(
    states: dict[int, dict[str, tuple[Any, Any]]],
    start_state: int,
    end_state: int,
    names: dict[str, int],
    context_of: Callable[[int], LexerContext],
) -> tuple[tuple[LexerContext, ...], ParseTable]:
    """The distinct lexer contexts and the canonical parse table of lark's LALR states.

    Args:
        states: lark's `IntParseTable.states` (state → symbol → (action, target)).
        start_state / end_state: lark's start and end states of the start rule.
        names: terminal name → terminal id; `$END` gets column len(names).
        context_of: the lexer context of one of lark's states.
    """
    symbols = {s for acts in states.values() for s in acts}
    rules = sorted(
        {arg for acts in states.values() for kind, arg in acts.values() if kind.name != "Shift"},
        key=_rule_key,
    )
    nonterminal_names = sorted(
        {s for s in symbols if s not in names and s != "$END"} | {r.origin.name for r in rules}
    )
    nonterminals = {name: i for i, name in enumerate(nonterminal_names)}
    end = len(names)
    symbol_rank = {**names, "$END": end, **{n: end + 1 + i for n, i in nonterminals.items()}}
    order = _state_order(states, int(start_state), symbol_rank)
    new_id = {old: new for new, old in enumerate(order)}
    rule_id = {rule: i for i, rule in enumerate(rules)}

    action = np.zeros((len(order), end + 1), dtype=np.int32)
    goto = np.full((len(order), max(len(nonterminals), 1)), -1, dtype=np.int32)
    for count, (old, acts) in enumerate(states.items()):
        if count % _STATES_PER_CHECK == 0:
            check_deadline("reading the parse table")
        state = new_id[old]
        for symbol, (kind, arg) in acts.items():
            if symbol in nonterminals:
                goto[state, nonterminals[symbol]] = new_id[arg]
            elif kind.name == "Shift":
                action[state, symbol_rank[symbol]] = shift_action(new_id[arg])
            else:
                action[state, symbol_rank[symbol]] = reduce_action(rule_id[arg])
    contexts: dict[LexerContext, int] = {}
    context_of_state = np.zeros(len(order), dtype=np.int32)
    for state, old in enumerate(order):
        if state % _STATES_PER_CHECK == 0:
            check_deadline("reading the lexer contexts")
        context_of_state[state] = contexts.setdefault(context_of(old), len(contexts))
    return tuple(contexts), ParseTable(
        action=action,
        goto=goto,
        rule_lhs=np.array([nonterminals[r.origin.name] for r in rules], dtype=np.int32),
        rule_len=np.array([len(r.expansion) for r in rules], dtype=np.int32),
        start_state=new_id[int(start_state)],
        end_state=new_id[int(end_state)],
        context_of_state=context_of_state,
    )
