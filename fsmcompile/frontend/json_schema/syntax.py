"""JSON punctuation under a whitespace policy, any-JSON values, and the member checker.

Every lowering module builds objects and arrays through `JsonSyntax`, so the whitespace
option is decided in one place. Two languages here need a word:

* `any_value(inner)`: one level of any JSON value; with `inner` a reference to itself
  it is the recursive rule behind `{}` (compiled as a grammar).
* `key_checker(...)`: objects holding a given key at most (or exactly) once, values
  skipped the same way; intersected with members in any order (any_order.py).
* `member_checker(...)`: every object whose top-level members are separated by commas,
  `min..max` of them, values skipped by bracket depth only. Intersected with an object
  whose separators are *optional*, it fixes the comma placement exactly. Without it, an
  object with optional properties needs one alternative per possible first member, each
  repeating the rest of the object: quadratic in the properties and multiplied again at
  every nesting level.
"""

from __future__ import annotations

from fsmcompile.automaton.build import keep_built
from fsmcompile.frontend.json_schema.numbers import NUMBER_TEXT
from fsmcompile.frontend.json_schema.options import JsonOptions
from fsmcompile.frontend.json_schema.strings import ANY_CHAR, ANY_STRING, QUOTE
from fsmcompile.ir.nodes import (
    EMPTY,
    Alt,
    CountedRepeat,
    Node,
    Repeat,
    alt,
    chars,
    literal,
    negate,
    optional,
    seq,
    without,
)

COUNTED_ITEMS_FROM = 32
"""Item bounds (`maxItems`, `maxProperties`) from here on are `CountedRepeat`s: a grammar
lexer counts the items of a long bounded array of strings, such as 200 ids under a
`pattern`, rather than holding 200 copies of the item in every lexer context that can
read it (a fifth of the lexer of a WashingtonPost schema). Where the item is no prefix
code (`,1` of `,12`) the lexer unrolls the bound, as it does below this one."""

_WS_CHARS = chars(" \t\n\r")
ANY_SCALAR: Node = keep_built(
    alt(literal("null"), literal("true"), literal("false"), NUMBER_TEXT, ANY_STRING)
)
"""Every JSON scalar: one node for every free-form value of every schema, so its automaton
(a grammar terminal of its own) is built once per process (`keep_built`)."""
_LOOSE_STRING = seq(
    QUOTE, Repeat(alt(negate(chars('"\\')), seq(chars("\\"), ANY_CHAR)), 0, None), QUOTE
)


class JsonSyntax:
    """Punctuation, containers and generic values for one whitespace policy."""

    def __init__(self, options: JsonOptions) -> None:
        self.options = options
        if options.whitespace == "flexible":
            self.ws: Node = Repeat(_WS_CHARS, 0, options.max_whitespace_chars)
            self.comma: Node = seq(self.ws, chars(","), self.ws)
            self.colon: Node = seq(self.ws, chars(":"), self.ws)
        elif options.whitespace == "standard":
            self.ws = EMPTY
            self.comma = literal(", ")
            self.colon = literal(": ")
        else:
            self.ws = EMPTY
            self.comma = chars(",")
            self.colon = chars(":")
        self._skip: dict[int, Node] = {}

    def container(self, open_: str, close: str, content: Node, *, may_be_empty: bool) -> Node:
        """`open_ content close` with whitespace inside the brackets; `content` is optional
        when `may_be_empty`. `content` appears once, so the IR stays linear."""
        body = seq(content, self.ws)
        return seq(chars(open_), self.ws, optional(body) if may_be_empty else body, chars(close))

    def member(self, key: Node, value: Node) -> Node:
        """`key: value` (the key is a full string literal, quotes included)."""
        return seq(key, self.colon, value)

    def separated(self, item: Node, min_count: int, max_count: int | None) -> Node:
        """`item (, item)*` with `min_count..max_count` items (at least one)."""
        rest_max = None if max_count is None else max_count - 1
        counted = rest_max is not None and rest_max >= COUNTED_ITEMS_FROM
        repeat = CountedRepeat if counted else Repeat
        return seq(item, repeat(seq(self.comma, item), max(min_count - 1, 0), rest_max))

    def array_of(self, item: Node, min_count: int = 0, max_count: int | None = None) -> Node:
        """`[item, ...]` with `min_count..max_count` items."""
        if max_count == 0:
            return self.container("[", "]", EMPTY, may_be_empty=True)
        inner = self.separated(item, min_count, max_count)
        return self.container("[", "]", inner, may_be_empty=min_count == 0)

    def object_of(self, member: Node, min_count: int = 0, max_count: int | None = None) -> Node:
        """`{member, ...}` with `min_count..max_count` members."""
        if max_count == 0:
            return self.container("{", "}", EMPTY, may_be_empty=True)
        inner = self.separated(member, min_count, max_count)
        return self.container("{", "}", inner, may_be_empty=min_count == 0)

    def any_value(self, inner: Node) -> Node:
        """One level of any JSON value: a scalar, or an array or object of `inner`s.

        With `inner` a reference to this very rule it is every JSON value (a grammar).
        """
        return Alt(
            (ANY_SCALAR, self.array_of(inner), self.object_of(self.member(ANY_STRING, inner)))
        )

    def _skip_inner(self, depth: int) -> Node:
        """Text inside brackets nested at most `depth` more levels, strings skipped whole."""
        if depth in self._skip:
            return self._skip[depth]
        flat = alt(_LOOSE_STRING, negate(chars('"{}[]')))
        if depth > 0:
            nested = seq(chars("[{"), self._skip_inner(depth - 1), chars("]}"))
            flat = alt(flat, nested)
        node: Node = Repeat(flat, 0, None)
        self._skip[depth] = node
        return node

    def _skipped_value(self, depth: int) -> Node:
        """A top-level member's value, skipped: no `,` `:` or `}` outside its brackets."""
        top_char = negate(chars('"{}[],:'))
        pieces: list[Node] = [_LOOSE_STRING, top_char]
        if depth > 0:
            pieces.append(seq(chars("[{"), self._skip_inner(depth - 1), chars("]}")))
        return Repeat(alt(*pieces), 1, None)

    def key_checker(self, key: Node, required: bool, depth: int) -> Node:
        """Objects whose top-level members with a key spelled as `key` (a string literal,
        quotes included) number at most one, or exactly one when `required`.

        Values are skipped as in `member_checker`, whose `depth` rule holds here too.
        Intersected with members in any order, one checker per listed key makes the
        automaton remember which keys it has seen, without the IR listing the sets.
        """
        value = self._skipped_value(depth)
        own = seq(key, self.colon, value)
        other = seq(without(_LOOSE_STRING, key), self.colon, value)
        comma = self.comma
        once = seq(Repeat(seq(other, comma), 0, None), own, Repeat(seq(comma, other), 0, None))
        if required:
            return self.container("{", "}", once, may_be_empty=False)
        none = seq(other, Repeat(seq(comma, other), 0, None))
        return self.container("{", "}", alt(once, none), may_be_empty=True)

    def member_checker(self, min_count: int, max_count: int | None, depth: int) -> Node:
        """Objects with `min_count..max_count` comma-separated `"key": value` members.

        Values are skipped, not validated: at top level a value may hold no `,` `:` or
        `}`, so a missing comma shows up as a second top-level `:`. `depth` must be at
        least the container depth of the values it is intersected with.
        """
        member = seq(_LOOSE_STRING, self.colon, self._skipped_value(depth))
        if max_count == 0:
            return self.container("{", "}", EMPTY, may_be_empty=True)
        inner = self.separated(member, min_count, max_count)
        return self.container("{", "}", inner, may_be_empty=min_count == 0)
