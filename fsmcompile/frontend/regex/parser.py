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
anchors its paths crossed (`Term.parts`).

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
import warnings
from dataclasses import replace

from fsmcompile.budget import check_time_left
from fsmcompile.errors import RegexSyntaxError
from fsmcompile.frontend.regex.anchored_terms import (
    AFTER,
    BEFORE,
    DOLLAR,
    LINE,
    NO_ANCHOR,
    TEXT,
    Term,
    joined_terms,
    lookahead_pos,
    merged_parts,
    plain_term,
    readings_of,
    with_lookaheads_applied,
)
from fsmcompile.frontend.regex.escapes import EscapeParser
from fsmcompile.frontend.regex.scanner import Dialect
from fsmcompile.ir.nodes import EMPTY, NOTHING, Node, alt, repeat, seq

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
    options = [seq(BEFORE[start], node, AFTER[end]) for (start, end), node in term.parts.items()]
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


class _Parser(EscapeParser):
    """Recursive descent over one pattern: alternations, sequences, quantifiers, groups,
    lookaheads and inline flags (characters and escapes: `EscapeParser`)."""

    def __init__(self, pattern: str, dialect: Dialect, search: bool) -> None:
        super().__init__(pattern, dialect)
        self.search = search

    # ---- structure ----------------------------------------------------------------

    def parse(self) -> Term:
        term = self.alternation(at_start=True, top=True)
        if self.peek() is not None:  # only ")" stops an alternation early
            raise self.syntax_error("unbalanced parenthesis")
        return term

    def alternation(self, at_start: bool, top: bool = False) -> Term:
        """Branches joined by `|`; `top` for the whole pattern's (lookaheads resolve there)."""
        branches = [self.sequence(at_start, top)]
        while self.match("|"):
            branches.append(self.sequence(at_start, top))
        if len(branches) == 1:
            return branches[0]
        spliced = None
        if any(branch.spliced is not None for branch in branches):
            spliced = [items for branch in branches for items in readings_of(branch)]
        return Term(
            merged_parts(branches),
            start_pos=next((b.start_pos for b in branches if b.start_pos is not None), None),
            end_pos=next((b.end_pos for b in branches if b.end_pos is not None), None),
            empty_only=all(b.empty_only for b in branches),
            spliced=spliced,
        )

    def sequence(self, at_start: bool, top: bool = False) -> Term:
        items: list[Term] = []
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

    def concatenate(self, items: list[Term], top: bool = False) -> Term:
        """The items read one after the other. A lookahead among them (or in a group
        among them) is applied at the top level, where the rest of the pattern is known;
        below it the items travel up unjoined, one list per reading of the groups around
        (`Term.spliced`)."""
        if not any(item.lookahead is not None or item.spliced is not None for item in items):
            return joined_terms(items)
        readings: list[list[Term]] = [[]]
        for item in items:
            readings = [done + more for done in readings for more in readings_of(item)]
            if len(readings) > _MAX_READINGS:
                raise self.unsupported(
                    f"more than {_MAX_READINGS} readings of the groups around lookaheads",
                    lookahead_pos(readings),
                )
        if not top:
            # For the checks of the enclosing sequence: the items as if without lookaheads.
            joined = joined_terms([item for item in items if item.lookahead is None])
            return replace(joined, spliced=readings)
        resolved = [
            joined_terms(with_lookaheads_applied(reading, self.search)) for reading in readings
        ]
        return replace(resolved[0], parts=merged_parts(resolved))

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

    def quantify(self, term: Term, here: int) -> Term:
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
            raise self.unsupported("lookahead in a repeated group", lookahead_pos(term.spliced))
        if term.spliced is not None or term.start_pos is not None or term.end_pos is not None:
            if hi is None or hi > 1:
                raise self.unsupported("anchor inside a repeated group", here)
            parts = {} if hi == 0 else dict(term.parts)
            spliced = None if term.spliced is None else [] if hi == 0 else list(term.spliced)
            if lo == 0:
                plain = (NO_ANCHOR, NO_ANCHOR)
                parts[plain] = alt(parts[plain], EMPTY) if plain in parts else EMPTY
                spliced = None if spliced is None else [*spliced, []]
            return Term(
                parts,
                term.start_pos,
                term.end_pos,
                term.empty_only,
                quantified=True,
                spliced=spliced,
            )
        (node,) = term.parts.values() if term.parts else (NOTHING,)
        empty_only = term.empty_only or hi == 0
        return Term(
            {(NO_ANCHOR, NO_ANCHOR): repeat(node, lo, hi)},
            empty_only=empty_only,
            quantified=True,
        )

    # ---- atoms --------------------------------------------------------------------

    def atom(self, at_start: bool) -> Term | None:
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
            return plain_term(self.char_class(start))
        if ch == ".":
            return plain_term(self.charset(self.dot(), "."))
        if ch == "^":
            kind = LINE if self.flags.multiline else TEXT
            return Term({(kind, NO_ANCHOR): EMPTY}, start_pos=start, empty_only=True, anchor=True)
        if ch == "$":
            kind = TEXT if self.ecma else (LINE if self.flags.multiline else DOLLAR)
            return Term({(NO_ANCHOR, kind): EMPTY}, end_pos=start, empty_only=True, anchor=True)
        if ch == "\\":
            return self.escape(start)
        return plain_term(self.literal(ord(ch)))

    def group(self, start: int, at_start: bool) -> Term | None:
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

    def lookahead(self, start: int) -> Term:
        """`(?=A)` or `(?!A)` after its `(?`: a marker the top-level sequence resolves.

        The rest of the input must be in "A, then anything" (A's end anchors bound the
        "anything"), or must not be: `AFTER` by each path's end anchor."""
        negative = self.take() == "!"
        saved = self.flags
        body = self.alternation(at_start=False)
        self.flags = saved
        if not self.match(")"):
            raise self.syntax_error("missing ), unterminated subpattern", start)
        if body.spliced is not None:
            raise self.unsupported("lookahead inside a lookahead", lookahead_pos(body.spliced))
        tested = alt(*(seq(node, AFTER[end]) for (_, end), node in body.parts.items()))
        return Term(
            {(NO_ANCHOR, NO_ANCHOR): EMPTY},
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
