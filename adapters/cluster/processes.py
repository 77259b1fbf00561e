"""Which processes a deployment of ``cluster`` has, where each runs and where its files are: the layout
that container and SSH runs deploy (``adapters.cluster.db.ClusterDB``) and that the simulator reproduces
(``adapters.cluster.sim.WorldConfig``), so both answer alike.

:class:`ClusterProcesses` answers from the election mode alone: the data nodes (one per host), in
``fluvio`` mode the controller ``sc`` on a host of its own, in ``lease`` mode the store group ``s1..s3``
beside the data nodes (``adapters.cluster.db``'s docstring tells why). It is ``harness.db``'s
``AuxiliaryProcesses`` and ``ReplyPorts`` part of the adapter; ``ClusterDB`` is one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cluster.core.election.fluvio import CONTROLLER_ID
from harness.db import Deployment

PORT = 7000
DATA_DIR = "/var/lib/chaos/data"
LOG_DIR = "/var/log/chaos"
LOG_FILE = f"{LOG_DIR}/node.log"
CONSOLE_FILE = f"{LOG_DIR}/console.log"
RUN_DIR = "/var/run/chaos"
PID_FILE = f"{RUN_DIR}/node.pid"
JOURNAL_FILE = f"{DATA_DIR}/journal.jsonl"

STORE_MODE = "lease"
"""The election mode whose data nodes elect through an external store group."""
STORE_MEMBERS = ("s1", "s2", "s3")
"""The lease mode's store group: a ``raft`` cluster of three (as adapters/cluster/sim.py deploys it)."""
STORE_PORT = 7100
"""Store member ``sK`` listens on ``STORE_PORT + K - 1`` (distinct, so several can share a host)."""
STORE_DATA_ROOT = "/var/lib/chaos/store"
EXTERNAL_STORE = "external-store"
"""Where a run keeps the store members' files: ``external-store/<member>/`` (harness/sim/run.py too)."""
NODES_DIR = "nodes"

NODE, CONTROLLER, STORE = "node", "controller", "store"


@dataclass(frozen=True)
class ClusterProcess:
    """One process of a deployment: a data node, the fluvio controller or a lease store member.

    ``host`` is the host it runs on (its Remote); ``collect_to`` the directory of the run its journal and
    logs are copied to.
    """

    name: str
    kind: str
    host: str
    port: int
    data_dir: str
    log_file: str
    console_file: str
    pid_file: str

    @property
    def journal_file(self) -> str:
        return f"{self.data_dir}/journal.jsonl"

    @property
    def collect_to(self) -> str:
        return f"{EXTERNAL_STORE if self.kind == STORE else NODES_DIR}/{self.name}"


class ClusterProcesses:
    """The processes of a ``cluster`` deployment in election mode ``mode`` (module docstring)."""

    def __init__(self, mode: str = "blazingmq") -> None:
        self.mode = mode

    def store_members(self) -> tuple[str, ...]:
        """The lease mode's store group (:data:`STORE_MEMBERS`); none in other modes."""
        return STORE_MEMBERS if self.mode == STORE_MODE else ()

    def extra_hosts(self, nodes: Sequence[str]) -> tuple[str, ...]:
        """Hosts beyond one per data node: the fluvio controller's own host ``sc``."""
        return (CONTROLLER_ID,) if self.mode == "fluvio" else ()

    def fault_targets(self, nodes: Sequence[str]) -> tuple[str, ...]:
        """The processes the nemesis picks from: the data nodes and, in fluvio mode, the controller (issue
        7: "killable and partitionable like a node"). Lease store members are not targets (module
        docstring); partitions reach them through their hosts."""
        return (*nodes, *self.extra_hosts(nodes))

    def processes(self, deployment: Deployment) -> tuple[ClusterProcess, ...]:
        """Every process of the deployment: data nodes, then the controller, then the store members."""
        found = [self._node_process(node) for node in deployment.hosts]
        nodes = deployment.nodes
        for k, member in enumerate(self.store_members()):
            found.append(ClusterProcess(
                name=member, kind=STORE, host=nodes[k % len(nodes)], port=STORE_PORT + k,
                data_dir=f"{STORE_DATA_ROOT}/{member}", log_file=f"{LOG_DIR}/{member}.log",
                console_file=f"{LOG_DIR}/{member}.console.log", pid_file=f"{RUN_DIR}/{member}.pid",
            ))
        return tuple(found)

    def reply_ports(self, deployment: Deployment) -> tuple[int, ...]:
        """The store members' ports: lease nodes call them as clients, and each reply comes back on the
        connection its request went out on (``harness.db.ReplyPorts``)."""
        return tuple(p.port for p in self.processes(deployment) if p.kind == STORE)

    @staticmethod
    def _node_process(name: str) -> ClusterProcess:
        kind = CONTROLLER if name == CONTROLLER_ID else NODE
        return ClusterProcess(name=name, kind=kind, host=name, port=PORT, data_dir=DATA_DIR, log_file=LOG_FILE,
                              console_file=CONSOLE_FILE, pid_file=PID_FILE)

    def process(self, deployment: Deployment, name: str) -> ClusterProcess:
        """The process called ``name``; ``KeyError`` naming the deployment's processes otherwise."""
        for process in self.processes(deployment):
            if process.name == name:
                return process
        names = ", ".join(p.name for p in self.processes(deployment))
        raise KeyError(f"no process {name!r} in this {self.mode} deployment; its processes: {names}")

    def processes_on(self, deployment: Deployment, host: str) -> tuple[ClusterProcess, ...]:
        """The processes of ``host`` in start order: store members first, then the node or controller."""
        on_host = [p for p in self.processes(deployment) if p.host == host]
        return tuple(sorted(on_host, key=lambda p: p.kind != STORE))

    def log_files(self, deployment: Deployment, node: str) -> dict[str, str]:
        """The files of process ``node``: remote path -> file name in its collection directory."""
        process = self.process(deployment, node)
        return {process.journal_file: "journal.jsonl", process.log_file: "node.log",
                process.console_file: "console.log"}

    def run_files(self, deployment: Deployment, host: str) -> dict[str, str]:
        """Every file to collect from ``host``: remote path -> path relative to the run's directory
        (``nodes/<id>/`` for data nodes and the controller, ``external-store/<member>/`` for the store)."""
        return {
            remote_path: f"{process.collect_to}/{name}"
            for process in self.processes_on(deployment, host)
            for remote_path, name in self.log_files(deployment, process.name).items()
        }
