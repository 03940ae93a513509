"""The value every lowering step returns: an IR node plus what its parent must know."""

from __future__ import annotations

from dataclasses import dataclass

from fsmcompile.automaton.ir import NOTHING, Node


@dataclass(frozen=True, slots=True)
class Lowered:
    """A lowered subschema.

    Attributes:
        node: the IR of the instance texts.
        depth: the most containers an instance nests (0 for scalars); the object member
            checker must skip at least this deep.
        cut: whether a recursion limit truncated it; such results depend on the ref
            stack, so they are never memoized.
    """

    node: Node
    depth: int = 0
    cut: bool = False

    @property
    def empty(self) -> bool:
        """Whether it is the empty language by construction."""
        return self.node is NOTHING or self.node == NOTHING


NOTHING_LOWERED = Lowered(NOTHING)
