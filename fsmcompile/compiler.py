"""Spec → token index, through the cache: the one path every front end and the CLI use.

A `Compiler` holds what compiles share: the vocabulary, the budgets, the cache, and the
memos its compiles learn from one another (`compile_memos.CompileMemos`). Two compilers
share nothing they did not share on purpose, and `Compiler.clear()` forgets what one
learned. The module-level `compile_*` functions keep their one-call form: each call
makes a compiler for its arguments over the memo set current in the caller's context
(`compile_memos.current_memos`): the process's default set, which stage code called
outside any compile reads too, unless a `CompileMemos.active()` block names another.

Each compile runs under a time and a state budget, because specs arrive from untrusted
API clients: an explosive one ends in a clear BudgetExceededError, never a hang.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, overload

from fsmcompile import artifact
from fsmcompile.artifact import AnyIndex
from fsmcompile.compile_memos import DEFAULT_MEMO_BYTES, CompileMemos, current_memos
from fsmcompile.compile_options import (
    DEFAULT_MAX_STATES,
    DEFAULT_TIMEOUT_S,
    MAX_STATES_LIMIT,
    Cache,
    CacheArg,
    check_budget,
    resolve_cache_arg,
)
from fsmcompile.compile_stages import (
    FALLBACK_DEPTH,
    ROOT_RULE,
    ProgressCallback,
    build_machine,
    compile_lazy_uncached,
    compile_uncached,
    language_key,
    lower_spec,
)
from fsmcompile.frontend.identity import Kind, canonical_spec, spec_hash
from fsmcompile.frontend.json_schema.options import JsonOptions
from fsmcompile.frontend.lark.options import LarkOptions
from fsmcompile.frontend.options import (
    OptionsArg,
    SpecOptions,
    options_from_mapping,
    options_key,
    typed_options,
)
from fsmcompile.tables.lazy_grammar_index import LazyGrammarIndex
from fsmcompile.tables.lazy_index import LazyTokenIndex
from fsmcompile.version import FORMAT_VERSION
from fsmcompile.vocabulary import Vocabulary

__all__ = [
    "DEFAULT_MAX_STATES",
    "DEFAULT_TIMEOUT_S",
    "FALLBACK_DEPTH",
    "MAX_STATES_LIMIT",
    "ROOT_RULE",
    "Cache",
    "CompileMemos",
    "CompileResult",
    "Compiler",
    "Index",
    "JsonOptions",
    "Kind",
    "LarkOptions",
    "LazyIndex",
    "build_machine",
    "canonical_spec",
    "check_budget",
    "compile_json_schema",
    "compile_lark",
    "compile_regex",
    "compile_spec",
    "index_cache_key",
    "language_key",
    "lower_spec",
    "spec_hash",
]

logger = logging.getLogger(__name__)

Index: TypeAlias = AnyIndex
"""What a compile returns: a `TokenIndex` (regex, regular JSON Schema) or a `GrammarIndex`
(Lark, recursive or free-form JSON Schema)."""
LazyIndex: TypeAlias = LazyTokenIndex | LazyGrammarIndex
"""What a lazy compile returns on a cache miss (`Compiler.compile_lazy`)."""


@dataclass(frozen=True, slots=True)
class CompileResult:
    """A compiled index plus how it was obtained.

    Attributes:
        index: the token index (`TokenIndex`, or `GrammarIndex` for Lark).
        key: the cache key the index is stored under.
        cache_hit: whether it came from a cache tier instead of a compile.
        cache_tier: the tier that answered ('memory', 'disk', 'redis') on a hit.
        compile_s: seconds spent compiling (None on a hit).
        artifact_bytes: the serialized index the cache stored or returned (None when no
            cache was used), so a caller writing the artifact out does not serialize it
            a second time.
    """

    index: Index
    key: str
    cache_hit: bool
    cache_tier: str | None
    compile_s: float | None
    artifact_bytes: bytes | None = None

    @property
    def num_states(self) -> int:
        return int(self.index.num_states)

    @property
    def num_masks(self) -> int:
        return int(self.index.masks.shape[0])


def index_cache_key(kind: Kind, spec: Any, vocab: Vocabulary, options: OptionsArg = None) -> str:
    """The key `compile_spec` stores this spec's index under.

    Raises:
        SpecError: an unknown kind or option, or a spec with no canonical text.
    """
    from fsmcompile.store.keys import cache_key

    return cache_key(
        vocab_fingerprint=vocab.fingerprint,
        kind=kind,
        spec=canonical_spec(kind, spec),
        options=options_key(typed_options(kind, options)),
        format_version=FORMAT_VERSION,
    )


class Compiler:
    """Compiles specs for one vocabulary, through one cache, under one budget.

    Args:
        vocab: the tokenizer's vocabulary every index is made for.
        cache: True for the default cache (memory + disk, + Redis when
            FSMCOMPILE_REDIS_URL is set), False/None for none, a Redis URL, or a
            `Cache` (a `TieredCache`, or anything with its `get_or_compute`, `get`, `put`).
        timeout_s: wall-clock budget of each compile, seconds (finite, > 0).
        max_states: largest automaton any compile may build (1..2**31-1).
        memo_bytes: the bound on what this compiler's memos hold (default
            `compile_memos.DEFAULT_MEMO_BYTES`).
        memos: a memo set to share (another compiler's `memos`) instead of a new one;
            then `memo_bytes` is that set's and may not be given.

    Raises:
        ValueError, TypeError: a budget or `memo_bytes` out of range (`check_budget`),
            both `memos` and `memo_bytes` given, or a `cache` of no accepted form.
    """

    def __init__(
        self,
        vocab: Vocabulary,
        *,
        cache: CacheArg = True,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_states: int = DEFAULT_MAX_STATES,
        memo_bytes: int | None = None,
        memos: CompileMemos | None = None,
    ) -> None:
        check_budget(timeout_s, max_states)
        if memos is not None and memo_bytes is not None:
            raise ValueError("give memos or memo_bytes, not both: shared memos keep their bound")
        self.vocab = vocab
        self.timeout_s = timeout_s
        self.max_states = max_states
        self.cache: Cache | None = resolve_cache_arg(cache)
        self.memos = (
            memos
            if memos is not None
            else CompileMemos(DEFAULT_MEMO_BYTES if memo_bytes is None else memo_bytes)
        )

    def clear(self) -> None:
        """Forget everything this compiler's memos learned (shared memos included): the
        next compile of any spec pays its full cost, as a cold process would."""
        self.memos.clear()

    def compile_spec(
        self,
        kind: Kind,
        spec: Any,
        *,
        options: SpecOptions | None = None,
        progress: ProgressCallback | None = None,
    ) -> CompileResult:
        """Compile `spec`, or load it from the cache.

        Args:
            kind: 'regex', 'json' or 'lark'.
            spec: the pattern, schema (dict or JSON text) or grammar.
            options: `JsonOptions` for 'json', `LarkOptions` for 'lark', None for their
                defaults (a regex takes none); part of the cache key.
            progress: called with a stage name as the compile moves on.

        Raises:
            SpecError: the spec or its options are invalid or unsupported (subclasses
                say which; an unknown option is named).
            BudgetExceededError: the compile ran past `timeout_s` or `max_states`, or the
                spec nests deeper than the recursion limit (limit="nesting").
            TypeError: options of another kind.
        """
        typed = typed_options(kind, options)
        key = index_cache_key(kind, spec, self.vocab, typed)
        started = time.perf_counter()

        def compute() -> Index:
            with self.memos.active():
                return compile_uncached(
                    kind,
                    spec,
                    self.vocab,
                    typed,
                    timeout_s=self.timeout_s,
                    max_states=self.max_states,
                    progress=progress,
                )

        if self.cache is None:
            index = compute()
            return CompileResult(index, key, False, None, time.perf_counter() - started)
        built: list[Index] = []

        def compute_bytes() -> bytes:
            built.append(compute())
            return artifact.to_bytes(built[0])

        seen: list[bytes] = []

        def decode(data: bytes) -> Index:
            seen.append(data)
            return built[0] if built else artifact.from_bytes(data, self.vocab, source=key)

        index, event = self.cache.get_or_compute(key, compute_bytes, decode=decode)
        logger.info(
            "compile %s: %s%s",
            kind,
            "hit" if event.hit else "miss",
            f" ({event.tier})" if event.tier else "",
        )
        data = seen[-1] if seen else None
        return CompileResult(index, key, event.hit, event.tier, event.compile_s, data)

    def compile_lazy(
        self, kind: Kind, spec: Any, *, options: SpecOptions | None = None
    ) -> Index | LazyIndex:
        """Compile `spec` for its first mask: the cached full index when the cache holds
        one, else a lazy index. A spec that compiles to a DFA gives a `LazyTokenIndex`,
        whose rows are made as states are first visited (one vocabulary walk each); a Lark
        grammar or a schema that needs one gives a `LazyGrammarIndex`, whose lexer states'
        token groups are walked when a row first needs them. Either way the first mask
        comes without the whole index.

        `index.complete()` (or `index.complete_in_background()`) builds the full index,
        what `compile_spec` builds, and stores it in this compiler's cache under the key
        `compile_spec` reads, so the fleet compiles each spec once.

        Raises:
            As `compile_spec`.
        """
        typed = typed_options(kind, options)
        key = index_cache_key(kind, spec, self.vocab, typed)
        cache = self.cache
        if cache is not None:
            data = cache.get(key)
            if data is not None:
                return artifact.from_bytes(data, self.vocab, source=key)

        def store(full: Index) -> None:
            if cache is not None:
                cache.put(key, artifact.to_bytes(full))

        with self.memos.active():
            return compile_lazy_uncached(
                kind,
                spec,
                self.vocab,
                typed,
                timeout_s=self.timeout_s,
                max_states=self.max_states,
                on_complete=store,
            )

    @overload
    def compile_regex(self, pattern: str, *, lazy: Literal[False] = False) -> Index: ...
    @overload
    def compile_regex(self, pattern: str, *, lazy: bool) -> Index | LazyIndex: ...
    def compile_regex(self, pattern: str, *, lazy: bool = False) -> Index | LazyIndex:
        """Compile a regex (Python `re` syntax, full match) into a token index.

        Args:
            lazy: return a `LazyTokenIndex` on a cache miss (see `compile_lazy`).

        Raises:
            RegexSyntaxError: the pattern does not parse (`.pos` points at the problem).
            UnsupportedFeatureError: backreferences, lookbehind and similar constructs.
            BudgetExceededError: as `compile_spec`.
        """
        if lazy:
            return self.compile_lazy("regex", pattern)
        return self.compile_spec("regex", pattern).index

    @overload
    def compile_json_schema(
        self, schema: Any, *, options: JsonOptions | None = None, lazy: Literal[False] = False
    ) -> Index: ...
    @overload
    def compile_json_schema(
        self, schema: Any, *, options: JsonOptions | None = None, lazy: bool
    ) -> Index | LazyIndex: ...
    def compile_json_schema(
        self, schema: Any, *, options: JsonOptions | None = None, lazy: bool = False
    ) -> Index | LazyIndex:
        """Compile a JSON Schema (dict, JSON text, or a Pydantic model class).

        Args:
            lazy: return a lazy index on a cache miss (see `compile_lazy`).

        Raises:
            SchemaError: malformed or contradictory schema (`.pointer` says where).
            UnsupportedFeatureError: keywords no token mask can enforce (all listed).
            BudgetExceededError: as `compile_spec`.
        """
        if hasattr(schema, "model_json_schema"):
            schema = schema.model_json_schema()
        if lazy:
            return self.compile_lazy("json", schema, options=options)
        return self.compile_spec("json", schema, options=options).index

    def compile_lark(self, grammar: str, *, options: LarkOptions | None = None) -> Index:
        """Compile a Lark grammar (LALR, contextual lexer) into a token index.

        Raises:
            GrammarError: the grammar does not build (`.line`/`.column` say where).
            UnsupportedFeatureError: terminals no token mask can follow exactly.
            BudgetExceededError: as `compile_spec`.
        """
        return self.compile_spec("lark", grammar, options=options).index


def _compiler(vocab: Vocabulary, cache: CacheArg, timeout_s: float, max_states: int) -> Compiler:
    """The compiler one module-level call runs: its arguments, the current memo set."""
    return Compiler(
        vocab, cache=cache, timeout_s=timeout_s, max_states=max_states, memos=current_memos()
    )


def compile_spec(
    kind: Kind,
    spec: Any,
    vocab: Vocabulary,
    *,
    options: OptionsArg = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_states: int = DEFAULT_MAX_STATES,
    cache: CacheArg = True,
    progress: ProgressCallback | None = None,
) -> CompileResult:
    """Compile `spec` for `vocab`, or load it from the cache (`Compiler.compile_spec`).

    Args:
        kind: 'regex', 'json' or 'lark'.
        options: `JsonOptions` / `LarkOptions`, or their fields as a mapping (what the
            CLI and the serving adapters build); part of the cache key.
        timeout_s: wall-clock budget for the compile, seconds (finite, > 0).
        max_states: largest automaton allowed (1..2**31-1).
        cache: as `Compiler`'s.
        progress: called with a stage name as the compile moves on.

    Raises:
        SpecError: the spec is invalid or unsupported (subclasses say which), or an
            option is unknown (named).
        BudgetExceededError: the compile ran past `timeout_s` or `max_states`, or the
            spec nests deeper than the recursion limit (limit="nesting").
        ValueError, TypeError: `timeout_s` or `max_states` out of range (`check_budget`).
    """
    compiler = _compiler(vocab, cache, timeout_s, max_states)
    typed = typed_options(kind, options)
    return compiler.compile_spec(kind, spec, options=typed, progress=progress)


def compile_regex(
    pattern: str,
    vocab: Vocabulary,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_states: int = DEFAULT_MAX_STATES,
    cache: CacheArg = True,
) -> Index:
    """Compile a regex (Python `re` syntax, full match) into a token index for `vocab`.

    Raises:
        RegexSyntaxError: the pattern does not parse (`.pos` points at the problem).
        UnsupportedFeatureError: backreferences, lookbehind and similar constructs.
        BudgetExceededError: the compile ran past `timeout_s` or `max_states`, or the
            spec nests deeper than the recursion limit (limit="nesting").
    """
    return _compiler(vocab, cache, timeout_s, max_states).compile_regex(pattern)


def compile_json_schema(
    schema: Any,
    vocab: Vocabulary,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_states: int = DEFAULT_MAX_STATES,
    cache: CacheArg = True,
    **options: Any,
) -> Index:
    """Compile a JSON Schema (dict, JSON text, or a Pydantic model class) into a token index.

    Options (`whitespace`, `strict`, `nesting_limit`, ...) are the fields of `JsonOptions`
    and are part of the cache key.

    Raises:
        SchemaError: malformed or contradictory schema (`.pointer` says where).
        UnsupportedFeatureError: keywords no token mask can enforce (all listed).
        SpecError: an unknown option (named).
        BudgetExceededError: the compile ran past `timeout_s` or `max_states`, or the
            spec nests deeper than the recursion limit (limit="nesting").
    """
    compiler = _compiler(vocab, cache, timeout_s, max_states)
    typed = options_from_mapping(JsonOptions, "json", options)
    return compiler.compile_json_schema(schema, options=typed)


def compile_lark(
    grammar: str,
    vocab: Vocabulary,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_states: int = DEFAULT_MAX_STATES,
    cache: CacheArg = True,
    **options: Any,
) -> Index:
    """Compile a Lark grammar (LALR, contextual lexer) into a token index for `vocab`.

    Options are the fields of `LarkOptions`: `start` (the start rule), `strict` (lark's
    strict mode), `import_paths` (folders `%import` may read).

    Raises:
        GrammarError: the grammar does not build (`.line`/`.column` say where).
        UnsupportedFeatureError: terminals no token mask can follow exactly.
        SpecError: an unknown option (named).
        BudgetExceededError: the compile ran past `timeout_s` or `max_states`, or the
            spec nests deeper than the recursion limit (limit="nesting").
    """
    compiler = _compiler(vocab, cache, timeout_s, max_states)
    return compiler.compile_lark(
        grammar, options=options_from_mapping(LarkOptions, "lark", options)
    )
