"""vLLM v1 logits processor: enforce fsmcompile indexes inside vLLM's persistent batch.

Load it with `--logits-processors fsmcompile.runtime.vllm:FSMLogitsProcessor` and guide a
request through its sampling params:

    SamplingParams(extra_args={"fsmcompile": {"regex": "[0-9]{3}"}})

with exactly one of `regex`, `json_schema` (dict or JSON text), `grammar` (Lark) or
`index` (a key given to `register_index` in this process, else the path of an artifact
written by `fsmcompile.save`), plus an optional `start_after` marker text (e.g.
"</think>"): the constraint then applies to the tokens after the one that completes the
marker in the output.

A spec is compiled in `update_state` the first time it is seen, with the engine's
tokenizer, and kept in a small LRU (the compiler's own cache tiers sit behind it); a
request that must not wait for a compile should name a precompiled `index`.

Per step the CPU work is: per guided row, advance its matcher by the tokens appended to
its `output_tok_ids` since the last step (dict lookups) and read one mask id. `apply` then
ships one small int64 tensor (rows, mask ids) to the device and does one gather from a
device-resident table of every index's masks plus one fused apply, with no host sync.
Lark grammar rows, whose masks depend on the parser stack, are filled on the host in
`update_state` and copied over their gathered rows (one more async copy).

Failures stay per request: a spec that does not compile, an unknown index key or a sampled
token the mask did not allow (e.g. from a sampler that ignored the mask) leaves that row
with an EOS-only mask and a logged error; the batch goes on.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import torch

from fsmcompile.errors import (
    FsmcompileError,
    SpecError,
    VocabularyError,
    VocabularyMismatchError,
)
from fsmcompile.index.bits import bitmask_words

from .bitmask import DeviceMaskTable, MaskSegment
from .kernels import apply_bitmask_inplace
from .matcher import DfaMatcher, TokenMatcher, matcher_for

if TYPE_CHECKING:
    from fsmcompile.artifact import AnyIndex
    from fsmcompile.vocabulary import Vocabulary

    from .batch import BatchUpdate, MoveDirectionality

    _LogitsProcessorBase = object
else:
    try:  # Pass vLLM's own objects through when it is installed.
        from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality
        from vllm.v1.sample.logits_processor import LogitsProcessor as _LogitsProcessorBase
    except ImportError:
        from .batch import BatchUpdate, MoveDirectionality

        _LogitsProcessorBase = object

logger = logging.getLogger(__name__)

EXTRA_ARGS_KEY = "fsmcompile"
"""The key under `SamplingParams.extra_args` that holds a request's spec."""

_SPEC_KINDS = ("regex", "json_schema", "grammar", "index")
_COMPILERS = {
    "regex": "compile_regex",
    "json_schema": "compile_json_schema",
    "grammar": "compile_lark",
}
_COMPILE_CACHE_SIZE = 64

_DYNAMIC = -1
"""`_sync_row`'s answer for a row whose mask is computed per step (Lark grammars)."""

_registered_indexes: dict[str, AnyIndex] = {}


def register_index(key: str, index: AnyIndex) -> None:
    """Make `index` available to requests that ask for `{"index": key}` in this process."""
    _registered_indexes[key] = index


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request's constraint as read from its sampling params.

    `text` is the spec's canonical text (JSON Schema dicts are dumped with sorted keys),
    so equal specs share one compiled index.
    """

    kind: str
    text: str
    start_after: str | None = None

    @classmethod
    def from_params(cls, params: Any) -> RequestSpec | None:
        """Read `params.extra_args["fsmcompile"]`; None when the request is not guided.

        Raises:
            SpecError: the entry is not a dict with exactly one of regex, json_schema,
                grammar or index (plus an optional start_after string).
        """
        extra = getattr(params, "extra_args", None)
        if not extra or EXTRA_ARGS_KEY not in extra:
            return None
        entry = extra[EXTRA_ARGS_KEY]
        if not isinstance(entry, dict):
            raise SpecError(
                f'extra_args["{EXTRA_ARGS_KEY}"]: expected a dict, found {type(entry).__name__}'
            )
        unknown = sorted(set(entry) - set(_SPEC_KINDS) - {"start_after"})
        kinds = [k for k in _SPEC_KINDS if k in entry]
        if unknown or len(kinds) != 1:
            raise SpecError(
                f'extra_args["{EXTRA_ARGS_KEY}"]: expected exactly one of {", ".join(_SPEC_KINDS)}'
                f" (and optionally start_after), found keys {sorted(entry)}"
            )
        kind = kinds[0]
        value = entry[kind]
        if kind == "json_schema" and isinstance(value, dict):
            value = json.dumps(value, sort_keys=True, separators=(",", ":"))
        if not isinstance(value, str):
            raise SpecError(
                f'extra_args["{EXTRA_ARGS_KEY}"]["{kind}"]: expected a string, '
                f"found {type(value).__name__}"
            )
        start_after = entry.get("start_after")
        if start_after is not None and (not isinstance(start_after, str) or not start_after):
            raise SpecError(
                f'extra_args["{EXTRA_ARGS_KEY}"]["start_after"]: expected a non-empty string'
            )
        return cls(kind, value, start_after)


class _Row:
    """One guided request in the batch: its matcher and how far it has read its output."""

    __slots__ = (
        "matcher",
        "dynamic",
        "num_words",
        "token_bytes",
        "segment",
        "output",
        "consumed",
        "failed",
        "marker",
        "marker_ids",
        "tail",
        "recent",
        "label",
    )

    def __init__(self, output: list[int], label: str) -> None:
        self.output = output
        self.consumed = 0
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
        self.label = label


class FSMLogitsProcessor(_LogitsProcessorBase):
    """Masks the logits of every request that carries an fsmcompile spec.

    Rows without a spec are never touched, and `apply` returns at once when no row is
    guided. Not argmax-invariant: masking changes the greedy choice.
    """

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        """Read the tokenizer and logits width from the engine config.

        Args:
            vllm_config: the engine's VllmConfig; uses `model_config.tokenizer` (a path or
                name for `fsmcompile.Vocabulary.load`) and `model_config.get_vocab_size()`.
            device: where the logits live; the mask table is kept there.
            is_pin_memory: whether pinned host buffers may be used for the per-step copy.
        """
        model_config = vllm_config.model_config
        self._tokenizer = model_config.tokenizer
        self._vocab_size = int(model_config.get_vocab_size())
        self._device = torch.device(device)
        self._pin = bool(is_pin_memory) and self._device.type == "cuda"
        self._vocabulary: Vocabulary | None = None
        self._vocabulary_error: FsmcompileError | None = None
        self._table: DeviceMaskTable | None = None
        self._compiled: OrderedDict[tuple[str, str], AnyIndex | Exception] = OrderedDict()
        self._rows: list[_Row | None] = []
        self._batch_size = 0
        self._num_rows = 0
        self._guided_rows: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._guided_masks: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        # Rows whose masks are computed on the host each step: their positions in
        # _guided_rows and the int32[n, W] rows themselves.
        self._dynamic_positions: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._dynamic_masks: npt.NDArray[np.int32] = np.zeros((0, 0), dtype=np.int32)
        self._warned_rows = False

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """Reject a malformed `extra_args["fsmcompile"]` entry at the API boundary.

        Only the shape is checked here; compiling happens in the engine process.

        Raises:
            SpecError: (a ValueError) the entry is malformed.
        """
        RequestSpec.from_params(sampling_params)

    def is_argmax_invariant(self) -> bool:
        """False: masking changes which token has the highest logit."""
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        """Apply the batch changes (removed, then added, then moved), then advance rows.

        Every guided row advances by the tokens appended to its output list since the
        last call, with or without a batch update.
        """
        if batch_update is not None:
            self._apply_batch_update(batch_update)
        if self._num_rows == 0:
            self._guided_rows = self._guided_rows[:0]
            return
        rows: list[int] = []
        masks: list[int] = []
        dynamic: list[_Row] = []
        positions: list[int] = []
        slots = self._rows
        for i in range(min(self._batch_size, len(slots))):
            row = slots[i]
            if row is None:
                continue
            mask_id = self._sync_row(row)
            if mask_id is None:
                continue
            if mask_id == _DYNAMIC:
                positions.append(len(rows))
                dynamic.append(row)
                mask_id = DeviceMaskTable.EOS_ROW  # overwritten after the gather
            rows.append(i)
            masks.append(mask_id)
        self._guided_rows = np.array(rows, dtype=np.int64)
        self._guided_masks = np.array(masks, dtype=np.int64)
        self._dynamic_positions = np.array(positions, dtype=np.int64)
        if dynamic:
            self._fill_dynamic(dynamic)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Mask the guided rows of `logits` (float[B, V]) in place and return it."""
        count = self._guided_rows.shape[0]
        if count == 0:
            return logits
        table = self._table
        assert table is not None  # every guided row got one (or was dropped) when added
        if logits.device != table.table.device:
            raise ValueError(
                f"logits device: expected {table.table.device} (the processor's), "
                f"found {logits.device}"
            )
        rows = self._guided_rows
        masks = self._guided_masks
        positions = self._dynamic_positions
        dynamic = self._dynamic_masks
        num_logits = logits.shape[0]
        if rows[-1] >= num_logits:
            keep = rows < num_logits
            rows, masks = rows[keep], masks[keep]
            count = rows.shape[0]
            if positions.shape[0]:
                kept = keep[positions]
                positions = (np.cumsum(keep) - 1)[positions[kept]]
                dynamic = dynamic[kept]
            if not self._warned_rows:
                self._warned_rows = True
                logger.warning(
                    "logits have %d rows but the batch has %d requests; rows past the "
                    "logits are not masked",
                    num_logits,
                    self._batch_size,
                )
            if count == 0:
                return logits
        host = torch.from_numpy(np.concatenate((rows, masks, positions)))
        if self._pin:
            host = host.pin_memory()
        packed = host.to(self._device, non_blocking=True)
        bitmask = table.gather(packed[count : 2 * count])
        if positions.shape[0]:
            host_rows = torch.from_numpy(dynamic)
            if self._pin:
                host_rows = host_rows.pin_memory()
            bitmask.index_copy_(
                0, packed[2 * count :], host_rows.to(self._device, non_blocking=True)
            )
        # Rows are ascending and distinct, so count == num_logits means rows 0..B-1.
        indices = None if count == num_logits else packed[:count]
        apply_bitmask_inplace(logits, bitmask, indices)
        return logits

    # -- batch membership -------------------------------------------------------------

    def _apply_batch_update(self, update: BatchUpdate) -> None:
        slots = self._rows
        for index in update.removed:
            self._discard(index)
        for added in update.added:
            index, params, output = added[0], added[1], added[-1]
            self._discard(index)
            row = self._new_row(index, params, output)
            if row is not None:
                self._put(index, row)
        for src, dst, direction in update.moved:
            self._grow(max(src, dst) + 1)
            if direction.name == "SWAP":
                slots[src], slots[dst] = slots[dst], slots[src]
            else:
                if src == dst:
                    continue
                self._discard(dst)
                slots[dst], slots[src] = slots[src], None
        self._batch_size = update.batch_size
        for index in range(update.batch_size, len(slots)):
            self._discard(index)  # condensed away; vLLM leaves nothing here

    def _grow(self, size: int) -> None:
        if len(self._rows) < size:
            self._rows.extend([None] * (size - len(self._rows)))

    def _put(self, index: int, row: _Row) -> None:
        self._grow(index + 1)
        self._rows[index] = row
        self._num_rows += 1

    def _discard(self, index: int) -> None:
        if index < len(self._rows):
            row = self._rows[index]
            if row is not None:
                self._rows[index] = None
                self._num_rows -= 1
                if row.segment is not None and self._table is not None:
                    self._table.release(row.segment)

    def _new_row(self, index: int, params: Any, output: list[int]) -> _Row | None:
        try:
            spec = RequestSpec.from_params(params)
        except SpecError as exc:
            return self._failed_row(_Row(output, f"batch index {index}"), exc)
        if spec is None:
            return None
        row = _Row(output, f"batch index {index} ({spec.kind})")
        try:
            index_obj = self._index_for(spec)
        except Exception as exc:  # never let one request's spec crash the batch
            return self._failed_row(row, exc)
        matcher = matcher_for(index_obj)
        vocabulary = index_obj.vocabulary
        table = self._mask_table(vocabulary.eos_token_ids)
        row.matcher = matcher
        row.token_bytes = vocabulary.token_bytes
        row.num_words = bitmask_words(vocabulary.size)
        if isinstance(matcher, DfaMatcher):
            row.segment = table.acquire(matcher.tables)
        else:
            row.dynamic = True
        if spec.start_after is not None:
            row.marker = spec.start_after.encode("utf-8")
            try:
                row.marker_ids = tuple(index_obj.vocabulary.encode(spec.start_after))
            except Exception:  # the byte match below still works
                row.marker_ids = ()
        return row

    def _failed_row(self, row: _Row, exc: BaseException) -> _Row | None:
        """`row` with an EOS-only mask, or None (unguided) if not even EOS is known."""
        self._fail(row, exc)
        if self._table is None:
            try:
                self._mask_table(self._load_vocabulary().eos_token_ids)
            except FsmcompileError:
                logger.error("fsmcompile: %s: EOS unknown (no tokenizer); left unmasked", row.label)
                return None
        return row

    def _fail(self, row: _Row, exc: BaseException) -> None:
        row.failed = True
        where = {
            k: getattr(exc, k)
            for k in ("pos", "pointer", "line", "column")
            if getattr(exc, k, None) is not None
        }
        # The message may quote the spec (user data): full text at DEBUG only.
        logger.error("fsmcompile: %s: %s %s; forcing EOS", row.label, type(exc).__name__, where)
        logger.debug("fsmcompile: %s: %s", row.label, exc)

    # -- compiling --------------------------------------------------------------------

    def _index_for(self, spec: RequestSpec) -> AnyIndex:
        key = (spec.kind, spec.text)
        hit = self._compiled.get(key)
        if hit is None:
            try:
                hit = self._build_index(spec)
            except Exception as exc:
                hit = exc
            self._compiled[key] = hit
            if len(self._compiled) > _COMPILE_CACHE_SIZE:
                self._compiled.popitem(last=False)
        self._compiled.move_to_end(key)
        if isinstance(hit, Exception):
            raise hit
        return hit

    def _build_index(self, spec: RequestSpec) -> AnyIndex:
        import fsmcompile

        if spec.kind == "index":
            index = _registered_indexes.get(spec.text)
            vocabulary = self._load_vocabulary()
            if index is None:
                # An artifact path written by fsmcompile.save; load() checks that it was
                # compiled for this vocabulary (VocabularyMismatchError otherwise).
                index = fsmcompile.load(spec.text, vocabulary)
            elif index.vocabulary.fingerprint != vocabulary.fingerprint:
                raise VocabularyMismatchError(
                    "registered index was compiled for another tokenizer",
                    expected=vocabulary.fingerprint,
                    found=index.vocabulary.fingerprint,
                    source=spec.text,
                )
            return index
        name = _COMPILERS[spec.kind]
        compile_fn = getattr(fsmcompile, name, None)
        if compile_fn is None:
            raise FsmcompileError(f"fsmcompile.{name} is not available in this version")
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
                    vocabulary = Vocabulary.load(self._tokenizer, vocab_size=self._vocab_size)
                except VocabularyError:
                    # The logits can be narrower than the tokenizer (unused added tokens);
                    # the mask table is cut to the logits width anyway.
                    vocabulary = Vocabulary.load(self._tokenizer)
            except Exception as exc:
                self._vocabulary_error = FsmcompileError(
                    f"cannot load the engine tokenizer {self._tokenizer!r}: {exc}"
                )
                raise self._vocabulary_error from exc
            self._vocabulary = vocabulary
        return self._vocabulary

    def _mask_table(self, eos_token_ids: Sequence[int]) -> DeviceMaskTable:
        # One table per processor; its EOS-only row comes from the first index (every
        # index is checked against the engine's one tokenizer).
        if self._table is None:
            self._table = DeviceMaskTable(self._device, self._vocab_size, eos_token_ids)
        return self._table

    # -- per step -----------------------------------------------------------------------

    def _sync_row(self, row: _Row) -> int | None:
        """Consume new output tokens; the row's global mask id, None while unguided."""
        output = row.output
        end = len(output)
        if end > row.consumed:
            for position in range(row.consumed, end):
                token = output[position]
                if token < 0:  # async-scheduling placeholder: read it next step
                    end = position
                    break
                self._consume(row, token)
            row.consumed = end
        if row.failed:
            return DeviceMaskTable.EOS_ROW
        if row.marker is not None:
            return None
        if row.dynamic:
            return _DYNAMIC
        matcher = row.matcher
        segment = row.segment
        assert isinstance(matcher, DfaMatcher) and segment is not None  # static, not failed
        state = matcher.state
        if state < 0:
            return DeviceMaskTable.EOS_ROW
        return segment.offset + segment.tables.state_mask[state]

    def _fill_dynamic(self, rows: list[_Row]) -> None:
        """Host masks of the per-step rows, cut to the table width for the upload."""
        table = self._table
        assert table is not None
        width = max(table.num_words, max(row.num_words for row in rows))
        buffer = np.zeros((len(rows), width), dtype=np.int32)
        for k, row in enumerate(rows):
            matcher = row.matcher
            assert matcher is not None
            matcher.fill_bitmask(buffer, k)  # EOS-only once terminated
        self._dynamic_masks = np.ascontiguousarray(buffer[:, : table.num_words])

    def _consume(self, row: _Row, token: int) -> None:
        if row.failed:
            return
        matcher = row.matcher
        assert matcher is not None
        if row.marker is not None:
            self._watch_marker(row, token)
            return
        if matcher.advance(token) or matcher.is_terminated():
            return
        row.failed = True
        logger.error(
            "fsmcompile: %s: sampled token %d was not allowed; forcing EOS", row.label, token
        )

    @staticmethod
    def _watch_marker(row: _Row, token: int) -> None:
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


__all__ = [
    "EXTRA_ARGS_KEY",
    "BatchUpdate",
    "FSMLogitsProcessor",
    "MoveDirectionality",
    "RequestSpec",
    "register_index",
]
