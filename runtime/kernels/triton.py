"""Bitmask apply as one Triton kernel: the CUDA fast path.

One program per (logits row, block of BLOCK_SIZE tokens). It reads one bitmask word per
32 tokens and writes -inf only where a bit is clear, never reading the logits, so a dense
row costs a write of its masked entries and nothing more. Rows come from `indices`
directly, so the vLLM processor's gathered rows need no scatter pass.

Importing this module needs triton; the dispatcher imports it only for CUDA tensors.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_BLOCK_SIZE = 4096


# Triton resolves every name in a kernel's signature as a global of the kernel, so the
# runtime arguments carry no annotations (an `Any` there fails at the first launch).
@triton.jit  # type: ignore[untyped-decorator, unused-ignore]
def _apply_bitmask_kernel(  # type: ignore[no-untyped-def]
    logits_ptr,
    bitmask_ptr,
    indices_ptr,
    vocab_size,
    num_words,
    logits_row_stride,
    bitmask_row_stride,
    HAS_INDICES: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0)
    block = tl.program_id(1)
    if HAS_INDICES:
        logits_row = tl.load(indices_ptr + row).to(tl.int64)
    else:
        logits_row = row.to(tl.int64)
    offsets = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    in_vocab = offsets < vocab_size
    word_index = offsets // 32
    # Words past the bitmask read as 0: tokens past 32 * W are disallowed.
    words = tl.load(
        bitmask_ptr + row.to(tl.int64) * bitmask_row_stride + word_index,
        mask=in_vocab & (word_index < num_words),
        other=0,
    )
    allowed = (words >> (offsets % 32)) & 1
    neg_inf = tl.full((BLOCK_SIZE,), float("-inf"), logits_ptr.dtype.element_ty)
    tl.store(
        logits_ptr + logits_row * logits_row_stride + offsets,
        neg_inf,
        mask=in_vocab & (allowed == 0),
    )


def apply_bitmask_inplace(
    logits: torch.Tensor, bitmask: torch.Tensor, indices: torch.Tensor | None
) -> None:
    """Same contract as kernels.torch.apply_bitmask_inplace; CUDA tensors, unit column stride."""
    rows = bitmask.shape[0]
    if rows == 0:
        return
    vocab = logits.shape[1]
    grid = (rows, triton.cdiv(vocab, _BLOCK_SIZE))
    _apply_bitmask_kernel[grid](
        logits,
        bitmask,
        indices if indices is not None else bitmask,
        vocab,
        bitmask.shape[1],
        logits.stride(0),
        bitmask.stride(0),
        HAS_INDICES=indices is not None,
        BLOCK_SIZE=_BLOCK_SIZE,
        num_warps=8,
    )
