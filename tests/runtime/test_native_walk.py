"""The C walk of a token's bytes (`Parser.walk_bytes`) stays bounded on a crafted artifact.

A parse table that passes every check can still send one terminal's shifts into two
lexer contexts that each take it again: the arithmetic grammar with the state a `-`
shifts into moved to another context that also starts with `-`. Every dash of a token
then doubles the readings (2^(n-1) for n dashes: 0.3 s at 14, 2.7 s at 16, a 64-dash
gpt2 token never ends). The walk holds at most `MAX_WALK_READINGS` readings a byte and
refuses the token with a clear error past them; below the bound it lists exactly the
readings of the plain Python definition (`tables/lexer_walks.walk_bytes`).
"""

from __future__ import annotations

from typing import Any

import pytest
from artifact_mutations import body_of, edit_array, get_array, reframe
from forked import outcome_in_child

from fsmcompile import artifact
from fsmcompile.errors import ArtifactCorruptError
from fsmcompile.runtime.grammar_matcher import GrammarMatcher
from fsmcompile.runtime.grammar_tables import GrammarTables
from fsmcompile.tables.grammar_index import GrammarIndex
from fsmcompile.tables.lexer_walks import walk_bytes

MAX_WALK_READINGS = 65536
"""`MAX_WALK_READINGS` of `native/parser_walk.c`: 2^16 readings, 17 dashes. The grammar tests' 1.4
million legitimate walks hold at most 294 readings; a `}}` of a Kubernetes schema's grammar
more than 16,384 (`test_a_wide_cut_walks_within_the_bound`)."""


def branching_artifact(gpt2: Any) -> bytes:
    """The arithmetic artifact with the state a `-` shifts into moved to another lexer
    context that starts with `-` too: `-` leads to two contexts, each taking `-` again."""
    doc = body_of("lark")
    minus = list(doc["terminal_names"]).index("MINUS")
    action = get_array(doc, "/table/action")
    target = int(action[:, minus][action[:, minus] > 0][0]) - 1
    context = int(get_array(doc, "/table/context_of_state")[target])
    starts = get_array(doc, "/lexer/context_start")
    moves = get_array(doc, "/lexer/transitions")
    dash = int(get_array(doc, "/lexer/class_of_byte")[ord("-")])
    other = next(c for c in range(starts.shape[0]) if c != context and moves[starts[c], dash] >= 0)
    edit_array(doc, "/table/context_of_state", lambda a: a.__setitem__(target, other))
    data: bytes = reframe(doc)
    return data


def dash_token(gpt2: Any, length: int) -> int:
    return next(t for t in range(gpt2.size) if gpt2.token_bytes[t] == b"-" * length)


@pytest.fixture(scope="module")
def index(gpt2: Any) -> GrammarIndex:
    loaded = artifact.from_bytes(branching_artifact(gpt2), gpt2)
    assert isinstance(loaded, GrammarIndex)
    minus = loaded.terminal_names.index("MINUS")
    assert len(loaded.next_contexts()[minus]) == 2  # the artifact passed every check
    return loaded


def test_a_branching_walk_is_refused_not_waited_out(index: GrammarIndex, gpt2: Any) -> None:
    """The 64-dash token: before the bound, 2^63 readings (the child hung); now the
    request gets an ArtifactCorruptError naming the bound, and the matcher is unchanged."""

    def advance_over_dashes() -> None:
        matcher = GrammarMatcher(index)
        before = matcher.configurations
        try:
            matcher.advance(dash_token(gpt2, 64))
        finally:
            assert matcher.configurations == before

    outcome = outcome_in_child(advance_over_dashes, timeout_s=20.0)
    assert outcome.startswith(ArtifactCorruptError.__name__), outcome
    assert f"more than {MAX_WALK_READINGS} readings of a 64-byte text" in outcome


def test_the_bound_is_the_first_byte_past_it(index: GrammarIndex, gpt2: Any) -> None:
    """16 dashes hold 2^15 readings, within the bound; the 20-dash token (gpt2 has none of
    17 to 19) would hold 2^17 at its 18th byte, past the bound at its 17th: only that
    token is refused."""
    matcher = GrammarMatcher(index)
    assert matcher.advance(dash_token(gpt2, 16))
    with pytest.raises(ArtifactCorruptError, match="at byte 17"):
        GrammarMatcher(index).advance(dash_token(gpt2, 20))


@pytest.mark.parametrize("length", [1, 5, 13])
def test_a_branching_walk_below_the_bound_is_exact(
    index: GrammarIndex, gpt2: Any, length: int
) -> None:
    """Up to the bound the C walk lists the readings of the Python definition, one each:
    the hashed deduplication merges exactly the equal ones."""
    tables = GrammarTables(index)
    state = tables.start_lexer_state
    data = b"-" * length
    expected = walk_bytes(
        tables.lexer, tables._next_contexts, tables._ignored, state, frozenset(), data
    )
    got = tables._parser.walk_bytes(state, [], data)
    readings = [(e, q, frozenset(c), g, f) for e, q, c, g, f in got]
    assert len(readings) == len(set(readings)) == len(expected)
    assert set(readings) == set(expected)
    assert len(readings) == 2 ** (length - 1)
    assert {len(r[0]) for r in readings} == {length - 1}  # a MINUS for each cut dash
