"""A generated grammar's EBNF rules become the BNF rules lark makes of them.

`generated._bnf` multiplies groups and `?` out itself (`_alternatives`) instead of
running lark's `SimplifyRule_Visitor`; the LALR table, and so every mask, depends on
the rules coming out equal and in lark's order. Compared on random rule bodies in the
syntax `from_rules.py` writes: symbols, groups, `|`, `?`, `*`, `+`.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fsmcompile.grammar.generated import _bnf, _read

_symbol = st.sampled_from(["a", "b", "X", "Y", "Z"])


def _body(depth: int) -> st.SearchStrategy[str]:
    atom = _symbol if depth == 0 else st.one_of(_symbol, _body(depth - 1).map(lambda b: f"({b})"))
    item = st.tuples(atom, st.sampled_from(["", "", "?", "*", "+"])).map("".join)
    sequence = st.lists(item, min_size=1, max_size=3).map(" ".join)
    return st.lists(sequence, min_size=1, max_size=3).map(" | ".join)


def _larks(rule_trees: list[tuple[str, Any]]) -> list[tuple[str, tuple[str, ...], int]]:
    """lark's own EBNF → BNF steps, as `GrammarBuilder.compile` runs them."""
    from lark.load_grammar import EBNF_to_BNF, RuleTreeToText, SimplifyRule_Visitor

    to_bnf = EBNF_to_BNF()
    expanded = []
    for name, tree in rule_trees:
        to_bnf.prefix = name
        expanded.append((name, to_bnf.transform(tree)))
    expanded += [(name, tree) for name, tree, _ in to_bnf.new_rules]
    out = []
    for name, tree in expanded:
        SimplifyRule_Visitor().visit(tree)
        for order, (expansion, alias) in enumerate(RuleTreeToText().transform(tree)):
            assert alias is None
            out.append((name, tuple(s.name for s in expansion), order))
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(_body(2), min_size=1, max_size=3))
def test_generated_rules_are_larks_bnf(bodies: list[str]) -> None:
    names = ["start", "a", "b"][: len(bodies)]
    text = "".join(f"{name}: {body}\n" for name, body in zip(names, bodies, strict=False))
    ours = [
        (r.origin.name, tuple(s.name for s in r.expansion), r.order) for r in _bnf(_read(text)[1])
    ]
    assert ours == _larks(_read(text)[1]), text
