"""Read an artifact body's columns with every invariant the runtime relies on checked.

A checksum proves an artifact was not damaged in transit, not that its writer was this
compiler: a body with altered tables and a recomputed checksum used to load cleanly and
then crash the process in the C parser (a token id past the row written into the heap,
a sequence that is its own parent looping forever). So nothing of a body reaches an
index before this module has checked it: each column's dtype, shape and byte count, every
id against the table it points into, every offset array monotone and ending at its
table's length. A failure is an `ArtifactCorruptError` whose `pointer` names the column
(`/index/group_tokens`) and whose `expected` / `found` say what was wrong.

`Body` reads and checks one column; `dfa_columns` and `grammar_columns` check every column
of a regex / JSON Schema index and of a grammar index. The mask rows, whose decoded size
is bounded before anything is allocated, are `rows.py`'s; the parse table's loops,
`parse_checks.py`'s.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from fsmcompile.artifact.parse_checks import check_parse_table
from fsmcompile.errors import ArtifactCorruptError
from fsmcompile.vocabulary import Vocabulary

_INT_KINDS = "biu"


class Body:
    """A verified artifact body (`read_header`), read column by column with checks.

    `source` (the path or cache key) goes into every error.
    """

    def __init__(self, doc: dict[str, Any], source: str | None) -> None:
        self.doc = doc
        self.source = source

    def fail(
        self, pointer: str, message: str, *, expected: object = None, found: object = None
    ) -> ArtifactCorruptError:
        """The error for column `pointer` (raise it)."""
        return ArtifactCorruptError(
            message,
            self.source,
            pointer=pointer,
            expected=None if expected is None else str(expected),
            found=None if found is None else str(found),
        )

    def field(self, pointer: str) -> Any:
        """The value at a JSON pointer of the body (`/table/start_state`)."""
        value: Any = self.doc
        for part in pointer.strip("/").split("/"):
            if not isinstance(value, dict) or part not in value:
                raise self.fail(pointer, "artifact lacks a field")
            value = value[part]
        return value

    def integer(self, pointer: str, lo: int, hi: int) -> int:
        """An integer field with lo <= value < hi."""
        value = self.field(pointer)
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value < hi:
            raise self.fail(
                pointer,
                "integer out of range",
                expected=f"{lo} <= n < {hi}",
                found=repr(value)[:40],
            )
        return value

    def strings(self, pointer: str) -> tuple[str, ...]:
        """A list of strings."""
        value = self.field(pointer)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(
                pointer, "malformed field", expected="a list of strings", found=type(value).__name__
            )
        return tuple(value)

    def array(self, pointer: str, shape: tuple[int | None, ...]) -> npt.NDArray[Any]:
        """A packed integer or boolean array (`pack_array`) of `shape` (None: any length),
        as a read-only view of the body's bytes in its stored dtype.

        The byte count is checked against the shape before numpy sees either, so a shape
        that claims more than the bytes hold is refused, not allocated."""
        doc = self.field(pointer)
        if not isinstance(doc, dict):
            raise self.fail(
                pointer, "malformed array", expected="a packed array", found=type(doc).__name__
            )
        data, dtype_name, stored_shape = doc.get("data"), doc.get("dtype"), doc.get("shape")
        try:
            dtype = np.dtype(dtype_name) if isinstance(dtype_name, str) else None
        except TypeError:
            dtype = None
        if dtype is None or dtype.kind not in _INT_KINDS or dtype.itemsize > 8:
            raise self.fail(
                pointer,
                "array of the wrong type",
                expected="an integer or boolean dtype",
                found=repr(dtype_name)[:40],
            )
        if (
            not isinstance(stored_shape, list)
            or len(stored_shape) != len(shape)
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in stored_shape)
            or any(
                n < 0 or (want is not None and n != want)
                for n, want in zip(stored_shape, shape, strict=True)
            )
        ):
            raise self.fail(
                pointer,
                "array of the wrong shape",
                expected=_shape_text(shape),
                found=repr(stored_shape)[:60],
            )
        if not isinstance(data, bytes):
            raise self.fail(
                pointer, "malformed array", expected="raw bytes", found=type(data).__name__
            )
        count = 1
        for n in stored_shape:
            count *= n
        if count * dtype.itemsize != len(data):
            raise self.fail(
                pointer,
                "array bytes do not match its shape",
                expected=f"{count * dtype.itemsize} bytes",
                found=f"{len(data)}",
            )
        return np.frombuffer(data, dtype=dtype).reshape(stored_shape)

    def ids(
        self, pointer: str, shape: tuple[int | None, ...], lo: int, hi: int
    ) -> npt.NDArray[Any]:
        """An id column (`array`) whose every value v has lo <= v < hi; an integer dtype
        unless it is a flag column (hi <= 2): a boolean column would index as a mask, not
        as ids."""
        values = self.array(pointer, shape)
        if values.dtype.kind == "b" and hi > 2:
            raise self.fail(
                pointer, "id column of the wrong type", expected="an integer dtype", found="bool"
            )
        self.check_range(pointer, values, lo, hi)
        return values

    def check_range(
        self, pointer: str, values: npt.NDArray[Any], lo: int, hi: int, *, first: int = 0
    ) -> None:
        """Every value v of `values` has lo <= v < hi (reports the first one that does
        not, with its position; `values` may be the column from position `first` on).
        Cost: one pass in numpy."""
        if values.size == 0:
            return
        flat = values.reshape(-1)
        if flat.dtype.kind == "u" and flat.dtype.itemsize == 8:
            bad = flat >= np.uint64(max(hi, 0))
            if lo > 0:
                bad |= flat < np.uint64(lo)
        else:
            wide = flat.astype(np.int64)
            bad = (wide < lo) | (wide >= hi)
        if bad.any():
            at = int(np.argmax(bad))
            where = list(np.unravel_index(at, values.shape))
            where[0] += first
            raise self.fail(
                f"{pointer}/{'/'.join(str(int(i)) for i in where)}",
                "id out of range",
                expected=f"{lo} <= id < {hi}",
                found=str(flat[at]),
            )

    def offsets(self, pointer: str, count: int, total: int) -> npt.NDArray[np.int64]:
        """int64[count + 1]: an offset array starting at 0, never decreasing, ending at
        `total` (the length of the table it cuts into `count` slices)."""
        values = self.array(pointer, (count + 1,))
        self.check_range(pointer, values, 0, total + 1)
        starts = values.astype(np.int64)
        if int(starts[0]) != 0 or int(starts[-1]) != total:
            raise self.fail(
                pointer,
                "offsets do not span their table",
                expected=f"0 ... {total}",
                found=f"{starts[0]} ... {starts[-1]}",
            )
        falling = np.flatnonzero(starts[1:] < starts[:-1])
        if falling.shape[0]:
            at = int(falling[0]) + 1
            raise self.fail(
                f"{pointer}/{at}",
                "offsets decrease",
                expected=f">= {starts[at - 1]}",
                found=str(starts[at]),
            )
        return starts


def _shape_text(shape: tuple[int | None, ...]) -> str:
    return "[" + ", ".join("*" if n is None else str(n) for n in shape) + "]"


# -- regex and JSON Schema DFA indexes --------------------------------------------------


def dfa_columns(body: Body) -> dict[str, npt.NDArray[Any]]:
    """The DFA of a `TokenIndex` body: transitions int32[S, C] in [-1, S) with S, C >= 1,
    class_of_byte int32[256] in [0, C), accepting bool[S] (0 or 1)."""
    transitions = _transitions(body, "/dfa/transitions")
    states, classes = transitions.shape
    return {
        "transitions": transitions,
        "class_of_byte": _class_of_byte(body, "/dfa/class_of_byte", classes),
        "accepting": body.ids("/dfa/accepting", (states,), 0, 2),
    }


def _transitions(body: Body, pointer: str) -> npt.NDArray[Any]:
    """A byte automaton's moves: int[S, C], S and C >= 1, each -1 (dead) or a state."""
    transitions = body.array(pointer, (None, None))
    states, classes = transitions.shape
    if states < 1 or classes < 1:
        raise body.fail(
            pointer, "empty automaton", expected="S >= 1, C >= 1", found=f"[{states}, {classes}]"
        )
    body.check_range(pointer, transitions, -1, states)
    return transitions


def _class_of_byte(body: Body, pointer: str, classes: int) -> npt.NDArray[Any]:
    """int[256] in [0, C), every class owning a byte: classes are sets of bytes, and
    jump-forward walks one byte of each."""
    class_of_byte = body.ids(pointer, (256,), 0, classes)
    empty = np.flatnonzero(np.bincount(class_of_byte.astype(np.int64), minlength=classes) == 0)
    if empty.shape[0]:
        raise body.fail(
            pointer,
            "a byte class owns no byte",
            expected="every class in use",
            found=f"class {int(empty[0])} empty",
        )
    return class_of_byte


# -- grammar indexes ---------------------------------------------------------------------


def max_sequence_depth(vocab: Vocabulary) -> int:
    """The most terminals one token's bytes can emit: a lexeme is at least one byte, so
    one per byte of the longest token (the C parser applies sequences recursively)."""
    return int(vocab.max_token_bytes) + 1


def grammar_columns(
    body: Body, vocab_size: int, max_sequence_depth: int
) -> dict[str, npt.NDArray[Any]]:
    """Every column of a `GrammarIndex` body except its mask rows, each checked against
    the tables it points into (see docs/artifact.md for the list). Mask row counts are
    checked by the caller once the rows are read (`state_kill`, `group_dense`)."""
    out: dict[str, npt.NDArray[Any]] = {}
    names = body.strings("/terminal_names")
    terminals = len(names)
    out["ignored"] = body.ids("/index/ignored", (terminals,), 0, 2)
    out.update(_lexer_columns(body, terminals, out["ignored"]))
    states, classes = out["transitions"].shape
    contexts = out["context_start"].shape[0]
    out.update(_table_columns(body, terminals, contexts))
    check_parse_table(body, out, int(body.field("/table/start_state")))
    out.update(_sequence_columns(body, terminals, contexts, max_sequence_depth))
    xsets = body.array("/index/xset_start", (None,)).shape[0] - 1
    if xsets < 1:
        raise body.fail("/index/xset_start", "no exit sets", expected=">= 1", found=xsets)
    pairs = body.array("/index/xset_terminal", (None,)).shape[0]
    out["xset_start"] = body.offsets("/index/xset_start", xsets, pairs)
    out["xset_terminal"] = body.ids("/index/xset_terminal", (pairs,), 0, terminals)
    out["xset_context"] = body.ids("/index/xset_context", (pairs,), -2, contexts)
    out["state_xset"] = body.ids("/index/state_xset", (states,), 0, xsets)
    groups = body.array("/index/group_seq", (None,)).shape[0]
    entries = body.array("/index/entry_group", (None,)).shape[0]
    out["origin_entry_start"] = body.offsets("/index/origin_entry_start", states, entries)
    out["entry_group"] = body.ids("/index/entry_group", (entries,), 0, groups)
    sequences = out["seq_parent"].shape[0]
    out["group_seq"] = body.ids("/index/group_seq", (groups,), 0, sequences)
    out["group_xset"] = body.ids("/index/group_xset", (groups,), 0, xsets)
    out["group_dense"] = body.array("/index/group_dense", (groups,))
    listed = body.array("/index/group_tokens", (None,)).shape[0]
    out["group_token_start"] = body.offsets("/index/group_token_start", groups, listed)
    out["group_tokens"] = body.ids("/index/group_tokens", (listed,), 0, vocab_size)
    out["state_kill"] = body.array("/index/state_kill", (states,))
    killed = np.flatnonzero(out["state_kill"].astype(np.int64) >= 0)
    unlabelled = killed[out["label"][killed] < 0]
    if unlabelled.shape[0]:
        at = int(unlabelled[0])
        raise body.fail(
            f"/index/state_kill/{at}",
            "kill row on a state without a label",
            expected="-1",
            found=int(out["state_kill"][at]),
        )
    return out


def _lexer_columns(
    body: Body, terminals: int, ignored: npt.NDArray[Any]
) -> dict[str, npt.NDArray[Any]]:
    transitions = _transitions(body, "/lexer/transitions")
    states, classes = transitions.shape
    context_start = body.array("/lexer/context_start", (None,))
    if context_start.shape[0] < 1:
        raise body.fail("/lexer/context_start", "no lexer context", expected=">= 1", found=0)
    body.check_range("/lexer/context_start", context_start, 0, states)
    contexts = context_start.shape[0]
    label = body.ids("/lexer/label", (states,), -1, terminals)
    # No lexeme is empty, so no context starts in a labelled state. The C rows rely on
    # it: a labelled state's row reads its next contexts' start rows, which would
    # otherwise recurse without end.
    labelled_starts = np.flatnonzero(label[context_start.astype(np.int64)] >= 0)
    if labelled_starts.shape[0]:
        k = int(labelled_starts[0])
        raise body.fail(
            f"/lexer/context_start/{k}",
            "a context starts in a labelled state (an empty lexeme)",
            expected="a state with label -1",
            found=f"state {int(context_start[k])}",
        )
    restart = body.ids("/lexer/restart_context", (states,), -1, contexts)
    labelled = np.flatnonzero(label.astype(np.int64) >= 0)
    stranded = labelled[(ignored[label[labelled]] != 0) & (restart[labelled] < 0)]
    if stranded.shape[0]:
        raise body.fail(
            f"/lexer/restart_context/{int(stranded[0])}",
            "an ignored terminal's state has no restart context",
            expected=f"0 <= context < {contexts}",
            found=-1,
        )
    return {
        "transitions": transitions,
        "class_of_byte": _class_of_byte(body, "/lexer/class_of_byte", classes),
        "label": label,
        "context_start": context_start,
        "restart_context": restart,
        "char_bound": body.ids("/lexer/char_bound", (states,), -1, 1 << 31),
        "char_start": body.ids("/lexer/char_start", (states, classes), 0, 2),
    }


def _table_columns(body: Body, terminals: int, contexts: int) -> dict[str, npt.NDArray[Any]]:
    action = body.array("/table/action", (None, terminals + 1))
    states = action.shape[0]
    if states < 1:
        raise body.fail("/table/action", "empty parse table", expected=">= 1 state", found=0)
    goto = body.array("/table/goto", (states, None))
    nonterminals = goto.shape[1]
    rules = body.array("/table/rule_lhs", (None,)).shape[0]
    # 0 error, s + 1 shift to state s, -r - 1 reduce by rule r.
    body.check_range("/table/action", action, -rules, states + 1)
    body.check_range("/table/goto", goto, -1, states)
    out = {
        "action": action,
        "goto": goto,
        "rule_lhs": body.ids("/table/rule_lhs", (rules,), 0, nonterminals),
        "rule_len": body.ids("/table/rule_len", (rules,), 0, 1 << 16),
        "context_of_state": body.ids("/table/context_of_state", (states,), 0, contexts),
    }
    body.integer("/table/start_state", 0, states)
    body.integer("/table/end_state", 0, states)
    return out


def _sequence_columns(
    body: Body, terminals: int, contexts: int, max_depth: int
) -> dict[str, npt.NDArray[Any]]:
    """Emitted sequences: id 0 the empty one (-1, -1, -1); every other id s extends a
    sequence with a smaller id (so no chain of parents loops), by a terminal, after
    which a context or a context set (id K + i) was assumed."""
    sets = body.array("/index/ctxset_start", (None,)).shape[0] - 1
    if sets < 0:
        raise body.fail("/index/ctxset_start", "no offsets", expected=">= 1 entry", found=0)
    members = body.array("/index/ctxset_context", (None,)).shape[0]
    out = {
        "ctxset_start": body.offsets("/index/ctxset_start", sets, members),
        "ctxset_context": body.ids("/index/ctxset_context", (members,), 0, contexts),
    }
    parent = body.array("/index/seq_parent", (None,))
    count = parent.shape[0]
    if count < 1:
        raise body.fail("/index/seq_parent", "no empty sequence", expected=">= 1 entry", found=0)
    terminal = body.array("/index/seq_terminal", (count,))
    context = body.array("/index/seq_context", (count,))
    for name, column in (
        ("seq_parent", parent),
        ("seq_terminal", terminal),
        ("seq_context", context),
    ):
        if int(column[0]) != -1:
            raise body.fail(
                f"/index/{name}/0",
                "the empty sequence is not empty",
                expected=-1,
                found=int(column[0]),
            )
    body.check_range("/index/seq_terminal", terminal[1:], 0, terminals, first=1)
    body.check_range("/index/seq_context", context[1:], 0, contexts + sets, first=1)
    wide = parent.astype(np.int64)
    body.check_range("/index/seq_parent", wide[1:], 0, count, first=1)
    later = np.flatnonzero(wide[1:] >= np.arange(1, count))
    if later.shape[0]:
        at = int(later[0]) + 1
        raise body.fail(
            f"/index/seq_parent/{at}",
            "a sequence's parent is not an earlier one",
            expected=f"< {at}",
            found=int(wide[at]),
        )
    # Parents come first, so one pass in id order gives every depth.
    depth = np.zeros(count, dtype=np.int64)
    for lo in range(1, count, 4096):  # chunks: a parent is usually in an earlier chunk
        hi = min(lo + 4096, count)
        chunk = depth[wide[lo:hi]] + 1
        while True:  # at most max_depth + 2 rounds: deeper is refused below
            depth[lo:hi] = chunk
            again = depth[wide[lo:hi]] + 1
            if np.array_equal(again, chunk) or int(chunk.max()) > max_depth:
                break
            chunk = again
    deepest = int(depth.max(initial=0))
    if deepest > max_depth:
        at = int(np.argmax(depth))
        raise body.fail(
            f"/index/seq_parent/{at}",
            "sequence deeper than any token",
            expected=f"<= {max_depth} terminals",
            found=deepest,
        )
    return out | {"seq_parent": parent, "seq_terminal": terminal, "seq_context": context}
