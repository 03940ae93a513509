"""What a tier says about one stored entry: its `EntryStat` and its `EntryVerdict`.

Maintenance (`fsmcompile cache ls|verify`, a fleet's health check) must look at entries
without the side effects of `Store.get`, which deletes what it cannot verify and bumps
LRU recency. Every tier answers with these records, and `judge_value` is the one place
that decides whether an entry's bytes are the artifact its key names, so a tier's
`verify` and every cache read agree on what "damaged" means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fsmcompile import artifact
from fsmcompile.errors import ArtifactCorruptError, ArtifactError, ArtifactVersionError
from fsmcompile.store.entry_check import check_entry
from fsmcompile.store.keys import parse_key
from fsmcompile.version import FORMAT_VERSION

__all__ = [
    "EntryStat",
    "EntryVerdict",
    "VerifyStatus",
    "format_of_key",
    "judge_value",
    "newer_format_verdict",
    "reason_of",
]

#: ok: the artifact its key names. corrupt: damaged, planted or for another key (a
#: reader deletes it). skipped: another artifact format, which no compile of this
#: version reads or overwrites. missing: nothing stored (or deleted meanwhile).
VerifyStatus = Literal["ok", "corrupt", "skipped", "missing"]


@dataclass(frozen=True, slots=True)
class EntryStat:
    """One entry as its tier stores it, read without touching it.

    Attributes:
        key: the cache key; None for a disk file whose header is unreadable (it can only
            be verified or purged, never served).
        tier: the store's `name`.
        location: where it lives: a file path, the Redis manifest key, or "memory".
        size_bytes: the value's length (what `get` returns); None when unknown.
        format_version: the artifact format the key names; None for keys not made by
            `cache_key`.
        modified_at: Unix time the tier last wrote the entry (memory), or last wrote or
            served it (disk: the mtime, which a hit bumps for LRU); None where the tier
            keeps no time (Redis).
        expires_in_s: seconds until the tier drops it (Redis TTL); None: no expiry.
    """

    key: str | None
    tier: str
    location: str
    size_bytes: int | None
    format_version: int | None = None
    modified_at: float | None = None
    expires_in_s: float | None = None


@dataclass(frozen=True, slots=True)
class EntryVerdict:
    """Whether one entry is the artifact its key names, and why not.

    Attributes:
        key: the entry's key (None: a disk file whose header is unreadable).
        tier: the store's `name`.
        location: as in `EntryStat`.
        status: see `VerifyStatus`.
        reason: why it is not ok, without the key (the caller names the entry).
        deleted: whether `verify_entries(delete_corrupt=True)` removed it.
    """

    key: str | None
    tier: str
    location: str
    status: VerifyStatus
    reason: str = ""
    deleted: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def format_of_key(key: str | None) -> int | None:
    """The artifact format a `cache_key` names, or None for other keys."""
    parts = parse_key(key) if key is not None else None
    return None if parts is None else parts.format_version


def reason_of(exc: ArtifactError) -> str:
    """The message without the " (source)" suffix: a verdict names its entry already."""
    message = str(exc)
    suffix = f" ({exc.source})"
    return message[: -len(suffix)] if exc.source and message.endswith(suffix) else message


def newer_format_verdict(key: str | None, tier: str, location: str) -> EntryVerdict | None:
    """A `skipped` verdict for a key naming a format newer than this version reads.

    Such entries belong to newer clients sharing the tier: reading them would only find
    them "corrupt" and deleting them would break those clients.
    """
    version = format_of_key(key)
    if version is None or version <= FORMAT_VERSION:
        return None
    return EntryVerdict(
        key, tier, location, "skipped", f"format v{version} is newer than this fsmcompile reads"
    )


def judge_value(key: str | None, value: bytes, tier: str, location: str) -> EntryVerdict:
    """Check `value` as every cache read does: an artifact whose checksum holds and whose
    header names `key` (`entry_check.check_entry`; skipped for keys `cache_key` did not
    make, and for `key` None).

    Returns:
        An `ok`, `corrupt` or `skipped` (another artifact format) verdict.
    """
    try:
        artifact.read_header(value, source=key)
        if key is not None:
            check_entry(key, value)
    except ArtifactVersionError as exc:
        return EntryVerdict(key, tier, location, "skipped", reason_of(exc))
    except ArtifactCorruptError as exc:
        return EntryVerdict(key, tier, location, "corrupt", reason_of(exc))
    return EntryVerdict(key, tier, location, "ok")
