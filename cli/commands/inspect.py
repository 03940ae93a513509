"""`fsmcompile inspect FILE`: an artifact's header and statistics, no tokenizer needed."""

from __future__ import annotations

import argparse
from typing import Any

from fsmcompile import artifact
from fsmcompile.artifact.validate import Body

from ..output import EXIT_OK, Console, human_bytes


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("inspect", help="print an artifact's header and statistics")
    parser.add_argument("file", help="artifact written by `fsmcompile ... -o FILE`")


_HEADER_FIELDS = (
    "format_version",
    "compiler_version",
    "kind",
    "spec_hash",
    "vocab_fingerprint",
    "vocab_size",
)


def _header(body: Body) -> dict[str, Any]:
    """The header fields, each a string or an integer (a crafted body may hold anything)."""
    out: dict[str, Any] = {}
    for name in _HEADER_FIELDS:
        value = body.field(f"/{name}")
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise body.fail(
                f"/{name}",
                "malformed header field",
                expected="a string or an integer",
                found=type(value).__name__,
            )
        out[name] = value
    return out


def run(args: argparse.Namespace, console: Console) -> int:
    try:
        data = artifact.read_artifact_file(args.file)
        doc = artifact.read_header(data, source=args.file)
        body = Body(doc, args.file)
        info = {
            "ok": True,
            "file": args.file,
            "size_bytes": len(data),
            **_header(body),
            **artifact.summarize(doc, args.file),
        }
    except Exception as exc:  # noqa: BLE001 - reported as an error line / document
        return console.fail(exc)
    console.line(
        f"{args.file}: fsmcompile artifact, format {info['format_version']} "
        f"(compiler {info['compiler_version']}), {human_bytes(len(data))}"
    )
    shown = (
        "kind",
        "spec_hash",
        "vocab_fingerprint",
        "vocab_size",
        "states",
        "byte_classes",
        "parser_states",
        "terminals",
        "masks",
    )
    for key in shown:
        if key in info:
            console.line(f"  {key}: {info[key]}")
    by = info["masks_by_storage"]
    console.line(
        f"  mask storage: {by['bitset']} bitsets, {by['allowed_ids']} allowed-id lists, "
        f"{by['rejected_ids']} rejected-id lists"
    )
    console.document(info)
    return EXIT_OK
