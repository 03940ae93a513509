"""Bitmask apply for numpy logits (and CPU torch tensors viewed as numpy).

np.unpackbits is table-driven and writes one byte per token. Rows are processed in
chunks of about 256 KiB of unpacked mask: a whole-batch temporary (128 MiB at batch 1024
on a 128k vocabulary) costs more in page faults and cache misses than the unpacking
itself, while a chunk stays in L2 between the unpack and the masked write.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

_CHUNK_BYTES = 1 << 18


def apply_bitmask_inplace(
    logits: npt.NDArray[np.floating],
    bitmask: npt.NDArray[np.int32],
    indices: npt.NDArray[np.int64] | None,
) -> None:
    """Set disallowed logits to -inf; inputs already validated by the public boundary.

    Args:
        logits: float[B, V], written in place.
        bitmask: int32[R, W]; row i applies to logits row indices[i] (or i). Columns
            past 32 * W are disallowed.
        indices: int64[R] logits rows, or None for R == B.
    """
    vocab = logits.shape[1]
    covered = min(vocab, bitmask.shape[1] * 32)
    words = (covered + 31) // 32
    rows = bitmask.shape[0]
    step = max(1, _CHUNK_BYTES // (words * 32))
    neg_inf = -np.inf
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        # Invert first: unpacking the complement yields "disallowed" directly, as 0/1
        # bytes that reinterpret as bool without another pass.
        inverted = np.invert(bitmask[start:stop, :words])
        unpacked = np.unpackbits(inverted.view(np.uint8), axis=1, bitorder="little")
        disallowed = unpacked[:, :covered].view(np.bool_)
        if indices is None:
            target = logits[start:stop]
        else:
            target = logits[indices[start:stop]]
        np.copyto(target[:, :covered], neg_inf, where=disallowed)
        if covered < vocab:
            target[:, covered:] = neg_inf
        if indices is not None:
            logits[indices[start:stop]] = target
