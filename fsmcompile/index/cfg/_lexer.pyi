"""Type stub of the generated-grammar lexer's subset construction in C (`_lexer.c`)."""

Built = tuple[bytearray, bytearray, bytearray, bytearray, bytearray, bytearray]
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
) -> tuple[int, Built | list[int]]: ...
