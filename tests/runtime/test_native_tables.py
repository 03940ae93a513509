"""The C parser (`native/parser_*.c`) checks whatever tables it is handed: each broken
table below, handed straight to `_native.Parser` (no loader in between), ends in a
ValueError, never a crash or a hang. Each runs in a forked child, so a regression fails
one test instead of killing the run."""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from forked import outcome_in_child

from fsmcompile._native import Parser, fitting_rows, write_row
from fsmcompile.compiler import compile_json_schema
from fsmcompile.runtime.grammar_parser import parser_tables
from fsmcompile.runtime.grammar_tables import GrammarTables
from fsmcompile.runtime.parser_tables import ParserTables
from fsmcompile.tables.grammar_index import GrammarIndex

# Recursive, with a counted string and a context set: every table of the parser is used.
SCHEMA = {"type": "object", "properties": {"s": {"maxLength": 6}, "any": {}}}

Edit = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def index(gpt2: Any) -> GrammarIndex:
    built = compile_json_schema(SCHEMA, gpt2, cache=False)
    assert isinstance(built, GrammarIndex)
    return built


@pytest.fixture(scope="module")
def tables(index: GrammarIndex) -> ParserTables:
    grammar_tables = GrammarTables(index)
    return parser_tables(
        index, grammar_tables._sequences, grammar_tables.num_words, grammar_tables.eos_row
    )


def edited(tables: ParserTables, edit: Edit) -> ParserTables:
    """A copy of the parser's tables with `edit` applied to a dict of them by name (the
    arrays copied, so an edit never reaches the fixture)."""
    parts: dict[str, Any] = {}
    for field in dataclasses.fields(tables):
        value = getattr(tables, field.name)
        parts[field.name] = array("q", value) if isinstance(value, array) else value
        if isinstance(value, np.ndarray):
            parts[field.name] = value.copy()
    edit(parts)
    return ParserTables(**parts)


def set_item(name: str, at: int, value: int) -> Edit:
    def edit(parts: dict[str, Any]) -> None:
        parts[name][at] = value

    return edit


def first_reduction(parts: dict[str, Any]) -> int:
    """The rule of the first reduce action of the table."""
    action = parts["action"]
    return int(-action[np.flatnonzero(action < 0)[0]] - 1)


def pop_past_bottom(parts: dict[str, Any]) -> None:
    parts["rule_len"][first_reduction(parts)] = 1000


def swap_offsets(name: str, at: int) -> Edit:
    """Offsets `at` and `at + 1` out of order (an inner offset, not the last)."""

    def edit(parts: dict[str, Any]) -> None:
        offsets = parts[name]
        assert offsets[at] < offsets[at + 1], "pick a place where the offsets differ"
        offsets[at], offsets[at + 1] = offsets[at + 1], offsets[at]

    return edit


def past_end(name: str) -> Edit:
    def edit(parts: dict[str, Any]) -> None:
        parts[name][-1] += 1

    return edit


def origin_pair(change: Callable[[int, int], tuple[int, int]]) -> Edit:
    """The (lo, hi) runs of the first lexer state that has some, changed."""

    def edit(parts: dict[str, Any]) -> None:
        pairs = parts["origin_run"].reshape(-1, 2)
        state = int(np.flatnonzero(pairs[:, 0] < pairs[:, 1])[0])
        pairs[state] = change(int(pairs[state, 0]), int(pairs[state, 1]))

    return edit


def start_with_kill_row(parts: dict[str, Any]) -> None:
    """A context starting at a lexer state with a kill row: rows reading rows in a loop."""
    parts["context_start"][0] = int(np.flatnonzero(parts["state_kill"] >= 0)[0])


def shorter(name: str) -> Edit:
    def edit(parts: dict[str, Any]) -> None:
        parts[name] = parts[name][:-1].copy()

    return edit


def last_sequence(column: str, value: Callable[[int], int]) -> Edit:
    def edit(parts: dict[str, Any]) -> None:
        last = len(parts["seq_parent"]) - 1
        parts[column][last] = value(last)

    return edit


# (what is broken, the edit); every one must be refused at construction.
BROKEN_TABLES: list[tuple[str, Edit]] = [
    ("action shifts to no state", lambda p: p["action"].__setitem__(0, p["action"].size)),
    ("action reduces no rule", lambda p: p["action"].__setitem__(1, -p["rule_lhs"].size - 1)),
    ("action is INT32_MIN", set_item("action", 1, -(2**31))),
    ("goto leads to no state", lambda p: p["goto"].__setitem__(0, p["context_of_state"].size)),
    ("rule_lhs is no nonterminal", lambda p: p["rule_lhs"].__setitem__(0, p["num_nonterminals"])),
    ("rule_lhs is huge", set_item("rule_lhs", 0, 2**30)),
    ("rule_lhs is negative", set_item("rule_lhs", 0, -1)),
    ("rule_len is negative", set_item("rule_len", 0, -1)),
    ("a reduction pops past the stack's bottom", pop_past_bottom),
    ("context_of_state out of range", lambda p: p["context_of_state"].__setitem__(0, 99)),
    ("ctxset_start past its table", past_end("ctxset_start")),
    ("ctxset_start out of order", swap_offsets("ctxset_start", 0)),
    ("xset_start past the pairs", past_end("xset_start")),
    ("xset_start out of order", swap_offsets("xset_start", 1)),
    (
        "pair_terminal is no terminal",
        lambda p: p["pair_terminal"].__setitem__(0, len(p["ignored"])),
    ),
    ("pair_terminal is negative", set_item("pair_terminal", 0, -1)),
    ("pair_ctx_start past its table", past_end("pair_ctx_start")),
    ("origin_run lo > hi", origin_pair(lambda lo, hi: (hi, lo))),
    ("origin_run hi past the runs", origin_pair(lambda lo, hi: (lo, 10**6))),
    ("origin_run lo = -1, hi not", origin_pair(lambda lo, hi: (-1, hi))),
    ("origin_run hi = -1, lo not", origin_pair(lambda lo, hi: (lo, -1))),
    ("origin_run of odd length", lambda p: p.update(origin_run=np.append(p["origin_run"], -1))),
    ("run_seq is no sequence", lambda p: p["run_seq"].__setitem__(0, len(p["seq_parent"]))),
    ("run_seq is negative", set_item("run_seq", 0, -1)),
    ("run_xset (group_xset) is negative", set_item("run_xset", 0, -1)),
    ("run_xset is no exit set", lambda p: p["run_xset"].__setitem__(0, p["xset_free"].size)),
    ("run_skip does not move forward", set_item("run_skip", 0, 0)),
    ("run_start past the entries", past_end("run_start")),
    ("run_start out of order", swap_offsets("run_start", 3)),
    ("run_groups (entry_group) is negative", set_item("run_groups", 0, -1)),
    ("run_groups is no group", lambda p: p["run_groups"].__setitem__(0, p["group_dense"].size)),
    ("group_dense is no dense row", lambda p: p["group_dense"].__setitem__(0, 10**6)),
    ("group_token_start inner offset out of order", swap_offsets("group_token_start", 5)),
    ("group_token_start past the tokens", past_end("group_token_start")),
    ("group_tokens holds a negative id", set_item("group_tokens", 0, -1)),
    ("group_tokens holds a far negative id", set_item("group_tokens", 0, -(2**31))),
    ("group_tokens holds the vocabulary size", set_item("group_tokens", 0, 50257)),
    ("group_tokens holds a token past the row", set_item("group_tokens", 0, 1571 * 32 + 5)),
    ("label is no terminal", lambda p: p["label"].__setitem__(0, p["ignored"].size)),
    ("state_kill of an unlabelled state", set_item("state_kill", 0, 0)),
    ("restart is no context", set_item("restart", 0, 99)),
    ("context_start is no lexer state", set_item("context_start", 0, 10**6)),
    ("context_start has a kill row", start_with_kill_row),
    ("next_ctx is no context", set_item("next_ctx", 0, 99)),
    ("next_ctx_start past its table", past_end("next_ctx_start")),
    ("moves leads to no lexer state", set_item("moves", 0, 10**6)),
    ("class_of_byte is no class", set_item("class_of_byte", 65, 10**6)),
    ("state_xset is no exit set", set_item("state_xset", 0, 10**6)),
    ("text_start out of order", swap_offsets("text_start", 100)),
    ("dead is shorter than the contexts", shorter("dead")),
    ("eos_row is shorter than a row", shorter("eos_row")),
    ("pair_any is shorter than the pairs", shorter("pair_any")),
    ("run_skip is shorter than the runs", shorter("run_skip")),
    ("rule_len is shorter than rule_lhs", shorter("rule_len")),
    ("a sequence is its own parent", last_sequence("seq_parent", lambda s: s)),
    ("a sequence's parent comes after it", last_sequence("seq_parent", lambda s: s + 5)),
    ("a sequence's terminal is out of range", last_sequence("seq_terminal", lambda s: 10**6)),
    ("a sequence's terminal is negative", last_sequence("seq_terminal", lambda s: -1)),
    ("a sequence's context is out of range", last_sequence("seq_context", lambda s: 10**6)),
    ("start_state is no state", lambda p: p.__setitem__("start_state", 10**6)),
    ("num_symbols disagrees with the terminals", lambda p: p.__setitem__("num_symbols", 3)),
    ("num_words cannot hold the vocabulary", lambda p: p.__setitem__("num_words", 10)),
]


def test_the_real_tables_pass(tables: ParserTables) -> None:
    """The unbroken arguments build a parser (so each case below breaks only its edit)."""
    parser = Parser(tables)
    assert parser.num_stacks == 1
    assert outcome_in_child(lambda: Parser(edited(tables, lambda parts: None))) == "ok"


@pytest.mark.parametrize("edit", [e for _, e in BROKEN_TABLES], ids=[n for n, _ in BROKEN_TABLES])
def test_broken_table_is_refused_at_construction(tables: ParserTables, edit: Edit) -> None:
    broken = edited(tables, edit)
    outcome = outcome_in_child(lambda: Parser(broken))
    assert outcome.startswith("ValueError: Parser:"), outcome


# Tables of the wrong type or shape, or not given: each error names the table (the
# parser reads them by name, so no order of columns has to match).
MISPLACED_TABLES: list[tuple[str, Edit, str]] = [
    ("rule_len shorter", shorter("rule_len"), "'rule_len'"),
    (
        "xset_start as int32",
        lambda p: p.update(xset_start=p["xset_start"].astype(np.int32)),
        "'xset_start'",
    ),
    ("ignored as int32", lambda p: p.update(ignored=p["ignored"].astype(np.int32)), "'ignored'"),
    ("masks as float32", lambda p: p.update(masks=p["masks"].view(np.float32)), "'masks'"),
    ("masks not flat", lambda p: p.update(masks=p["masks"].reshape(1, -1)), "'masks'"),
    ("num_words past int32", lambda p: p.update(num_words=2**40), "num_words"),
]


@pytest.mark.parametrize(
    ("edit", "named"),
    [(e, n) for _, e, n in MISPLACED_TABLES],
    ids=[name for name, _, _ in MISPLACED_TABLES],
)
def test_misplaced_table_is_named_in_the_error(tables: ParserTables, edit: Edit, named: str):
    outcome = outcome_in_child(lambda: Parser(edited(tables, edit)))
    assert outcome.startswith("ValueError: Parser:") and named in outcome, outcome


def test_missing_table_is_named(tables: ParserTables) -> None:
    class Partial:
        def __getattr__(self, name: str) -> Any:
            if name == "run_skip":
                raise AttributeError(name)
            return getattr(tables, name)

    with pytest.raises(TypeError, match="no table 'run_skip'"):
        Parser(Partial())


def _looping_parse_table(parts: dict[str, Any], empty_rule: bool) -> None:
    """Two parser states: 0 shifts terminal 0 (and $END) to 1, and 1 reduces rule 0 with
    goto back to 1. With a one-symbol rule the stack comes back to itself; with an empty
    rule it grows by one state per reduction. Both are tables no LALR build makes, and
    no check at construction can refuse them without running the parser."""
    symbols, nonterminals = parts["num_symbols"], parts["num_nonterminals"]
    action = np.zeros((2, symbols), dtype=np.int32)
    action[0, 0] = action[0, symbols - 1] = 2  # shift to state 1
    action[1, 0] = action[1, symbols - 1] = -1  # reduce rule 0
    goto = np.full((2, nonterminals), -1, dtype=np.int32)
    goto[0, 0] = goto[1, 0] = 1
    parts.update(
        action=action.reshape(-1),
        goto=goto.reshape(-1),
        rule_lhs=np.zeros(1, dtype=np.int32),
        rule_len=np.array([0 if empty_rule else 1], dtype=np.int32),
        context_of_state=np.zeros(2, dtype=np.int32),
        start_state=0,
        end_state=0,
    )


def _feed_twice(tables: ParserTables) -> None:
    parser = Parser(tables)
    stack, _ = parser.feed(0, 0)
    assert stack == 1
    try:
        parser.feed(stack, 0)
    finally:
        # The parser refuses every later call too: its memos may hold wrong answers.
        with pytest.raises(ValueError, match="inconsistent tables"):
            parser.feed(0, 0)


def _end_after_one(tables: ParserTables) -> None:
    parser = Parser(tables)
    stack, _ = parser.feed(0, 0)
    parser.accepts_end(stack)


@pytest.mark.parametrize("empty_rule", [False, True], ids=["cycle", "growth"])
def test_reduction_loop_raises_instead_of_hanging(tables: ParserTables, empty_rule: bool):
    looping = edited(tables, lambda parts: _looping_parse_table(parts, empty_rule))
    outcome = outcome_in_child(lambda: _feed_twice(looping), timeout_s=30)
    assert outcome == "ValueError: Parser: inconsistent tables: the parse table reduces without end"
    outcome = outcome_in_child(lambda: _end_after_one(looping), timeout_s=30)
    assert outcome.startswith("ValueError: Parser: inconsistent tables"), outcome


def test_sequence_appended_wrong_raises_where_read(tables: ParserTables) -> None:
    """Python appends sequences after construction: a malformed one is refused where the
    parser reads it, not followed around a loop."""

    def apply_self_parented() -> None:
        fresh = edited(tables, lambda parts: None)
        parser = Parser(fresh)
        parent, terminal, context = fresh.seq_parent, fresh.seq_terminal, fresh.seq_context
        parent.append(len(parent))  # its own parent
        terminal.append(0)
        context.append(0)
        parser.apply(0, len(parent) - 1)

    outcome = outcome_in_child(apply_self_parented, timeout_s=30)
    assert outcome == "ValueError: Parser: inconsistent tables: an emitted sequence is malformed"


@pytest.mark.parametrize(
    ("field", "edit"),
    [
        ("group_tokens", lambda a: np.where(np.arange(a.size) == 0, -1, a)),
        ("entry_group", lambda a: np.where(np.arange(a.size) == 0, -1, a)),
        ("group_xset", lambda a: np.where(np.arange(a.size) == 0, -1, a)),
        ("seq_parent", lambda a: np.where(np.arange(a.size) == a.size - 1, a.size - 1, a)),
        ("seq_terminal", lambda a: np.where(np.arange(a.size) == 1, 10**6, a)),
    ],
)
def test_grammar_tables_of_a_broken_index_raise_the_artifact_error(
    index: GrammarIndex, field: str, edit: Callable[[Any], Any]
) -> None:
    """What a matcher builds from an index whose tables were altered (an artifact with a
    recomputed checksum): the project's error, in the child, quickly."""
    broken = dataclasses.replace(index, **{field: edit(getattr(index, field)).astype(np.int64)})
    outcome = outcome_in_child(lambda: GrammarTables(broken), timeout_s=30)
    assert outcome.startswith("ArtifactCorruptError: grammar index tables"), outcome


def test_write_row_refuses_a_float_bitmask() -> None:
    """Item size alone is not the dtype: four-byte floats are no bitmask."""
    with pytest.raises(ValueError, match="int32"):
        write_row(np.zeros(4, dtype=np.float32), 0, np.ones(2, dtype=np.int32))
    bitmask = np.zeros(4, dtype=np.int32)
    write_row(bitmask, 0, np.ones(2, dtype=np.int32))
    assert bitmask.tolist() == [1, 1, 0, 0]


def test_fitting_rows_refuses_zero_rows() -> None:
    """No row to write (a token's count would land in row -1): refused, nothing written."""
    grown = np.array([0, 3, 1], dtype=np.int32)
    with pytest.raises(ValueError, match="rows"):
        fitting_rows(grown, np.zeros((0, 1), dtype=np.int32))
    rows = np.zeros((2, 1), dtype=np.int32)
    fitting_rows(grown, rows)
    assert rows[:, 0].tolist() == [0b001, 0b101]
