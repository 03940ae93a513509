"""The one definition of the bitmask layout: token i is bit i % 32 of int32 word i // 32.

int32 (not uint32) because torch has no uint32 bitwise ops on every device and the
GPU kernels read the same words; a set bit means "allowed".
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fsmcompile import _native


def bitmask_words(vocab_size: int) -> int:
    """Words in one bitmask row for a logits width of `vocab_size`: ceil(V / 32)."""
    return (vocab_size + 31) // 32


def pack_bool_rows(allowed: npt.NDArray[np.bool_]) -> npt.NDArray[np.int32]:
    """Pack bool[R, V] into int32[R, ceil(V/32)] (bits past V are zero)."""
    rows, width = allowed.shape
    # Packing a row-strided (column-major) matrix is several times slower than copying it.
    packed = np.packbits(np.ascontiguousarray(allowed), axis=1, bitorder="little")
    # Pad the packed bytes, not the bool matrix: copying [R, V] bools to pad them cost
    # several times the packing itself (128,257 tokens is not a multiple of 32).
    num_bytes = bitmask_words(width) * 4
    if packed.shape[1] != num_bytes:
        padded = np.zeros((rows, num_bytes), dtype=np.uint8)
        padded[:, : packed.shape[1]] = packed
        packed = padded
    return np.ascontiguousarray(packed).view("<i4").astype(np.int32, copy=False)


_GATHER_BLOCK_BYTES = 4 << 20
"""Most bytes of unpacked rows `pack_gathered_rows` holds at once."""


def pack_gathered_rows(
    table: npt.NDArray[np.bool_] | npt.NDArray[np.uint8], columns: npt.NDArray[np.int64]
) -> npt.NDArray[np.int32]:
    """`pack_bool_rows(table[:, columns])` (0/1 flags), a block of rows at a time.

    Whole, the gathered matrix is a byte per token per row: 160 MB for the 1,227 masks
    of a large schema at 128k tokens, and a fresh allocation that size costs its page
    faults on every compile (0.34 s, against 0.08 s in blocks of a few MB that the
    allocator hands back each time).
    """
    rows = table.shape[0]
    out = np.zeros((rows, bitmask_words(columns.shape[0]) * 4), dtype=np.uint8)
    block = max(1, _GATHER_BLOCK_BYTES // max(1, columns.shape[0]))
    for lo in range(0, rows, block):
        gathered: npt.NDArray[np.uint8] = np.take(table[lo : lo + block], columns, axis=1)
        packed = np.packbits(gathered, axis=1, bitorder="little")
        out[lo : lo + block, : packed.shape[1]] = packed
    return out.view("<i4").astype(np.int32, copy=False)


def unpack_row(words: npt.NDArray[np.int32], vocab_size: int) -> npt.NDArray[np.bool_]:
    """Unpack one int32[W] row into bool[V]."""
    as_bytes = np.ascontiguousarray(words, dtype="<i4").view(np.uint8)
    return np.unpackbits(as_bytes, bitorder="little")[:vocab_size].astype(np.bool_)


def set_bits(words: npt.NDArray[np.int32], token_ids: npt.NDArray[np.int64]) -> None:
    """Set the bits of `token_ids` (repeats allowed) in the int32[W] row `words`, in place."""
    ids = np.ascontiguousarray(token_ids, dtype=np.int64)
    _native.set_token_bits(words.reshape(1, -1), np.zeros(ids.shape[0], dtype=np.int64), ids)


def pack_token_ids(
    rows: npt.NDArray[np.int64], token_ids: npt.NDArray[np.int64], num_rows: int, vocab_size: int
) -> npt.NDArray[np.int32]:
    """int32[num_rows, ceil(V/32)]: row r allows the `token_ids[i]` with `rows[i] == r`.

    One OR per id, where a bool matrix a byte per token and `packbits` made several
    passes over every 128k-token row."""
    out = np.zeros((num_rows, bitmask_words(vocab_size)), dtype=np.int32)
    _native.set_token_bits(
        out,
        np.ascontiguousarray(rows, dtype=np.int64),
        np.ascontiguousarray(token_ids, dtype=np.int64),
    )
    return out


def or_token_runs(
    out: npt.NDArray[np.int32],
    token_ids: npt.NDArray[np.int64],
    starts: npt.NDArray[np.int64],
    stops: npt.NDArray[np.int64],
    rows: npt.NDArray[np.int64],
) -> None:
    """Set the bits of `token_ids[starts[r]:stops[r]]` in row `rows[r]` of `out`
    (int32[R, W], C-contiguous) for every run r, without gathering the runs first."""
    _native.set_token_runs(
        out,
        np.ascontiguousarray(token_ids, dtype=np.int64),
        np.ascontiguousarray(starts, dtype=np.int64),
        np.ascontiguousarray(stops, dtype=np.int64),
        np.ascontiguousarray(rows, dtype=np.int64),
    )


def is_bit_set(words: npt.NDArray[np.int32], token_id: int) -> bool:
    """Whether `token_id` is allowed in the int32[W] row `words`."""
    return bool((int(words[token_id >> 5]) >> (token_id & 31)) & 1)


def bit_positions(value: int) -> list[int]:
    """The positions of the set bits of a Python int bitset, lowest first."""
    out = []
    while value:
        low = value & -value
        out.append(low.bit_length() - 1)
        value ^= low
    return out
