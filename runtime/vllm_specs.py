"""vLLM structured-output constraints → fsmcompile specs, and the early check of each.

vLLM names a request's constraint by a `StructuredOutputOptions` member and one string
(its `structured_output_key`). This module maps the member's name and that string to the
spec fsmcompile compiles, and checks the spec without a tokenizer (parsing and lowering,
no token walk) so that the API front end can answer a bad spec with HTTP 400 before the
request reaches the engine. It imports nothing from vLLM, so it is tested without it.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass

from fsmcompile.errors import GrammarError, SchemaError, SpecError
from fsmcompile.frontend.identity import Kind

__all__ = [
    "BACKEND_NAME",
    "CHECK_TIMEOUT_S",
    "JSON_OBJECT_SCHEMA",
    "CompileSpec",
    "check_spec",
    "choice_regex",
    "reject_bnf_grammar",
    "spec_for",
]

BACKEND_NAME = "fsmcompile"
"""The value of vLLM's `StructuredOutputsConfig.backend` (and of a request's `_backend`)."""

JSON_OBJECT_SCHEMA = '{"type":"object"}'
"""What `response_format: {"type": "json_object"}` compiles as: any JSON object."""

CHECK_TIMEOUT_S = 5.0
"""Budget of the front end's check: it runs on the API server's request path."""

_BNF_RULE = re.compile(r"^[ \t]*<?[A-Za-z_][\w.-]*>?[ \t]*::=", re.MULTILINE)
"""A rule definition of GBNF (llama.cpp) or W3C-style EBNF: `root ::= ...`."""


@dataclass(frozen=True, slots=True)
class CompileSpec:
    """What one request compiles: `kind` and `spec` for `fsmcompile.compile_spec`."""

    kind: Kind
    spec: str


def spec_for(option: str, text: str) -> CompileSpec:
    """The fsmcompile spec of a vLLM constraint.

    Args:
        option: the name of vLLM's `StructuredOutputOptions` member (JSON, JSON_OBJECT,
            REGEX, CHOICE, GRAMMAR, STRUCTURAL_TAG).
        text: the constraint's string from vLLM's `structured_output_key` (a JSON
            Schema, a regex, a JSON list of choices, a grammar).

    Raises:
        SpecError: the constraint cannot be taken by this backend: a GBNF/EBNF grammar
            (`GrammarError` with the line), malformed choices, a structural tag, or an
            unknown option.
    """
    if option == "JSON":
        return CompileSpec("json", text)
    if option == "JSON_OBJECT":
        return CompileSpec("json", JSON_OBJECT_SCHEMA)
    if option == "REGEX":
        return CompileSpec("regex", text)
    if option == "CHOICE":
        return CompileSpec("regex", choice_regex(_choices(text)))
    if option == "GRAMMAR":
        reject_bnf_grammar(text)
        return CompileSpec("lark", text)
    if option == "STRUCTURAL_TAG":
        raise SpecError(
            "structural_tag is not supported by the fsmcompile structured-outputs backend; "
            "use json, regex, choice or a Lark grammar, or another backend"
        )
    raise SpecError(f"unknown structured-output option {option!r}")


def _choices(text: str) -> list[str]:
    try:
        choices = json.loads(text)
    except ValueError as exc:
        raise SpecError(f"choice: expected a JSON list of strings: {exc}") from exc
    if not isinstance(choices, list) or not choices or not all(isinstance(c, str) for c in choices):
        raise SpecError("choice: expected a non-empty list of strings")
    return choices


def choice_regex(choices: list[str]) -> str:
    """A regex whose full matches are exactly `choices` (each escaped literally).

    A regex, not a grammar: the choices form a finite language, so it compiles to a DFA
    whose masks are static per state (the fastest matcher).
    """
    return "|".join(re.escape(choice) for choice in choices)


def reject_bnf_grammar(grammar: str) -> None:
    """Refuse a GBNF/EBNF grammar (`name ::= ...` rules): this backend reads Lark.

    vLLM's other backends accept both dialects, so a client may well send GBNF; compiling
    it as Lark would fail with a confusing syntax error at the first `::=`.

    Raises:
        GrammarError: the grammar defines a rule with `::=`; `line` and `column` point at
            the first such rule.
    """
    match = _BNF_RULE.search(grammar)
    if match is None:
        return
    line = grammar.count("\n", 0, match.start()) + 1
    column = match.group(0).index("::=") + 1
    raise GrammarError(
        "the grammar is GBNF/EBNF (rules defined with '::='); the fsmcompile backend takes "
        "Lark grammars ('rule: ...', start rule 'start'); rewrite it in Lark or use the "
        "xgrammar or guidance backend",
        line=line,
        column=column,
    )


def check_spec(spec: CompileSpec, *, timeout_s: float = CHECK_TIMEOUT_S) -> None:
    """Parse and lower `spec` without a tokenizer: the errors a compile would raise first.

    A spec that passes can still fail in the engine (a budget exceeded while building
    the automaton, a grammar whose lexing cannot be followed exactly); that request alone
    then ends with an error.

    Raises:
        SpecError: the spec is invalid or unsupported (subclasses say where).
        BudgetExceededError: lowering ran past `timeout_s`.
    """
    deadline = time.monotonic() + timeout_s
    if spec.kind == "lark":
        from fsmcompile.grammar import load_lark_grammar

        load_lark_grammar(spec.spec)
        return
    if spec.kind == "json":
        try:
            json.loads(spec.spec)
        except ValueError as exc:
            raise SchemaError(f"schema is not valid JSON: {exc}", "") from exc
    from fsmcompile.compiler import lower_spec

    lower_spec(spec.kind, spec.spec, {}, deadline=deadline)
