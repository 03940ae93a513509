"""Redis URLs to redis-py clients: standalone, TLS, unix socket, Sentinel and Cluster.

Building a client does not connect (except Cluster, which must discover its slots), so a
server can start while Redis is down; passwords never reach a message (`redact_url`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

import redis
import redis.exceptions as rex
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from fsmcompile.errors import StoreUnavailableError

__all__ = ["URL_FORMS", "connect_redis", "redact_url"]

URL_FORMS = (
    "redis://[[user]:password@]host[:port][/db], rediss://... (TLS), "
    "unix://[[user]:password@]/path/to/socket[?db=N], or "
    "redis+sentinel://[[user]:password@]host:port[,host:port...]/service_name[/db]"
)


def redact_url(url: str) -> str:
    """Return `url` with its password replaced by `***`, for messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{hosts}"))


@dataclass(frozen=True, slots=True)
class _SentinelTarget:
    hosts: list[tuple[str, int]]
    service_name: str
    db: int
    username: str | None
    password: str | None
    sentinel_password: str | None
    ssl: bool


def _parse_sentinel_url(url: str) -> _SentinelTarget:
    """Parse `redis+sentinel://[[user]:pw@]h1:p1[,h2:p2]/service[/db][?sentinel_password=]`.

    redis-py has no URL form for Sentinel, and `urlsplit(...).port` rejects a comma
    separated host list, so the netloc is split by hand.
    """
    parts = urlsplit(url)
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    username = password = None
    if userinfo:
        user, _, pw = userinfo.partition(":")
        username, password = (unquote(user) or None), (unquote(pw) or None)
    hosts: list[tuple[str, int]] = []
    for item in filter(None, hostlist.split(",")):
        if item.startswith("["):  # [IPv6]:port
            host, _, rest = item[1:].partition("]")
            port_text = rest.lstrip(":")
        else:
            host, _, port_text = item.partition(":")
        if not host:
            raise ValueError(f"empty sentinel host in {item!r}")
        hosts.append((host, int(port_text) if port_text else 26379))
    segments = [s for s in parts.path.split("/") if s]
    if not hosts or not segments or len(segments) > 2:
        raise ValueError("expected host:port[,host:port]/service_name[/db]")
    query = parse_qs(parts.query)
    return _SentinelTarget(
        hosts=hosts,
        service_name=unquote(segments[0]),
        db=int(segments[1]) if len(segments) == 2 else 0,
        username=username,
        password=password,
        sentinel_password=query.get("sentinel_password", [None])[0],
        ssl=parts.scheme.startswith("rediss"),
    )


def connect_redis(
    url: str,
    *,
    cluster: bool = False,
    socket_timeout_s: float = 2.0,
    connect_timeout_s: float = 2.0,
) -> Any:
    """Build (without connecting) the redis-py client that `url` asks for.

    Args:
        url: `redis://`, `rediss://`, `unix://` (standalone or, with `cluster=True`, a
            Cluster seed node), or `redis+sentinel://` / `rediss+sentinel://`.
        cluster: use `redis.cluster.RedisCluster` (it connects to discover slots, so
            `RedisStore` calls this lazily on first use).
        socket_timeout_s: per-read/write timeout; a slower Redis counts as unavailable.
        connect_timeout_s: TCP connect timeout.

    Returns:
        `redis.Redis` (standalone, Sentinel master) or `redis.cluster.RedisCluster`.

    Raises:
        StoreUnavailableError: the URL is malformed or names an unknown scheme, or the
            cluster seed cannot be reached.
    """
    timeouts = {"socket_timeout": socket_timeout_s, "socket_connect_timeout": connect_timeout_s}
    shown = redact_url(url)
    scheme = url.partition("://")[0].lower()
    try:
        if scheme in ("redis+sentinel", "rediss+sentinel"):
            from redis.sentinel import Sentinel

            target = _parse_sentinel_url(url)
            sentinel = Sentinel(  # type: ignore[no-untyped-call]
                target.hosts,
                sentinel_kwargs={**timeouts, "password": target.sentinel_password},
                **timeouts,
            )
            return sentinel.master_for(  # type: ignore[no-untyped-call]
                target.service_name,
                db=target.db,
                username=target.username,
                password=target.password,
                ssl=target.ssl,
            )
        if cluster:
            from redis.cluster import RedisCluster

            return RedisCluster.from_url(url, **timeouts)
        # One retry with a short backoff: a pooled connection that died with a Redis
        # restart fails once and reconnects, without stalling a request on an outage.
        retry = Retry(ExponentialBackoff(cap=0.2, base=0.02), retries=1)
        return redis.Redis.from_url(url, retry=retry, **timeouts)
    except ValueError as exc:
        raise StoreUnavailableError(f"bad Redis URL {shown}: {exc}; expected {URL_FORMS}") from exc
    except (rex.RedisError, rex.RedisClusterException, OSError) as exc:
        raise StoreUnavailableError(f"cannot reach Redis cluster at {shown}: {exc}") from exc
