"""`fsmcompile cache ls|stats|verify|purge`: look after the disk and Redis cache tiers.

Every action goes through the public `Store` interface (`entries`, `stats`,
`verify_entries`, `purge`), which reads entries without `get`'s side effects, so
`verify --dry-run` and `ls` never delete or touch anything.
"""

from __future__ import annotations

import argparse
from typing import Any

from fsmcompile.errors import StoreError
from fsmcompile.store import DiskStore, EntryStat, EntryVerdict, Store

from ..options import add_cache_options
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
        add_cache_options(action, no_cache=False)
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


class _UsageError(Exception):
    """Options that name no usable tier (exit 2)."""


def _open_tiers(args: argparse.Namespace) -> list[Store]:
    """The tiers to work on.

    Raises:
        _UsageError: `--tier redis` without a URL, or a malformed URL.
    """
    if args.tier == "redis" and not args.redis:
        raise _UsageError("--tier redis needs --redis URL (or $FSMCOMPILE_REDIS_URL)")
    tiers: list[Store] = []
    if args.tier in (None, "disk"):
        tiers.append(DiskStore(args.cache_dir))
    if args.tier in (None, "redis") and args.redis:
        from fsmcompile.store import RedisStore  # redis-py loads only when Redis is used

        try:
            tiers.append(RedisStore(args.redis))
        except StoreError as exc:  # a malformed URL; an unreachable server fails later
            raise _UsageError(str(exc)) from exc
    return tiers


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
            except (StoreError, OSError) as exc:
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


def _ls(tier: Store, args: argparse.Namespace, console: Console, report: dict[str, Any]) -> bool:
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
        _entry_document(
            entry,
            size_bytes=entry.size_bytes,
            location=entry.location,
            format_version=entry.format_version,
            modified_at=entry.modified_at,
            expires_in_s=entry.expires_in_s,
        )
        for entry in entries
    ]
    report["count"] = len(entries)
    report["size_bytes"] = total
    return False


def _entry_document(entry: EntryStat | EntryVerdict, **fields: Any) -> dict[str, Any]:
    """`{"key", **fields}`, plus "path" for a disk entry (scripts read it to find the file)."""
    doc: dict[str, Any] = {"key": entry.key, **fields}
    if entry.tier == "disk":
        doc["path"] = entry.location
    return doc


def _stats(tier: Store, args: argparse.Namespace, console: Console, report: dict[str, Any]) -> bool:
    stats = tier.stats(detailed=True)
    console.line(f"{tier.name} ({tier.location})")
    for name, value in stats.items():
        if name in ("name", "directory", "url"):
            continue
        shown = f"{value} ({human_bytes(value)})" if name.endswith("_bytes") and value else value
        console.line(f"  {name}: {shown}")
    report["stats"] = stats
    return False


def _verify(
    tier: Store, args: argparse.Namespace, console: Console, report: dict[str, Any]
) -> bool:
    counts = {"checked": 0, "ok": 0, "corrupt": 0, "skipped": 0}
    problems: list[dict[str, Any]] = []
    for verdict in tier.verify_entries(args.prefix, delete_corrupt=not args.dry_run):
        counts["checked"] += 1
        counts[verdict.status] += 1
        if verdict.ok:
            continue
        note = (
            " (deleted)"
            if verdict.deleted
            else " (kept: --dry-run)"
            if verdict.status == "corrupt"
            else ""
        )
        console.line(f"{verdict.status}: {tier.name} {_name(verdict)}: {verdict.reason}{note}")
        problems.append(
            _entry_document(
                verdict, status=verdict.status, message=verdict.reason, deleted=verdict.deleted
            )
        )
    verb = "kept" if args.dry_run else "deleted"
    console.line(
        f"{tier.name}: verified {_entries(counts['checked'])}: {counts['ok']} ok, "
        f"{counts['corrupt']} corrupt ({verb}), {counts['skipped']} skipped"
    )
    report.update(counts, problems=problems)
    return counts["corrupt"] > 0


def _purge(tier: Store, args: argparse.Namespace, console: Console, report: dict[str, Any]) -> bool:
    deleted = tier.purge(args.prefix)
    total = sum(entry.size_bytes or 0 for entry in deleted)
    console.line(
        f"{tier.name}: purged {_entries(len(deleted))} ({human_bytes(total)}) from {tier.location}"
    )
    report.update(deleted=len(deleted), size_bytes=total)
    return False


def _entries(count: int) -> str:
    return f"{count} {'entry' if count == 1 else 'entries'}"


def _name(entry: EntryStat | EntryVerdict) -> str:
    return entry.key if entry.key is not None else f"<unreadable> {entry.location}"
