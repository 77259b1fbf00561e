"""The DB adapter for etcd 3.4: one member per node, a static initial cluster, driven over its shell.

**Installation.** The controller holds the etcd binary (Debian's ``etcd-server``, ``adapters.etcd.install``)
and uploads it to every node as :data:`BINARY`; the node needs nothing else (the binary links only libc,
which the node image has). A member is started in the background as

    /opt/chaos-etcd/etcd --name n1 --data-dir /var/lib/chaos-etcd
        --listen-client-urls http://0.0.0.0:2379 --advertise-client-urls http://<n1>:2379
        --listen-peer-urls http://0.0.0.0:2380 --initial-advertise-peer-urls http://<n1>:2380
        --initial-cluster n1=http://<n1>:2380,...,n5=http://<n5>:2380 --initial-cluster-state new
        --initial-cluster-token chaos-harness --heartbeat-interval 100 --election-timeout 1000 --logger zap

with its output appended to :data:`LOG_FILE` (collected as ``etcd.log``). A restart after a kill runs the
same command: a member whose data directory holds a write-ahead log ignores the ``--initial-*`` flags and
recovers from it. Teardown kills the member and removes its data, log, pid file and the binary.

**Processes** (``harness.db.daemon``): signals go to the pid in :data:`PID_FILE` (kill: SIGKILL, pause:
SIGSTOP, resume: SIGCONT), and only while it is the very process started there (the same pid, start time
and executable) and not a zombie: a stale pid file or a recycled pid is never signalled. ``start`` returns once
the client port is bound; etcd answers on it only once the member has joined a quorum, which after a
restart inside a partition may take until the heal.

**Status** comes from the member's ``/debug/vars`` (Go's expvar, served on the client port): its
``raft.status`` is the raft node's own state, ``term`` (the *current* term, the one the member votes or
leads in), ``raftState`` (``StateLeader``, ``StateFollower``, ``StateCandidate``, ``StatePreCandidate``)
and ``lead`` (the leader's member id, hex). etcd's documented status call, ``/v3/maintenance/status``,
is not used: its ``raftTerm`` (like every response header's ``raft_term``) is the term of the last entry
the member *applied*. A member elected in term 5 reports 4 until it has applied an entry of term 5, while
the leader of term 4, cut off and not yet stepped down, reports 4 too: two leaders "in term 4", a false
alarm of single-leader-per-term (docs/systems/etcd.md).
Member ids become names through ``/v3/cluster/member/list`` (served from the member's own view).

**No clock skew.** etcd is a Go program: its runtime reads the clock through the kernel's vDSO, not
through libc, so libfaketime's ``LD_PRELOAD`` does not move its clock (measured: with ``FAKETIME=-3d``
``date`` went back three days, etcd's log timestamps did not). The adapter has no ``ClockSkew``, and the
``clock`` nemesis is refused before anything is deployed.

**No catch-up probe** (``CatchUp``): a linearizable read at a member already waits until that member has
applied the leader's commit index, so a member that has not caught up answers late or fails, never stale.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx

from adapters.etcd.client import CLIENT_PORT, LINEARIZABLE, EtcdWorkloadClient, http_client
from adapters.etcd.install import EtcdBinary
from harness.db import Deployment, StatusError
from harness.db.client import home_node
from harness.db.daemon import START_TIMEOUT_S, Daemon, DaemonProcess
from harness.db.http import status_errors

if TYPE_CHECKING:
    from nemesis.remote import Remote

PEER_PORT = 2380
INSTALL_DIR = "/opt/chaos-etcd"
BINARY = f"{INSTALL_DIR}/etcd"
DATA_DIR = "/var/lib/chaos-etcd"
LOG_DIR = "/var/log/chaos-etcd"
LOG_FILE = f"{LOG_DIR}/etcd.log"
RUN_DIR = "/var/run/chaos-etcd"
PID_FILE = f"{RUN_DIR}/etcd.pid"
CLUSTER_TOKEN = "chaos-harness"
LOG_TAIL_LINES = 20

ROLES = {"StateLeader": "leader", "StateFollower": "follower", "StateCandidate": "candidate",
         "StatePreCandidate": "pre-candidate"}
"""raft's ``raftState`` words -> the status contract's roles."""
NO_MEMBER = "0"
"""``lead`` when the member knows no leader (raft.None, printed in hex)."""


class EtcdDB(DaemonProcess):
    """etcd, one member per data node: DB + Process + Pause + Status + LogFiles + Clients (``register``).

    ``binary`` is the etcd binary on the controller; ``reads`` how the client reads (``linearizable``,
    etcd's default, or ``serializable``: the deliberately broken variant); ``heartbeat_ms`` and
    ``election_timeout_ms`` are etcd's ``--heartbeat-interval`` and ``--election-timeout``. ``transport``
    replaces the network of status requests and clients (tests pass ``httpx.MockTransport``).
    """

    name = "etcd"
    capabilities = ("Clients", "Process", "Pause", "Status", "LogFiles")
    workloads = ("register",)
    impossible = {"ClockSkew": "etcd is a Go program, whose runtime reads the clock without libc, so "
                               "libfaketime's LD_PRELOAD cannot move it (docs/systems/etcd.md)"}

    def __init__(
        self,
        binary: EtcdBinary,
        *,
        reads: str = LINEARIZABLE,
        heartbeat_ms: int = 100,
        election_timeout_ms: int = 1000,
        start_timeout: float = START_TIMEOUT_S,
        stop_timeout: float = 10.0,
        command_timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.binary = binary
        self.reads = reads
        self.heartbeat_ms = heartbeat_ms
        self.election_timeout_ms = election_timeout_ms
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.command_timeout = command_timeout
        self.transport = transport
        self._member_names: dict[str, str] = {}  # raft member id (hex) -> node name

    def version(self) -> dict[str, Any]:
        """What test.json records: the binary (path, package version, sha256) and how reads are made."""
        return {**self.binary.to_json(), "reads": self.reads}

    # -- installation ---------------------------------------------------------------------------------

    def command(self, deployment: Deployment, node: str) -> list[str]:
        """The argv of ``node``'s member."""
        peers = ",".join(f"{n}={self._url(deployment, n, PEER_PORT)}" for n in deployment.nodes)
        return [
            BINARY,
            "--name", node,
            "--data-dir", DATA_DIR,
            "--listen-client-urls", f"http://0.0.0.0:{CLIENT_PORT}",
            "--advertise-client-urls", self._url(deployment, node, CLIENT_PORT),
            "--listen-peer-urls", f"http://0.0.0.0:{PEER_PORT}",
            "--initial-advertise-peer-urls", self._url(deployment, node, PEER_PORT),
            "--initial-cluster", peers,
            "--initial-cluster-state", "new",
            "--initial-cluster-token", CLUSTER_TOKEN,
            "--heartbeat-interval", str(self.heartbeat_ms),
            "--election-timeout", str(self.election_timeout_ms),
            "--logger", "zap",
        ]

    @staticmethod
    def _url(deployment: Deployment, node: str, port: int) -> str:
        return f"http://{deployment.peer_hosts[node]}:{port}"

    def setup(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Upload the binary and start the member."""
        remote.run(f"mkdir -p {INSTALL_DIR}", timeout=self.command_timeout)
        remote.upload(self.binary.path, BINARY)
        remote.run(f"chmod 755 {BINARY}", timeout=self.command_timeout)
        self.start(deployment, node, remote)

    def teardown(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Kill the member (whatever its state) and remove its data, log, pid file and the binary."""
        try:
            self.kill(deployment, node, remote)
        finally:
            remote.run(f"rm -rf {DATA_DIR} {LOG_DIR} {RUN_DIR} {INSTALL_DIR}", timeout=self.command_timeout)

    # -- the process ----------------------------------------------------------------------------------

    daemon_port = CLIENT_PORT
    daemon_tail_lines = LOG_TAIL_LINES

    def daemon(self, deployment: Deployment, node: str) -> Daemon:
        """``node``'s member as a process on its host (``harness.db.daemon``): found through :data:`PID_FILE`,
        output appended to :data:`LOG_FILE`."""
        return Daemon(argv=self.command(deployment, node), pid_file=PID_FILE, output_file=LOG_FILE,
                      directories=(DATA_DIR,), name="etcd")

    def log_files(self, deployment: Deployment, node: str) -> dict[str, str]:
        return {LOG_FILE: "etcd.log"}

    # -- clients and status ---------------------------------------------------------------------------

    def client_urls(self, deployment: Deployment) -> dict[str, str]:
        """Where the controller reaches each member's gateway."""
        return {n: f"http://{deployment.client_hosts[n]}:{CLIENT_PORT}" for n in deployment.nodes}

    async def open_client(self, deployment: Deployment, process: int, timeout: float) -> EtcdWorkloadClient:
        """A client for one logical process, at home on member ``nodes[process % N]``."""
        return EtcdWorkloadClient(self.client_urls(deployment), home_node(deployment.nodes, process),
                                  reads=self.reads, timeout=timeout, transport=self.transport)

    async def status(self, deployment: Deployment, node: str, timeout: float) -> dict[str, Any]:
        """The member's raft state from ``/debug/vars`` (module docstring, "Status"), on a connection of
        its own so that a paused member's stuck connection never delays the next poll."""
        url = self.client_urls(deployment)[node]
        async with http_client(timeout, self.transport) as http:
            with status_errors(timeout):
                answer = await http.get(f"{url}/debug/vars")
                raft = answer.json().get("raft.status") if answer.status_code == 200 else None
                if not isinstance(raft, Mapping):
                    raise StatusError(f"no raft.status in /debug/vars (HTTP {answer.status_code})", definite=True)
                self._member_names[str(raft.get("id"))] = node
                lead = str(raft.get("lead", NO_MEMBER))
                if lead != NO_MEMBER and lead not in self._member_names:
                    await self._learn_members(http, url)
        return status_of(node, raft, self._member_names)

    async def _learn_members(self, http: httpx.AsyncClient, url: str) -> None:
        """Member id -> name for every member this member knows (ids in decimal there, hex in raft)."""
        answer = await http.post(f"{url}/v3/cluster/member/list", json={})
        self._member_names.update(member_names(answer.json()))


def member_names(member_list: Mapping[str, Any]) -> dict[str, str]:
    """``/v3/cluster/member/list``'s answer as raft member id (hex, as ``raft.status`` prints it) -> name;
    a member that has not published its name yet is left out."""
    return {format(int(m["ID"]), "x"): m["name"] for m in member_list.get("members") or [] if m.get("name")}


def status_of(node: str, raft: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """A ``raft.status`` object as the status contract's fields (``harness.db.STATUS_FIELDS``)."""
    state = str(raft.get("raftState", ""))
    lead = str(raft.get("lead", NO_MEMBER))
    term = raft.get("term")
    return {
        "node": node,
        "role": ROLES.get(state, state.removeprefix("State").lower() or "unknown"),
        "term": term if isinstance(term, int) and not isinstance(term, bool) else None,
        "leader": None if lead == NO_MEMBER else names.get(lead),
        "commit_lsn": None,
        "last_lsn": None,
    }
