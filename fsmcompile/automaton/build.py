"""IR → minimized ByteDFA: the automaton stage's one entry point, `build_dfa`.

The tree is built bottom-up into fragments over one shared byte-class partition
(`leaves.py`), combined by the operators in `compose.py`, minimized (`minimize.py`)
unless a construction proved its result minimal, and numbered canonically
(`canonical.py`). Nodes are memoized by identity: front ends share sub-trees (a JSON
Schema's `any value` refers to the level below four times), and hashing a shared tree
by value would walk it exponentially often.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from fsmcompile.automaton.canonical import canonical_dfa
from fsmcompile.automaton.compose import concat, difference, intersection, repeat, union
from fsmcompile.automaton.fragment import Fragment
from fsmcompile.automaton.leaves import (
    ByteClasses,
    byteset_fragment,
    charset_fragment,
    classes_for,
    literal_fragment,
)
from fsmcompile.automaton.minimize import equivalence_classes, minimized, quotient
from fsmcompile.budget import Budget
from fsmcompile.compile_memos import current_memos
from fsmcompile.errors import SpecError, UnsupportedFeatureError
from fsmcompile.ir.nodes import (
    Alt,
    And,
    ByteSet,
    CharSet,
    Concat,
    Diff,
    Node,
    Ref,
    Repeat,
    children,
    content_key,
)
from fsmcompile.tables.byte_dfa import ByteDFA

logger = logging.getLogger(__name__)

# Sub-trees that many specs share by identity (a JSON Schema format's IR is made once per
# process): each is built once per memo set (`CompileMemos.kept`), kept minimized with the
# byte classes it was built over, and re-expressed over a later build's classes, which
# always refine its own. This registry only says which sub-trees those are.
_kept: dict[int, Node] = {}
_kept_lock = threading.Lock()


def keep_built(node: Node) -> Node:
    """Mark `node` (a sub-tree made once and shared by many specs) to be built only once.

    Returns `node`. The node is held for the life of the process, so its id stays its own.
    """
    with _kept_lock:
        _kept[id(node)] = node
    return node


def build_dfa(node: Node, *, max_states: int = 200_000, deadline: float | None = None) -> ByteDFA:
    """Compile an IR tree to a minimized, trimmed byte DFA.

    Args:
        node: the language, as built by a spec front end.
        max_states: the most states any automaton built on the way may have; checked
            before each allocation, so an explosive spec fails fast and small.
        deadline: a `time.monotonic()` value; the build stops soon after it passes.

    Returns:
        A ByteDFA with state 0 the start, states in BFS order, the coarsest byte
        classes, and no unreachable or dead-end states. Equal inputs give equal arrays.

    Raises:
        SpecError: the language is empty ("matches no string").
        BudgetExceededError: `max_states` (limit="max_states") or the deadline
            (limit="timeout_s") was exceeded.

    Results are memoized by the tree's content (`content_key`) in the current memo set
    (`compile_memos.current_memos`): generated grammars rebuild the same terminals (the
    any-JSON value, its strings and numbers) for every schema. A kept automaton larger
    than `max_states` is refused as a fresh build would refuse it.
    """
    dfa = current_memos().dfas.get_or_make(
        content_key(node), lambda: _build_dfa(node, max_states=max_states, deadline=deadline)
    )
    Budget(max_states, deadline).reserve(dfa.num_states, "the automaton")
    return dfa


def _build_dfa(node: Node, *, max_states: int, deadline: float | None) -> ByteDFA:
    started = time.perf_counter()
    budget = Budget(max_states, deadline)
    classes = classes_for(node)
    fragment = _Builder(classes, budget).build(node)
    if fragment.is_nothing:
        raise SpecError("the expression matches no string")
    built = time.perf_counter()
    trans, accepting, start = fragment.trans, fragment.accepting, 0
    if not fragment.minimal:
        blocks = equivalence_classes(trans, accepting, budget)
        trans, accepting, start = quotient(trans, accepting, blocks)
    budget.check_time()
    dfa = canonical_dfa(trans, accepting, start, classes.class_of_byte)
    for array in (dfa.transitions, dfa.accepting, dfa.class_of_byte):
        array.flags.writeable = False  # memoized and shared: nobody may change it
    logger.debug(
        "built DFA: %d states, %d classes (construction %d states, %.1f ms; "
        "minimize + number %.1f ms)",
        dfa.num_states,
        dfa.num_classes,
        fragment.num_states,
        (built - started) * 1e3,
        (time.perf_counter() - built) * 1e3,
    )
    return dfa


class _Builder:
    """One build: the shared classes, the budget and the identity memo."""

    def __init__(self, classes: ByteClasses, budget: Budget) -> None:
        self.classes = classes
        self.budget = budget
        self.memo: dict[int, tuple[Node, Fragment]] = {}  # id → (node kept alive, result)
        # id → (id of the node it was built for, as built): what that node takes.
        self._fresh: dict[int, tuple[int, Fragment]] = {}
        # id of a concatenation waiting for its parts → its runs (`_concat_runs`).
        self._runs: dict[int, list[Node | bytes]] = {}
        self.leaves: dict[CharSet | ByteSet, Fragment] = {}
        # A byte of each class, to map this build's classes onto a kept node's classes.
        self.class_byte = np.unique(classes.class_of_byte, return_index=True)[1]
        self.kept = current_memos().kept

    def _kept_fragment(self, node: Node) -> Fragment | None:
        found = self.kept.get(id(node))
        if found is None:
            return None
        fragment, class_of_byte = found
        columns = class_of_byte[self.class_byte]
        return Fragment(np.ascontiguousarray(fragment.trans[:, columns]), fragment.accepting, True)

    def build(self, node: Node) -> Fragment:
        """The fragment of `node`, its sub-trees built first, from an explicit stack: the
        IR of an object nests a few levels per optional member, deeper than Python's
        recursion limit for a few hundred members. Sub-trees are finished and handed to
        their users in the order a recursive build would call them (`_take`)."""
        stack: list[tuple[Node, int, bool]] = [(node, _ROOT_USER, False)]
        while stack:
            item, user, ready = stack.pop()
            if ready:
                built = self._finish(item)
                self.memo[id(item)] = (item, built)
                self._fresh[id(item)] = (user, built)
            elif id(item) not in self.memo and not self._start(item):
                stack.append((item, user, True))
                stack.extend(
                    (part, id(item), False)
                    for part in reversed(self._parts(item))
                    if id(part) not in self.memo
                )
        return self._take(node, _ROOT_USER)

    def _start(self, node: Node) -> bool:
        """Begin building `node`; True when that is already done (a kept sub-tree built
        by an earlier build)."""
        self.budget.check_time()
        if id(node) in _kept:
            found = self._kept_fragment(node)
            if found is not None:
                self.memo[id(node)] = (node, found)
                return True
        if isinstance(node, Repeat) and (
            node.min < 0 or (node.max is not None and node.max < node.min)
        ):
            raise SpecError(f"invalid repetition {{{node.min},{node.max}}}")
        return False

    def _parts(self, node: Node) -> list[Node]:
        """The sub-trees `_finish` builds `node` from, in the order it takes them; a
        concatenation's runs are kept for `_finish`."""
        if isinstance(node, Concat):
            runs = self._runs[id(node)] = _concat_runs(node.items)
            return [run for run in runs if not isinstance(run, bytes)]
        return list(children(node))

    def _take(self, node: Node, user: int) -> Fragment:
        """The built fragment of `node` for `user`: as built, for the user it was built
        for (even if another took it minimized meanwhile), and minimized once for every
        other one."""
        fresh = self._fresh.get(id(node))
        if fresh is not None and fresh[0] == user:
            del self._fresh[id(node)]
            return fresh[1]
        hit = self.memo[id(node)]
        # A shared sub-tree is copied into every place that uses it; minimizing it
        # once keeps a DAG like "any JSON value to depth d" linear instead of 2**d.
        if not hit[1].minimal:
            hit = (node, minimized(hit[1], self.budget))
            self.memo[id(node)] = hit
        return hit[1]

    def _finish(self, node: Node) -> Fragment:
        """`node`'s fragment from its parts' (`_parts`, all built)."""
        width = self.classes.num_classes
        user = id(node)
        result: Fragment
        if isinstance(node, (CharSet, ByteSet)):
            leaf = self.leaves.get(node)
            if leaf is None:
                if isinstance(node, CharSet):
                    leaf = charset_fragment(node, self.classes)
                else:
                    leaf = byteset_fragment(node, self.classes)
                self.leaves[node] = leaf
            result = leaf
        elif isinstance(node, Concat):
            parts = [
                literal_fragment(run, self.classes)
                if isinstance(run, bytes)
                else self._take(run, user)
                for run in self._runs.pop(id(node))
            ]
            result = concat(parts, width, self.budget)
        elif isinstance(node, Alt):
            result = union([self._take(i, user) for i in node.items], width, self.budget)
        elif isinstance(node, And):
            result = intersection([self._take(i, user) for i in node.items], width, self.budget)
        elif isinstance(node, Diff):
            keep, drop = (self._take(i, user) for i in node.items)
            result = difference(keep, drop, self.budget)
        elif isinstance(node, Repeat):
            result = repeat(self._take(node.item, user), node.min, node.max, self.budget)
        elif isinstance(node, Ref):
            raise UnsupportedFeatureError(
                f"rule reference {node.name!r} is context-free; a byte automaton cannot "
                "follow it (compile it as a grammar)"
            )
        else:
            raise TypeError(f"not an IR node: {type(node).__name__}")
        if id(node) in _kept and not result.is_nothing:
            result = minimized(result, self.budget)
            self.kept.put(id(node), result, self.classes.class_of_byte)
        return result


_ROOT_USER = 0
"""The user `_Builder.build` takes its root for (no object's id is 0)."""


def _concat_runs(items: tuple[Node, ...]) -> list[Node | bytes]:
    """A concatenation's items with each run of two or more single characters (a
    property name, a literal) as its UTF-8 bytes, built as one chain: gluing them one by
    one was a few numpy steps per character."""
    out: list[Node | bytes] = []
    run: list[CharSet] = []
    for item in (*items, None):
        if isinstance(item, CharSet) and _literal_char(item):
            run.append(item)
            continue
        if len(run) > 1:
            out.append("".join(chr(c.ranges[0][0]) for c in run).encode("utf-8"))
        else:
            out.extend(run)
        run = []
        if item is not None:
            out.append(item)
    return out


def _literal_char(charset: CharSet) -> bool:
    """Whether `charset` is one character that has a UTF-8 form (not a surrogate)."""
    if len(charset.ranges) != 1:
        return False
    lo, hi = charset.ranges[0]
    return lo == hi and not 0xD800 <= lo <= 0xDFFF
