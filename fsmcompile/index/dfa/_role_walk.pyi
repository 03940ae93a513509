"""Type stub of the role-function walk's C module (`_role_walk.c`)."""

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
