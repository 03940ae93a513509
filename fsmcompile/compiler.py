"""Spec → token index, through the cache: the one path every front end and the CLI use.

Each compile runs under a time and a state budget, because specs arrive from untrusted
API clients: an explosive one ends in a clear BudgetExceededError, never a hang.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fsmcompile import artifact
from fsmcompile.artifact import AnyIndex
from fsmcompile.budget import Budget, compile_deadline
from fsmcompile.collector import collector_paused
from fsmcompile.errors import BudgetExceededError, SpecError, UnsupportedFeatureError
from fsmcompile.frontend.identity import Kind, canonical_spec, spec_hash
from fsmcompile.index.dfa.build import build_token_index
from fsmcompile.ir.nodes import Node, content_key, forget_digests
from fsmcompile.memo import StageMemo
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.tables.lark_grammar import LarkGrammar
from fsmcompile.version import FORMAT_VERSION
from fsmcompile.vocabulary import Vocabulary

__all__ = [
    "DEFAULT_MAX_STATES",
    "DEFAULT_TIMEOUT_S",
    "CompileResult",
    "Kind",
    "canonical_spec",
    "compile_json_schema",
    "compile_lark",
    "compile_regex",
    "compile_spec",
    "index_cache_key",
    "spec_hash",
]

logger = logging.getLogger(__name__)

ROOT_RULE = "root"
FALLBACK_DEPTH = 3
"""How deep recursive and free-form values nest when a schema's grammar cannot be lexed
unambiguously and its rules are unrolled into a DFA instead."""
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_STATES = 200_000
ProgressCallback = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class CompileResult:
    """A compiled index plus how it was obtained.

    Attributes:
        index: the token index (`TokenIndex`, or `GrammarIndex` for Lark).
        key: the cache key the index is stored under.
        cache_hit: whether it came from a cache tier instead of a compile.
        cache_tier: the tier that answered ('memory', 'disk', 'redis') on a hit.
        compile_s: seconds spent compiling (None on a hit).
    """

    index: AnyIndex
    key: str
    cache_hit: bool
    cache_tier: str | None
    compile_s: float | None

    @property
    def num_states(self) -> int:
        return int(self.index.num_states)

    @property
    def num_masks(self) -> int:
        return int(self.index.masks.shape[0])


def index_cache_key(
    kind: Kind, spec: Any, vocab: Vocabulary, options: Mapping[str, Any] | None = None
) -> str:
    """The key `compile_spec` stores this spec's index under."""
    from fsmcompile.store.keys import cache_key

    return cache_key(
        vocab_fingerprint=vocab.fingerprint,
        kind=kind,
        spec=canonical_spec(kind, spec),
        options=dict(options or {}),
        format_version=FORMAT_VERSION,
    )


def lower_spec(
    kind: Kind, spec: Any, options: Mapping[str, Any], *, deadline: float | None = None
) -> tuple[Node, dict[str, Node]]:
    """The IR of a regex or JSON Schema spec, plus the rules its `Ref`s name (a recursive
    or free-form schema; empty when regular). Lowering counts on the time budget."""
    if kind == "regex":
        from fsmcompile.frontend.regex.parser import parse_regex

        return parse_regex(canonical_spec(kind, spec)), {}
    if kind == "json":
        from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir

        lowering = schema_to_ir(spec, options=JsonOptions(**options), deadline=deadline)
        return lowering.node, lowering.rules
    raise SpecError(f"unknown spec kind {kind!r}; expected 'regex', 'json' or 'lark'")


def _compile_uncached(
    kind: Kind,
    spec: Any,
    vocab: Vocabulary,
    options: Mapping[str, Any],
    *,
    timeout_s: float,
    max_states: int,
    progress: ProgressCallback | None,
) -> AnyIndex:
    deadline = time.monotonic() + timeout_s
    try:
        with collector_paused(), compile_deadline(deadline):
            return _compile_stages(
                kind,
                spec,
                vocab,
                options,
                deadline=deadline,
                max_states=max_states,
                progress=progress,
            )
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
    options: Mapping[str, Any],
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
            options=options,
            max_states=max_states,
            deadline=deadline,
        )
    if progress:
        progress("automaton")
    node, rules = lower_spec(kind, spec, options, deadline=deadline)
    nesting_limit = options.get("nesting_limit")

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

    index = _indexes.get_or_make(language_key(kind, node, rules, vocab, nesting_limit), build)
    Budget(max_states, deadline).reserve(index.num_states, "the index")
    return dataclasses.replace(index, spec_hash=spec_hash(kind, spec, options), vocabulary=vocab)


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


def _index_bytes(index: AnyIndex) -> int:
    """The bytes of an index's arrays, nested ones included (for the memo's bound)."""
    total = 0
    pending: list[Any] = [index]
    while pending:
        item = pending.pop()
        for name in getattr(item, "__dataclass_fields__", ()):
            value = getattr(item, name)
            if isinstance(value, np.ndarray):
                total += int(value.nbytes)
            elif dataclasses.is_dataclass(value) and not isinstance(value, Vocabulary):
                pending.append(value)
    return total


_indexes: StageMemo[bytes, AnyIndex] = StageMemo(32, max_bytes=256 << 20, size_of=_index_bytes)
"""Indexes by `language_key`: specs that lower to the same language (JSON Schemas that
differ only in annotations: descriptions, titles, examples) compile once per process, and
each gets the index under its own `spec_hash`. A hit is still held to the call's
`max_states` (by the index's state count)."""


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


MAX_STATES_LIMIT = 2**31 - 1
"""The largest `max_states` accepted: automaton states are int32 ids."""


def check_budget(timeout_s: float, max_states: int) -> None:
    """Refuse budget arguments that would switch a budget off or make it meaningless:
    every check compares against them, and `now > now + nan` is never true.

    Raises:
        TypeError: `timeout_s` is not a real number or `max_states` not an int
            (booleans are neither).
        ValueError: `timeout_s` is not finite and positive, or `max_states` is not in
            1..2**31-1.
    """
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float):
        raise TypeError(f"timeout_s must be a number of seconds, not {type(timeout_s).__name__}")
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError(f"timeout_s must be finite and positive, not {timeout_s!r}")
    if isinstance(max_states, bool) or not isinstance(max_states, int):
        raise TypeError(f"max_states must be an int, not {type(max_states).__name__}")
    if not 0 < max_states <= MAX_STATES_LIMIT:
        raise ValueError(f"max_states must be in 1..{MAX_STATES_LIMIT}, not {max_states}")


def compile_spec(
    kind: Kind,
    spec: Any,
    vocab: Vocabulary,
    *,
    options: Mapping[str, Any] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_states: int = DEFAULT_MAX_STATES,
    cache: Any = True,
    progress: ProgressCallback | None = None,
) -> CompileResult:
    """Compile `spec` for `vocab`, or load it from the cache.

    Args:
        kind: 'regex', 'json' or 'lark'.
        options: kind-specific options; part of the cache key.
        timeout_s: wall-clock budget for the compile, seconds (finite, > 0).
        max_states: largest automaton allowed (1..2**31-1).
        cache: True for the default cache (memory + disk, + Redis when
            FSMCOMPILE_REDIS_URL is set), False/None for none, a Redis URL, or a
            `TieredCache`.
        progress: called with a stage name as the compile moves on.

    Raises:
        SpecError: the spec is invalid or unsupported (subclasses say which).
        BudgetExceededError: the compile ran past `timeout_s` or `max_states`, or the
            spec nests deeper than the recursion limit (limit="nesting").
        ValueError, TypeError: `timeout_s` or `max_states` out of range (`check_budget`).
    """
    from fsmcompile.store.default import resolve_cache

    check_budget(timeout_s, max_states)
    opts = dict(options or {})
    key = index_cache_key(kind, spec, vocab, opts)
    started = time.perf_counter()

    def compute() -> AnyIndex:
        return _compile_uncached(
            kind, spec, vocab, opts, timeout_s=timeout_s, max_states=max_states, progress=progress
        )

    tiered = resolve_cache(cache)
    if tiered is None:
        index = compute()
        return CompileResult(index, key, False, None, time.perf_counter() - started)
    built: list[AnyIndex] = []

    def compute_bytes() -> bytes:
        built.append(compute())
        return artifact.to_bytes(built[0])

    def decode(data: bytes) -> AnyIndex:
        return built[0] if built else artifact.from_bytes(data, vocab, source=key)

    index, event = tiered.get_or_compute(key, compute_bytes, decode=decode)
    logger.info(
        "compile %s: %s%s",
        kind,
        "hit" if event.hit else "miss",
        f" ({event.tier})" if event.tier else "",
    )
    return CompileResult(index, key, event.hit, event.tier, event.compile_s)


def compile_regex(
    pattern: str,
    vocab: Vocabulary,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_states: int = DEFAULT_MAX_STATES,
    cache: Any = True,
) -> AnyIndex:
    """Compile a regex (Python `re` syntax, full match) into a token index for `vocab`.

    Raises:
        RegexSyntaxError: the pattern does not parse (`.pos` points at the problem).
        UnsupportedFeatureError: backreferences, lookbehind and similar constructs.
        BudgetExceededError: the compile ran past `timeout_s` or `max_states`, or the
            spec nests deeper than the recursion limit (limit="nesting").
    """
    return compile_spec(
        "regex", pattern, vocab, timeout_s=timeout_s, max_states=max_states, cache=cache
    ).index


def compile_json_schema(
    schema: Any,
    vocab: Vocabulary,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_states: int = DEFAULT_MAX_STATES,
    cache: Any = True,
    **options: Any,
) -> AnyIndex:
    """Compile a JSON Schema (dict, JSON text, or a Pydantic model class) into a token index.

    Options (`whitespace`, `strict`, `nesting_limit`, ...) are those of
    `fsmcompile.frontend.json_schema.JsonOptions` and are part of the cache key.

    Raises:
        SchemaError: malformed or contradictory schema (`.pointer` says where).
        UnsupportedFeatureError: keywords no token mask can enforce (all listed).
        BudgetExceededError: the compile ran past `timeout_s` or `max_states`, or the
            spec nests deeper than the recursion limit (limit="nesting").
    """
    if hasattr(schema, "model_json_schema"):
        schema = schema.model_json_schema()
    return compile_spec(
        "json",
        schema,
        vocab,
        options=options,
        timeout_s=timeout_s,
        max_states=max_states,
        cache=cache,
    ).index


def compile_lark(
    grammar: str,
    vocab: Vocabulary,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_states: int = DEFAULT_MAX_STATES,
    cache: Any = True,
    **options: Any,
) -> AnyIndex:
    """Compile a Lark grammar (LALR, contextual lexer) into a token index for `vocab`.

    Options: `start` (the start rule), `strict` (lark's strict mode).

    Raises:
        GrammarError: the grammar does not build (`.line`/`.column` say where).
        UnsupportedFeatureError: terminals no token mask can follow exactly.
        BudgetExceededError: the compile ran past `timeout_s` or `max_states`, or the
            spec nests deeper than the recursion limit (limit="nesting").
    """
    return compile_spec(
        "lark",
        grammar,
        vocab,
        options=options,
        timeout_s=timeout_s,
        max_states=max_states,
        cache=cache,
    ).index
