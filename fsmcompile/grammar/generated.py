"""A generated grammar's text → lark's LALR analysis, without lark's grammar parser.

The grammars `from_rules.py` writes use a sliver of lark's syntax: `name: body` lines
whose bodies are symbols, groups, `|` and the `?`, `*`, `+` operators, then one
placeholder-pattern line per terminal. `Lark(text)` spends most of its time before the
LALR table (parsing the text with its own grammar parser, its EBNF passes over copies of
the trees, parse-tree callbacks, one lexer per parser state), most of a median schema's
LALR stage. Here the text is read by a few lines of tokenizing into the very trees lark's
parser yields, lark's `EBNF_to_BNF` turns repeats into rules under the names `Lark(text)`
gives them, `_alternatives` multiplies groups and `?` out as lark's `SimplifyRule_Visitor`
does, and `lalr.py` builds the table lark's `LALR_Analyzer` builds, on integers. A lexer context is
what lark's contextual lexer makes of a parser state: the terminals the state accepts,
sorted the way lark's lexer sorts them. Tests check analyses of generated grammars
against `Lark(text)` and the LALR builder against lark's on random grammars.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fsmcompile.errors import GrammarError
from fsmcompile.grammar.analysis_size import (
    NATIVE_SECONDS_PER_CELL,
    analysis_cells,
    check_analysis_size,
)
from fsmcompile.grammar.lalr import lalr_states
from fsmcompile.grammar.parse_tables import tables_from_states
from fsmcompile.tables.lark_grammar import LexerContext, ParseTable

__all__ = ["analyse_generated", "lexer_order"]

_TOKENS = re.compile(r"\s*(?:(\w+)|(\S))")
_TERMINAL_NAME = re.compile(r"_?[A-Z][_A-Z0-9]*")
_PLACEHOLDER = re.compile(r"/([^/]*)/")


def analyse_generated(
    text: str, start: str
) -> tuple[tuple[tuple[str, str, str, bool], ...], tuple[LexerContext, ...], ParseTable, list[Any]]:
    """(terminals as (name, regex, source, ignored) by name, lexer contexts, parse table,
    lark's rules) of a generated grammar, as `Lark(text, parser="lalr")` analyses it.

    Raises:
        lark.exceptions.GrammarError: an LALR collision or shift/reduce conflict (lark's
            message, which `merge_twins` reads) or rules lark refuses (defined twice,
            undefined).
        GrammarError: text that is not a generated grammar.
        BudgetExceededError: the analysis could not finish before the deadline.
    """
    patterns, rule_trees = _read(text)
    rules = _used(_bnf(rule_trees), start)
    used = {sym.name for rule in rules for sym in rule.expansion if sym.is_term}
    cells = analysis_cells((len(rule.expansion) for rule in rules), len(used))
    check_analysis_size(cells, max_states=None, seconds_per_cell=NATIVE_SECONDS_PER_CELL)
    # Strict: lark would settle a shift/reduce conflict by shifting, and the parser would
    # then refuse texts of the language (`<<>` of s: "<" | "<" s ">" | "<" r ">"; r: ">").
    table = lalr_states(rules, start)
    names = {name: i for i, name in enumerate(sorted(used))}
    terminals = tuple((name, patterns[name], f"/{patterns[name]}/", False) for name in names)
    order = lexer_order(list(names), {})

    def context(old: int) -> LexerContext:
        accepted = [names[s] for s in table.states[old] if s in names]
        return LexerContext(terminals=tuple(sorted(accepted, key=order)), unless=())

    contexts, parse_table = tables_from_states(
        table.states, table.start_states[start], table.end_states[start], names, context
    )
    return terminals, contexts, parse_table, rules


def lexer_order(names: list[str], ranks: dict[str, int]) -> Callable[[int], tuple[int, int, str]]:
    """Sort key of terminal ids (indexes into `names`) in the order lark's lexer tries
    generated terminals, each ranked terminal having its rank as lark priority.

    lark sorts by priority, then the pattern's width and length, then the name. A
    generated terminal's pattern is its own name between two private-use characters, so
    width and length both grow with the name's length.
    """

    def key(t: int) -> tuple[int, int, str]:
        return (-ranks.get(names[t], 0), -len(names[t]), names[t])

    return key


def _read(text: str) -> tuple[dict[str, str], list[tuple[str, Any]]]:
    """(terminal name → its regex, [(rule name, its body as lark's grammar parser yields
    it)]) of a generated grammar's text."""
    patterns: dict[str, str] = {}
    rules: list[tuple[str, Any]] = []
    for line in text.splitlines():
        name, sep, body = line.partition(": ")
        if not sep:
            continue
        if _TERMINAL_NAME.fullmatch(name):
            found = _PLACEHOLDER.fullmatch(body)
            if found is None:
                raise GrammarError(f"generated terminal {name} has no placeholder pattern")
            patterns[name] = found.group(1)
            continue
        tokens = [word or mark for word, mark in _TOKENS.findall(body)]
        tree, at = _expansions(tokens, 0)
        if at != len(tokens):
            raise GrammarError(f"generated rule {name}: unexpected {tokens[at]!r}")
        rules.append((name, tree))
    return patterns, rules


def _expansions(tokens: list[str], at: int) -> tuple[Any, int]:
    """lark's `expansions` tree of the alternatives from `tokens[at]` on, and where they
    end (a `)` or the end)."""
    from lark.tree import Tree

    options = []
    while True:
        option, at = _expansion(tokens, at)
        options.append(option)
        if at < len(tokens) and tokens[at] == "|":
            at += 1
            continue
        return Tree("expansions", options), at


def _expansion(tokens: list[str], at: int) -> tuple[Any, int]:
    """lark's `expansion` tree of one alternative: symbols, groups and `expr` nodes."""
    from lark.grammar import NonTerminal, Terminal
    from lark.lexer import Token
    from lark.tree import Tree

    items: list[Any] = []
    while at < len(tokens) and tokens[at] not in "|)":
        token = tokens[at]
        if token == "(":
            atom, at = _expansions(tokens, at + 1)
            if at >= len(tokens) or tokens[at] != ")":
                raise GrammarError("generated rule: unclosed group")
        elif _TERMINAL_NAME.fullmatch(token):
            atom = Terminal(token, filter_out=token.startswith("_"))
        elif token.isidentifier():
            atom = NonTerminal(token)
        else:
            raise GrammarError(f"generated rule: unexpected {token!r}")
        at += 1
        if at < len(tokens) and tokens[at] in ("?", "*", "+"):
            atom = Tree("expr", [atom, Token("OP", tokens[at])])
            at += 1
        items.append(atom)
    return Tree("expansion", items), at


def _bnf(rule_trees: list[tuple[str, Any]]) -> list[Any]:
    """lark's rules of the EBNF rule trees, made the way `GrammarBuilder.compile` makes
    them: repeats become generated recursive rules (lark's `EBNF_to_BNF`, names and all),
    groups and `?` are multiplied out (`_alternatives`, what lark's
    `SimplifyRule_Visitor` and `RuleTreeToText` make of these trees). Generated rules
    carry no options (no priority, no kept tokens), lark's defaults."""
    from lark.grammar import NonTerminal, Rule
    from lark.load_grammar import EBNF_to_BNF

    to_bnf = EBNF_to_BNF()  # type: ignore[no-untyped-call]
    expanded: list[tuple[str, Any, Any]] = []
    for name, tree in rule_trees:
        to_bnf.prefix = name
        expanded.append((name, to_bnf.transform(tree), None))
    expanded += to_bnf.new_rules
    rules: list[Any] = []
    for name, tree, options in expanded:
        for order, expansion in enumerate(_alternatives(tree)):
            rules.append(Rule(NonTerminal(name), list(expansion), order, None, options))
    if len(set(rules)) != len(rules):
        from lark.exceptions import GrammarError as LarkGrammarError

        seen: dict[Any, Any] = {}
        for rule in rules:
            if rule in seen and rule.expansion:
                raise LarkGrammarError(f"Rules defined twice: {seen[rule]} and {rule}")
            seen.setdefault(rule, rule)
        rules = list(seen)
    return rules


def _alternatives(tree: Any) -> list[tuple[Any, ...]]:
    """The symbol sequences an EBNF tree without repeats stands for, in lark's order: an
    `expansion` is the product of its parts' alternatives, the leftmost part varying
    slowest; `expansions` lists its options' alternatives in turn; duplicates are kept
    at their first place. lark's `SimplifyRule_Visitor` rewrites the tree in place to
    this list, revisiting each copied sub-tree: 0.2 s of a WashingtonPost grammar's
    analysis, against a few ms here."""
    from lark.tree import Tree

    if not isinstance(tree, Tree):
        return [(tree,)]
    if tree.data == "expansions":
        found = [alt for option in tree.children for alt in _alternatives(option)]
        return list(dict.fromkeys(found))
    assert tree.data == "expansion", tree.data
    product: list[tuple[Any, ...]] = [()]
    for part in tree.children:
        product = [done + option for done in product for option in _alternatives(part)]
    return list(dict.fromkeys(product))


def _used(rules: list[Any], start: str) -> list[Any]:
    """`rules` less those no other rule (or `start`) uses, as lark drops them."""
    while True:
        used = {
            sym.name
            for rule in rules
            for sym in rule.expansion
            if not sym.is_term and sym != rule.origin
        }
        used.add(start)
        kept = [rule for rule in rules if rule.origin.name in used]
        if len(kept) == len(rules):
            return rules
        rules = kept
