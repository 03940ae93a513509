"""Every invariant the artifact loader checks, one crafted checksum-valid artifact each.

Each case edits one table of a real gpt2 artifact, frames it again (valid checksum) and
expects `ArtifactCorruptError` whose `pointer` names the edited table (or the entry of
the parse table the edit breaks). Before the validator, most of these loaded cleanly and
then crashed or hung the process on the first mask.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from artifact_mutations import (
    artifact_bytes,
    body_of,
    edit_array,
    get_array,
    reframe,
    set_array,
)
from support import load_vocabulary

from fsmcompile import artifact, compile_regex
from fsmcompile.artifact.rows import DECODE_RATIO, MAX_DECODED_BYTES_ENV
from fsmcompile.errors import ArtifactCorruptError
from fsmcompile.vocabulary import Vocabulary

Edit = Callable[[dict[str, Any]], None]


def at(pointer: str, index: tuple[int, ...], value: int) -> Edit:
    """Set one element of the array at `pointer`."""

    def edit(doc: dict[str, Any]) -> None:
        def put(a: np.ndarray) -> None:
            a[index] = value

        edit_array(doc, pointer, put)

    return edit


def as_bytes(pointer: str, index: tuple[int, ...], value: int) -> Edit:
    """A boolean column stored as uint8 with one value that is not 0 or 1."""

    def edit(doc: dict[str, Any]) -> None:
        set_array(doc, pointer, get_array(doc, pointer).astype(np.uint8))
        at(pointer, index, value)(doc)

    return edit


def size_of(doc: dict[str, Any], pointer: str, axis: int = 0) -> int:
    return int(get_array(doc, pointer).shape[axis])


def relative(pointer: str, index: tuple[int, ...], size_pointer: str, axis: int, extra: int):
    """Set one element to the size of another table (plus `extra`): one past its end."""

    def edit(doc: dict[str, Any]) -> None:
        at(pointer, index, size_of(doc, size_pointer, axis) + extra)(doc)

    return edit


def goto_target(doc: dict[str, Any]) -> tuple[int, int]:
    """(state, nonterminal A) of a state entered by a goto on A (A is its only symbol)."""
    goto = get_array(doc, "/table/goto")
    below, lhs = (int(x[0]) for x in np.nonzero(goto >= 0))
    return int(goto[below, lhs]), lhs


def reduce_to_itself(doc: dict[str, Any], length: int) -> None:
    """A state entered on A reduces, on lookahead 0, by a rule of `length` symbols whose
    left side is A. Length 1: the reduction pops the state and the goto pushes it back,
    forever. Length 0 (the state's goto on A made itself): the stack grows forever. Every
    id stays in range and every state keeps one accessing symbol: only the loop check
    can refuse it."""
    state, lhs = goto_target(doc)
    rule = 0
    at("/table/rule_lhs", (rule,), lhs)(doc)
    at("/table/rule_len", (rule,), length)(doc)
    at("/table/action", (state, 0), -(rule + 1))(doc)
    if length == 0:
        at("/table/goto", (state, lhs), state)(doc)


def redirect_shift(doc: dict[str, Any]) -> None:
    """A shift on one terminal into a state entered by another one."""
    action = get_array(doc, "/table/action")
    s, t = (int(x[0]) for x in np.nonzero(action > 0))
    others = np.nonzero((action > 0) & (np.arange(action.shape[1]) != t))
    target = int(action[others[0][0], others[1][0]])
    at("/table/action", (s, t), target)(doc)


def decreasing_inner_offset(pointer: str) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        def put(a: np.ndarray) -> None:
            a[1] = a[2] + 1

        edit_array(doc, pointer, put)

    return edit


def dropped(pointer: str) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        *parents, key = pointer.strip("/").split("/")
        node = doc
        for part in parents:
            node = node[part]
        del node[key]

    return edit


def float_column(pointer: str) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        set_array(doc, pointer, get_array(doc, pointer).astype(np.float64))

    return edit


def short_data(pointer: str) -> Edit:
    """The shape claims more elements than the bytes hold (a 'huge count')."""

    def edit(doc: dict[str, Any]) -> None:
        node = doc
        for part in pointer.strip("/").split("/"):
            node = node[part]
        node["shape"] = [10**12] + node["shape"][1:]

    return edit


GRAMMAR_CASES: list[tuple[str, str, Edit, str]] = [
    (
        "json_grammar",
        "byte class owning no byte",
        at("/lexer/class_of_byte", (110,), 1),
        "/lexer/class_of_byte",
    ),
    # (artifact, what, edit, pointer the error names)
    (
        "lark",
        "lexer move past the states",
        relative("/lexer/transitions", (0, 1), "/lexer/transitions", 0, 0),
        "/lexer/transitions/0/1",
    ),
    (
        "lark",
        "byte class past the classes",
        relative("/lexer/class_of_byte", (5,), "/lexer/transitions", 1, 0),
        "/lexer/class_of_byte/5",
    ),
    (
        "lark",
        "label past the terminals",
        relative("/lexer/label", (0,), "/index/ignored", 0, 0),
        "/lexer/label/0",
    ),
    (
        "lark",
        "negative context start",
        at("/lexer/context_start", (0,), -1),
        "/lexer/context_start/0",
    ),
    (
        "lark",
        "restart context past the contexts",
        relative("/lexer/restart_context", (0,), "/lexer/context_start", 0, 0),
        "/lexer/restart_context/0",
    ),
    (
        "lark",
        "ignored terminal without restart",
        at("/lexer/restart_context", (1,), -1),
        "/lexer/restart_context/1",
    ),
    ("lark", "char bound below -1", at("/lexer/char_bound", (0,), -5), "/lexer/char_bound/0"),
    (
        "lark",
        "char start not a flag",
        as_bytes("/lexer/char_start", (0, 0), 7),
        "/lexer/char_start/0/0",
    ),
    (
        "lark",
        "shift past the states",
        relative("/table/action", (0, 1), "/table/action", 0, 1),
        "/table/action/0/1",
    ),
    (
        "lark",
        "reduce of a rule that does not exist",
        at("/table/action", (0, 1), -(10**6)),
        "/table/action/0/1",
    ),
    (
        "lark",
        "goto past the states",
        relative("/table/goto", (0, 1), "/table/action", 0, 0),
        "/table/goto/0/1",
    ),
    ("lark", "huge rule_lhs", at("/table/rule_lhs", (0,), 10**9), "/table/rule_lhs/0"),
    ("json_grammar", "huge rule_lhs", at("/table/rule_lhs", (3,), 2**31 - 1), "/table/rule_lhs/3"),
    ("lark", "negative rule_len", at("/table/rule_len", (0,), -1), "/table/rule_len/0"),
    ("lark", "rule popping past the stack", at("/table/rule_len", (0,), 5000), "/table/action"),
    ("lark", "unit reductions that loop", lambda d: reduce_to_itself(d, 1), "/table/action"),
    (
        "json_grammar",
        "unit reductions that loop",
        lambda d: reduce_to_itself(d, 1),
        "/table/action",
    ),
    ("lark", "empty rule growing the stack", lambda d: reduce_to_itself(d, 0), "/table/action"),
    (
        "json_grammar",
        "empty rule growing the stack",
        lambda d: reduce_to_itself(d, 0),
        "/table/action",
    ),
    ("lark", "shift to a state of another symbol", redirect_shift, "/table/action"),
    (
        "lark",
        "context of a state past the contexts",
        relative("/table/context_of_state", (0,), "/lexer/context_start", 0, 0),
        "/table/context_of_state/0",
    ),
    (
        "lark",
        "start state past the table",
        lambda d: d["table"].update(start_state=10**6),
        "/table/start_state",
    ),
    ("lark", "end state negative", lambda d: d["table"].update(end_state=-1), "/table/end_state"),
    ("lark", "ignored not a flag", as_bytes("/index/ignored", (0,), 3), "/index/ignored/0"),
    ("lark", "sequence its own parent", at("/index/seq_parent", (5,), 5), "/index/seq_parent/5"),
    ("lark", "sequence parent after it", at("/index/seq_parent", (5,), 9), "/index/seq_parent/5"),
    (
        "lark",
        "empty sequence with a parent",
        at("/index/seq_parent", (0,), 0),
        "/index/seq_parent/0",
    ),
    (
        "lark",
        "sequence terminal past the terminals",
        relative("/index/seq_terminal", (3,), "/index/ignored", 0, 0),
        "/index/seq_terminal/3",
    ),
    (
        "json_grammar",
        "sequence context past the context sets",
        relative("/index/seq_context", (3,), "/lexer/context_start", 0, 2),
        "/index/seq_context/3",
    ),
    (
        "json_grammar",
        "context set offsets decreasing",
        decreasing_inner_offset("/index/ctxset_start"),
        "/index/ctxset_start/",
    ),
    (
        "json_grammar",
        "context set member past the contexts",
        relative("/index/ctxset_context", (1,), "/lexer/context_start", 0, 0),
        "/index/ctxset_context/1",
    ),
    (
        "lark",
        "exit set past the sets",
        relative("/index/state_xset", (0,), "/index/xset_start", 0, 0),
        "/index/state_xset/0",
    ),
    (
        "lark",
        "exit pair offsets decreasing",
        decreasing_inner_offset("/index/xset_start"),
        "/index/xset_start/",
    ),
    (
        "lark",
        "exit pair terminal past the terminals",
        relative("/index/xset_terminal", (0,), "/index/ignored", 0, 0),
        "/index/xset_terminal/0",
    ),
    (
        "lark",
        "exit pair context below END_ONLY",
        at("/index/xset_context", (0,), -3),
        "/index/xset_context/0",
    ),
    (
        "lark",
        "negative origin entry offset",
        at("/index/origin_entry_start", (1,), -1),
        "/index/origin_entry_start/1",
    ),
    (
        "lark",
        "origin entry offsets decreasing",
        decreasing_inner_offset("/index/origin_entry_start"),
        "/index/origin_entry_start/",
    ),
    (
        "lark",
        "entry group past the groups",
        relative("/index/entry_group", (0,), "/index/group_seq", 0, 0),
        "/index/entry_group/0",
    ),
    ("lark", "negative entry group", at("/index/entry_group", (0,), -1), "/index/entry_group/0"),
    (
        "lark",
        "group sequence past the sequences",
        relative("/index/group_seq", (0,), "/index/seq_parent", 0, 0),
        "/index/group_seq/0",
    ),
    ("lark", "negative group exit set", at("/index/group_xset", (0,), -1), "/index/group_xset/0"),
    (
        "lark",
        "group dense row past the rows",
        at("/index/group_dense", (0,), 10**6),
        "/index/group_dense/0",
    ),
    (
        "lark",
        "group token offsets decreasing",
        decreasing_inner_offset("/index/group_token_start"),
        "/index/group_token_start/",
    ),
    (
        "lark",
        "group token past the vocabulary",
        at("/index/group_tokens", (0,), 1 << 30),
        "/index/group_tokens/0",
    ),
    ("lark", "negative group token", at("/index/group_tokens", (0,), -7), "/index/group_tokens/0"),
    ("lark", "kill row past the rows", at("/index/state_kill", (1,), 10**6), "/index/state_kill/1"),
    (
        "lark",
        "kill row on an unlabelled state",
        at("/index/state_kill", (0,), 0),
        "/index/state_kill/0",
    ),
    ("lark", "negative kill mask id", at("/kill_masks/ids", (0,), -1), "/kill_masks/ids/0"),
    ("lark", "dropped column", dropped("/index/group_tokens"), "/index/group_tokens"),
    ("lark", "dropped table", dropped("/table"), "/table"),
    ("lark", "float column", float_column("/index/seq_parent"), "/index/seq_parent"),
    ("lark", "shape claiming a huge count", short_data("/index/entry_group"), "/index/entry_group"),
    (
        "lark",
        "terminal names not strings",
        lambda d: d.update(terminal_names=[1, 2]),
        "/terminal_names",
    ),
]

DFA_CASES: list[tuple[str, str, Edit, str]] = [
    (
        "regex",
        "move past the states",
        relative("/dfa/transitions", (0, 3), "/dfa/transitions", 0, 0),
        "/dfa/transitions/0/3",
    ),
    ("regex", "move below dead", at("/dfa/transitions", (0, 3), -2), "/dfa/transitions/0/3"),
    (
        "regex",
        "byte class past the classes",
        relative("/dfa/class_of_byte", (9,), "/dfa/transitions", 1, 0),
        "/dfa/class_of_byte/9",
    ),
    (
        "regex",
        "byte class owning no byte",
        lambda d: edit_array(d, "/dfa/class_of_byte", lambda a: np.where(a == a[ord("@")], 0, a)),
        "/dfa/class_of_byte",
    ),
    ("regex", "accepting not a flag", at("/dfa/accepting", (0,), 2), "/dfa/accepting/0"),
    (
        "json_dfa",
        "state mask past the masks",
        relative("/state_mask", (0,), "/masks/kinds", 0, 0),
        "/state_mask/0",
    ),
    ("json_dfa", "negative state mask", at("/state_mask", (0,), -1), "/state_mask/0"),
    (
        "json_dfa",
        "state mask column too short",
        lambda d: edit_array(d, "/state_mask", lambda a: a[:-1]),
        "/state_mask",
    ),
    (
        "json_dfa",
        "negative mask id (wraps to a real token)",
        at("/masks/ids", (0,), -1),
        "/masks/ids/0",
    ),
    ("json_dfa", "mask id past the vocabulary", at("/masks/ids", (0,), 50257), "/masks/ids/0"),
    ("json_dfa", "mask ids not increasing", at("/masks/ids", (3,), 0), "/masks/ids/3"),
    ("json_dfa", "mask row kind unknown", at("/masks/kinds", (0,), 3), "/masks/kinds/0"),
    (
        "json_dfa",
        "mask lengths not adding up",
        at("/masks/id_lengths", (0,), 2),
        "/masks/id_lengths",
    ),
    ("json_dfa", "negative mask length", at("/masks/id_lengths", (0,), -1), "/masks/id_lengths/0"),
    (
        "regex",
        "dense row bits past the vocabulary",
        at("/masks/dense", (0, 1570), -1),
        "/masks/dense/0",
    ),
    (
        "regex",
        "dense rows of the wrong width",
        lambda d: edit_array(d, "/masks/dense", lambda a: a[:, :-1]),
        "/masks/dense",
    ),
    (
        "regex",
        "vocab_size disagreeing with the fingerprint",
        lambda d: d.update(vocab_size=7),
        "/vocab_size",
    ),
    ("regex", "dropped masks", dropped("/masks"), "/masks"),
    ("regex", "dropped accepting", dropped("/dfa/accepting"), "/dfa/accepting"),
]


@pytest.fixture(scope="module")
def gpt2_vocab() -> Vocabulary:
    return load_vocabulary("gpt2")


@pytest.mark.parametrize(
    ("name", "edit", "pointer"),
    [pytest.param(n, e, p, id=f"{n}: {what}") for n, what, e, p in GRAMMAR_CASES + DFA_CASES],
)
def test_artifact_table_edit_is_refused_naming_the_table(
    gpt2_vocab: Vocabulary, name: str, edit: Edit, pointer: str
) -> None:
    doc = body_of(name)
    edit(doc)
    with pytest.raises(ArtifactCorruptError) as exc:
        artifact.from_bytes(reframe(doc), gpt2_vocab, source="crafted")
    assert exc.value.pointer is not None and exc.value.pointer.startswith(pointer), str(exc.value)
    assert exc.value.source == "crafted"
    assert pointer.split("/")[1] in str(exc.value)


@pytest.mark.parametrize("name", ["regex", "json_dfa", "json_grammar", "lark"])
def test_artifact_real_index_passes_every_check(gpt2_vocab: Vocabulary, name: str) -> None:
    data = artifact_bytes(name)
    assert artifact.to_bytes(artifact.from_bytes(data, gpt2_vocab)) == data


def test_artifact_out_of_range_error_reports_expected_and_found(gpt2_vocab: Vocabulary) -> None:
    doc = body_of("lark")
    at("/index/group_tokens", (4,), 99999)(doc)
    with pytest.raises(ArtifactCorruptError) as exc:
        artifact.from_bytes(reframe(doc), gpt2_vocab)
    assert exc.value.pointer == "/index/group_tokens/4"
    assert exc.value.expected == "0 <= id < 50257"
    assert exc.value.found == "99999"


def empty_rows_body(rows: int) -> bytes:
    """A regex artifact whose mask table lists `rows` empty rows (9 stored bytes each)."""
    doc = body_of("regex")
    set_array(doc, "/masks/kinds", np.ones(rows, dtype=np.uint8))
    set_array(doc, "/masks/id_lengths", np.zeros(rows, dtype=np.int64))
    set_array(doc, "/masks/ids", np.zeros(0, dtype=np.int32))
    set_array(doc, "/masks/dense", np.zeros((0, 1571), dtype=np.int32))
    return reframe(doc)


@pytest.mark.parametrize(("rows", "stored_mb"), [(200_000, 1.8), (1_000_000, 9)])
def test_artifact_mask_bomb_is_refused_fast_in_bounded_memory(
    gpt2_vocab: Vocabulary, rows: int, stored_mb: float
) -> None:
    """200k empty rows took 12 s and 1.4 GB before; 1M asked for 5.85 GiB."""
    data = empty_rows_body(rows)
    assert len(data) == pytest.approx(stored_mb * 1e6, rel=0.1)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ArtifactCorruptError, match="load budget") as exc:
            artifact.from_bytes(data, gpt2_vocab)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 5
    assert peak < 8 * len(data)  # the body's own arrays and a few copies, never the rows
    assert exc.value.pointer == "/masks"
    assert f"{rows * 1571 * 4} bytes" in str(exc.value)


def test_artifact_decode_budget_is_the_operator_ceiling_or_a_multiple(
    gpt2_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Short lists decode to far more than they store: fine under the ceiling, refused
    over it unless within DECODE_RATIO x their stored bytes."""
    # Each state of a literal allows a handful of tokens: rows of a few ids.
    data = artifact.to_bytes(compile_regex("hello, wide world!", gpt2_vocab, cache=False))
    decoded = artifact.from_bytes(data, gpt2_vocab).masks.nbytes
    stored = sum(
        len(artifact.read_header(data)["masks"][p]["data"])
        for p in ("kinds", "dense", "ids", "id_lengths")
    )
    assert decoded > DECODE_RATIO * stored
    with pytest.raises(ArtifactCorruptError, match="load budget"):
        artifact.from_bytes(data, gpt2_vocab, max_decoded_bytes=decoded - 1)
    artifact.from_bytes(data, gpt2_vocab, max_decoded_bytes=decoded)
    monkeypatch.setenv(MAX_DECODED_BYTES_ENV, str(decoded - 1))
    with pytest.raises(ArtifactCorruptError, match=MAX_DECODED_BYTES_ENV):
        artifact.from_bytes(data, gpt2_vocab)
    dense = artifact_bytes("regex")  # mostly bitset rows: within the ratio at any ceiling
    artifact.from_bytes(dense, gpt2_vocab, max_decoded_bytes=0)


def test_artifact_negative_mask_id_never_allows_a_real_token(gpt2_vocab: Vocabulary) -> None:
    """-1 used to wrap to the last token: the mask allowed a token `advance` refused."""
    doc = body_of("json_dfa")
    ids = get_array(doc, "/masks/ids")
    ids[0] = -1
    set_array(doc, "/masks/ids", np.sort(ids))
    with pytest.raises(ArtifactCorruptError, match="id out of range") as exc:
        artifact.from_bytes(reframe(doc), gpt2_vocab)
    assert exc.value.found == "-1"
