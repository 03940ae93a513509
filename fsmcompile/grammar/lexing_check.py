"""The lexing check of a generated grammar: refuse lexer contexts where longest match
could cut a valid text wrongly, or name the terminals whose lexer priority must rise."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial

import numpy as np
import numpy.typing as npt

from fsmcompile import _native
from fsmcompile.compile_memos import current_memos
from fsmcompile.errors import UnsupportedFeatureError
from fsmcompile.tables.byte_dfa import ByteDFA, dfa_key
from fsmcompile.tables.grammar_index import next_contexts
from fsmcompile.tables.lark_grammar import LarkGrammar, ParseTable

Answers = dict[tuple[int, int, bool, bytes], "tuple[bytes, int] | None"]
"""`lexing_conflict` answers of one grammar's terminals by (a, b, a first, followers),
the followers' ids packed as int32 bytes."""


def check_contexts(grammar: LarkGrammar, answers: Answers | None = None) -> None:
    """Refuse grammars whose longest-match lexing could cut a valid text wrongly.

    Terminal a of a context is cut wrongly when, after a lexeme x of a, the text goes on
    with what may follow a, and the lexer instead reads further into one lexeme: of
    another terminal b of the context (or of a itself, reading on). So for each such pair
    the check looks for x in L(a) where b's automaton is still alive, then runs b on
    against each terminal f that can follow a: if b reaches a lexeme end while f is
    still alive, or f ends while b is alive, the text is ambiguous to the lexer. Two
    terminals of one context that share a whole lexeme are always refused.

    What may follow a is read per parser state: where the state shifts a, the terminals
    of the state it goes to (an object's opening brace of one `anyOf` branch is followed
    by that branch's keys, not by the keys of every object in the grammar); where it
    reduces first, those of every state a shift of a can lead to.

    `answers` carries the pair checks from one call to the next on grammars that differ
    only in terminal priorities: a WashingtonPost schema's grammar needs 11k of them,
    more than the process-wide memo keeps, so each round recomputed them all.
    """
    if answers is None:
        answers = {}

    num_terminals = len(grammar.terminals)
    table = grammar.table
    after = next_contexts(table, num_terminals)
    firsts: dict[int, int] = {}

    def first(t: int) -> int:
        if t not in firsts:
            firsts[t] = _first_bytes(_dfa(grammar, t))
        return firsts[t]

    def lexed(terminals: Iterable[int]) -> tuple[int, ...]:
        return tuple(t for t in terminals if grammar.terminals[t].dfa is not None)

    # In the lexer's order: a terminal that ends a lexeme drops those after it.
    in_context = [lexed(context.terminals) for context in grammar.contexts]
    positions = [{t: i for i, t in enumerate(order)} for order in in_context]
    anywhere_after = [
        lexed(sorted({f for c in after[t] for f in grammar.contexts[c].terminals}))
        for t in range(num_terminals)
    ]
    keys: dict[int, bytes] = {}
    automata: dict[int, _Automaton] = {}

    def key(t: int) -> bytes:
        if t not in keys:
            keys[t] = dfa_key(_dfa(grammar, t))
        return keys[t]

    def automaton(t: int) -> _Automaton:
        if t not in automata:
            automata[t] = _automaton(_dfa(grammar, t))
        return automata[t]

    # Per distinct followers tuple: its ids and its automata's digests packed into bytes,
    # which keep their hash (a tuple hashes all its items at every lookup, and followers
    # run to 160 terminals), and its automata.
    packed: dict[tuple[int, ...], tuple[bytes, bytes, list[_Automaton]]] = {}

    def pack(follows: tuple[int, ...]) -> tuple[bytes, bytes, list[_Automaton]]:
        if follows not in packed:
            packed[follows] = (
                np.array(follows, np.int32).tobytes(),
                b"".join(map(key, follows)),
                list(map(automaton, follows)),
            )
        return packed[follows]

    def found_for(
        a: int, b: int, a_first: bool, follows: tuple[bytes, bytes, list[_Automaton]]
    ) -> tuple[bytes, int] | None:
        ids, digests, follow_automata = follows
        place = (a, b, a_first, ids)
        if place in answers:
            return answers[place]
        # Memoized by content: the any-JSON terminals meet each other the same way in
        # every schema with free-form members.
        memo_key = (key(a), key(b), b"same" if a == b else b"first" if a_first else b"", digests)
        found = current_memos().conflicts.get_or_make(
            memo_key,
            partial(lexing_conflict, automaton(a), automaton(b), a == b, a_first, follow_automata),
        )
        answers[place] = found
        return found

    checked: set[tuple[int, int, bool, bytes]] = set()
    dropped: dict[tuple[int, int], bytes] = {}  # (first, dropped) -> witness
    for context, a, follows in _lexing_places(table, num_terminals, in_context, anywhere_after):
        if grammar.terminals[a].dfa is None:
            continue
        position = positions[context]
        first_a = first(a)
        packed_follows = pack(follows)
        ids = packed_follows[0]
        for b in in_context[context]:
            if a != b and not first_a & first(b):
                continue
            a_first = position[a] < position[b]
            if (a, b, a_first, ids) in checked:
                continue
            checked.add((a, b, a_first, ids))
            found = found_for(a, b, a_first, packed_follows)
            if found is not None and found[1] == DROPPED:
                # Raising b above a helps only if b, read first, cuts no text wrongly.
                again = found_for(a, b, False, packed_follows)
                if again is None and (b, a) not in dropped:
                    dropped.setdefault((a, b), found[0])
                    continue
                found = again or found
            if found is None:
                continue
            witness, follower = found
            involved = [a, b] + ([follows[follower]] if follower >= 0 else [])
            raise LexingConflict(
                witness.decode("utf-8", "replace"),
                frozenset(grammar.terminals[t].name for t in involved),
            )
    if dropped:
        (a, b), witness = next(iter(dropped.items()))
        name = [t.name for t in grammar.terminals]
        raise LexingConflict(
            witness.decode("utf-8", "replace"),
            frozenset((name[a], name[b])),
            tuple((name[a], name[b]) for a, b in dropped),
        )


def _lexing_places(
    table: ParseTable,
    num_terminals: int,
    in_context: list[tuple[int, ...]],
    anywhere_after: list[tuple[int, ...]],
) -> list[tuple[int, int, tuple[int, ...]]]:
    """The distinct (lexer context, terminal a read in it, terminals that may follow a
    there) of the parser states, in state order."""
    action = table.action[:, :num_terminals]
    state, terminal = np.nonzero(action)
    act = action[state, terminal].astype(np.int64)
    target_context = np.where(act > 0, table.context_of_state[np.maximum(act - 1, 0)], -1).astype(
        np.int64
    )
    contexts = table.context_of_state[state].astype(np.int64)
    terminal = terminal.astype(np.int64)
    # One integer per place: np.unique of rows (axis=0) took ~8x longer on 150k places.
    width = int(target_context.max(initial=-1)) + 2
    _, first_at = np.unique(
        (contexts * num_terminals + terminal) * width + target_context + 1, return_index=True
    )
    places = np.stack([contexts, terminal, target_context], axis=1)
    out = []
    for context, a, target in places[np.sort(first_at)].tolist():
        follows = anywhere_after[a] if target < 0 else in_context[target]
        out.append((context, a, follows))
    return out


class LexingConflict(UnsupportedFeatureError):
    """Two terminals of a lexer context overlap (`check_contexts`); `terminals` names
    them and the follower that showed it."""

    def __init__(
        self,
        witness: str,
        terminals: frozenset[str],
        dropped: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(
            f"two alternatives at one place can both read {witness!r}, so a lexer "
            "cannot tell where one lexeme ends; the anyOf/oneOf branches or "
            "optional parts around a recursive or free-form value overlap",
            features=[("", "overlapping alternatives")],
        )
        self.terminals = terminals
        self.dropped = dropped
        """(first, dropped): pairs where the lexer drops a terminal that could read on,
        because the first comes before it and ends a lexeme there; the only conflicts
        found when not empty."""


DROPPED = -2
"""`lexing_conflict`'s follower index for a terminal the lexer drops."""


def lexing_conflict(
    a: _Automaton, b: _Automaton, same: bool, first: bool, follows: Sequence[_Automaton]
) -> tuple[bytes, int] | None:
    """A text showing that lexing a then a follower is ambiguous with lexing b (see
    `check_contexts`) and the index of that follower in `follows`, or None. The index
    is -1 when a and b share a whole lexeme, and `DROPPED` when a comes `first` in the
    context's order and ends a lexeme where b goes on: the lexer then drops b, so b's
    longer lexemes are never read.

    The witness is the first such text of a breadth-first walk over the pairs of states a
    and b reach together (then b and the follower), moves in the order of their smallest
    byte: it appears in error messages, so `native/lexcheck.c` keeps that order exactly.
    """
    return _native.lexing_conflict(a, b, same, first, follows)


_Automaton = tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.bool_]]
"""A `ByteDFA`'s (transitions, class_of_byte, accepting) as `_native.lexing_conflict` reads them."""


def _automaton(dfa: ByteDFA) -> _Automaton:
    return (
        np.ascontiguousarray(dfa.transitions, dtype=np.int32),
        np.ascontiguousarray(dfa.class_of_byte, dtype=np.int32),
        np.ascontiguousarray(dfa.accepting, dtype=np.bool_),
    )


def _dfa(grammar: LarkGrammar, terminal: int) -> ByteDFA:
    dfa = grammar.terminals[terminal].dfa
    assert dfa is not None
    return dfa


def _first_bytes(dfa: ByteDFA) -> int:
    """The bytes the start state moves on, as a 256-bit integer (bit i: byte i)."""
    live = (dfa.transitions[0] >= 0)[dfa.class_of_byte]
    return int.from_bytes(np.packbits(live, bitorder="little").tobytes(), "little")
