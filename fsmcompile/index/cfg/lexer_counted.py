"""Counted terminals in the lexer: which item moves the runtime may count, and which
automaton each generated terminal is lexed by (its bound counted or unrolled).

A string with `maxLength: 2000` unrolled is a 2000-state chain in every context's
lexer; counted, it is its unbounded automaton plus a bound the runtime checks.
"""

from __future__ import annotations

from fsmcompile.automaton import build_dfa
from fsmcompile.index.cfg.lexer import Countable
from fsmcompile.ir.nodes import Concat, Node, counted_at
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.tables.lark_grammar import Terminal


def item_starts(dfa: ByteDFA, node: Node) -> dict[int, frozenset[int]] | None:
    """For the automaton of `uncounted(node)`: state → the byte classes whose move starts
    an item of its counted repeat (`counted_at`), or None when a move cannot be told
    apart that way (a state both between items and inside one, or a class or target
    mixing both kinds).

    Walks the automaton alongside the item's own automaton from every state the items
    begin in; an item ends where the item automaton accepts (it is a prefix code).
    """
    at = counted_at(node)
    assert at is not None
    cut, counted = at
    prefix = build_dfa(Concat(node.items[:cut] if isinstance(node, Concat) else ()))
    unit = build_dfa(counted.item)
    reps = _joint_bytes(dfa, prefix, unit)
    entry: set[int] = set()
    seen = {(0, 0)}
    frontier = [(0, 0)]
    while frontier:
        q, p = frontier.pop()
        if prefix.accepting[p]:
            entry.add(q)
        for b in reps:
            nq = int(dfa.transitions[q, dfa.class_of_byte[b]])
            np_ = int(prefix.transitions[p, prefix.class_of_byte[b]])
            if nq >= 0 and np_ >= 0 and (nq, np_) not in seen:
                seen.add((nq, np_))
                frontier.append((nq, np_))
    starts: dict[int, set[int]] = {}
    inside: set[int] = set()
    pairs = {(q, 0) for q in entry}
    frontier = list(pairs)
    while frontier:
        q, u = frontier.pop()
        if u == 0:
            starts.setdefault(q, set())  # between items: its moves are classes, not states
        else:
            inside.add(q)
        for b in reps:
            nq = int(dfa.transitions[q, dfa.class_of_byte[b]])
            nu = int(unit.transitions[u, unit.class_of_byte[b]])
            if nu < 0:
                if u != 0 and nq >= 0:
                    return None  # the automaton reads on where the item cannot
                continue
            if nq < 0:
                continue
            if u == 0:
                starts[q].add(int(dfa.class_of_byte[b]))
            if unit.accepting[nu]:
                if (unit.transitions[nu] >= 0).any():
                    return None  # not a prefix code
                nu = 0
            if (nq, nu) not in pairs:
                pairs.add((nq, nu))
                frontier.append((nq, nu))
    if inside & set(starts):
        return None
    for q, classes in starts.items():
        kinds: dict[int, bool] = {}
        for b in range(256):
            c = int(dfa.class_of_byte[b])
            t = int(dfa.transitions[q, c])
            if t < 0:
                continue
            if kinds.setdefault(t, c in classes) != (c in classes):
                return None
        # A class whose bytes split between starts and not would have been two classes
        # of a minimal automaton, so classes are uniform; targets were checked above.
    return {q: frozenset(c) for q, c in starts.items()}


def _joint_bytes(*dfas: ByteDFA) -> list[int]:
    """One byte per class of the automata's joint byte partition."""
    keys = zip(*(d.class_of_byte.tolist() for d in dfas), strict=True)
    return list({k: b for b, k in enumerate(keys)}.values())


def terminal_automaton(
    term: Terminal, countable: Countable | None, max_states: int, deadline: float | None
) -> tuple[ByteDFA, dict[int, frozenset[int]] | None, int]:
    """(automaton, item starts or None, bound or -1) a generated terminal is lexed by: a
    counted one that `countable` accepts keeps its unbounded automaton and its bound for
    the runtime to count; else the bound is unrolled, as any other repetition."""
    assert term.dfa is not None
    counted = term.counted
    if counted is None:
        return term.dfa, None, -1
    assert counted.max is not None
    if countable is not None:
        moves = item_starts(term.dfa, term.node)
        if moves is not None and countable(term.dfa, moves, counted.max):
            return term.dfa, moves, counted.max
    return build_dfa(term.node, max_states=max_states, deadline=deadline), None, -1
