"""Checksum-valid artifacts with altered tables: real indexes, edited bodies, re-framed.

`framing.frame` computes the checksum over whatever body it is given, which is exactly
what someone crafting an artifact does: these helpers build real indexes for the gpt2
tokenizer (regex, JSON Schema by DFA and by grammar, Lark), edit their body documents
and frame them again, and exercise a loaded index the way a server would.
"""

from __future__ import annotations

import copy
import os
import signal
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from support import load_vocabulary

from fsmcompile import artifact, compile_json_schema, compile_lark, compile_regex
from fsmcompile.artifact.framing import frame, pack_array
from fsmcompile.errors import ArtifactError

GRAMMARS = Path(__file__).resolve().parents[1] / "grammars"

SPECS: dict[str, Callable[[], Any]] = {
    "regex": lambda: compile_regex(
        r"[a-z]{1,8}@[a-z]+\.(com|org)", load_vocabulary("gpt2"), cache=False
    ),
    "json_dfa": lambda: compile_json_schema(
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "yz"]}},
            "required": ["a"],
            "additionalProperties": False,
        },
        load_vocabulary("gpt2"),
        cache=False,
    ),
    # A recursive schema takes the grammar route.
    "json_grammar": lambda: compile_json_schema(
        {
            "$ref": "#/$defs/node",
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {
                        "v": {"type": "integer"},
                        "s": {"type": "string", "maxLength": 4},
                        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                    },
                }
            },
        },
        load_vocabulary("gpt2"),
        cache=False,
    ),
    "lark": lambda: compile_lark(
        (GRAMMARS / "arithmetic.lark").read_text(), load_vocabulary("gpt2"), cache=False
    ),
}

TEXTS = {
    "regex": "ada@lovelace.org",
    "json_dfa": '{"a": 12, "b": "yz"}',
    "json_grammar": '{"v": 1, "kids": [{"s": "ab"}]}',
    "lark": "1 + 2 * (x - 3)",
}


@cache
def artifact_bytes(name: str) -> bytes:
    """The real artifact of spec `name` (compiled once per session)."""
    return artifact.to_bytes(SPECS[name]())


def body_of(name: str) -> dict[str, Any]:
    """A fresh, editable copy of the body document of artifact `name`."""
    return copy.deepcopy(artifact.read_header(artifact_bytes(name)))


def reframe(doc: dict[str, Any]) -> bytes:
    """`doc` as an artifact with a valid checksum."""
    return frame(doc)


def get_array(doc: dict[str, Any], pointer: str) -> np.ndarray:
    """A writeable copy of the packed array at `pointer`."""
    packed = _parent(doc, pointer)[pointer.rsplit("/", 1)[1]]
    array = np.frombuffer(packed["data"], dtype=np.dtype(packed["dtype"]))
    return array.reshape(packed["shape"]).copy()


def set_array(doc: dict[str, Any], pointer: str, array: np.ndarray) -> None:
    _parent(doc, pointer)[pointer.rsplit("/", 1)[1]] = pack_array(array)


def edit_array(doc: dict[str, Any], pointer: str, edit: Callable[[np.ndarray], Any]) -> None:
    """Apply `edit` to a copy of the array at `pointer` (in place, or returning a new
    array) and store the result."""
    array = get_array(doc, pointer)
    result = edit(array)
    set_array(doc, pointer, array if result is None else np.asarray(result))


def _parent(doc: dict[str, Any], pointer: str) -> dict[str, Any]:
    node: Any = doc
    for part in pointer.strip("/").split("/")[:-1]:
        node = node[part]
    return node


def array_pointers(doc: dict[str, Any], prefix: str = "") -> list[str]:
    """The pointer of every packed array in a body document."""
    found = []
    for key, value in doc.items():
        if isinstance(value, dict):
            if "data" in value and "dtype" in value:
                found.append(f"{prefix}/{key}")
            else:
                found.extend(array_pointers(value, f"{prefix}/{key}"))
    return sorted(found)


def exercise(index: Any, text: str, seed: int) -> None:
    """Everything a server does with an index: masks, advancing over the text's tokens
    and a few others, jump-forward, rollback, termination."""
    from fsmcompile.runtime.matcher import matcher_for
    from fsmcompile.tables.bits import bitmask_words

    vocab = index.vocabulary
    rng = np.random.default_rng(seed)
    bitmask = np.zeros((2, bitmask_words(vocab.size)), dtype=np.int32)
    matcher = matcher_for(index)
    tokens = list(vocab.encode(text))[:12]
    strays = rng.integers(0, vocab.size, size=3).tolist()
    accepted = 0
    for token in tokens + strays:
        matcher.fill_bitmask(bitmask, 1)
        allowed = matcher.allowed_token_ids()
        if allowed.shape[0]:
            accepted += matcher.advance(int(allowed[int(rng.integers(0, allowed.shape[0]))]))
        accepted += matcher.advance(int(token))
        matcher.forced_bytes()
        matcher.forced_token_ids()
        matcher.is_terminated()
        matcher.is_accepting()
    if accepted:
        matcher.rollback(1)
    matcher.fill_bitmask(bitmask, 0)
    for eos in sorted(vocab.eos_token_ids)[:1]:
        matcher.advance(int(eos))
    matcher.is_terminated()


REFUSED, LOADED = 10, 11
"""Exit codes of a forked load: refused with an ArtifactError, or loaded and exercised."""


def load_in_child(data: bytes, text: str, seed: int, timeout_s: float) -> tuple[str, str]:
    """Load `data` (and exercise the index) in a forked child under a time limit.

    Returns ("refused" | "loaded", message) when the child ended normally, and
    ("signal", name), ("timeout", ...) or ("error", text) otherwise.
    """
    vocab = load_vocabulary("gpt2")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read)
        code, message = 1, ""
        try:
            try:
                index = artifact.from_bytes(data, vocab, source="mutated")
            except ArtifactError as exc:
                code, message = REFUSED, str(exc)
            else:
                exercise(index, text, seed)
                code = LOADED
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            message = f"{type(exc).__name__}: {exc}"
        os.write(write, message.encode("utf-8", "replace")[:4000])
        os._exit(code)
    os.close(write)
    deadline = time.monotonic() + timeout_s
    status = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.005)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read)
        return "timeout", f"no answer in {timeout_s} s"
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode("utf-8", "replace")
    if os.WIFSIGNALED(status):
        return "signal", signal.Signals(os.WTERMSIG(status)).name
    code = os.WEXITSTATUS(status)
    if code == REFUSED:
        return "refused", message
    if code == LOADED:
        return "loaded", message
    return "error", message
