"""Type stub of `fsmcompile._native`, the one C extension module (native/*.c).

Names with a leading underscore exist only here, to type the arguments;
tests/unit/test_native_stub.py checks that the module and this stub name the same public
functions and types.
"""

from array import array
from typing import Protocol

import numpy as np
import numpy.typing as npt

class _ParserTables(Protocol):
    """What `Parser` reads by name (`fsmcompile.runtime.parser_tables.ParserTables`)."""

    @property
    def action(self) -> npt.NDArray[np.int32]: ...
    @property
    def seq_parent(self) -> array[int]: ...
    @property
    def seq_terminal(self) -> array[int]: ...
    @property
    def seq_context(self) -> array[int]: ...
    @property
    def num_symbols(self) -> int: ...
    @property
    def num_words(self) -> int: ...

class _RunTables(Protocol):
    """What `Parser.regroup` reads by name: the runs, token groups, dense rows and
    context sets of `fsmcompile.runtime.parser_tables.ParserTables`."""

    @property
    def origin_run(self) -> npt.NDArray[np.int64]: ...
    @property
    def run_seq(self) -> npt.NDArray[np.int64]: ...
    @property
    def masks(self) -> npt.NDArray[np.int32]: ...

# ---- the runtime: grammar parser, DFA token steps, bitmask rows (parser_*.c, dfa_walk.c,
# bitmask.c, counted.c)

class Parser:
    """The LALR parser, mask rows and lexer steps of one grammar index (not thread-safe).

    `tables` holds every table by name (`fsmcompile.runtime.parser_tables.ParserTables`);
    a table missing is a TypeError naming it. The constructor raises ValueError naming the
    table for one of the wrong item type, dimensions or size, and ValueError for tables
    that contradict one another (an id out of its table, offsets out of order, a reduction
    past the stack's bottom, a malformed emitted sequence); a call that meets what only
    running shows (a reduction loop, a sequence appended wrong) raises ValueError, and so
    does every call after it. A row that needs a pending lexer state (`origin_run` pair
    -1, -1) raises `OriginPending` instead, only that call.
    """

    def __new__(cls, tables: _ParserTables, /) -> Parser: ...
    @property
    def num_stacks(self) -> int: ...
    @property
    def num_rows(self) -> int: ...
    def feed(self, stack: int, terminal: int, /) -> tuple[int, int]: ...
    def accepts_end(self, stack: int, /) -> tuple[bool, int]: ...
    def apply(self, stack: int, seq: int, /) -> tuple[int, int]: ...
    def xset_ok(self, stack: int, xset: int, /) -> tuple[bool, int]: ...
    def row_plan(self, stack: int, lexer_state: int, /) -> tuple[bytes, int, bool]: ...
    def config_accepts_end(self, stack: int, lexer_state: int, /) -> tuple[bool, int]: ...
    def union(self, runs: bytes, /) -> bytes: ...
    def row(self, stack: int, lexer_state: int, /) -> tuple[int, int]: ...
    def walk_bytes(
        self, lexer_state: int, constraint_states: list[int], data: bytes, /
    ) -> list[tuple[tuple[tuple[int, int], ...], int, tuple[int, ...], int, int]]: ...
    def advance_inside(
        self, stack: int, lexer_state: int, count: int, token: int, /
    ) -> tuple[tuple[int, int, int, int], ...] | None: ...
    def write_row(self, bitmask: object, row: int, stack: int, lexer_state: int, /) -> None: ...
    def row_bytes(self, row: int, /) -> bytes: ...
    def intern(self, row: object, /) -> int: ...
    def regroup(self, tables: _RunTables, /) -> None:
        """Swap in new runs, token groups, dense rows and context sets: `origin_run`,
        `run_seq`, `run_xset`, `run_skip`, `run_start`, `run_groups`, `group_dense`,
        `group_token_start`, `group_tokens`, `masks`, `ctxset_start`, `ctxset_context`,
        each of the item type the constructor takes, read by name.

        For a lazy grammar index, which computes a lexer state's runs when a row first
        needs them (`OriginPending`). The caller only appends: ids of runs, groups, dense
        rows and context sets handed in before keep their meaning, since every cache
        (rows, unions by run ids, dense-row combinations) stays. One that breaks this
        gets wrong rows, never a read out of bounds: every id is checked against the new
        tables.

        Raises:
            TypeError: a table is missing.
            ValueError: a table of the wrong item type or size, or one that contradicts
                the rest (the constructor's checks); the old tables then stay, and the
                parser answers as before.
        """
    def top(self, stack: int, /) -> tuple[int, int]: ...
    def suffix(self, stack: int, length: int, /) -> tuple[int, ...]: ...

class OriginPending(LookupError):
    """A row needs the runs of a lexer state (`args[0]`) that a lazy grammar index has not
    computed yet: compute them, `Parser.regroup`, and ask again. Raised by `row`,
    `write_row` and `row_plan`; the parser stays usable."""

class DfaWalk:
    """A DFA index's token steps for the regex matcher (read-only tables)."""

    def __new__(
        cls,
        *,
        transitions: object,
        class_of_byte: object,
        text_bytes: object,
        text_start: object,
        state_mask: object,
        masks: object,
        num_classes: int,
        num_words: int,
    ) -> DfaWalk: ...
    def next_state(self, state: int, token: int, /) -> int: ...

def write_row(bitmask: object, row: int, src: object, /) -> None: ...
def fitting_rows(grown: object, rows: object, /) -> None: ...
def items_grown(
    moves: object,
    starts: object,
    num_classes: int,
    class_of_byte: object,
    parent_at: object,
    level_bytes: object,
    token_positions: object,
    token_ids: object,
    state: int,
    out: object,
    /,
) -> None: ...

# ---- automaton: reachability (reach.c), minimization (refine.c), subset and product
# constructions (subset.c, subset_overlap.c)

def mark_reached(trans: object, marks: object, backward: bool, /) -> None: ...
def bfs_order(trans: object, start: int, new_id: object, /) -> int: ...
def reach_or(trans: object, seeds: object, out: object, /) -> None: ...
def refine_partition(trans: object, blocks: object, num_blocks: int, /) -> int: ...
def glue_concat(parts: object, /) -> tuple[bytearray, bytearray, int]: ...
def canonical_numbering(
    trans: object, accepting: object, start: int, class_of_byte: object, /
) -> tuple[bytearray, bytearray, bytearray, int, int]: ...
def liveness_rounds(
    trans: object, first: object, max_height: int, max_rows: int, deadline: float, hash_mask: int, /
) -> tuple[bytearray, list[int]] | None: ...

_Limits = tuple[int, float, int, int]
"""(max_states, deadline or inf, set members left, base of the state reserves)."""
_Walked = tuple[bytearray, bytearray, int, int, int]
"""(rows int32[N, C], accepting bool[N], stop, value, members counted)."""

def product_pair(
    a: object, b: object, a_accepting: object, b_accepting: object, limits: _Limits, /
) -> _Walked: ...
def product_union(
    table: object, accepting: object, starts: object, limits: _Limits, /
) -> _Walked: ...
def subset_concat(
    a: object,
    b: object,
    a_accepting: object,
    b_accepting: object,
    seed_a: object,
    seed_b: object,
    limits: _Limits,
    /,
) -> tuple[bytearray, bytearray, int, int, int, bytearray]: ...
def subset_repeat(
    table: object, accepting: object, lo: int, hi: int, limits: _Limits, /
) -> _Walked: ...

# ---- tables: token ids into bitmask rows (bits.c)

def set_token_bits(out: object, rows: object, tokens: object, /) -> None: ...
def set_token_runs(
    out: object, tokens: object, starts: object, stops: object, rows: object, /
) -> None: ...
def row_hashes(rows: object, out: object, /) -> None: ...

# ---- grammar: LALR(1) tables (lalr_lr0.c, lalr_lookaheads.c), the lexing check (lexcheck.c)

def lalr_lr0(
    item_next: object,
    item_rule: object,
    item_base: object,
    rule_origin: object,
    nullable: object,
    num_nt: int,
    num_symbols: int,
    root_item: int,
    deadline: float,
    /,
) -> tuple[bytearray, bytearray, bytearray, bytearray, bytearray] | None: ...
def lalr_lookaheads(
    item_next: object,
    item_rule: object,
    item_base: object,
    rule_origin: object,
    nullable: object,
    num_nt: int,
    num_symbols: int,
    start: int,
    closure_start: object,
    closure_items: object,
    trans_start: object,
    trans_sym: object,
    trans_target: object,
    deadline: float,
    /,
) -> tuple[bytearray, bytearray, bytearray, bytearray] | None: ...
def lexing_conflict(
    a: tuple[object, object, object],
    b: tuple[object, object, object],
    same: bool,
    first: bool,
    follows: object,
    /,
) -> tuple[bytes, int] | None: ...

# ---- index: the DFA route's vocabulary walks (live_walk.c, role_walk.c), the grammar
# lexer (lexer.c)

def walk_live_tokens(
    arrays: tuple[object, ...], num_classes: int, out: object, deadline: float, /
) -> tuple[bytearray, bytearray, bytearray] | None: ...
def walk_role_functions(
    table: object,
    num_roles: int,
    node_byte: object,
    node_depth: object,
    num_levels: int,
    token_node: object,
    end_role: object,
    /,
) -> list[tuple[bytearray, bytearray, bytearray]]: ...

_Built = tuple[bytearray, bytearray, bytearray, bytearray, bytearray, bytearray]
"""(rows int32[N, C], label, restart, bound int32[N], char_start bool[N, C], starts
int32[K]); a stop gives the counted terminals (list[int]) instead."""

def build_lexer(
    moves: object,
    accepting: object,
    term_of: object,
    count_index: object,
    count_flags: object,
    ignored: object,
    bound_of: object,
    ctx_ptr: object,
    ctx_entries: object,
    max_states: int,
    deadline: float,
    /,
) -> tuple[int, _Built | list[int]]: ...
