"""The automaton stage: the regex IR in, a minimized byte DFA out."""

from fsmcompile.automaton.build import build_dfa
from fsmcompile.tables.byte_dfa import ByteDFA

__all__ = ["ByteDFA", "build_dfa"]
