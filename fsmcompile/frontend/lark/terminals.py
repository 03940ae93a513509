"""lark terminal patterns → regex IR, refusing what lark's `re` lexer would match differently.

lark matches a terminal with Python's backtracking `re`, which takes the first alternative
that succeeds rather than the longest match. The IR keeps alternation order, so the
lexer automaton can reproduce that choice; but the IR has no lazy quantifiers, no
lookaround and no anchors, and for those the match lark picks cannot be recovered from
the language alone. Such terminals are refused with `UnsupportedFeatureError`, except the
two in lark's own `common.lark` (ESCAPED_STRING, C_COMMENT), which are rewritten into
equivalent greedy patterns (checked against `re` in tests/grammar).
"""

from __future__ import annotations

import re
import sys
from typing import Any

from fsmcompile.errors import (
    BudgetExceededError,
    FsmcompileError,
    SpecError,
    UnsupportedFeatureError,
)
from fsmcompile.ir.nodes import Node

if sys.version_info >= (3, 11):
    from re import _constants as sre_constants
    from re import _parser as sre_parse
else:  # pragma: no cover - Python 3.10 (the old names warn on 3.11+)
    import sre_constants
    import sre_parse

# lark's common.lark patterns that need a lazy quantifier or lookbehind in `re`, mapped to
# greedy patterns with the same matches. ESCAPED_STRING ends at the first quote preceded by
# an even run of backslashes and never spans a newline (`.` without DOTALL); C_COMMENT ends
# at the first `*/`.
_EQUIVALENT_PATTERNS: dict[str, str] = {
    r'".*?(?<!\\)(\\\\)*?"': r'"(?:[^"\\\n]|\\[^\n])*"',
    "/\\*(.|\n)*?\\*/": r"/\*(?:[^*]|\*+[^*/])*\*+/",
}

_UNSUPPORTED_OPS: dict[Any, str] = {
    sre_constants.MIN_REPEAT: "a lazy quantifier (lark's lexer stops at the shortest match)",
    sre_constants.ASSERT: "a lookaround assertion",
    sre_constants.ASSERT_NOT: "a negative lookaround assertion",
    sre_constants.AT: "an anchor (^, $, \\b, \\A, \\Z)",
    sre_constants.GROUPREF: "a backreference",
    sre_constants.GROUPREF_EXISTS: "a conditional group",
}
for _name, _what in (
    ("POSSESSIVE_REPEAT", "a possessive quantifier"),
    ("ATOMIC_GROUP", "an atomic group"),
):
    if hasattr(sre_constants, _name):
        _UNSUPPORTED_OPS[getattr(sre_constants, _name)] = _what


def equivalent_pattern(pattern: str) -> str:
    """`pattern`, or the greedy equivalent of a known lark pattern that needs `re` features."""
    return _EQUIVALENT_PATTERNS.get(pattern, pattern)


def _find_unsupported(parsed: Any) -> str | None:
    """The first construct in an `sre_parse` tree whose match the IR cannot reproduce."""
    stack = [parsed]
    while stack:
        items = stack.pop()
        for op, arg in items:
            what = _UNSUPPORTED_OPS.get(op)
            if what is not None:
                return what
            if op == sre_constants.BRANCH:
                stack.extend(arg[1])
            elif op == sre_constants.SUBPATTERN:
                stack.append(arg[-1])
            elif op in (sre_constants.MAX_REPEAT,):
                stack.append(arg[2])
    return None


def terminal_to_ir(name: str, pattern: str) -> Node:
    """The IR of one terminal's Python regex, with lark's match choice preserved.

    Args:
        name: the terminal's name, for messages.
        pattern: `TerminalDef.pattern.to_regexp()` (flags already inlined as `(?i:...)`).

    Raises:
        UnsupportedFeatureError: lazy quantifiers, lookaround, anchors, backreferences.
        SpecError: the pattern does not parse (lark normally rejects those first).
    """
    from fsmcompile.frontend.regex.parser import parse_regex

    source = equivalent_pattern(pattern)
    try:
        parsed = sre_parse.parse(source)
    except re.error as exc:
        raise SpecError(f"terminal {name}: pattern {pattern!r} does not compile: {exc}") from exc
    what = _find_unsupported(parsed)
    if what is not None:
        raise UnsupportedFeatureError(
            f"terminal {name} uses {what} in /{pattern}/, which a byte automaton cannot "
            "reproduce exactly; rewrite it with greedy repetition and character classes",
            pattern=pattern,
            keyword=name,
            features=[(name, what)],
        )
    try:
        return parse_regex(source, dialect="python")
    except UnsupportedFeatureError as exc:
        raise UnsupportedFeatureError(
            f"terminal {name}: {exc.reason}",
            pattern=pattern,
            pos=exc.pos,
            keyword=name,
            features=[(name, exc.reason)],
        ) from exc
    except BudgetExceededError:
        raise  # the compile's budget, not the terminal, ran out
    except FsmcompileError as exc:
        raise SpecError(f"terminal {name}: {exc}") from exc
