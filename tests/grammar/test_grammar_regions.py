"""Region serving changes how the grammar walk is done, never what it finds.

For every origin lexer state, the outcomes (emitted sequence, end shape, token) of the
walk with string interiors served from cached region walks must equal those of the plain
walk that expands every entry, on real tokenizers and grammars with many interiors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from fsmcompile.compiler import ROOT_RULE, lower_spec
from fsmcompile.grammar import load_lark_grammar
from fsmcompile.grammar.from_rules import grammar_from_rules
from fsmcompile.index.cfg.exits import exit_sets
from fsmcompile.index.cfg.lexer_build import build_lexer_automaton
from fsmcompile.index.cfg.lexer_shapes import lexer_shapes
from fsmcompile.index.cfg.regions import DENSE_MIN_TOKENS, KeptRows, RegionServer, StayGroups
from fsmcompile.index.cfg.trie_walk import WalkRecords, walk_grammar_tokens, walk_levels
from fsmcompile.tables.grammar_index import next_contexts
from fsmcompile.tables.lark_grammar import LarkGrammar
from fsmcompile.tables.sequences import ConstraintTable, SequenceTable
from fsmcompile.vocabulary import Vocabulary

SCHEMAS = {
    # Free-form extras: interiors in values, in listed keys' complements, in any-JSON.
    "free_form": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "tags": {"type": "array"}},
        "required": ["name"],
    },
    # A recursive model with string fields in several terminals.
    "tree": {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
                "required": ["label"],
                "additionalProperties": False,
            }
        },
        "$ref": "#/$defs/node",
    },
}


def _schema_grammar(schema: dict[str, object]) -> LarkGrammar:
    node, rules = lower_spec("json", schema, {})
    return grammar_from_rules({ROOT_RULE: node, **rules}, ROOT_RULE, max_states=100_000)


def _rows(
    origin: int, seq: int, state: int, tokens: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """One (origin, seq, end shape, token) row per token."""
    block = np.empty((tokens.shape[0], 4), dtype=np.int64)
    block[:, 0], block[:, 1], block[:, 2], block[:, 3] = origin, seq, state, tokens
    return block


def _outcomes(
    records: WalkRecords, server: RegionServer | None, vocab: Vocabulary, num_origins: int
) -> npt.NDArray[np.int64]:
    """Sorted distinct (origin, seq, end shape, token) rows of a walk, regions included."""
    trie = vocab.trie
    by_node: dict[int, npt.NDArray[np.int64]] = {}
    order = np.argsort(trie.token_node, kind="stable")
    nodes, starts = np.unique(trie.token_node[order], return_index=True)
    bounds = np.append(starts, order.shape[0])
    for i, n in enumerate(nodes.tolist()):
        by_node[n] = trie.token_ids[order[bounds[i] : bounds[i + 1]]]
    rows = []
    flags = np.unpackbits(
        np.ascontiguousarray(records.origins).view(np.uint8), axis=1, bitorder="little"
    )[:, :num_origins]
    for r in range(records.node.shape[0]):
        tokens = by_node[int(records.node[r])]
        for origin in np.flatnonzero(flags[r]).tolist():
            rows.append(_rows(origin, int(records.seq[r]), int(records.state[r]), tokens))
    if server is not None:
        stays = server.stays
        origins = stays.origins(records.origins.shape[1])
        for g in range(len(stays.patterns)):
            bits = origins[g][None, :]
            row_flags = np.unpackbits(bits.view(np.uint8), axis=1, bitorder="little")[0]
            tokens = stays.tokens(g, vocab.size)
            for origin in np.flatnonzero(row_flags[:num_origins]).tolist():
                rows.append(_rows(origin, stays.seq[g], stays.state[g], tokens))
    return np.unique(np.concatenate(rows), axis=0)


def _walk_both(
    grammar: LarkGrammar, vocab: Vocabulary
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], RegionServer]:
    lexer = build_lexer_automaton(grammar, max_states=100_000)
    shapes = lexer_shapes(lexer)
    contexts = next_contexts(grammar.table, len(grammar.terminals))
    ignored = grammar.ignored.tolist()
    results = []
    server = RegionServer(shapes, vocab)
    # One sequence table for both, so equal sequences get equal ids.
    sequences = SequenceTable(len(contexts), int(lexer.context_start.shape[0]))
    for regions in (None, server):
        records = walk_grammar_tokens(
            shapes, vocab.trie, contexts, ignored, sequences, ConstraintTable(), regions=regions
        )
        results.append(_outcomes(records, regions, vocab, lexer.num_states))
    return results[0], results[1], server


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_served_schema_walk_equals_plain_walk(name: str, gpt2: Vocabulary) -> None:
    plain, served, server = _walk_both(_schema_grammar(SCHEMAS[name]), gpt2)
    assert server.regions, "the grammar should have string interiors to serve"
    assert server.stays.patterns, "some tokens should stay inside an interior"
    assert np.array_equal(plain, served)


def test_served_json_lark_walk_equals_plain_walk(phi3: Vocabulary) -> None:
    text = (Path(__file__).resolve().parents[2] / "grammars" / "json.lark").read_text("utf-8")
    plain, served, server = _walk_both(load_lark_grammar(text), phi3)
    assert server.regions
    assert np.array_equal(plain, served)


BOUNDED = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "minLength": 2, "maxLength": 9},
        "note": {"type": "string", "maxLength": 4},
        "rest": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2},
    },
    "required": ["code"],
}


def test_level_merged_walk_keeps_every_exit_set(gpt2: Vocabulary) -> None:
    """Merging shapes that agree at a node's height (the levels of a bounded string) may
    rename a record's end shape, never change its exit set, sequence, origin or token."""
    grammar = _schema_grammar(BOUNDED)
    lexer = build_lexer_automaton(grammar, max_states=100_000)
    shapes = lexer_shapes(lexer)
    shape_xset = np.zeros(shapes.num_shapes, dtype=np.int32)
    shape_xset[shapes.of_state] = exit_sets(lexer, len(grammar.terminals)).state_xset
    contexts = next_contexts(grammar.table, len(grammar.terminals))
    ignored = grammar.ignored.tolist()
    height = int(gpt2.trie.node_height[0])
    levels = walk_levels(shapes, shape_xset, RegionServer(shapes, gpt2), height)
    assert (levels.canon[1] != np.arange(shapes.num_shapes)).any(), "no shapes merged"
    found = []
    sequences = SequenceTable(len(contexts), int(lexer.context_start.shape[0]))
    for merged in (None, levels):
        server = RegionServer(shapes, gpt2)
        records = walk_grammar_tokens(
            shapes,
            gpt2.trie,
            contexts,
            ignored,
            sequences,
            ConstraintTable(),
            levels=merged,
            regions=server,
        )
        rows = _outcomes(records, server, gpt2, lexer.num_states)
        rows[:, 2] = shape_xset[rows[:, 2]]
        found.append(np.unique(rows, axis=0))
    assert np.array_equal(found[0], found[1])


def test_packed_stay_rows_are_kept_and_reused_by_the_next_walk(gpt2: Vocabulary) -> None:
    """A dense stay group's row, packed from its slices of the cached walks when served,
    is kept and is exactly what a later walk meeting the same slices takes (the same
    row, no tokens). That the rows hold the right tokens is the plain-walk comparison
    above (`test_served_schema_walk_equals_plain_walk` reads them back)."""
    grammar = _schema_grammar(SCHEMAS["free_form"])
    shapes = lexer_shapes(build_lexer_automaton(grammar, max_states=100_000))
    contexts = next_contexts(grammar.table, len(grammar.terminals))
    ignored = grammar.ignored.tolist()
    kept = KeptRows()

    def served() -> StayGroups:
        server = RegionServer(shapes, gpt2)
        server.stays = StayGroups(kept)
        sequences = SequenceTable(len(contexts), int(shapes.context_start.shape[0]))
        walk_grammar_tokens(
            shapes, gpt2.trie, contexts, ignored, sequences, ConstraintTable(), regions=server
        )
        return server.stays

    stays = served()
    dense = [g for g, size in enumerate(stays.sizes) if size >= DENSE_MIN_TOKENS]
    listed = [g for g, size in enumerate(stays.sizes) if size < DENSE_MIN_TOKENS]
    assert dense and listed, "the free-form schema has both kinds of stay groups"
    assert all(stays.patterns[g] is None and stays.rows[g] is not None for g in dense)
    assert all(stays.patterns[g] is not None and stays.rows[g] is None for g in listed)
    for g in dense:
        assert stays.tokens(g, gpt2.size).shape[0] == stays.sizes[g]
    rows, row_of = stays.packed_rows(dense, gpt2.size)
    assert rows.shape[0] == len({id(stays.rows[g]) for g in dense})  # one per row object
    for g, at in zip(dense, row_of.tolist(), strict=True):  # each group reads its own row
        assert np.array_equal(rows[at], stays.rows[g])
    later = served()
    assert later.sizes == stays.sizes
    made = {id(stays.rows[g]) for g in dense}
    assert all(id(later.rows[g]) in made for g in dense), "kept rows are taken, not repacked"
    again, again_of = later.packed_rows(dense, gpt2.size)
    assert np.array_equal(again[again_of], rows[row_of])


@pytest.mark.parametrize("seed", range(5))
def test_or_token_runs_and_pack_token_ids_match_bool_packing(seed: int) -> None:
    from fsmcompile.tables.bits import or_token_runs, pack_bool_rows, pack_token_ids

    rng = np.random.default_rng(seed)
    vocab_size, num_rows = int(rng.integers(1, 300)), int(rng.integers(1, 6))
    tokens = rng.integers(0, vocab_size, size=int(rng.integers(0, 400)))
    starts = rng.integers(0, tokens.shape[0] + 1, size=7)
    stops = np.minimum(starts + rng.integers(0, 50, size=7), tokens.shape[0])
    rows = rng.integers(0, num_rows, size=7)
    expected = np.zeros((num_rows, vocab_size), dtype=np.bool_)
    for a, b, r in zip(starts, stops, rows, strict=True):
        expected[r, tokens[a:b]] = True
    out = pack_token_ids(
        np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), num_rows, vocab_size
    )
    or_token_runs(out, tokens, starts, stops, rows)
    assert np.array_equal(out, pack_bool_rows(expected))
    owner = rng.integers(0, num_rows, size=tokens.shape[0])
    expected[:] = False
    expected[owner, tokens] = True
    assert np.array_equal(
        pack_token_ids(owner, tokens, num_rows, vocab_size), pack_bool_rows(expected)
    )


@pytest.mark.parametrize(
    ("tokens", "starts", "stops", "rows", "match"),
    [
        ([0, 40], [0], [2], [0], "outside the 1 x 32"),
        ([0, 1], [0], [3], [0], "outside the 2 tokens"),
        ([0, 1], [1], [0], [0], "outside the 2 tokens"),
        ([0, 1], [0], [2], [1], "outside the 1 x 32"),
        ([0, 1], [0, 1], [2], [0], "one length"),
    ],
)
def test_or_token_runs_rejects_bits_outside_the_rows(tokens, starts, stops, rows, match) -> None:
    from fsmcompile.tables.bits import or_token_runs

    out = np.zeros((1, 1), dtype=np.int32)
    with pytest.raises(ValueError, match=match):
        or_token_runs(out, *(np.asarray(v, dtype=np.int64) for v in (tokens, starts, stops, rows)))
    assert not out.any()


def test_kept_rows_drop_the_least_recently_used_first() -> None:
    kept = KeptRows(max_rows=2)
    rows = [np.full(4, i, dtype=np.int32) for i in range(3)]
    keys = [(("shape", 0, d), np.array([[0, 1]], dtype=np.int64).tobytes()) for d in range(3)]
    kept.put(keys[0], rows[0])
    kept.put(keys[1], rows[1])
    assert kept.get(keys[0]) is rows[0]  # now the most recently used
    kept.put(keys[2], rows[2])
    assert kept.get(keys[1]) is None
    assert kept.get(keys[0]) is rows[0] and kept.get(keys[2]) is rows[2]
