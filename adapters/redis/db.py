"""The DB adapter for Redis 7 with Sentinel: one master and its replicas, a Sentinel on every node.

**Installation.** The controller holds a tarball of Debian's Redis (``adapters.redis.install``) and
uploads it to every node, where it is unpacked into :data:`INSTALL_DIR` (``bin/redis-server``, the
libraries the image lacks in ``lib/``). Each node then gets two configuration files (:func:`redis_config`,
:func:`sentinel_config`) in :data:`DATA_DIR`, where both processes may rewrite them (a Sentinel records
what it learns there; it rewrites a server's file when it reconfigures it):

* a Redis server on port 6379, with an append-only file (``appendfsync everysec``: an acknowledged write is
  in the kernel's page cache, so a killed server restarts with it), announcing its peer address. The first
  node is the initial master; the others start as ``replicaof`` it. With ``min-replicas=N`` every server
  has ``min-replicas-to-write N`` and ``min-replicas-max-lag`` (``max-lag``): a master without ``N``
  replicas that acknowledged within that many seconds refuses writes (``NOREPLICAS``).
* a Sentinel on port 26379 (the same executable with ``--sentinel``) monitoring the master set
  :data:`~adapters.redis.client.MASTER_NAME` with quorum a majority of the nodes, ``down-after-milliseconds``
  :data:`DOWN_AFTER_MS` and ``failover-timeout`` :data:`FAILOVER_TIMEOUT_MS`. A failover needs a majority
  of the Sentinels to elect one of them leader for a new *epoch*; the winner promotes the replica with the
  most data among those it reaches and publishes the new configuration with that epoch (its *config
  epoch*).

Both write their log to stdout, appended to :data:`REDIS_LOG` and :data:`SENTINEL_LOG` (collected as
``redis.log`` and ``sentinel.log``). Teardown kills both and removes everything under the four directories.

**Processes** (``harness.db.daemon``): ``kill``, ``pause`` and ``resume`` act on the Redis server only, as a
crashed or stalled database on a machine whose Sentinel goes on watching; ``start`` starts whichever of
the two is not running, and returns once its port is bound. A restarted server reads its own file, which
the Sentinels may have rewritten to follow a new master.

**Status** is the node's own view of the one group, the master set, named :data:`MASTER_NAME`; there is
no cluster-level leader (top-level ``role`` ``follower``, ``term`` None). The group's ``role`` comes from
the server's ``INFO replication``: ``leader`` when ``role:master`` (it takes writes), else ``follower``
with ``leader`` the node of its ``master_host``. Its ``term`` is the *config epoch* of the master as the
node's own Sentinel knows it (``SENTINEL MASTER``), with one exception: a server that acts as master while
its Sentinel names another node reports ``term`` None. The reasoning (docs/systems/redis.md): a config
epoch is won by one Sentinel with a majority's votes and names one master, so two Sentinels never name
different masters for one epoch; a server that its Sentinel backs as master in epoch ``e`` is that epoch's
master. A deposed master that has not yet been told (cut off, or before its Sentinel reconfigures it) was
promoted in some earlier epoch Redis does not record, and the Sentinel's newer epoch is not its own:
reporting that would make single-leader-per-term call an ordinary deposed leader a split brain of one
term. The split brain that matters (two masters taking writes) is judged by the linearizability and
durability checkers.

**Catch-up** (``CatchUp``): a node is caught up when it is a master its own Sentinel names, or a replica
whose link to its master is up and whose replication offset has reached the master's (read first).

No ``lsn`` (client module docstring): lsn-monotonicity is declared not applicable. No clock skew is offered.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from adapters.redis.client import (
    MASTER_NAME,
    REDIS_PORT,
    SENTINEL_PORT,
    Connector,
    Link,
    RedisLink,
    RedisRegisterClient,
    ReplyError,
    Unreachable,
)
from adapters.redis.install import RedisBundle
from harness.db import Deployment, StatusError
from harness.db.client import home_node
from harness.db.daemon import START_TIMEOUT_S, Daemon

if TYPE_CHECKING:
    from nemesis.remote import Remote

INSTALL_DIR = "/opt/chaos-redis"
BINARY = f"{INSTALL_DIR}/bin/redis-server"
LIBRARY_DIR = f"{INSTALL_DIR}/lib"
BUNDLE_FILE = f"{INSTALL_DIR}/redis.tar.gz"
DATA_DIR = "/var/lib/chaos-redis"
REDIS_DATA_DIR = f"{DATA_DIR}/data"
SENTINEL_DIR = f"{DATA_DIR}/sentinel"
REDIS_CONFIG = f"{DATA_DIR}/redis.conf"
SENTINEL_CONFIG = f"{DATA_DIR}/sentinel.conf"
LOG_DIR = "/var/log/chaos-redis"
REDIS_LOG = f"{LOG_DIR}/redis.log"
SENTINEL_LOG = f"{LOG_DIR}/sentinel.log"
RUN_DIR = "/var/run/chaos-redis"
DOWN_AFTER_MS = 2000
FAILOVER_TIMEOUT_MS = 10_000
LOG_TAIL_LINES = 20
GROUP = MASTER_NAME
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.:_-]*")


def quorum(nodes: int) -> int:
    """The Sentinels that must agree a master is down: a majority."""
    return nodes // 2 + 1


def _host(deployment: Deployment, node: str) -> str:
    """``node``'s peer address, checked to be one word a configuration file can hold."""
    host = deployment.peer_hosts[node]
    if not _HOST.fullmatch(host):
        raise ValueError(f"node {node}'s peer address {host!r} is not a host name or an IP address")
    return host


def redis_config(deployment: Deployment, node: str, *, min_replicas: int = 0, max_lag: int = 10) -> str:
    """``node``'s server configuration (module docstring): the first node is the initial master."""
    master = deployment.nodes[0]
    lines = [
        f"port {REDIS_PORT}", "bind 0.0.0.0", "protected-mode no", "daemonize no", 'logfile ""',
        f"dir {REDIS_DATA_DIR}", "appendonly yes", "appendfsync everysec", 'save ""',
        "repl-diskless-sync-delay 0",
        f"replica-announce-ip {_host(deployment, node)}", f"replica-announce-port {REDIS_PORT}",
    ]
    if node != master:
        lines.append(f"replicaof {_host(deployment, master)} {REDIS_PORT}")
    if min_replicas:
        lines += [f"min-replicas-to-write {min_replicas}", f"min-replicas-max-lag {max_lag}"]
    return "\n".join(lines) + "\n"


def sentinel_config(deployment: Deployment, node: str) -> str:
    """``node``'s Sentinel configuration: the master set, a majority quorum, announced by peer address."""
    master = _host(deployment, deployment.nodes[0])
    return "\n".join([
        f"port {SENTINEL_PORT}", "bind 0.0.0.0", "protected-mode no", "daemonize no", 'logfile ""',
        f"dir {SENTINEL_DIR}",
        "sentinel resolve-hostnames yes", "sentinel announce-hostnames yes",
        f"sentinel announce-ip {_host(deployment, node)}", f"sentinel announce-port {SENTINEL_PORT}",
        f"sentinel monitor {MASTER_NAME} {master} {REDIS_PORT} {quorum(len(deployment.nodes))}",
        f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}",
        f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}",
        f"sentinel parallel-syncs {MASTER_NAME} 1",
    ]) + "\n"


def parse_info(text: str) -> dict[str, str]:
    """``INFO`` text as field -> value (sections and blank lines left out)."""
    fields = {}
    for line in text.splitlines():
        name, sep, value = line.strip().partition(":")
        if sep and not name.startswith("#"):
            fields[name] = value
    return fields


def pairs(reply: Any) -> dict[str, Any] | None:
    """A ``SENTINEL MASTER`` reply as a dict: a map (RESP3), or a flat ``[name, value, name, value, ...]``
    list (RESP2); ``None`` for anything else."""
    if isinstance(reply, Mapping):
        return {str(k): v for k, v in reply.items()}
    if isinstance(reply, list):
        return {str(reply[i]): reply[i + 1] for i in range(0, len(reply) - 1, 2)}
    return None


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def status_of(node: str, info: Mapping[str, str], sentinel: Mapping[str, Any] | None,
              announced: Mapping[str, str]) -> dict[str, Any]:
    """The status contract's fields from the server's ``INFO replication`` and its own Sentinel's
    ``SENTINEL MASTER`` (``None``: it did not answer): the master set as the one group (module docstring)."""
    epoch = _int(sentinel.get("config-epoch")) if sentinel else None
    backed = announced.get(str(sentinel.get("ip"))) if sentinel else None
    if info.get("role") == "master":
        entry = {"role": "leader", "leader": node, "term": epoch if backed == node else None}
    else:
        entry = {"role": "follower", "leader": announced.get(info.get("master_host", "")), "term": epoch}
    return {
        "node": node, "role": "follower", "term": None, "leader": None, "commit_lsn": None, "last_lsn": None,
        "groups": [{"group": GROUP, **entry, "commit_lsn": None, "last_lsn": None}],
    }


class RedisDB:
    """Redis + Sentinel, both on every data node: DB + Process + Pause + Status + CatchUp + LogFiles +
    Clients (``register``).

    ``bundle`` is the tarball on the controller; ``min_replicas``/``max_lag`` Redis's
    ``min-replicas-to-write``/``min-replicas-max-lag`` (0: off); ``wait`` the replicas a client's write
    waits for (0: no ``WAIT``). ``connect`` replaces the network of clients, status and catch-up (tests
    pass fakes).
    """

    name = "redis"
    capabilities = ("Clients", "CatchUp", "Process", "Pause", "Status", "LogFiles")
    workloads = ("register",)
    not_applicable = {"lsn-monotonicity": "Redis gives a client no sequence number of the write it made or the "
                                          "value it read (docs/systems/redis.md)"}

    def __init__(
        self,
        bundle: RedisBundle,
        *,
        min_replicas: int = 0,
        max_lag: int = 10,
        wait: int = 0,
        start_timeout: float = START_TIMEOUT_S,
        stop_timeout: float = 10.0,
        command_timeout: float = 60.0,
        connect: Connector = RedisLink.open,
    ) -> None:
        self.bundle = bundle
        self.min_replicas = min_replicas
        self.max_lag = max_lag
        self.wait = wait
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.command_timeout = command_timeout
        self.connect = connect

    def version(self) -> dict[str, Any]:
        """What test.json records: the bundle (path, package version, sha256) and the safety settings."""
        return {**self.bundle.to_json(), "min_replicas": self.min_replicas, "max_lag": self.max_lag,
                "wait": self.wait, "down_after_ms": DOWN_AFTER_MS, "failover_timeout_ms": FAILOVER_TIMEOUT_MS}

    # -- installation ---------------------------------------------------------------------------------

    def setup(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Upload and unpack Redis, write both configurations, start the server and the Sentinel."""
        remote.run(f"mkdir -p {shlex.quote(INSTALL_DIR)} {shlex.quote(DATA_DIR)}", timeout=self.command_timeout)
        remote.upload(self.bundle.path, BUNDLE_FILE)
        remote.run(f"tar -xzf {shlex.quote(BUNDLE_FILE)} -C {shlex.quote(INSTALL_DIR)}", timeout=self.command_timeout)
        remote.write_file(REDIS_CONFIG, redis_config(deployment, node, min_replicas=self.min_replicas,
                                                     max_lag=self.max_lag).encode())
        remote.write_file(SENTINEL_CONFIG, sentinel_config(deployment, node).encode())
        self.start(deployment, node, remote)

    def teardown(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Kill both processes (whatever their state) and remove their data, logs, pid files and binaries."""
        try:
            for daemon in (self.sentinel_daemon(), self.redis_daemon()):
                daemon.kill(remote, wait=self.stop_timeout)
        finally:
            paths = " ".join(shlex.quote(p) for p in (DATA_DIR, LOG_DIR, RUN_DIR, INSTALL_DIR))
            remote.run(f"rm -rf {paths}", timeout=self.command_timeout)

    # -- the processes --------------------------------------------------------------------------------

    def redis_daemon(self) -> Daemon:
        """The node's Redis server (``harness.db.daemon``)."""
        return Daemon(argv=[BINARY, REDIS_CONFIG], pid_file=f"{RUN_DIR}/redis.pid", output_file=REDIS_LOG,
                      directories=(REDIS_DATA_DIR,), env={"LD_LIBRARY_PATH": LIBRARY_DIR}, name="redis-server")

    def sentinel_daemon(self) -> Daemon:
        """The node's Sentinel."""
        return Daemon(argv=[BINARY, SENTINEL_CONFIG, "--sentinel"], pid_file=f"{RUN_DIR}/sentinel.pid",
                      output_file=SENTINEL_LOG, directories=(SENTINEL_DIR,), env={"LD_LIBRARY_PATH": LIBRARY_DIR},
                      name="redis-sentinel")

    def start(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Start the server and the Sentinel unless they run; return once both ports are bound, or raise
        with the last lines of the log of the one that did not come up."""
        for daemon, port in ((self.redis_daemon(), REDIS_PORT), (self.sentinel_daemon(), SENTINEL_PORT)):
            daemon.start(remote, port=port, timeout=self.start_timeout, command_timeout=self.command_timeout,
                         tail_lines=LOG_TAIL_LINES)

    def is_running(self, deployment: Deployment, node: str, remote: Remote) -> bool:
        """Whether the Redis server runs (a paused one does)."""
        return self.redis_daemon().running(remote, timeout=self.command_timeout)

    def kill(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """SIGKILL the Redis server and wait until it is gone; the Sentinel goes on."""
        self.redis_daemon().kill(remote, wait=self.stop_timeout)

    def pause(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """SIGSTOP the Redis server, returning once every thread has stopped."""
        self.redis_daemon().pause(remote, wait=self.stop_timeout)

    def resume(self, deployment: Deployment, node: str, remote: Remote) -> None:
        self.redis_daemon().resume(remote)

    def log_files(self, deployment: Deployment, node: str) -> dict[str, str]:
        return {REDIS_LOG: "redis.log", SENTINEL_LOG: "sentinel.log"}

    # -- clients, status and catch-up -----------------------------------------------------------------

    @staticmethod
    def announced(deployment: Deployment) -> dict[str, str]:
        """Address a Sentinel or a replica names a node by (its peer address, or the controller's) -> node."""
        names = {deployment.client_hosts[n]: n for n in deployment.nodes}
        names.update({deployment.peer_hosts[n]: n for n in deployment.nodes})
        return names

    async def open_client(self, deployment: Deployment, process: int, timeout: float) -> RedisRegisterClient:
        """A client for one logical process, asking the Sentinel of ``nodes[process % N]`` first."""
        return RedisRegisterClient({n: deployment.client_hosts[n] for n in deployment.nodes},
                                   self.announced(deployment), home_node(deployment.nodes, process),
                                   wait=self.wait, timeout=timeout, connect=self.connect)

    async def _ask(self, deployment: Deployment, node: str, port: int, timeout: float,
                   *command: Any) -> Any:
        """One command's reply from ``node``'s process on ``port``, on a connection of its own (so that a
        paused server's stuck connection never delays the next call); a :class:`ReplyError` is raised."""
        link: Link = await self.connect(deployment.client_hosts[node], port, timeout)
        try:
            [reply] = await asyncio.wait_for(link.call(command), timeout)
        finally:
            await link.close()
        if isinstance(reply, ReplyError):
            raise reply
        return reply

    async def _info(self, deployment: Deployment, node: str, timeout: float) -> dict[str, str]:
        return parse_info(str(await self._ask(deployment, node, REDIS_PORT, timeout, "INFO", "replication")))

    async def _sentinel_master(self, deployment: Deployment, node: str, timeout: float) -> dict[str, Any] | None:
        """``node``'s Sentinel's view of the master set, or ``None`` if it does not answer."""
        try:
            reply = await self._ask(deployment, node, SENTINEL_PORT, timeout, "SENTINEL", "MASTER", MASTER_NAME)
        except (Unreachable, ReplyError, TimeoutError, OSError, RedisError):
            return None
        return pairs(reply)

    async def status(self, deployment: Deployment, node: str, timeout: float) -> dict[str, Any]:
        """The node's view of the master set (module docstring, "Status")."""
        try:
            info = await self._info(deployment, node, timeout)
        except Unreachable as exc:
            raise StatusError(str(exc), definite=exc.definite) from None
        except TimeoutError:
            raise StatusError(f"no answer within {timeout:g} s", definite=False) from None
        except Exception as exc:  # an error reply, a connection lost: it may answer next time
            raise StatusError(f"{type(exc).__name__}: {exc}", definite=False) from None
        sentinel = await self._sentinel_master(deployment, node, timeout)
        return status_of(node, info, sentinel, self.announced(deployment))

    async def caught_up(self, deployment: Deployment, node: str, timeout: float) -> bool:
        """Whether ``node`` holds everything its master has (module docstring, "Catch-up")."""
        announced = self.announced(deployment)
        try:
            info = await self._info(deployment, node, timeout)
            if info.get("role") == "master":
                sentinel = await self._sentinel_master(deployment, node, timeout)
                return sentinel is not None and announced.get(str(sentinel.get("ip"))) == node
            master = announced.get(info.get("master_host", ""))
            if master is None or info.get("master_link_status") != "up":
                return False
            master_info = await self._info(deployment, master, timeout)
            if master_info.get("role") != "master":
                return False
            info = await self._info(deployment, node, timeout)
        except (Unreachable, ReplyError, TimeoutError, OSError, RedisError):  # asked again until the deadline
            return False
        reached, needed = _int(info.get("slave_repl_offset")), _int(master_info.get("master_repl_offset"))
        return reached is not None and needed is not None and reached >= needed
