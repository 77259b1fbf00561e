"""The DB adapter for NATS JetStream 2.9: one nats-server per node, clustered by routes, JetStream on.

**Installation.** The controller holds the nats-server binary (Debian's ``nats-server``,
``adapters.nats.install``) and uploads it to every node as :data:`BINARY`, with the node's configuration
(:func:`server_config`) as :data:`CONFIG_FILE`:

    server_name: "n1"
    listen: "0.0.0.0:4222"
    http: "0.0.0.0:8222"
    jetstream { store_dir: "/var/lib/chaos-nats", max_memory_store: 268435456, max_file_store: 4294967296 }
    cluster { name: "chaos", listen: "0.0.0.0:6222",
              routes: ["nats-route://<n2>:6222", "nats-route://<n3>:6222"] }

Each server routes to every other one; with JetStream on in a cluster, the servers form JetStream's *meta
group* (a Raft group that places streams and elects a meta leader), and each stream is a Raft group of its
own over ``replicas`` of the servers. The server is started as ``nats-server -c CONFIG_FILE`` with its
output appended to :data:`LOG_FILE` (collected as ``nats.log``). A restart after a kill runs the same
command and recovers the streams and the Raft state from the store directory. Teardown kills the server
and removes its store, log, configuration, pid file and the binary.

**Processes** (``harness.db.daemon``): kill is SIGKILL, pause SIGSTOP, resume SIGCONT, each only to the
very process started there. ``start`` returns once the client port is bound.

**Status** comes from the server's monitoring endpoint, ``GET /jsz?accounts=true&streams=true`` on
:data:`MONITOR_PORT`, answered by that server from its own state: ``meta_cluster.leader`` (the meta
leader as this server sees it) is the cluster-level group's leader, and each stream the server holds a
replica of is a group named like the stream (= the log), whose leader is ``cluster.leader`` there and whose
``last_lsn`` is ``[0, state.last_seq]``, the last sequence this server stored. NATS 2.9 does not expose
the Raft term of any group (neither ``/jsz`` nor the JetStream API carries it): every ``term`` is None, so
single-leader-per-term cannot judge a run (declared in :attr:`NatsDB.not_applicable`).

**No clock skew.** nats-server is a Go program (its runtime reads the clock without libc, where
libfaketime's ``LD_PRELOAD`` cannot reach it), as etcd: the adapter has no ``ClockSkew``.

**No catch-up probe.** The final polls are served by each stream's leader only (``adapters.nats.client``):
there is nothing a lagging follower could answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx

from adapters.nats.client import CLIENT_PORT, NatsLogClient
from adapters.nats.install import NatsBinary
from harness.db import Deployment, StatusError
from harness.db.client import home_node
from harness.db.daemon import START_TIMEOUT_S, Daemon, DaemonProcess
from harness.db.http import status_errors

if TYPE_CHECKING:
    from nemesis.remote import Remote

ROUTE_PORT = 6222
MONITOR_PORT = 8222
INSTALL_DIR = "/opt/chaos-nats"
BINARY = f"{INSTALL_DIR}/nats-server"
CONFIG_FILE = f"{INSTALL_DIR}/nats.conf"
DATA_DIR = "/var/lib/chaos-nats"
LOG_DIR = "/var/log/chaos-nats"
LOG_FILE = f"{LOG_DIR}/nats.log"
RUN_DIR = "/var/run/chaos-nats"
PID_FILE = f"{RUN_DIR}/nats.pid"
CLUSTER_NAME = "chaos"
MAX_MEMORY_STORE = 256 * 1024 * 1024
MAX_FILE_STORE = 4 * 1024 * 1024 * 1024
LOG_TAIL_LINES = 20
STATUS_PATH = "/jsz?accounts=true&streams=true"


def _quote(text: str) -> str:
    """A string in NATS's configuration syntax (a JSON string is one)."""
    return json.dumps(text)


def server_config(deployment: Deployment, node: str) -> str:
    """``node``'s nats-server configuration: its name, its ports, JetStream's store and the routes to the
    other servers (by their peer addresses)."""
    routes = "\n".join(f"    {_quote(f'nats-route://{deployment.peer_hosts[n]}:{ROUTE_PORT}')}"
                       for n in deployment.nodes if n != node)
    return (
        f"server_name: {_quote(node)}\n"
        f"listen: {_quote(f'0.0.0.0:{CLIENT_PORT}')}\n"
        f"http: {_quote(f'0.0.0.0:{MONITOR_PORT}')}\n"
        "jetstream {\n"
        f"  store_dir: {_quote(DATA_DIR)}\n"
        f"  max_memory_store: {MAX_MEMORY_STORE}\n"
        f"  max_file_store: {MAX_FILE_STORE}\n"
        "}\n"
        "cluster {\n"
        f"  name: {_quote(CLUSTER_NAME)}\n"
        f"  listen: {_quote(f'0.0.0.0:{ROUTE_PORT}')}\n"
        f"  routes: [\n{routes}\n  ]\n"
        "}\n"
    )


class NatsDB(DaemonProcess):
    """NATS JetStream, one server per data node: DB + Process + Pause + Status + LogFiles + Clients (``log``).

    ``binary`` is the nats-server on the controller; ``replicas`` and ``storage`` configure every stream
    the clients create (``replicas=1`` with ``storage=memory`` is the deliberately unsafe variant).
    ``transport`` replaces the network of status requests (tests pass ``httpx.MockTransport``);
    ``connect`` the clients' NATS connections.
    """

    name = "nats"
    capabilities = ("Clients", "Process", "Pause", "Status", "LogFiles")
    workloads = ("log",)
    impossible = {"ClockSkew": "nats-server is a Go program, whose runtime reads the clock without libc, so "
                               "libfaketime's LD_PRELOAD cannot move it (docs/systems/nats.md)"}
    not_applicable = {"single-leader-per-term": "NATS 2.9 exposes no Raft term for its meta group or its "
                                                "streams' groups (docs/systems/nats.md)"}

    def __init__(
        self,
        binary: NatsBinary,
        *,
        replicas: int = 3,
        storage: str = "file",
        start_timeout: float = START_TIMEOUT_S,
        stop_timeout: float = 10.0,
        command_timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
        connect: Any = None,
    ) -> None:
        self.binary = binary
        self.replicas = replicas
        self.storage = storage
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.command_timeout = command_timeout
        self.transport = transport
        self.connect = connect
        self.known_streams: set[str] = set()

    def version(self) -> dict[str, Any]:
        """What test.json records: the binary (path, package version, sha256) and the streams' settings."""
        return {**self.binary.to_json(), "replicas": self.replicas, "storage": self.storage}

    # -- installation ---------------------------------------------------------------------------------

    def command(self) -> list[str]:
        return [BINARY, "-c", CONFIG_FILE]

    def setup(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Upload the binary and the node's configuration, and start the server."""
        self.known_streams.clear()
        remote.run(f"mkdir -p {INSTALL_DIR}", timeout=self.command_timeout)
        remote.upload(self.binary.path, BINARY)
        remote.run(f"chmod 755 {BINARY}", timeout=self.command_timeout)
        remote.write_file(CONFIG_FILE, server_config(deployment, node).encode())
        self.start(deployment, node, remote)

    def teardown(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Kill the server (whatever its state) and remove its store, log, pid file, binary and config."""
        try:
            self.kill(deployment, node, remote)
        finally:
            remote.run(f"rm -rf {DATA_DIR} {LOG_DIR} {RUN_DIR} {INSTALL_DIR}", timeout=self.command_timeout)

    # -- the process ----------------------------------------------------------------------------------

    daemon_port = CLIENT_PORT
    daemon_tail_lines = LOG_TAIL_LINES

    def daemon(self, deployment: Deployment, node: str) -> Daemon:
        """``node``'s server as a process on its host (``harness.db.daemon``)."""
        return Daemon(argv=self.command(), pid_file=PID_FILE, output_file=LOG_FILE, directories=(DATA_DIR,),
                      name="nats-server")

    def log_files(self, deployment: Deployment, node: str) -> dict[str, str]:
        return {LOG_FILE: "nats.log"}

    # -- clients and status ---------------------------------------------------------------------------

    def client_urls(self, deployment: Deployment) -> dict[str, str]:
        return {n: f"nats://{deployment.client_hosts[n]}:{CLIENT_PORT}" for n in deployment.nodes}

    async def open_client(self, deployment: Deployment, process: int, timeout: float) -> NatsLogClient:
        """A client for one logical process, at home on server ``nodes[process % N]``."""
        extra = {"connect": self.connect} if self.connect is not None else {}
        return NatsLogClient(self.client_urls(deployment), home_node(deployment.nodes, process),
                             replicas=self.replicas, storage=self.storage, timeout=timeout,
                             known_streams=self.known_streams, **extra)

    async def status(self, deployment: Deployment, node: str, timeout: float) -> dict[str, Any]:
        """The server's own view of the meta group and of each stream it holds (module docstring)."""
        url = f"http://{deployment.client_hosts[node]}:{MONITOR_PORT}{STATUS_PATH}"
        async with httpx.AsyncClient(timeout=timeout, transport=self.transport) as http:
            with status_errors(timeout):
                answer = await http.get(url)
                jsz = answer.json() if answer.status_code == 200 else None
        if not isinstance(jsz, Mapping):
            raise StatusError(f"no JetStream state at {STATUS_PATH} (HTTP {answer.status_code})", definite=False)
        return status_of(node, jsz)


def _leader(cluster: Any) -> str | None:
    leader = cluster.get("leader") if isinstance(cluster, Mapping) else None
    return leader if isinstance(leader, str) and leader else None


def status_of(node: str, jsz: Mapping[str, Any]) -> dict[str, Any]:
    """A ``/jsz`` answer as the status contract's fields, the meta group at the top and one group per
    stream the server holds (sorted by name)."""
    meta_leader = _leader(jsz.get("meta_cluster"))
    groups = []
    for account in jsz.get("account_details") or []:
        for stream in (account.get("stream_detail") or []) if isinstance(account, Mapping) else []:
            if not isinstance(stream, Mapping) or not stream.get("name"):
                continue
            leader = _leader(stream.get("cluster"))
            state = stream.get("state") if isinstance(stream.get("state"), Mapping) else {}
            last = state.get("last_seq")
            groups.append({
                "group": str(stream["name"]),
                "role": "leader" if leader == node else "follower",
                "term": None,
                "leader": leader,
                "commit_lsn": None,
                "last_lsn": [0, last] if isinstance(last, int) and not isinstance(last, bool) else None,
            })
    return {
        "node": node,
        "role": "leader" if meta_leader == node else "follower",
        "term": None,
        "leader": meta_leader,
        "commit_lsn": None,
        "last_lsn": None,
        "groups": sorted(groups, key=lambda g: g["group"]),
    }
