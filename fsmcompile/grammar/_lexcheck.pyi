"""Type stub of the lexing check's C module (`_lexcheck.c`)."""

def lexing_conflict(
    a: tuple[object, object, object],
    b: tuple[object, object, object],
    same: bool,
    first: bool,
    follows: object,
    /,
) -> tuple[bytes, int] | None: ...
