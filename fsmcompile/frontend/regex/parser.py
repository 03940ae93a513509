"""Regex front end: a Python-`re` or ECMA-262 pattern → the regex IR, full-match or search.

The pattern is parsed once by a recursive-descent parser into IR nodes. Python patterns
are first compiled by `re` itself, so exactly the patterns Python accepts are accepted
and its error message and position are reported for the rest. Constructs whose
language cannot be a finite automaton or that change meaning under our full-match
reading (backreferences, lookbehind, word boundaries, possessive quantifiers, atomic
groups, anchors in the middle) raise `UnsupportedFeatureError` at their position
rather than being relaxed.

Anchors: `^`/`\\A` may stand only where nothing can have been read yet and `$`/`\\Z`
only where nothing can follow, per alternative and through groups. Under full match
they are no-ops; in search mode they decide whether the pattern is padded with
"anything" on that side. Each parsed term therefore keeps its language split by which
anchors its paths crossed (`_Term.parts`).

Lookaheads: `(?=A)` and `(?!A)` test the rest of the input, from their position to its
end, against "A, then anything" (A's own `$` ends that at the input's end). That rest is
what the rest of the pattern reads (then the search padding), which is regular once the
groups around the lookahead are unfolded into one sequence per reading (a branch taken,
an optional group taken or not): the lookahead intersects it with the language of A, or
removes that language from it (`^(?=.*[0-9])(?!.*--).{8,}$`, `^(a(?:(?!.*--)b)?)$`).
In a group repeated more than once, the same lookahead would test several rests at
once; there, and inside another lookahead, it is unsupported.
"""

from __future__ import annotations

import re
import unicodedata
import warnings
from dataclasses import dataclass, replace
from typing import Literal

from fsmcompile.budget import check_deadline, check_time_left
from fsmcompile.errors import RegexSyntaxError, UnsupportedFeatureError
from fsmcompile.frontend.regex.classes import (
    ECMA_DIGIT,
    ECMA_LINE_TERMINATORS,
    ECMA_WORD,
    Ranges,
    complement,
    ecma_space,
    ignorecase,
    python_shorthand,
    unicode_property,
)
from fsmcompile.ir.nodes import (
    EMPTY,
    NOTHING,
    And,
    CharSet,
    Diff,
    Node,
    alt,
    normalize_ranges,
    repeat,
    seq,
)

Dialect = Literal["python", "ecma"]

# Anchor kinds, ordered by strength: combining two on one path keeps the stronger.
_NO_ANCHOR = 0
_LINE = 1  # (?m)^ / (?m)$: at a line boundary
_DOLLAR = 2  # Python's $ without (?m): at the end or before a final "\n"
_TEXT = 3  # \A, \Z, ECMA ^ and $: at the very start / end
_Key = tuple[int, int]  # (start anchor kind, end anchor kind)

_ANY: Node = repeat(CharSet(((0, 0x10FFFF),)), 0, None)
_NEWLINE: Node = CharSet(((0x0A, 0x0A),))
_BEFORE = {_NO_ANCHOR: _ANY, _LINE: alt(EMPTY, seq(_ANY, _NEWLINE)), _TEXT: EMPTY}
"""What search mode lets stand before a match, by the kind of its start anchor."""
_AFTER = {
    _NO_ANCHOR: _ANY,
    _LINE: alt(EMPTY, seq(_NEWLINE, _ANY)),
    _DOLLAR: alt(EMPTY, _NEWLINE),
    _TEXT: EMPTY,
}
"""What may follow a match (in search mode, or a lookahead's body anywhere), by the kind
of its end anchor."""
_STEPS_PER_CHECK = 4096  # parsed items between deadline checks (a few ms)
_RE_SECONDS_PER_CHAR = 2e-6
"""The least time Python's `re.compile` takes per pattern character (2-10 us measured),
for refusing, before it starts, a pattern it could not check within the deadline."""
_WARNING_MARKS = ("[[", "--", "&&", "~~", "||", "(?P", "(?(")  # where `re` may warn
_MAX_READINGS = 64
"""Most alternative item lists the groups around lookaheads may give one pattern."""
_COUNTS = re.compile(r"\{([0-9]*)(,?)([0-9]*)\}")  # ASCII digits only, as in re
_MAX_COUNT = 4_294_967_294  # Python's MAXREPEAT - 1; counts past it are errors there too
MAX_GROUP_DEPTH = 100
"""Most groups nested inside each other in one pattern. The parser recurses about four
frames per group (Python's `re` two), so this keeps a pattern at the limit far inside
the default recursion limit of 1,000 wherever it is called from; real patterns nest a
handful of groups."""


@dataclass(frozen=True, slots=True)
class _Flags:
    ignorecase: bool = False
    ascii: bool = False
    dotall: bool = False
    multiline: bool = False
    verbose: bool = False


@dataclass(slots=True)
class _Term:
    """A parsed piece: its language split by the anchors its paths crossed."""

    parts: dict[_Key, Node]
    start_pos: int | None = None  # where its first ^ / \A is, if any
    end_pos: int | None = None  # where its first $ / \Z is, if any
    empty_only: bool = False  # matches only "" (anchors, empty groups)
    anchor: bool = False  # a bare anchor: nothing to repeat
    quantified: bool = False
    # A lookahead itself: the language the rest of the input must (True) or must not
    # (False) be in, and where the lookahead starts.
    lookahead: tuple[Node, bool, int] | None = None
    # A group holding a lookahead: its readings as alternative item lists, unjoined, for
    # the enclosing sequence to take in (the lookahead needs the rest of the pattern).
    spliced: list[list[_Term]] | None = None


def parse_regex(pattern: str, *, dialect: Dialect = "python", search: bool = False) -> Node:
    """Parse `pattern` into the regex IR.

    Args:
        pattern: the regular expression.
        dialect: "python" (the `re` module, str patterns, Unicode `\\d \\w \\s`) or
            "ecma" (ECMA-262 with the `u` flag, as JSON Schema's `pattern` uses it: ASCII
            `\\d \\w`, `.` excludes line terminators, `(?<name>...)`, `\\u{...}`,
            `\\p{...}` for General_Category values).
        search: False for full-match semantics (the whole string must match; `^`/`$` at
            the edges are no-ops). True for search semantics (JSON Schema `pattern`):
            the IR matches every string that *contains* a match, anchors honoured.

    Returns:
        The IR node of the language.

    Raises:
        RegexSyntaxError: the pattern does not parse (`.pos` is the offset).
        UnsupportedFeatureError: a valid construct no DFA can enforce exactly here
            (`.pos` is where it starts).
    """
    if dialect not in ("python", "ecma"):
        raise ValueError(f"unknown regex dialect {dialect!r}; use 'python' or 'ecma'")
    re_too_deep = dialect == "python" and not _check_with_re(pattern)
    try:
        term = _Parser(pattern, dialect, search).parse()
    except RecursionError:
        raise RegexSyntaxError(
            "groups nest too deeply to parse from here; flatten the pattern", pattern, 0
        ) from None
    if re_too_deep:  # our parser took it, but `re` ran out of stack before it could check
        raise RegexSyntaxError(
            "groups nest too deeply for Python's re to check; flatten the pattern", pattern, 0
        )
    if not search:
        return alt(*term.parts.values()) if term.parts else NOTHING
    options = [seq(_BEFORE[start], node, _AFTER[end]) for (start, end), node in term.parts.items()]
    return alt(*options) if options else NOTHING


def _check_with_re(pattern: str) -> bool:
    """Let Python's own parser reject what it rejects, with its message and position.

    Returns False when `re` ran out of stack: groups nested past `MAX_GROUP_DEPTH`,
    which our parser then reports where the limit is crossed."""
    check_time_left(
        len(pattern) * _RE_SECONDS_PER_CHAR, f"checking a regex of {len(pattern)} characters"
    )
    try:
        if any(mark in pattern for mark in _WARNING_MARKS):
            with warnings.catch_warnings():
                # FutureWarnings about possible future set syntax ("[[", "--") concern
                # the user's Python code, not this parse: today's meaning is what we
                # build. catch_warnings is process-global, so it is used only here.
                warnings.simplefilter("ignore")
                re.compile(pattern)
        else:
            re.compile(pattern)
    except re.error as exc:
        raise RegexSyntaxError(exc.msg, pattern, exc.pos or 0) from exc
    except RecursionError:
        return False
    except OverflowError as exc:
        raise RegexSyntaxError(str(exc) or type(exc).__name__, pattern, 0) from exc
    return True


def _single(node: Node) -> _Term:
    return _Term({(_NO_ANCHOR, _NO_ANCHOR): node})


def _joined(items: list[_Term]) -> _Term:
    """Lookahead-free items read one after the other, their anchor kinds combined per path."""
    if not items:
        return _Term({(_NO_ANCHOR, _NO_ANCHOR): EMPTY}, empty_only=True)
    if len(items) == 1:
        return replace(items[0], anchor=False, quantified=False)
    start_pos = next((t.start_pos for t in items if t.start_pos is not None), None)
    end_pos = next((t.end_pos for t in items if t.end_pos is not None), None)
    empty_only = all(t.empty_only for t in items)
    plain = (_NO_ANCHOR, _NO_ANCHOR)
    if all(len(t.parts) == 1 and plain in t.parts for t in items):
        return _Term({plain: seq(*(t.parts[plain] for t in items))}, empty_only=empty_only)
    paths: dict[_Key, list[list[Node]]] = {plain: [[]]}
    for item in items:
        grown: dict[_Key, list[list[Node]]] = {}
        for (s1, e1), prefixes in paths.items():
            for (s2, e2), node in item.parts.items():
                key = (max(s1, s2), max(e1, e2))
                grown.setdefault(key, []).extend(p + [node] for p in prefixes)
        paths = grown
    parts = {key: alt(*(seq(*p) for p in ps)) for key, ps in paths.items()}
    return _Term(parts, start_pos=start_pos, end_pos=end_pos, empty_only=empty_only)


def _merged_parts(terms: list[_Term]) -> dict[_Key, Node]:
    """The parts of several alternatives, one alternation per anchor key."""
    merged: dict[_Key, list[Node]] = {}
    for term in terms:
        for key, node in term.parts.items():
            merged.setdefault(key, []).append(node)
    return {key: alt(*nodes) for key, nodes in merged.items()}


def _lookahead_pos(readings: list[list[_Term]]) -> int:
    """Where the first lookahead of some reading starts."""
    return next(i.lookahead[2] for items in readings for i in items if i.lookahead is not None)


def _readings(term: _Term) -> list[list[_Term]]:
    """The alternative item lists a term stands for (itself, unless it holds a lookahead)."""
    return term.spliced if term.spliced is not None else [[term]]


def _resolved(items: list[_Term], search: bool) -> list[_Term]:
    """The top-level sequence `items` with each lookahead applied to everything after it.

    From the last lookahead back: the items after it, joined and (in search mode) padded
    as the match will be, are intersected with what it tests, or less it. Padded, that
    part reaches the input's end, so it is keyed as ending there."""
    items = list(items)
    for i in reversed(range(len(items))):
        lookahead = items[i].lookahead
        if lookahead is None:
            continue
        tested, positive, _ = lookahead
        rest = _joined(items[i + 1 :])
        parts: dict[_Key, list[Node]] = {}
        for (start, end), node in rest.parts.items():
            padded = seq(node, _AFTER[end]) if search else node
            tested_rest = And((padded, tested)) if positive else Diff((padded, tested))
            parts.setdefault((start, _TEXT) if search else (start, end), []).append(tested_rest)
        items[i:] = [
            _Term(
                {key: alt(*nodes) for key, nodes in parts.items()},
                start_pos=rest.start_pos,
                end_pos=rest.end_pos,
                empty_only=rest.empty_only,
            )
        ]
    return items


class _Parser:
    """Recursive descent over one pattern; `pos` is the offset of the next character."""

    def __init__(self, pattern: str, dialect: Dialect, search: bool) -> None:
        self.pattern = pattern
        self.dialect = dialect
        self.search = search
        self.ecma = dialect == "ecma"
        self.pos = 0
        self.flags = _Flags()
        self.depth = 0  # groups open around `pos`
        self.steps = 0

    def tick(self) -> None:
        """Count one parsed item; every few thousand, check the compile's deadline."""
        self.steps += 1
        if self.steps % _STEPS_PER_CHECK == 0:
            check_deadline("parsing the regex")

    # ---- errors and scanning ------------------------------------------------------

    def syntax_error(self, message: str, pos: int | None = None) -> RegexSyntaxError:
        return RegexSyntaxError(message, self.pattern, self.pos if pos is None else pos)

    def unsupported(self, what: str, pos: int) -> UnsupportedFeatureError:
        return UnsupportedFeatureError(
            f"{what} is not supported: a token mask cannot enforce it exactly",
            pattern=self.pattern,
            pos=pos,
            keyword=what,
            features=[(str(pos), what)],
        )

    def peek(self, offset: int = 0) -> str | None:
        i = self.pos + offset
        return self.pattern[i] if i < len(self.pattern) else None

    def take(self) -> str:
        ch = self.peek()
        if ch is None:
            raise self.syntax_error("unexpected end of pattern")
        self.pos += 1
        return ch

    def match(self, text: str) -> bool:
        if self.pattern.startswith(text, self.pos):
            self.pos += len(text)
            return True
        return False

    def skip_verbose(self) -> None:
        """In (?x) mode, skip whitespace and # comments between items."""
        if not self.flags.verbose:
            return
        while (ch := self.peek()) is not None:
            if ch in " \t\n\r\v\f":
                self.pos += 1
            elif ch == "#":
                while (ch := self.peek()) is not None and ch != "\n":
                    self.pos += 1
            else:
                return

    # ---- structure ----------------------------------------------------------------

    def parse(self) -> _Term:
        term = self.alternation(at_start=True, top=True)
        if self.peek() is not None:  # only ")" stops an alternation early
            raise self.syntax_error("unbalanced parenthesis")
        return term

    def alternation(self, at_start: bool, top: bool = False) -> _Term:
        """Branches joined by `|`; `top` for the whole pattern's (lookaheads resolve there)."""
        branches = [self.sequence(at_start, top)]
        while self.match("|"):
            branches.append(self.sequence(at_start, top))
        if len(branches) == 1:
            return branches[0]
        spliced = None
        if any(branch.spliced is not None for branch in branches):
            spliced = [items for branch in branches for items in _readings(branch)]
        return _Term(
            _merged_parts(branches),
            start_pos=next((b.start_pos for b in branches if b.start_pos is not None), None),
            end_pos=next((b.end_pos for b in branches if b.end_pos is not None), None),
            empty_only=all(b.empty_only for b in branches),
            spliced=spliced,
        )

    def sequence(self, at_start: bool, top: bool = False) -> _Term:
        items: list[_Term] = []
        consumed = False  # whether an earlier item may have read a character
        end_anchor: int | None = None  # position of an end anchor already seen
        while True:
            self.tick()
            self.skip_verbose()
            ch = self.peek()
            if ch is None or ch in "|)":
                break
            here = self.pos
            if ch in "*+?" or (ch == "{" and self.counted_quantifier(probe=True)):
                if items and items[-1].lookahead is not None:
                    raise self.unsupported("quantified lookahead", here)
                if not items or items[-1].anchor:
                    raise self.syntax_error("nothing to repeat")
                if items[-1].quantified:
                    raise self.syntax_error("multiple repeat")
                items[-1] = self.quantify(items[-1], here)
                if items[-1].parts and not items[-1].empty_only:
                    consumed = True
                continue
            atom = self.atom(at_start and not consumed)
            if atom is None:  # (?#comment) or global flags: no item
                continue
            if atom.start_pos is not None and (consumed or not at_start):
                raise self.unsupported("^ or \\A anchor not at the start", atom.start_pos)
            if end_anchor is not None and not atom.empty_only:
                raise self.unsupported("$ or \\Z anchor not at the end", end_anchor)
            if atom.end_pos is not None and end_anchor is None:
                end_anchor = atom.end_pos
            if not atom.empty_only:
                consumed = True
            items.append(atom)
        return self.concatenate(items, top)

    def concatenate(self, items: list[_Term], top: bool = False) -> _Term:
        """The items read one after the other. A lookahead among them (or in a group
        among them) is applied at the top level, where the rest of the pattern is known;
        below it the items travel up unjoined, one list per reading of the groups around
        (`_Term.spliced`)."""
        if not any(item.lookahead is not None or item.spliced is not None for item in items):
            return _joined(items)
        readings: list[list[_Term]] = [[]]
        for item in items:
            readings = [done + more for done in readings for more in _readings(item)]
            if len(readings) > _MAX_READINGS:
                raise self.unsupported(
                    f"more than {_MAX_READINGS} readings of the groups around lookaheads",
                    _lookahead_pos(readings),
                )
        if not top:
            # For the checks of the enclosing sequence: the items as if without lookaheads.
            joined = _joined([item for item in items if item.lookahead is None])
            return replace(joined, spliced=readings)
        resolved = [_joined(_resolved(reading, self.search)) for reading in readings]
        return replace(resolved[0], parts=_merged_parts(resolved))

    # ---- quantifiers --------------------------------------------------------------

    def counted_quantifier(self, probe: bool) -> tuple[int, int | None] | None:
        """Parse `{m}`, `{m,}`, `{m,n}` (and Python's `{,n}`) at `pos`; None if not one.

        With `probe`, only look. A `{` that is not a quantifier is a literal.
        """
        found = _COUNTS.match(self.pattern, self.pos)
        if found is None:
            return None
        lo_text, comma, hi_text = found.groups()
        if not comma and not lo_text:
            return None  # "{}" is a literal
        if not lo_text and self.ecma:
            raise self.syntax_error("'{,n}' is not a quantifier in ECMA-262; write '{0,n}'")
        if probe:
            return 0, 0
        start = self.pos
        self.pos = found.end()
        lo = int(lo_text) if lo_text else 0
        hi = (int(hi_text) if hi_text else None) if comma else lo
        if lo > _MAX_COUNT or (hi is not None and hi > _MAX_COUNT):
            raise self.syntax_error("the repetition number is too large", start)
        if hi is not None and hi < lo:
            raise self.syntax_error("min repeat greater than max repeat", start)
        return lo, hi

    def quantify(self, term: _Term, here: int) -> _Term:
        ch = self.peek()
        if ch == "*":
            self.pos += 1
            lo, hi = 0, None
        elif ch == "+":
            self.pos += 1
            lo, hi = 1, None
        elif ch == "?":
            self.pos += 1
            lo, hi = 0, 1
        else:
            counts = self.counted_quantifier(probe=False)
            if counts is None:  # pragma: no cover - the caller probed first
                raise self.syntax_error("bad quantifier")
            lo, hi = counts
        if self.match("?"):
            pass  # lazy: the same language under full match
        elif not self.ecma and self.peek() == "+":
            raise self.unsupported("possessive quantifier", here)
        if term.spliced is not None and (hi is None or hi > 1):
            raise self.unsupported("lookahead in a repeated group", _lookahead_pos(term.spliced))
        if term.spliced is not None or term.start_pos is not None or term.end_pos is not None:
            if hi is None or hi > 1:
                raise self.unsupported("anchor inside a repeated group", here)
            parts = {} if hi == 0 else dict(term.parts)
            spliced = None if term.spliced is None else [] if hi == 0 else list(term.spliced)
            if lo == 0:
                plain = (_NO_ANCHOR, _NO_ANCHOR)
                parts[plain] = alt(parts[plain], EMPTY) if plain in parts else EMPTY
                spliced = None if spliced is None else [*spliced, []]
            return _Term(
                parts,
                term.start_pos,
                term.end_pos,
                term.empty_only,
                quantified=True,
                spliced=spliced,
            )
        (node,) = term.parts.values() if term.parts else (NOTHING,)
        empty_only = term.empty_only or hi == 0
        return _Term(
            {(_NO_ANCHOR, _NO_ANCHOR): repeat(node, lo, hi)},
            empty_only=empty_only,
            quantified=True,
        )

    # ---- atoms --------------------------------------------------------------------

    def atom(self, at_start: bool) -> _Term | None:
        start = self.pos
        ch = self.take()
        if ch == "(":
            if self.depth == MAX_GROUP_DEPTH:
                raise self.syntax_error(
                    f"groups nest deeper than {MAX_GROUP_DEPTH} levels; flatten the pattern",
                    start,
                )
            self.depth += 1
            try:
                return self.group(start, at_start)
            finally:
                self.depth -= 1
        if ch == "[":
            return _single(self.char_class(start))
        if ch == ".":
            return _single(self.charset(self.dot(), "."))
        if ch == "^":
            kind = _LINE if self.flags.multiline else _TEXT
            return _Term({(kind, _NO_ANCHOR): EMPTY}, start_pos=start, empty_only=True, anchor=True)
        if ch == "$":
            kind = _TEXT if self.ecma else (_LINE if self.flags.multiline else _DOLLAR)
            return _Term({(_NO_ANCHOR, kind): EMPTY}, end_pos=start, empty_only=True, anchor=True)
        if ch == "\\":
            return self.escape(start)
        return _single(self.literal(ord(ch)))

    def literal(self, code: int) -> Node:
        return self.charset(((code, code),), re.escape(chr(code)))

    def charset(self, ranges: Ranges, source: str) -> Node:
        """A CharSet node, case-folded under (?i) (Python only: ECMA has no inline flags)."""
        if self.flags.ignorecase and source != ".":
            ranges = ignorecase(ranges, source, self.flags.ascii)
        return CharSet(ranges)

    def dot(self) -> Ranges:
        if self.ecma:
            return complement(ECMA_LINE_TERMINATORS)
        if self.flags.dotall:
            return ((0, 0x10FFFF),)
        return complement(((0x0A, 0x0A),))

    def group(self, start: int, at_start: bool) -> _Term | None:
        saved = self.flags
        if self.match("?"):
            if self.match(":"):
                pass
            elif self.match("P<") or (
                self.ecma and self.peek() == "<" and self.peek(1) not in ("=", "!")
            ):
                self.match("<")
                self.group_name()
            elif self.match("P="):
                raise self.unsupported("backreference", start)
            elif not self.ecma and self.match("#"):
                end = self.pattern.find(")", self.pos)
                if end < 0:
                    raise self.syntax_error("missing ), unterminated comment", start)
                self.pos = end + 1
                return None
            elif self.peek() in ("=", "!"):
                return self.lookahead(start)
            elif self.peek() == "<" and self.peek(1) in ("=", "!"):
                raise self.unsupported("lookbehind assertion", start)
            elif self.peek() == "(" and not self.ecma:
                raise self.unsupported("conditional group", start)
            elif self.peek() == ">" and not self.ecma:
                raise self.unsupported("atomic group", start)
            elif not self.ecma and (self.peek() or "?") in "aiLmsux-":
                if self.inline_flags(start):
                    return None  # global flags at the start: they apply from here on
            else:
                raise self.syntax_error("unknown group extension", start)
        term = self.alternation(at_start)
        self.flags = saved
        if not self.match(")"):
            raise self.syntax_error("missing ), unterminated subpattern", start)
        return replace(term, anchor=False, quantified=False)

    def lookahead(self, start: int) -> _Term:
        """`(?=A)` or `(?!A)` after its `(?`: a marker the top-level sequence resolves.

        The rest of the input must be in "A, then anything" (A's end anchors bound the
        "anything"), or must not be: `_AFTER` by each path's end anchor."""
        negative = self.take() == "!"
        saved = self.flags
        body = self.alternation(at_start=False)
        self.flags = saved
        if not self.match(")"):
            raise self.syntax_error("missing ), unterminated subpattern", start)
        if body.spliced is not None:
            raise self.unsupported("lookahead inside a lookahead", _lookahead_pos(body.spliced))
        tested = alt(*(seq(node, _AFTER[end]) for (_, end), node in body.parts.items()))
        return _Term(
            {(_NO_ANCHOR, _NO_ANCHOR): EMPTY},
            empty_only=True,
            anchor=True,
            lookahead=(tested if body.parts else NOTHING, not negative, start),
        )

    def group_name(self) -> None:
        end = self.pattern.find(">", self.pos)
        name = self.pattern[self.pos : end] if end >= 0 else ""
        if end < 0 or not (name.isidentifier() or re.fullmatch(r"(?:[^\W\d]|\$)[\w$]*", name)):
            raise self.syntax_error("bad group name", self.pos)
        self.pos = end + 1

    def inline_flags(self, start: int) -> bool:
        """Apply `(?aimsx)` (returns True) or open `(?aimsx-imsx:` (returns False)."""
        on = self.pattern[self.pos :]
        found = re.match(r"([aiLmsux]*)(?:-([imsx]*))?([:)])", on)
        if found is None:
            raise self.syntax_error("bad inline flags", self.pos)
        added, removed, closer = found.group(1), found.group(2) or "", found.group(3)
        self.pos += found.end()
        flags = self.flags
        for letter, value in [(c, True) for c in added] + [(c, False) for c in removed]:
            if letter == "i":
                flags = replace(flags, ignorecase=value)
            elif letter == "a":
                flags = replace(flags, ascii=value)
            elif letter == "s":
                flags = replace(flags, dotall=value)
            elif letter == "m":
                flags = replace(flags, multiline=value)
            elif letter == "x":
                flags = replace(flags, verbose=value)
            # "u" is the default for str patterns; "L" is rejected by re for str.
        self.flags = flags
        return closer == ")"

    # ---- escapes ------------------------------------------------------------------

    def escape(self, start: int) -> _Term:
        ch = self.take()
        if ch == "A" and not self.ecma:
            return _Term(
                {(_TEXT, _NO_ANCHOR): EMPTY}, start_pos=start, empty_only=True, anchor=True
            )
        if ch == "Z" and not self.ecma:
            return _Term({(_NO_ANCHOR, _TEXT): EMPTY}, end_pos=start, empty_only=True, anchor=True)
        if ch in "bB":
            raise self.unsupported(f"word boundary \\{ch}", start)
        if ch in "123456789" or (ch == "k" and self.ecma):
            if not self.ecma:
                code = self.python_octal_reference(ch, start)
                if code is not None:
                    return _single(self.literal(code))
            raise self.unsupported("backreference", start)
        ranges = self.escape_ranges(ch, start, in_class=False)
        source = self.pattern[start : self.pos]
        return _single(self.charset(ranges, source))

    def python_octal_reference(self, first: str, start: int) -> int | None:
        """`\\NNN` with three octal digits is a character; shorter digit runs are groups."""
        digits = self.pattern[self.pos : self.pos + 2]
        if (
            first in "01234567"
            and len(digits) == 2
            and digits[0] in "01234567"
            and digits[1] in "01234567"
        ):
            self.pos += 2
            return int(first + digits, 8)
        return None

    def escape_ranges(self, ch: str, start: int, *, in_class: bool) -> Ranges:
        """The set of one escape whose letter `ch` was just read (not anchors/backrefs)."""
        if ch in "dDwWsS":
            base = self.shorthand(ch.lower())
            return complement(base) if ch.isupper() else base
        simple = {"f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
        if ch in simple:
            return ((simple[ch], simple[ch]),)
        if ch == "b" and in_class:
            return ((0x08, 0x08),)
        if ch in "pP" and self.ecma:
            return self.property_escape(ch, start)
        code = self.escape_code(ch, start, in_class=in_class)
        return ((code, code),)

    def property_escape(self, letter: str, start: int) -> Ranges:
        """ECMA-262 `\\p{...}` / `\\P{...}` (General_Category values; see unicode_property)."""
        end = self.pattern.find("}", self.pos)
        if not self.match("{") or end < 0:
            raise self.syntax_error(f"bad escape \\{letter}: expected {{", start)
        body = self.pattern[self.pos : end]
        self.pos = end + 1
        ranges = unicode_property(body)
        if ranges is None:
            raise self.unsupported(f"Unicode property \\{letter}{{{body}}}", start)
        return complement(ranges) if letter == "P" else ranges

    def shorthand(self, letter: str) -> Ranges:
        if self.ecma:
            return {"d": ECMA_DIGIT, "w": ECMA_WORD}.get(letter) or ecma_space()
        return python_shorthand(letter, self.flags.ascii)

    def escape_code(self, ch: str, start: int, *, in_class: bool) -> int:
        """The code point of a single-character escape (hex, unicode, octal, identity)."""
        if ch == "x":
            return self.hex_digits(2, start)
        if ch == "u" and self.ecma and self.match("{"):
            end = self.pattern.find("}", self.pos)
            text = self.pattern[self.pos : end] if end >= 0 else ""
            if not re.fullmatch(r"[0-9A-Fa-f]{1,8}", text) or int(text, 16) > 0x10FFFF:
                raise self.syntax_error("bad \\u{...} escape", start)
            self.pos = end + 1
            return int(text, 16)
        if ch == "u":
            code = self.hex_digits(4, start)
            if self.ecma and 0xD800 <= code <= 0xDBFF and self.pattern.startswith("\\u", self.pos):
                low = self.pattern[self.pos + 2 : self.pos + 6]
                if re.fullmatch(r"[0-9A-Fa-f]{4}", low) and 0xDC00 <= int(low, 16) <= 0xDFFF:
                    self.pos += 6  # a surrogate pair is one code point in ECMA-262
                    return 0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)
            return code
        if ch == "U" and not self.ecma:
            return self.hex_digits(8, start)
        if ch == "N" and not self.ecma:
            end = self.pattern.find("}", self.pos)
            if not self.match("{") or end < 0:
                raise self.syntax_error("missing {", start)
            name = self.pattern[self.pos : end]
            self.pos = end + 1
            try:
                return ord(unicodedata.lookup(name))
            except KeyError:
                raise self.syntax_error(f"undefined character name {name!r}", start) from None
        if ch == "a" and not self.ecma:
            return 0x07
        if ch == "c" and self.ecma:
            letter = self.peek()
            if letter is None or not ("a" <= letter.lower() <= "z"):
                raise self.syntax_error("bad \\c escape", start)
            self.pos += 1
            return ord(letter) % 32
        if ch in "01234567" and not self.ecma:
            digits = ch
            while len(digits) < 3 and (d := self.peek()) is not None and d in "01234567":
                digits += self.take()
            code = int(digits, 8)
            if code > 0o377:
                raise self.syntax_error("octal escape value outside of range 0-0o377", start)
            return code
        if ch == "0" and self.ecma:
            if (d := self.peek()) is not None and d.isdigit():
                raise self.syntax_error("bad escape \\0 followed by a digit", start)
            return 0
        if ch.isascii() and ch.isalnum():
            raise self.syntax_error(f"bad escape \\{ch}", start)
        return ord(ch)

    def hex_digits(self, count: int, start: int) -> int:
        text = self.pattern[self.pos : self.pos + count]
        if len(text) != count or not re.fullmatch(r"[0-9A-Fa-f]+", text):
            raise self.syntax_error(f"incomplete escape {self.pattern[start : self.pos]}", start)
        self.pos += count
        code = int(text, 16)
        if code > 0x10FFFF:
            raise self.syntax_error("bad escape: code point above U+10FFFF", start)
        return code

    # ---- character classes --------------------------------------------------------

    def char_class(self, start: int) -> Node:
        negated = self.match("^")
        spans: list[tuple[int, int]] = []
        if self.ecma and self.peek() == "]":
            self.pos += 1  # [] matches nothing, [^] anything
            ranges: Ranges = ()
            return CharSet(complement(ranges) if negated else ranges)
        first = True
        while True:
            self.tick()
            ch = self.peek()
            if ch is None:
                raise self.syntax_error("unterminated character set", start)
            if ch == "]" and not first:
                self.pos += 1
                break
            first = False
            item_start = self.pos
            low = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in (None, "]"):
                self.pos += 1
                high_start = self.pos
                high = self.class_atom()
                if isinstance(low, tuple) or isinstance(high, tuple):
                    raise self.syntax_error("bad character range", item_start)
                if high < low:
                    raise self.syntax_error(
                        f"bad character range {self.pattern[item_start : self.pos]}", high_start
                    )
                spans.append((low, high))
            elif isinstance(low, tuple):
                spans.extend(low)
            else:
                spans.append((low, low))
        ranges = normalize_ranges(spans)
        if negated:
            ranges = complement(ranges)
        if self.flags.ignorecase:
            ranges = ignorecase(ranges, self.pattern[start : self.pos], self.flags.ascii)
        return CharSet(ranges)

    def class_atom(self) -> int | Ranges:
        """One class member: a code point, or a set for `\\d`-style escapes."""
        start = self.pos
        ch = self.take()
        if ch != "\\":
            return ord(ch)
        letter = self.take()
        if letter in "dDwWsS" or (letter in "pP" and self.ecma):
            return self.escape_ranges(letter, start, in_class=True)
        if letter == "-" and self.ecma:
            return ord("-")
        if letter == "B" or (letter in "123456789" and (self.ecma or letter in "89")):
            raise self.syntax_error(f"bad escape \\{letter}", start)
        if letter == "A" or letter == "Z":
            raise self.syntax_error(f"bad escape \\{letter}", start)
        (code, _), *_ = self.escape_ranges(letter, start, in_class=True)
        return code
