"""Lark grammar text → `LarkGrammar`: lark analyses it, we copy out what the matcher needs.

lark does the grammar work (imports, templates, priorities, the contextual lexer) so the
matcher follows the very tables and lexer contexts `Lark.parse` uses; the LALR table
inside it is built in C by `lalr.py`, which builds lark's states and settles conflicts
as lark does.
lark's own errors are translated into `GrammarError` with a line and column: lark gives
them for syntax errors; for undefined or duplicate names and collisions we find the
name in the grammar text.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from fsmcompile.budget import check_deadline, seconds_left
from fsmcompile.compile_memos import current_memos
from fsmcompile.errors import GrammarError, SpecError, UnsupportedFeatureError
from fsmcompile.frontend.lark.imports import (
    SOURCE_PATH,
    ImportRefused,
    import_loader,
    locate_import,
)
from fsmcompile.frontend.lark.options import LarkOptions
from fsmcompile.frontend.lark.terminals import terminal_to_ir
from fsmcompile.frontend.options import options_from_mapping
from fsmcompile.grammar.analysis_size import (
    NATIVE_SECONDS_PER_CELL,
    analysis_cells,
    check_analysis_size,
    check_text_size,
)
from fsmcompile.grammar.parse_tables import extract_tables
from fsmcompile.ir.nodes import Node
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.tables.lark_grammar import LarkGrammar, LexerContext, ParseTable, Terminal

logger = logging.getLogger(__name__)

_QUOTED_NAME = re.compile(r"'([^']+)'")
_RULE_IN_COLLISION = re.compile(r"<([!?]?[\w]+) :")
_LINE_COLUMN = re.compile(r",? at line (\d+),? column (\d+)")


def _position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def locate_definition(text: str, name: str) -> tuple[int, int] | None:
    """Where rule or terminal `name` is defined (`name:` or `name.2:` at a line start)."""
    bare = name.lstrip("?!")
    found = re.search(
        rf"^[ \t]*[?!]?{re.escape(bare)}(?:\{{[^}}]*\}})?(?:\.-?\d+)?[ \t]*:", text, re.MULTILINE
    )
    return _position(text, found.start() + found.group(0).index(bare[0])) if found else None


def locate_use(text: str, name: str) -> tuple[int, int] | None:
    """Where `name` is first used as a whole word outside its own definition."""
    for found in re.finditer(rf"(?<![\w.%]){re.escape(name)}(?!\w)", text):
        line_start = text.rfind("\n", 0, found.start()) + 1
        is_definition = (
            text[line_start : found.start()].strip(" \t?!") == ""
            and re.match(r"(?:\.-?\d+)?[ \t]*:", text[found.end() :]) is not None
        )
        if not is_definition:
            return _position(text, found.start())
    return None


def _translate(exc: Exception, text: str) -> SpecError:
    """A lark exception raised while building the grammar, as a `GrammarError`."""
    import lark.exceptions as lark_errors

    message = str(exc).strip()
    if isinstance(exc, lark_errors.UnexpectedInput):
        first = message.splitlines()[0] if message else "syntax error"
        first = re.sub(r" at line \d+, column \d+\.?$", "", first)
        return GrammarError(f"grammar syntax error: {first}", exc.line, exc.column)
    where: tuple[int, int] | None = None
    names = _QUOTED_NAME.findall(message)
    if "used but not defined" in message and names:
        where = locate_use(text, names[0])
    elif "defined more than once" in message and names:
        defs = list(re.finditer(rf"^[ \t]*[?!]?{re.escape(names[0])}\b", text, re.MULTILINE))
        if len(defs) > 1:
            where = _position(text, defs[1].start() + defs[1].group(0).index(names[0][0]))
    elif "Reduce/Reduce collision" in message or "Shift/Reduce conflict" in message:
        # lark lists the rules from a set (hash order): report the first one defined.
        places = [
            w
            for r in _RULE_IN_COLLISION.findall(message)
            if (w := locate_definition(text, r)) is not None
        ]
        where = min(places) if places else None
        message = "LALR conflict: " + message
    elif "Using an undefined rule" in message:
        message = (
            f"{message}: the grammar has no start rule of that name; define it or "
            "pass options={'start': ...}"
        )
    elif (at := _LINE_COLUMN.search(message)) is not None:
        where = int(at.group(1)), int(at.group(2))
        message = message.splitlines()[0]
        message = _LINE_COLUMN.sub("", message).rstrip(" ,.")
    elif "null bytes" in message and "\x00" in text:
        where = _position(text, text.index("\x00"))
        message = "the grammar holds a NUL character in a string literal; write it as \\x00"
    elif isinstance(exc, lark_errors.LexError):
        term = re.search(r"(?:token|terminals\.) ?\(?([A-Z_][A-Z0-9_]*)", message)
        if term:
            where = locate_definition(text, term.group(1))
    line, column = where if where is not None else (None, None)
    return GrammarError(message, line, column)


_LARK_LOCK = threading.Lock()


@contextmanager
def _lark_turn() -> Iterator[None]:
    """Hold `_LARK_LOCK`, waiting for it no longer than the compile's deadline allows:
    another thread's grammar may hold it for the whole of its own budget."""
    while True:
        left = seconds_left()
        if _LARK_LOCK.acquire(timeout=-1 if left is None else max(left, 0.0)):
            break
        check_deadline("waiting for another grammar's analysis")
    try:
        yield
    finally:
        _LARK_LOCK.release()


@dataclass(frozen=True, slots=True)
class _Analysis:
    """What a grammar text's lark analysis is read for: its terminals (name, Python regex,
    source text, ignored) by name, the lexer contexts and the parse table."""

    terminals: tuple[tuple[str, str, str, bool], ...]
    contexts: tuple[LexerContext, ...]
    table: ParseTable
    cells: int
    """The analysis's size (`analysis_size.analysis_cells`): a memoized analysis is
    still held to each call's `max_states`."""


def _analysis(
    text: str,
    start: str,
    strict: bool,
    generated: bool,
    import_paths: tuple[str, ...],
    max_states: int | None,
) -> _Analysis:
    """The analysis of `text` (written by `from_rules.py` when `generated`), memoized;
    refused before it starts when it would break the budget (`analysis_size.py`). A
    generated grammar's analysis (in C, a few bytes a cell) is held to the deadline only:
    its size follows from automata already held to `max_states`.

    Memoized by grammar text in the current memo set (`CompileMemos.analyses`): schemas
    of one shape write the same generated text (terminal names are numbered, their
    automata attached afterwards). Only what is read out of lark's analysis is kept:
    lark's own objects (tens of thousands per grammar) would stay tracked by the garbage
    collector for as long as the memo holds them, and every full collection walks them."""
    key = (text, start, strict, generated, import_paths)
    analyses = current_memos().analyses
    if generated:
        found: _Analysis = analyses.get_or_make(key, lambda: _analyse_generated(text, start))
        return found
    analysis: _Analysis = analyses.get_or_make(
        key, lambda: _analyse(text, start, strict, import_paths, max_states)
    )
    check_analysis_size(analysis.cells, max_states=max_states, seconds_per_cell=0.0)
    return analysis


def _analyse_generated(text: str, start: str) -> _Analysis:
    """`_analyse` of a generated grammar, by the shorter road of `generated.py`."""
    from lark.exceptions import LarkError

    from fsmcompile.grammar.generated import analyse_generated

    try:
        terminals, contexts, table, rules = analyse_generated(text, start)
    except LarkError as exc:
        raise _translate(exc, text) from exc
    _check_productive(rules, start, text)
    cells = analysis_cells((len(r.expansion) for r in rules), len(terminals))
    return _frozen(_Analysis(terminals=terminals, contexts=contexts, table=table, cells=cells))


def _frozen(analysis: _Analysis) -> _Analysis:
    """`analysis` with its arrays read-only: every grammar loaded from its text shares
    them."""
    table = analysis.table
    for array in (table.action, table.goto, table.rule_lhs, table.rule_len, table.context_of_state):
        array.flags.writeable = False
    return analysis


def _analyse(
    text: str,
    start: str,
    strict: bool,
    import_paths: tuple[str, ...] = (),
    max_states: int | None = None,
) -> _Analysis:
    built = _lark(text, start, strict, import_paths, max_states)
    _check_productive(list(built.rules), start, text)
    parser = built.parser
    defined = {t.name: t for t in parser.lexer_conf.terminals}
    ignored = set(parser.lexer_conf.ignore)
    table_symbols = {s for acts in parser.parser.parser.parse_table.states.values() for s in acts}
    declared = sorted(s for s in table_symbols if s.isupper() and s not in defined and s != "$END")
    if declared:
        where = locate_use(text, declared[0])
        raise UnsupportedFeatureError(
            f"terminals {declared} have no pattern (%declare): they need a custom lexer or "
            "postlexer, which a token mask cannot follow; define them as terminals",
            line=where[0] if where else None,
            column=where[1] if where else None,
        )
    # Terminals by name, parser states from the start state outwards: lark numbers its
    # states in hash order, and equal grammars should give byte-equal artifacts.
    names = {name: i for i, name in enumerate(sorted(defined))}
    terminals = tuple(
        (d.name, d.pattern.to_regexp(), d.pattern.raw or "", d.name in ignored)
        for d in sorted(defined.values(), key=lambda d: d.name)
    )
    try:
        contexts, table = extract_tables(parser, names, start)
    except re.error as exc:
        # lark's scanner could not compile a pattern: say which terminal, and why.
        for name, pattern, raw, _ in terminals:
            _terminal_node(name, pattern, raw, text)
        raise GrammarError(f"lark could not build the grammar: {exc}") from exc
    return _frozen(
        _Analysis(terminals=terminals, contexts=contexts, table=table, cells=built.cells)
    )


class _NativeLalrParser:
    """lark's `LALR_Parser`, its table built by `lalr.lalr_states` (in C, on integers,
    held to the compile's deadline) instead of lark's `LALR_Analyzer`: lark's analysis was
    half of the SQL grammar's load (~70 ms) and runs past any deadline. The states are
    those lark builds and conflicts are settled as lark settles them, so the contextual
    lexer lark builds from them and the tables read out are lark's own. Parsing with it
    is not supported: the matcher follows the tables."""

    def __init__(self, parser_conf: Any, debug: bool = False, strict: bool = False) -> None:
        from fsmcompile.grammar.lalr import lalr_states

        (start,) = parser_conf.start
        self.parser_conf = parser_conf
        self._parse_table = lalr_states(parser_conf.rules, start, strict=strict)
        # What `parse_tables.extract_tables` reads (lark's `_Parser.parse_table`).
        self.parser = _ParseTableHolder(self._parse_table)


@dataclass(frozen=True, slots=True)
class _ParseTableHolder:
    parse_table: Any


def _checked_lark() -> type[Any]:
    """`lark.Lark`, with the analysis refused before it starts when it would break the
    compile's budget (`analysis_size.py`) and the LALR table built in C
    (`_NativeLalrParser`): lark compiles the grammar's rules and terminals first, then
    builds the parser (`_build_parser`) from them."""
    global _CHECKED_LARK
    if _CHECKED_LARK is None:
        import lark

        class CheckedLark(lark.Lark):
            def __init__(self, text: str, *, max_states: int | None, **options: Any) -> None:
                self.max_states = max_states
                self.cells = 0
                super().__init__(text, _plugins={"LALR_Parser": _NativeLalrParser}, **options)

            def _build_parser(self) -> Any:
                lengths = (len(rule.expansion) for rule in self.rules)
                self.cells = analysis_cells(lengths, len(self.terminals))
                check_analysis_size(
                    self.cells,
                    max_states=self.max_states,
                    seconds_per_cell=NATIVE_SECONDS_PER_CELL,
                )
                return super()._build_parser()

        _CHECKED_LARK = CheckedLark
    return _CHECKED_LARK


_CHECKED_LARK: type[Any] | None = None


def _lark(
    text: str, start: str, strict: bool, import_paths: tuple[str, ...], max_states: int | None
) -> Any:
    import lark
    import lark.lexer
    from lark.exceptions import LarkError

    check_text_size(text)
    try:
        with _lark_turn():
            # Outside strict mode lark only logs terminal collisions (through its own
            # stderr handler), and its interegular check is half the load time of a
            # keyword-heavy grammar; the lexer automaton reproduces lark's resolution
            # of collisions anyway, so the check is switched off for the call.
            saved = lark.lexer.has_interegular
            lark.lexer.has_interegular = saved and strict
            try:
                return _checked_lark()(
                    text,
                    max_states=max_states,
                    parser="lalr",
                    lexer="contextual",
                    start=start,
                    strict=strict,
                    import_paths=[import_loader(import_paths)],
                    source_path=SOURCE_PATH,
                )
            finally:
                lark.lexer.has_interegular = saved
    except LarkError as exc:
        raise _translate(exc, text) from exc
    except ImportRefused as exc:
        line, column = locate_import(text, exc.dotted) or (None, None)
        raise GrammarError(str(exc), line, column) from exc
    except RecursionError:
        raise _too_deep(text) from None
    except (re.error, AssertionError, KeyError, ValueError) as exc:
        raise GrammarError(f"lark could not build the grammar: {exc}") from exc


def _too_deep(text: str) -> GrammarError:
    """lark ran out of stack: point at the deepest bracket (lark's grammar compiler and
    Python's `re` recurse once per level of `(`, `[` in rules and patterns alike)."""
    depth = deepest = where = 0
    for offset, char in enumerate(text):
        if char in "([":
            depth += 1
            if depth > deepest:
                deepest, where = depth, offset
        elif char in ")]":
            depth = max(0, depth - 1)
    line, column = _position(text, where)
    return GrammarError(
        f"the grammar nests too deeply for lark to build ({deepest} levels of brackets); "
        "flatten it into named rules",
        line,
        column,
    )


def _check_productive(rules: list[Any], start: str, text: str) -> None:
    """Refuse rules that can never finish (lark builds them; no text ever parses through
    them, and a mask would keep the model inside one forever)."""
    productive: set[str] = set()
    changed = True
    while changed:
        changed = False
        for rule in rules:
            name = rule.origin.name
            if name not in productive and all(
                sym.is_term or sym.name in productive for sym in rule.expansion
            ):
                productive.add(name)
                changed = True
    reachable = {start}
    stack = [start]
    by_origin: dict[str, list[Any]] = {}
    for rule in rules:
        by_origin.setdefault(rule.origin.name, []).append(rule)
    while stack:
        for rule in by_origin.get(stack.pop(), []):
            for sym in rule.expansion:
                if not sym.is_term and sym.name not in reachable:
                    reachable.add(sym.name)
                    stack.append(sym.name)
    stuck = sorted(n for n in reachable - productive if n in by_origin)
    if stuck:
        public = [n for n in stuck if not n.startswith("__")] or stuck
        where = locate_definition(text, public[0])
        line, column = where if where is not None else (None, None)
        raise GrammarError(
            f"rule {public[0]!r} can never finish: every alternative needs {public[0]!r} "
            f"or another unfinishable rule again ({', '.join(public)}); give it an "
            "alternative that ends",
            line,
            column,
        )


def _terminal_node(name: str, pattern: str, raw: str, text: str) -> Node:
    """The IR of a terminal's pattern; errors say where the terminal is defined."""
    try:
        return terminal_to_ir(name, pattern)
    except SpecError as exc:
        raise _terminal_error(exc, name, raw, text) from exc


def _terminal_error(exc: SpecError, name: str, raw: str, text: str) -> SpecError:
    """Attach the terminal's position in the grammar to an error about its pattern."""
    where = locate_definition(text, name)
    if where is None and raw:
        offset = text.find(raw)
        where = _position(text, offset) if offset >= 0 else None
    line, column = where if where is not None else (None, None)
    if isinstance(exc, UnsupportedFeatureError):
        suffix = f" (line {line}, column {column})" if line is not None else ""
        out = UnsupportedFeatureError(
            exc.reason + suffix,
            pattern=exc.pattern,
            pos=exc.pos,
            keyword=exc.keyword,
            features=exc.features,
            line=line,
            column=column,
        )
        return out
    return GrammarError(str(exc), line, column)


def load_lark_grammar(
    text: str,
    options: LarkOptions | Mapping[str, Any] | None = None,
    *,
    generated: Mapping[str, tuple[Node, ByteDFA]] | None = None,
    max_states: int | None = None,
) -> LarkGrammar:
    """Analyse a Lark grammar the way `Lark(text, parser="lalr")` does.

    Args:
        text: the grammar source.
        options: a `LarkOptions`, or its fields as a mapping (`start`, `strict`,
            `import_paths`).
        generated: for grammars written by `from_rules.py`: terminal name → (IR, DFA)
            replacing the placeholder pattern in `text` (longest-match terminals). Such
            text is read without lark's grammar parser (`generated.py`).
        max_states: the state budget the analysis is held to (`analysis_size.py`);
            None for no limit. Its time is held to the compile's deadline.

    Raises:
        GrammarError: syntax errors, undefined or duplicate names, LALR conflicts, bad
            terminal patterns, an `%import` of a grammar outside the allowed folders;
            `line` and `column` say where when they can be found.
        SpecError: an unknown option, or `import_paths` naming something not a folder.
        UnsupportedFeatureError: `%declare`d terminals (they need a custom lexer) and
            terminal patterns whose lark match a byte automaton cannot reproduce.
        BudgetExceededError: the analysis would break `max_states` or the deadline.
    """
    if not isinstance(options, LarkOptions):
        options = options_from_mapping(LarkOptions, "lark", options or {})
    start = options.start
    analysis = _analysis(
        text, start, options.strict, generated is not None, options.import_paths, max_states
    )
    terminals = []
    for name, pattern, raw, ignored in analysis.terminals:
        if generated is not None and name in generated:
            node, dfa = generated[name]
            terminals.append(Terminal(name, pattern, node, ignored=False, dfa=dfa))
            continue
        node = _terminal_node(name, pattern, raw, text)
        terminals.append(Terminal(name=name, pattern=pattern, node=node, ignored=ignored))
    contexts, table = analysis.contexts, analysis.table
    logger.debug(
        "lark grammar: %d terminals, %d lexer contexts, %d parser states",
        len(terminals),
        len(contexts),
        table.num_states,
    )
    return LarkGrammar(terminals=tuple(terminals), contexts=contexts, table=table, start=start)
