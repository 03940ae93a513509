"""The subset and product constructions (C walks, `native/subset.c`) against their Python
definition (`subset_reference.py`): the same fragment state for state (same numbering,
same accepting flags) and the same budget errors, on random fragments and on the ones
real regexes and JSON Schemas build."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from subset_reference import (
    product_intersection_reference,
    product_pair_reference,
    product_union_reference,
    subset_concat_reference,
    subset_repeat_reference,
)

from fsmcompile import _native
from fsmcompile.automaton import compose, subset
from fsmcompile.automaton.fragment import Fragment
from fsmcompile.budget import Budget
from fsmcompile.compile_memos import CompileMemos
from fsmcompile.compiler import build_machine
from fsmcompile.errors import BudgetExceededError
from fsmcompile.frontend.json_schema import JsonOptions, schema_to_ir
from fsmcompile.frontend.regex.parser import parse_regex

Construction = Callable[[Budget], Fragment]
"""One construction on fixed inputs, run against a budget."""


def outcome(run: Construction, budget: Budget) -> tuple[Any, ...]:
    """What a construction gives: its arrays, or the budget error (its message, minus
    the seconds of a timeout, its limit and value), and the set members charged."""
    try:
        frag = run(budget)
    except BudgetExceededError as exc:
        value = None if exc.limit == "timeout_s" else exc.value
        return ("error", str(exc), exc.limit, value)
    assert frag.trans.dtype == np.int32 and frag.accepting.dtype == np.bool_
    return (
        "fragment",
        frag.trans.shape,
        frag.trans.tobytes(),
        frag.accepting.tobytes(),
        budget.set_members_left(),
    )


def assert_same(c_run: Construction, ref_run: Construction, make: Callable[[], Budget]) -> None:
    assert outcome(c_run, make()) == outcome(ref_run, make())


def roomy() -> Budget:
    return Budget(10**7, None)


# ---- random fragments ---------------------------------------------------------------------


@st.composite
def fragments(draw: st.DrawFn, num_classes: int, max_size: int = 6) -> Fragment:
    """Any table: holes (-1), self-loops, accepting starts, unreachable and dead-end states."""
    n = draw(st.integers(1, max_size))
    cells = draw(
        st.lists(st.integers(-1, n - 1), min_size=n * num_classes, max_size=n * num_classes)
    )
    accepting = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    trans = np.array(cells, dtype=np.int32).reshape(n, num_classes)
    return Fragment(trans, np.array(accepting, dtype=np.bool_))


@st.composite
def operands(draw: st.DrawFn, count: int | None = None) -> list[Fragment]:
    num_classes = draw(st.integers(1, 5))
    k = count if count is not None else draw(st.integers(2, 5))
    return [draw(fragments(num_classes)) for _ in range(k)]


def repeat_item(frag: Fragment, nullable: bool) -> Fragment:
    """`frag` with a start nothing enters (as `compose.repeat` makes it)."""
    trans = np.where(frag.trans == 0, -1, frag.trans).astype(np.int32)
    accepting = frag.accepting.copy()
    accepting[0] = nullable
    return Fragment(trans, accepting)


@settings(max_examples=300, deadline=None)
@given(operands(2), st.integers(1, 40))
def test_product_pair_matches_reference(parts: list[Fragment], max_states: int) -> None:
    left, right = parts
    assert_same(
        lambda b: subset._product_pair(left, right, b),
        lambda b: product_pair_reference(left, right, b),
        roomy,
    )
    assert_same(
        lambda b: subset._product_pair(left, right, b),
        lambda b: product_pair_reference(left, right, b),
        lambda: Budget(max_states, None),
    )


@settings(max_examples=200, deadline=None)
@given(operands())
def test_product_intersection_matches_reference(parts: list[Fragment]) -> None:
    assert_same(
        lambda b: subset.product_intersection(parts, b),
        lambda b: product_intersection_reference(parts, b),
        roomy,
    )


@settings(max_examples=300, deadline=None)
@given(operands(), st.integers(1, 12))
def test_product_union_matches_reference(parts: list[Fragment], max_states: int) -> None:
    for make in (roomy, lambda: Budget(max_states, None)):
        assert_same(
            lambda b: subset.product_union(parts, b),
            lambda b: product_union_reference(parts, b),
            make,
        )


@settings(max_examples=300, deadline=None)
@given(operands(2), st.integers(1, 12))
def test_subset_concat_matches_reference(parts: list[Fragment], max_states: int) -> None:
    first, second = parts
    for make in (roomy, lambda: Budget(max_states, None)):
        assert_same(
            lambda b: subset.subset_concat(first, second, b),
            lambda b: subset_concat_reference(first, second, b),
            make,
        )


@settings(max_examples=300, deadline=None)
@given(
    operands(1),
    st.booleans(),
    st.integers(0, 4),
    st.one_of(st.none(), st.integers(1, 6)),
    st.integers(1, 12),
)
def test_subset_repeat_matches_reference(
    parts: list[Fragment], raw: bool, lo: int, hi: int | None, max_states: int
) -> None:
    # Raw tables too: the walk must agree even where the preconditions do not hold.
    item = parts[0] if raw else repeat_item(parts[0], nullable=False)
    # 2000 states are plenty for these (a raw table can blow up; both stop alike then).
    for make in (lambda: Budget(2000, None), lambda: Budget(max_states, None)):
        assert_same(
            lambda b: subset.subset_repeat(item, lo, hi, b),
            lambda b: subset_repeat_reference(item, lo, hi, b),
            make,
        )


# ---- fragments of real specs --------------------------------------------------------------

REGEXES = [
    r"\d+\d",
    r"(a|ab)*",
    r"cat|car|cart|dog",
    r"(a|b)*a(a|b){6}",
    r"[a-z]+@[a-z]+(\.[a-z]+)*",
    r"(\d{1,3}\.){3}\d{1,3}",
    r"(ab|a)(bc|c)*d?",
    r"([a-f0-9]{2}:){5}[a-f0-9]{2}",
    r"(x|xy|xyz){2,5}",
    r"(é|e|ée)+.",
    r"[^\"]{0,40}x[^\"]*",
    r"(a{3})*|(a{5})*",
    r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?",
    r"(ab|aba){0,300}c",  # a repetition of 901 states, past reserve points
    r"(xyz){0,100}(a|b)*a(a|b){9}",  # a concatenation of 2**10 subset states after a chain
]

SCHEMAS: list[dict[str, Any]] = [
    {"type": "string", "pattern": "^[A-Z]{2}-\\d{3,5}$", "minLength": 6},
    {"type": "string", "format": "email", "maxLength": 40},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "uri"},
    {"type": "string", "format": "ipv6"},
    {"enum": ["cat", "car", "cart", 12, 1.5, None, "dog"]},
    {"type": "string", "minLength": 3, "maxLength": 8, "not": {"enum": ["abc", "null"]}},
    {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": -5, "maximum": 1234},
            "name": {"type": "string", "pattern": "^[a-z]+(_[a-z]+)*$"},
            "tags": {"type": "array", "items": {"enum": ["a", "ab", "abc"]}, "maxItems": 3},
        },
        "required": ["id"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "patternProperties": {"^x-[a-z]+$": {"type": "string"}},
        "additionalProperties": {"type": "number"},
    },
    {"type": "object", "propertyNames": {"pattern": "^[a-c]{1,3}$"}, "maxProperties": 2},
    {  # recursive: built as a grammar, terminal by terminal
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "format": "date"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
            }
        },
        "$ref": "#/$defs/node",
    },
]


REAL: dict[str, Callable[..., Fragment]] = {
    "product_union": subset.product_union,
    "subset_concat": subset.subset_concat,
    "subset_repeat": subset.subset_repeat,
    "_product_pair": subset._product_pair,
}
REFERENCE: dict[str, Callable[..., Fragment]] = {
    "product_union": product_union_reference,
    "subset_concat": subset_concat_reference,
    "subset_repeat": subset_repeat_reference,
    "_product_pair": product_pair_reference,
}


def _captured(monkeypatch: pytest.MonkeyPatch, build: Callable[[], object]) -> list[Any]:
    """The constructions `build` makes (name, inputs), each checked against the reference
    as it is made, over fresh memos so that every one is made (and none made by the
    checked constructions outlives the check)."""
    calls: list[Any] = []

    def checked(name: str) -> Callable[..., Fragment]:
        real, ref = REAL[name], REFERENCE[name]

        def run(*args: Any) -> Fragment:
            inputs, budget = args[:-1], args[-1]
            calls.append((name, inputs))
            assert_same(lambda b: real(*inputs, b), lambda b: ref(*inputs, b), roomy)
            return real(*inputs, budget)

        return run

    for name in ("product_union", "subset_concat", "subset_repeat"):
        monkeypatch.setattr(compose, name, checked(name))
    monkeypatch.setattr(subset, "_product_pair", checked("_product_pair"))
    with CompileMemos().active():
        build()
    return calls


@pytest.fixture(scope="module")
def real_calls() -> Iterator[list[Any]]:
    """Every construction the regexes and schemas above make, checked as made."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        calls: list[Any] = []
        for pattern in REGEXES:
            node = parse_regex(pattern)
            calls += _captured(
                monkeypatch, lambda n=node: build_machine(n, {}, max_states=200_000, deadline=None)
            )
        for schema in SCHEMAS:
            lowered = schema_to_ir(schema, options=JsonOptions())
            calls += _captured(
                monkeypatch,
                lambda low=lowered: build_machine(
                    low.node, low.rules, max_states=200_000, deadline=None
                ),
            )
        yield calls


def test_real_specs_make_every_construction(real_calls: list[Any]) -> None:
    names = {name for name, _ in real_calls}
    assert names == {"product_union", "subset_concat", "subset_repeat", "_product_pair"}


@pytest.mark.parametrize("max_states", [1, 3, 10, 40, 255, 256, 257, 600, 4096])
def test_real_constructions_break_the_state_budget_alike(
    real_calls: list[Any], max_states: int
) -> None:
    for name, inputs in real_calls:
        real, ref = REAL[name], REFERENCE[name]
        assert_same(
            lambda b, f=real, i=inputs: f(*i, b),
            lambda b, f=ref, i=inputs: f(*i, b),
            lambda: Budget(max_states, None),
        )


def _operand_states(inputs: tuple[Any, ...]) -> int:
    frags = [x for x in inputs if isinstance(x, Fragment)]
    frags += [f for x in inputs if isinstance(x, list) for f in x]
    return sum(f.num_states for f in frags)


@pytest.mark.parametrize("offset", [-1, 0, 1, 255, 256, 257, 600])
def test_real_constructions_break_a_budget_near_their_size_alike(
    real_calls: list[Any], offset: int
) -> None:
    """max_states just around the operands' size: concatenations and unions count their
    state reserves from it, so these are the budgets their walks stop on."""
    for name, inputs in real_calls:
        real, ref = REAL[name], REFERENCE[name]
        max_states = max(1, _operand_states(inputs) + offset)
        assert_same(
            lambda b, f=real, i=inputs: f(*i, b),
            lambda b, f=ref, i=inputs: f(*i, b),
            lambda m=max_states: Budget(m, None),
        )


# ---- budgets ---------------------------------------------------------------------------------


def cycle(length: int, num_classes: int = 2) -> Fragment:
    """A cycle of `length` states on class 0, every state accepting: products of coprime
    cycles have length x length states."""
    trans = np.full((length, num_classes), -1, dtype=np.int32)
    trans[:, 0] = (np.arange(length) + 1) % length
    return Fragment(trans, np.ones(length, dtype=np.bool_))


def windows(width: int) -> Fragment:
    """`(a|b)*a(a|b){width}` as one NFA-like overlap: its repetition and concatenation
    subset states grow as 2**width."""
    return compose.concat(
        [
            compose.repeat(_ab(), 0, None, Budget(10**7, None)),
            _letter(0),
            compose.repeat(_ab(), width, width, Budget(10**7, None)),
        ],
        2,
        Budget(10**7, None),
    )


def _letter(cls: int) -> Fragment:
    trans = np.full((2, 2), -1, dtype=np.int32)
    trans[0, cls] = 1
    return Fragment(trans, np.array([False, True]))


def _ab() -> Fragment:
    trans = np.array([[1, 1], [-1, -1]], dtype=np.int32)
    return Fragment(trans, np.array([False, True]))


@pytest.mark.parametrize("max_states", [100, 255, 256, 300, 322, 323, 324, 10_000])
def test_product_pair_state_budget_matches_reference(max_states: int) -> None:
    left, right = cycle(17), cycle(19)  # 323 states, past one reserve point
    assert_same(
        lambda b: subset._product_pair(left, right, b),
        lambda b: product_pair_reference(left, right, b),
        lambda: Budget(max_states, None),
    )


def test_product_pair_past_deadline_matches_reference() -> None:
    left, right = cycle(17), cycle(19)
    got = outcome(
        lambda b: subset._product_pair(left, right, b), Budget(10**6, time.monotonic() - 1)
    )
    want = outcome(
        lambda b: product_pair_reference(left, right, b), Budget(10**6, time.monotonic() - 1)
    )
    assert got == want and got[2] == "timeout_s"


@pytest.mark.parametrize("length", [63, 64, 65])
def test_deadline_is_read_every_64_states_walked_as_in_python(length: int) -> None:
    """`Budget.tick` reads the clock on every 64th state: with a past deadline a union
    of 63 states (no reserve before its end) finishes, and one of 64 stops."""
    parts = [cycle(length), cycle(1)]
    got = outcome(lambda b: subset.product_union(parts, b), Budget(10**6, time.monotonic() - 1))
    want = outcome(lambda b: product_union_reference(parts, b), Budget(10**6, time.monotonic() - 1))
    assert got == want
    assert got[0] == ("fragment" if length < 64 else "error")


def test_every_construction_past_deadline_matches_reference(real_calls: list[Any]) -> None:
    """A deadline already past stops each construction where the Python loop's first clock
    read would (64 states walked, or a reserve), or lets a small one finish."""
    timed_out = 0
    for name, inputs in real_calls:
        real, ref = REAL[name], REFERENCE[name]
        got = outcome(lambda b, f=real, i=inputs: f(*i, b), Budget(10**7, time.monotonic() - 1))
        want = outcome(lambda b, f=ref, i=inputs: f(*i, b), Budget(10**7, time.monotonic() - 1))
        assert got == want, name
        timed_out += got[0] == "error"
    assert timed_out


@pytest.mark.parametrize("max_states", [2, 5, 20, 100, 256, 1000])
def test_subset_constructions_member_and_state_budgets_match_reference(max_states: int) -> None:
    """(a|b)*a(a|b){8}: concatenation and repetition subset states with many members."""
    left = compose.repeat(_ab(), 0, None, Budget(10**7, None))
    right = compose.concat(
        [_letter(0), compose.repeat(_ab(), 8, 8, Budget(10**7, None))], 2, Budget(10**7, None)
    )
    assert_same(
        lambda b: subset.subset_concat(left, right, b),
        lambda b: subset_concat_reference(left, right, b),
        lambda: Budget(max_states, None),
    )
    body = windows(3)
    item = repeat_item(compose.concat([_letter(1), body], 2, Budget(10**7, None)), False)
    for lo, hi in ((0, None), (2, None), (1, 4), (3, 9)):
        assert_same(
            lambda b, lo=lo, hi=hi: subset.subset_repeat(item, lo, hi, b),
            lambda b, lo=lo, hi=hi: subset_repeat_reference(item, lo, hi, b),
            lambda: Budget(max_states, None),
        )


def test_members_budget_is_shared_with_earlier_constructions() -> None:
    """The C walk counts against what the budget has left, not against a fresh budget."""
    parts = [windows(4), windows(5), windows(6)]
    for spent in (0, 100, 190, 199):
        got_budget, want_budget = Budget(50, None), Budget(50, None)
        if spent:
            got_budget.reserve_set(spent, "earlier")
            want_budget.reserve_set(spent, "earlier")
        got = outcome(lambda b: subset.product_union(parts, b), got_budget)
        want = outcome(lambda b: product_union_reference(parts, b), want_budget)
        assert got == want


# ---- bad input -------------------------------------------------------------------------------


def test_walks_reject_tables_naming_no_state() -> None:
    limits = (100, float("inf"), 400, 0)
    good = np.zeros((2, 3), dtype=np.int32)
    bad = np.array([[0, 2, -1], [0, 0, 0]], dtype=np.int32)
    flags = np.zeros(2, dtype=np.bool_)
    with pytest.raises(ValueError, match="outside"):
        _native.product_pair(good, bad, flags, flags, limits)
    with pytest.raises(ValueError, match="int32"):
        _native.product_pair(good.astype(np.int64), good, flags, flags, limits)
    with pytest.raises(ValueError, match="flags"):
        _native.product_union(good, np.zeros(3, dtype=np.bool_), np.array([0], np.int32), limits)
    with pytest.raises(ValueError, match="outside"):
        _native.subset_concat(
            good, good, flags, flags, np.array([2], np.int32), np.array([0], np.int32), limits
        )
    with pytest.raises(ValueError, match="out of range"):
        _native.subset_repeat(good, flags, -1, 3, limits)


def test_concat_walk_stops_at_a_deadline_passed_while_walking() -> None:
    """`subset_concat` checks the clock before it walks (`Budget.reserve`), so only a
    deadline that passes during the walk stops the walk itself: a past one given to it."""
    left = compose.repeat(_ab(), 0, None, Budget(10**7, None))
    right = compose.concat(
        [_letter(0), compose.repeat(_ab(), 9, 9, Budget(10**7, None))], 2, Budget(10**7, None)
    )
    (a, b), _ = subset.compress_columns([left.trans, right.trans])
    rows = np.nonzero(left.accepting)[0]
    seeds = np.nonzero((left.trans[rows] >= 0) & (right.trans[0] >= 0)[None, :])
    seed_a = np.ascontiguousarray(left.trans[rows[seeds[0]], seeds[1]], dtype=np.int32)
    seed_b = np.ascontiguousarray(right.trans[0][seeds[1]], dtype=np.int32)
    base = left.num_states + right.num_states
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    args = (a, b, left.accepting, right.accepting, seed_a, seed_b)
    done = _native.subset_concat(*args, (10**6, float("inf"), 10**7, base))
    assert done[2] == 0 and len(done[1]) > 256
    stopped = _native.subset_concat(*args, (10**6, time.monotonic() - 1, 10**7, base))
    assert stopped[2] == 3  # at the first reserve: the first new state
    assert len(stopped[1]) == 0
