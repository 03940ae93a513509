"""The garbage collector is paused during compiles and left as the caller had it."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from fsmcompile import Compiler, collector, compile_regex
from fsmcompile.collector import collector_paused


@pytest.fixture
def collector_restored() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.parametrize("enabled", [True, False])
def test_a_compile_pauses_the_collector_and_leaves_it_as_it_was(
    gpt2, monkeypatch, collector_restored, enabled: bool
) -> None:
    from fsmcompile import compile_stages

    seen: list[bool] = []
    build = compile_stages.build_token_index

    def watched(*args, **kwargs):
        seen.append(gc.isenabled())
        return build(*args, **kwargs)

    monkeypatch.setattr(compile_stages, "build_token_index", watched)
    gc.enable() if enabled else gc.disable()
    # Its own memos: a real build, not the other parametrization's memoized index.
    Compiler(gpt2, cache=False).compile_regex(r"[a-z]{2,5}")
    assert seen == [False]
    assert gc.isenabled() is enabled


def test_a_failing_compile_resumes_the_collector(gpt2, collector_restored) -> None:
    from fsmcompile.errors import SpecError

    gc.enable()
    with pytest.raises(SpecError):
        compile_regex("(unclosed", gpt2, cache=False)
    assert gc.isenabled()


def test_overlapping_pauses_resume_after_the_last(collector_restored) -> None:
    gc.enable()
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused():
            inside.set()
            release.wait(timeout=10)

    thread = threading.Thread(target=other)
    thread.start()
    assert inside.wait(timeout=10)
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's pause still holds
    release.set()
    thread.join(timeout=10)
    assert gc.isenabled()


def test_a_compile_leaves_no_digests_holding_its_tree(gpt2) -> None:
    # Digests hold their IR nodes alive; past the compile they would only be more
    # containers for every full pass of the collector to walk.
    from fsmcompile.ir import nodes as ir

    compile_regex(r"(ab|cd){2,9}x", gpt2, cache=False)
    assert not ir._DIGESTS


@pytest.mark.parametrize("enabled", [True, False])
def test_concurrent_compiles_in_threads_share_one_pause(
    gpt2, collector_restored, enabled: bool
) -> None:
    # vLLM compiles grammars in a thread pool: the collector must stay paused while any
    # compile runs and come back (as it was before the first) only after the last.
    compiler = Compiler(gpt2, cache=False)  # fresh memos, shared by the threads
    gc.enable() if enabled else gc.disable()
    workers = 6
    start = threading.Barrier(workers + 1)
    errors: list[BaseException] = []

    def compile_one(k: int) -> None:
        try:
            start.wait(timeout=30)
            compiler.compile_regex(rf"[a-z]{{{k + 1},{k + 9}}}x{k}")
        except BaseException as exc:  # reported below, on the main thread
            errors.append(exc)

    threads = [threading.Thread(target=compile_one, args=(k,)) for k in range(workers)]
    for thread in threads:
        thread.start()
    seen_enabled_while_running = False
    start.wait(timeout=30)
    while any(thread.is_alive() for thread in threads):
        with collector._lock:
            if collector._active and gc.isenabled():
                seen_enabled_while_running = True
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert not seen_enabled_while_running
    assert gc.isenabled() is enabled
