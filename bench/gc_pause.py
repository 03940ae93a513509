"""What fsmcompile adds to each full pass of Python's garbage collector in a serving process.

A full pass visits every tracked container (and each item of a list), so whatever a
library keeps alive, such as runtime tables and compile memos, lengthens every full pause of
the process, whoever's requests are running. This compiles JSONSchemaBench schemas the
way a server does (one process, the memos warm), walks their valid instances so the runtime
tables fill, and reports the tracked objects and the time of a full pass (`gc.collect()`,
median of 5): after loading the vocabulary, and after the schemas.

    python -m bench.gc_pause [--id ID ...] [--tokenizer llama3]

Prints the figures; nothing here is asserted by a test.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import numpy as np

from bench.coverage_corpus import load_records, prepare_tests, resolve_tokenizer
from bench.coverage_walk import walk, warm_up
from bench.measure import describe_machine, machine

DEFAULT_IDS = (
    "Kubernetes/kb_1_Normalized",
    "Snowplow/sp_0_Normalized",
    "Github_ultra/o4826",
    "WashingtonPost/wp_8_Normalized",
)
"""Large grammars of four subsets: the ones whose tables hold the most items."""


def full_pass_ms(repeats: int = 5) -> float:
    """Median wall time of a full collection, once the garbage is gone."""
    gc.collect()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        gc.collect()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def report(label: str) -> None:
    print(f"{label:<52} {len(gc.get_objects()):>9,} tracked  {full_pass_ms():7.1f} ms a full pass")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--id", action="append", dest="ids", help="JSONSchemaBench ids")
    parser.add_argument("--tokenizer", default="llama3", help="llama3, gpt2 or a tokenizer.json")
    args = parser.parse_args(argv)

    from fsmcompile.compiler import compile_spec
    from fsmcompile.runtime.matcher import matcher_for
    from fsmcompile.tables.bits import bitmask_words
    from fsmcompile.vocabulary import Vocabulary

    print(describe_machine(machine()))
    _, path = resolve_tokenizer(args.tokenizer)
    vocab = Vocabulary.from_file(path)
    options = {"whitespace": "compact"}
    warm_up(vocab, options)
    report("vocabulary loaded, warmed up")
    kept = []  # what a server holds: the compiled indexes (their tables are cached)
    mask = np.zeros(bitmask_words(vocab.size), dtype=np.int32)
    for schema_id in args.ids or DEFAULT_IDS:
        (record,) = load_records(schema_id.split("/")[0], None, {schema_id})
        index = compile_spec("json", record["schema"], vocab, options=options, cache=False).index
        for test in prepare_tests(record, vocab, options["whitespace"]):
            if test["valid"]:
                walk(matcher_for(index), mask, test["ids"], vocab, [])
        kept.append(index)
        report(f"+ {schema_id} (compiled, walked)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
