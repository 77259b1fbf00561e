"""The runtime's connections to the external store of the `lease` mode (a `raft` cluster of our own nodes).

The lease election (cluster.core.election.lease) asks for store calls through `Ready.requests`; the
runtime hands each to `StoreLinks.send`, which sends it as an ordinary client request to that store member
and, when the reply comes, gives it back (with the election's own request id) to be fed to
`Node.store_reply`. A call that fails to connect, loses its connection or times out gets no reply at all:
the election times its calls out itself and treats them as indefinite.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from cluster.client import NodeConnection

log = logging.getLogger("cluster.store")


class StoreLinks:
    """One pipelined client connection per store member; replies go to `deliver(member, reply)`."""

    def __init__(self, members: dict[str, tuple[str, int]], deliver: Callable[[str, dict[str, Any]], None],
                 timeout: float) -> None:
        self._connections = {member: NodeConnection(member, host, port) for member, (host, port) in members.items()}
        self._deliver = deliver
        self._timeout = timeout
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, member: str, request: dict[str, Any]) -> None:
        connection = self._connections.get(member)
        if connection is None:
            log.error("core addressed a store request to unknown store member %r", member)
            return
        task = asyncio.get_running_loop().create_task(self._call(connection, member, request))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call(self, connection: NodeConnection, member: str, request: dict[str, Any]) -> None:
        try:
            reply = await connection.call(request, self._timeout, connect_timeout=self._timeout / 2)
        except Exception as exc:  # NeverSent, Lost, TimeoutError, OSError: no reply; the core times out
            log.debug("store call to %s got no reply: %r", member, exc)
            return
        self._deliver(member, {**reply, "id": request.get("id")})

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for connection in self._connections.values():
            await connection.close()
