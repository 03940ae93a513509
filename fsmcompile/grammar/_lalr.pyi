"""Type stub of the LALR analysis C module (`_lalr.c`)."""

def lr0(
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
def lookaheads(
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
