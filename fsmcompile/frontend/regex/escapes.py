"""Escapes and character classes of a regex pattern, in both dialects: Python's `re`
(octal escapes, Unicode shorthands, `\\N{...}`) and ECMA-262 with the `u` flag (ASCII
shorthands, `\\p{...}`, `\\u{...}`)."""

from __future__ import annotations

import re
import unicodedata

from fsmcompile.frontend.regex.anchored_terms import NO_ANCHOR, TEXT, Term, plain_term
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
from fsmcompile.frontend.regex.scanner import PatternScanner
from fsmcompile.ir.nodes import EMPTY, CharSet, Node, normalize_ranges


class EscapeParser(PatternScanner):
    """The parser's character-level half: single characters under the flags, `.`,
    escapes and `[...]` classes."""

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

    # ---- escapes ------------------------------------------------------------------

    def escape(self, start: int) -> Term:
        ch = self.take()
        if ch == "A" and not self.ecma:
            return Term({(TEXT, NO_ANCHOR): EMPTY}, start_pos=start, empty_only=True, anchor=True)
        if ch == "Z" and not self.ecma:
            return Term({(NO_ANCHOR, TEXT): EMPTY}, end_pos=start, empty_only=True, anchor=True)
        if ch in "bB":
            raise self.unsupported(f"word boundary \\{ch}", start)
        if ch in "123456789" or (ch == "k" and self.ecma):
            if not self.ecma:
                code = self.python_octal_reference(ch, start)
                if code is not None:
                    return plain_term(self.literal(code))
            raise self.unsupported("backreference", start)
        ranges = self.escape_ranges(ch, start, in_class=False)
        source = self.pattern[start : self.pos]
        return plain_term(self.charset(ranges, source))

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
