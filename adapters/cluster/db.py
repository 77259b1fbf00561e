"""The DB adapter for ``cluster``, the demo system under test that ships with the harness.

Installation is Jepsen's: the controller packs the local ``cluster`` package into a tarball, uploads it to
each host and unpacks it under :data:`INSTALL_DIR`; the host needs nothing but ``python3``. A data node
is started in the background as

    python3 -m cluster.node --id n1 --listen 0.0.0.0:7000 --peers n2=10.55.0.12:7000,...
        --data-dir /var/lib/chaos/data --mode blazingmq [--bug NAME ...] --pid-file /var/run/chaos/node.pid

with its log in :data:`LOG_FILE` and its stdout/stderr (tracebacks, configuration errors) appended to
:data:`CONSOLE_FILE`; signals go to the pid in :data:`PID_FILE` (stop: SIGTERM, kill: SIGKILL, pause:
SIGSTOP, resume: SIGCONT). A pid counts as the process only while ``/proc/<pid>/cmdline`` names
``cluster.node`` with that process's ``--id`` and the process is not a zombie, so a stale pid file or a
recycled pid is never signalled. Under the ``clock`` nemesis the process runs under libfaketime with the
environment of ``nemesis.shell.FakeTime`` (ENVIRONMENT.md's recipe); the nemesis installs the library and
rewrites the control file.

**Processes besides the data nodes** (issue 7; :class:`ClusterProcess` describes each one):

* ``fluvio``: the controller (SC, id ``sc``, ``cluster.core.election.fluvio.CONTROLLER_ID``) runs with
  ``--controller`` on a host of its own, ``sc``, laid out exactly like a data node's host (port, data
  directory, pid file, log). Every SPU lists ``sc=<host>:7000`` among its ``--peers``. It is one more
  fault target: kills, pauses, partitions and clock faults reach it as they reach a node.
* ``lease``: the external store is a ``raft`` group ``s1..s3``; member ``sK`` is a second process on the
  host of data node ``nK`` (with fewer than three data nodes, ``s<K>`` lives on ``n<(K-1) mod N + 1>``),
  with its own port (:data:`STORE_PORT` + K - 1), data directory, pid file and logs; the data nodes get
  ``--store s1=<host>:7100,...``. Store members move with their host under partitions (they share its
  address, which is what iptables drops), but are never targets of kills, pauses or clock faults: the
  store stands for the seed's external linearizable service (ZooKeeper, etcd), which the lease election
  assumes available to a majority; killing it would test the ``raft`` mode (run on its own) rather than
  the lease election, and a kill of ``nK`` aimed at the data node must not also take a store vote away.
  They run without libfaketime (their raft timers read only the monotonic clock).

Each process writes its journal to ``<its data dir>/journal.jsonl``. :meth:`ClusterDB.run_files` says where
it is collected: data nodes and the SC under ``nodes/<id>/`` (the SC journals ``start``, ``decision`` and
``stop`` events and no ``role`` or ``apply``, so the checkers read it with the nodes' journals unchanged),
store members under ``external-store/<member>/`` (their ``role`` terms are the store's own and must not
be mixed with the data group's). Teardown kills every process of the host and wipes data, logs, pid
files and the installation.

Which processes a deployment has, their hosts, ports and files are :mod:`adapters.cluster.processes`'s
(``ClusterDB`` is a :class:`~adapters.cluster.processes.ClusterProcesses`), which the simulator shares; its
path constants (:data:`LOG_FILE`, :data:`PID_FILE`, ...) are importable from here too.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapters.cluster.client import ClusterWorkloadClient, status_of
from adapters.cluster.processes import CONSOLE_FILE as CONSOLE_FILE
from adapters.cluster.processes import (
    CONTROLLER,
    DATA_DIR,
    LOG_DIR,
    NODE,
    PORT,
    RUN_DIR,
    STORE,
    STORE_DATA_ROOT,
    ClusterProcess,
    ClusterProcesses,
)
from adapters.cluster.processes import JOURNAL_FILE as JOURNAL_FILE
from adapters.cluster.processes import LOG_FILE as LOG_FILE
from adapters.cluster.processes import PID_FILE as PID_FILE
from adapters.cluster.processes import STORE_PORT as STORE_PORT
from cluster.client import Client
from harness.db import Deployment
from harness.db.daemon import START_TIMEOUT_S, Daemon
from workloads.generator import workloads_for

if TYPE_CHECKING:
    from nemesis.remote import Remote
    from nemesis.shell import FakeTime

INSTALL_DIR = "/opt/chaos"
TARBALL = "/tmp/chaos-cluster.tar.gz"
LOG_TAIL_LINES = 20
MODULE = "cluster.node"


def core_option_args(core: Mapping[str, Any]) -> tuple[str, ...]:
    """``--core-option NAME=JSON`` pairs for the node command line, one per setting, in name order."""
    return tuple(arg for name in sorted(core) for arg in ("--core-option", f"{name}={json.dumps(core[name])}"))


def package_tarball(package_dir: Path) -> bytes:
    """A reproducible ``tar.gz`` of the ``cluster`` package (sources only, fixed owners and times, and a
    gzip header without a timestamp, so the same sources always give the same bytes and sha256)."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=6, mtime=0) as zipped, \
            tarfile.open(fileobj=zipped, mode="w") as tar:
        files = sorted(
            p for p in package_dir.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
        )
        if not any(p.name == "__init__.py" for p in files):
            raise FileNotFoundError(f"{package_dir} is not a Python package (no __init__.py)")
        for path in files:
            info = tarfile.TarInfo(str(Path(package_dir.name) / path.relative_to(package_dir)))
            data = path.read_bytes()
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


_TARBALLS: dict[Path, tuple[tuple[tuple[str, int, int], ...], bytes]] = {}


def _cached_tarball(package_dir: Path) -> bytes:
    """:func:`package_tarball`, made again only when a source file was added, removed or changed (its
    modification time or size) since this process last made it: every simulated seed records the
    package's digest, and packing it cost about 30 ms of CPU a seed (a stat of each file: under 1 ms)."""
    signature = tuple(sorted(
        (str(p), stat.st_mtime_ns, stat.st_size)
        for p in package_dir.rglob("*")
        if "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo") and p.is_file()
        for stat in (p.stat(),)
    ))
    cached = _TARBALLS.get(package_dir)
    if cached is not None and cached[0] == signature:
        return cached[1]
    tarball = package_tarball(package_dir)
    _TARBALLS[package_dir] = (signature, tarball)
    return tarball


class ClusterDB(ClusterProcesses):
    """``cluster`` on one data node per host: DB + Process + Pause + Status + LogFiles + AuxiliaryProcesses
    (+ ClockSkew with libfaketime). ``mode`` and ``bugs`` pass through to every data node and the fluvio
    controller; ``core`` holds ``NodeConfig`` settings for them (``--core-option NAME=JSON``, checked by
    ``cluster.core.config.check_settings``) and ``node_args`` any further ``cluster.node`` options; a lease
    store member gets neither (it is a correct ``raft`` group with default timings). With ``seed`` each
    process's RNG gets ``--seed`` derived from it, so random election waits repeat with the run's seed.
    Process-level methods (``start``, ``kill``, ``pause``, ``status``, ...) take a process name (``n1``,
    ``sc``, ``s1``) and its *host's* Remote."""

    name = "cluster"
    capabilities = ("Clients", "Simulation", "Process", "Pause", "Status", "LogFiles", "ClockSkew",
                    "AuxiliaryProcesses", "ReplyPorts")

    def __init__(
        self,
        mode: str = "blazingmq",
        bugs: Sequence[str] = (),
        *,
        core: Mapping[str, Any] | None = None,
        node_args: Sequence[str] = (),
        faketime: FakeTime | None = None,
        seed: int | None = None,
        start_timeout: float = START_TIMEOUT_S,
        stop_timeout: float = 10.0,
        command_timeout: float = 30.0,
        package_dir: Path | None = None,
        python: str = "python3",
    ) -> None:
        super().__init__(mode)
        self.bugs = tuple(bugs)
        self.core = dict(sorted((core or {}).items()))
        self.node_args = (*core_option_args(self.core), *node_args)
        self.faketime = faketime
        self.seed = seed
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.command_timeout = command_timeout
        self.python = python
        if package_dir is None:
            import cluster

            package_dir = Path(cluster.__file__).resolve().parent
        self.package_dir = package_dir
        self._tarball: bytes | None = None

    # -- installation ---------------------------------------------------------------------------------

    @property
    def tarball(self) -> bytes:
        if self._tarball is None:
            self._tarball = _cached_tarball(self.package_dir)
        return self._tarball

    def version(self) -> dict[str, Any]:
        """What test.json records about the installed system: the tarball's digest, mode and bugs."""
        return {
            "package": str(self.package_dir),
            "sha256": hashlib.sha256(self.tarball).hexdigest(),
            "mode": self.mode,
            "bugs": list(self.bugs),
            "faketime": self.faketime.library if self.faketime is not None else None,
        }

    def install(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Upload the package tarball and unpack it under :data:`INSTALL_DIR` (replacing any older copy)."""
        remote.write_file(TARBALL, self.tarball)
        remote.run(
            f"set -e; mkdir -p {INSTALL_DIR} {LOG_DIR} {RUN_DIR}; rm -rf {INSTALL_DIR}/cluster; "
            f"tar -xzf {TARBALL} -C {INSTALL_DIR}; rm -f {TARBALL}; "
            f"{self.python} -c 'import sys; sys.exit(sys.version_info < (3, 11))' "
            f"|| {{ echo 'cluster needs python3 >= 3.11 on the node' >&2; exit 1; }}",
            timeout=self.command_timeout,
        )

    def setup(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Install on host ``node`` and start what runs there: a lease store member first (the data node
        would only wait for it), then the data node or the controller."""
        self.install(deployment, node, remote)
        for process in self.processes_on(deployment, node):
            self.start(deployment, process.name, remote)

    def teardown(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Kill every process of host ``node`` (whatever its state) and wipe their data, logs, pid files and
        the installation. Raises after trying all of them if one could not be killed."""
        failures: list[str] = []
        for process in self.processes_on(deployment, node):
            try:
                self.kill(deployment, process.name, remote)
            except Exception as exc:  # noqa: BLE001 - wipe the rest, then report
                failures.append(f"{process.name}: {exc}")
        faketime = f"{self.faketime.directory} {self.faketime.library}" if self.faketime is not None else ""
        remote.run(
            f"rm -rf {DATA_DIR} {STORE_DATA_ROOT} {LOG_DIR} {RUN_DIR} {INSTALL_DIR} {TARBALL} {faketime}",
            timeout=self.command_timeout,
        )
        if failures:
            raise RuntimeError(f"{node}: could not kill {'; '.join(failures)}")

    def _address(self, deployment: Deployment, process: ClusterProcess) -> str:
        return f"{deployment.peer_hosts[process.host]}:{process.port}"

    def command(self, deployment: Deployment, node: str) -> list[str]:
        """The argv of process ``node`` (a data node, ``sc`` or a store member), without the environment."""
        process = self.process(deployment, node)
        everyone = self.processes(deployment)
        if process.kind == STORE:
            group = [p for p in everyone if p.kind == STORE]
            mode, bugs, extra = "raft", (), []  # the store is a correct raft group, with default timings
        else:
            group = [p for p in everyone if p.kind != STORE]
            mode, bugs, extra = self.mode, self.bugs, list(self.node_args)
        peers = ",".join(f"{p.name}={self._address(deployment, p)}" for p in group if p.name != node)
        argv = [
            self.python, "-m", MODULE,
            "--id", node,
            "--listen", f"0.0.0.0:{process.port}",
            "--peers", peers,
            "--data-dir", process.data_dir,
            "--mode", mode,
            "--pid-file", process.pid_file,
            "--log-file", process.log_file,
        ]
        if process.kind == CONTROLLER:
            argv.append("--controller")
        stores = [p for p in everyone if p.kind == STORE]
        if process.kind == NODE and stores:
            argv += ["--store", ",".join(f"{p.name}={self._address(deployment, p)}" for p in stores)]
        if self.seed is not None:
            argv += ["--seed", str(self.seed * 1000 + [p.name for p in everyone].index(node))]
        for bug in bugs:
            argv += ["--bug", bug]
        argv += extra
        return argv

    def environment(self, node: str | None = None) -> dict[str, str]:
        """The environment of a process: libfaketime's (with the ``clock`` nemesis) for data nodes and the
        controller, never for lease store members (``node`` names the process; None: a data node)."""
        env = {"PYTHONPATH": INSTALL_DIR, "PYTHONUNBUFFERED": "1"}
        if self.faketime is not None and node not in self.store_members():
            env.update(self.faketime.environment())
        return env

    def daemon(self, deployment: Deployment, node: str) -> Daemon:
        """Process ``node`` as a daemon of its host (``harness.db.daemon``): found through its pid file and
        the harness's record of the process it started, started in :data:`INSTALL_DIR` with
        :meth:`environment`, its output appended to its console file. (The node also writes its own pid
        file, the same pid, and removes it on a clean exit.)"""
        process = self.process(deployment, node)
        return Daemon(
            argv=self.command(deployment, node), pid_file=process.pid_file,
            output_file=process.console_file, cwd=INSTALL_DIR,
            env=self.environment(node), directories=(process.data_dir, LOG_DIR),
            name="the node" if process.kind == NODE else f"the {process.kind} {node}",
        )

    def start(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Start process ``node`` unless it runs; wait until it listens, or raise with the last lines of
        its output. ``remote`` is its host's."""
        self.daemon(deployment, node).start(remote, port=self.process(deployment, node).port,
                                            timeout=self.start_timeout, command_timeout=self.command_timeout,
                                            tail_lines=LOG_TAIL_LINES)

    def is_running(self, deployment: Deployment, node: str, remote: Remote) -> bool:
        return self.daemon(deployment, node).running(remote, timeout=self.command_timeout)

    def kill(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """SIGKILL (a stopped process dies too) and wait until it is gone. A dead process stays dead."""
        self.daemon(deployment, node).kill(remote, wait=self.stop_timeout)

    def stop(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """SIGTERM (after SIGCONT, so a paused process can act on it); SIGKILL if it outlives stop_timeout."""
        self.daemon(deployment, node).stop(remote, wait=self.stop_timeout)

    def pause(self, deployment: Deployment, node: str, remote: Remote) -> None:
        self.daemon(deployment, node).pause(remote, wait=self.stop_timeout)

    def resume(self, deployment: Deployment, node: str, remote: Remote) -> None:
        self.daemon(deployment, node).resume(remote)

    # -- observation ----------------------------------------------------------------------------------

    @property
    def workloads(self) -> tuple[str, ...]:
        """The workloads ``ClusterWorkloadClient`` runs (``harness.db.Clients``): every registered one whose
        operations it runs (``ClusterWorkloadClient.operations``)."""
        return workloads_for(ClusterWorkloadClient.operations)

    async def open_client(self, deployment: Deployment, process: int, timeout: float) -> ClusterWorkloadClient:
        """A new client for one logical process, with connections of its own to every data node."""
        return ClusterWorkloadClient(Client(self.client_nodes(deployment), timeout=timeout), timeout=timeout)

    def client_nodes(self, deployment: Deployment) -> dict[str, tuple[str, int]]:
        """Where the controller's clients reach each data node (never the controller or the store):
        ``cluster.client.Client``'s ``nodes``."""
        return {node: (deployment.client_hosts[node], PORT) for node in deployment.nodes}

    async def status(self, deployment: Deployment, node: str, timeout: float) -> dict[str, Any]:
        """The process's own view through the client's ``status`` request (a fresh connection each time, so
        a paused process's stuck connection never delays the next poll). The controller answers
        ``role: "controller"``; the run polls data nodes only."""
        process = self.process(deployment, node)
        address = (deployment.client_hosts[process.host], process.port)
        async with Client({node: address}, timeout=timeout) as client:
            return status_of(await client.status(node, timeout=timeout))

    def simulate(self, nodes: Sequence[str], seed: int) -> Any:
        """This cluster in the deterministic simulator (``harness.db.Simulation``): the same processes,
        modes, bugs and node settings, driven in virtual time (``adapters.cluster.sim``)."""
        from adapters.cluster.sim import SimulatedCluster, WorldConfig

        core = dict(self.core)
        fsync = core.pop("fsync", "always")
        config = WorldConfig(nodes=len(nodes), mode=self.mode, bugs=self.bugs, fsync=fsync, core=core)
        return SimulatedCluster(config, seed)

    def faketime_control_file(self, deployment: Deployment, node: str) -> str:
        if self.faketime is None:
            raise RuntimeError("this ClusterDB runs its nodes without libfaketime (pass faketime=)")
        return self.faketime.control_file
