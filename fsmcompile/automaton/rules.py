"""Rule sets: IR whose `Ref` nodes name other rules (a context-free language).

A rule that can never finish (every alternative needs itself again, like a schema whose
required property must hold the schema) matches no finite text; references to it are
dropped so the grammar built from the rules has only rules that end. `expand_rules`
unrolls rules to a bounded depth, for when a grammar cannot be used.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import replace

from fsmcompile.automaton.ir import (
    EMPTY,
    NOTHING,
    Alt,
    And,
    Concat,
    Node,
    Ref,
    Repeat,
    nodes,
    seq,
)


def references(node: Node) -> set[str]:
    """The rule names `node` refers to."""
    return {item.name for item in nodes(node) if isinstance(item, Ref)}


def _finishes(node: Node, done: set[str], memo: dict[int, bool]) -> bool:
    """Whether `node` matches some finite text, given the rules known to finish."""
    found = memo.get(id(node))
    if found is not None:
        return found
    if isinstance(node, Ref):
        found = node.name in done
    elif isinstance(node, Concat | And):
        found = all(_finishes(item, done, memo) for item in node.items)
    elif isinstance(node, Alt):
        found = any(_finishes(item, done, memo) for item in node.items)
    elif isinstance(node, Repeat):
        found = node.min == 0 or _finishes(node.item, done, memo)
    else:
        found = True
    memo[id(node)] = found
    return found


def _without(node: Node, dead: set[str], memo: dict[int, Node]) -> Node:
    """`node` with references to `dead` rules replaced by the empty language."""
    found = memo.get(id(node))
    if found is not None:
        return found
    out: Node = node
    if isinstance(node, Ref):
        out = NOTHING if node.name in dead else node
    elif isinstance(node, Concat | And | Alt):
        items = [_without(item, dead, memo) for item in node.items]
        if isinstance(node, Alt):
            items = [i for i in items if i != NOTHING]
        # A choice matches nothing when no option is left, a sequence when any item does.
        matches_nothing = not items if isinstance(node, Alt) else NOTHING in items
        if matches_nothing:
            out = NOTHING
        elif _same(items, node.items):
            # Nothing pruned below: the node itself, so sub-trees shared by identity
            # (a format's IR, built once per process: `keep_built`) stay shared.
            out = node
        elif isinstance(node, Concat):
            out = seq(*items) if items else EMPTY
        elif isinstance(node, And):
            out = And(tuple(items))
        else:
            # Not alt(): flattening a chain of nested choices (an object's optional
            # members, each choosing between itself and the rest) lists every later
            # member at every member, quadratic in the grammar lark analyses.
            out = items[0] if len(items) == 1 else Alt(tuple(items))
    elif isinstance(node, Repeat):
        inner = _without(node.item, dead, memo)
        if inner == NOTHING:
            out = EMPTY if node.min == 0 else NOTHING
        else:
            out = node if inner is node.item else replace(node, item=inner)  # kind kept
    memo[id(node)] = out
    return out


def _same(items: list[Node], originals: tuple[Node, ...]) -> bool:
    """Whether pruning left every item as it was (the same objects)."""
    return len(items) == len(originals) and all(map(operator.is_, items, originals))


def prune_rules(start: Node, rules: Mapping[str, Node]) -> tuple[Node, dict[str, Node]]:
    """`start` and the rules it reaches, with every rule that never finishes removed.

    Returns `(NOTHING, {})` when `start` itself matches no finite text.
    """
    done: set[str] = set()
    changed = True
    while changed:
        changed = False
        memo: dict[int, bool] = {}
        for name, body in rules.items():
            if name not in done and _finishes(body, done, memo):
                done.add(name)
                changed = True
    dead = set(rules) - done
    pruned: dict[int, Node] = {}
    root = _without(start, dead, pruned)
    if root == NOTHING:
        return NOTHING, {}
    kept: dict[str, Node] = {}
    stack = sorted(references(root))
    while stack:
        name = stack.pop()
        if name in kept:
            continue
        kept[name] = _without(rules[name], dead, pruned)
        stack.extend(sorted(references(kept[name]) - set(kept)))
    return root, dict(sorted(kept.items()))


def expand_rules(start: Node, rules: Mapping[str, Node], depth: int) -> Node:
    """`start` with each `Ref` replaced by its rule, at most `depth` refs deep; a ref
    deeper than that matches nothing. A regular under-approximation: sound, and exact
    for texts that nest no deeper. Shared as a DAG, so linear in `depth`."""
    memo: dict[tuple[int, int], Node] = {}
    refs: dict[tuple[str, int], Node] = {}

    def sub(node: Node, left: int) -> Node:
        key = (id(node), left)
        found = memo.get(key)
        if found is not None:
            return found
        out: Node = node
        if isinstance(node, Ref):
            if left == 0:
                out = NOTHING
            else:
                ref_key = (node.name, left)
                if ref_key not in refs:
                    refs[ref_key] = sub(rules[node.name], left - 1)
                out = refs[ref_key]
        elif isinstance(node, Concat):
            out = Concat(tuple(sub(item, left) for item in node.items))
        elif isinstance(node, And):
            out = And(tuple(sub(item, left) for item in node.items))
        elif isinstance(node, Alt):
            out = Alt(tuple(sub(item, left) for item in node.items))
        elif isinstance(node, Repeat):
            out = replace(node, item=sub(node.item, left))
        memo[key] = out
        return out

    return sub(start, depth)
