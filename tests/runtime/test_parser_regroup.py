"""The C parser of a lazy grammar index: lexer states whose runs are pending (`origin_run`
pair -1, -1) stop a row with `OriginPending`, caching nothing, and `Parser.regroup` swaps
in the runs, token groups and dense rows as they are appended. Rows built that way, origin
by origin as rows ask, equal the eager parser's at every (stack, lexer state) pair real
token sequences reach; a regroup with broken tables is refused and changes nothing."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from forked import outcome_in_child

from fsmcompile._native import OriginPending, Parser
from fsmcompile.compiler import compile_json_schema
from fsmcompile.runtime.grammar_parser import parser_tables
from fsmcompile.runtime.grammar_tables import GrammarTables
from fsmcompile.runtime.parser_tables import ParserTables
from fsmcompile.tables.grammar_index import GrammarIndex

# Recursive, with a counted string, a context set and kill rows (labelled states whose
# rows read the next lexeme's start row).
SCHEMA = {"type": "object", "properties": {"s": {"maxLength": 6}, "any": {}}}

TEXTS = [
    '{"s":"abc","any":[1,2.5,{"k":null,"t":true}]}',
    '{"s":""}',
    '{"s":"abc","any":{"a":{"b":[[],{}]}}}',
    '{"s":"123456","any":"deep \\"q\\" \\u00e9"}',
    '{"any":-3e2}',
]


@pytest.fixture(scope="module")
def index(gpt2: Any) -> GrammarIndex:
    built = compile_json_schema(SCHEMA, gpt2, cache=False)
    assert isinstance(built, GrammarIndex)
    return built


@pytest.fixture(scope="module")
def grammar(index: GrammarIndex) -> GrammarTables:
    """The eager tables: their parser is the reference, their walks give the emitted
    sequences (appended to the sequence columns every parser here reads)."""
    return GrammarTables(index)


@pytest.fixture(scope="module")
def full(grammar: GrammarTables) -> ParserTables:
    return parser_tables(grammar.index, grammar._sequences, grammar.num_words, grammar.eos_row)


class LazyRuns:
    """The runs, token groups and dense rows of a lazy index, appended one lexer state at
    a time from the full tables, as a lazy index computes them when first walked: run,
    group and dense-row ids differ from the full tables', rows must not."""

    def __init__(self, full: ParserTables) -> None:
        self.full = full
        self.words = full.num_words
        self.origin_run = np.full(full.origin_run.size, -1, dtype=np.int64)
        self.run_seq: list[int] = []
        self.run_xset: list[int] = []
        self.run_skip: list[int] = []
        self.run_start = [0]
        self.run_groups: list[int] = []
        self.group_of: dict[int, int] = {}
        self.group_dense: list[int] = []
        self.group_token_start = [0]
        self.group_tokens: list[int] = []
        self.dense_of: dict[int, int] = {}
        self.masks: list[np.ndarray] = []

    def fill(self, state: int) -> None:
        full = self.full
        lo, hi = (int(x) for x in full.origin_run[2 * state : 2 * state + 2])
        base = len(self.run_seq)
        for run in range(lo, hi):
            skip = int(full.run_skip[run])
            assert run < skip <= hi, "a skip leaves its lexer state's runs"
            self.run_seq.append(int(full.run_seq[run]))
            self.run_xset.append(int(full.run_xset[run]))
            self.run_skip.append(skip - lo + base)
            for group in full.run_groups[full.run_start[run] : full.run_start[run + 1]]:
                self.run_groups.append(self._group(int(group)))
            self.run_start.append(len(self.run_groups))
        self.origin_run[2 * state : 2 * state + 2] = (base, base + hi - lo)

    def _group(self, group: int) -> int:
        if group not in self.group_of:
            full = self.full
            dense = int(full.group_dense[group])
            if dense >= 0 and dense not in self.dense_of:
                self.dense_of[dense] = len(self.masks)
                self.masks.append(full.masks[dense * self.words : (dense + 1) * self.words])
            self.group_of[group] = len(self.group_dense)
            self.group_dense.append(self.dense_of[dense] if dense >= 0 else -1)
            lo, hi = full.group_token_start[group], full.group_token_start[group + 1]
            self.group_tokens.extend(int(t) for t in full.group_tokens[lo:hi])
            self.group_token_start.append(len(self.group_tokens))
        return self.group_of[group]

    def arrays(self) -> dict[str, Any]:
        """The tables `regroup` takes, as fresh arrays."""

        def i64(values: Any) -> np.ndarray:
            return np.array(values, dtype=np.int64)

        def i32(values: Any) -> np.ndarray:
            return np.array(values, dtype=np.int32)

        masks = np.concatenate(self.masks) if self.masks else np.zeros(0, dtype=np.int32)
        return {
            "origin_run": self.origin_run.copy(),
            "run_seq": i64(self.run_seq),
            "run_xset": i64(self.run_xset),
            "run_skip": i64(self.run_skip),
            "run_start": i64(self.run_start),
            "run_groups": i32(self.run_groups),
            "group_dense": i32(self.group_dense),
            "group_token_start": i64(self.group_token_start),
            "group_tokens": i32(self.group_tokens),
            "masks": np.ascontiguousarray(masks, dtype=np.int32),
            "ctxset_start": self.full.ctxset_start.copy(),
            "ctxset_context": self.full.ctxset_context.copy(),
        }

    def copy(self) -> LazyRuns:
        """Another of these, grown apart from this one."""
        other = copy.copy(self)
        for name, value in vars(self).items():
            if isinstance(value, list | dict | np.ndarray) and name != "full":
                setattr(other, name, value.copy())
        return other

    def parser(self) -> Parser:
        return Parser(dataclasses.replace(self.full, **self.arrays()))

    def regroup(self, parser: Parser) -> None:
        parser.regroup(SimpleNamespace(**self.arrays()))


def lazy_row(parser: Parser, lazy: LazyRuns, stack: int, state: int) -> tuple[bytes, int, list]:
    """(row bytes, floor, the lexer states filled on the way): each pending state a row
    asks for is filled and regrouped, then the row asked again."""
    filled: list[int] = []
    while True:
        try:
            row, floor = parser.row(stack, state)
            return parser.row_bytes(row), floor, filled
        except OriginPending as pending:
            (asked,) = pending.args
            assert asked not in filled, f"lexer state {asked} pending after its regroup"
            lazy.fill(asked)
            lazy.regroup(parser)
            filled.append(asked)


def walked_pairs(
    grammar: GrammarTables, parsers: list[Parser], texts: list[str]
) -> list[tuple[tuple[int, ...], int]]:
    """(the stack in each parser, lexer state) of every unconstrained-or-not configuration
    the real tokenization of `texts` reaches, each parser stepped alike (`apply`,
    `xset_ok`: no runs read), as `GrammarTables._advance` steps one parser."""
    index = grammar.index
    state_xset = index.state_xset.tolist()
    bounds = index.lexer.char_bound.tolist()
    vocab = index.vocabulary
    seen: dict[tuple[tuple[int, ...], int], None] = {}
    for text in texts:
        start = (tuple(0 for _ in parsers), grammar.start_lexer_state, 0, 0)
        configs = {start}
        for token in vocab.encode(text):
            after_token = set()
            for stacks, state, cid, count in configs:
                seen[(stacks, state)] = None
                for seq, end, end_cid, grown, fresh in grammar.outcomes(state, cid, token):
                    if 0 <= bounds[state] < count + grown:
                        continue
                    answers = [
                        parser.apply(stack, seq)[0]
                        for parser, stack in zip(parsers, stacks, strict=True)
                    ]
                    assert len({a >= 0 for a in answers}) == 1, (stacks, seq)
                    if answers[0] < 0:
                        continue
                    ok = [
                        p.xset_ok(a, state_xset[end])[0]
                        for p, a in zip(parsers, answers, strict=True)
                    ]
                    assert len(set(ok)) == 1
                    if ok[0]:
                        counted = count + grown if fresh < 0 else fresh
                        after_token.add((tuple(answers), end, end_cid, counted))
            assert after_token, f"the walk of {text!r} died at token {token}"
            configs = after_token
        for stacks, state, _, _ in configs:
            seen[(stacks, state)] = None
    return list(seen)


def eager_row(parser: Parser, stack: int, state: int) -> tuple[bytes, int]:
    row, floor = parser.row(stack, state)
    return parser.row_bytes(row), floor


def test_every_origin_pending_raises_origin_pending(grammar: GrammarTables, full) -> None:
    """No runs at all: a row, its plan and its write name the start state; the parser
    keeps answering what needs no runs, and the next row call raises the same again
    (a pending state is no broken table)."""
    lazy = LazyRuns(full)
    parser = lazy.parser()
    start = grammar.start_lexer_state
    for ask in (
        lambda: parser.row(0, start),
        lambda: parser.row_plan(0, start),
        lambda: parser.write_row(np.zeros(grammar.num_words, dtype=np.int32), 0, 0, start),
        lambda: parser.row(0, start),
    ):
        with pytest.raises(OriginPending) as raised:
            ask()
        assert raised.value.args == (start,)
        assert isinstance(raised.value, LookupError)
    eager = grammar._parser
    for terminal in range(full.num_symbols):
        assert (parser.feed(0, terminal)[0] >= 0) == (eager.feed(0, terminal)[0] >= 0)
    assert parser.accepts_end(0) == eager.accepts_end(0)
    assert parser.config_accepts_end(0, start) == eager.config_accepts_end(0, start)
    assert parser.num_rows == 0  # nothing was made from a call that stopped


def test_rows_filled_as_asked_equal_the_eager_rows(grammar: GrammarTables, full) -> None:
    """All pending at first; each row fills what it asks for (appended, so the lazy
    origin_run pairs come in walk order, not state order). Every row at every pair the
    texts reach equals the eager parser's, floor included."""
    lazy = LazyRuns(full)
    parser = lazy.parser()
    eager = grammar._parser
    pairs = walked_pairs(grammar, [eager, parser], TEXTS)
    assert len(pairs) > 40
    filled_by_one_row = 0
    for (eager_stack, lazy_stack), state in pairs:
        got, floor, filled = lazy_row(parser, lazy, lazy_stack, state)
        assert (got, floor) == eager_row(eager, eager_stack, state), (eager_stack, state)
        filled_by_one_row = max(filled_by_one_row, len(filled))
    pairs_of = lazy.origin_run.reshape(-1, 2)
    walked = np.flatnonzero(pairs_of[:, 0] >= 0)
    assert 0 < walked.size < pairs_of.shape[0]  # some states never asked for stay pending
    assert (np.diff(pairs_of[walked, 0]) < 0).any(), "pairs in state order: nothing appended"
    assert filled_by_one_row >= 2, "no row read a next lexeme's start row (kill rows)"
    for (_, lazy_stack), state in pairs:  # asked again: nothing left to fill
        assert lazy_row(parser, lazy, lazy_stack, state)[2] == []


def kill_case(grammar: GrammarTables, pairs, parser_index: int) -> tuple[int, int, int, int]:
    """(eager stack, other stack, labelled lexer state with a kill row, the start state of
    a next lexeme its row reads) of a pair the walk reached."""
    index = grammar.index
    eager = grammar._parser
    label, kill = index.lexer.label, index.state_kill
    context_start, restart = index.lexer.context_start, index.lexer.restart_context
    context_of_state = index.table.context_of_state
    next_contexts = index.next_contexts()
    for stacks, state in pairs:
        if kill[state] < 0:
            continue
        terminal = int(label[state])
        if index.ignored[terminal]:
            return stacks[0], stacks[parser_index], state, int(context_start[restart[state]])
        after, _ = eager.feed(stacks[0], terminal)
        if after < 0:
            continue
        landing = int(context_of_state[eager.top(after)[0]])
        if landing in next_contexts[terminal]:
            return stacks[0], stacks[parser_index], state, int(context_start[landing])
    raise AssertionError("no labelled state with a kill row reached")


def test_a_pending_next_lexeme_start_stops_the_row_and_caches_nothing(
    grammar: GrammarTables, full
) -> None:
    """Every state filled but the start of the lexeme after a labelled one: its row (kill
    composition) raises for that start state, again when asked again (no row was cached
    without the pending part), and equals the eager row once the start is regrouped."""
    lazy = LazyRuns(full)
    num_states = full.origin_run.size // 2
    probe = lazy.parser()
    pairs = walked_pairs(grammar, [grammar._parser, probe], TEXTS)
    eager_stack, _, state, start = kill_case(grammar, pairs, 1)
    for other in range(num_states):
        if other != start:
            lazy.fill(other)
    parser = lazy.parser()
    pairs = walked_pairs(grammar, [grammar._parser, parser], TEXTS)
    stack = next(s[1] for s, q in pairs if s[0] == eager_stack and q == state)
    assert parser.row_plan(stack, state)[0] is not None  # its own runs are there
    made = []
    for _ in range(2):
        with pytest.raises(OriginPending) as raised:
            parser.row(stack, state)
        assert raised.value.args == (start,)
        made.append(parser.num_rows)
    assert made[0] == made[1]  # the second try made no row: none stood for the first
    with pytest.raises(OriginPending):
        parser.write_row(np.zeros(grammar.num_words, dtype=np.int32), 0, stack, state)
    rows_before = parser.num_rows
    lazy.fill(start)
    lazy.regroup(parser)
    got, floor, filled = lazy_row(parser, lazy, stack, state)
    assert filled == []
    assert (got, floor) == eager_row(grammar._parser, eager_stack, state)
    assert parser.num_rows > rows_before


Edit = Callable[[dict[str, Any]], None]


def set_item(name: str, at: int, value: int) -> Edit:
    def edit(parts: dict[str, Any]) -> None:
        parts[name][at] = value

    return edit


def filled_pair(change: Callable[[int, int], tuple[int, int]]) -> Edit:
    def edit(parts: dict[str, Any]) -> None:
        pairs = parts["origin_run"].reshape(-1, 2)
        state = int(np.flatnonzero(pairs[:, 0] < pairs[:, 1])[0])
        pairs[state] = change(int(pairs[state, 0]), int(pairs[state, 1]))

    return edit


def pending_pair(change: Callable[[int, int], tuple[int, int]]) -> Edit:
    def edit(parts: dict[str, Any]) -> None:
        pairs = parts["origin_run"].reshape(-1, 2)
        state = int(np.flatnonzero(pairs[:, 0] < 0)[0])
        pairs[state] = change(int(pairs[state, 0]), int(pairs[state, 1]))

    return edit


def update(**values: Callable[[Any], Any]) -> Edit:
    def edit(parts: dict[str, Any]) -> None:
        for name, value in values.items():
            parts[name] = value(parts[name])

    return edit


# (what is broken, the edit): each regroup must be refused and leave the parser as it was.
BROKEN_REGROUPS: list[tuple[str, Edit]] = [
    ("origin_run of odd length", update(origin_run=lambda a: np.append(a, -1))),
    ("origin_run short of a lexer state", update(origin_run=lambda a: a[:-2].copy())),
    ("origin_run lo > hi", filled_pair(lambda lo, hi: (hi, lo))),
    ("origin_run hi past the runs", filled_pair(lambda lo, hi: (lo, 10**6))),
    ("origin_run lo = -1, hi not", filled_pair(lambda lo, hi: (-1, hi))),
    ("origin_run lo not, hi = -1", filled_pair(lambda lo, hi: (lo, -1))),
    ("origin_run pending below -1", pending_pair(lambda lo, hi: (-2, -2))),
    ("run_seq is no sequence", lambda p: p["run_seq"].__setitem__(0, 10**9)),
    ("run_seq is negative", set_item("run_seq", 0, -1)),
    ("run_xset is no exit set", set_item("run_xset", 0, 10**6)),
    ("run_xset as int32", update(run_xset=lambda a: a.astype(np.int32))),
    ("run_skip does not move forward", set_item("run_skip", 0, 0)),
    ("run_skip past the runs", lambda p: p["run_skip"].__setitem__(-1, p["run_seq"].size + 1)),
    ("run_skip shorter than the runs", update(run_skip=lambda a: a[:-1].copy())),
    ("run_start past the entries", lambda p: p["run_start"].__setitem__(-1, 10**6)),
    ("run_start out of order", set_item("run_start", 1, 10**5)),
    ("run_groups is no group", set_item("run_groups", 0, 10**6)),
    ("group_dense is no dense row", set_item("group_dense", 0, 10**6)),
    ("group_dense below -1", set_item("group_dense", 0, -2)),
    ("group_token_start past the tokens", lambda p: p["group_token_start"].__setitem__(-1, 10**7)),
    ("group_tokens holds the vocabulary size", set_item("group_tokens", 0, 50257)),
    ("group_tokens holds a negative id", set_item("group_tokens", 0, -1)),
    ("masks not whole rows", update(masks=lambda a: a[:-1].copy())),
    ("ctxset_start past its table", lambda p: p["ctxset_start"].__setitem__(-1, 10**6)),
    # The index's sequences name its context sets: with none, a sequence is malformed.
    ("ctxset_start holds no set", update(ctxset_start=lambda a: a[:1].copy())),
]


@pytest.fixture(scope="module")
def half_filled(grammar: GrammarTables, full) -> tuple[LazyRuns, Parser, list]:
    """A lazy parser with the rows of the first text made (some states still pending)."""
    lazy = LazyRuns(full)
    parser = lazy.parser()
    pairs = walked_pairs(grammar, [grammar._parser, parser], TEXTS[:1])
    for (_, stack), state in pairs:
        lazy_row(parser, lazy, stack, state)
    assert (lazy.origin_run < 0).any() and (lazy.origin_run >= 0).any()
    return lazy, parser, pairs


def answers(parser: Parser, pairs, pending: int) -> list[Any]:
    """Rows at walked pairs, and what a row at a pending state raises."""
    out: list[Any] = [eager_row(parser, stack, state) for (_, stack), state in pairs[:40]]
    try:
        parser.row(0, pending)
    except OriginPending as error:
        out.append(error.args)
    return out


@pytest.mark.parametrize(
    "edit", [e for _, e in BROKEN_REGROUPS], ids=[n for n, _ in BROKEN_REGROUPS]
)
def test_broken_regroup_is_refused_and_changes_nothing(half_filled, edit: Edit) -> None:
    lazy, parser, pairs = half_filled
    pending = int(np.flatnonzero(lazy.origin_run.reshape(-1, 2)[:, 0] < 0)[0])
    before = answers(parser, pairs, pending)
    assert before[-1] == (pending,)

    def attempt() -> None:
        # One more state filled (runs, groups, dense rows appended), then broken.
        grown = lazy.copy()
        grown.fill(pending)
        broken = grown.arrays()
        edit(broken)
        with pytest.raises(ValueError, match="Parser"):
            parser.regroup(SimpleNamespace(**broken))
        assert answers(parser, pairs, pending) == before
        grown.regroup(parser)  # the unbroken tables still go in
        assert answers(parser, pairs, pending)[:-1] == before[:-1]
        assert lazy_row(parser, grown, 0, pending)[2] != [pending]

    outcome = outcome_in_child(attempt)
    assert outcome == "ok", outcome


def test_regroup_names_a_missing_table(half_filled) -> None:
    lazy, parser, pairs = half_filled
    parts = lazy.arrays()
    del parts["run_skip"]
    pending = int(np.flatnonzero(lazy.origin_run.reshape(-1, 2)[:, 0] < 0)[0])
    before = answers(parser, pairs, pending)
    with pytest.raises(TypeError, match="run_skip"):
        parser.regroup(SimpleNamespace(**parts))
    assert answers(parser, pairs, pending) == before
