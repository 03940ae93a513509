"""The rule writer's output, pinned on real schemas: the grammar text, the terminals (name,
tree and automaton) and the terminals written apart, with and without wide pieces split,
for every grammar-route schema of the JSON Schema Test Suite and the first grammar-route
schemas of three JSONSchemaBench subsets. The writer memoizes per-node facts for speed;
this keeps what it writes the same byte for byte.

The digests in `rule_writer_digests.json` were recorded from the writer as it stood
before its memos. A deliberate change to what lowering or the writer produces changes
them: check the new grammars, then regenerate from the repository root with
`PYTHONPATH=tests python tests/grammar/test_rule_writer_output.py --write`.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import SHARED

from fsmcompile.compile_stages import ROOT_RULE, lower_spec
from fsmcompile.errors import BudgetExceededError, SpecError
from fsmcompile.frontend.json_schema import JsonOptions
from fsmcompile.grammar.rule_writer import RuleWriter
from fsmcompile.ir.nodes import Node, content_key, forget_digests
from fsmcompile.tables.byte_dfa import dfa_key

pytestmark = pytest.mark.corpus

DIGESTS = Path(__file__).with_name("rule_writer_digests.json")
BENCH = SHARED / "corpora" / "jsonschemabench"
SUITE = SHARED / "corpora" / "json-schema-test-suite" / "draft2020-12"
SUBSETS = ("Github_easy", "Github_medium", "Github_hard")
PER_SUBSET = 25
"""Grammar-route schemas taken from the start of each subset."""
MAX_STATES = 200_000


def grammar_route_schemas() -> Iterator[tuple[str, dict[str, Node]]]:
    """(case id, rules as `build_machine` hands them to the writer) of each schema that
    lowers to rules: the test suite's groups, then the JSONSchemaBench subsets' first."""
    for path in sorted(SUITE.glob("*.json")):
        for index, group in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            rules = _rules(group["schema"])
            if rules:
                yield f"suite/{path.name}#{index}", rules
    for subset in SUBSETS:
        found = 0
        with open(BENCH / subset / "schemas.jsonl", encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                rules = _rules(record["schema"])
                if rules:
                    yield record["id"], rules
                    found += 1
                    if found == PER_SUBSET:
                        break


def _rules(schema: Any) -> dict[str, Node] | None:
    try:
        node, rules = lower_spec("json", schema, JsonOptions())
    except (SpecError, BudgetExceededError):
        return None
    return {ROOT_RULE: node, **rules} if rules else None


def written(rules: dict[str, Node], *, split_wide: bool) -> str:
    """A digest of all the writer hands on (or of the error it raises)."""
    forget_digests()
    digest = hashlib.blake2b(digest_size=16)
    try:
        writer = RuleWriter(rules, MAX_STATES, None, split_wide=split_wide)
        digest.update(writer.text(ROOT_RULE).encode())
    except (SpecError, BudgetExceededError) as exc:
        return f"{type(exc).__name__}: {exc}"
    for name, (node, dfa) in writer.generated.items():
        digest.update(f"\0{name}\0".encode() + content_key(node) + dfa_key(dfa))
    digest.update("\0".join(sorted(writer.split_terminals)).encode())
    return digest.hexdigest()


def digests() -> dict[str, str]:
    return {
        f"{case} split={split}": written(rules, split_wide=split)
        for case, rules in grammar_route_schemas()
        for split in (True, False)
    }


def test_the_writer_writes_the_recorded_grammars() -> None:
    if not (BENCH.exists() and SUITE.exists()):
        pytest.skip("the shared corpora are not present")
    recorded = json.loads(DIGESTS.read_text(encoding="utf-8"))
    found = digests()
    assert found.keys() == recorded.keys()
    changed = [case for case in recorded if found[case] != recorded[case]]
    assert not changed, f"{len(changed)} of {len(recorded)} differ, first {changed[:5]}"
    assert len(recorded) >= 200


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(__doc__)
    DIGESTS.write_text(json.dumps(digests(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
