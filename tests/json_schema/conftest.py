"""Helpers for the JSON Schema front-end tests: compile a schema, match texts."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from fsmcompile.automaton import ByteDFA, build_dfa
from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir
from fsmcompile.ir.nodes import Node

from .language import schema_language


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def dfa_of(node: Node) -> ByteDFA:
    return build_dfa(node, max_states=200_000)


def schema_dfa(schema: Any, **options: Any) -> ByteDFA:
    """The DFA of a regular schema."""
    return dfa_of(schema_to_ir(schema, options=JsonOptions(**options)).node)


@pytest.fixture
def accepts() -> Callable[..., Callable[[Any], bool]]:
    """`accepts(schema, **options)(value_or_text)`: whether the compiled schema (its DFA,
    or its grammar when recursive or free-form) accepts the text."""

    def make(schema: Any, **options: Any) -> Callable[[Any], bool]:
        language = schema_language(schema, **options)

        def check(value: Any) -> bool:
            return language(value.text if isinstance(value, Raw) else compact(value))

        return check

    return make


class Raw:
    """A JSON text given verbatim (to test spellings json.dumps never writes)."""

    def __init__(self, text: str) -> None:
        self.text = text
