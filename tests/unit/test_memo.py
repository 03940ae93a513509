"""The stage memo: bounded, least recently used first, nothing half-stored."""

from __future__ import annotations

import pytest

from fsmcompile.memo import StageMemo


def test_memo_returns_the_stored_result_and_evicts_the_least_recently_used() -> None:
    memo: StageMemo[str, list[str]] = StageMemo(2)
    calls: list[str] = []

    def make(key: str) -> list[str]:
        calls.append(key)
        return [key]

    a = memo.get_or_make("a", lambda: make("a"))
    assert memo.get_or_make("a", lambda: make("a")) is a
    memo.get_or_make("b", lambda: make("b"))
    memo.get_or_make("a", lambda: make("a"))  # "a" is now the most recently used
    memo.get_or_make("c", lambda: make("c"))  # evicts "b"
    memo.get_or_make("a", lambda: make("a"))
    memo.get_or_make("b", lambda: make("b"))
    assert calls == ["a", "b", "c", "b"]
    assert len(memo) == 2
    assert (memo.hits, memo.misses) == (3, 4)


def test_memo_bounds_the_summed_size_and_skips_results_too_large_to_keep() -> None:
    memo: StageMemo[int, bytes] = StageMemo(100, max_bytes=100, size_of=len)
    for key in range(5):
        memo.get_or_make(key, lambda: b"x" * 20)
    assert len(memo) == 5
    memo.get_or_make(5, lambda: b"x" * 20)  # 120 bytes: the oldest goes
    assert len(memo) == 5
    big = memo.get_or_make(6, lambda: b"y" * 26)  # over a quarter of the bound
    assert big == b"y" * 26 and len(memo) == 5
    assert memo.get_or_make(6, lambda: b"z") == b"z"  # it was never stored


def test_memo_stores_nothing_when_making_fails_and_clears() -> None:
    memo: StageMemo[str, int] = StageMemo(4)

    def fail() -> int:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        memo.get_or_make("k", fail)
    assert memo.get_or_make("k", lambda: 1) == 1
    memo.clear()
    assert len(memo) == 0
    assert memo.get_or_make("k", lambda: 2) == 2
