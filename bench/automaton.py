"""Regex → byte DFA build times for representative patterns (`python -m bench.automaton`).

Times `build_dfa(parse_regex(p))` per pattern, warm (caches filled by one untimed run),
as the best of several runs; prints a table and writes JSON to bench/results/.
Numbers are for reading, never asserted by tests.

Peer: interegular (a project dependency), `parse_pattern(p).to_fsm()`. Not like for
like: it builds a character-level FSM (no UTF-8 byte expansion, no minimization, ASCII
`\d`), so on small patterns it is a floor rather than a rival; the ratio column is
interegular time / fsmcompile time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from fsmcompile.automaton import build_dfa
from fsmcompile.frontend.regex.parser import parse_regex

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu apple "
    "banana cherry date elder fig grape honeydew kiwi lemon mango nectarine olive peach "
    "quince raspberry strawberry tangerine ugli vanilla watermelon ximenia yam zucchini"
).split()

PATTERNS: dict[str, str] = {
    "iso_datetime": r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
    "email": r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}",
    "ipv4": r"((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)",
    "float": r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?",
    "phone": r"\+?1?[-. ]?\(?\d{3}\)?[-. ]?\d{3}[-. ]?\d{4}",
    "words_50": "|".join(WORDS[:50]),
    "cjk_plus": r"[\u4e00-\u9fff]+",
    "literal_600": "".join(WORDS * 3)[:600],
    "not_quote_2000": r'[^"]{0,2000}',
    "digits_300": r"\d{1,300}",
    "quoted_2000": r'"[^"]{0,2000}"',
    "quoted_2000_then_loop": r'"[^"]{0,2000}"\s*,\s*\d+',
    "word_pair": r"\w+\s\w+",
}


def time_pattern(pattern: str, repeats: int) -> tuple[float, float, int, int]:
    """(best ms, median ms, states, classes), after one warm-up run."""
    dfa = build_dfa(parse_regex(pattern))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        build_dfa(parse_regex(pattern))
        samples.append((time.perf_counter() - start) * 1e3)
    return min(samples), statistics.median(samples), dfa.num_states, dfa.num_classes


def time_peer(pattern: str, repeats: int) -> float | None:
    """Best ms of interegular's FSM construction, or None when it cannot parse `pattern`."""
    try:
        import interegular
    except ImportError:  # pragma: no cover - interegular is a dependency
        return None
    best = None
    for _ in range(repeats):
        start = time.perf_counter()
        try:
            interegular.parse_pattern(pattern).to_fsm()
        except Exception:  # any peer failure just means "no number"
            return None
        elapsed = (time.perf_counter() - start) * 1e3
        best = elapsed if best is None else min(best, elapsed)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path("bench/results/automaton.json"))
    parser.add_argument("--no-peers", action="store_true", help="skip the interegular column")
    args = parser.parse_args()
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} cpus"
    )
    rows = []
    for name, pattern in PATTERNS.items():
        best, median, states, classes = time_pattern(pattern, args.repeats)
        peer = None if args.no_peers else time_peer(pattern, min(args.repeats, 3))
        rows.append(
            {
                "name": name,
                "best_ms": best,
                "median_ms": median,
                "states": states,
                "classes": classes,
                "interegular_ms": peer,
            }
        )
        ratio = f"{peer / best:7.1f}x" if peer is not None else "      -"
        print(
            f"{name:24s} {best:8.2f} ms (median {median:7.2f})  {states:6d} states  "
            f"{classes:3d} classes  interegular/fsmcompile {ratio}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"python": platform.python_version(), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
