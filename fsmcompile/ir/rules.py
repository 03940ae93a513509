"""Rule sets: IR whose `Ref` nodes name other rules (a context-free language).

A rule that can never finish (every alternative needs itself again, like a schema whose
required property must hold the schema) matches no finite text; references to it are
dropped so the grammar built from the rules has only rules that end. `expand_rules`
unrolls rules to a bounded depth, for when a grammar cannot be used.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable, Mapping
from dataclasses import replace
from functools import partial

from fsmcompile.ir.dag_walk import fold
from fsmcompile.ir.nodes import EMPTY, NOTHING, Alt, And, Concat, Node, Ref, Repeat, nodes, seq


def references(node: Node) -> set[str]:
    """The rule names `node` refers to."""
    return {item.name for item in nodes(node) if isinstance(item, Ref)}


def _finishes(node: Node, done: set[str], memo: dict[Hashable, bool]) -> bool:
    """Whether `node` matches some finite text, given the rules known to finish."""

    def combine(item: Node, found: list[bool]) -> bool:
        if isinstance(item, Ref):
            return item.name in done
        if isinstance(item, Concat | And):
            return all(found)
        if isinstance(item, Alt):
            return any(found)
        if isinstance(item, Repeat):
            return item.min == 0 or found[0]
        return True

    return fold(node, _walked, combine, memo)


def _walked(node: Node) -> tuple[Node, ...]:
    """The sub-trees `_finishes` and `_without` look into (not a `Diff`'s: it holds no
    refs)."""
    if isinstance(node, Repeat):
        return (node.item,)
    if isinstance(node, Concat | And | Alt):
        return node.items
    return ()


def _without(node: Node, dead: set[str], memo: dict[Hashable, Node]) -> Node:
    """`node` with references to `dead` rules replaced by the empty language."""
    return fold(node, _walked, partial(_pruned, dead), memo)


def _pruned(dead: set[str], node: Node, pruned: list[Node]) -> Node:
    """`node` rebuilt over its `pruned` sub-trees (`_walked`), references to `dead`
    rules gone."""
    if isinstance(node, Ref):
        return NOTHING if node.name in dead else node
    if isinstance(node, Concat | And | Alt):
        items = pruned
        if isinstance(node, Alt):
            items = [i for i in items if i != NOTHING]
        # A choice matches nothing when no option is left, a sequence when any item does.
        matches_nothing = not items if isinstance(node, Alt) else NOTHING in items
        if matches_nothing:
            return NOTHING
        if _same(items, node.items):
            # Nothing pruned below: the node itself, so sub-trees shared by identity
            # (a format's IR, built once per process: `keep_built`) stay shared.
            return node
        if isinstance(node, Concat):
            return seq(*items) if items else EMPTY
        if isinstance(node, And):
            return And(tuple(items))
        # Not alt(): flattening a chain of nested choices (an object's optional
        # members, each choosing between itself and the rest) lists every later
        # member at every member, quadratic in the grammar lark analyses.
        return items[0] if len(items) == 1 else Alt(tuple(items))
    if isinstance(node, Repeat):
        inner = pruned[0]
        if inner == NOTHING:
            return EMPTY if node.min == 0 else NOTHING
        return node if inner is node.item else replace(node, item=inner)  # kind kept
    return node


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
        memo: dict[Hashable, bool] = {}
        for name, body in rules.items():
            if name not in done and _finishes(body, done, memo):
                done.add(name)
                changed = True
    dead = set(rules) - done
    pruned: dict[Hashable, Node] = {}
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

    def parts(at: tuple[Node, int]) -> tuple[tuple[Node, int], ...]:
        node, left = at
        if isinstance(node, Ref):
            return ((rules[node.name], left - 1),) if left > 0 else ()
        return tuple((item, left) for item in _walked(node))

    def combine(at: tuple[Node, int], expanded: list[Node]) -> Node:
        node = at[0]
        if isinstance(node, Ref):
            return expanded[0] if expanded else NOTHING
        if isinstance(node, Concat):
            return Concat(tuple(expanded))
        if isinstance(node, And):
            return And(tuple(expanded))
        if isinstance(node, Alt):
            return Alt(tuple(expanded))
        if isinstance(node, Repeat):
            return replace(node, item=expanded[0])
        return node

    memo: dict[Hashable, Node] = {}
    return fold((start, depth), parts, combine, memo, key=lambda at: (id(at[0]), at[1]))
