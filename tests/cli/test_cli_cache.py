"""`fsmcompile warm` and `fsmcompile cache`, in-process against a private redis-server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
import redis
from redis_server import RedisServer, free_port
from support import DATA

from fsmcompile import Vocabulary
from fsmcompile.cli.main import main
from fsmcompile.compiler import index_cache_key
from fsmcompile.store import DiskStore
from fsmcompile.store.base import digest_of
from fsmcompile.version import FORMAT_VERSION
from fsmcompile.warm import WarmOutcome, collect_specs

pytestmark = pytest.mark.redis

TOKENIZER = str(DATA / "gpt2" / "tokenizer.json.gz")
# Small on purpose: each compiles in tens of milliseconds for GPT-2.
SCHEMAS = {
    "flag.json": {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    },
    "colour.json": {"enum": ["red", "green", "blue"]},
    "nested/ints.json": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
}
REGEXES = {"date.regex": r"\d{4}-\d{2}-\d{2}", "answer.regex": "(yes|no|maybe)"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.kill()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    yield redis_server.url
    client.close()


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    """A folder of 3 JSON Schemas (one in a subfolder) and 2 regexes, plus a README."""
    root = tmp_path / "specs"
    for name, schema in SCHEMAS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(json.dumps(schema))
    for name, pattern in REGEXES.items():
        (root / name).write_text(pattern + "\n")
    (root / "README.txt").write_text("not a spec: directory walks skip .txt")
    return root


def warm(
    capsys: pytest.CaptureFixture[str], specs: Path, cache_dir: Path, *extra: str
) -> tuple[int, str, str]:
    return run(capsys, "warm", str(specs), "-t", TOKENIZER, "--cache-dir", str(cache_dir), *extra)


def spec_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if not line.startswith("warmed ")]


def test_warm_directory_compiles_each_spec_then_hits_every_tier(
    capsys: pytest.CaptureFixture[str], specs: Path, tmp_path: Path, redis_url: str
) -> None:
    code, out, err = warm(capsys, specs, tmp_path / "a", "--redis", redis_url)
    assert code == 0, err
    lines = spec_lines(out)
    assert len(lines) == 5 and all(line.startswith("cache: miss (compiled in") for line in lines)
    assert [line.rsplit(" ", 1)[1] for line in lines] == sorted(
        str(specs / name) for name in [*SCHEMAS, *REGEXES]
    )
    assert "5 compiled, 0 cache hits, 0 failed" in out and err == ""

    code, out, _ = warm(capsys, specs, tmp_path / "a", "--redis", redis_url)
    assert code == 0
    assert all(line.startswith("cache: hit (disk) ") for line in spec_lines(out))

    # Another machine (a fresh disk tier) finds every spec published to Redis.
    code, out, _ = warm(capsys, specs, tmp_path / "b", "--redis", redis_url)
    assert code == 0
    assert all(line.startswith("cache: hit (redis) ") for line in spec_lines(out))


def test_warm_publishes_entries_found_only_on_local_disk(
    capsys: pytest.CaptureFixture[str], specs: Path, tmp_path: Path, redis_url: str
) -> None:
    assert warm(capsys, specs, tmp_path / "a")[0] == 0  # no Redis: disk only
    code, out, _ = warm(capsys, specs, tmp_path / "a", "--redis", redis_url)
    assert code == 0 and all(line.startswith("cache: hit (disk)") for line in spec_lines(out))
    code, out, _ = warm(capsys, specs, tmp_path / "b", "--redis", redis_url)
    assert all(line.startswith("cache: hit (redis)") for line in spec_lines(out))


def test_warm_jobs_2_json_keys_are_the_stored_keys(
    capsys: pytest.CaptureFixture[str], specs: Path, tmp_path: Path, redis_url: str
) -> None:
    code, out, err = warm(capsys, specs, tmp_path / "a", "--redis", redis_url, "--jobs", "2")
    assert code == 0, err
    argv = ["--json", "warm", str(specs), "-t", TOKENIZER, "--cache-dir", str(tmp_path / "a")]
    code, out, err = run(capsys, *argv, "--jobs", "2")
    doc = json.loads(out)
    assert code == 0 and doc["ok"] is True and doc["jobs"] == 2
    assert doc["summary"] == {"specs": 5, "compiled": 0, "hits": 5, "failed": 0}
    assert [spec["spec"] for spec in doc["specs"]] == sorted(
        str(specs / name) for name in [*SCHEMAS, *REGEXES]
    )
    # warm computes the key compile_spec stores under (it publishes by that key).
    assert {spec["key"] for spec in doc["specs"]} == set(DiskStore(tmp_path / "a").keys())


def test_warm_dead_redis_compiles_locally_with_one_warning(
    capsys: pytest.CaptureFixture[str], specs: Path, tmp_path: Path
) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    code, out, err = warm(capsys, specs, tmp_path / "a", "--redis", dead, "--jobs", "2")
    assert code == 0
    assert all(line.startswith("cache: miss (compiled in") for line in spec_lines(out))
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "unreachable" in warnings[0] and "locally" in warnings[0]


def test_warm_jsonl_bad_lines_fail_alone_with_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    jsonl = tmp_path / "specs.jsonl"
    lines = [
        json.dumps({"regex": "[a-c]{2}", "id": "two-letters"}),
        json.dumps({"json_schema": {"type": "boolean"}}),
        json.dumps({"type": "integer", "minimum": 0, "maximum": 9}),  # a bare schema
        "",
        "{not json",
        json.dumps({"regex": "ab(c"}),
    ]
    jsonl.write_text("\n".join(lines) + "\n")
    code, out, err = run(
        capsys, "warm", str(jsonl), "-t", TOKENIZER, "--cache-dir", str(tmp_path / "c")
    )
    assert code == 1 and err == ""
    got = out.splitlines()
    assert got[0] == f"cache: miss (compiled in {got[0].split()[4]} ms) {jsonl}:1 (two-letters)"
    assert got[1].startswith("cache: miss") and got[1].endswith(f"{jsonl}:2")
    assert got[2].startswith("cache: miss") and got[2].endswith(f"{jsonl}:3")
    assert got[3].startswith(f"error: {jsonl}:5: not JSON")
    assert got[4].startswith(f"error: {jsonl}:6: ") and "position 2" in got[4]
    assert got[5].endswith("3 compiled, 0 cache hits, 2 failed")

    code, out, _ = run(
        capsys, "--json", "warm", str(jsonl), "-t", TOKENIZER, "--cache-dir", str(tmp_path / "c")
    )
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False
    bad = doc["specs"][4]
    assert bad["ok"] is False and bad["error"]["type"] == "RegexSyntaxError"
    assert bad["error"]["pos"] == 2


def test_warm_jsonl_line_keys_choose_the_kind(tmp_path: Path) -> None:
    jsonl = tmp_path / "specs.jsonl"
    docs = [
        {"grammar": 'start: "a"+'},
        {"regex": "a+", "name": "as"},
        {"schema": {"type": "null"}, "id": "JSONSchemaBench/x"},
        {"regex": "a", "grammar": 'start: "a"'},
        [1],
    ]
    jsonl.write_text("\n".join(json.dumps(doc) for doc in docs))
    items = collect_specs([str(jsonl)], kind="regex", options_for=lambda kind: {})
    assert [(item.kind, item.label) for item in items] == [
        ("lark", f"{jsonl}:1"),
        ("regex", f"{jsonl}:2 (as)"),
        ("json", f"{jsonl}:3 (JSONSchemaBench/x)"),
        (None, f"{jsonl}:4"),
        (None, f"{jsonl}:5"),
    ]
    assert isinstance(items[3], WarmOutcome) and items[3].error is not None
    assert "several specs" in items[3].error["message"]


def test_warm_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], specs: Path, tmp_path: Path
) -> None:
    base = ("-t", TOKENIZER, "--cache-dir", str(tmp_path / "c"))
    code, out, err = run(capsys, "warm", str(tmp_path / "missing"), *base)
    assert (code, out) == (2, "") and "no such file" in err
    code, _, err = run(capsys, "warm", str(specs / "README.txt"), "--kind", "lark", *base)
    assert code == 1  # --kind makes any file a spec; this one is not a grammar
    (tmp_path / "spec.xml").write_text("<a/>")
    code, _, err = run(capsys, "warm", str(tmp_path / "spec.xml"), *base)
    assert code == 2 and "--kind" in err
    assert run(capsys, "warm", str(specs), *base, "--jobs", "0")[0] == 2
    assert run(capsys, "warm", str(specs), *base, "--redis", "nope://x")[0] == 2


def test_cache_ls_and_stats_list_both_tiers(
    capsys: pytest.CaptureFixture[str], specs: Path, tmp_path: Path, redis_url: str
) -> None:
    cache_dir = tmp_path / "c"
    assert warm(capsys, specs, cache_dir, "--redis", redis_url)[0] == 0
    tiers = ("--dir", str(cache_dir), "--redis", redis_url)

    code, out, err = run(capsys, "cache", "ls", *tiers)
    assert code == 0 and err == ""
    rows = [line.split() for line in out.splitlines() if not line.split()[0].endswith(":")]
    assert sorted(row[0] for row in rows) == ["disk"] * 5 + ["redis"] * 5
    assert {row[-1] for row in rows} == set(DiskStore(cache_dir).keys())
    assert "disk: 5 entries" in out and "redis: 5 entries" in out

    code, out, _ = run(capsys, "--json", "cache", "ls", *tiers, "--prefix", "regex-")
    doc = json.loads(out)
    assert code == 0 and doc["ok"] is True
    assert [(t["tier"], t["count"]) for t in doc["tiers"]] == [("disk", 2), ("redis", 2)]
    assert all(entry["size_bytes"] > 0 for t in doc["tiers"] for entry in t["entries"])

    code, out, _ = run(capsys, "--json", "cache", "stats", *tiers)
    stats = {t["tier"]: t["stats"] for t in json.loads(out)["tiers"]}
    assert code == 0 and stats["disk"]["entries"] == 5 and stats["redis"]["entries"] == 5
    code, out, _ = run(capsys, "cache", "stats", *tiers)
    assert code == 0 and out.startswith(f"disk ({cache_dir})") and "redis (" in out


def _damage_disk_entry(cache_dir: Path, key: str) -> None:
    path = DiskStore(cache_dir).path_for(key)
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))


def _damage_redis_entry(url: str, key: str) -> None:
    """Flip a byte inside the artifact and fix the manifest: only read_header can tell."""
    client = redis.Redis.from_url(url)
    manifest_key = f"fsmcompile:m:{{{key}}}"
    manifest = msgpack.unpackb(client.get(manifest_key), raw=False)
    value = bytearray(manifest["data"])
    value[len(value) // 2] ^= 0xFF
    manifest["data"] = bytes(value)
    manifest["sha256"] = digest_of(manifest["data"])
    client.set(manifest_key, msgpack.packb(manifest, use_bin_type=True))
    client.close()


def test_cache_verify_reports_and_deletes_corrupt_entries(
    capsys: pytest.CaptureFixture[str], specs: Path, tmp_path: Path, redis_url: str
) -> None:
    cache_dir = tmp_path / "c"
    assert warm(capsys, specs, cache_dir, "--redis", redis_url)[0] == 0
    keys = sorted(DiskStore(cache_dir).keys())
    on_disk, in_redis = keys[0], keys[-1]
    _damage_disk_entry(cache_dir, on_disk)
    _damage_redis_entry(redis_url, in_redis)
    tiers = ("--dir", str(cache_dir), "--redis", redis_url)

    code, out, _ = run(capsys, "cache", "verify", *tiers, "--dry-run")
    assert code == 1
    assert f"corrupt: disk {on_disk}: cache entry checksum mismatch (kept: --dry-run)" in out
    assert f"corrupt: redis {in_redis}: artifact checksum mismatch" in out

    code, out, _ = run(capsys, "--json", "cache", "verify", *tiers)
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False and doc["dry_run"] is False
    by_tier = {t["tier"]: t for t in doc["tiers"]}
    assert (by_tier["disk"]["ok"], by_tier["disk"]["corrupt"]) == (4, 1)
    assert [p["key"] for p in by_tier["redis"]["problems"]] == [in_redis]
    assert all(p["deleted"] for t in doc["tiers"] for p in t["problems"])

    code, out, _ = run(capsys, "cache", "verify", *tiers)
    assert code == 0 and "disk: verified 4 entries: 4 ok, 0 corrupt" in out

    # The next warm fills each hole from the other tier.
    code, out, _ = warm(capsys, specs, cache_dir, "--redis", redis_url)
    assert code == 0 and "0 compiled, 5 cache hits" in out
    code, out, _ = run(capsys, "--json", "cache", "verify", *tiers)
    assert code == 0 and [t["ok"] for t in json.loads(out)["tiers"]] == [5, 5]


def test_cache_verify_flags_unreadable_disk_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cache_dir = tmp_path / "c"
    junk = DiskStore(cache_dir).path_for("anything")
    junk.parent.mkdir(parents=True)
    junk.write_bytes(b"garbage")
    code, out, _ = run(capsys, "cache", "verify", "--dir", str(cache_dir))
    assert code == 1 and f"corrupt: disk <unreadable> {junk}" in out and not junk.exists()


def test_cache_purge_needs_yes_and_honours_prefix(
    capsys: pytest.CaptureFixture[str], specs: Path, tmp_path: Path, redis_url: str
) -> None:
    cache_dir = tmp_path / "c"
    assert warm(capsys, specs, cache_dir, "--redis", redis_url)[0] == 0
    tiers = ("--dir", str(cache_dir), "--redis", redis_url)

    code, out, err = run(capsys, "cache", "purge", *tiers)
    assert (code, out) == (2, "") and "--yes" in err
    assert len(list(DiskStore(cache_dir).keys())) == 5

    code, out, _ = run(capsys, "cache", "purge", *tiers, "--prefix", "regex-", "--yes")
    assert code == 0 and "disk: purged 2 entries" in out and "redis: purged 2 entries" in out
    assert all(key.startswith("json-") for key in DiskStore(cache_dir).keys())

    code, out, _ = run(capsys, "--json", "cache", "purge", *tiers, "--yes")
    assert code == 0 and [t["deleted"] for t in json.loads(out)["tiers"]] == [3, 3]
    code, out, _ = run(capsys, "cache", "ls", *tiers)
    assert "disk: 0 entries" in out and "redis: 0 entries" in out


def test_cache_unreachable_redis_is_exit_1_and_tier_redis_needs_url(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    code, out, err = run(capsys, "cache", "ls", "--dir", str(tmp_path), "--redis", dead)
    assert code == 1 and "disk: 0 entries" in out and err.startswith("error: redis tier")
    code, _, err = run(capsys, "cache", "ls", "--tier", "redis")
    assert code == 2 and "--redis" in err


def _warmed_keys(capsys: pytest.CaptureFixture[str], specs: Path, cache_dir: Path) -> list[str]:
    argv = ["--json", "warm", str(specs), "-t", TOKENIZER, "--cache-dir", str(cache_dir)]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    return [spec["key"] for spec in json.loads(out)["specs"]]


def test_planted_locks_end_in_local_compiles_within_seconds(
    capsys: pytest.CaptureFixture[str], specs: Path, tmp_path: Path, redis_url: str
) -> None:
    """Locks no client took (no expiry) on every key: warm and compile do not wait on them."""
    keys = _warmed_keys(capsys, specs, tmp_path / "learn")
    client = redis.Redis.from_url(redis_url)
    for key in keys:
        client.set(f"fsmcompile:l:{{{key}}}", b"planted")
    started = time.monotonic()
    code, out, err = warm(capsys, specs, tmp_path / "a", "--redis", redis_url)
    assert code == 0, err
    assert all(line.startswith("cache: miss (compiled in") for line in spec_lines(out))
    assert time.monotonic() - started < 10
    assert all(client.get(f"fsmcompile:m:{{{key}}}") for key in keys)  # published anyway

    assert all(client.get(f"fsmcompile:l:{{{key}}}") == b"planted" for key in keys)  # left alone
    client.close()


def test_cache_verify_deletes_swapped_entries_and_manifest_bombs(
    capsys: pytest.CaptureFixture[str], specs: Path, tmp_path: Path, redis_url: str
) -> None:
    cache_dir = tmp_path / "c"
    assert warm(capsys, specs, cache_dir, "--redis", redis_url)[0] == 0
    keys = sorted(DiskStore(cache_dir).keys())
    client = redis.Redis.from_url(redis_url)
    swapped, bombed = keys[0], keys[1]
    # A valid artifact of another spec under `swapped`, on both tiers.
    client.set(f"fsmcompile:m:{{{swapped}}}", client.get(f"fsmcompile:m:{{{keys[2]}}}"))
    disk = DiskStore(cache_dir)
    disk.put(swapped, disk.get(keys[2]) or b"")
    bomb = {"format": 1, "size": 30_000_000, "sha256": b"\0" * 32, "id": "0123456789abcdef"}
    bomb.update(chunks=30_000_000, chunk_bytes=1)
    client.set(f"fsmcompile:m:{{{bombed}}}", msgpack.packb(bomb, use_bin_type=True))
    tiers = ("--dir", str(cache_dir), "--redis", redis_url)

    started = time.monotonic()
    code, out, _ = run(capsys, "--json", "cache", "verify", *tiers)
    assert time.monotonic() - started < 10
    doc = json.loads(out)
    problems = {(t["tier"], p["key"]): p for t in doc["tiers"] for p in t["problems"]}
    assert code == 1 and set(problems) == {("disk", swapped), ("redis", swapped), ("redis", bombed)}
    assert "another spec" in problems["redis", swapped]["message"]
    assert "chunks" in problems["redis", bombed]["message"]
    assert all(p["deleted"] for p in problems.values())
    assert client.get(f"fsmcompile:m:{{{bombed}}}") is None
    client.close()


def test_compile_with_a_planted_lock_compiles_locally_within_seconds(
    capsys: pytest.CaptureFixture[str], redis_url: str
) -> None:
    pattern = "(planted|lock)[0-9]"
    vocab = Vocabulary.from_file(TOKENIZER)
    lock = f"fsmcompile:l:{{{index_cache_key('regex', pattern, vocab)}}}"
    client = redis.Redis.from_url(redis_url)
    client.set(lock, b"planted")
    started = time.monotonic()
    code, out, err = run(capsys, "--regex", pattern, "-t", TOKENIZER, "--redis", redis_url)
    assert code == 0, err
    assert "cache: miss" in out and time.monotonic() - started < 10
    assert client.get(lock) == b"planted"
    client.close()


def test_cache_ls_json_carries_each_entry_stat(
    capsys: pytest.CaptureFixture[str], specs: Path, tmp_path: Path, redis_url: str
) -> None:
    cache_dir = tmp_path / "c"
    assert warm(capsys, specs, cache_dir, "--redis", redis_url)[0] == 0
    code, out, _ = run(
        capsys, "--json", "cache", "ls", "--dir", str(cache_dir), "--redis", redis_url
    )
    by_tier = {t["tier"]: t["entries"] for t in json.loads(out)["tiers"]}
    assert code == 0 and len(by_tier["disk"]) == len(by_tier["redis"]) == 5
    disk = DiskStore(cache_dir)
    for entry in by_tier["disk"]:
        assert entry["path"] == entry["location"] == str(disk.path_for(entry["key"]))
        assert entry["format_version"] == FORMAT_VERSION and entry["modified_at"] > 0
    for entry in by_tier["redis"]:
        assert entry["location"] == f"fsmcompile:m:{{{entry['key']}}}"
        assert entry["modified_at"] is None and entry["expires_in_s"] is None  # no TTL set
    # The same artifact on both tiers: the sizes agree.
    sizes = {
        tier: {e["key"]: e["size_bytes"] for e in entries} for tier, entries in by_tier.items()
    }
    assert sizes["disk"] == sizes["redis"]


def test_cache_verify_prefix_checks_only_those_keys_and_dry_run_keeps_them(
    capsys: pytest.CaptureFixture[str], specs: Path, tmp_path: Path
) -> None:
    cache_dir = tmp_path / "c"
    assert warm(capsys, specs, cache_dir)[0] == 0
    regex_keys = sorted(k for k in DiskStore(cache_dir).keys() if k.startswith("regex-"))
    _damage_disk_entry(cache_dir, regex_keys[0])
    code, out, _ = run(capsys, "--json", "cache", "verify", "--dir", str(cache_dir), "--dry-run")
    (disk,) = json.loads(out)["tiers"]
    assert code == 1 and (disk["checked"], disk["corrupt"]) == (5, 1)
    assert DiskStore(cache_dir).path_for(regex_keys[0]).exists()
    argv = ("cache", "verify", "--dir", str(cache_dir), "--prefix", "json-")
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "disk: verified 3 entries: 3 ok, 0 corrupt (deleted)" in out


def test_warm_reads_spec_files_as_compile_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Not UTF-8: the same SpecEncodingError, with its byte offset, as `compile`."""
    bad = tmp_path / "latin1.regex"
    bad.write_bytes(b"caf\xe9\n")
    argv = ("-t", TOKENIZER, "--cache-dir", str(tmp_path / "c"))
    code, out, _ = run(capsys, "--json", "warm", str(bad), *argv)
    (spec,) = json.loads(out)["specs"]
    assert code == 1 and spec["error"]["type"] == "SpecEncodingError"
    assert spec["error"]["byte_offset"] == 3 and spec["error"]["source"] == str(bad)
    code, out, _ = run(capsys, "--json", str(bad), *argv)
    assert code == 1 and json.loads(out)["error"] == spec["error"]
    # A regex file's trailing newline is not part of the pattern, for both commands.
    good = tmp_path / "word.regex"
    good.write_text("(up|down)\n")
    code, out, _ = run(capsys, "--json", "warm", str(good), *argv)
    (warmed,) = json.loads(out)["specs"]
    code, out, _ = run(capsys, str(good), *argv)
    assert code == 0 and "cache: hit (" in out
    assert warmed["key"] == index_cache_key("regex", "(up|down)", Vocabulary.from_file(TOKENIZER))
