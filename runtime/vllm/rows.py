"""The guided requests of one vLLM worker: their matchers, and the masks they ask for.

Both model runners drive the same `GuidedRows`: a driver (`v1.py`, `v2.py`) knows how its
runner lays out the batch and where the sampled tokens are; this module knows what a
request's constraint allows. A request enters with `new_row` (its spec compiled or
loaded, its matcher built), is fed the tokens it sampled with `feed`, and says which mask
its next logits row needs with `mask_id` (a row of the device table) or `DYNAMIC` (a
Lark row, filled on the host by `fill_dynamic`). `apply_masks` then masks a whole batch
with one gather from the device table and one fused apply, with no host sync.

Failures stay per request: everything `new_row` does for one request (reading its spec,
compiling or loading its index, building its matcher, uploading its masks) runs inside
one guard, and any error leaves that request alone with an EOS-only mask and a logged
error, as does a sampled token its mask did not allow (e.g. from a sampler that ignored
the mask).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import torch

from fsmcompile.errors import FsmcompileError, VocabularyError
from fsmcompile.tables.bits import bitmask_words

from ..bitmask import DeviceMaskTable, MaskSegment
from ..kernels import apply_bitmask_inplace
from ..matcher import DfaMatcher, TokenMatcher, matcher_for
from .sources import resolve_index
from .spec import RequestSpec

if TYPE_CHECKING:
    from fsmcompile.artifact import AnyIndex
    from fsmcompile.vocabulary import Vocabulary

logger = logging.getLogger("fsmcompile.runtime.vllm")

_COMPILERS = {
    "regex": "compile_regex",
    "json_schema": "compile_json_schema",
    "grammar": "compile_lark",
}
_COMPILE_CACHE_SIZE = 64

DYNAMIC = -1
"""`mask_id`'s answer for a row whose mask is computed per step (Lark grammars)."""


class Row:
    """One guided request: its matcher, and how far it has read its output."""

    __slots__ = (
        "matcher",
        "dynamic",
        "num_words",
        "token_bytes",
        "segment",
        "consumed",
        "failed",
        "marker",
        "marker_ids",
        "tail",
        "recent",
        "label",
        "output",
    )

    def __init__(self, label: str, *, consumed: int = 0, output: Sequence[int] = ()) -> None:
        self.label = label
        self.consumed = consumed  # output position (V1) or sequence position (V2) read
        self.output = output  # V1: the engine's output list, shared by reference
        self.matcher: TokenMatcher | None = None
        self.dynamic = False  # mask computed per step (no static per-state table)
        self.num_words = 0
        self.token_bytes: list[bytes] = []
        self.segment: MaskSegment | None = None
        self.failed = False
        self.marker: bytes | None = None  # set while waiting for start_after
        self.marker_ids: tuple[int, ...] = ()
        self.tail = b""
        self.recent: tuple[int, ...] = ()


class GuidedRows:
    """Compiled indexes, the device mask table and the per-request logic, for one worker."""

    def __init__(self, *, tokenizer: Any, vocab_size: int, device: torch.device, pin: bool):
        """Args:
        tokenizer: the engine's tokenizer path or name (for `Vocabulary.load`).
        vocab_size: the logits width V.
        device: where the logits live; the mask table is kept there.
        pin: whether pinned host buffers may be used for the per-step copies.
        """
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.device = device
        self.pin = pin and device.type == "cuda"
        self.table: DeviceMaskTable | None = None
        self._vocabulary: Vocabulary | None = None
        self._vocabulary_error: FsmcompileError | None = None
        self._compiled: OrderedDict[tuple[str, str], AnyIndex | Exception] = OrderedDict()
        self._warned_rows = False

    # -- membership ---------------------------------------------------------------------

    def new_row(self, params: Any, label: str, **row_args: Any) -> Row | None:
        """The row for a request entering the batch; None when it is not guided.

        Never raises for a bad request: its row comes back failed (EOS-only mask), or
        None if not even EOS is known (no tokenizer), and the error is logged.
        """
        row = Row(label, **row_args)
        try:
            spec = RequestSpec.from_params(params)
            if spec is None:
                return None
            row.label = f"{label} ({spec.kind})"
            self._build_row(row, spec)
        except Exception as exc:  # never let one request's spec crash the batch
            self.release(row)
            return self._failed_row(row, exc)
        return row

    def release(self, row: Row) -> None:
        """Give back the row's mask segment (the request left or its slot was reused)."""
        segment, row.segment = row.segment, None
        if segment is not None and self.table is not None:
            self.table.release(segment)

    def _build_row(self, row: Row, spec: RequestSpec) -> None:
        index = self._index_for(spec)
        vocabulary = index.vocabulary
        matcher = matcher_for(index)
        table = self._mask_table(vocabulary.eos_token_ids)
        row.token_bytes = vocabulary.token_bytes
        row.num_words = bitmask_words(vocabulary.size)
        if spec.start_after is not None:
            row.marker = spec.start_after.encode("utf-8")
            try:
                row.marker_ids = tuple(vocabulary.encode(spec.start_after))
            except Exception:  # the byte match in _watch_marker still works
                row.marker_ids = ()
        if isinstance(matcher, DfaMatcher):
            row.segment = table.acquire(matcher.tables)
        else:
            row.dynamic = True
        row.matcher = matcher

    def _failed_row(self, row: Row, exc: BaseException) -> Row | None:
        """`row` with an EOS-only mask, or None (unguided) if not even EOS is known."""
        self._fail(row, exc)
        if self.table is None:
            try:
                self._mask_table(self._load_vocabulary().eos_token_ids)
            except FsmcompileError:
                logger.error("fsmcompile: %s: EOS unknown (no tokenizer); left unmasked", row.label)
                return None
        return row

    @staticmethod
    def _fail(row: Row, exc: BaseException) -> None:
        row.failed = True
        where = {
            k: getattr(exc, k)
            for k in ("pos", "pointer", "line", "column")
            if getattr(exc, k, None) is not None
        }
        # The message may quote the spec (user data): full text at DEBUG only.
        logger.error("fsmcompile: %s: %s %s; forcing EOS", row.label, type(exc).__name__, where)
        logger.debug("fsmcompile: %s: %s", row.label, exc)

    # -- compiling and loading ---------------------------------------------------------

    def _index_for(self, spec: RequestSpec) -> AnyIndex:
        if spec.kind == "index":
            # Not memoized here: registered and cached indexes are cheap to look up, and
            # a file that changes on disk must be read again (load checks it).
            return resolve_index(spec.text, self._load_vocabulary())
        key = (spec.kind, spec.text)
        hit = self._compiled.get(key)
        if hit is None:
            try:
                hit = self._compile(spec)
            except Exception as exc:
                hit = exc
            self._compiled[key] = hit
            if len(self._compiled) > _COMPILE_CACHE_SIZE:
                self._compiled.popitem(last=False)
        self._compiled.move_to_end(key)
        if isinstance(hit, Exception):
            raise hit
        return hit

    def _compile(self, spec: RequestSpec) -> AnyIndex:
        import fsmcompile

        name = _COMPILERS[spec.kind]
        compile_fn = getattr(fsmcompile, name)
        index = compile_fn(spec.text, self._load_vocabulary())
        logger.info("fsmcompile: compiled a %s spec for the batch", spec.kind)
        return index  # type: ignore[no-any-return]

    def _load_vocabulary(self) -> Vocabulary:
        """The engine tokenizer as a Vocabulary, loaded once (the first guided request)."""
        if self._vocabulary is None:
            if self._vocabulary_error is not None:
                raise self._vocabulary_error
            from fsmcompile import Vocabulary

            try:
                try:
                    vocabulary = Vocabulary.load(self.tokenizer, vocab_size=self.vocab_size)
                except VocabularyError:
                    # The logits can be narrower than the tokenizer (unused added tokens);
                    # the mask table is cut to the logits width anyway.
                    vocabulary = Vocabulary.load(self.tokenizer)
            except Exception as exc:
                self._vocabulary_error = FsmcompileError(
                    f"cannot load the engine tokenizer {self.tokenizer!r}: {exc}"
                )
                raise self._vocabulary_error from exc
            self._vocabulary = vocabulary
        return self._vocabulary

    def _mask_table(self, eos_token_ids: Sequence[int]) -> DeviceMaskTable:
        # One table per worker; its EOS-only row comes from the first index (every index
        # is checked against the engine's one tokenizer).
        if self.table is None:
            self.table = DeviceMaskTable(self.device, self.vocab_size, eos_token_ids)
        return self.table

    # -- per step -----------------------------------------------------------------------

    def feed(self, row: Row, tokens: Iterable[int]) -> None:
        """Consume tokens the request sampled (in order); a refused one fails the row."""
        for token in tokens:
            if row.failed:
                return
            if row.marker is not None:
                self._watch_marker(row, token)
                continue
            matcher = row.matcher
            assert matcher is not None  # a row that is not failed has one
            if self._advance(row, token) or row.failed or matcher.is_terminated():
                continue
            row.failed = True
            logger.error(
                "fsmcompile: %s: sampled token %d was not allowed; forcing EOS", row.label, token
            )

    def _advance(self, row: Row, token: int) -> bool:
        """`row.matcher.advance(token)`; an index that fails in use (a crafted or damaged
        cache entry passes the loader and trips the runtime's own bounds) fails this
        row alone, never the batch."""
        assert row.matcher is not None
        try:
            return row.matcher.advance(token)
        except FsmcompileError as exc:
            self._fail(row, exc)
            return False

    @staticmethod
    def mask_id(row: Row) -> int | None:
        """The row's global mask id, `DYNAMIC`, or None while it is not yet guided."""
        if row.failed:
            return DeviceMaskTable.EOS_ROW
        if row.marker is not None:
            return None
        if row.dynamic:
            return DYNAMIC
        matcher = row.matcher
        segment = row.segment
        assert isinstance(matcher, DfaMatcher) and segment is not None  # static, not failed
        state = matcher.state
        if state < 0:
            return DeviceMaskTable.EOS_ROW
        return segment.offset + segment.tables.state_mask[state]

    def plan_drafts(
        self, plan: MaskPlan, row: Row, logits_rows: Sequence[int], drafts: Sequence[int]
    ) -> None:
        """Plan the masks of one request's rows under speculative decoding.

        `logits_rows[k]` samples after the committed tokens plus `drafts[:k]`. The
        matcher walks the drafts and is rolled back afterwards, so the request's
        committed state is unchanged. Rows after a draft the constraint refuses get the
        EOS-only mask: the rejection sampler drops them anyway.
        """
        saved = (row.marker, row.tail, row.recent)
        matcher = row.matcher
        advanced = 0
        refused = False
        for k, logits_row in enumerate(logits_rows):
            if k and not refused and not row.failed:
                token = drafts[k - 1]
                if row.marker is not None:
                    self._watch_marker(row, token)
                elif matcher is not None and self._advance(row, token):
                    advanced += 1
                else:
                    refused = True
            if refused:
                plan.add(logits_row, DeviceMaskTable.EOS_ROW)
            else:
                plan.add_row(self, logits_row, row)
        row.marker, row.tail, row.recent = saved
        if matcher is not None and advanced:
            matcher.rollback(advanced)

    @staticmethod
    def _watch_marker(row: Row, token: int) -> None:
        marker = row.marker
        assert marker is not None
        token_bytes = row.token_bytes
        data = token_bytes[token] if 0 <= token < len(token_bytes) else b""
        window = row.tail + data
        found = marker in window
        if row.marker_ids:
            row.recent = (row.recent + (token,))[-len(row.marker_ids) :]
            found = found or row.recent == row.marker_ids
        if found:
            # Enforce from the next token on; bytes after the marker inside this token
            # were chosen unconstrained and are not fed to the matcher.
            row.marker = None
            row.tail = b""
            row.recent = ()
        else:
            row.tail = window[-(len(marker) - 1) :] if len(marker) > 1 else b""

    def apply_masks(self, logits: torch.Tensor, plan: MaskPlan) -> torch.Tensor:
        """Mask the planned rows of `logits` (float[B, V]) in place and return it."""
        count = len(plan.rows)
        if count == 0:
            return logits
        table = self.table
        assert table is not None  # every planned row has a row in it
        if logits.device != table.table.device:
            raise ValueError(
                f"logits device: expected {table.table.device} (the processor's), "
                f"found {logits.device}"
            )
        rows = np.array(plan.rows, dtype=np.int64)
        masks = np.array(plan.masks, dtype=np.int64)
        positions = np.array(plan.dynamic_positions, dtype=np.int64)
        num_logits = logits.shape[0]
        keep = rows < num_logits
        if not keep.all():
            if positions.shape[0]:
                dynamic_keep = keep[positions]
                kept = zip(plan.dynamic_rows, dynamic_keep, strict=True)
                plan.dynamic_rows = [r for r, k in kept if k]
                positions = (np.cumsum(keep) - 1)[positions[dynamic_keep]]
            rows, masks = rows[keep], masks[keep]
            count = rows.shape[0]
            if not self._warned_rows:
                self._warned_rows = True
                logger.warning(
                    "logits have %d rows but a guided request sits past them; "
                    "rows past the logits are not masked",
                    num_logits,
                )
            if count == 0:
                return logits
        host = torch.from_numpy(np.concatenate((rows, masks, positions)))
        if self.pin:
            host = host.pin_memory()
        packed = host.to(self.device, non_blocking=True)
        bitmask = table.gather(packed[count : 2 * count])
        if positions.shape[0]:
            host_rows = torch.from_numpy(self._fill_dynamic(plan.dynamic_rows))
            if self.pin:
                host_rows = host_rows.pin_memory()
            bitmask.index_copy_(
                0, packed[2 * count :], host_rows.to(self.device, non_blocking=True)
            )
        indices = None
        if count != num_logits or not np.array_equal(rows, np.arange(count)):
            indices = packed[:count]
        apply_bitmask_inplace(logits, bitmask, indices)
        return logits

    def _fill_dynamic(self, masks: list[npt.NDArray[np.int32]]) -> npt.NDArray[np.int32]:
        table = self.table
        assert table is not None
        width = table.num_words
        buffer = np.zeros((len(masks), width), dtype=np.int32)
        for k, mask in enumerate(masks):
            n = min(width, mask.shape[0])
            buffer[k, :n] = mask[:n]
        return buffer


class MaskPlan:
    """This step's masked logits rows: a table row each, or a host-filled mask (Lark)."""

    __slots__ = ("rows", "masks", "dynamic_positions", "dynamic_rows")

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.masks: list[int] = []
        self.dynamic_positions: list[int] = []  # positions in `rows` filled on the host
        self.dynamic_rows: list[npt.NDArray[np.int32]] = []

    def add(self, logits_row: int, mask_id: int) -> None:
        self.rows.append(logits_row)
        self.masks.append(mask_id)

    def add_row(self, guided: GuidedRows, logits_row: int, row: Row) -> None:
        """Plan `row`'s current mask for `logits_row` (nothing while it is unguided)."""
        mask_id = guided.mask_id(row)
        if mask_id is None:
            return
        if mask_id == DYNAMIC:
            matcher = row.matcher
            assert matcher is not None
            mask = np.zeros((1, row.num_words), dtype=np.int32)
            try:
                matcher.fill_bitmask(mask, 0)  # EOS-only once terminated
            except FsmcompileError as exc:
                guided._fail(row, exc)
                self.add(logits_row, DeviceMaskTable.EOS_ROW)
                return
            self.dynamic_positions.append(len(self.rows))
            self.dynamic_rows.append(mask[0])
            mask_id = DeviceMaskTable.EOS_ROW  # overwritten after the gather
        self.add(logits_row, mask_id)
