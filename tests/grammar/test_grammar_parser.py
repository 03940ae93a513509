"""The C parser of the grammar tables (`native/parser_*.c`) against references written
plainly here: an LALR parser over the index's own tables on a list of states, the valid
runs of a row by their definition (each run checked on its own, no skipping), and the OR
of their groups in numpy."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from grammar_checks import bundled_text, compiled, inside_walk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fsmcompile._native import Parser
from fsmcompile.compiler import compile_json_schema
from fsmcompile.runtime.grammar_matcher import GrammarMatcher
from fsmcompile.runtime.grammar_parser import entry_runs, parser_for
from fsmcompile.runtime.grammar_tables import GrammarTables
from fsmcompile.tables.bits import unpack_row
from fsmcompile.tables.grammar_index import GrammarIndex

_INDEXES: dict[str, GrammarIndex] = {}


def _index(name: str, gpt2) -> GrammarIndex:
    if name not in _INDEXES:
        if name == "schema":  # recursive, with a counted string and a context set
            schema = {"type": "object", "properties": {"s": {"maxLength": 6}, "any": {}}}
            _INDEXES[name] = compile_json_schema(schema, gpt2, cache=False)
        else:
            _INDEXES[name] = compiled(bundled_text(name), "gpt2")
    return _INDEXES[name]


def _reference_feed(index: GrammarIndex, states: list[int], symbol: int):
    """(states after lark's LALR takes `symbol`, or None; the shallowest depth read)."""
    table = index.table
    states = list(states)
    floor = len(states) - 1
    while True:
        act = int(table.action[states[-1], symbol])
        if act == 0:
            return None, floor
        if act > 0:
            return [*states, act - 1], floor
        rule = -act - 1
        length = int(table.rule_len[rule])
        if length:
            del states[-length:]
        floor = min(floor, len(states) - 1)
        target = int(table.goto[states[-1], table.rule_lhs[rule]])
        if target < 0:
            return None, floor
        states.append(target)


def _reference_accepts_end(index: GrammarIndex, states: list[int]) -> bool:
    end = len(index.terminal_names)
    table = index.table
    states = list(states)
    while True:
        act = int(table.action[states[-1], end])
        if act >= 0:
            return False
        rule = -act - 1
        length = int(table.rule_len[rule])
        if length:
            del states[-length:]
        target = int(table.goto[states[-1], table.rule_lhs[rule]])
        if target < 0:
            return False
        states.append(target)
        if target == int(table.end_state):
            return True


def _depth(parser: Parser, stack: int) -> int:
    return parser.top(stack)[1]


def _states(parser: Parser, stack: int) -> list[int]:
    return list(reversed(parser.suffix(stack, _depth(parser, stack) + 1)))


@pytest.mark.parametrize("name", ["json", "sql_select", "schema"])
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_feed_and_end_agree_with_a_plain_lalr_parser(name, gpt2, data):
    index = _index(name, gpt2)
    parser = GrammarTables(index)._parser
    num_terminals = len(index.terminal_names)
    stack, states = 0, [int(index.table.start_state)]
    for _ in range(data.draw(st.integers(1, 30))):
        taken = []
        for terminal in range(num_terminals):
            expected, floor = _reference_feed(index, states, terminal)
            after, got_floor = parser.feed(stack, terminal)
            assert (after >= 0) == (expected is not None), (states, terminal)
            assert got_floor == floor
            if expected is not None:
                assert _states(parser, after) == expected
                assert _depth(parser, after) == len(expected) - 1
                taken.append((after, expected))
        ok, floor = parser.accepts_end(stack)
        assert ok == _reference_accepts_end(index, states)
        assert 0 <= floor <= _depth(parser, stack)
        if not taken:
            break
        stack, states = taken[data.draw(st.integers(0, len(taken) - 1))]


def _reachable_stacks(index: GrammarIndex, parser: Parser, count: int, seed: int) -> list[int]:
    """Stacks after random accepted terminal strings (`feed` itself is checked above)."""
    rng = np.random.default_rng(seed)
    num_terminals = len(index.terminal_names)
    found, stack = [0], 0
    while len(found) < count:
        moves = [a for t in range(num_terminals) if (a := parser.feed(stack, t)[0]) >= 0]
        if not moves or rng.random() < 0.1:
            stack = 0
            continue
        stack = moves[int(rng.integers(len(moves)))]
        found.append(stack)
    return found


def _reference_union(index: GrammarIndex, runs, run_ids: list[int], num_words: int):
    row = np.zeros(num_words * 32, dtype=np.bool_)
    for run in run_ids:
        for group in runs.groups[runs.start[run] : runs.start[run + 1]]:
            dense = int(index.group_dense[group])
            if dense >= 0:
                bits = np.unpackbits(index.masks[dense].view(np.uint8), bitorder="little")
                row |= bits.astype(np.bool_)
            else:
                lo, hi = index.group_token_start[group], index.group_token_start[group + 1]
                row[index.group_tokens[lo:hi]] = True
    return np.packbits(row, bitorder="little").view(np.int32)


@pytest.mark.parametrize("name", ["json", "sql_select", "schema"])
def test_row_plan_is_every_run_the_stack_accepts(name, gpt2):
    """`row_plan` skips rejected sequences and shares sibling steps; the reference asks
    `apply` and `xset_ok` of every run of the lexer state, one at a time."""
    index = _index(name, gpt2)
    tables = GrammarTables(index)
    parser = tables._parser
    runs = entry_runs(index)
    origin_run = runs.origin_run
    checked = several = dense_unions = 0
    for stack in _reachable_stacks(index, parser, 40, seed=3):
        for state in range(tables.lexer.num_states):
            plan, floor, eos = parser.row_plan(stack, state)
            valid = np.frombuffer(plan, dtype=np.int32).tolist()
            expected = []
            for run in range(int(origin_run[state]), int(origin_run[state + 1])):
                after, _ = parser.apply(stack, int(runs.seq[run]))
                if after >= 0 and parser.xset_ok(after, int(runs.xset[run]))[0]:
                    expected.append(run)
            assert valid == expected, (stack, state)
            assert (eos, 0 <= floor <= _depth(parser, stack)) == (
                parser.config_accepts_end(stack, state)[0],
                True,
            )
            checked += 1
            if len(valid) > 1:
                several += 1
                union = np.frombuffer(parser.union(plan), dtype=np.int32)
                reference = _reference_union(index, runs, valid, tables.num_words)
                assert np.array_equal(union, reference), (stack, state)
                # Again, and in another order: the cached dense combination is the same.
                again = parser.union(np.array(valid[::-1], dtype=np.int32).tobytes())
                assert np.array_equal(np.frombuffer(again, dtype=np.int32), reference)
                groups = np.concatenate(
                    [runs.groups[runs.start[r] : runs.start[r + 1]] for r in valid]
                )
                dense_unions += len(set(index.group_dense[groups].tolist()) - {-1}) > 1
    assert checked > 100 and several > 20
    assert dense_unions > 0  # unions of several dense rows: the combination cache


def test_bad_arguments_are_refused(gpt2):
    index = _index("json", gpt2)
    tables = GrammarTables(index)
    parser = tables._parser
    with pytest.raises(IndexError):
        parser.feed(parser.num_stacks, 0)
    with pytest.raises(IndexError):
        parser.feed(0, 10_000)
    with pytest.raises(IndexError):
        parser.row_plan(0, tables.lexer.num_states)
    with pytest.raises(IndexError):
        parser.row(0, tables.lexer.num_states)
    with pytest.raises(IndexError):
        parser.row(parser.num_stacks, 0)
    with pytest.raises(IndexError):
        parser.row_bytes(parser.num_rows)
    with pytest.raises(IndexError):
        parser.advance_inside(0, tables.lexer.num_states, 0, 0)
    with pytest.raises(ValueError):
        parser.advance_inside(0, 0, -1, 0)
    with pytest.raises(TypeError):
        parser.advance_inside(0, 0, 0)
    with pytest.raises(IndexError):
        parser.apply(0, 10**9)
    with pytest.raises(ValueError):
        parser.union(np.array([10**9], dtype=np.int32).tobytes())
    with pytest.raises(ValueError):
        parser.union(b"\0\0")  # half an id
    assert parser.top(0) == (int(index.table.start_state), 0)
    with pytest.raises(ValueError):
        parser.suffix(0, 5)
    with pytest.raises(TypeError):
        Parser((), (), 1, 1, 0, 0, 1, 1)


def _reference_row(tables: GrammarTables, stack: int, state: int, memo: dict) -> np.ndarray:
    """A row by its definition, from the checked parts (`row_plan`, `union`, `feed`): the
    union of the valid runs, the next lexeme's start-state rows of the tokens whose first
    byte ends this one (under the state's kill row), and EOS where the text may end."""
    if (stack, state) in memo:
        return memo[(stack, state)]
    index, parser = tables.index, tables._parser
    lexer = index.lexer
    plan, _, eos = parser.row_plan(stack, state)
    row = np.frombuffer(parser.union(plan), dtype=np.int32).copy()
    kill = int(index.state_kill[state])
    if kill >= 0:
        label = int(lexer.label[state])
        if index.ignored[label]:
            restart = int(lexer.context_start[lexer.restart_context[state]])
            after_rows = [_reference_row(tables, stack, restart, memo)]
        else:
            after_rows = []
            for ctx in index.next_contexts()[label]:
                after, _ = parser.feed(stack, label)
                if after < 0:
                    continue
                if int(index.table.context_of_state[parser.top(after)[0]]) == ctx:
                    start = int(lexer.context_start[ctx])
                    after_rows.append(_reference_row(tables, after, start, memo))
        for sub in after_rows:
            row |= sub & index.kill_masks[kill]
    if eos:
        row |= tables.eos_row
    memo[(stack, state)] = row
    return row


@pytest.mark.parametrize("name", ["json", "sql_select", "schema"])
def test_row_is_its_definition_whatever_the_order_asked(name, gpt2):
    """`row` (cached by pair and by the stack's top down to its floor, composed in C)
    equals the row built from its parts, for tables asked in one order and in the
    reverse: a floor claimed too shallow would hand one stack another's cached row."""
    index = _index(name, gpt2)
    forward, backward = GrammarTables(index), GrammarTables(index)
    rng = np.random.default_rng(5)
    paths: list[list[int]] = [[]]
    while len(paths) < 30:  # random accepted terminal strings
        path = list(paths[int(rng.integers(len(paths)))])
        stack = _replay(forward._parser, path)
        terminals = range(len(index.terminal_names))
        moves = [t for t in terminals if forward._parser.feed(stack, t)[0] >= 0]
        if moves:
            paths.append([*path, moves[int(rng.integers(len(moves)))]])
    memo: dict = {}
    killed = 0
    for path in paths:
        stack = _replay(forward._parser, path)
        for state in range(index.lexer.num_states):
            row, floor = forward.config_row(stack, state)
            assert 0 <= floor <= _depth(forward._parser, stack)
            assert not row.flags.writeable
            reference = _reference_row(forward, stack, state, memo)
            assert np.array_equal(row, reference), (path, state)
            killed += int(index.state_kill[state]) >= 0
    assert killed > 0
    for path in reversed(paths):  # the same stacks, met in the other order
        stack = _replay(backward._parser, path)
        for state in reversed(range(index.lexer.num_states)):
            row, _ = backward.config_row(stack, state)
            expected = forward.config_row(_replay(forward._parser, path), state)[0]
            assert np.array_equal(row, expected), (path, state)


@pytest.mark.parametrize("name", ["json", "sql_select", "schema"])
def test_advance_inside_is_the_walk_of_a_token_that_stays_in_its_lexeme(name, gpt2):
    """`advance_inside` (C) answers as the walk of every reading does wherever the token
    cannot cut the lexeme, and hands over (None) exactly where it could, along random
    walks, for every token of the vocabulary: counted lexemes near their bound included."""
    index = _index(name, gpt2)
    tables = GrammarTables(index)
    matcher = GrammarMatcher(index, tables=tables)
    rng = np.random.default_rng(11)
    mask = np.zeros(tables.num_words, dtype=np.int32)
    inside = handed_over = 0
    for _ in range(12):
        configs = matcher.configurations
        if len(configs) == 1 and not configs[0][2]:
            stack, state, _, count = configs[0]
            for token in range(-1, gpt2.size + 1):
                got = tables._parser.advance_inside(stack, state, count, token)
                expected = tables._advance(configs, token, tables.outcomes)
                text = 0 <= token < gpt2.size and tables._text_token[token]
                walked = inside_walk(index.lexer, state, gpt2.token_bytes[token]) if text else ()
                if walked is None:
                    assert got is None, token
                    handed_over += 1
                else:
                    assert got == expected, token
                    inside += len(got)
        matcher.fill_bitmask(mask)
        allowed = np.flatnonzero(unpack_row(mask, gpt2.size))
        text = [t for t in allowed.tolist() if t not in gpt2.eos_token_ids]
        if not text:
            break
        assert matcher.advance(int(rng.choice(text)))
    assert inside > 0 and handed_over > 0


def _inside_answers(tables: GrammarTables, config: tuple[int, int, int, int], vocab):
    """Compare `advance_inside` with the walk of every reading for every token that stays
    inside the lexeme of one unconstrained configuration; (such tokens, refused ones)."""
    stack, state, cid, count = config
    assert not cid
    inside = refused = 0
    for token in range(vocab.size):
        text = tables._text_token[token]
        if not text or inside_walk(tables.lexer, state, vocab.token_bytes[token]) is None:
            continue
        got = tables._parser.advance_inside(stack, state, count, token)
        assert got == tables._advance((config,), token, tables.outcomes), token
        inside += 1
        refused += got == ()
    return inside, refused


def test_advance_inside_refuses_past_a_bound_and_on_a_rejected_exit_set(gpt2):
    """The two refusals random walks rarely meet: a counted string near its bound (at
    4 of `maxLength` 6, a token of 3 characters is refused) and an exit set the stack
    rejects (every lexer state given one)."""
    index = _index("schema", gpt2)
    tables = GrammarTables(index)
    matcher = GrammarMatcher(index, tables=tables)
    text = gpt2.encode('{"s":"abcd')
    assert matcher.advance_many(text) == len(text)
    (config,) = matcher.configurations
    assert tables._char_bound[config[1]] == 6 and config[3] == 4
    inside, refused = _inside_answers(tables, config, gpt2)
    assert 0 < refused < inside
    # Every state's exit set replaced by one the start stack rejects.
    parser = tables._parser
    rejected = next(x for x in range(len(index.xset_start) - 1) if not parser.xset_ok(0, x)[0])
    blocked = GrammarTables(
        dataclasses.replace(index, state_xset=np.full_like(index.state_xset, rejected))
    )
    start_context = int(index.table.context_of_state[index.table.start_state])
    start = int(index.lexer.context_start[start_context])
    inside, refused = _inside_answers(blocked, (0, start, 0, 0), gpt2)
    assert inside > 0 and refused == inside


def _replay(parser: Parser, terminals: list[int]) -> int:
    stack = 0
    for terminal in terminals:
        stack = parser.feed(stack, terminal)[0]
    return stack


def test_write_row_writes_the_row_into_a_bitmask(gpt2):
    """`Parser.write_row` (the matchers' fast path) copies `config_row` into a row of a
    2-D bitmask, a wider one (zeros past the row) and a strided view, and refuses rows
    out of range."""
    index = _index("json", gpt2)
    tables = GrammarTables(index)
    parser = tables._parser
    words = tables.num_words
    stacks = _reachable_stacks(index, parser, 6, seed=2)
    wide = np.full((3, words + 5), -1, dtype=np.int32)
    strided = np.full((2, 2 * words), -1, dtype=np.int32)[:, ::2]
    for stack in stacks:
        for state in range(0, index.lexer.num_states, 3):
            expected = tables.config_row(stack, state)[0]
            parser.write_row(wide, 1, stack, state)
            assert np.array_equal(wide[1, :words], expected) and not wide[1, words:].any()
            parser.write_row(strided, 0, stack, state)
            assert np.array_equal(strided[0], expected)
    flat = np.zeros(words, dtype=np.int32)
    with pytest.raises(ValueError):
        parser.write_row(flat, 1, 0, 0)
    with pytest.raises(ValueError):
        parser.write_row(np.zeros(words - 1, dtype=np.int32), 0, 0, 0)
    with pytest.raises(IndexError):
        parser.write_row(flat, 0, parser.num_stacks, 0)


@pytest.mark.parametrize("num_words", [1571, 4008])  # GPT-2 (an odd count) and Llama 3
def test_interning_sees_every_bit(num_words, gpt2):
    """Rows are interned by a digest and compared in full: a row differing in any one bit
    is another row, an equal one the same id."""
    index = _index("json", gpt2)
    # The index's tables with blank rows of this width (a Llama 3 row is 4008 words).
    wide = dataclasses.replace(
        index,
        masks=np.zeros((index.masks.shape[0], num_words), dtype=np.int32),
        kill_masks=np.zeros((index.kill_masks.shape[0], num_words), dtype=np.int32),
    )
    sequences = GrammarTables(index)._sequences
    parser = parser_for(wide, sequences, num_words, np.zeros(num_words, dtype=np.int32))
    rng = np.random.default_rng(num_words)
    row = rng.integers(-(2**31), 2**31, size=num_words, dtype=np.int32)
    first = parser.intern(row)
    assert parser.intern(row.copy()) == first
    assert parser.row_bytes(first) == row.tobytes()
    seen = {first}
    for word in [0, 1, num_words // 2, num_words - 2, num_words - 1]:
        for bit in range(32):
            other = row.copy()
            other[word] ^= np.int32(-(2**31)) if bit == 31 else np.int32(1 << bit)
            seen.add(parser.intern(other))
            assert parser.row_bytes(parser.intern(other)) == other.tobytes()
    assert len(seen) == 1 + 5 * 32
    with pytest.raises(ValueError):
        parser.intern(row[:-1])


def test_interned_rows_are_shared_and_read_only(gpt2):
    tables = GrammarTables(_index("json", gpt2))
    row = np.zeros(tables.num_words, dtype=np.int32)
    row[3] = 5
    stored = tables._intern_row(row)
    assert np.array_equal(stored, row) and not stored.flags.writeable
    assert tables._intern_row(row.copy()) is stored
    different = row.copy()
    different[-1] = 1
    assert tables._intern_row(different) is not stored


@pytest.mark.parametrize("vocab_size", [50257, 128257, 64])  # GPT-2, Llama 3, whole words
def test_fitting_rows_are_the_tokens_that_fit_each_room(vocab_size):
    """Row r of `fitting_rows` holds exactly the tokens whose grown items are at most r:
    counts of 0 fit every room, counts past the last room fit none, and no bit is set
    past the vocabulary."""
    from fsmcompile._native import fitting_rows
    from fsmcompile.tables.bits import bitmask_words, pack_bool_rows

    rng = np.random.default_rng(vocab_size)
    grown = rng.integers(0, 14, size=vocab_size, dtype=np.int32)
    grown[:: max(vocab_size // 50, 1)] = 200  # past every room
    rooms = 12
    rows = np.zeros((rooms, bitmask_words(vocab_size)), dtype=np.int32)
    fitting_rows(grown, rows)
    for room in range(rooms):
        assert np.array_equal(rows[room], pack_bool_rows((grown <= room)[None])[0]), room
    with pytest.raises(ValueError):  # not a whole number of rows
        fitting_rows(grown, np.zeros(rooms * bitmask_words(vocab_size) + 1, dtype=np.int32))


def test_items_grown_refuses_tables_that_do_not_fit():
    from fsmcompile._native import items_grown

    moves = np.array([[1, -1], [1, -1]], dtype=np.int32).reshape(-1)  # 2 states, 2 classes
    starts = np.ones(4, dtype=np.uint8)
    class_of = np.zeros(256, dtype=np.int32)
    level_bytes = np.zeros(3, dtype=np.uint8)
    tokens = np.array([0, 1], dtype=np.int64)
    positions = np.array([1, 2], dtype=np.int64)
    out = np.zeros(2, dtype=np.int32)

    def grow(parent_at, state=0, ids=tokens):
        items_grown(moves, starts, 2, class_of, parent_at, level_bytes, positions, ids, state, out)

    grow(np.array([-1, 0, 1], dtype=np.int64))  # a chain: 1 item, then 2
    assert out.tolist() == [1, 2]
    with pytest.raises(ValueError, match="parent after its child"):
        grow(np.array([-1, 2, 0], dtype=np.int64))
    with pytest.raises(ValueError, match="inconsistent"):
        grow(np.array([-1, 0, 1], dtype=np.int64), state=2)
    with pytest.raises(ValueError, match="token out of range"):
        grow(np.array([-1, 0, 1], dtype=np.int64), ids=np.array([0, 5], dtype=np.int64))
    with pytest.raises(TypeError, match="items of 4 bytes"):
        items_grown(moves, starts, 2, class_of, out, level_bytes, positions, tokens, 0, out)
