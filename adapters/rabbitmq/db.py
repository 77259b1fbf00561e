"""The DB adapter for RabbitMQ 3.10 with quorum queues: one broker per node, clustered, the ``queue`` workload.

**Installation.** The controller holds a tarball of Debian's RabbitMQ and Erlang (``adapters.rabbitmq.install``)
and uploads it to every node, where it is unpacked into :data:`INSTALL_DIR`. Each node gets, in
:data:`DATA_DIR`, the Erlang cookie all nodes share (``.erlang.cookie``, read through ``HOME``), the
broker's configuration (:func:`rabbitmq_config`) and its enabled plugins (the management plugin, whose
HTTP API answers status). The broker is ``rabbitmq/sbin/rabbitmq-server`` with every path in its
environment (:func:`server_environment`): node name ``rabbit@<node>`` (on Docker a node's hostname is its
node name, so Erlang's short names resolve), its data in ``DATA_DIR/mnesia``, its log on stdout, appended
to :data:`LOG_FILE` (collected as ``rabbitmq.log``).

**Clustering.** The first node starts alone; every other node waits until the first one accepts AMQP
connections and then boots with ``classic_config`` peer discovery naming it, so it joins that node's
cluster (a blank node joins; a node with data, restarted after a kill, rejoins the cluster it belongs
to). Started in parallel, two blank nodes could otherwise each form a cluster of their own. Once every
node runs, the setup of the last node declares the queue ``q0`` (:data:`PREDECLARED`, the ``queue``
workload's first queue) as a quorum queue, so that its Raft group has a member on every node and its
leader is known before the first operation (clients declare each queue they use too, idempotently; a
queue first declared during a partition gets members only on the nodes its declarer's side reaches).

Safety settings (the defaults): quorum queues (a Raft group per queue, a majority of members must store a
message before the broker confirms it), publisher confirms, ``cluster_partition_handling =
pause_minority`` (a node that sees fewer than half of the cluster stops its listeners until the
partition heals, so the cluster's metadata heals without an operator; with RabbitMQ's default,
``ignore``, a partitioned cluster stays split after the network heals) and an Erlang ``net_ticktime``
of :data:`NET_TICKTIME` seconds, so that a cut-off peer is noticed within the run rather than after the
default 60 s. ``queue_type=classic`` (a classic queue lives on the node that declared it, unreplicated)
and ``confirms=off`` (``adapters.rabbitmq.client``) are the known-unsafe options.

**Processes** (``harness.db.daemon``): the broker is one Erlang VM (the start script ``exec``\\ s the
emulator, with ``RUNNING_UNDER_SYSTEMD`` set so that it does not stay behind as a shell that traps signals),
so kill is SIGKILL to the VM, pause SIGSTOP, resume SIGCONT. ``start`` returns once the VM listens on its
distribution port :data:`DIST_PORT` (early in its boot: a restarted node may wait for its peers before it
accepts clients, and a start that waited for AMQP could wait forever when every node was killed). Erlang's
port mapper ``epmd``, started by the first VM, keeps running across kills, as on a real host.

**Status** comes from the management API of the node, ``GET /api/queues/%2F?columns=name,type,leader``:
one group per queue named like the queue, ``role`` ``leader`` when the node's metadata names its own
member as the queue's leader, ``leader`` the node named. RabbitMQ has no cluster-level leader (top-level
``role`` ``follower``, ``term`` None). The management API's queue objects carry the leader and the
members but no Raft term; the CLI (``rabbitmq-queues quorum_status``) shows each member's state and term,
but each CLI call boots an Erlang VM (0.7 s on an idle node) and a status request may take 1 s. Pairing a
term from elsewhere with the metadata's leader would invent claims no member made (the metadata may name
the old leader for a moment after its member moved to a new term). So every ``term`` is None and
single-leader-per-term is declared not applicable (:attr:`RabbitDB.not_applicable`).

No catch-up probe: a consume is served by the queue's leader whichever node the client is connected to.
"""

from __future__ import annotations

import json
import shlex
import time
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx

from adapters.rabbitmq.client import AMQP_PORT, QUEUE_TYPES, RabbitQueueClient, queue_arguments
from adapters.rabbitmq.install import ERLANG_ROOT, INSTALL_DIR, RabbitBundle
from harness.db import Deployment, NodeStartError, StatusError
from harness.db.daemon import START_TIMEOUT_S, Daemon, DaemonProcess
from harness.db.http import status_errors
from workloads.queue import Delivery

if TYPE_CHECKING:
    from nemesis.remote import Remote

SERVER_DIR = f"{INSTALL_DIR}/rabbitmq"
SERVER = f"{SERVER_DIR}/sbin/rabbitmq-server"
CTL = f"{SERVER_DIR}/sbin/rabbitmqctl"
BUNDLE_FILE = f"{INSTALL_DIR}/rabbitmq.tar.gz"
DATA_DIR = "/var/lib/chaos-rabbitmq"
CONFIG_FILE = f"{DATA_DIR}/rabbitmq.conf"
PLUGINS_FILE = f"{DATA_DIR}/enabled_plugins"
ENV_FILE = f"{DATA_DIR}/rabbitmq-env.conf"
COOKIE_FILE = f"{DATA_DIR}/.erlang.cookie"
MNESIA_DIR = f"{DATA_DIR}/mnesia"
LOG_DIR = "/var/log/chaos-rabbitmq"
LOG_FILE = f"{LOG_DIR}/rabbitmq.log"
RUN_DIR = "/var/run/chaos-rabbitmq"
PID_FILE = f"{RUN_DIR}/rabbitmq.pid"
DIST_PORT = 25672
MANAGEMENT_PORT = 15672
NET_TICKTIME = 10
COOKIE = "CHAOSHARNESSRABBITMQCOOKIE"
"""The Erlang cookie every node and CLI call of a test shares (the nodes sit on a private network)."""
USER = PASSWORD = "guest"
"""RabbitMQ's default user, allowed from other hosts by ``loopback_users.guest = false``."""
PREDECLARED = ("q0",)
STATUS_PATH = "/api/queues/%2F?columns=name,type,leader"
JOIN_TIMEOUT = 120.0
"""Seconds a node's setup waits for the first node to accept clients, and the last for every node to run."""


def node_name(node: str) -> str:
    """The Erlang node name of ``node``'s broker."""
    return f"rabbit@{node}"


def rabbitmq_config(deployment: Deployment, node: str) -> str:
    """``node``'s ``rabbitmq.conf`` (module docstring): every node but the first joins the first one."""
    lines = [
        f"listeners.tcp.default = {AMQP_PORT}",
        f"management.tcp.port = {MANAGEMENT_PORT}",
        "loopback_users.guest = false",
        "cluster_partition_handling = pause_minority",
        "log.console = true",
        "log.console.level = info",
        "log.file = false",
    ]
    first = deployment.nodes[0]
    if node != first:
        lines += ["cluster_formation.peer_discovery_backend = classic_config",
                  f"cluster_formation.classic_config.nodes.1 = {node_name(first)}"]
    return "\n".join(lines) + "\n"


def server_environment(node: str) -> dict[str, str]:
    """The environment the broker and its CLI run with: every path, the node name, Erlang on ``PATH``."""
    return {
        "HOME": DATA_DIR,
        "PATH": f"{ERLANG_ROOT}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "RABBITMQ_NODENAME": node_name(node),
        "RABBITMQ_CONFIG_FILE": CONFIG_FILE,
        "RABBITMQ_CONF_ENV_FILE": ENV_FILE,
        "RABBITMQ_ENABLED_PLUGINS_FILE": PLUGINS_FILE,
        "RABBITMQ_MNESIA_BASE": MNESIA_DIR,
        "RABBITMQ_LOG_BASE": LOG_DIR,
        "RABBITMQ_LOGS": "-",
        "RABBITMQ_PID_FILE": f"{RUN_DIR}/rabbit-own.pid",
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": f"-kernel net_ticktime {NET_TICKTIME}",
        "RUNNING_UNDER_SYSTEMD": "true",
    }


def status_of(node: str, queues: Any) -> dict[str, Any]:
    """The management API's queue list (``name``, ``type``, ``leader``) as the status contract's fields: one
    group per queue, sorted by name (module docstring). A classic queue's leader is the node it lives on."""
    groups = []
    for queue in queues if isinstance(queues, list) else []:
        if not isinstance(queue, Mapping) or not isinstance(queue.get("name"), str):
            continue
        named = queue.get("leader") or queue.get("node")
        leader = named.split("@", 1)[1] if isinstance(named, str) and "@" in named else None
        groups.append({"group": queue["name"], "role": "leader" if leader == node else "follower", "term": None,
                       "leader": leader, "commit_lsn": None, "last_lsn": None})
    groups.sort(key=lambda g: g["group"])
    return {"node": node, "role": "follower", "term": None, "leader": None, "commit_lsn": None,
            "last_lsn": None, "groups": groups}


def wait_port_script(host: str, port: int, timeout: float) -> str:
    """A script that waits until ``host`` accepts connections on ``port`` (the node's python3); exit 1 if it
    does not within ``timeout`` seconds."""
    program = (
        "import socket, sys, time\n"
        f"deadline = time.monotonic() + {float(timeout)!r}\n"
        "while True:\n"
        "    try:\n"
        f"        socket.create_connection(({host!r}, {int(port)}), timeout=2).close()\n"
        "        sys.exit(0)\n"
        "    except OSError:\n"
        "        if time.monotonic() > deadline:\n"
        "            sys.exit(1)\n"
        "        time.sleep(0.5)\n"
    )
    return f"python3 -c {shlex.quote(program)}"


class RabbitDB(DaemonProcess):
    """RabbitMQ brokers clustered, one per node: DB + Process + Pause + Status + LogFiles + Clients
    (``queue``).

    ``bundle`` is the tarball on the controller; ``queue_type`` ``quorum`` (safe) or ``classic``;
    ``confirms`` whether a put waits for the publisher confirm. ``transport`` replaces the network of
    status requests (tests pass ``httpx.MockTransport``).
    """

    name = "rabbitmq"
    workloads = ("queue",)
    capabilities = ("Clients", "Process", "Pause", "Status", "LogFiles")
    delivery = Delivery(dedup=False, redelivery="close", in_flight=False)
    not_applicable = {
        "single-leader-per-term": "RabbitMQ 3.10 reports a quorum queue's Raft term only through its CLI, "
                                  "which boots an Erlang VM per call, slower than a status request may be; "
                                  "the management API's queue objects carry the leader but no term (docs/systems/rabbitmq.md)",
        "lsn-monotonicity": "AMQP gives a client no sequence number of a message it published or consumed",
    }
    start_timeout = START_TIMEOUT_S
    stop_timeout = 10.0
    command_timeout = 60.0
    daemon_port = DIST_PORT

    def __init__(
        self,
        bundle: RabbitBundle,
        *,
        queue_type: str = "quorum",
        confirms: bool = True,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if queue_type not in QUEUE_TYPES:
            raise ValueError(f"queue_type must be one of {', '.join(QUEUE_TYPES)}, not {queue_type!r}")
        self.bundle = bundle
        self.queue_type = queue_type
        self.confirms = confirms
        self.transport = transport

    def version(self) -> dict[str, Any]:
        """What test.json records: the bundle and the safety settings."""
        return {**self.bundle.to_json(), "queue_type": self.queue_type, "confirms": self.confirms,
                "partition_handling": "pause_minority", "net_ticktime": NET_TICKTIME}

    # -- installation ---------------------------------------------------------------------------------

    def setup(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Upload and unpack RabbitMQ, write its files, start it (after the first node, for the others);
        the last node's setup waits for the whole cluster and declares :data:`PREDECLARED`."""
        quote = shlex.quote
        remote.run(f"mkdir -p {quote(INSTALL_DIR)} {quote(DATA_DIR)} {quote(LOG_DIR)} {quote(RUN_DIR)}",
                   timeout=self.command_timeout)
        remote.upload(self.bundle.path, BUNDLE_FILE)
        remote.run(f"tar -xzf {quote(BUNDLE_FILE)} -C {quote(INSTALL_DIR)} && rm -f {quote(BUNDLE_FILE)}",
                   timeout=self.command_timeout)
        remote.write_file(CONFIG_FILE, rabbitmq_config(deployment, node).encode())
        remote.write_file(PLUGINS_FILE, b"[rabbitmq_management].\n")
        remote.write_file(ENV_FILE, b"")
        remote.write_file(COOKIE_FILE, COOKIE.encode())
        remote.run(f"chmod 400 {quote(COOKIE_FILE)}", timeout=self.command_timeout)
        first = deployment.nodes[0]
        if node != first:
            waited = remote.run(wait_port_script(deployment.peer_hosts[first], AMQP_PORT, JOIN_TIMEOUT),
                                timeout=JOIN_TIMEOUT + self.command_timeout, check=False)
            if waited.exit_code != 0:
                raise NodeStartError(f"{node}: {first} did not accept AMQP connections within {JOIN_TIMEOUT:g} s, "
                                     "so there is no cluster to join")
        self.daemon(deployment, node).start(remote, port=AMQP_PORT, timeout=JOIN_TIMEOUT,
                                            command_timeout=self.command_timeout,
                                            tail_lines=self.daemon_tail_lines)
        if node == deployment.nodes[-1]:
            self._await_cluster(deployment, node)
            self._predeclare(deployment, node)

    def _management(self, deployment: Deployment, node: str) -> str:
        return f"http://{deployment.client_hosts[node]}:{MANAGEMENT_PORT}"

    def _await_cluster(self, deployment: Deployment, node: str) -> None:
        """Wait until ``node``'s management API lists every node as running."""
        wanted = {node_name(n) for n in deployment.nodes}
        deadline = time.monotonic() + JOIN_TIMEOUT
        running: set[str] = set()
        with httpx.Client(auth=(USER, PASSWORD), timeout=5.0) as http:
            while time.monotonic() < deadline:
                try:
                    answer = http.get(f"{self._management(deployment, node)}/api/nodes?columns=name,running")
                    running = {n["name"] for n in answer.json() if n.get("running")}
                except (httpx.HTTPError, ValueError, TypeError, AttributeError):
                    running = set()
                if wanted <= running:
                    return
                time.sleep(0.5)
        raise NodeStartError(f"{node}: the cluster did not form within {JOIN_TIMEOUT:g} s: running "
                             f"{', '.join(sorted(running)) or 'nothing known'}, wanted {', '.join(sorted(wanted))}")

    def _predeclare(self, deployment: Deployment, node: str) -> None:
        """Declare :data:`PREDECLARED` through ``node``'s management API, as the clients declare them."""
        body = {"durable": True, "auto_delete": False, "arguments": queue_arguments(self.queue_type)}
        with httpx.Client(auth=(USER, PASSWORD), timeout=30.0) as http:
            for queue in PREDECLARED:
                url = f"{self._management(deployment, node)}/api/queues/%2F/{urllib.parse.quote(queue, safe='')}"
                answer = http.put(url, content=json.dumps(body), headers={"content-type": "application/json"})
                if answer.status_code not in (201, 204):
                    raise NodeStartError(f"{node}: declaring queue {queue} failed: HTTP {answer.status_code} "
                                         f"{answer.text[:200]}")

    def teardown(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Kill the broker and epmd (whatever their state) and remove data, logs, pid files and binaries."""
        try:
            self.daemon(deployment, node).kill(remote, wait=self.stop_timeout)
        finally:
            # Erlang's port mapper outlives the VM that started it: known by its executable, not its name.
            epmd = f"{ERLANG_ROOT}/erts-*/bin/epmd"
            remote.run(f'for p in /proc/[0-9]*; do case "$(readlink "$p/exe")" in {epmd}) kill -9 "${{p#/proc/}}";; '
                       "esac; done; true", timeout=self.command_timeout, check=False)
            paths = " ".join(shlex.quote(p) for p in (DATA_DIR, LOG_DIR, RUN_DIR, INSTALL_DIR))
            remote.run(f"rm -rf {paths}", timeout=self.command_timeout)

    # -- the process ----------------------------------------------------------------------------------

    def daemon(self, deployment: Deployment, node: str) -> Daemon:
        """``node``'s broker (``harness.db.daemon``)."""
        return Daemon(argv=[SERVER], pid_file=PID_FILE, output_file=LOG_FILE, cwd=DATA_DIR,
                      env=server_environment(node), directories=(MNESIA_DIR,), name="rabbitmq-server")

    def log_files(self, deployment: Deployment, node: str) -> dict[str, str]:
        return {LOG_FILE: "rabbitmq.log"}

    # -- clients and status ---------------------------------------------------------------------------

    async def open_client(self, deployment: Deployment, process: int, timeout: float) -> RabbitQueueClient:
        """A client for one logical process, connected first to ``nodes[process % N]``."""
        nodes = deployment.nodes
        return RabbitQueueClient({n: deployment.client_hosts[n] for n in nodes}, nodes[process % len(nodes)],
                                 queue_type=self.queue_type, confirms=self.confirms, timeout=timeout)

    async def status(self, deployment: Deployment, node: str, timeout: float) -> dict[str, Any]:
        """The node's view of each queue's leader (module docstring, "Status")."""
        url = f"{self._management(deployment, node)}{STATUS_PATH}"
        async with httpx.AsyncClient(timeout=timeout, transport=self.transport, auth=(USER, PASSWORD)) as http:
            with status_errors(timeout):
                answer = await http.get(url)
                queues = answer.json() if answer.status_code == 200 else None
        if not isinstance(queues, list):
            raise StatusError(f"no queue list at {STATUS_PATH} (HTTP {answer.status_code})", definite=False)
        return status_of(node, queues)
