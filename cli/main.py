"""The `fsmcompile` console script: parse arguments, call the public API, format results.

Exit codes: 0 success; 1 the requested work failed (bad spec, budget exceeded, a `check`
text rejected); 2 usage error.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, Protocol

from fsmcompile.version import __version__

from .commands import check, compile, inspect
from .output import EXIT_OK, EXIT_USAGE, Console


class Command(Protocol):
    """What a module under cli/commands/ provides."""

    def add_parser(self, sub: Any) -> None: ...

    def run(self, args: argparse.Namespace, console: Console) -> int: ...


_COMMANDS: dict[str, Command] = {"compile": compile, "inspect": inspect, "check": check}
_EPILOG = """\
exit codes: 0 success; 1 the work failed (bad spec, budget exceeded, a text rejected);
2 usage error.

examples:
  fsmcompile schema.json --tokenizer path/to/tokenizer.json -o schema.fsm
  fsmcompile --regex '\\d{4}-\\d{2}-\\d{2}' --tokenizer gpt2/tokenizer.json.gz
  fsmcompile inspect schema.fsm
  fsmcompile check schema.fsm '{"name":"x"}' --tokenizer path/to/tokenizer.json
"""


def _register_optional_commands() -> None:
    """Cache commands live beside the stores; they join when those modules are present."""
    try:
        from .commands import cache, warm
    except ImportError:  # pragma: no cover - only while a store module is missing
        return
    _COMMANDS["warm"] = warm
    _COMMANDS["cache"] = cache


def build_parser() -> argparse.ArgumentParser:
    _register_optional_commands()
    parser = argparse.ArgumentParser(
        prog="fsmcompile",
        description="Compile regexes, JSON Schemas and Lark grammars into token-level FSM "
        "indexes for one tokenizer.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fsmcompile {__version__}")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="-v info logs, -vv debug logs and tracebacks",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _COMMANDS.values():
        module.add_parser(sub)
    return parser


def _with_default_command(argv: list[str]) -> list[str]:
    """`fsmcompile SPEC ...` means `fsmcompile compile SPEC ...`."""
    global_flags = {"--json", "-q", "--quiet", "-v", "-vv", "--verbose"}
    position = 0
    while position < len(argv) and argv[position] in global_flags:
        position += 1
    if (
        position < len(argv)
        and argv[position] not in _COMMANDS
        and argv[position] not in ("-h", "--help", "--version")
    ):
        return [*argv[:position], "compile", *argv[position:]]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    parser = build_parser()
    args_list = _with_default_command(list(sys.argv[1:] if argv is None else argv))
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    if args.command is None:
        parser.print_usage(sys.stderr)
        return EXIT_USAGE
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(
        level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    console = Console(as_json=args.json, quiet=args.quiet, verbosity=args.verbose)
    try:
        return _COMMANDS[args.command].run(args, console)
    except BrokenPipeError:  # `fsmcompile inspect x | head`: the reader left, not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
