"""Fixtures of the Redis adapter's tests: the bundle the ``docker`` test uploads (found, or fetched with apt,
as every shipped adapter's download: ``tests/adapters/conftest.py``), and a fake network of Redis servers
and Sentinels for the fast tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from adapters.redis.client import ReplyError, Unreachable
from adapters.redis.install import RedisBundle
from tests.adapters.conftest import fetched


@pytest.fixture(scope="session")
def redis_bundle() -> RedisBundle:
    """The cached Debian Redis bundle, fetched through the machine's apt if missing."""
    return fetched("redis")


HANG = object()
"""A handler's reply that never comes."""

Handler = Callable[[tuple[Any, ...]], Any]


class FakeLink:
    """One connection to a fake process: each command's reply comes from ``handler`` (an exception it
    returns is the reply; one it raises is a broken connection)."""

    def __init__(self, network: FakeNetwork, address: tuple[str, int]) -> None:
        self.network, self.address = network, address
        self.closed = False

    async def call(self, *commands: Sequence[Any]) -> list[Any]:
        self.network.sent.append((self.address, [tuple(c) for c in commands]))
        replies = [self.network.handlers[self.address](tuple(c)) for c in commands]
        if HANG in replies:
            await asyncio.Event().wait()
        return replies

    async def close(self) -> None:
        self.closed = True


class FakeNetwork:
    """Processes by (host, port): a handler answers commands; a missing one refuses connections."""

    def __init__(self) -> None:
        self.handlers: dict[tuple[str, int], Handler] = {}
        self.sent: list[tuple[tuple[str, int], list[tuple[Any, ...]]]] = []

    async def connect(self, host: str, port: int, timeout: float) -> FakeLink:
        if (host, port) not in self.handlers:
            raise Unreachable(f"{host}:{port}: connection refused")
        return FakeLink(self, (host, port))


@pytest.fixture
def network() -> FakeNetwork:
    return FakeNetwork()


def error(message: str) -> ReplyError:
    """An error reply as redis-py gives it (``ERR`` stripped, other codes kept)."""
    return ReplyError(message)
