"""Bottom-up evaluation over a DAG without Python recursion.

IR trees get as deep as a schema is long: an object's optional members are a chain in
which each member chooses between itself and the rest, a few levels per member, so an
object of a few hundred optional members is a thousand levels deep. A walker that
recursed once per level would stop at Python's recursion limit on such legitimate
input; the walkers built on `fold` and `run` keep an explicit stack instead.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Sequence
from typing import Any, TypeVar

from fsmcompile.budget import check_deadline

STEPS_PER_CHECK = 4096
"""Walk steps between deadline checks (`check_deadline`): a few ms of work at most."""

Item = TypeVar("Item")
Result = TypeVar("Result")


def fold(
    root: Item,
    parts: Callable[[Item], Sequence[Item]],
    combine: Callable[[Item, list[Result]], Result],
    memo: dict[Hashable, Result],
    key: Callable[[Item], Hashable] = id,
) -> Result:
    """The result of `root`, where an item's result is `combine(item, results of its
    parts)`, each distinct item (by `key`) combined once and kept in `memo`.

    Parts are combined in the order a recursive walk would finish them (depth first,
    in `parts` order), so a `combine` with side effects sees the same sequence. `parts`
    must not lead back to an item being evaluated (the items form a DAG). `memo` may
    hold results from an earlier call; they are reused. Keys by `id` are only sound
    while the items stay alive: the caller holds them (a tree it was given).
    """
    found = key(root)
    if found in memo:
        return memo[found]
    # An item waiting for its parts carries them: `parts` is asked once per item.
    stack: list[tuple[Item, Sequence[Item] | None]] = [(root, None)]
    steps = 0
    while stack:
        steps += 1
        if steps % STEPS_PER_CHECK == 0:
            check_deadline("walking the spec's tree")
        item, waiting = stack.pop()
        found = key(item)
        if found in memo:
            continue
        if waiting is not None:
            memo[found] = combine(item, [memo[key(part)] for part in waiting])
            continue
        below = parts(item)
        stack.append((item, below))
        stack.extend([(part, None) for part in reversed(below) if key(part) not in memo])
    return memo[key(root)]


Call = Generator["Call[Any]", Any, Result]
"""A recursive function written as a generator for `run`: each `yield call` is a nested
call, resumed with what that call returns."""


def run(call: Call[Result]) -> Result:
    """What `call` returns, its nested calls (`Call`) run from an explicit stack rather
    than Python's: for walks whose shape is too irregular for `fold`. Calls run, and
    exceptions propagate through the callers, exactly as the recursive version's would.
    The compile's deadline is checked every `STEPS_PER_CHECK` steps, as `fold` does: a
    walk that meets a shared sub-tree once per path can take exponential time."""
    stack: list[Call[Any]] = [call]
    value: Any = None
    error: BaseException | None = None
    steps = 0
    while True:
        steps += 1
        if steps % STEPS_PER_CHECK == 0 and error is None:
            try:
                check_deadline("walking the spec's tree")
            except BaseException as exc:  # thrown into the running call, as its own would be
                value, error = None, exc
        try:
            if error is None:
                nested = stack[-1].send(value)
            else:
                nested = stack[-1].throw(error)
        except StopIteration as done:
            stack.pop()
            if not stack:
                return done.value  # type: ignore[no-any-return]
            value, error = done.value, None
        except BaseException as exc:
            stack.pop()
            if not stack:
                raise
            value, error = None, exc
        else:
            stack.append(nested)
            value, error = None, None
