"""Token bytes walked through a grammar index's lexer automaton, one state at a time.

These read only the index's tables (`LexerAutomaton`, the vocabulary's trie): the
reference walk of a token's bytes that the runtime's C parser implements
(`Parser.walk_bytes`), the tokens an open constraint forbids, and the digest by which
equal lexemes of different grammars share their counted-item rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from fsmcompile.tables.bits import pack_bool_rows
from fsmcompile.tables.byte_dfa import classes_by_first_byte
from fsmcompile.tables.lexer_automaton import LexerAutomaton
from fsmcompile.vocabulary.trie import TokenTrie

if TYPE_CHECKING:
    from fsmcompile.tables.grammar_index import GrammarIndex

Emitted = tuple[tuple[int, int], ...]
"""Terminals a token completes, each with the lexer context assumed after it."""


def step_constraints(
    lexer: LexerAutomaton, states: frozenset[int], byte_class: int
) -> frozenset[int] | None:
    """The constraint set after one byte; None when a constraint reached a label (fail)."""
    return step_constraints_of(lexer.transitions, lexer.label, states, byte_class)


def step_constraints_of(
    trans: npt.NDArray[np.int32],
    label: npt.NDArray[np.int32],
    states: frozenset[int],
    byte_class: int,
) -> frozenset[int] | None:
    """`step_constraints` over the lexer's columns, which the vectorized walk holds apart."""
    out = []
    for c in states:
        nxt = int(trans[c, byte_class])
        if nxt >= 0:
            if label[nxt] >= 0:
                return None
            out.append(nxt)
    return frozenset(out)


def context_set_ids(index: GrammarIndex) -> dict[tuple[int, ...], int]:
    """The context id of each of `index`'s context sets, by its sorted contexts (what
    `walk_bytes` names a cut's contexts by when they share a future)."""
    start = index.ctxset_start.tolist()
    members = index.ctxset_context.tolist()
    base = int(index.lexer.context_start.shape[0])  # id K + k names set k
    return {tuple(members[start[k] : start[k + 1]]): base + k for k in range(len(start) - 1)}


def walk_bytes(
    lexer: LexerAutomaton,
    next_contexts: list[list[int]],
    ignored: list[bool],
    state: int,
    constraints: frozenset[int],
    data: bytes,
    context_sets: Mapping[tuple[int, ...], int] | None = None,
) -> list[tuple[Emitted, int, frozenset[int], int, int]]:
    """Every outcome of feeding `data` to the lexer from `state` (the slow, obvious walk).

    The definition: the runtime advances with its C twin (`Parser.walk_bytes`, tested
    against this), and every mask the runtime builds from the vectorized walk must agree
    with it token for token (the grammar tests check that at every step). Returns
    (emitted, end state, open constraints, grown, fresh) tuples, deduplicated: `grown`
    counts the items (`LexerAutomaton.char_start`) added to the lexeme `state` is in,
    `fresh` those of the lexeme the walk ends in when that is a later one (-1 when it is
    the same). Contexts a cut may start the next lexeme in whose start states the byte
    takes to one state (with one item start) differ only in the context their step names:
    where `context_sets` has a set of exactly those, one outcome names the set (the
    parser's check is then membership), as the index's walk does (`ContextSets`).
    """
    trans = lexer.transitions
    label = lexer.label
    starts = lexer.char_start
    Outcome = tuple[Emitted, int, frozenset[int], int, int]
    configs: set[Outcome] = {((), state, constraints, 0, -1)}
    for byte in data:
        cls = int(lexer.class_of_byte[byte])
        nxt_configs: set[Outcome] = set()
        for emitted, q, cons, grown, fresh in configs:
            stepped = step_constraints(lexer, cons, cls) if cons else cons
            if stepped is None:
                continue
            nq = int(trans[q, cls])
            if nq >= 0:
                item = int(starts[q, cls])
                if fresh < 0:
                    nxt_configs.add((emitted, nq, stepped, grown + item, -1))
                else:
                    nxt_configs.add((emitted, nq, stepped, grown, fresh + item))
            lab = int(label[q])
            if lab < 0 or (nq >= 0 and label[nq] >= 0):
                continue
            cut_cons = stepped | {nq} if nq >= 0 else stepped
            if ignored[lab]:
                start = int(lexer.context_start[lexer.restart_context[q]])
                if int(trans[start, cls]) >= 0:
                    item = int(starts[start, cls])
                    nxt_configs.add((emitted, int(trans[start, cls]), cut_cons, grown, item))
                continue
            runs: dict[tuple[int, int], list[int]] = {}
            for ctx in next_contexts[lab]:
                start = int(lexer.context_start[ctx])
                if int(trans[start, cls]) >= 0:
                    runs.setdefault((int(trans[start, cls]), int(starts[start, cls])), []).append(
                        ctx
                    )
            for (fresh_state, item), contexts in runs.items():
                named = (context_sets or {}).get(tuple(sorted(contexts)))
                for ctx in [named] if named is not None and len(contexts) > 1 else contexts:
                    nxt_configs.add((emitted + ((lab, ctx),), fresh_state, cut_cons, grown, item))
        configs = nxt_configs
        if not configs:
            break
    return sorted(configs, key=lambda c: (c[0], c[1], sorted(c[2]), c[3], c[4]))


def tokens_reaching_labels(
    lexer: LexerAutomaton, trie: TokenTrie, vocab_size: int, state: int
) -> npt.NDArray[np.int32]:
    """int32[ceil(V/32)]: tokens whose bytes take `state` to a labelled state at some prefix.

    An open constraint forbids exactly these tokens. Cost: one trie walk from one state,
    only along paths that stay alive; computed once per constraint state at run time.
    """
    trans = lexer.transitions
    class_of = lexer.class_of_byte
    has_label = np.append(lexer.label >= 0, False)
    hit = np.zeros(trie.num_nodes, dtype=np.bool_)
    node = np.zeros(1, dtype=np.int64)
    cur = np.array([state], dtype=np.int64)  # -2: an ancestor already reached a label
    while node.shape[0]:
        parent, child = trie.children(node)
        if child.shape[0] == 0:
            break
        q = cur[parent]
        nq = np.where(q == -2, -2, trans[np.maximum(q, 0), class_of[trie.node_byte[child]]])
        reached = (nq == -2) | has_label[np.where(nq >= 0, nq, -1)]
        hit[child[reached]] = True
        nq = np.where(reached, -2, nq)
        keep = nq != -1
        node, cur = child[keep], nq[keep]
    bits = np.zeros((1, vocab_size), dtype=np.bool_)
    bits[0, trie.token_ids[hit[trie.token_node]]] = True
    row: npt.NDArray[np.int32] = pack_bool_rows(bits)[0]
    return row


def lexeme_key(lexer: LexerAutomaton, state: int) -> bytes:
    """A digest of all that `items_grown` (runtime/counted.py) reads from `state`: the
    moves by raw byte and the item starts of the states it reaches, numbered in the order
    a search by byte value meets them, so equal lexemes of different grammars (and byte
    classes) share one key.

    The search reads each state's row of byte classes, the classes in the order of their
    smallest byte (a class first meets a target at its smallest byte); only the digested
    table is spelled out by raw byte.
    """
    full = lexer.class_of_byte
    by_first_byte = classes_by_first_byte(full).tolist()
    transitions = lexer.transitions
    order = [state]
    number = {state: 0}
    for s in order:
        row = transitions[s].tolist()
        for cls in by_first_byte:
            t = row[cls]
            if t >= 0 and t not in number:
                number[t] = len(order)
                order.append(t)
    reached = np.asarray(order)
    lookup = np.full(lexer.num_states + 1, -1, dtype=np.int32)
    lookup[reached] = np.arange(len(order), dtype=np.int32)
    table = lookup[transitions[reached][:, full]]  # -1 maps through lookup[-1] == -1
    starts = lexer.char_start[reached][:, full]
    return hashlib.blake2b(table.tobytes() + np.packbits(starts).tobytes()).digest()
