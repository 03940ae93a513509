"""A schema's compiled language as a text predicate, for regular and grammar schemas alike.

A regular schema is checked on its byte DFA. A recursive or free-form one is compiled the
way `compile_spec` does (generated grammar, lexer automaton, LALR tables) for a vocabulary
of the 256 single bytes, and each text is fed byte by byte through the grammar matcher:
that checks the lowering and the grammar path together without a tokenizer's cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fsmcompile.automaton import ByteDFA
from fsmcompile.compiler import build_machine
from fsmcompile.frontend.json_schema import JsonOptions, SchemaLowering, schema_to_ir
from fsmcompile.index.cfg.build import build_grammar_index
from fsmcompile.runtime.matcher import matcher_for
from fsmcompile.vocabulary import Vocabulary

BYTES = Vocabulary(
    token_bytes=[bytes([b]) for b in range(256)] + [b""],
    eos_token_ids=(256,),
    special_token_ids=frozenset({256}),
    size=257,
    name="bytes",
)
"""One token per byte, EOS last: the grammar matcher then reads texts byte by byte."""


def lowering_language(
    lowering: SchemaLowering,
    *,
    nesting_limit: int | None = None,
    max_states: int = 200_000,
    timeout_s: float = 30.0,
) -> Callable[[str], bool]:
    """`text -> bool`: whether the compiled schema accepts the whole text."""
    deadline = time.monotonic() + timeout_s
    machine = build_machine(
        lowering.node,
        lowering.rules,
        nesting_limit=nesting_limit,
        max_states=max_states,
        deadline=deadline,
    )
    if isinstance(machine, ByteDFA):
        return lambda text: machine.matches(text.encode("utf-8"))
    index = build_grammar_index(
        machine, BYTES, spec_hash="test", max_states=max_states, deadline=deadline, kind="json"
    )

    def accepts(text: str) -> bool:
        matcher = matcher_for(index)
        return all(matcher.advance(b) for b in text.encode("utf-8")) and matcher.is_accepting()

    return accepts


def schema_language(schema: Any, **options: Any) -> Callable[[str], bool]:
    """`lowering_language` of a schema lowered with `JsonOptions(**options)`."""
    lowering = schema_to_ir(schema, options=JsonOptions(**options))
    return lowering_language(lowering, nesting_limit=options.get("nesting_limit"))
