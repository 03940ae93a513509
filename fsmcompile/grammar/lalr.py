"""LALR(1) states of lark rules, built as lark's `LALR_Analyzer` builds them.

Generated grammars (`generated.py`) and users' Lark grammars (`loading.py`, as lark's
`LALR_Parser` plugin) both take their tables from here.

lark's analysis works on `Symbol`, `Rule` and `RulePtr` objects whose hashing and
comparison are Python methods; a WashingtonPost schema's grammar (a thousand rules)
spent over a second in them, and the SQL grammar's load was half lark's analysis. Here
symbols, rules and LR(0) items are integers, while the steps stay lark's: the LR(0) item
sets, DeRemer and Pennello's reads/includes/lookback relations (lark's reading of them,
including items past their first symbol), the same digraph traversal with the same set
sharing (a set cell per relation node, shared where lark shares the set object), then
the actions, conflicts settled as lark settles them. The first two run in C
(`native/lalr_lr0.c`: on integers in Python they still took 0.2-0.3 s of a WashingtonPost
schema's build, per build); `tests/lalr_reference.py` keeps them in Python as their
definition. The states are the ones lark builds, numbered breadth-first
(`tables_from_states` renumbers either), and a conflict raises lark's `GrammarError`
with lark's message, which `lalr_merge.merge_twins` reads. Tests compare the tables
with lark's on every generated shape, the bundled grammars and random grammars.

Every step honours the running compile's deadline (`compile_deadline`): the C steps take
it and read the clock every thousand steps of work, as a grammar whose every state reads
every terminal (a rule of thousands of keywords) keeps them busy for seconds; the Python
step checks it per state.

Reduce/reduce collisions are reported before a shift/reduce conflict wherever both
occur: lark meets its states in hash order and so reports either, while merging twin
rules (what a collision message leads to) can only help.
"""

from __future__ import annotations

import math
import time
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from fsmcompile import _native
from fsmcompile.budget import check_deadline, seconds_left

__all__ = ["LalrStates", "lalr_states"]


@dataclass(frozen=True, slots=True)
class LalrStates:
    """What `LALR_Analyzer.parse_table` holds for one start rule (an `IntParseTable`)."""

    states: dict[int, dict[str, tuple[Any, Any]]]
    """Per state, symbol name → (lark's Shift, target state) or (lark's Reduce, Rule)."""
    start_states: dict[str, int]
    end_states: dict[str, int]


def lalr_states(rules: Sequence[Any], start: str, *, strict: bool = True) -> LalrStates:
    """The LALR(1) states of lark `Rule`s, as lark's analysis builds them.

    A reduce/reduce collision goes to the rule of highest priority when one is higher than
    the rest, as in lark; a shift/reduce conflict raises with `strict` and shifts without
    (lark's default, which a user's grammar may rely on).

    Raises:
        lark.exceptions.GrammarError: rules defined twice, an undefined rule, an LALR
            reduce/reduce collision or (strict) a shift/reduce conflict (lark's messages).
        BudgetExceededError: the compile's deadline passed (limit "timeout_s").
    """
    grammar = _numbered(rules, start)
    columns = _columns(grammar)
    lr0 = _lr0(grammar, columns)
    states = _actions(grammar, lr0, _lookaheads(grammar, columns, lr0), strict)
    return LalrStates(states, {start: 0}, {start: _end_state(grammar, lr0)})


@dataclass(frozen=True, slots=True)
class _Grammar:
    """The rules on integers: nonterminals 0..N-1 (the root rule's last), terminals from
    N on ($END first); LR(0) item `item_base[r] + dot` of rule r."""

    rules: list[Any]  # lark's Rules, the root rule last
    symbols: list[Any]  # lark's Symbols by id
    num_nt: int
    start: int
    rule_origin: list[int]
    rule_syms: list[tuple[int, ...]]
    nullable: list[bool]
    item_base: list[int]
    item_rule: list[int]
    item_next: list[int]  # the symbol after the dot, or -1


@dataclass(frozen=True, slots=True)
class _Lr0:
    """LR(0) item sets, breadth-first from the root's (state 0), as int32 columns (CSR by
    state)."""

    closure_start: memoryview  # int32[S + 1]
    closure_items: memoryview  # per state, its items, sorted
    trans_start: memoryview  # int32[S + 1]
    trans_sym: memoryview  # per state, the symbols it moves on, first-seen order...
    trans_target: memoryview  # ...and the states they move to


@dataclass(frozen=True, slots=True)
class _Lookaheads:
    """Per state, lookahead symbol -> the rules reduced on it, as int32 columns: entries
    (CSR by state) in the order lark meets them, each with its rules (CSR by entry) in
    that order."""

    start: memoryview  # int32[S + 1]
    sym: memoryview  # int32[E]
    rule_start: memoryview  # int32[E + 1]
    rules: memoryview  # int32[...]


def _int32(column: bytearray) -> memoryview:
    """A column `_native.lalr_*` returned (native int32 bytes) as an int32 vector."""
    return memoryview(column).cast("i")


def _end_state(g: _Grammar, lr0: _Lr0) -> int:
    """The state the root's item reaches over the start symbol (lark's end state)."""
    first = lr0.trans_start[1]
    return int(lr0.trans_target[lr0.trans_sym[:first].tolist().index(g.start)])


def _numbered(rules: Sequence[Any], start: str) -> _Grammar:
    """Number the symbols and items of `rules` plus lark's LR(0) root rule
    (`$root_<start>: <start>`), refusing what lark's GrammarAnalyzer refuses."""
    from lark.exceptions import GrammarError
    from lark.grammar import NonTerminal, Rule, Terminal

    all_rules = [*rules, Rule(NonTerminal("$root_" + start), [NonTerminal(start)])]
    if len(set(rules)) != len(rules):
        twice = ", ".join(str(r) for r, n in Counter(rules).items() if n > 1)
        raise GrammarError(f"Rules defined twice: {twice}")
    nt_id: dict[str, int] = {}
    for rule in all_rules:
        nt_id.setdefault(rule.origin.name, len(nt_id))
    num_nt = len(nt_id)
    symbols: list[Any] = [None] * num_nt
    for rule in all_rules:
        symbols[nt_id[rule.origin.name]] = rule.origin
    term_id: dict[str, int] = {"$END": num_nt}
    symbols.append(Terminal("$END"))
    rule_syms: list[tuple[int, ...]] = []
    for rule in all_rules:
        ids: list[int] = []
        for sym in rule.expansion:
            if sym.is_term:
                if sym.name not in term_id:
                    term_id[sym.name] = len(symbols)
                    symbols.append(sym)
                ids.append(term_id[sym.name])
            elif sym.name in nt_id:
                ids.append(nt_id[sym.name])
            else:
                raise GrammarError(f"Using an undefined rule: {sym}")
        rule_syms.append(tuple(ids))
    rule_origin = [nt_id[rule.origin.name] for rule in all_rules]
    item_base: list[int] = []
    item_rule: list[int] = []
    item_next: list[int] = []
    for r, syms in enumerate(rule_syms):
        item_base.append(len(item_rule))
        item_rule.extend([r] * (len(syms) + 1))
        item_next.extend(syms)
        item_next.append(-1)
    return _Grammar(
        rules=all_rules,
        symbols=symbols,
        num_nt=num_nt,
        start=nt_id[start],
        rule_origin=rule_origin,
        rule_syms=rule_syms,
        nullable=_nullable(rule_origin, rule_syms, num_nt),
        item_base=item_base,
        item_rule=item_rule,
        item_next=item_next,
    )


_Columns: TypeAlias = "tuple[array[int], array[int], array[int], array[int], array[int]]"
"""The grammar as `_native.lalr_lr0` reads it: item_next, item_rule, item_base, rule_origin,
nullable."""


def _columns(g: _Grammar) -> _Columns:
    """`g`'s int32 columns (item_base with the item count appended)."""
    return (
        array("i", g.item_next),
        array("i", g.item_rule),
        array("i", [*g.item_base, len(g.item_rule)]),
        array("i", g.rule_origin),
        array("i", g.nullable),
    )


def _deadline() -> float:
    """The running compile's deadline as the C steps take it: a `time.monotonic()` value,
    inf for none."""
    left = seconds_left()
    return math.inf if left is None else time.monotonic() + left


def _finished(found: tuple[bytearray, ...] | None, what: str) -> tuple[memoryview, ...]:
    """A C step's int32 columns; None (it stopped at the deadline) raises the budget
    error."""
    if found is None:
        check_deadline(what)
        raise AssertionError(f"_native.lalr_* stopped {what} before the deadline")
    return tuple(map(_int32, found))


def _lr0(g: _Grammar, columns: _Columns) -> _Lr0:
    """The LR(0) item sets (lark's compute_lr0_states)."""
    root = g.item_base[len(g.rules) - 1]
    found = _native.lalr_lr0(*columns, g.num_nt, len(g.symbols), root, _deadline())
    return _Lr0(*_finished(found, "building the LR(0) states"))


def _lookaheads(g: _Grammar, columns: _Columns, lr0: _Lr0) -> _Lookaheads:
    """Per state, the lookahead terminals and the rules reduced on each (lark's
    compute_reads_relations, compute_includes_lookback and compute_lookaheads)."""
    found = _native.lalr_lookaheads(
        *columns,
        g.num_nt,
        len(g.symbols),
        g.start,
        lr0.closure_start,
        lr0.closure_items,
        lr0.trans_start,
        lr0.trans_sym,
        lr0.trans_target,
        _deadline(),
    )
    return _Lookaheads(*_finished(found, "computing the LALR lookaheads"))


def _actions(
    g: _Grammar, lr0: _Lr0, lookaheads: _Lookaheads, strict: bool
) -> dict[int, dict[str, tuple[Any, Any]]]:
    """Per state, symbol name -> action (lark's compute_lalr1_states): the shifts in
    transition order, then the reductions in lookahead order; a collision no priority
    settles raises lark's GrammarError, collisions before a (strict) conflict."""
    from lark.exceptions import GrammarError
    from lark.parsers.lalr_analysis import Reduce, Shift

    names = [sym.name for sym in g.symbols]
    trans_start, la_start = lr0.trans_start.tolist(), lookaheads.start.tolist()
    num_states = len(trans_start) - 1
    shift = [(Shift, state) for state in range(num_states)]
    states: dict[int, dict[str, tuple[Any, Any]]] = {}
    collisions: list[str] = []
    conflict: str | None = None
    for state in range(num_states):
        # Columns are read a state at a time: a dense grammar's are millions long, and
        # reading them whole would take the better part of a second with no clock read.
        check_deadline("building the parse table")
        moves = slice(trans_start[state], trans_start[state + 1])
        targets = lr0.trans_target[moves].tolist()
        actions = {
            names[sym]: shift[target]
            for sym, target in zip(lr0.trans_sym[moves].tolist(), targets, strict=True)
        }
        entries = slice(la_start[state], la_start[state + 1])
        rule_start = lookaheads.rule_start[entries.start : entries.stop + 1].tolist()
        base = rule_start[0]
        la_rules = lookaheads.rules[base : rule_start[-1]].tolist()
        for entry, la in enumerate(lookaheads.sym[entries].tolist()):
            reducing = la_rules[rule_start[entry] - base : rule_start[entry + 1] - base]
            if len(reducing) > 1:
                reducing = _by_priority(g, reducing)
            if len(reducing) > 1:
                named = "".join("\n\t- " + str(g.rules[r]) for r in reducing)
                collisions.append(
                    f"Reduce/Reduce collision in {g.symbols[la]} between the following rules: "
                    + named
                )
                continue
            rule = g.rules[reducing[0]]
            name = names[la]
            if name in actions:
                if strict and conflict is None:
                    conflict = (
                        f"Shift/Reduce conflict for terminal {name}. [strict-mode]\n * {rule}\n"
                    )
            else:
                actions[name] = (Reduce, rule)
        states[state] = actions
    if collisions:
        raise GrammarError("\n\n".join(collisions))
    if conflict is not None:
        raise GrammarError(conflict)
    return states


def _by_priority(g: _Grammar, reducing: list[int]) -> list[int]:
    """The one rule of highest priority when it is higher than every other, else all
    (lark settles a reduce/reduce collision so)."""
    ranked = sorted(reducing, key=lambda r: -(g.rules[r].options.priority or 0))
    top = g.rules[ranked[0]].options.priority or 0
    return ranked[:1] if top > (g.rules[ranked[1]].options.priority or 0) else reducing


def _nullable(rule_origin: list[int], rule_syms: list[tuple[int, ...]], num_nt: int) -> list[bool]:
    """Per nonterminal, whether it derives the empty text (terminals never do)."""
    nullable = [False] * num_nt
    changed = True
    while changed:
        changed = False
        for origin, syms in zip(rule_origin, rule_syms, strict=True):
            if not nullable[origin] and all(s < num_nt and nullable[s] for s in syms):
                nullable[origin] = changed = True
    return nullable
