"""The stages of one compile, spec → index: lower to the IR, build the automaton or
grammar, index it over the vocabulary, under the compile's time and state budget.

`Compiler` (compiler.py) calls `compile_uncached` on a cache miss, with its memo set
current (`compile_memos`); every memoized stage below reads that set.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from fsmcompile.artifact import AnyIndex
from fsmcompile.budget import Budget, compile_deadline
from fsmcompile.collector import collector_paused
from fsmcompile.compile_memos import current_memos
from fsmcompile.errors import BudgetExceededError, SpecError, UnsupportedFeatureError
from fsmcompile.frontend.identity import Kind, canonical_spec, spec_hash
from fsmcompile.frontend.json_schema.options import JsonOptions
from fsmcompile.frontend.lark.options import LarkOptions
from fsmcompile.frontend.options import OptionsArg, SpecOptions, options_key, typed_options
from fsmcompile.index.dfa.build import build_token_index
from fsmcompile.index.dfa.lazy_rows import lazy_token_index
from fsmcompile.ir.nodes import Node, content_key, forget_digests
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.tables.grammar_index import GrammarIndex
from fsmcompile.tables.lark_grammar import LarkGrammar
from fsmcompile.tables.lazy_grammar_index import LazyGrammarIndex
from fsmcompile.tables.lazy_index import LazyTokenIndex
from fsmcompile.tables.token_index import TokenIndex
from fsmcompile.vocabulary import Vocabulary

__all__ = [
    "FALLBACK_DEPTH",
    "ROOT_RULE",
    "ProgressCallback",
    "build_machine",
    "compile_lazy_uncached",
    "compile_uncached",
    "language_key",
    "lower_spec",
    "run_budgeted",
]

logger = logging.getLogger(__name__)

ROOT_RULE = "root"
FALLBACK_DEPTH = 3
"""How deep recursive and free-form values nest when a schema's grammar cannot be lexed
unambiguously and its rules are unrolled into a DFA instead."""
ProgressCallback = Callable[[str], None]
T = TypeVar("T")


def lower_spec(
    kind: Kind, spec: Any, options: OptionsArg, *, deadline: float | None = None
) -> tuple[Node, dict[str, Node]]:
    """The IR of a regex or JSON Schema spec, plus the rules its `Ref`s name (a recursive
    or free-form schema; empty when regular). Lowering counts on the time budget.

    Raises:
        SpecError: an unknown kind (Lark grammars are not lowered here), or the spec's
            own errors (`RegexSyntaxError`, `SchemaError`, `UnsupportedFeatureError`).
    """
    typed = typed_options(kind, options)
    if kind == "regex":
        from fsmcompile.frontend.regex.parser import parse_regex

        return parse_regex(canonical_spec(kind, spec)), {}
    if isinstance(typed, JsonOptions):
        from fsmcompile.frontend.json_schema import schema_to_ir

        lowering = schema_to_ir(spec, options=typed, deadline=deadline)
        return lowering.node, lowering.rules
    raise SpecError(f"a {kind} spec is not lowered to the IR: it compiles as a grammar")


def compile_uncached(
    kind: Kind,
    spec: Any,
    vocab: Vocabulary,
    options: SpecOptions | None,
    *,
    timeout_s: float,
    max_states: int,
    progress: ProgressCallback | None,
) -> AnyIndex:
    """Compile `spec` for `vocab` from scratch (the memos of `current_memos` aside),
    with the collector paused and the deadline `timeout_s` from now.

    Raises:
        SpecError: the spec is invalid or unsupported.
        BudgetExceededError: past the deadline or `max_states`, or nested deeper than the
            recursion limit allows (limit="nesting").
    """
    return run_budgeted(
        timeout_s,
        lambda deadline: _compile_stages(
            kind,
            spec,
            vocab,
            options,
            deadline=deadline,
            max_states=max_states,
            progress=progress,
        ),
    )


def run_budgeted(timeout_s: float, stages: Callable[[float], T]) -> T:
    """`stages(deadline)` with the collector paused and the deadline `timeout_s` from now
    current (`compile_deadline`): how every compile, eager or lazy, runs its stages.

    Raises:
        BudgetExceededError: the stages nest deeper than the recursion limit allows
            (limit="nesting"), besides what `stages` raises.
    """
    deadline = time.monotonic() + timeout_s
    try:
        with collector_paused(), compile_deadline(deadline):
            return stages(deadline)
    except RecursionError:
        raise BudgetExceededError(
            "the spec nests too deeply to compile here (its tree is deeper than the Python "
            "recursion limit allows): flatten it, or raise sys.setrecursionlimit",
            limit="nesting",
            value=sys.getrecursionlimit(),
        ) from None
    finally:
        forget_digests()


def _compile_stages(
    kind: Kind,
    spec: Any,
    vocab: Vocabulary,
    options: SpecOptions | None,
    *,
    deadline: float,
    max_states: int,
    progress: ProgressCallback | None,
) -> AnyIndex:
    if kind == "lark":
        from fsmcompile.index.cfg import compile_lark_index

        return compile_lark_index(
            canonical_spec(kind, spec),
            vocab,
            options=options if isinstance(options, LarkOptions) else None,
            max_states=max_states,
            deadline=deadline,
        )
    if progress:
        progress("automaton")
    node, rules = lower_spec(kind, spec, options, deadline=deadline)
    return _index_language(
        kind,
        spec,
        node,
        rules,
        vocab,
        options,
        deadline=deadline,
        max_states=max_states,
        progress=progress,
    )


def _index_language(
    kind: Kind,
    spec: Any,
    node: Node,
    rules: dict[str, Node],
    vocab: Vocabulary,
    options: SpecOptions | None,
    *,
    deadline: float,
    max_states: int,
    progress: ProgressCallback | None,
) -> AnyIndex:
    """The index of a lowered spec: built once per language (`language_key`) in the
    current memos, under this spec's hash."""
    nesting_limit = options.nesting_limit if isinstance(options, JsonOptions) else None

    def build() -> AnyIndex:
        machine = build_machine(
            node, rules, nesting_limit=nesting_limit, max_states=max_states, deadline=deadline
        )
        if progress:
            progress("index")
        if isinstance(machine, ByteDFA):
            return build_token_index(machine, vocab, kind=kind, spec_hash="", deadline=deadline)
        from fsmcompile.index.cfg.build import build_grammar_index

        return build_grammar_index(
            machine, vocab, spec_hash="", max_states=max_states, deadline=deadline, kind=kind
        )

    # Specs that lower to the same language (JSON Schemas that differ only in
    # annotations) share one index, each under its own `spec_hash`; a hit is still held
    # to this call's `max_states`.
    key = language_key(kind, node, rules, vocab, nesting_limit)
    index = current_memos().indexes.get_or_make(key, build)
    Budget(max_states, deadline).reserve(index.num_states, "the index")
    return dataclasses.replace(
        index, spec_hash=spec_hash(kind, spec, options_key(options)), vocabulary=vocab
    )


def compile_lazy_uncached(
    kind: Kind,
    spec: Any,
    vocab: Vocabulary,
    options: SpecOptions | None,
    *,
    timeout_s: float,
    max_states: int,
    on_complete: Callable[[AnyIndex], None] | None = None,
) -> LazyTokenIndex | LazyGrammarIndex:
    """A lazy index of any spec: lowered and built into its DFA or grammar now, each mask
    row made when a state is first visited (`LazyTokenIndex`), or each lexer state's
    token groups walked when a row first needs them (`LazyGrammarIndex`).

    The lazy index's `complete()` builds the eager index (through the language memo of
    the memos current now, for a DFA) under a fresh `timeout_s`, and hands it to
    `on_complete` (the compiler stores it in its cache, as an eager compile would).

    Raises:
        SpecError, BudgetExceededError: as `compile_uncached` (the index budget counts
            the automaton's or lexer's states now, the full walk on completion).
    """
    nesting_limit = options.nesting_limit if isinstance(options, JsonOptions) else None
    memos = current_memos()
    hashed = spec_hash(kind, spec, options_key(options))

    def finished(full: AnyIndex) -> None:
        if on_complete is not None:
            on_complete(full)

    def lazy_grammar(grammar: LarkGrammar, deadline: float) -> LazyGrammarIndex:
        from fsmcompile.index.cfg.build import build_grammar_index, build_lazy_grammar_index

        def complete() -> GrammarIndex:
            # A walker of its own, not the lazy index's: a completion may run on another
            # thread while matchers walk origins, and walks extend the walker's tables.
            def index(deadline: float) -> AnyIndex:
                return build_grammar_index(
                    grammar,
                    vocab,
                    spec_hash=hashed,
                    max_states=max_states,
                    deadline=deadline,
                    kind=kind,
                )

            full = run_budgeted(timeout_s, index)
            assert isinstance(full, GrammarIndex)
            finished(full)
            return full

        lazy = build_lazy_grammar_index(
            grammar,
            vocab,
            spec_hash=hashed,
            max_states=max_states,
            deadline=deadline,
            kind=kind,
            complete=complete,
        )
        Budget(max_states, deadline).reserve(lazy.num_states, "the index")
        return lazy

    def stages(deadline: float) -> tuple[Node, dict[str, Node], ByteDFA] | LazyGrammarIndex:
        if kind == "lark":
            from fsmcompile.grammar import load_lark_grammar

            lark_options = options if isinstance(options, LarkOptions) else LarkOptions()
            text = canonical_spec(kind, spec)
            return lazy_grammar(
                load_lark_grammar(text, lark_options, max_states=max_states), deadline
            )
        node, rules = lower_spec(kind, spec, options, deadline=deadline)
        machine = build_machine(
            node, rules, nesting_limit=nesting_limit, max_states=max_states, deadline=deadline
        )
        if not isinstance(machine, ByteDFA):
            return lazy_grammar(machine, deadline)
        Budget(max_states, deadline).reserve(machine.num_states, "the index")
        return node, rules, machine

    built = run_budgeted(timeout_s, stages)
    if not isinstance(built, tuple):
        return built
    node, rules, dfa = built
    key = language_key(kind, node, rules, vocab, nesting_limit)

    def complete() -> TokenIndex:
        def index(deadline: float) -> AnyIndex:
            def build() -> AnyIndex:
                return build_token_index(dfa, vocab, kind=kind, spec_hash="", deadline=deadline)

            with memos.active():
                return memos.indexes.get_or_make(key, build)

        found = run_budgeted(timeout_s, index)
        assert isinstance(found, TokenIndex)  # the language of a DFA indexes as one
        full = dataclasses.replace(found, spec_hash=hashed, vocabulary=vocab)
        finished(full)
        return full

    return lazy_token_index(dfa, vocab, kind=kind, spec_hash=hashed, complete=complete)


def language_key(
    kind: Kind,
    node: Node,
    rules: Mapping[str, Node],
    vocab: Vocabulary,
    nesting_limit: int | None,
) -> bytes:
    """What a regex or JSON Schema index depends on: the content of its language (the
    lowered tree and rules, `content_key`), the vocabulary, and how rules are built."""
    digest = hashlib.sha256(f"{kind}\0{vocab.fingerprint}\0{nesting_limit}".encode())
    digest.update(content_key(node))
    for name in sorted(rules):
        digest.update(f"\0{name}\0".encode())
        digest.update(content_key(rules[name]))
    return digest.digest()


def build_machine(
    node: Node,
    rules: Mapping[str, Node],
    *,
    nesting_limit: int | None = None,
    max_states: int,
    deadline: float | None,
) -> ByteDFA | LarkGrammar:
    """A DFA for a regular spec; a grammar when `rules` make it recursive or free-form,
    unless `nesting_limit` asks for the rules unrolled that deep into a DFA.

    A grammar whose longest-match lexing would be ambiguous (overlapping alternatives
    around a recursive part, see `from_rules.py`) falls back to the rules unrolled
    `FALLBACK_DEPTH` deep: sound, but texts nesting deeper are refused (logged).
    """
    from fsmcompile.automaton import build_dfa
    from fsmcompile.ir.rules import expand_rules

    if not rules:
        return build_dfa(node, max_states=max_states, deadline=deadline)
    if nesting_limit is not None:
        unrolled = expand_rules(node, rules, nesting_limit)
        return build_dfa(unrolled, max_states=max_states, deadline=deadline)
    from fsmcompile.grammar.from_rules import grammar_from_rules

    try:
        return grammar_from_rules(
            {ROOT_RULE: node, **rules}, ROOT_RULE, max_states=max_states, deadline=deadline
        )
    except UnsupportedFeatureError as exc:
        logger.warning(
            "compiling with nesting limited to %d levels of recursive or free-form values: %s",
            FALLBACK_DEPTH,
            exc.reason,
        )
    return build_dfa(
        expand_rules(node, rules, FALLBACK_DEPTH), max_states=max_states, deadline=deadline
    )
