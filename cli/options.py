"""The options several commands share, defined once: tokenizer, budgets, cache tiers,
spec options; and what they turn into (a vocabulary, compile options, a cache).

`--json`, `-q` and `-v` belong to every command and live on the top-level parser in
`main.py`. A command adds the groups it needs here, so `--timeout` means the same, with
the same checks and help, in `compile` and `warm`, and `--cache-dir` in `warm` and
`cache`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from fsmcompile.compiler import (
    DEFAULT_MAX_STATES,
    DEFAULT_TIMEOUT_S,
    MAX_STATES_LIMIT,
    check_budget,
)
from fsmcompile.frontend.identity import Kind
from fsmcompile.store import TieredCache, default_cache
from fsmcompile.vocabulary import Vocabulary

__all__ = [
    "add_budget_options",
    "add_cache_options",
    "add_compile_options",
    "add_kind_option",
    "add_spec_options",
    "add_tokenizer_options",
    "cache_argument",
    "load_vocabulary",
    "spec_options",
]


def _checked(
    convert: Callable[[str], Any], check: Callable[[Any], None], expected: str
) -> Callable[[str], Any]:
    """An argparse type: `convert`, then `check` (`check_budget`: `nan` or `inf` seconds
    would switch the time budget off); a ValueError is a usage error."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
            check(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        return value

    return parse


_seconds = _checked(
    float, lambda value: check_budget(value, DEFAULT_MAX_STATES), "finite seconds > 0"
)
_state_count = _checked(
    int,
    lambda value: check_budget(DEFAULT_TIMEOUT_S, value),
    f"a state count in 1..{MAX_STATES_LIMIT}",
)


def add_tokenizer_options(parser: argparse.ArgumentParser) -> None:
    """`--tokenizer/-t` (required) and `--vocab-size`."""
    parser.add_argument(
        "--tokenizer",
        "-t",
        required=True,
        help="tokenizer.json (or .gz), its folder, or a locally cached Hub name",
    )
    parser.add_argument(
        "--vocab-size",
        type=int,
        default=None,
        help="logits width when larger than the tokenizer (padded rows masked)",
    )


def add_budget_options(parser: argparse.ArgumentParser) -> None:
    """`--timeout` and `--max-states`, checked as `compile_spec` checks them."""
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"compile time budget (default {DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--max-states",
        type=_state_count,
        default=DEFAULT_MAX_STATES,
        help=f"automaton size budget (default {DEFAULT_MAX_STATES})",
    )


def add_cache_options(parser: argparse.ArgumentParser, *, no_cache: bool = True) -> None:
    """`--redis URL`, `--cache-dir/--dir DIR` and (unless `no_cache` is False) `--no-cache`."""
    parser.add_argument(
        "--redis",
        default=os.environ.get("FSMCOMPILE_REDIS_URL"),
        metavar="URL",
        help="Redis tier (default $FSMCOMPILE_REDIS_URL; none: this machine only)",
    )
    parser.add_argument(
        "--cache-dir",
        "--dir",
        dest="cache_dir",
        default=None,
        metavar="DIR",
        help="disk tier folder (default $FSMCOMPILE_CACHE_DIR, else ~/.cache/fsmcompile)",
    )
    if no_cache:
        parser.add_argument("--no-cache", action="store_true", help="always compile, store nothing")


def add_kind_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """`--kind regex|json|lark`, for files whose suffix does not say."""
    parser.add_argument("--kind", choices=["regex", "json", "lark"], default=None, help=help_text)


_JSON_FLAGS: dict[str, tuple[str, str]] = {
    "lenient_formats": (
        "--lenient-formats",
        "JSON Schema: read `format: regex` as any string (reported) instead of refusing it",
    ),
    "integer_fractions": (
        "--integer-fractions",
        "JSON Schema: an integer may also be written with a zero fraction (1.0, 1.00)",
    ),
    "listed_escapes": (
        "--listed-escapes",
        "JSON Schema: enum/const strings and property names in every JSON spelling "
        "(\\u0061 for a), not only raw",
    ),
    "exponent_numbers": (
        "--exponent-numbers",
        "JSON Schema: numbers under a bound may also be written with an exponent (1.5e2)",
    ),
}
"""`JsonOptions` switches (off by default) and their flags: option name -> (flag, help)."""


def add_spec_options(parser: argparse.ArgumentParser) -> None:
    """The kind-specific compile options: `--whitespace`, `--lenient`, the JSON Schema
    relaxations of `JsonOptions` (`--lenient-formats`, `--integer-fractions`,
    `--listed-escapes`, `--exponent-numbers`, `--any-order-max`), `--import-path`."""
    parser.add_argument(
        "--whitespace",
        choices=["compact", "standard", "flexible"],
        default=None,
        help="JSON Schema: separators allowed in the output",
    )
    parser.add_argument(
        "--lenient",
        action="store_true",
        help="JSON Schema: drop unenforceable keywords and report them",
    )
    for flag, help_text in _JSON_FLAGS.values():
        parser.add_argument(flag, action="store_true", help=help_text)
    parser.add_argument(
        "--any-order-max",
        type=int,
        default=0,
        metavar="N",
        help="JSON Schema: objects with 2 to N listed properties accept them in any order "
        "(N at most 8; default 0: schema order)",
    )
    parser.add_argument(
        "--import-path",
        action="append",
        default=[],
        metavar="DIR",
        help="Lark: a folder %%import may read grammars from (repeatable; besides the "
        "bundled grammars and lark's common ones)",
    )


def add_compile_options(parser: argparse.ArgumentParser) -> None:
    """Everything a compiling command (`compile`, `warm`) takes besides its specs."""
    add_tokenizer_options(parser)
    add_budget_options(parser)
    add_cache_options(parser)
    add_spec_options(parser)


def spec_options(kind: Kind, args: argparse.Namespace) -> dict[str, Any]:
    """The compile options of `kind` that `args` set (they are part of the cache key)."""
    if kind == "lark":
        # Absolute: the folders are part of the cache key, which must not depend on the
        # working directory.
        folders = [str(Path(folder).resolve()) for folder in getattr(args, "import_path", [])]
        return {"import_paths": folders} if folders else {}
    if kind != "json":
        return {}
    options: dict[str, Any] = {}
    if args.whitespace:
        options["whitespace"] = args.whitespace
    if args.lenient:
        options["strict"] = False
    for name in _JSON_FLAGS:
        if getattr(args, name, False):
            options[name] = True
    if getattr(args, "any_order_max", 0):
        options["any_order_max"] = args.any_order_max
    return options


def load_vocabulary(args: argparse.Namespace) -> Vocabulary:
    """The vocabulary `--tokenizer` and `--vocab-size` name."""
    return Vocabulary.load(args.tokenizer, vocab_size=args.vocab_size)


def cache_argument(args: argparse.Namespace) -> TieredCache | Literal[False]:
    """`compile_spec`'s `cache=`: False under `--no-cache`, else the process-wide cache
    of `--redis` and `--cache-dir` (memory → disk → Redis).

    Raises:
        StoreUnavailableError: `--redis` is malformed.
    """
    if args.no_cache:
        return False
    return default_cache(redis_url=args.redis or None, cache_dir=args.cache_dir)
