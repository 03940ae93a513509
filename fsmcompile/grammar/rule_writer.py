"""Rules of regex IR with `Ref`s → EBNF trees over terminals (their automata collected) →
lark grammar text, one rule copy per follow set."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

from fsmcompile.errors import SpecError, UnsupportedFeatureError
from fsmcompile.grammar.rule_trees import (
    EMPTY_SEQ,
    Choice,
    Part,
    Rep,
    Seq,
    Sym,
    Tree,
    terminal_names,
)
from fsmcompile.ir.dag_walk import Call, fold, run
from fsmcompile.ir.nodes import (
    Alt,
    And,
    CharSet,
    Concat,
    CountedRepeat,
    Diff,
    Node,
    Ref,
    Repeat,
    children,
    content_key,
    counted_item,
    uncounted,
)
from fsmcompile.tables.byte_dfa import ByteDFA, dfa_key

START = "start"


class RuleWriter:
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
        # Per-node facts, asked again for each concatenation, choice and split check that
        # meets the node. By id, holding the node so that its id is not reused by a
        # temporary one (a run of items joined into one terminal, a grouped string).
        self._size: dict[Hashable, tuple[Node, int]] = {}
        self._splits: dict[Hashable, tuple[Node, bool]] = {}
        self._has_ref: dict[Hashable, tuple[Node, bool]] = {}
        self._alone: dict[int, tuple[Node, bool]] = {}
        self._counted_memo: dict[int, tuple[Node, bool]] = {}
        # By content digest: hashing a deep IR tree by value recurses once per level
        # (and re-walks shared sub-trees).
        self.terminal_of: dict[bytes, tuple[str | None, bool]] = {}
        self.by_signature: dict[bytes, str] = {}
        self.generated: dict[str, tuple[Node, ByteDFA]] = {}
        self.shared = self._shared_nodes(rules)
        self.trees: dict[str, Tree] = {}
        for name, body in rules.items():
            tree = self.tree(body, top=True)
            if tree is None:
                raise SpecError(f"rule {name!r} matches nothing")
            self.trees[name] = tree
        self.first, self.nullable = self._first_sets()
        self._first_memo: dict[int, tuple[Tree, tuple[frozenset[str], bool]]] = {}
        self.instances: dict[tuple[str, frozenset[str]], str] = {}
        self.pending: list[tuple[str, str, frozenset[str]]] = []
        self.helpers = 0
        self._helper_names: dict[tuple[str, frozenset[str]], str] = {}

    # -- IR → trees ----------------------------------------------------------------

    def has_ref(self, node: Node) -> bool:
        """Whether a `Ref` is under `node` (walked without recursion: IR nests a few
        levels per optional member of an object)."""
        found = self._has_ref.get(id(node))
        if found is None:
            found = fold(node, children, _holds_ref, self._has_ref)
        return found[1]

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
        """Nodes written as more than one piece (holding refs, or split around a wide
        value) that more than one place uses: each becomes a rule of its own, since
        writing a shared DAG out as a tree grows exponentially (an object's optional
        members share the rest of the object between both choices of each member)."""
        uses: dict[int, int] = {}
        stack = list(rules.values())
        while stack:
            node = stack.pop()
            for child in children(node):
                if isinstance(child, Ref) or not (self.has_ref(child) or self.splits(child)):
                    continue
                uses[id(child)] = uses.get(id(child), 0) + 1
                if uses[id(child)] == 1:
                    stack.append(child)
        return {key: f"_shared{i}" for i, key in enumerate(k for k, n in uses.items() if n > 1)}

    def tree(self, node: Node, *, top: bool = False) -> Tree | None:
        """The EBNF tree of `node`: None when it matches nothing."""
        return run(self._tree(node, top=top))

    def _tree(self, node: Node, *, top: bool = False) -> Call[Tree | None]:
        """`tree` as a `run` call: each shared node below and each optional member of
        an object nests one call deeper, past Python's recursion limit in large schemas."""
        shared = None if top else self.shared.get(id(node))
        if shared is not None:
            if shared not in self.trees:
                tree = yield self._tree(node, top=True)
                if tree is None:
                    return None
                self.trees[shared] = tree
            return Sym(shared, terminal=False)
        if not self.has_ref(node) and not self.splits(node):
            name, nullable = self.terminal(node)
            if name is None:
                return EMPTY_SEQ if nullable else None
            if self._counted(node):
                # Written apart from the text around it, as a split piece is.
                self.split_terminals.add(name)
            sym = Sym(name, terminal=True)
            return Choice((sym,), nullable=True) if nullable else sym
        if isinstance(node, Ref):
            return Sym(node.name, terminal=False)
        if isinstance(node, Concat):
            return (yield from self._concat(node))
        if isinstance(node, Alt):
            joined: list[Node] = []
            apart: list[Node] = []
            for member in node.items:
                plain = not (self.has_ref(member) or self.splits(member) or self._counted(member))
                (joined if plain else apart).append(member)
            pieces: list[Tree | None] = []
            if joined:
                pieces.append(
                    (yield self._tree(Alt(tuple(joined)) if len(joined) > 1 else joined[0]))
                )
            for member in apart:
                pieces.append((yield self._tree(member)))
            live = [p for p in pieces if p is not None]
            if not live:
                return None
            options = tuple(p for p in live if p != EMPTY_SEQ)
            if len(options) == 1 and len(live) == 1:
                return options[0]
            return Choice(options, nullable=len(options) < len(live)) if options else EMPTY_SEQ
        if isinstance(node, Repeat):
            item = yield self._tree(node.item)
            if item is None:
                return EMPTY_SEQ if node.min == 0 else None
            return EMPTY_SEQ if item == EMPTY_SEQ else Rep(item, node.min, node.max)
        raise UnsupportedFeatureError(
            "an intersection or difference (allOf of differently shaped parts, counted "
            "object members, patterns over keys) that contains a recursive or free-form "
            "value cannot be written as a grammar"
        )

    def _concat(self, node: Concat) -> Call[Tree | None]:
        parts: list[Tree] = []
        pieces, split = self._pieces(node)
        for piece in pieces:
            tree = yield self._tree(Concat(tuple(piece)) if len(piece) > 1 else piece[0])
            if tree is None:
                return None
            parts.append(tree)
        parts = [p for p in parts if p != EMPTY_SEQ]
        if split:
            self.split_terminals.update(name for p in parts for name in terminal_names(p))
        return parts[0] if len(parts) == 1 else Seq(tuple(parts))

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
        found = self._size.get(id(node))
        if found is None:
            found = fold(node, _sized_parts, _sized, self._size)
        return found[1]

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
                out
                and i + 1 < len(items)
                and _single_char(out[-1])
                and out[-1] == items[i + 1]
                and (self._wide(item) or _counted_alone(item))
            ):
                out[-1] = Concat((out[-1], item, items[i + 1]))
                i += 2
                continue
            out.append(item)
            i += 1
        return out

    def _stands_alone(self, item: Node) -> bool:
        """Whether a ref-free item of a concatenation is written as a piece of its own."""
        found = self._alone.get(id(item))
        if found is None:
            alone = self._wide(item) or self.splits(item) or self._counted(item)
            found = self._alone[id(item)] = (item, alone)
        return found[1]

    def _counted(self, node: Node) -> bool:
        """Whether `node` is a counted piece (a string under `maxLength`, `counted_at`):
        written as a terminal of its own, whose bound the lexer may count rather than
        unroll, where joined to the text around it the bound would be unrolled."""
        if not self.split_wide:
            return False
        found = self._counted_memo.get(id(node))
        if found is None:
            found = self._counted_memo[id(node)] = (node, counted_item(node) is not None)
        return found[1]

    def splits(self, node: Node) -> bool:
        """Whether a ref-free `node` is written as several terminals rather than one: it
        joins a wide piece (a bounded string, a long bounded repeat) to other text. One
        terminal per member holding its key and such a value unrolls the value into the
        lexer once per member and per position (with and without a leading comma): tens
        of thousands of lexer states for tens of members, where the value alone as a
        terminal is one automaton for all of them."""
        if not self.split_wide or self.has_ref(node):
            return False
        found = self._splits.get(id(node))
        if found is None:
            found = fold(node, self._split_parts, self._split, self._splits)
        return found[1]

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
        if not isinstance(node, (Alt, Repeat)):
            return node, False
        return node, any(split for _, split in parts) or any(map(self._counted, children(node)))

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
        self, tree: Tree, first: dict[str, frozenset[str]], nullable: dict[str, bool]
    ) -> tuple[frozenset[str], bool]:
        """(terminals a text of `tree` can start with, whether it can be empty)."""
        return run(self._first_call(tree, first, nullable))

    def _first_call(
        self, tree: Tree, first: dict[str, frozenset[str]], nullable: dict[str, bool]
    ) -> Call[tuple[frozenset[str], bool]]:
        """`_first` as a `run` call (trees nest as deep as the IR they come from)."""
        if isinstance(tree, Sym):
            if tree.terminal:
                return frozenset((tree.name,)), False
            return first[tree.name], nullable[tree.name]
        if isinstance(tree, Seq):
            out: set[str] = set()
            for item in tree.items:
                f, n = yield self._first_call(item, first, nullable)
                out |= f
                if not n:
                    return frozenset(out), False
            return frozenset(out), True
        if isinstance(tree, Choice):
            out = set()
            empty = tree.nullable
            for item in tree.items:
                f, n = yield self._first_call(item, first, nullable)
                out |= f
                empty = empty or n
            return frozenset(out), empty
        f, n = yield self._first_call(tree.item, first, nullable)
        return f, n or tree.min == 0

    def first_of(self, tree: Tree) -> tuple[frozenset[str], bool]:
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

    def emit(self, tree: Tree, follow: frozenset[str], lines: list[str]) -> str:
        """The lark text of `tree` where `follow` can come after it."""
        return run(self._emit(tree, follow, lines))[0]

    def _emit(self, tree: Tree, follow: frozenset[str], lines: list[str]) -> Call[tuple[str, int]]:
        """(lark text, how many plain alternatives lark expands it into), as a `run` call.

        lark multiplies out the inline groups of a sequence (`a (b | c) d?` is four
        alternatives), so a sequence of many optional members would grow exponentially
        in lark's grammar loading, in time and memory, where no deadline can stop it.
        Past `_MAX_EXPANSIONS` the largest groups move into helper rules of their own.
        """
        if isinstance(tree, Sym):
            return (tree.name if tree.terminal else self.instance(tree.name, follow)), 1
        if isinstance(tree, Seq):
            parts: list[Part] = []
            after = follow
            for item in reversed(tree.items):
                text, count = yield self._emit(item, after, lines)
                parts.append(Part(text, count, after))
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
                parts[-_MAX_SEQUENCE:] = [Part(self._helper(tail, follow, lines), 1, follow)]
            return " ".join(part.text for part in parts), math.prod(part.count for part in parts)
        if isinstance(tree, Choice):
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


def _holds_ref(node: Node, below: list[tuple[Node, bool]]) -> tuple[Node, bool]:
    """(`node`, whether a `Ref` is under it) from its children's answers."""
    return node, isinstance(node, Ref) or any(found for _, found in below)


def _sized_parts(node: Node) -> tuple[Node, ...]:
    """The sub-trees `RuleWriter.size` counts: a difference's kept side only."""
    return node.items[:1] if isinstance(node, Diff) else children(node)


def _sized(node: Node, sizes: list[tuple[Node, int]]) -> tuple[Node, int]:
    """(`node`, its `RuleWriter.size`) from its parts' (`_sized_parts`)."""
    if isinstance(node, Repeat):
        copies = node.max if node.max is not None else max(node.min, 1)
        return node, copies * sizes[0][1]
    if isinstance(node, Ref):
        return node, 0
    if isinstance(node, Diff):
        return node, sizes[0][1]
    return node, max(1, sum(size for _, size in sizes))


def _counted_alone(item: Node) -> bool:
    """Whether `item` alone is a counted piece (`counted_item` of it as a one-item
    concatenation), without building that concatenation for the many items that cannot
    be one."""
    return isinstance(item, (CountedRepeat, And)) and counted_item(Concat((item,))) is not None


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
"""Estimated states (`RuleWriter.size`) from which a ref-free piece next to other text is a
terminal of its own: a JSON string bounded at 11 characters or more."""
_MAX_EXPANSIONS = 64
"""Plain alternatives lark may expand one sequence into before groups become helpers."""
_MAX_SEQUENCE = 16
"""Symbols of one generated sequence before its end moves into a helper rule."""
