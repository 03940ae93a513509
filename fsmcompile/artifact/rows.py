"""Mask rows in an artifact: each stored as the smallest of a token list or a bitset.

A row of V tokens is W = ceil(V/32) int32 words once decoded, but as an empty token list
it costs 9 stored bytes: an artifact of 1.8 MB listing 200k empty rows decoded to 1.2 GB,
and one of 9 MB asked for 5.85 GiB. So the decoded size of every row table of an artifact
is known and bounded (`RowBudget`) before a byte of it is allocated, and each list is
checked to be one the writer makes: ids in [0, V), strictly increasing, at most W of them
(past W the bitset is smaller). Decoding is then one scatter over all listed ids, with no
Python loop over rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from fsmcompile.artifact.files import byte_limit
from fsmcompile.artifact.framing import pack_array
from fsmcompile.artifact.validate import Body
from fsmcompile.tables.bits import bitmask_words, unpack_row

DENSE, ALLOWED, REJECTED = 0, 1, 2
"""How a row is stored: its packed words, the ids it allows, or the ids it rejects."""

DECODE_RATIO = 64
"""Row tables may always decode to this many times their stored bytes: a dense row is
1x, and only short token lists (rows allowing or rejecting a few tokens) go past it."""

MAX_DECODED_BYTES_ENV = "FSMCOMPILE_MAX_DECODED_BYTES"
DEFAULT_MAX_DECODED_BYTES = 256 << 20
"""Decoded row tables up to this many bytes load whatever their stored size (a schema
with thousands of near-empty rows is legitimate); past it they need `DECODE_RATIO`."""


def max_decoded_bytes_default() -> int:
    """The operator's ceiling from `$FSMCOMPILE_MAX_DECODED_BYTES`, else 256 MiB."""
    return byte_limit(MAX_DECODED_BYTES_ENV, DEFAULT_MAX_DECODED_BYTES)


def encode_rows(masks: npt.NDArray[np.int32], vocab_size: int) -> dict[str, Any]:
    """Per row the smallest of: allowed ids, rejected ids, packed bitset."""
    words = masks.shape[1]
    kinds = np.zeros(masks.shape[0], dtype=np.uint8)
    dense_rows: list[int] = []
    ids: list[npt.NDArray[np.int32]] = []
    for row in range(masks.shape[0]):
        allowed = np.flatnonzero(unpack_row(masks[row], vocab_size)).astype(np.int32)
        rejected_count = vocab_size - allowed.shape[0]
        if allowed.shape[0] <= min(rejected_count, words):
            kinds[row] = ALLOWED
            ids.append(allowed)
        elif rejected_count <= words:
            kinds[row] = REJECTED
            bits = unpack_row(masks[row], vocab_size)
            ids.append(np.flatnonzero(~bits).astype(np.int32))
        else:
            dense_rows.append(row)
    lengths = np.asarray([len(x) for x in ids], dtype=np.int64)
    return {
        "kinds": pack_array(kinds),
        "dense": pack_array(masks[dense_rows] if dense_rows else np.zeros((0, words), np.int32)),
        "ids": pack_array(np.concatenate(ids) if ids else np.zeros(0, np.int32)),
        "id_lengths": pack_array(lengths),
    }


@dataclass(frozen=True, slots=True)
class StoredRows:
    """One row table's checked parts, not yet decoded."""

    pointer: str
    kinds: npt.NDArray[Any]
    dense: npt.NDArray[Any]
    ids: npt.NDArray[Any]
    starts: npt.NDArray[np.int64]
    stored_bytes: int

    @property
    def num_rows(self) -> int:
        return int(self.kinds.shape[0])


def read_rows(body: Body, pointer: str, vocab_size: int) -> StoredRows:
    """Check the stored parts of the row table at `pointer` (no row decoded yet)."""
    words = bitmask_words(vocab_size)
    kinds = body.ids(f"{pointer}/kinds", (None,), DENSE, REJECTED + 1)
    listed = int(np.count_nonzero(kinds != DENSE))
    dense = body.array(f"{pointer}/dense", (kinds.shape[0] - listed, words))
    if dense.dtype.itemsize != 4:
        raise body.fail(
            f"{pointer}/dense",
            "bitset rows of the wrong word size",
            expected="4-byte words",
            found=f"{dense.dtype.itemsize}-byte words",
        )
    ids = body.ids(f"{pointer}/ids", (None,), 0, vocab_size)
    lengths = body.ids(f"{pointer}/id_lengths", (listed,), 0, words + 1)
    starts = np.zeros(listed + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    if int(starts[-1]) != ids.shape[0]:
        raise body.fail(
            f"{pointer}/id_lengths",
            "row lengths do not add up to the ids",
            expected=f"{ids.shape[0]} ids",
            found=int(starts[-1]),
        )
    wide = ids.astype(np.int64)
    # Within a row the ids strictly increase (the writer lists set bits in order).
    steps = np.ones(wide.shape[0], dtype=np.bool_)
    steps[1:] = wide[1:] > wide[:-1]
    steps[starts[:-1][lengths > 0]] = True
    if not steps.all():
        at = int(np.argmin(steps))
        raise body.fail(
            f"{pointer}/ids/{at}",
            "row ids not strictly increasing",
            expected=f"> {wide[at - 1]}",
            found=int(wide[at]),
        )
    tail = vocab_size % 32
    if tail and dense.shape[0]:
        spill = dense[:, -1].astype(np.int64) & ~((1 << tail) - 1) & 0xFFFFFFFF
        if spill.any():
            row = int(np.flatnonzero(spill)[0])
            raise body.fail(
                f"{pointer}/dense/{row}",
                "bits set past the vocabulary",
                expected=f"ids < {vocab_size}",
                found="a bit past them",
            )
    stored = sum(
        len(body.field(f"{pointer}/{part}/data"))
        for part in ("kinds", "dense", "ids", "id_lengths")
    )
    return StoredRows(pointer, kinds, dense, ids, starts, stored)


def check_budget(body: Body, tables: list[StoredRows], vocab_size: int, ceiling: int) -> None:
    """Refuse row tables that would decode to more than max(DECODE_RATIO x their stored
    bytes, `ceiling`), before any is decoded."""
    words = bitmask_words(vocab_size)
    decoded = sum(t.num_rows for t in tables) * words * 4
    stored = sum(t.stored_bytes for t in tables)
    allowed = max(DECODE_RATIO * stored, ceiling)
    if decoded > allowed:
        raise body.fail(
            tables[0].pointer if tables else "/masks",
            f"mask rows would decode to more than the load budget (raise "
            f"${MAX_DECODED_BYTES_ENV} or the max_decoded_bytes argument for a trusted one)",
            expected=f"<= {allowed} bytes ({DECODE_RATIO} x {stored} stored, or {ceiling})",
            found=f"{decoded} bytes",
        )


def decode_rows(rows: StoredRows, vocab_size: int) -> npt.NDArray[np.int32]:
    """int32[M, W]: the table's rows (bit layout in `fsmcompile.tables.bits`).

    Cost: O(M x W) for the zeroed table, plus one scatter over the listed ids."""
    words = bitmask_words(vocab_size)
    masks = np.zeros((rows.num_rows, words), dtype=np.int32)
    kinds = rows.kinds
    masks[kinds == DENSE] = rows.dense
    listed = np.flatnonzero(kinds != DENSE)
    if listed.shape[0]:
        flat = masks.view(np.uint32).reshape(-1)
        ids = rows.ids.astype(np.int64)
        row_of_id = np.repeat(listed.astype(np.int64), np.diff(rows.starts))
        np.bitwise_or.at(
            flat,
            row_of_id * words + (ids >> 5),
            np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32)),
        )
        rejected = listed[kinds[listed] == REJECTED]
        if rejected.shape[0]:
            block = masks[rejected]
            np.invert(block, out=block)
            tail = vocab_size % 32
            if tail:
                block[:, -1] &= np.int32((1 << tail) - 1)
            masks[rejected] = block
    return masks
