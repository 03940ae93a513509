"""The byte DFA: the automaton every spec compiles to before the token index is built."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fsmcompile.types import DEAD, StateId


@dataclass(frozen=True, slots=True, eq=False)
class ByteDFA:
    """A deterministic automaton over bytes, minimized and trimmed.

    Invariants the builder guarantees and the index relies on:
    - state 0 is the start state;
    - every state is reachable from the start and can reach an accepting state,
      so "not dead" means "some continuation ends in the language";
    - bytes are grouped into equivalence classes (bytes no transition tells apart).

    Attributes:
        transitions: int32[S, C], the next state per (state, byte class); -1 is dead.
        class_of_byte: int32[256], the class of each byte value.
        accepting: bool[S], whether the bytes read so far are in the language.
    """

    transitions: npt.NDArray[np.int32]
    class_of_byte: npt.NDArray[np.int32]
    accepting: npt.NDArray[np.bool_]

    @property
    def num_states(self) -> int:
        return int(self.transitions.shape[0])

    @property
    def num_classes(self) -> int:
        return int(self.transitions.shape[1])

    def walk(self, data: bytes, state: StateId = 0) -> StateId:
        """The state after reading `data` from `state`; DEAD once no continuation is left."""
        trans = self.transitions
        cls = self.class_of_byte
        for byte in data:
            if state == DEAD:
                return DEAD
            state = int(trans[state, cls[byte]])
        return state

    def matches(self, data: bytes) -> bool:
        """Whether `data` is in the language (full match)."""
        state = self.walk(data)
        return state != DEAD and bool(self.accepting[state])


def dfa_key(dfa: ByteDFA) -> bytes:
    """A 16-byte digest of the automaton's arrays: equal for equal automata (built
    automata are canonical, so equal languages over equal classes give equal arrays)."""
    h = hashlib.blake2b(digest_size=16)
    for array in (dfa.transitions, dfa.class_of_byte, dfa.accepting):
        h.update(f"{array.dtype.str}{array.shape}".encode())
        h.update(np.ascontiguousarray(array).tobytes())
    return h.digest()


def classes_by_first_byte(class_of_byte: npt.NDArray[np.integer]) -> npt.NDArray[np.int64]:
    """The byte classes in the order of their smallest byte: reading a state's row of
    classes in this order meets each target first where a search by byte value would,
    so canonical numberings need no row by raw byte. Every class must own a byte."""
    _, first_byte = np.unique(class_of_byte, return_index=True)
    return np.argsort(first_byte, kind="stable")
