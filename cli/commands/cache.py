"""`fsmcompile cache ls|stats|verify|purge`: look after the disk and Redis cache tiers.

The stores' own `get` deletes an entry it cannot verify, which `verify --dry-run` and
`ls` must never do; so entries are read here without side effects (disk files directly,
Redis through `RedisStore`'s key layout) and deleted only through `Store.delete`.
"""

from __future__ import annotations

import argparse
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsmcompile import artifact
from fsmcompile.errors import (
    ArtifactCorruptError,
    ArtifactError,
    ArtifactVersionError,
    StoreError,
)
from fsmcompile.store import DiskStore
from fsmcompile.store.base import read_frame_key
from fsmcompile.store.entry_check import check_entry
from fsmcompile.store.keys import parse_key
from fsmcompile.version import FORMAT_VERSION

from ..output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Console, error_document, human_bytes

_EPILOG = """\
Keys look like KIND-vFORMAT-VOCAB-SHA256 (e.g. json-v1-3fa4c2d19b0e-...), so --prefix json-
selects JSON Schema entries and --prefix regex-v1-3fa4c2d19b0e- one tokenizer's regexes.

exit codes: 0 success; 1 a tier failed, or verify found corrupt entries; 2 usage error
(purge without --yes, --tier redis without a URL).
"""


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "cache",
        help="list, check or empty the disk and Redis cache tiers",
        description="Inspect and maintain the disk and Redis cache tiers.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="cache_action", metavar="ACTION", required=True)
    helps = {
        "ls": "list entries with their sizes, per tier",
        "stats": "print each tier's statistics",
        "verify": "read every entry, check framing and artifact checksums, delete corrupt ones",
        "purge": "delete every entry (or those under --prefix); needs --yes",
    }
    for name, text in helps.items():
        action = actions.add_parser(name, help=text, description=text, epilog=_EPILOG)
        action.formatter_class = argparse.RawDescriptionHelpFormatter
        action.add_argument(
            "--redis",
            default=os.environ.get("FSMCOMPILE_REDIS_URL"),
            metavar="URL",
            help="Redis tier (default $FSMCOMPILE_REDIS_URL; none: disk only)",
        )
        action.add_argument(
            "--dir",
            "--cache-dir",
            dest="cache_dir",
            default=None,
            metavar="DIR",
            help="disk tier folder (default $FSMCOMPILE_CACHE_DIR, else ~/.cache/fsmcompile)",
        )
        action.add_argument(
            "--tier", choices=["disk", "redis"], default=None, help="only this tier"
        )
        if name != "stats":
            action.add_argument(
                "--prefix", default="", metavar="KEY_PREFIX", help="only keys that start with this"
            )
        if name == "verify":
            action.add_argument(
                "--dry-run", action="store_true", help="report corrupt entries, delete nothing"
            )
        if name == "purge":
            action.add_argument("--yes", action="store_true", help="really delete")


# -- reading entries without side effects --------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Entry:
    """One stored entry: its key (None when a disk file's header is unreadable)."""

    key: str | None
    size_bytes: int | None
    path: Path | None = None  # disk only


class _Tier(ABC):
    """One tier as the commands see it: list, read (verified, raising), delete."""

    name: str
    location: str

    @abstractmethod
    def entries(self, prefix: str) -> Iterator[_Entry]:
        """The entries whose key starts with `prefix`, sorted by key."""

    @abstractmethod
    def read(self, entry: _Entry) -> bytes | None:
        """The entry's artifact bytes, or None if it vanished meanwhile.

        Raises:
            ArtifactCorruptError: the tier's framing or checksum does not hold.
        """

    @abstractmethod
    def delete(self, entry: _Entry) -> None:
        """Remove the entry (missing is fine)."""

    @abstractmethod
    def stats(self) -> dict[str, Any]:
        """The tier's `Store.stats()`, plus what this command can add."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the tier's connections."""


class _DiskTier(_Tier):
    """Entry files under `v1/objects/`, walked directly so unreadable ones show up too."""

    name = "disk"

    def __init__(self, directory: str | None) -> None:
        self.store = DiskStore(directory)
        self.location = str(self.store.directory)
        # `path_for` is objects/<2 hex>/<sha256 of key>: its grandparent is the root.
        self.objects = self.store.path_for("").parent.parent

    def entries(self, prefix: str) -> Iterator[_Entry]:
        found: list[_Entry] = []
        for path in self.objects.glob("*/*") if self.objects.is_dir() else ():
            if path.name.startswith(".tmp-") or not path.is_file():
                continue  # a write in progress (or a crashed one, which DiskStore sweeps)
            try:
                size = path.stat().st_size
                with open(path, "rb") as f:
                    key = read_frame_key(f.read)
            except OSError:
                continue  # deleted meanwhile
            # A file whose key cannot be read matches only when no prefix narrows the set.
            if (key is None and not prefix) or (key is not None and key.startswith(prefix)):
                found.append(_Entry(key, size, path))
        found.sort(key=lambda entry: (entry.key is None, entry.key or "", str(entry.path)))
        return iter(found)

    def read(self, entry: _Entry) -> bytes | None:
        if entry.path is None:
            raise ValueError("a disk entry needs its path")
        found = self.store.read_path(entry.path, expected_key=None)
        if found is None:
            return None
        key, value = found
        if self.store.path_for(key) != entry.path:
            raise ArtifactCorruptError(f"entry for {key!r} is filed under the wrong name")
        return value

    def delete(self, entry: _Entry) -> None:
        if entry.path is None:
            raise ValueError("a disk entry needs its path")
        entry.path.unlink(missing_ok=True)

    def stats(self) -> dict[str, Any]:
        return self.store.stats()


class _RedisTier(_Tier):
    """Entries listed by `RedisStore.keys`; manifests and chunks read via its key layout."""

    name = "redis"

    def __init__(self, url: str) -> None:
        from fsmcompile.store.redis import RedisStore

        self.store = RedisStore(url)
        self.location = self.store.url

    def entries(self, prefix: str) -> Iterator[_Entry]:
        for key in sorted(self.store.keys(prefix)):
            yield _Entry(key, self.store.entry_size(key))

    def read(self, entry: _Entry) -> bytes | None:
        if entry.key is None:
            raise ValueError("a Redis entry needs its key")
        return self.store.read_entry(entry.key)

    def delete(self, entry: _Entry) -> None:
        if entry.key is not None:
            self.store.delete(entry.key)

    def stats(self) -> dict[str, Any]:
        info = self.store.client.info()
        return {
            **self.store.stats(),
            "entries": sum(1 for _ in self.store.keys()),
            "server_version": info.get("redis_version"),
            "used_memory_bytes": info.get("used_memory"),
            "maxmemory_bytes": info.get("maxmemory"),
            "maxmemory_policy": info.get("maxmemory_policy"),
        }

    def close(self) -> None:
        self.store.close()


def _tier_errors() -> tuple[type[BaseException], ...]:
    """What a tier may raise when it cannot be read: store errors, redis-py's, the OS's."""
    errors: tuple[type[BaseException], ...] = (StoreError, OSError)
    try:
        import redis.exceptions
    except ImportError:  # pragma: no cover - redis is a dependency
        return errors
    return (*errors, redis.exceptions.RedisError)


class _UsageError(Exception):
    """Options that name no usable tier (exit 2)."""


def _open_tiers(args: argparse.Namespace) -> list[_Tier]:
    """The tiers to work on.

    Raises:
        _UsageError: `--tier redis` without a URL, or a malformed URL.
    """
    if args.tier == "redis" and not args.redis:
        raise _UsageError("--tier redis needs --redis URL (or $FSMCOMPILE_REDIS_URL)")
    tiers: list[_Tier] = []
    if args.tier in (None, "disk"):
        tiers.append(_DiskTier(args.cache_dir))
    if args.tier in (None, "redis") and args.redis:
        try:
            tiers.append(_RedisTier(args.redis))
        except StoreError as exc:  # a malformed URL; an unreachable server fails later
            raise _UsageError(str(exc)) from exc
    return tiers


# -- the actions ---------------------------------------------------------------------------


def run(args: argparse.Namespace, console: Console) -> int:
    if args.cache_action == "purge" and not args.yes:
        print("error: purge deletes cache entries; pass --yes to confirm", file=console.err)
        return EXIT_USAGE
    try:
        tiers = _open_tiers(args)
    except _UsageError as exc:
        print(f"error: {exc}", file=console.err)
        return EXIT_USAGE
    action = {"ls": _ls, "stats": _stats, "verify": _verify, "purge": _purge}[args.cache_action]
    reports: list[dict[str, Any]] = []
    failed = False
    try:
        for tier in tiers:
            report: dict[str, Any] = {"tier": tier.name, "location": tier.location}
            try:
                failed |= action(tier, args, console, report)
            except _tier_errors() as exc:
                failed = True
                report["error"] = error_document(exc)
                if not console.as_json:
                    print(f"error: {tier.name} tier at {tier.location}: {exc}", file=console.err)
            reports.append(report)
    finally:
        for tier in tiers:
            tier.close()
    doc: dict[str, Any] = {"ok": not failed, "action": args.cache_action, "tiers": reports}
    if args.cache_action == "verify":
        doc["dry_run"] = args.dry_run
    console.document(doc)
    return EXIT_FAILED if failed else EXIT_OK


def _ls(tier: _Tier, args: argparse.Namespace, console: Console, report: dict[str, Any]) -> bool:
    entries = list(tier.entries(args.prefix))
    total = sum(entry.size_bytes or 0 for entry in entries)
    for entry in entries:
        size = "?" if entry.size_bytes is None else human_bytes(entry.size_bytes)
        console.line(f"{tier.name:5s}  {size:>10s}  {_name(entry)}")
    preposition = "in" if tier.name == "disk" else "at"
    console.line(
        f"{tier.name}: {_entries(len(entries))}, {human_bytes(total)} {preposition} {tier.location}"
    )
    report["entries"] = [
        {"key": entry.key, "size_bytes": entry.size_bytes}
        | ({"path": str(entry.path)} if entry.path else {})
        for entry in entries
    ]
    report["count"] = len(entries)
    report["size_bytes"] = total
    return False


def _stats(tier: _Tier, args: argparse.Namespace, console: Console, report: dict[str, Any]) -> bool:
    stats = tier.stats()
    console.line(f"{tier.name} ({tier.location})")
    for name, value in stats.items():
        if name in ("name", "directory", "url"):
            continue
        shown = f"{value} ({human_bytes(value)})" if name.endswith("_bytes") and value else value
        console.line(f"  {name}: {shown}")
    report["stats"] = stats
    return False


def _verify(
    tier: _Tier, args: argparse.Namespace, console: Console, report: dict[str, Any]
) -> bool:
    counts = {"checked": 0, "ok": 0, "corrupt": 0, "skipped": 0}
    problems: list[dict[str, Any]] = []
    for entry in tier.entries(args.prefix):
        status, message = _check(tier, entry)
        if status == "vanished":
            continue
        counts["checked"] += 1
        counts[status] += 1
        if status == "ok":
            continue
        deleted = status == "corrupt" and not args.dry_run
        if deleted:
            tier.delete(entry)
        note = " (deleted)" if deleted else " (kept: --dry-run)" if status == "corrupt" else ""
        console.line(f"{status}: {tier.name} {_name(entry)}: {message}{note}")
        problems.append(
            {"key": entry.key, "status": status, "message": message, "deleted": deleted}
            | ({"path": str(entry.path)} if entry.path else {})
        )
    verb = "kept" if args.dry_run else "deleted"
    console.line(
        f"{tier.name}: verified {_entries(counts['checked'])}: {counts['ok']} ok, "
        f"{counts['corrupt']} corrupt ({verb}), {counts['skipped']} skipped"
    )
    report.update(counts, problems=problems)
    return counts["corrupt"] > 0


def _check(tier: _Tier, entry: _Entry) -> tuple[str, str]:
    """`(status, message)`: ok, corrupt, skipped (another format: no compile reads it) or
    vanished."""
    parts = parse_key(entry.key or "")  # None for names `cache_key` did not make
    if parts and parts.format_version > FORMAT_VERSION:
        return "skipped", f"format v{parts.format_version} is newer than this fsmcompile reads"
    try:
        value = tier.read(entry)
        if value is None:
            return "vanished", ""
        artifact.read_header(value, source=entry.key)
        if entry.key is not None:
            # The check every cache read makes: the artifact is the one its key names.
            check_entry(entry.key, value)
    except ArtifactVersionError as exc:
        return "skipped", _reason(exc)
    except ArtifactCorruptError as exc:
        return "corrupt", _reason(exc)
    return "ok", ""


def _purge(tier: _Tier, args: argparse.Namespace, console: Console, report: dict[str, Any]) -> bool:
    deleted = 0
    total = 0
    for entry in list(tier.entries(args.prefix)):
        tier.delete(entry)
        deleted += 1
        total += entry.size_bytes or 0
    console.line(
        f"{tier.name}: purged {_entries(deleted)} ({human_bytes(total)}) from {tier.location}"
    )
    report.update(deleted=deleted, size_bytes=total)
    return False


def _reason(exc: ArtifactError) -> str:
    """The message without the " (source)" suffix: the line names the entry already."""
    message = str(exc)
    suffix = f" ({exc.source})"
    return message[: -len(suffix)] if exc.source and message.endswith(suffix) else message


def _entries(count: int) -> str:
    return f"{count} {'entry' if count == 1 else 'entries'}"


def _name(entry: _Entry) -> str:
    return entry.key if entry.key is not None else f"<unreadable> {entry.path}"
