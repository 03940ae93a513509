"""The EBNF trees the rule writer builds before writing lark text: symbols, sequences,
choices and repeats over terminals and rules."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sym:
    """A terminal (by name) or a rule (by its name in `rules`)."""

    name: str
    terminal: bool


@dataclass(frozen=True, slots=True)
class Seq:
    items: tuple[Tree, ...]


@dataclass(frozen=True, slots=True)
class Choice:
    items: tuple[Tree, ...]
    nullable: bool


@dataclass(frozen=True, slots=True)
class Rep:
    item: Tree
    min: int
    max: int | None


Tree = Sym | Seq | Choice | Rep


@dataclass(slots=True)
class Part:
    """One item of a sequence being written: its text, how many alternatives lark expands
    it into, and what can follow it."""

    text: str
    count: int
    follow: frozenset[str]


EMPTY_SEQ = Seq(())


def terminal_names(tree: Tree) -> Iterator[str]:
    """The terminals of `tree`, from a stack of the sub-trees still to read."""
    stack = [tree]
    while stack:
        at = stack.pop()
        if isinstance(at, Sym):
            if at.terminal:
                yield at.name
        elif isinstance(at, Rep):
            stack.append(at.item)
        else:
            stack.extend(reversed(at.items))
