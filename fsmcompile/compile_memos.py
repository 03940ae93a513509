"""The memos one compiler keeps across compiles, and which set the stage code running now reads.

Specs of one family share most of their machinery (the any-JSON terminals of every schema
with free-form members, the generated grammar text of schemas of one shape), so compile
stages memoize by the content of their inputs. The memos belong to a `Compiler`, not to
the process: two compilers learn apart, and `Compiler.clear()` forgets what one learned.
A compile makes its compiler's set current in a `ContextVar` for its duration, so stage
functions deep in the call tree find it without a parameter threaded through every call.

Stage code called outside any compile (tests, benchmarks that time one stage) reads the
process's default set, `default_memos()`, unless a caller made another current with
`CompileMemos.active()`. The module-level `compile_*` functions compile over that same
current set, so direct calls and one-call compiles memoize as they always have.

Process-wide caches of pure helpers stay where they are (`functools` caches of Unicode
classes, format regexes and UTF-8 range automata): they hold no budget-bound result, and
no outcome depends on whether they are warm.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from fsmcompile.memo import StageMemo
from fsmcompile.vocabulary import Vocabulary

if TYPE_CHECKING:
    from fsmcompile.artifact import AnyIndex
    from fsmcompile.automaton.fragment import Fragment
    from fsmcompile.tables.byte_dfa import ByteDFA

__all__ = ["DEFAULT_MEMO_BYTES", "CompileMemos", "KeptFragments", "current_memos", "default_memos"]

DEFAULT_MEMO_BYTES = 512 << 20
"""What a compiler's memos may hold together: whole indexes take half, lark analyses a
quarter, built automata and lexing-conflict witnesses an eighth each."""

_CONFLICT_ENTRY_BYTES = 256
"""A lexing-conflict entry's size, key included: a tuple of 16-byte digests and a short
witness (their exact size is not worth measuring on every store)."""


def array_bytes(value: object) -> int:
    """The bytes of the arrays in `value`, a dataclass, tuple or array, nested ones
    included (what a memo entry holds that matters). A vocabulary counts nothing: the
    entries share it with every index made for it."""
    total = 0
    pending: list[object] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, np.ndarray):
            total += int(item.nbytes)
        elif isinstance(item, tuple | list):
            pending.extend(item)
        elif dataclasses.is_dataclass(item) and not isinstance(item, Vocabulary | type):
            pending.extend(getattr(item, f.name) for f in dataclasses.fields(item))
    return total


def _conflict_bytes(value: tuple[bytes, int] | None) -> int:
    return _CONFLICT_ENTRY_BYTES + (len(value[0]) if value is not None else 0)


class KeptFragments:
    """Automaton fragments of shared sub-trees (`automaton.build.keep_built`), by the
    sub-tree's id, with the byte classes each was built over: a later build re-expresses
    one over its own classes instead of building it again. The ids are safe keys: a kept
    sub-tree is held for the life of the process."""

    def __init__(self) -> None:
        self._fragments: dict[int, tuple[Fragment, npt.NDArray[np.int32]]] = {}
        self._lock = threading.Lock()

    def get(self, node_id: int) -> tuple[Fragment, npt.NDArray[np.int32]] | None:
        with self._lock:
            return self._fragments.get(node_id)

    def put(self, node_id: int, fragment: Fragment, class_of_byte: npt.NDArray[np.int32]) -> None:
        with self._lock:
            self._fragments[node_id] = (fragment, class_of_byte)

    def clear(self) -> None:
        with self._lock:
            self._fragments.clear()

    def __len__(self) -> int:
        return len(self._fragments)


class CompileMemos:
    """One compiler's memos, one per memoized stage, bounded together by `memo_bytes`.

    Attributes:
        indexes: whole indexes by `compile_stages.language_key`: specs that lower to the
            same language (schemas that differ only in annotations) compile once.
        dfas: built automata by the content of their tree (`automaton.build.build_dfa`):
            generated grammars rebuild the same terminals for every schema.
        analyses: lark's analysis by grammar text (`grammar.loading`).
        conflicts: lexing-conflict witnesses by the automata's digests
            (`grammar.from_rules`): schemas of one API share most of their pairs.
        kept: automata of shared sub-trees, re-expressed over each build's byte classes.

    Args:
        memo_bytes: the bound on what the memos hold together (> 0); each memo gets its
            share (`DEFAULT_MEMO_BYTES` says which), and a result larger than a quarter of
            its memo's share is returned but not kept.

    Raises:
        TypeError: `memo_bytes` is not an int.
        ValueError: `memo_bytes` is not positive.
    """

    def __init__(self, memo_bytes: int = DEFAULT_MEMO_BYTES) -> None:
        if isinstance(memo_bytes, bool) or not isinstance(memo_bytes, int):
            raise TypeError(f"memo_bytes must be an int, not {type(memo_bytes).__name__}")
        if memo_bytes <= 0:
            raise ValueError(f"memo_bytes must be positive, not {memo_bytes}")
        self.memo_bytes = memo_bytes
        self.indexes: StageMemo[bytes, AnyIndex] = StageMemo(
            32, max_bytes=memo_bytes // 2, size_of=array_bytes
        )
        self.dfas: StageMemo[bytes, ByteDFA] = StageMemo(
            4096, max_bytes=memo_bytes // 8, size_of=array_bytes
        )
        self.analyses: StageMemo[tuple[str, str, bool, bool, tuple[str, ...]], Any] = StageMemo(
            64, max_bytes=memo_bytes // 4, size_of=array_bytes
        )
        # 65536 entries: a WashingtonPost schema's grammar checks 11k pairs, and with
        # 8192 each such compile pushed out the last one's pairs before reading them
        # (wp_9 after wp_8: 11.7k pairs computed; with room for both, 1.5k).
        self.conflicts: StageMemo[tuple[bytes, ...], tuple[bytes, int] | None] = StageMemo(
            65536, max_bytes=memo_bytes // 8, size_of=_conflict_bytes
        )
        self.kept = KeptFragments()

    def stage_memos(self) -> tuple[StageMemo[Any, Any], ...]:
        """The bounded memos, for counters and sizes (`hits`, `misses`, `len`)."""
        return (self.indexes, self.dfas, self.analyses, self.conflicts)

    def clear(self) -> None:
        """Forget every result and reset the counters: the next compile of any spec pays
        its full cost."""
        for memo in self.stage_memos():
            memo.clear()
        self.kept.clear()

    @contextlib.contextmanager
    def active(self) -> Iterator[CompileMemos]:
        """Make this set the one stage code reads (`current_memos`) until the block ends,
        in this thread (and the tasks it starts with a copy of its context)."""
        token = _current.set(self)
        try:
            yield self
        finally:
            _current.reset(token)


_current: ContextVar[CompileMemos | None] = ContextVar("fsmcompile_compile_memos", default=None)
_default_lock = threading.Lock()
_default: list[CompileMemos] = []


def default_memos() -> CompileMemos:
    """The process's default memo set, made on first use: the set the module-level
    `compile_*` functions share, and the one stage code reads outside a compile."""
    if not _default:
        with _default_lock:
            if not _default:
                _default.append(CompileMemos())
    return _default[0]


def current_memos() -> CompileMemos:
    """The memo set of the compile running in this context, else `default_memos()`."""
    found = _current.get()
    return found if found is not None else default_memos()
