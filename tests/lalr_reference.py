"""The pure-Python LALR(1) analysis that `lalr.py`'s C steps (`native/lalr_lr0.c`) replaced: the
reference definition its tests compare against.

The LR(0) item sets (lark's compute_lr0_states), DeRemer and Pennello's reads, includes
and lookback relations with lark's `digraph` and its set sharing (a set is a one-item
list, shared where lark shares the set object), and the strict-mode actions, all on the
integer grammar of `lalr._numbered`. Lookahead sets are Python int bitsets (bit t:
terminal num_nt + t).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fsmcompile.grammar.lalr import LalrStates, _Grammar, _numbered
from fsmcompile.tables.bits import bit_positions


def lalr_states_reference(rules: Sequence[Any], start: str) -> LalrStates:
    """`lalr.lalr_states`, every step in Python."""
    grammar = _numbered(rules, start)
    lr0 = lr0_reference(grammar)
    states = actions_reference(grammar, lr0, lookaheads_reference(grammar, lr0))
    return LalrStates(states, {start: 0}, {start: lr0.trans[0][grammar.start]})


@dataclass(frozen=True, slots=True)
class Lr0:
    """LR(0) item sets, breadth-first from the root's (state 0)."""

    closure: list[list[int]]  # per state, its items, sorted
    trans: list[dict[int, int]]  # per state, symbol -> state


def lr0_reference(g: _Grammar) -> Lr0:
    """The LR(0) item sets (lark's compute_lr0_states)."""
    num_nt, item_base, item_next = g.num_nt, g.item_base, g.item_next
    by_origin: list[list[int]] = [[] for _ in range(num_nt)]
    for r, origin in enumerate(g.rule_origin):
        by_origin[origin].append(r)
    closures: dict[int, frozenset[int]] = {}

    def closure_of(nt: int) -> frozenset[int]:
        """The dot-0 items a state gains from an item before `nt` (lark's expand_rule)."""
        found = closures.get(nt)
        if found is None:
            items: set[int] = set()
            seen_nt = {nt}
            todo = [nt]
            while todo:
                for r in by_origin[todo.pop()]:
                    items.add(item_base[r])
                    first = item_next[item_base[r]]
                    if 0 <= first < num_nt and first not in seen_nt:
                        seen_nt.add(first)
                        todo.append(first)
            found = closures[nt] = frozenset(items)
        return found

    root = frozenset([item_base[len(g.rules) - 1]])
    kernels: dict[frozenset[int], int] = {root: 0}
    todo_states: list[frozenset[int]] = [root]
    closure: list[list[int]] = []
    trans: list[dict[int, int]] = []
    at = 0
    while at < len(todo_states):
        kernel = todo_states[at]
        at += 1
        items = set(kernel)
        for item in kernel:
            nxt = item_next[item]
            if 0 <= nxt < num_nt:
                items |= closure_of(nxt)
        listed = sorted(items)
        closure.append(listed)
        moves: dict[int, list[int]] = {}
        for item in listed:
            nxt = item_next[item]
            if nxt >= 0:
                moves.setdefault(nxt, []).append(item + 1)
        out: dict[int, int] = {}
        for sym, advanced in moves.items():
            target = frozenset(advanced)
            state = kernels.get(target)
            if state is None:
                state = kernels[target] = len(todo_states)
                todo_states.append(target)
            out[sym] = state
        trans.append(out)
    return Lr0(closure, trans)


def lookaheads_reference(g: _Grammar, lr0: Lr0) -> list[dict[int, list[int]]]:
    """Per state, lookahead symbol -> the rules reduced on it (lark's
    compute_reads_relations, compute_includes_lookback and compute_lookaheads)."""
    num_nt, nullable, item_next = g.num_nt, g.nullable, g.item_next
    item_base, item_rule, rule_syms = g.item_base, g.item_rule, g.rule_syms
    closure, trans = lr0.closure, lr0.trans
    # Nonterminal transitions with their direct reads and reads: a node per (state,
    # nonterminal) in the order met. $END is terminal 0 of the bitsets (bit t: symbol
    # num_nt + t).
    node_of: dict[tuple[int, int], int] = {}
    nodes: list[tuple[int, int]] = []
    direct: list[list[int]] = []  # one-item lists: cells shared the way lark shares sets
    reads: list[list[tuple[int, int]]] = []

    def node(pair: tuple[int, int]) -> int:
        found = node_of.get(pair)
        if found is None:
            found = node_of[pair] = len(nodes)
            nodes.append(pair)
            direct.append([0])
            reads.append([])
        return found

    node((0, g.start))
    direct[0][0] = 1  # the root's start is followed by $END
    for state, items in enumerate(closure):
        seen_nt: set[int] = set()
        for item in items:
            sym = item_next[item]
            if not 0 <= sym < num_nt or sym in seen_nt:
                continue
            seen_nt.add(sym)
            x = node((state, sym))
            bits = direct[x][0]
            after = trans[state][sym]
            for item2 in closure[after]:
                sym2 = item_next[item2]
                if sym2 >= num_nt:
                    bits |= 1 << (sym2 - num_nt)
                elif sym2 >= 0 and nullable[sym2]:
                    reads[x].append((after, sym2))
            direct[x][0] = bits
    read_rel = [list(dict.fromkeys(node_of[p] for p in pairs)) for pairs in reads]

    # includes and lookback, reading per state only the items of the transition's
    # nonterminal (lark walks every item whose rule it is, not only dot-0 ones).
    rest_nullable = [False] * len(item_rule)  # the symbols from this item's dot on
    for r, syms in enumerate(rule_syms):
        ok = True
        for dot in range(len(syms), -1, -1):
            if dot < len(syms):
                ok = ok and syms[dot] < num_nt and nullable[syms[dot]]
            rest_nullable[item_base[r] + dot] = ok
    items_of: dict[tuple[int, int], list[int]] = {}
    for state, items in enumerate(closure):
        for item in items:
            items_of.setdefault((state, g.rule_origin[item_rule[item]]), []).append(item)
    includes: list[list[int]] = [[] for _ in nodes]
    lookback: list[list[tuple[int, int]]] = [[] for _ in nodes]
    for x, pair in enumerate(nodes):
        found_includes: list[int] = []
        for item in items_of.get(pair, ()):
            r = item_rule[item]
            base = item_base[r]
            syms = rule_syms[r]
            state2 = pair[0]
            for i in range(item - base, len(syms)):
                sym = syms[i]
                y = node_of.get((state2, sym))
                state2 = trans[state2][sym]
                if y is not None and rest_nullable[base + i + 1]:
                    found_includes.append(y)
            if item == base:  # state2 holds the rule's completed item
                lookback[x].append((state2, r))
        for y in found_includes:
            if x not in includes[y]:
                includes[y].append(x)

    follow_sets = digraph_reference(
        len(nodes), includes, digraph_reference(len(nodes), read_rel, direct)
    )
    lookaheads: list[dict[int, list[int]]] = [{} for _ in closure]
    for x, pairs in enumerate(lookback):
        bits = follow_sets[x][0]
        for state, r in pairs:
            for t in bit_positions(bits):
                reducing = lookaheads[state].setdefault(t + num_nt, [])
                if r not in reducing:
                    reducing.append(r)
    return lookaheads


def actions_reference(
    g: _Grammar, lr0: Lr0, lookaheads: list[dict[int, list[int]]]
) -> dict[int, dict[str, tuple[Any, Any]]]:
    """Per state, symbol name -> action (lark's compute_lalr1_states, strict mode, no
    priorities); conflicts raise lark's GrammarError, collisions first."""
    from lark.exceptions import GrammarError
    from lark.parsers.lalr_analysis import Reduce, Shift

    names = [sym.name for sym in g.symbols]
    states: dict[int, dict[str, tuple[Any, Any]]] = {}
    collisions: list[str] = []
    conflict: str | None = None
    for state, moves in enumerate(lr0.trans):
        actions: dict[str, tuple[Any, Any]] = {
            names[sym]: (Shift, target) for sym, target in moves.items()
        }
        for la, reducing in lookaheads[state].items():
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
                if conflict is None:
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


def digraph_reference(
    count: int, relation: list[list[int]], start: list[list[int]]
) -> list[list[int]]:
    """lark's `digraph`: F(x) = G(x) | the F of every y that x relates to, over strongly
    connected parts at once. A set is a one-item list (its bits), taken over from `start`
    and shared by a part's members, as lark shares the set objects; iterative, where
    lark recurses (a thousand-rule grammar nests deep)."""
    value: list[list[int]] = [[0]] * count
    weight = [0] * count
    path: list[int] = []

    def link(x: int, y: int) -> None:
        if 0 < weight[y] < weight[x]:
            weight[x] = weight[y]
        value[x][0] |= value[y][0]

    frames: list[tuple[int, int, int]] = []  # (node, next relation index, depth)

    def enter(x: int) -> None:
        path.append(x)
        weight[x] = len(path)
        value[x] = start[x]
        frames.append((x, 0, len(path)))

    for origin in range(count):
        if weight[origin]:
            continue
        enter(origin)
        while frames:
            x, at, depth = frames[-1]
            targets = relation[x]
            while at < len(targets):
                y = targets[at]
                at += 1
                if weight[y] == 0:
                    frames[-1] = (x, at, depth)
                    enter(y)
                    break
                link(x, y)
            else:
                frames.pop()
                if weight[x] == depth:
                    shared = value[x]
                    while True:
                        z = path.pop()
                        weight[z] = -1
                        value[z] = shared
                        if z == x:
                            break
                if frames:
                    link(frames[-1][0], x)
    return value
