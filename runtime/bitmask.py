"""Bit-packed token masks on the engine side: allocate them, apply them to logits, keep
every index's mask table resident on the device.

The bit layout (token i = bit i % 32 of int32 word i // 32) is defined once, in
`fsmcompile.tables.bits`; this module only moves and applies such words. torch is imported
inside the functions that need it, so `import fsmcompile.runtime` stays torch-free.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from fsmcompile.tables.bits import bitmask_words, set_bits

from .kernels import apply_bitmask_inplace

if TYPE_CHECKING:
    import torch

    from .index_tables import IndexTables

logger = logging.getLogger(__name__)

_TORCH_LOGITS_DTYPES = ("torch.float32", "torch.float16", "torch.bfloat16", "torch.float64")
_NUMPY_LOGITS_DTYPES = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64))


def allocate_token_bitmask(
    batch_size: int, vocab_size: int, *, device: str | torch.device | None = None
) -> torch.Tensor:
    """A bitmask for `batch_size` rows of a `vocab_size`-wide logits tensor, all allowed.

    int32, not uint32: torch lacks uint32 bitwise ops on several devices, and the kernels
    read the same words. Filled with -1 (every bit set) so a row nobody fills masks
    nothing.

    Returns:
        int32[batch_size, ceil(vocab_size / 32)] on `device` (CPU by default).
    """
    import torch

    shape = (batch_size, bitmask_words(vocab_size))
    return torch.full(shape, -1, dtype=torch.int32, device=device)


def apply_token_bitmask_inplace(
    logits: Any, bitmask: Any, indices: Sequence[int] | Any | None = None
) -> None:
    """Set every logit whose token is not allowed by `bitmask` to -inf, in place.

    Columns of `logits` past 32 * W are masked (they are padded vocabulary rows); bits
    past the logits' width are ignored. The kernel is chosen by `kernels.choose_backend`:
    Triton for CUDA tensors when triton is importable, numpy for CPU float32/16/64, plain
    torch ops otherwise.

    Args:
        logits: float[B, V] or float[V]; a torch tensor (float32, float16, bfloat16,
            float64) or a numpy array (float32, float16, float64).
        bitmask: int32[R, W] or int32[W], the same library and device as `logits`.
        indices: which logits rows to mask: row i of `bitmask` applies to logits row
            `indices[i]`, so R == len(indices). None means R == B and row i to row i.
            (Unlike XGrammar, whose bitmask is indexed by the logits row, this compact
            form is what a gather from a mask table produces.)

    Raises:
        TypeError: wrong array library or dtype.
        ValueError: shapes or devices disagree, or `indices` are out of range or repeated.
    """
    if isinstance(logits, np.ndarray):
        host_logits, host_bitmask = _check_numpy(logits, bitmask)
        index_array = _check_indices_host(indices, host_logits.shape[0], host_bitmask.shape[0])
        apply_bitmask_inplace(host_logits, host_bitmask, index_array)
        return
    logits2, bitmask2 = _check_torch(logits, bitmask)
    index_tensor = _check_indices_torch(indices, logits2, bitmask2.shape[0])
    apply_bitmask_inplace(logits2, bitmask2, index_tensor)


def _check_numpy(logits: Any, bitmask: Any) -> tuple[Any, npt.NDArray[np.int32]]:
    if not isinstance(bitmask, np.ndarray):
        raise TypeError(f"bitmask: expected a numpy array like the logits, found {type(bitmask)}")
    if logits.dtype not in _NUMPY_LOGITS_DTYPES:
        raise TypeError(f"logits dtype: expected float32, float16 or float64, found {logits.dtype}")
    if bitmask.dtype != np.int32:
        raise TypeError(f"bitmask dtype: expected int32, found {bitmask.dtype}")
    if not logits.flags.writeable:
        raise ValueError("logits are read-only: expected a writeable array")
    logits2 = logits[None] if logits.ndim == 1 else logits
    bitmask2 = bitmask[None] if bitmask.ndim == 1 else bitmask
    _check_ndims(logits.ndim, bitmask.ndim)
    return logits2, bitmask2


def _check_torch(logits: Any, bitmask: Any) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"logits: expected a torch tensor or numpy array, found {type(logits)}")
    if not isinstance(bitmask, torch.Tensor):
        raise TypeError(f"bitmask: expected a torch tensor like the logits, found {type(bitmask)}")
    if str(logits.dtype) not in _TORCH_LOGITS_DTYPES:
        raise TypeError(
            f"logits dtype: expected float32, float16, bfloat16 or float64, found {logits.dtype}"
        )
    if bitmask.dtype != torch.int32:
        raise TypeError(f"bitmask dtype: expected torch.int32, found {bitmask.dtype}")
    if bitmask.device != logits.device:
        raise ValueError(
            f"bitmask device: expected {logits.device} (the logits' device), found "
            f"{bitmask.device}; move it first with .to(logits.device, non_blocking=True)"
        )
    _check_ndims(logits.dim(), bitmask.dim())
    logits2 = logits.unsqueeze(0) if logits.dim() == 1 else logits
    bitmask2 = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    return logits2, bitmask2


def _check_ndims(logits_ndim: int, bitmask_ndim: int) -> None:
    if logits_ndim not in (1, 2) or bitmask_ndim != logits_ndim:
        raise ValueError(
            f"dimensions: expected logits [B, V] with bitmask [B, W] or logits [V] with "
            f"bitmask [W], found {logits_ndim}-D logits and {bitmask_ndim}-D bitmask"
        )


def _check_indices_host(
    indices: Any, num_rows: int, bitmask_rows: int
) -> npt.NDArray[np.int64] | None:
    if indices is None:
        if bitmask_rows != num_rows:
            raise ValueError(
                f"bitmask rows: expected {num_rows} (one per logits row), found {bitmask_rows}"
            )
        return None
    array = np.asarray(indices.cpu() if hasattr(indices, "cpu") else indices, dtype=np.int64)
    if array.ndim != 1 or array.shape[0] != bitmask_rows:
        raise ValueError(
            f"indices: expected {bitmask_rows} row numbers (one per bitmask row), "
            f"found shape {list(array.shape)}"
        )
    if array.size and (array.min() < 0 or array.max() >= num_rows):
        raise ValueError(f"indices: expected values in 0..{num_rows - 1}, found {array.tolist()}")
    if np.unique(array).size != array.size:
        raise ValueError("indices: expected distinct logits rows, found repeats")
    return array


def _check_indices_torch(
    indices: Any, logits: torch.Tensor, bitmask_rows: int
) -> torch.Tensor | None:
    import torch

    if isinstance(indices, torch.Tensor) and indices.device.type != "cpu":
        # Checking values on the device would need a sync; shape and dtype only.
        if indices.dim() != 1 or indices.shape[0] != bitmask_rows:
            raise ValueError(
                f"indices: expected {bitmask_rows} row numbers (one per bitmask row), "
                f"found shape {list(indices.shape)}"
            )
        if indices.device != logits.device:
            raise ValueError(f"indices device: expected {logits.device}, found {indices.device}")
        return indices.to(torch.int64)
    array = _check_indices_host(indices, logits.shape[0], bitmask_rows)
    if array is None:
        return None
    return torch.from_numpy(array).to(logits.device)


@dataclass(eq=False)
class MaskSegment:
    """One index's rows in a `DeviceMaskTable`: global mask id = offset + local mask id.

    `offset` changes when the table compacts; read it at each use, never cache it.
    """

    tables: IndexTables
    offset: int
    num_rows: int
    users: int = 0


class DeviceMaskTable:
    """Every in-use index's masks, in one int32[R, W] tensor on the device.

    Why one table: a batch that mixes specs needs one gather, so all mask rows must live
    in one tensor. Each index is uploaded once per device (host to device, once) and owns
    a contiguous segment; row 0 is the EOS-only mask every finished or failed request
    uses. Segments nobody uses stay cached (LRU) until the table would pass
    `max_table_bytes`; then they are dropped and the rest compacted with device-to-device
    copies. Growth doubles the capacity, so uploads cost amortized O(rows).
    """

    EOS_ROW = 0

    def __init__(
        self,
        device: str | torch.device,
        vocab_size: int,
        eos_token_ids: Sequence[int],
        *,
        max_table_bytes: int = 1 << 30,
    ) -> None:
        """Create an empty table.

        Args:
            device: where the table lives (the logits' device).
            vocab_size: the engine's logits width V; rows have ceil(V / 32) words.
            eos_token_ids: ids set in the EOS-only row (ids >= V are ignored).
            max_table_bytes: soft cap; past it, unused segments are evicted.
        """
        import torch

        self.device = torch.device(device)
        self.vocab_size = vocab_size
        self.num_words = bitmask_words(vocab_size)
        self.max_table_bytes = max_table_bytes
        eos_row = np.zeros((1, self.num_words), dtype=np.int32)
        eos = [t for t in eos_token_ids if 0 <= t < vocab_size]
        set_bits(eos_row[0], np.array(eos, dtype=np.int64))
        self._table = torch.from_numpy(eos_row).to(self.device)
        self._used_rows = 1
        self._segments: OrderedDict[int, MaskSegment] = OrderedDict()
        self._warned_over_cap = False

    @property
    def table(self) -> torch.Tensor:
        """The int32[capacity, W] device tensor (rows past `used_rows` are garbage)."""
        return self._table

    @property
    def used_rows(self) -> int:
        return self._used_rows

    def acquire(self, tables: IndexTables) -> MaskSegment:
        """The segment holding `tables`' masks, uploading them on first use; counts a user."""
        key = id(tables)
        segment = self._segments.get(key)
        if segment is None or segment.tables is not tables:
            segment = self._upload(tables)
            self._segments[key] = segment
        self._segments.move_to_end(key)
        segment.users += 1
        return segment

    def release(self, segment: MaskSegment) -> None:
        """One user fewer; the rows stay cached until space is needed."""
        segment.users = max(0, segment.users - 1)

    def gather(self, mask_ids: torch.Tensor) -> torch.Tensor:
        """int32[N, W]: the rows `mask_ids` (int64[N] on the device), in one index_select."""
        return self._table.index_select(0, mask_ids)

    def _upload(self, tables: IndexTables) -> MaskSegment:
        import torch

        rows = np.stack(tables.all_mask_rows())  # empty masks already replaced by EOS-only
        width = rows.shape[1]
        if width < self.num_words:
            rows = np.pad(rows, ((0, 0), (0, self.num_words - width)))
        elif width > self.num_words:
            rows = rows[:, : self.num_words]
        count = rows.shape[0]
        self._reserve(count)
        segment = MaskSegment(tables, self._used_rows, count)
        host = torch.from_numpy(np.ascontiguousarray(rows, dtype=np.int32))
        self._table[self._used_rows : self._used_rows + count].copy_(host)
        self._used_rows += count
        logger.debug("uploaded %d mask rows (%d bytes) to %s", count, rows.nbytes, self.device)
        return segment

    def _reserve(self, count: int) -> None:
        import torch

        row_bytes = self.num_words * 4
        needed = self._used_rows + count
        if needed <= self._table.shape[0]:
            return
        if needed * row_bytes > self.max_table_bytes:
            self._evict_unused()
            needed = self._used_rows + count
            if needed * row_bytes > self.max_table_bytes and not self._warned_over_cap:
                self._warned_over_cap = True
                logger.warning(
                    "mask table needs %d bytes on %s, over max_table_bytes=%d; growing anyway",
                    needed * row_bytes,
                    self.device,
                    self.max_table_bytes,
                )
        if needed <= self._table.shape[0]:
            return
        capacity = max(needed, 2 * self._table.shape[0])
        if capacity * row_bytes > self.max_table_bytes:
            capacity = max(needed, self.max_table_bytes // row_bytes)
        grown = torch.empty((capacity, self.num_words), dtype=torch.int32, device=self.device)
        grown[: self._used_rows].copy_(self._table[: self._used_rows])
        self._table = grown

    def _evict_unused(self) -> None:
        """Drop unused segments and pack the rest to the front (device-to-device copies)."""
        kept: OrderedDict[int, MaskSegment] = OrderedDict()
        cursor = 1
        # In offset order, so every copy moves rows down and never over a live segment.
        by_offset = sorted(self._segments.items(), key=lambda item: item[1].offset)
        for key, segment in by_offset:
            if segment.users == 0:
                continue
            if segment.offset != cursor:
                src = self._table[segment.offset : segment.offset + segment.num_rows].clone()
                self._table[cursor : cursor + segment.num_rows].copy_(src)
                segment.offset = cursor
            cursor += segment.num_rows
            kept[key] = segment
        dropped = len(self._segments) - len(kept)
        # Keep the LRU order for the next eviction.
        self._segments = OrderedDict((k, kept[k]) for k in self._segments if k in kept)
        self._used_rows = cursor
        if dropped:
            logger.debug("evicted %d unused mask segments from %s", dropped, self.device)
