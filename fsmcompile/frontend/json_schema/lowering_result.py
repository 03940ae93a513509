"""`Lowered`, the value every lowering step returns: an IR node plus what its parent needs."""

from __future__ import annotations

from dataclasses import dataclass

from fsmcompile.ir.nodes import NOTHING, Node


@dataclass(frozen=True, slots=True)
class Lowered:
    """A lowered subschema.

    Attributes:
        node: the IR of the instance texts.
        depth: the most containers an instance nests (0 for scalars), not counting what
            rule references nest; the object member checker must skip at least this deep.
        unbounded: whether instances may nest without bound (the node refers to a
            grammar rule: a recursive `$ref` or a free-form value). The member checker,
            which skips values by bracket depth, cannot be used around it.
    """

    node: Node
    depth: int = 0
    unbounded: bool = False

    @property
    def empty(self) -> bool:
        """Whether it is the empty language by construction."""
        return self.node is NOTHING or self.node == NOTHING


NOTHING_LOWERED = Lowered(NOTHING)
