"""`fsmcompile check FILE TEXT...`: walk texts through an index the way a model would.

Contract scripts rely on: one line per TEXT starting with `accepted` or `rejected`;
exit 0 when every TEXT was accepted, 1 otherwise.
"""

from __future__ import annotations

import argparse
from typing import Any

from fsmcompile import artifact
from fsmcompile.artifact import AnyIndex
from fsmcompile.runtime.matcher import matcher_for
from fsmcompile.vocabulary import Vocabulary

from ..options import add_tokenizer_options, load_vocabulary
from ..output import EXIT_FAILED, EXIT_OK, Console

_SAMPLE = 8


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("check", help="walk TEXTs through an artifact: accepted/rejected")
    parser.add_argument("file", help="artifact file")
    parser.add_argument("texts", nargs="+", metavar="TEXT")
    add_tokenizer_options(parser)


def _sample(vocab: Vocabulary, allowed: list[int]) -> list[str]:
    shown = []
    for token in allowed[:_SAMPLE]:
        if token in vocab.eos_token_ids:
            shown.append("<EOS>")
        else:
            shown.append(repr(vocab.token_bytes[token].decode("utf-8", "backslashreplace")))
    return shown


def check_text(index: AnyIndex, text: str) -> dict[str, Any]:
    """Feed `text`'s real tokenization to a fresh matcher token by token, then EOS."""
    vocab = index.vocabulary
    matcher = matcher_for(index)
    consumed = 0
    for position, token in enumerate(vocab.encode(text)):
        allowed = matcher.allowed_token_ids().tolist()
        if not matcher.advance(token):
            return {
                "text": text,
                "accepted": False,
                "token_index": position,
                "byte_offset": consumed,
                "token": vocab.token_bytes[token].decode("utf-8", "backslashreplace"),
                "allowed_sample": _sample(vocab, allowed),
            }
        consumed += len(vocab.token_bytes[token])
    if not matcher.is_accepting():
        return {
            "text": text,
            "accepted": False,
            "token_index": None,
            "byte_offset": consumed,
            "token": "<EOS>",
            "allowed_sample": _sample(vocab, matcher.allowed_token_ids().tolist()),
        }
    return {"text": text, "accepted": True}


def run(args: argparse.Namespace, console: Console) -> int:
    try:
        vocab = load_vocabulary(args)
        index = artifact.load(args.file, vocab)
        results = [check_text(index, text) for text in args.texts]
    except Exception as exc:  # noqa: BLE001 - reported as an error line / document
        return console.fail(exc)
    for result in results:
        if result["accepted"]:
            console.line(f"accepted {result['text']!r}")
        elif result["token"] == "<EOS>":
            console.line(
                f"rejected {result['text']!r}: incomplete at byte "
                f"{result['byte_offset']} (EOS not allowed); allowed next: "
                f"{', '.join(result['allowed_sample'])}"
            )
        else:
            console.line(
                f"rejected {result['text']!r}: token {result['token_index']} "
                f"{result['token']!r} at byte {result['byte_offset']} not allowed; "
                f"allowed: {', '.join(result['allowed_sample']) or 'nothing'}"
            )
    ok = all(r["accepted"] for r in results)
    console.document({"ok": ok, "results": results})
    return EXIT_OK if ok else EXIT_FAILED
