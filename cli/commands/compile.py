"""`fsmcompile SPEC --tokenizer T`: compile a regex, JSON Schema or Lark grammar."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fsmcompile import artifact
from fsmcompile.compiler import (
    DEFAULT_MAX_STATES,
    DEFAULT_TIMEOUT_S,
    MAX_STATES_LIMIT,
    Kind,
    check_budget,
    compile_spec,
)
from fsmcompile.errors import SpecEncodingError
from fsmcompile.vocabulary import Vocabulary

from ..output import EXIT_OK, EXIT_USAGE, Console, human_bytes

_KIND_BY_SUFFIX: dict[str, Kind] = {
    ".json": "json",
    ".lark": "lark",
    ".regex": "regex",
    ".re": "regex",
    ".txt": "regex",
}


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


def add_common(parser: argparse.ArgumentParser) -> None:
    """Options every compiling command shares."""
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
    parser.add_argument(
        "--redis",
        default=os.environ.get("FSMCOMPILE_REDIS_URL"),
        metavar="URL",
        help="shared cache (default $FSMCOMPILE_REDIS_URL)",
    )
    parser.add_argument("--no-cache", action="store_true", help="always compile, store nothing")
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
    parser.add_argument(
        "--import-path",
        action="append",
        default=[],
        metavar="DIR",
        help="Lark: a folder %%import may read grammars from (repeatable; besides the "
        "bundled grammars and lark's common ones)",
    )


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("compile", help="compile a spec (the default command)")
    parser.add_argument("spec", nargs="?", help="spec file (.json, .lark, .regex) or '-' for stdin")
    parser.add_argument("--regex", help="a regex given literally instead of SPEC")
    parser.add_argument(
        "--kind",
        choices=["regex", "json", "lark"],
        default=None,
        help="spec kind (default: from the file suffix)",
    )
    parser.add_argument("-o", "--output", help="write the artifact to this file")
    add_common(parser)


def read_spec(args: argparse.Namespace) -> tuple[Kind, Any, str]:
    """(kind, spec, label) from SPEC/--regex/--kind; raises SystemExit(2) on misuse."""
    if args.regex is not None:
        if args.spec:
            raise SystemExit("error: give SPEC or --regex, not both")
        return "regex", args.regex, "--regex"
    if not args.spec:
        raise SystemExit("error: missing SPEC (a file) or --regex PATTERN")
    path = Path(args.spec)
    kind: Kind | None = args.kind or _KIND_BY_SUFFIX.get(path.suffix.lower())
    if kind is None:
        raise SystemExit(f"error: cannot tell the kind of {path}; pass --kind")
    label = "<stdin>" if args.spec == "-" else str(path)
    text = decode_spec(sys.stdin.buffer.read() if args.spec == "-" else path.read_bytes(), label)
    spec: Any = text.rstrip("\n") if kind == "regex" else text
    return kind, spec, label


def decode_spec(data: bytes, source: str) -> str:
    """A spec file's bytes as text.

    Raises:
        SpecEncodingError: the bytes are not UTF-8; `byte_offset` is the first bad one.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SpecEncodingError(
            f"spec is not UTF-8 text ({exc.reason}, line {line})",
            byte_offset=exc.start,
            source=source,
        ) from exc


def spec_options(kind: Kind, args: argparse.Namespace) -> dict[str, Any]:
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
    return options


def resolve_cache(args: argparse.Namespace) -> Any:
    if args.no_cache:
        return False
    if args.redis:
        from fsmcompile.store.default import default_cache

        return default_cache(redis_url=args.redis)
    return True


def load_vocabulary(args: argparse.Namespace) -> Vocabulary:
    return Vocabulary.load(args.tokenizer, vocab_size=args.vocab_size)


def run(args: argparse.Namespace, console: Console) -> int:
    try:
        kind, spec, label = read_spec(args)
    except SystemExit as exc:
        print(exc, file=console.err)
        return EXIT_USAGE
    except (OSError, SpecEncodingError) as exc:
        return console.fail(exc)
    try:
        console.progress("loading tokenizer")
        vocab = load_vocabulary(args)
        console.progress("compiling")
        result = compile_spec(
            kind,
            spec,
            vocab,
            options=spec_options(kind, args),
            timeout_s=args.timeout,
            max_states=args.max_states,
            cache=resolve_cache(args),
            progress=console.progress,
        )
        size = len(artifact.to_bytes(result.index))
        if args.output:
            artifact.save(result.index, args.output)
    except Exception as exc:  # noqa: BLE001 - every failure is reported, never a traceback
        return console.fail(exc)
    console.end_progress()
    event = (
        f"cache: hit ({result.cache_tier})"
        if result.cache_hit
        else f"cache: miss (compiled in {(result.compile_s or 0) * 1e3:.1f} ms)"
    )
    console.line(
        f"compiled {kind} {label} for {vocab.name} ({len(vocab.token_bytes)} tokens, "
        f"width {vocab.size})"
    )
    console.line(event)
    console.line(
        f"states: {result.num_states}  masks: {result.num_masks}  "
        f"artifact: {human_bytes(size)}" + (f" -> {args.output}" if args.output else "")
    )
    console.document(
        {
            "ok": True,
            "kind": kind,
            "spec": label,
            "tokenizer": vocab.name,
            "vocab_fingerprint": vocab.fingerprint,
            "states": result.num_states,
            "masks": result.num_masks,
            "artifact_bytes": size,
            "output": args.output,
            "cache": {
                "hit": result.cache_hit,
                "tier": result.cache_tier,
                "compile_s": result.compile_s,
            },
        }
    )
    return EXIT_OK
