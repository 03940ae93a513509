"""`Compiler`: it owns its memos, the module functions delegate to one, options are typed,
and any `Cache` serves it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import pytest

import fsmcompile
from fsmcompile import Compiler, SpecError, TokenIndex, Vocabulary, compile_regex
from fsmcompile.compile_memos import CompileMemos, current_memos, default_memos
from fsmcompile.compiler import (
    Cache,
    JsonOptions,
    LarkOptions,
    compile_json_schema,
    compile_lark,
    compile_spec,
    index_cache_key,
)
from fsmcompile.store.cache import CacheEvent, TieredCache
from fsmcompile.store.memory import MemoryStore

T = TypeVar("T")
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
GRAMMAR = 'start: "a" b\nb: "b"+\n'


def test_two_compilers_share_no_memo(gpt2: Vocabulary) -> None:
    first, second = Compiler(gpt2, cache=False), Compiler(gpt2, cache=False)
    a = first.compile_regex("[a-c]{2}x+")
    b = second.compile_regex("[a-c]{2}x+")
    assert b.masks is not a.masks  # built again, not the first one's index
    for compiler in (first, second):
        assert (compiler.memos.indexes.misses, compiler.memos.indexes.hits) == (1, 0)
        assert compiler.memos.dfas.misses >= 1
    assert first.compile_regex("[a-c]{2}x+").masks is a.masks
    assert first.memos.indexes.hits == 1


def test_clear_forgets_so_the_next_compile_recomputes(gpt2: Vocabulary) -> None:
    compiler = Compiler(gpt2, cache=False)
    before = compiler.compile_json_schema(SCHEMA)
    assert len(compiler.memos.indexes) == 1 and len(compiler.memos.dfas) >= 1
    compiler.clear()
    assert all(len(memo) == 0 for memo in compiler.memos.stage_memos())
    assert len(compiler.memos.kept) == 0
    after = compiler.compile_json_schema(SCHEMA)
    assert (compiler.memos.indexes.misses, compiler.memos.indexes.hits) == (1, 0)
    assert after.masks is not before.masks
    assert (after.masks == before.masks).all()


def test_a_compile_leaves_the_default_memos_alone(gpt2: Vocabulary) -> None:
    defaults = default_memos()
    counts = [(m.hits, m.misses) for m in defaults.stage_memos()]
    Compiler(gpt2, cache=False).compile_lark(GRAMMAR)
    assert [(m.hits, m.misses) for m in defaults.stage_memos()] == counts


def test_a_compiler_used_from_another_thread_fills_its_own_memos(gpt2: Vocabulary) -> None:
    compiler = Compiler(gpt2, cache=False)
    worker = threading.Thread(target=compiler.compile_regex, args=("q[0-9]{3}",))
    worker.start()
    worker.join(timeout=60)
    assert compiler.memos.indexes.misses == 1


def test_module_functions_compile_over_the_current_memos(gpt2: Vocabulary) -> None:
    memos = CompileMemos()
    with memos.active():
        assert current_memos() is memos
        compile_regex("m[xy]{4}", gpt2, cache=False)
        compile_json_schema(SCHEMA, gpt2, cache=False)
        compile_lark(GRAMMAR, gpt2, cache=False)
    assert current_memos() is default_memos()
    assert memos.indexes.misses == 2  # the Lark grammar is not a language the memo keys
    assert memos.analyses.misses == 2  # the grammar's, and the schema's generated one
    hits = default_memos().indexes.hits
    first = compile_regex("d[xy]{4}", gpt2, cache=False)
    assert compile_regex("d[xy]{4}", gpt2, cache=False).masks is first.masks
    assert default_memos().indexes.hits == hits + 1


def test_shared_memos_and_their_bound(gpt2: Vocabulary) -> None:
    owner = Compiler(gpt2, cache=False)
    sharer = Compiler(gpt2, cache=False, max_states=10_000, memos=owner.memos)
    index = owner.compile_regex("s[0-9]+")
    assert sharer.compile_regex("s[0-9]+").masks is index.masks
    with pytest.raises(ValueError, match="memos or memo_bytes"):
        Compiler(gpt2, memos=owner.memos, memo_bytes=1 << 20)
    tiny = Compiler(gpt2, cache=False, memo_bytes=1024)
    tiny.compile_regex("s[0-9]+")
    assert len(tiny.memos.indexes) == 0  # larger than a quarter of its share: not kept
    with pytest.raises(ValueError, match="memo_bytes"):
        Compiler(gpt2, memo_bytes=0)
    with pytest.raises(TypeError, match="memo_bytes"):
        Compiler(gpt2, memo_bytes=True)


def test_budgets_are_checked_when_the_compiler_is_made(gpt2: Vocabulary) -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        Compiler(gpt2, timeout_s=float("nan"))
    with pytest.raises(ValueError, match="max_states"):
        Compiler(gpt2, max_states=0)


def test_unknown_options_are_named(gpt2: Vocabulary) -> None:
    with pytest.raises(SpecError, match=r"unknown json options \['colour'\]"):
        compile_json_schema(SCHEMA, gpt2, cache=False, colour="red")
    with pytest.raises(SpecError, match=r"unknown lark options \['begin'\]"):
        compile_lark(GRAMMAR, gpt2, cache=False, begin="b")
    with pytest.raises(SpecError, match=r"unknown json options \['spaces'\]"):
        compile_spec("json", SCHEMA, gpt2, options={"spaces": 2}, cache=False)
    with pytest.raises(SpecError, match="a regex takes no options"):
        compile_spec("regex", "a", gpt2, options={"strict": True}, cache=False)
    with pytest.raises(TypeError, match="json options must be JsonOptions, not LarkOptions"):
        Compiler(gpt2, cache=False).compile_spec("json", SCHEMA, options=LarkOptions())


def test_typed_options_and_their_mapping_name_one_index(gpt2: Vocabulary) -> None:
    compiler = Compiler(gpt2, cache=False)
    spaced = compiler.compile_spec("json", SCHEMA, options=JsonOptions(whitespace="standard"))
    assert spaced.key == index_cache_key("json", SCHEMA, gpt2, {"whitespace": "standard"})
    assert spaced.key != index_cache_key("json", SCHEMA, gpt2)
    # A default spelled out is the default: one key, one index.
    assert index_cache_key("json", SCHEMA, gpt2, {"whitespace": "compact"}) == (
        index_cache_key("json", SCHEMA, gpt2, None)
    )
    grammar = 'top: "x" | "y" top\n'
    index = compiler.compile_lark(grammar, options=LarkOptions(start="top"))
    assert index.spec_hash == compile_lark(grammar, gpt2, cache=False, start="top").spec_hash


def test_lark_options_check_their_fields(tmp_path: object) -> None:
    assert LarkOptions(import_paths=[str(tmp_path)]).import_paths == (str(tmp_path),)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="start: expected a rule name"):
        LarkOptions(start=3)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="is not a folder"):
        LarkOptions(import_paths=("/no/such/folder",))


class DictCache:
    """A `Cache` over a dict: one process, no tiers, no single flight."""

    def __init__(self) -> None:
        self.entries: dict[str, bytes] = {}

    def get(self, key: str) -> bytes | None:
        return self.entries.get(key)

    def put(self, key: str, value: bytes) -> None:
        self.entries[key] = value

    def get_or_compute(
        self, key: str, compute: Callable[[], bytes], *, decode: Callable[[bytes], T]
    ) -> tuple[T, CacheEvent]:
        found = self.entries.get(key)
        if found is not None:
            return decode(found), CacheEvent(True, "dict", None, 0.0)
        data = self.entries[key] = compute()
        return decode(data), CacheEvent(False, None, 0.0, 0.0)


def test_any_cache_with_the_protocol_serves_a_compiler(gpt2: Vocabulary) -> None:
    cache = DictCache()
    assert isinstance(cache, Cache) and isinstance(TieredCache([MemoryStore()]), Cache)
    compiler = Compiler(gpt2, cache=cache)
    first = compiler.compile_spec("regex", "c[a-f]{2,3}")
    assert not first.cache_hit and cache.get(first.key) is not None
    compiler.clear()
    again = Compiler(gpt2, cache=cache).compile_spec("regex", "c[a-f]{2,3}")
    assert (again.cache_hit, again.cache_tier) == (True, "dict")
    assert isinstance(again.index, TokenIndex)
    assert compiler.memos.indexes.misses == 0  # loaded, never compiled again
    assert compile_regex("c[a-f]{2,3}", gpt2, cache=cache).masks.shape == first.index.masks.shape
    with pytest.raises(TypeError, match="cache must be"):
        Compiler(gpt2, cache=42)  # type: ignore[arg-type]


def test_index_is_exported_as_both_index_kinds() -> None:
    from typing import get_args

    assert "Index" in fsmcompile.__all__ and "Compiler" in fsmcompile.__all__
    assert TokenIndex in get_args(fsmcompile.Index)


def test_free_form_scalars_are_built_once_per_compiler(gpt2: Vocabulary) -> None:
    """Every free-form value's scalars (null, true, false, numbers, strings) are one
    grammar terminal over one kept node: a second schema reuses its automaton even with
    the stage memos emptied, as a server meeting a new schema has them."""
    from fsmcompile.frontend.json_schema.syntax import ANY_SCALAR

    compiler = Compiler(gpt2, cache=False)
    assert compiler.memos.kept.get(id(ANY_SCALAR)) is None
    compiler.compile_json_schema({"type": "object", "properties": {"free": {}}})
    built = compiler.memos.kept.get(id(ANY_SCALAR))
    assert built is not None
    for memo in compiler.memos.stage_memos():
        memo.clear()
    compiler.compile_json_schema({"type": "array", "items": {"type": "array", "items": {}}})
    again = compiler.memos.kept.get(id(ANY_SCALAR))
    assert again is not None and again[0] is built[0]
