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
but for those between copies of one rule, which are merged (`_merge_twins`). lark tries
a context's terminals in order (priority, then pattern length, then name), and one that
ends a lexeme drops those after it: where that would drop a terminal that reads on (`<`
before `<ab>`), the dropped one gets a higher priority and the contexts are sorted again.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import numpy.typing as npt

from fsmcompile import _native
from fsmcompile.errors import (
    BudgetExceededError,
    GrammarError,
    SpecError,
    UnsupportedFeatureError,
)
from fsmcompile.grammar.generated import lexer_order
from fsmcompile.ir.dag_walk import Call, fold, run
from fsmcompile.ir.nodes import (
    Alt,
    CharSet,
    Concat,
    Diff,
    Node,
    Ref,
    Repeat,
    children,
    content_key,
    counted_item,
    uncounted,
)
from fsmcompile.memo import StageMemo
from fsmcompile.tables.byte_dfa import ByteDFA, dfa_key
from fsmcompile.tables.lark_grammar import LarkGrammar, LexerContext, ParseTable

__all__ = ["grammar_from_rules"]

logger = logging.getLogger(__name__)

START = "start"


@dataclass(frozen=True, slots=True)
class _Sym:
    """A terminal (by name) or a rule (by its name in `rules`)."""

    name: str
    terminal: bool


@dataclass(frozen=True, slots=True)
class _Seq:
    items: tuple[_Tree, ...]


@dataclass(frozen=True, slots=True)
class _Choice:
    items: tuple[_Tree, ...]
    nullable: bool


@dataclass(frozen=True, slots=True)
class _Rep:
    item: _Tree
    min: int
    max: int | None


_Tree = _Sym | _Seq | _Choice | _Rep


@dataclass(slots=True)
class _Part:
    """One item of a sequence being written: its text, how many alternatives lark expands
    it into, and what can follow it."""

    text: str
    count: int
    follow: frozenset[str]


_EMPTY = _Seq(())


class _Writer:
    """Rules → EBNF trees over terminals (their automata collected) → lark text.

    A rule used where different terminals may follow it is written once per follow set.
    lark's LALR table merges the lookaheads of a shared rule's states, and the contextual
    lexer would then try, after the rule, every terminal any use allows (a `,` that
    separates array items next to a `,"key":` of some object); one copy per follow set
    keeps each lexer context to the terminals that can really come next.
    """

    def __init__(
        self,
        rules: Mapping[str, Node],
        max_states: int,
        deadline: float | None,
        *,
        split_wide: bool = True,
    ) -> None:
        self.max_states = max_states
        self.deadline = deadline
        self.split_wide = split_wide
        self.split_terminals: set[str] = set()
        # By id, holding the node so that its id is not reused by a temporary one.
        self._size: dict[Hashable, tuple[Node, int]] = {}
        self._splits: dict[Hashable, tuple[Node, bool]] = {}
        # By content digest: hashing a deep IR tree by value recurses once per level
        # (and re-walks shared sub-trees).
        self.terminal_of: dict[bytes, tuple[str | None, bool]] = {}
        self.by_signature: dict[bytes, str] = {}
        self.generated: dict[str, tuple[Node, ByteDFA]] = {}
        self._has_ref: dict[Hashable, bool] = {}
        self.shared = self._shared_nodes(rules)
        self.trees: dict[str, _Tree] = {}
        for name, body in rules.items():
            tree = self.tree(body, top=True)
            if tree is None:
                raise SpecError(f"rule {name!r} matches nothing")
            self.trees[name] = tree
        self.first, self.nullable = self._first_sets()
        self._first_memo: dict[int, tuple[_Tree, tuple[frozenset[str], bool]]] = {}
        self.instances: dict[tuple[str, frozenset[str]], str] = {}
        self.pending: list[tuple[str, str, frozenset[str]]] = []
        self.helpers = 0
        self._helper_names: dict[tuple[str, frozenset[str]], str] = {}

    # -- IR → trees ----------------------------------------------------------------

    def has_ref(self, node: Node) -> bool:
        """Whether a `Ref` is under `node` (walked without recursion: IR nests a few
        levels per optional member of an object)."""
        found = self._has_ref.get(id(node))
        return fold(node, children, _holds_ref, self._has_ref) if found is None else found

    def terminal(self, node: Node) -> tuple[str | None, bool]:
        """(terminal name, or None when only the empty string is left; nullable) for a
        ref-free node; (None, False) when it matches nothing."""
        key = content_key(node)
        found = self.terminal_of.get(key)
        if found is not None:
            return found
        from fsmcompile.automaton import build_dfa

        counted = counted_item(node)
        try:
            # A counted terminal's automaton drops the bound; the lexer counts it instead.
            built = node if counted is None else uncounted(node)
            dfa = build_dfa(built, max_states=self.max_states, deadline=self.deadline)
        except UnsupportedFeatureError:
            raise
        except SpecError:  # the empty language
            found = (None, False)
        else:
            nullable = bool(dfa.accepting[0])
            if not (dfa.transitions[0] >= 0).any():
                found = (None, nullable)
            else:
                signature = dfa_key(dfa)
                if counted is not None:
                    signature += f"counted {counted.max}".encode()
                name = self.by_signature.get(signature)
                if name is None:
                    name = f"T{len(self.by_signature)}"
                    self.by_signature[signature] = name
                    self.generated[name] = (node, dfa)
                found = (name, nullable)
        self.terminal_of[key] = found
        return found

    def _shared_nodes(self, rules: Mapping[str, Node]) -> dict[int, str]:
        """Nodes holding refs that more than one place uses: each becomes a rule of its
        own, since writing a shared DAG out as a tree can grow exponentially."""
        uses: dict[int, int] = {}
        stack = list(rules.values())
        while stack:
            node = stack.pop()
            for child in children(node):
                if not self.has_ref(child) or isinstance(child, Ref):
                    continue
                uses[id(child)] = uses.get(id(child), 0) + 1
                if uses[id(child)] == 1:
                    stack.append(child)
        return {key: f"_shared{i}" for i, key in enumerate(k for k, n in uses.items() if n > 1)}

    def tree(self, node: Node, *, top: bool = False) -> _Tree | None:
        """The EBNF tree of `node`: None when it matches nothing."""
        return run(self._tree(node, top=top))

    def _tree(self, node: Node, *, top: bool = False) -> Call[_Tree | None]:
        """`tree` as a `run` call: each shared node below and each optional member of
        an object nests one call deeper, past Python's recursion limit in large schemas."""
        shared = None if top else self.shared.get(id(node))
        if shared is not None:
            if shared not in self.trees:
                tree = yield self._tree(node, top=True)
                if tree is None:
                    return None
                self.trees[shared] = tree
            return _Sym(shared, terminal=False)
        if not self.has_ref(node) and not self.splits(node):
            name, nullable = self.terminal(node)
            if name is None:
                return _EMPTY if nullable else None
            if self._counted(node):
                # Written apart from the text around it, as a split piece is.
                self.split_terminals.add(name)
            sym = _Sym(name, terminal=True)
            return _Choice((sym,), nullable=True) if nullable else sym
        if isinstance(node, Ref):
            return _Sym(node.name, terminal=False)
        if isinstance(node, Concat):
            return (yield from self._concat(node))
        if isinstance(node, Alt):
            joined: list[Node] = []
            apart: list[Node] = []
            for member in node.items:
                plain = not (self.has_ref(member) or self.splits(member) or self._counted(member))
                (joined if plain else apart).append(member)
            pieces: list[_Tree | None] = []
            if joined:
                pieces.append(
                    (yield self._tree(Alt(tuple(joined)) if len(joined) > 1 else joined[0]))
                )
            for member in apart:
                pieces.append((yield self._tree(member)))
            live = [p for p in pieces if p is not None]
            if not live:
                return None
            options = tuple(p for p in live if p != _EMPTY)
            if len(options) == 1 and len(live) == 1:
                return options[0]
            return _Choice(options, nullable=len(options) < len(live)) if options else _EMPTY
        if isinstance(node, Repeat):
            item = yield self._tree(node.item)
            if item is None:
                return _EMPTY if node.min == 0 else None
            return _EMPTY if item == _EMPTY else _Rep(item, node.min, node.max)
        raise UnsupportedFeatureError(
            "an intersection or difference (allOf of differently shaped parts, counted "
            "object members, patterns over keys) that contains a recursive or free-form "
            "value cannot be written as a grammar"
        )

    def _concat(self, node: Concat) -> Call[_Tree | None]:
        parts: list[_Tree] = []
        pieces, split = self._pieces(node)
        for piece in pieces:
            tree = yield self._tree(Concat(tuple(piece)) if len(piece) > 1 else piece[0])
            if tree is None:
                return None
            parts.append(tree)
        parts = [p for p in parts if p != _EMPTY]
        if split:
            self.split_terminals.update(name for p in parts for name in _terminal_names(p))
        return parts[0] if len(parts) == 1 else _Seq(tuple(parts))

    def _pieces(self, node: Concat) -> tuple[list[list[Node]], bool]:
        """The concatenation's items cut into the pieces written one after another: each
        item holding a ref or standing alone, and each run of the ref-free items between
        them (a terminal); whether an item stood alone."""
        pieces: list[list[Node]] = []
        plain: list[Node] = []
        split = False
        for item in [*self._grouped(node), None]:
            if item is not None and not self.has_ref(item):
                if not self._stands_alone(item):
                    plain.append(item)
                    continue
                split = True
            if plain:
                pieces.extend(_closer_apart(plain) if pieces else [plain])
                plain = []
            if item is not None:
                pieces.append([item])
        return pieces, split

    # -- wide pieces ---------------------------------------------------------------------

    def size(self, node: Node) -> int:
        """A rough count of the automaton states `node` unrolls into (a bounded repeat is
        that many copies of its item); refs count nothing. A difference counts what it
        keeps: the keys an object's extra members may not take make it large, but it
        stays with the comma and quotes around it, where it cannot meet a listed key."""
        return fold(node, _sized_parts, _sized, self._size)[1]

    def _wide(self, node: Node) -> bool:
        return self.split_wide and not self.has_ref(node) and self.size(node) >= _WIDE_FROM

    def _grouped(self, node: Concat) -> list[Node]:
        """The concatenation's items, each wide or counted one together with the equal
        single characters around it (a bounded string with its quotes), so that piece is
        one terminal every member with that value shares."""
        items = list(node.items)
        if not self.split_wide:
            return items
        out: list[Node] = []
        i = 0
        while i < len(items):
            item = items[i]
            if (
                (self._wide(item) or counted_item(Concat((item,))) is not None)
                and out
                and i + 1 < len(items)
                and _single_char(out[-1])
                and out[-1] == items[i + 1]
            ):
                out[-1] = Concat((out[-1], item, items[i + 1]))
                i += 2
                continue
            out.append(item)
            i += 1
        return out

    def _stands_alone(self, item: Node) -> bool:
        """Whether a ref-free item of a concatenation is written as a piece of its own."""
        return self._wide(item) or self.splits(item) or self._counted(item)

    def _counted(self, node: Node) -> bool:
        """Whether `node` is a counted piece (a string under `maxLength`, `counted_at`):
        written as a terminal of its own, whose bound the lexer may count rather than
        unroll, where joined to the text around it the bound would be unrolled."""
        return self.split_wide and counted_item(node) is not None

    def splits(self, node: Node) -> bool:
        """Whether a ref-free `node` is written as several terminals rather than one: it
        joins a wide piece (a bounded string, a long bounded repeat) to other text. One
        terminal per member holding its key and such a value unrolls the value into the
        lexer once per member and per position (with and without a leading comma): tens
        of thousands of lexer states for tens of members, where the value alone as a
        terminal is one automaton for all of them."""
        if not self.split_wide or self.has_ref(node):
            return False
        return fold(node, self._split_parts, self._split, self._splits)[1]

    def _split_parts(self, node: Node) -> tuple[Node, ...]:
        """The sub-trees whose `splits` decides that of `node`: a choice's or repeat's
        ref-free ones (one holding a ref splits nothing)."""
        if isinstance(node, (Alt, Repeat)):
            return tuple(c for c in children(node) if not self.has_ref(c))
        return ()

    def _split(self, node: Node, parts: list[tuple[Node, bool]]) -> tuple[Node, bool]:
        """(`node`, whether it splits), given `_split_parts`' answers."""
        if isinstance(node, Concat):
            grouped = self._grouped(node)
            return node, len(grouped) > 1 and any(self._stands_alone(p) for p in grouped)
        found = any(split for _, split in parts) or any(map(self._counted, children(node)))
        return node, isinstance(node, (Alt, Repeat)) and found

    # -- FIRST sets --------------------------------------------------------------------

    def _first_sets(self) -> tuple[dict[str, frozenset[str]], dict[str, bool]]:
        first: dict[str, frozenset[str]] = dict.fromkeys(self.trees, frozenset())
        nullable: dict[str, bool] = dict.fromkeys(self.trees, False)
        changed = True
        while changed:
            changed = False
            for name, tree in self.trees.items():
                f, n = self._first(tree, first, nullable)
                if f != first[name] or n != nullable[name]:
                    first[name], nullable[name] = f, n
                    changed = True
        return first, nullable

    def _first(
        self, tree: _Tree, first: dict[str, frozenset[str]], nullable: dict[str, bool]
    ) -> tuple[frozenset[str], bool]:
        """(terminals a text of `tree` can start with, whether it can be empty)."""
        return run(self._first_call(tree, first, nullable))

    def _first_call(
        self, tree: _Tree, first: dict[str, frozenset[str]], nullable: dict[str, bool]
    ) -> Call[tuple[frozenset[str], bool]]:
        """`_first` as a `run` call (trees nest as deep as the IR they come from)."""
        if isinstance(tree, _Sym):
            if tree.terminal:
                return frozenset((tree.name,)), False
            return first[tree.name], nullable[tree.name]
        if isinstance(tree, _Seq):
            out: set[str] = set()
            for item in tree.items:
                f, n = yield self._first_call(item, first, nullable)
                out |= f
                if not n:
                    return frozenset(out), False
            return frozenset(out), True
        if isinstance(tree, _Choice):
            out = set()
            empty = tree.nullable
            for item in tree.items:
                f, n = yield self._first_call(item, first, nullable)
                out |= f
                empty = empty or n
            return frozenset(out), empty
        f, n = yield self._first_call(tree.item, first, nullable)
        return f, n or tree.min == 0

    def first_of(self, tree: _Tree) -> tuple[frozenset[str], bool]:
        """`_first` once the rules' sets are known, memoized (emitting asks per copy).
        By identity, holding the tree: hashing a deep tree by value recurses per level."""
        found = self._first_memo.get(id(tree))
        if found is None:
            found = (tree, self._first(tree, self.first, self.nullable))
            self._first_memo[id(tree)] = found
        return found[1]

    # -- trees → lark text -------------------------------------------------------------

    def instance(self, rule: str, follow: frozenset[str]) -> str:
        """The lark rule for `rule` where `follow` can come after it."""
        key = (rule, follow)
        name = self.instances.get(key)
        if name is None:
            name = f"r{len(self.instances)}"
            self.instances[key] = name
            self.pending.append((name, rule, follow))
        return name

    def emit(self, tree: _Tree, follow: frozenset[str], lines: list[str]) -> str:
        """The lark text of `tree` where `follow` can come after it."""
        return run(self._emit(tree, follow, lines))[0]

    def _emit(self, tree: _Tree, follow: frozenset[str], lines: list[str]) -> Call[tuple[str, int]]:
        """(lark text, how many plain alternatives lark expands it into), as a `run` call.

        lark multiplies out the inline groups of a sequence (`a (b | c) d?` is four
        alternatives), so a sequence of many optional members would grow exponentially
        in lark's grammar loading, in time and memory, where no deadline can stop it.
        Past `_MAX_EXPANSIONS` the largest groups move into helper rules of their own.
        """
        if isinstance(tree, _Sym):
            return (tree.name if tree.terminal else self.instance(tree.name, follow)), 1
        if isinstance(tree, _Seq):
            parts: list[_Part] = []
            after = follow
            for item in reversed(tree.items):
                text, count = yield self._emit(item, after, lines)
                parts.append(_Part(text, count, after))
                f, n = self.first_of(item)
                after = f | after if n else f
            parts.reverse()
            while math.prod(part.count for part in parts) > _MAX_EXPANSIONS:
                widest = max(parts, key=lambda part: part.count)
                widest.text, widest.count = self._helper(widest.text, widest.follow, lines), 1
            while len(parts) > _MAX_SEQUENCE:
                # lark's FOLLOW sets cost the cube of a rule's length per round: the end of
                # a long sequence (an object of many members) goes on in a helper rule.
                tail = " ".join(part.text for part in parts[-_MAX_SEQUENCE:])
                parts[-_MAX_SEQUENCE:] = [_Part(self._helper(tail, follow, lines), 1, follow)]
            return " ".join(part.text for part in parts), math.prod(part.count for part in parts)
        if isinstance(tree, _Choice):
            options: list[tuple[str, int]] = []
            for item in tree.items:
                options.append((yield self._emit(item, follow, lines)))
            body = " | ".join(text for text, _ in options)
            count = sum(c for _, c in options)
            if tree.nullable:
                return f"({body})?", count + 1
            return (body if len(options) == 1 else f"({body})"), count
        first, _ = self.first_of(tree.item)
        text, count = yield self._emit(tree.item, first | follow, lines)
        spare = None if tree.max is None else tree.max - tree.min
        if _repeat_expansions(count, tree.min, spare) > _MAX_EXPANSIONS:
            text, count = self._helper(text, first | follow, lines), 1
        unit = f"({text})"
        required = [unit] * tree.min
        if spare is None:
            text = f"{unit}*" if tree.min == 0 else " ".join([*required[:-1], f"{unit}+"])
            return text, _repeat_expansions(count, tree.min, spare)
        if spare == 1:
            required.append(f"{unit}?")
        elif spare > 1:
            # `_k: unit _{k-1}?` holds 1..k more copies: linear in the bound, and LALR
            # decides at each copy whether another one follows.
            base = self.helpers
            self.helpers += spare
            for k in range(1, spare + 1):
                tail = f" _x{base + k - 1}?" if k > 1 else ""
                lines.append(f"_x{base + k}: {unit}{tail}")
            required.append(f"_x{base + spare}?")
        return " ".join(required), _repeat_expansions(count, tree.min, spare)

    def _helper(self, text: str, follow: frozenset[str], lines: list[str]) -> str:
        """A rule of its own for `text` (one per text and follow set, so the lexer context
        after it stays that of its place)."""
        key = (text, follow)
        name = self._helper_names.get(key)
        if name is None:
            name = self._helper_names[key] = f"_h{len(self._helper_names)}"
            lines.append(f"{name}: {text}")
        return name

    def text(self, start: str) -> str:
        lines: list[str] = []
        lines.append(f"{START}: {self.instance(start, frozenset(('$END',)))}")
        while self.pending:
            name, rule, follow = self.pending.pop()
            lines.append(f"{name}: {self.emit(self.trees[rule], follow, lines)}")
        lines += [f"{name}: /\ue000{name}\ue001/" for name in self.generated]
        return "\n".join(lines) + "\n"


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
    writer = _Writer(rules, max_states, deadline)
    try:
        return _grammar(writer, start, deadline)
    except _LexingConflict as exc:
        if not exc.terminals & writer.split_terminals:
            raise
    except UnsupportedFeatureError:
        if not writer.split_terminals:
            raise
    # A wide piece written apart may meet the text around it in a lexer context where
    # the joined terminal did not: the grammar as written before splitting. (A lexing
    # conflict between terminals no split wrote is there either way: no second try.)
    return _grammar(_Writer(rules, max_states, deadline, split_wide=False), start, deadline)


def _grammar(writer: _Writer, start: str, deadline: float | None) -> LarkGrammar:
    """The grammar of `writer`'s text; lexing conflicts where a terminal drops one that
    could read on (`_LexingConflict.dropped`) are met by raising the dropped one's
    priority, in up to `_PRIORITY_ROUNDS` more rounds of the lexing check."""
    grammar = _lalr(writer, writer.text(start), deadline)
    ranks: dict[str, int] = {}
    # Priorities change only the order of terminals in a context: the rounds share
    # the answers for (a, b, a first, followers), as terminal ids and the table stay.
    answers: _Answers = {}
    for round_ in range(_PRIORITY_ROUNDS + 1):
        try:
            _check_contexts(grammar, answers)
        except _LexingConflict as exc:
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


def _lalr(writer: _Writer, text: str, deadline: float | None) -> LarkGrammar:
    """The grammar of `text` after merging the rule copies its LALR table cannot tell
    apart."""
    from fsmcompile.grammar.loading import load_lark_grammar

    for _ in range(_MERGE_ROUNDS):
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
            merged = _merge_twins(text, exc.reason)
            if merged is None:
                raise UnsupportedFeatureError(
                    "the alternatives around a recursive or free-form part need more than "
                    "one lexeme of lookahead to tell apart (LALR(1)): "
                    f"{exc.reason.splitlines()[0]}"
                ) from exc
            text = merged
    raise UnsupportedFeatureError(
        "the alternatives around a recursive or free-form part still collide after "
        f"{_MERGE_ROUNDS} rounds of merging rule copies (LALR(1))"
    )


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


def _terminal_names(tree: _Tree) -> Iterator[str]:
    """The terminals of `tree`, from a stack of the sub-trees still to read."""
    stack = [tree]
    while stack:
        at = stack.pop()
        if isinstance(at, _Sym):
            if at.terminal:
                yield at.name
        elif isinstance(at, _Rep):
            stack.append(at.item)
        else:
            stack.extend(reversed(at.items))


def _closer_apart(items: list[Node]) -> list[list[Node]]:
    """A run of ref-free items that follows a piece written apart, cut after the closing
    bracket it starts with (after whitespace) where more text follows.

    The bracket closes a value that holds a ref, and it is read in the parser state
    after that value, which LALR shares with every other place the value's rule ends:
    two `anyOf` branches sharing a free-form member, or any JSON object's members. Were
    the bracket joined to what follows it in one place (`},"b":`) and alone or joined
    otherwise in another (`}` then `,`, or `}}`), a lexer reading `},` could not tell
    which it reads. Alone everywhere, it is one terminal, and what follows is read
    after the parser has left the shared state.
    """
    for cut, item in enumerate(items):
        if _closing_bracket(item):
            return [items[: cut + 1], items[cut + 1 :]] if cut + 1 < len(items) else [items]
        if not (isinstance(item, Repeat) and isinstance(item.item, CharSet)):
            break  # only whitespace may come before the bracket
    return [items]


def _closing_bracket(node: Node) -> bool:
    return isinstance(node, CharSet) and node.ranges in (((0x5D, 0x5D),), ((0x7D, 0x7D),))


def _holds_ref(node: Node, below: list[bool]) -> bool:
    return isinstance(node, Ref) or any(below)


def _sized_parts(node: Node) -> tuple[Node, ...]:
    """The sub-trees `_Writer.size` counts: a difference's kept side only."""
    return node.items[:1] if isinstance(node, Diff) else children(node)


def _sized(node: Node, sizes: list[tuple[Node, int]]) -> tuple[Node, int]:
    """(`node`, its `_Writer.size`) from its parts' (`_sized_parts`)."""
    if isinstance(node, Repeat):
        copies = node.max if node.max is not None else max(node.min, 1)
        return node, copies * sizes[0][1]
    if isinstance(node, Ref):
        return node, 0
    if isinstance(node, Diff):
        return node, sizes[0][1]
    return node, max(1, sum(size for _, size in sizes))


def _single_char(node: Node) -> bool:
    return (
        isinstance(node, CharSet)
        and len(node.ranges) == 1
        and node.ranges[0][0] == node.ranges[0][1]
    )


def _repeat_expansions(count: int, least: int, spare: int | None) -> int:
    """The alternatives lark expands a repeat of a `count`-alternative unit into, as
    `_emit` writes it: inline copies multiply, `x*` is an optional repeat rule (2), `x+`
    a rule of its own (1), `x?` adds the empty one, `_x{k}?` helpers are one optional."""
    if spare is None:
        return 2 if least == 0 else math.prod([count] * (least - 1))
    return math.prod([count] * least) * (count + 1 if spare == 1 else 2 if spare else 1)


_WIDE_FROM = 256
"""Estimated states (`_Writer.size`) from which a ref-free piece next to other text is a
terminal of its own: a JSON string bounded at 11 characters or more."""
_MAX_EXPANSIONS = 64
"""Plain alternatives lark may expand one sequence into before groups become helpers."""
_MAX_SEQUENCE = 16
"""Symbols of one generated sequence before its end moves into a helper rule."""
_MERGE_ROUNDS = 8
"""Rounds of `_merge_twins` before a grammar's LALR collisions count as real."""
_PRIORITY_ROUNDS = 4
"""Rounds of raised terminal priorities (`_grammar`) before a dropped terminal counts as
a real lexing conflict: a rank per round, and chains of terminals that each read on
further than the last are short."""
_COLLISION = re.compile(
    r"Reduce/Reduce collision in .*? between the following rules: ?((?:\n\t- <[^\n]*>)+)"
)
_COLLIDING_RULE = re.compile(r"\n\t- <(\w+) :")
_NAME = re.compile(r"\b\w+\b")


def _merge_twins(text: str, message: str) -> str | None:
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


_Answers = dict[tuple[int, int, bool, bytes], "tuple[bytes, int] | None"]
"""`_lexing_conflict` answers of one grammar's terminals by (a, b, a first, followers),
the followers' ids packed as int32 bytes."""


def _check_contexts(grammar: LarkGrammar, answers: _Answers | None = None) -> None:
    """Refuse grammars whose longest-match lexing could cut a valid text wrongly.

    Terminal a of a context is cut wrongly when, after a lexeme x of a, the text goes on
    with what may follow a, and the lexer instead reads further into one lexeme: of
    another terminal b of the context (or of a itself, reading on). So for each such pair
    the check looks for x in L(a) where b's automaton is still alive, then runs b on
    against each terminal f that can follow a: if b reaches a lexeme end while f is
    still alive, or f ends while b is alive, the text is ambiguous to the lexer. Two
    terminals of one context that share a whole lexeme are always refused.

    What may follow a is read per parser state: where the state shifts a, the terminals
    of the state it goes to (an object's opening brace of one `anyOf` branch is followed
    by that branch's keys, not by the keys of every object in the grammar); where it
    reduces first, those of every state a shift of a can lead to.

    `answers` carries the pair checks from one call to the next on grammars that differ
    only in terminal priorities: a WashingtonPost schema's grammar needs 11k of them,
    more than the process-wide memo keeps, so each round recomputed them all.
    """
    from fsmcompile.index.cfg.grammar_index import next_contexts

    if answers is None:
        answers = {}

    num_terminals = len(grammar.terminals)
    table = grammar.table
    after = next_contexts(table, num_terminals)
    firsts: dict[int, int] = {}

    def first(t: int) -> int:
        if t not in firsts:
            firsts[t] = _first_bytes(_dfa(grammar, t))
        return firsts[t]

    def lexed(terminals: Iterable[int]) -> tuple[int, ...]:
        return tuple(t for t in terminals if grammar.terminals[t].dfa is not None)

    # In the lexer's order: a terminal that ends a lexeme drops those after it.
    in_context = [lexed(context.terminals) for context in grammar.contexts]
    positions = [{t: i for i, t in enumerate(order)} for order in in_context]
    anywhere_after = [
        lexed(sorted({f for c in after[t] for f in grammar.contexts[c].terminals}))
        for t in range(num_terminals)
    ]
    keys: dict[int, bytes] = {}
    automata: dict[int, _Automaton] = {}

    def key(t: int) -> bytes:
        if t not in keys:
            keys[t] = dfa_key(_dfa(grammar, t))
        return keys[t]

    def automaton(t: int) -> _Automaton:
        if t not in automata:
            automata[t] = _automaton(_dfa(grammar, t))
        return automata[t]

    # Per distinct followers tuple: its ids and its automata's digests packed into bytes,
    # which keep their hash (a tuple hashes all its items at every lookup, and followers
    # run to 160 terminals), and its automata.
    packed: dict[tuple[int, ...], tuple[bytes, bytes, list[_Automaton]]] = {}

    def pack(follows: tuple[int, ...]) -> tuple[bytes, bytes, list[_Automaton]]:
        if follows not in packed:
            packed[follows] = (
                np.array(follows, np.int32).tobytes(),
                b"".join(map(key, follows)),
                list(map(automaton, follows)),
            )
        return packed[follows]

    def found_for(
        a: int, b: int, a_first: bool, follows: tuple[bytes, bytes, list[_Automaton]]
    ) -> tuple[bytes, int] | None:
        ids, digests, follow_automata = follows
        place = (a, b, a_first, ids)
        if place in answers:
            return answers[place]
        # Memoized by content: the any-JSON terminals meet each other the same way in
        # every schema with free-form members.
        memo_key = (key(a), key(b), b"same" if a == b else b"first" if a_first else b"", digests)
        found = _conflicts.get_or_make(
            memo_key,
            partial(_lexing_conflict, automaton(a), automaton(b), a == b, a_first, follow_automata),
        )
        answers[place] = found
        return found

    checked: set[tuple[int, int, bool, bytes]] = set()
    dropped: dict[tuple[int, int], bytes] = {}  # (first, dropped) -> witness
    for context, a, follows in _lexing_places(table, num_terminals, in_context, anywhere_after):
        if grammar.terminals[a].dfa is None:
            continue
        position = positions[context]
        first_a = first(a)
        packed_follows = pack(follows)
        ids = packed_follows[0]
        for b in in_context[context]:
            if a != b and not first_a & first(b):
                continue
            a_first = position[a] < position[b]
            if (a, b, a_first, ids) in checked:
                continue
            checked.add((a, b, a_first, ids))
            found = found_for(a, b, a_first, packed_follows)
            if found is not None and found[1] == DROPPED:
                # Raising b above a helps only if b, read first, cuts no text wrongly.
                again = found_for(a, b, False, packed_follows)
                if again is None and (b, a) not in dropped:
                    dropped.setdefault((a, b), found[0])
                    continue
                found = again or found
            if found is None:
                continue
            witness, follower = found
            involved = [a, b] + ([follows[follower]] if follower >= 0 else [])
            raise _LexingConflict(
                witness.decode("utf-8", "replace"),
                frozenset(grammar.terminals[t].name for t in involved),
            )
    if dropped:
        (a, b), witness = next(iter(dropped.items()))
        name = [t.name for t in grammar.terminals]
        raise _LexingConflict(
            witness.decode("utf-8", "replace"),
            frozenset((name[a], name[b])),
            tuple((name[a], name[b]) for a, b in dropped),
        )


def _lexing_places(
    table: ParseTable,
    num_terminals: int,
    in_context: list[tuple[int, ...]],
    anywhere_after: list[tuple[int, ...]],
) -> list[tuple[int, int, tuple[int, ...]]]:
    """The distinct (lexer context, terminal a read in it, terminals that may follow a
    there) of the parser states, in state order."""
    action = table.action[:, :num_terminals]
    state, terminal = np.nonzero(action)
    act = action[state, terminal].astype(np.int64)
    target_context = np.where(act > 0, table.context_of_state[np.maximum(act - 1, 0)], -1).astype(
        np.int64
    )
    contexts = table.context_of_state[state].astype(np.int64)
    terminal = terminal.astype(np.int64)
    # One integer per place: np.unique of rows (axis=0) took ~8x longer on 150k places.
    width = int(target_context.max(initial=-1)) + 2
    _, first_at = np.unique(
        (contexts * num_terminals + terminal) * width + target_context + 1, return_index=True
    )
    places = np.stack([contexts, terminal, target_context], axis=1)
    out = []
    for context, a, target in places[np.sort(first_at)].tolist():
        follows = anywhere_after[a] if target < 0 else in_context[target]
        out.append((context, a, follows))
    return out


class _LexingConflict(UnsupportedFeatureError):
    """Two terminals of a lexer context overlap (`_check_contexts`); `terminals` names
    them and the follower that showed it."""

    def __init__(
        self,
        witness: str,
        terminals: frozenset[str],
        dropped: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(
            f"two alternatives at one place can both read {witness!r}, so a lexer "
            "cannot tell where one lexeme ends; the anyOf/oneOf branches or "
            "optional parts around a recursive or free-form value overlap",
            features=[("", "overlapping alternatives")],
        )
        self.terminals = terminals
        self.dropped = dropped
        """(first, dropped): pairs where the lexer drops a terminal that could read on,
        because the first comes before it and ends a lexeme there; the only conflicts
        found when not empty."""


DROPPED = -2
"""`_lexing_conflict`'s follower index for a terminal the lexer drops."""

_conflicts: StageMemo[tuple[bytes, ...], tuple[bytes, int] | None] = StageMemo(65536)
"""Lexing-conflict witnesses by the automata's content (`dfa_key`, 16-byte digests: an
entry is a few hundred bytes). A WashingtonPost schema's grammar checks 11k pairs, and
schemas of one API share most of them: with 8192 entries each such compile pushed out
the last one's pairs before reading them (wp_9 after wp_8: 11.7k pairs computed; with
room for both, 1.5k)."""


def _lexing_conflict(
    a: _Automaton, b: _Automaton, same: bool, first: bool, follows: Sequence[_Automaton]
) -> tuple[bytes, int] | None:
    """A text showing that lexing a then a follower is ambiguous with lexing b (see
    `_check_contexts`) and the index of that follower in `follows`, or None. The index
    is -1 when a and b share a whole lexeme, and `DROPPED` when a comes `first` in the
    context's order and ends a lexeme where b goes on: the lexer then drops b, so b's
    longer lexemes are never read.

    The witness is the first such text of a breadth-first walk over the pairs of states a
    and b reach together (then b and the follower), moves in the order of their smallest
    byte: it appears in error messages, so `native/lexcheck.c` keeps that order exactly.
    """
    return _native.lexing_conflict(a, b, same, first, follows)


_Automaton = tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.bool_]]
"""A `ByteDFA`'s (transitions, class_of_byte, accepting) as `_native.lexing_conflict` reads them."""


def _automaton(dfa: ByteDFA) -> _Automaton:
    return (
        np.ascontiguousarray(dfa.transitions, dtype=np.int32),
        np.ascontiguousarray(dfa.class_of_byte, dtype=np.int32),
        np.ascontiguousarray(dfa.accepting, dtype=np.bool_),
    )


def _dfa(grammar: LarkGrammar, terminal: int) -> ByteDFA:
    dfa = grammar.terminals[terminal].dfa
    assert dfa is not None
    return dfa


def _first_bytes(dfa: ByteDFA) -> int:
    """The bytes the start state moves on, as a 256-bit integer (bit i: byte i)."""
    live = (dfa.transitions[0] >= 0)[dfa.class_of_byte]
    return int.from_bytes(np.packbits(live, bitorder="little").tobytes(), "little")
