"""The size of an LALR analysis, estimated before it starts and held to the compile's budget.

An LALR analysis's work and memory grow with the LR(0) items times the terminals: it
keeps a lookahead entry per state and terminal (with lark's own analysis a rule of 5,000
keyword alternatives took 55 s and 5.6 GB before a MemoryError). The product is known
once lark has compiled the grammar's rules, before the analysis, so an explosive grammar
is refused there: by size against `max_states` (a parse table is an automaton whose
states each hold a row per terminal), by time against what is left of the deadline.
"""

from __future__ import annotations

from collections.abc import Iterable

from fsmcompile.budget import check_time_left
from fsmcompile.errors import BudgetExceededError

CELLS_PER_STATE = 25
"""Analysis cells (LR(0) items x terminals) allowed per unit of `max_states`: 5 million at
the default 200,000, about a gigabyte and 20 s of lark's analysis (measured: a rule of
1,500 keyword alternatives, 4.5 million cells, 1.1 GB)."""
LARK_SECONDS_PER_CHAR = 1e-5
"""The least time lark takes to read and compile a grammar's text per character, before
the analysis (12-55 us measured; 30 for a rule of 5,000 keywords), for refusing a text it
could not read in time."""
NATIVE_SECONDS_PER_CELL = 1e-7
"""The least time the analysis (`lalr.py`, in C) takes per cell: 0.7 us where every state
reads every terminal (a rule of 1,000 keywords), far less on the sparse tables schemas
make, so only a surely late analysis is refused; its steps check the deadline
themselves."""


def analysis_cells(rule_lengths: Iterable[int], num_terminals: int) -> int:
    """LR(0) items (each rule's length plus one) times terminals (plus `$END`)."""
    return sum(length + 1 for length in rule_lengths) * (num_terminals + 1)


def check_text_size(text: str) -> None:
    """Raise before lark reads a grammar text it could not read before the deadline."""
    check_time_left(
        len(text) * LARK_SECONDS_PER_CHAR, f"reading a grammar of {len(text):,} characters"
    )


def check_analysis_size(cells: int, *, max_states: int | None, seconds_per_cell: float) -> None:
    """Raise before an analysis of `cells` that would break the state budget
    (limit="max_states") or could not finish before the compile's deadline
    (limit="timeout_s")."""
    if max_states is not None and cells > CELLS_PER_STATE * max_states:
        raise BudgetExceededError(
            f"the grammar's LALR analysis would cover {cells:,} (LR item, terminal) pairs, "
            f"more than {CELLS_PER_STATE} x max_states={max_states}; raise max_states or "
            "split rules of many alternatives into smaller ones",
            limit="max_states",
            value=max_states,
        )
    check_time_left(cells * seconds_per_cell, f"analysing the grammar ({cells:,} LALR cells)")
