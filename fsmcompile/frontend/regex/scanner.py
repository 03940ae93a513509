"""Reading a regex pattern character by character: position, flags, errors at a position,
and the deadline check every few thousand items."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fsmcompile.budget import check_deadline
from fsmcompile.errors import RegexSyntaxError, UnsupportedFeatureError

Dialect = Literal["python", "ecma"]

_STEPS_PER_CHECK = 4096  # parsed items between deadline checks (a few ms)


@dataclass(frozen=True, slots=True)
class Flags:
    """The inline flags in force (`(?imsx)`; ECMA patterns have none)."""

    ignorecase: bool = False
    ascii: bool = False
    dotall: bool = False
    multiline: bool = False
    verbose: bool = False


class PatternScanner:
    """The read position in one pattern and the flags in force there (`pos` is the
    offset of the next character)."""

    def __init__(self, pattern: str, dialect: Dialect) -> None:
        self.pattern = pattern
        self.dialect = dialect
        self.ecma = dialect == "ecma"
        self.pos = 0
        self.flags = Flags()
        self.depth = 0  # groups open around `pos`
        self.steps = 0

    def tick(self) -> None:
        """Count one parsed item; every few thousand, check the compile's deadline."""
        self.steps += 1
        if self.steps % _STEPS_PER_CHECK == 0:
            check_deadline("parsing the regex")

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
