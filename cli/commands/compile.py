"""`fsmcompile SPEC --tokenizer T`: compile a regex, JSON Schema or Lark grammar."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from fsmcompile import artifact
from fsmcompile.compiler import compile_spec
from fsmcompile.errors import SpecEncodingError, SpecPathError
from fsmcompile.frontend.identity import Kind
from fsmcompile.spec_files import decode_spec, kind_of_file, spec_from_text

from ..options import (
    add_compile_options,
    add_kind_option,
    cache_argument,
    load_vocabulary,
    spec_options,
)
from ..output import EXIT_OK, EXIT_USAGE, Console, human_bytes


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("compile", help="compile a spec (the default command)")
    parser.add_argument("spec", nargs="?", help="spec file (.json, .lark, .regex) or '-' for stdin")
    parser.add_argument("--regex", help="a regex given literally instead of SPEC")
    add_kind_option(parser, "spec kind (default: from the file suffix)")
    parser.add_argument("-o", "--output", help="write the artifact to this file")
    add_compile_options(parser)


def read_spec(args: argparse.Namespace) -> tuple[Kind, Any, str]:
    """(kind, spec, label) from SPEC/--regex/--kind; raises SystemExit(2) on misuse."""
    if args.regex is not None:
        if args.spec:
            raise SystemExit("error: give SPEC or --regex, not both")
        return "regex", args.regex, "--regex"
    if not args.spec:
        raise SystemExit("error: missing SPEC (a file) or --regex PATTERN")
    path = Path(args.spec)
    try:
        kind = kind_of_file(path, args.kind)
    except SpecPathError as exc:
        raise SystemExit(f"error: {exc}") from None
    label = "<stdin>" if args.spec == "-" else str(path)
    text = decode_spec(sys.stdin.buffer.read() if args.spec == "-" else path.read_bytes(), label)
    return kind, spec_from_text(kind, text), label


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
            cache=cache_argument(args),
            progress=console.progress,
        )
        # Once: the cache's copy when there is one; its size is reported, it is written.
        data = result.artifact_bytes or artifact.to_bytes(result.index)
        size = len(data)
        if args.output:
            artifact.write_artifact_file(data, args.output)
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
