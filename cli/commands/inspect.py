"""`fsmcompile inspect FILE`: an artifact's header and statistics, no tokenizer needed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fsmcompile import artifact

from ..output import EXIT_OK, Console, human_bytes


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("inspect", help="print an artifact's header and statistics")
    parser.add_argument("file", help="artifact written by `fsmcompile ... -o FILE`")


def run(args: argparse.Namespace, console: Console) -> int:
    try:
        data = Path(args.file).read_bytes()
        doc = artifact.read_header(data, source=args.file)
    except Exception as exc:  # noqa: BLE001 - reported as an error line / document
        return console.fail(exc)
    info = {
        "ok": True,
        "file": args.file,
        "size_bytes": len(data),
        "format_version": doc["format_version"],
        "compiler_version": doc["compiler_version"],
        "kind": doc["kind"],
        "spec_hash": doc["spec_hash"],
        "vocab_fingerprint": doc["vocab_fingerprint"],
        "vocab_size": doc["vocab_size"],
        **artifact.summarize(doc),
    }
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
