"""A random sentence generator over a Lark grammar, for completeness and equivalence tests.

Derivations are random with a depth bound (past it, each nonterminal takes its shallowest
expansion), terminals become random strings of their own language (a random walk through
the terminal's byte DFA, biased to ASCII and to short strings), and `%ignore`d text is
sprinkled between tokens. Adjacent lexemes can merge into other tokens, so a generated
text is not always in the language: callers ask lark which ones are.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
from lark import Lark
from lark.grammar import NonTerminal

from fsmcompile.automaton import build_dfa
from fsmcompile.frontend.lark.terminals import terminal_to_ir
from fsmcompile.tables.byte_dfa import ByteDFA


@dataclass
class _Sampler:
    dfa: ByteDFA
    distance: np.ndarray  # bytes to the nearest accepting state

    @classmethod
    def build(cls, name: str, pattern: str) -> _Sampler:
        dfa = build_dfa(terminal_to_ir(name, pattern))
        distance = np.where(dfa.accepting, 0, 10**9)
        for _ in range(dfa.num_states):
            nxt = np.where(dfa.transitions >= 0, distance[np.maximum(dfa.transitions, 0)], 10**9)
            new = np.minimum(distance, nxt.min(axis=1) + 1)
            if np.array_equal(new, distance):
                break
            distance = new
        return cls(dfa, distance)

    def sample(self, rng: random.Random, soft_len: int) -> bytes:
        state, out = 0, bytearray()
        bytes_of_class: dict[int, list[int]] = {}
        for b, c in enumerate(self.dfa.class_of_byte.tolist()):
            bytes_of_class.setdefault(c, []).append(b)
        while True:
            row = self.dfa.transitions[state]
            live = [c for c in range(row.shape[0]) if row[c] >= 0]
            if self.dfa.accepting[state] and (
                not live or rng.random() < 0.3 or len(out) >= soft_len
            ):
                return bytes(out)
            if len(out) >= soft_len:
                best = min(self.distance[row[c]] for c in live)
                live = [c for c in live if self.distance[row[c]] == best]
            ascii_live = [c for c in live if min(bytes_of_class[c]) < 128]
            pool = ascii_live if ascii_live and rng.random() < 0.97 else live
            c = rng.choice(pool)
            choices = bytes_of_class[c]
            ascii_bytes = [b for b in choices if 32 <= b < 127]
            out.append(rng.choice(ascii_bytes if ascii_bytes and rng.random() < 0.97 else choices))
            state = int(row[c])


class SentenceGenerator:
    """Random texts derived from a Lark grammar (LALR, the same options as the compiler)."""

    def __init__(self, grammar: str, start: str = "start") -> None:
        self.lark = Lark(grammar, parser="lalr", start=start)
        self.start = start
        self.rules: dict[str, list[list[object]]] = {}
        for rule in self.lark.rules:
            self.rules.setdefault(rule.origin.name, []).append(list(rule.expansion))
        self.terminals = {t.name: t for t in self.lark.terminals}
        self.ignored = list(self.lark.ignore_tokens)
        # Whitespace-like ignored terminals separate tokens; others (comments) need a newline
        # after them or they swallow the rest of the line.
        self._spacers = [n for n in self.ignored if self._matches(n, " ")]
        self._newline = next((n for n in self.ignored if self._matches(n, "\n")), None)
        self._samplers: dict[str, _Sampler] = {}
        self._height = self._heights()

    def _heights(self) -> dict[str, int]:
        height = {name: 10**9 for name in self.rules}
        changed = True
        while changed:
            changed = False
            for name, expansions in self.rules.items():
                for exp in expansions:
                    h = 1 + max(
                        (height[s.name] if isinstance(s, NonTerminal) else 0 for s in exp),
                        default=0,
                    )
                    if h < height[name]:
                        height[name] = h
                        changed = True
        return height

    def _matches(self, name: str, text: str) -> bool:
        import re

        return re.fullmatch(self.terminals[name].pattern.to_regexp(), text) is not None

    def _ignored_text(self, rng: random.Random) -> bytes:
        if self._spacers and (rng.random() < 0.85 or self._newline is None):
            return self._sampler(rng.choice(self._spacers)).sample(rng, 3)
        text = self._sampler(rng.choice(self.ignored)).sample(rng, 6)
        return text + b"\n" if self._newline is not None else text

    def _sampler(self, name: str) -> _Sampler:
        if name not in self._samplers:
            self._samplers[name] = _Sampler.build(name, self.terminals[name].pattern.to_regexp())
        return self._samplers[name]

    def terminals_of(self, rng: random.Random, max_depth: int) -> list[str]:
        """A random terminal sequence the parser accepts."""
        out: list[str] = []
        stack: list[tuple[object, int]] = [(NonTerminal(self.start), 0)]
        while stack:
            symbol, depth = stack.pop()
            if not isinstance(symbol, NonTerminal):
                out.append(symbol.name)  # type: ignore[attr-defined]
                continue
            expansions = self.rules[symbol.name]
            if depth >= max_depth:
                best = min(self._expansion_height(e) for e in expansions)
                expansions = [e for e in expansions if self._expansion_height(e) == best]
            exp = rng.choice(expansions)
            stack.extend((s, depth + 1) for s in reversed(exp))
        return out

    def _expansion_height(self, exp: list[object]) -> int:
        return max((self._height[s.name] for s in exp if isinstance(s, NonTerminal)), default=0)

    def sentence(self, rng: random.Random, max_depth: int = 6, ignore_rate: float = 0.3) -> str:
        """A random text: terminals sampled, ignored text sometimes put between them."""
        parts: list[bytes] = []
        for i, name in enumerate(self.terminals_of(rng, max_depth)):
            if self.ignored and (
                i == 0 and rng.random() < ignore_rate / 3 or i > 0 and rng.random() < ignore_rate
            ):
                parts.append(self._ignored_text(rng))
            parts.append(self._sampler(name).sample(rng, 8))
        return b"".join(parts).decode("utf-8")

    def parses(self, text: str) -> bool:
        """Whether lark itself accepts `text`."""
        from lark.exceptions import LarkError

        try:
            self.lark.parse(text)
        except LarkError:
            return False
        return True
