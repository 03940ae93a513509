"""Type stub of the DFA route's vocabulary walk in C (`_live_walk.c`)."""

def walk(
    arrays: tuple[object, ...], num_classes: int, out: object, deadline: float, /
) -> tuple[bytearray, bytearray, bytearray] | None: ...
