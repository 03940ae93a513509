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
import numpy.typing as npt

from fsmcompile.automaton.budget import Budget
from fsmcompile.automaton.canonical import canonical_dfa
from fsmcompile.automaton.compose import concat, difference, intersection, repeat, union
from fsmcompile.automaton.dfa import ByteDFA
from fsmcompile.automaton.fragment import Fragment
from fsmcompile.automaton.ir import (
    Alt,
    And,
    ByteSet,
    CharSet,
    Concat,
    Diff,
    Node,
    Ref,
    Repeat,
    content_key,
)
from fsmcompile.automaton.leaves import (
    ByteClasses,
    byteset_fragment,
    charset_fragment,
    classes_for,
    literal_fragment,
)
from fsmcompile.automaton.minimize import equivalence_classes, minimized, quotient
from fsmcompile.errors import SpecError, UnsupportedFeatureError
from fsmcompile.memo import StageMemo

logger = logging.getLogger(__name__)

# Sub-trees that many specs share by identity (a JSON Schema format's IR is made once per
# process): each is built once, kept minimized with the byte classes it was built over,
# and re-expressed over a later build's classes, which always refine its own.
_kept: dict[int, Node] = {}
_kept_built: dict[int, tuple[Fragment, npt.NDArray[np.int32]]] = {}
_kept_lock = threading.Lock()


def _dfa_bytes(dfa: ByteDFA) -> int:
    return int(dfa.transitions.nbytes + dfa.accepting.nbytes + dfa.class_of_byte.nbytes)


_built_dfas: StageMemo[bytes, ByteDFA] = StageMemo(
    4096, max_bytes=64 * 1024 * 1024, size_of=_dfa_bytes
)
"""Built automata by the content of their tree: generated grammars rebuild the same
terminals (the any-JSON value, its strings and numbers) for every schema."""


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

    Results are memoized by the tree's content (`content_key`) for the process; a kept
    automaton larger than `max_states` is refused as a fresh build would refuse it.
    """
    dfa = _built_dfas.get_or_make(
        content_key(node), lambda: _build_dfa(node, max_states=max_states, deadline=deadline)
    )
    Budget(max_states, deadline).reserve(dfa.num_states, "the automaton")
    return dfa


def _build_dfa(node: Node, *, max_states: int, deadline: float | None) -> ByteDFA:
    started = time.perf_counter()
    budget = Budget(max_states, deadline)
    classes = classes_for(node)
    try:
        fragment = _Builder(classes, budget).build(node)
    except RecursionError:
        raise SpecError("expression nested too deeply to build; flatten nested groups") from None
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
        self.leaves: dict[CharSet | ByteSet, Fragment] = {}
        # A byte of each class, to map this build's classes onto a kept node's classes.
        self.class_byte = np.unique(classes.class_of_byte, return_index=True)[1]

    def _kept_fragment(self, node: Node) -> Fragment | None:
        with _kept_lock:
            found = _kept_built.get(id(node))
        if found is None:
            return None
        fragment, class_of_byte = found
        columns = class_of_byte[self.class_byte]
        return Fragment(np.ascontiguousarray(fragment.trans[:, columns]), fragment.accepting, True)

    def _concat_parts(self, items: tuple[Node, ...]) -> list[Fragment]:
        """The fragments of a concatenation's items, each run of single characters (a
        property name, a literal) as one chain: gluing them one by one was a few numpy
        steps per character."""
        parts: list[Fragment] = []
        run: list[CharSet] = []
        for item in (*items, None):
            if isinstance(item, CharSet) and _literal_char(item):
                run.append(item)
                continue
            if len(run) > 1:
                text = "".join(chr(c.ranges[0][0]) for c in run)
                parts.append(literal_fragment(text.encode("utf-8"), self.classes))
            else:
                parts.extend(self.build(c) for c in run)
            run = []
            if item is not None:
                parts.append(self.build(item))
        return parts

    def build(self, node: Node) -> Fragment:
        hit = self.memo.get(id(node))
        if hit is not None:
            # A shared sub-tree is copied into every place that uses it; minimizing it
            # once keeps a DAG like "any JSON value to depth d" linear instead of 2**d.
            if not hit[1].minimal:
                hit = (node, minimized(hit[1], self.budget))
                self.memo[id(node)] = hit
            return hit[1]
        self.budget.check_time()
        width = self.classes.num_classes
        result: Fragment
        kept = id(node) in _kept
        if kept:
            found = self._kept_fragment(node)
            if found is not None:
                self.memo[id(node)] = (node, found)
                return found
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
            result = concat(self._concat_parts(node.items), width, self.budget)
        elif isinstance(node, Alt):
            result = union([self.build(i) for i in node.items], width, self.budget)
        elif isinstance(node, And):
            result = intersection([self.build(i) for i in node.items], width, self.budget)
        elif isinstance(node, Diff):
            keep, drop = (self.build(i) for i in node.items)
            result = difference(keep, drop, self.budget)
        elif isinstance(node, Repeat):
            if node.min < 0 or (node.max is not None and node.max < node.min):
                raise SpecError(f"invalid repetition {{{node.min},{node.max}}}")
            result = repeat(self.build(node.item), node.min, node.max, self.budget)
        elif isinstance(node, Ref):
            raise UnsupportedFeatureError(
                f"rule reference {node.name!r} is context-free; a byte automaton cannot "
                "follow it (compile it as a grammar)"
            )
        else:
            raise TypeError(f"not an IR node: {type(node).__name__}")
        if kept and not result.is_nothing:
            result = minimized(result, self.budget)
            with _kept_lock:
                _kept_built[id(node)] = (result, self.classes.class_of_byte)
        self.memo[id(node)] = (node, result)
        return result


def _literal_char(charset: CharSet) -> bool:
    """Whether `charset` is one character that has a UTF-8 form (not a surrogate)."""
    if len(charset.ranges) != 1:
        return False
    lo, hi = charset.ranges[0]
    return lo == hi and not 0xD800 <= lo <= 0xDFFF
