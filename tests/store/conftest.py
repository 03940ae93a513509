"""Private redis-server fixtures for the store tests: never the shared one on 6379."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from redis_server import RedisServer


@pytest.fixture
def redis_server_factory(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    """Start private servers with extra arguments; all are killed after the test."""
    servers: list[RedisServer] = []

    def make(*extra_args: str) -> RedisServer:
        server = RedisServer(tmp_path, *extra_args)
        servers.append(server)
        server.start()
        return server

    yield make
    for server in servers:
        server.kill()


@pytest.fixture(scope="module")
def _module_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.kill()


@pytest.fixture
def redis_url(_module_redis: RedisServer) -> str:
    """URL of a private, emptied redis-server shared by one test module."""
    with socket.create_connection(("127.0.0.1", _module_redis.port), timeout=5) as s:
        s.sendall(b"FLUSHALL\r\n")
        assert s.recv(64).startswith(b"+OK")
    return _module_redis.url
