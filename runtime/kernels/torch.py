"""Bitmask apply in plain torch ops: the portable kernel for any device and float dtype.

Unpacking works on bytes, not words: shifting a uint8 view by 0..7 keeps the temporary
at one byte per token (an int32 unpack would be four) and the 0/1 result reinterprets as
bool with no extra pass.
"""

from __future__ import annotations

import torch

_SHIFT_CACHE: dict[torch.device, torch.Tensor] = {}
_CHUNK_BYTES = 1 << 18


def _shifts(device: torch.device) -> torch.Tensor:
    shifts = _SHIFT_CACHE.get(device)
    if shifts is None:
        shifts = torch.arange(8, dtype=torch.uint8, device=device)
        _SHIFT_CACHE[device] = shifts
    return shifts


def unpack_disallowed(bitmask: torch.Tensor, num_tokens: int) -> torch.Tensor:
    """bool[R, num_tokens]: True where the int32[R, W] bitmask has a clear bit.

    Relies on little-endian byte order (x86, ARM, CUDA): bit i of a word is bit i % 8 of
    byte i // 8, matching fsmcompile.tables.bits.
    """
    rows = bitmask.shape[0]
    inverted = torch.bitwise_not(bitmask).contiguous().view(torch.uint8)
    bits = (inverted.unsqueeze(-1) >> _shifts(bitmask.device)) & 1
    return bits.view(rows, -1)[:, :num_tokens].view(torch.bool)


def apply_bitmask_inplace(
    logits: torch.Tensor, bitmask: torch.Tensor, indices: torch.Tensor | None
) -> None:
    """Set disallowed logits to -inf; inputs already validated by the public boundary.

    Args:
        logits: float[B, V] (float32, float16, bfloat16, float64), written in place.
        bitmask: int32[R, W] on the logits' device; row i applies to logits row
            indices[i] (or i). Columns past 32 * W are disallowed.
        indices: int64[R] logits rows on the logits' device, or None for R == B.
    """
    rows = bitmask.shape[0]
    if logits.device.type != "cpu":
        # One launch sequence for the whole batch; the caching allocator makes the
        # R x V-byte temporary cheap.
        _apply_rows(logits, bitmask, indices)
        return
    # On CPU, chunks of ~256 KiB of unpacked mask stay in cache and avoid page faults.
    step = max(1, _CHUNK_BYTES // (bitmask.shape[1] * 32))
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        chunk_indices = None if indices is None else indices[start:stop]
        chunk_logits = logits if indices is not None else logits[start:stop]
        _apply_rows(chunk_logits, bitmask[start:stop], chunk_indices)


def _apply_rows(logits: torch.Tensor, bitmask: torch.Tensor, indices: torch.Tensor | None) -> None:
    vocab = logits.shape[1]
    covered = min(vocab, bitmask.shape[1] * 32)
    words = (covered + 31) // 32
    disallowed = unpack_disallowed(bitmask[:, :words], covered)
    target = logits if indices is None else logits.index_select(0, indices)
    target[:, :covered].masked_fill_(disallowed, float("-inf"))
    if covered < vocab:
        target[:, covered:].fill_(float("-inf"))
    if indices is not None:
        logits.index_copy_(0, indices, target)
