"""Type stub of the subset and product constructions' state loops in C (`_subset.c`)."""

Limits = tuple[int, float, int, int]
"""(max_states, deadline or inf, set members left, base of the state reserves)."""
Walked = tuple[bytearray, bytearray, int, int, int]
"""(rows int32[N, C], accepting bool[N], stop, value, members counted)."""

def product_pair(
    a: object, b: object, a_accepting: object, b_accepting: object, limits: Limits, /
) -> Walked: ...
def product_union(
    table: object, accepting: object, starts: object, limits: Limits, /
) -> Walked: ...
def subset_concat(
    a: object,
    b: object,
    a_accepting: object,
    b_accepting: object,
    seed_a: object,
    seed_b: object,
    limits: Limits,
    /,
) -> tuple[bytearray, bytearray, int, int, int, bytearray]: ...
def subset_repeat(
    table: object, accepting: object, lo: int, hi: int, limits: Limits, /
) -> Walked: ...
