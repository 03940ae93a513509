"""Building a lazy index's full eager index once: on demand, or on a daemon thread.

`LazyTokenIndex` and `LazyGrammarIndex` both serve rows before their full index exists
and build it at most once; this is that one piece of bookkeeping, so the two behave alike
(a completion that fails leaves the lazy index serving, and a later call retries).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from fsmcompile.errors import FsmcompileError

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Completion(Generic[T]):
    """The full index a `completer` builds, built once (`build`), or None while not.

    Thread-safe: concurrent `build` calls run the completer once; the lazy index's own
    rows keep being served meanwhile (this lock is apart from any row lock).
    """

    __slots__ = ("_completer", "_done", "_lock")

    def __init__(self, completer: Callable[[], T] | None) -> None:
        self._completer = completer
        self._done: list[T] = []
        self._lock = threading.Lock()

    @property
    def done(self) -> T | None:
        """The full index once built, else None."""
        return self._done[0] if self._done else None

    def build(self) -> T:
        """The full index, built on the first call.

        Raises:
            ValueError: there is no completer.
            BudgetExceededError: the completer's budget ran out (a later call retries).
        """
        if self._done:
            return self._done[0]
        if self._completer is None:
            raise ValueError("this lazy index has no completer: it cannot build its full index")
        with self._lock:
            if not self._done:
                self._done.append(self._completer())
        return self._done[0]

    def in_background(self, what: str) -> threading.Thread:
        """Start a daemon thread that runs `build`; a failure (its budget ran out) is
        logged with `what`, and the lazy index goes on serving."""

        def run() -> None:
            try:
                self.build()
            except FsmcompileError as exc:
                logger.warning("completing %s failed: %s", what, exc)

        thread = threading.Thread(target=run, name="fsmcompile-complete", daemon=True)
        thread.start()
        return thread
