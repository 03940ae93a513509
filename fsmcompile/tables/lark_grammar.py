"""What a Lark grammar means once lark has analysed it: terminals, lexer contexts, LALR tables.

This is the hand-off from the spec stage to the index stage. It holds plain data only
(numpy arrays, tuples, IR nodes) and never imports lark, so the runtime can rebuild it
from an artifact without the grammar toolchain.

The matcher must allow exactly the texts lark itself parses with `parser="lalr"` and the
contextual lexer, so everything here mirrors lark's own objects: the terminal order of each
lexer context is the one lark's scanner tries, and the parse table is lark's, conflicts
resolved the way lark resolved them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fsmcompile.ir.nodes import CountedRepeat, Node, counted_item
from fsmcompile.tables.byte_dfa import ByteDFA

TerminalId = int
"""Index into `LarkGrammar.terminals`; `LarkGrammar.end_terminal` is lark's `$END`."""

ParserStateId = int
"""A state of lark's LALR parse table."""

ContextId = int
"""A lexer context: one of lark's contextual `BasicLexer`s (a set of competing terminals)."""

ERROR_ACTION = 0
"""`action[state, terminal] == 0`: the parser rejects the terminal in that state."""


def shift_action(target: ParserStateId) -> int:
    """The encoded action "shift and go to `target`" (always positive)."""
    return target + 1


def reduce_action(rule: int) -> int:
    """The encoded action "reduce by `rule`" (always negative)."""
    return -(rule + 1)


@dataclass(frozen=True, slots=True)
class Terminal:
    """One lark terminal.

    Attributes:
        name: lark's name (`NUMBER`, `__ANON_0`, `LSQB`, ...).
        pattern: the Python regex lark matches it with (`TerminalDef.pattern.to_regexp()`).
        node: the IR of `pattern`, with Python's alternation order kept (lark's scanner
            takes the first alternative that matches, not the longest).
        ignored: listed in `%ignore`; matched between any two tokens, never parsed.
        dfa: set for terminals of generated grammars (`from_rules.py`): the terminal
            matches this automaton's language, longest match first, instead of following
            `node` with Python's alternation preference. For a counted terminal
            (`node` holds a `CountedRepeat`, see `counted`) it is the unbounded language.
    """

    name: str
    pattern: str
    node: Node
    ignored: bool
    dfa: ByteDFA | None = None

    @property
    def counted(self) -> CountedRepeat | None:
        """The repetition whose upper bound the lexer counts, for a generated terminal."""
        return counted_item(self.node) if self.dfa is not None else None


@dataclass(frozen=True, slots=True)
class LexerContext:
    """The terminals one of lark's contextual lexers tries, in the order it tries them.

    lark joins them into one `re` alternation, so the first that matches any prefix wins
    and its own (greedy) match is the lexeme. `unless` lists, for a regex terminal, the
    string terminals that rename its lexeme when they match it whole (lark's
    `UnlessCallback`: a NAME lexeme `select` becomes the keyword SELECT).

    Attributes:
        terminals: competing terminals, highest precedence first.
        unless: (regex terminal, string terminals in lark's order) pairs.
    """

    terminals: tuple[TerminalId, ...]
    unless: tuple[tuple[TerminalId, tuple[TerminalId, ...]], ...]


@dataclass(frozen=True, slots=True, eq=False)
class ParseTable:
    """lark's LALR(1) table as dense arrays.

    Attributes:
        action: int32[P, T + 1], the encoded action per (state, terminal) with `$END` as
            the last column: 0 error, `shift_action(s)` or `reduce_action(r)`.
        goto: int32[P, N], the state after reducing to nonterminal n; -1 where undefined.
        rule_lhs: int32[R], the nonterminal each rule reduces to.
        rule_len: int32[R], how many symbols each rule pops.
        start_state / end_state: lark's states for the chosen start symbol; the text is
            complete when `$END` reduces the stack to `end_state`.
        context_of_state: int32[P], the lexer context lark uses in each state.
    """

    action: npt.NDArray[np.int32]
    goto: npt.NDArray[np.int32]
    rule_lhs: npt.NDArray[np.int32]
    rule_len: npt.NDArray[np.int32]
    start_state: int
    end_state: int
    context_of_state: npt.NDArray[np.int32]

    @property
    def num_states(self) -> int:
        return int(self.action.shape[0])


@dataclass(frozen=True, slots=True, eq=False)
class LarkGrammar:
    """A loaded grammar: terminals, lexer contexts and the parse table.

    Attributes:
        terminals: every terminal the parser or the lexer can see.
        contexts: the distinct lexer contexts; `table.context_of_state` points into it.
        table: the LALR table.
        start: the start rule's name.
    """

    terminals: tuple[Terminal, ...]
    contexts: tuple[LexerContext, ...]
    table: ParseTable
    start: str

    @property
    def end_terminal(self) -> TerminalId:
        """The column of `$END` in `table.action`."""
        return len(self.terminals)

    @property
    def ignored(self) -> npt.NDArray[np.bool_]:
        """bool[T], which terminals are `%ignore`d."""
        return np.array([t.ignored for t in self.terminals], dtype=np.bool_)
