"""The size and time budget every automaton construction checks before it grows.

A spec such as `(a|b){0,100000}` inside an intersection can ask for billions of states.
Constructions call `reserve` with the size they are about to allocate (before the numpy
array exists) and `tick` inside their state loops, so an explosive spec ends in a
`BudgetExceededError` within milliseconds of the limit instead of a hang or an OOM. The C
walks of `native/subset.c` check the same limits themselves and, where one stops, the same call
is made for it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from fsmcompile.errors import BudgetExceededError

_TICK_EVERY = 64  # Python-loop iterations between clock reads (~50 ns each, far below 1 ms)
_SET_FACTOR = 4  # subset constructions may hold 4 x max_states member states in total


class Budget:
    """Limits for one `build_dfa` call: states per automaton and a monotonic deadline."""

    __slots__ = ("max_states", "deadline", "started", "_ticks", "_set_members")

    def __init__(self, max_states: int, deadline: float | None) -> None:
        self.max_states = max_states
        self.deadline = deadline
        self.started = time.monotonic()
        self._ticks = 0
        self._set_members = 0

    def reserve(self, num_states: int, what: str) -> None:
        """Raise if an automaton of `num_states` states would break the state budget."""
        if num_states > self.max_states:
            raise BudgetExceededError(
                f"{what} needs more than max_states={self.max_states} automaton states "
                f"(at least {num_states}); raise max_states or bound the repetition counts",
                limit="max_states",
                value=self.max_states,
            )
        self.check_time()

    def reserve_set(self, members: int, what: str) -> None:
        """Count the members of one new subset-construction state.

        Nested counts (`(x{0,1000}){0,1000}`) make each subset state hold thousands of
        member states; memory runs out long before the state count does. The total is
        capped at 4 x max_states (about a second of Python work) and reported as a
        max_states overrun.
        """
        self._set_members += members
        if self._set_members > _SET_FACTOR * self.max_states:
            raise BudgetExceededError(
                f"{what} needs state sets with more than {_SET_FACTOR} x max_states="
                f"{self.max_states} members in total (nested or overlapping repetition "
                f"counts); raise max_states or bound the repetition counts",
                limit="max_states",
                value=self.max_states,
            )

    def set_members_left(self) -> int:
        """How many more members `reserve_set` allows: the C walks (`native/subset.c`) count
        against this and then report their total in one `reserve_set` call."""
        return _SET_FACTOR * self.max_states - self._set_members

    def check_time(self) -> None:
        """Raise once the deadline has passed; `value` is the seconds spent so far."""
        if self.deadline is not None:
            now = time.monotonic()
            if now > self.deadline:
                # The time since this construction began says nothing of the compile's
                # own spending, which its earlier stages took: name the stage only.
                raise BudgetExceededError(
                    "compile timed out while building an automaton; raise timeout_s or "
                    "simplify the spec",
                    limit="timeout_s",
                    value=now - self.started,
                )

    def tick(self) -> None:
        """Cheap periodic deadline check for state loops (`native/subset.c` reads the clock as
        often: every 64th state walked)."""
        self._ticks += 1
        if self._ticks >= _TICK_EVERY:
            self._ticks = 0
            self.check_time()


_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("fsmcompile_deadline", default=None)
"""The running compile's deadline, for stages that take no budget argument: tree walks
(`walk.fold`, `ir.content_key`) and the regex parser run inside every stage, and
threading a deadline through each of their callers would touch most of the compiler."""


@contextmanager
def compile_deadline(deadline: float | None) -> Iterator[None]:
    """Make `deadline` (a `time.monotonic()` value) the one `check_deadline` reads, in
    this thread or task, for the duration of the block."""
    token = _DEADLINE.set(None if deadline is None else (deadline, time.monotonic()))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def seconds_left() -> float | None:
    """Seconds until the running compile's deadline (`compile_deadline`), None if none."""
    running = _DEADLINE.get()
    return None if running is None else running[0] - time.monotonic()


def check_time_left(needed_s: float, what: str) -> None:
    """Raise now if the running compile's deadline leaves less than `needed_s`: for steps
    that cannot be interrupted once begun (another library's parser), whose cost is
    estimated from the input's size before they start."""
    running = _DEADLINE.get()
    if running is not None and time.monotonic() + needed_s > running[0]:
        check_deadline(what)  # past already: say so, not what is left
        raise BudgetExceededError(
            f"compile would time out {what} (about {needed_s:.1f} s of work, past the "
            "deadline); raise timeout_s or shorten the spec",
            limit="timeout_s",
            value=time.monotonic() - running[1],
        )


def check_deadline(what: str) -> None:
    """Raise once the running compile's deadline (`compile_deadline`) has passed; `value`
    is the seconds spent since the block began. Callers check every few thousand steps,
    so the clock read costs nothing measurable."""
    running = _DEADLINE.get()
    if running is not None and time.monotonic() > running[0]:
        raise BudgetExceededError(
            f"compile timed out while {what}; raise timeout_s or simplify the spec",
            limit="timeout_s",
            value=time.monotonic() - running[1],
        )
