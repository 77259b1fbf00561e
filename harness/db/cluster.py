"""The DB adapter for ``cluster``, the system under test that ships with the harness.

Installation is Jepsen's: the controller packs the local ``cluster`` package into a tarball, uploads it to
each node and unpacks it under :data:`INSTALL_DIR`; the node needs nothing but ``python3``. The node
process is started in the background as

    python3 -m cluster.node --id n1 --listen 0.0.0.0:7000 --peers n2=10.55.0.12:7000,...
        --data-dir /var/lib/chaos/data --mode blazingmq [--bug NAME ...] --pid-file /var/run/chaos/node.pid

with its log in :data:`LOG_FILE` and its stdout/stderr (tracebacks, configuration errors) appended to
:data:`CONSOLE_FILE`; signals go to the pid in :data:`PID_FILE` (stop: SIGTERM,
kill: SIGKILL, pause: SIGSTOP, resume: SIGCONT). A pid counts as the node only while
``/proc/<pid>/cmdline`` names ``cluster.node`` and the process is not a zombie, so a stale pid file or a
recycled pid is never signalled. Under the ``clock`` nemesis the process runs under libfaketime with
the environment of ``nemesis.shell.FakeTime`` (ENVIRONMENT.md's recipe); the nemesis installs the
library and rewrites the control file.

The node writes its journal to ``<data-dir>/journal.jsonl``; :meth:`ClusterDB.log_files` names it and the
log for collection. Teardown wipes the data, the log, the pid file and the installation.
"""

from __future__ import annotations

import hashlib
import io
import shlex
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cluster.client import CONNECTION_REFUSED, Client
from harness.db import Deployment, NodeStartError, StatusError

if TYPE_CHECKING:
    from nemesis.remote import Remote
    from nemesis.shell import FakeTime

PORT = 7000
INSTALL_DIR = "/opt/chaos"
DATA_DIR = "/var/lib/chaos/data"
LOG_DIR = "/var/log/chaos"
LOG_FILE = f"{LOG_DIR}/node.log"
CONSOLE_FILE = f"{LOG_DIR}/console.log"
RUN_DIR = "/var/run/chaos"
PID_FILE = f"{RUN_DIR}/node.pid"
TARBALL = "/tmp/chaos-cluster.tar.gz"
JOURNAL_FILE = f"{DATA_DIR}/journal.jsonl"
LOG_TAIL_LINES = 20
MODULE = "cluster.node"

# A shell function that prints the node's pid if its process is alive and really the node (not a zombie,
# not a recycled pid), and fails otherwise. Every command below starts with it.
_NODE_PID = f"""node_pid() {{
  pid=$(cat {PID_FILE} 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -r /proc/$pid/cmdline ] || return 1
  tr '\\0' ' ' < /proc/$pid/cmdline | grep -q '{MODULE}' || return 1
  state=$(ps -o stat= -p "$pid" 2>/dev/null) || return 1
  case "$state" in Z*|'') return 1 ;; esac
  echo "$pid"
}}
"""


def package_tarball(package_dir: Path) -> bytes:
    """A reproducible ``tar.gz`` of the ``cluster`` package (sources only, fixed owners and times)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
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


class ClusterDB:
    """``cluster`` on one node per host: DB + Process + Pause + Status + LogFiles (+ ClockSkew with
    libfaketime). ``mode`` and ``bugs`` pass through to every node; ``node_args`` are extra options for
    ``cluster.node`` (timings, fsync policy). With ``seed`` each node's RNG gets ``--seed`` derived from
    it, so the nodes' random election waits repeat with the run's seed."""

    name = "cluster"

    def __init__(
        self,
        mode: str = "blazingmq",
        bugs: Sequence[str] = (),
        *,
        node_args: Sequence[str] = (),
        faketime: FakeTime | None = None,
        seed: int | None = None,
        start_timeout: float = 20.0,
        stop_timeout: float = 10.0,
        command_timeout: float = 30.0,
        package_dir: Path | None = None,
        python: str = "python3",
    ) -> None:
        self.mode = mode
        self.bugs = tuple(bugs)
        self.node_args = tuple(node_args)
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
            self._tarball = package_tarball(self.package_dir)
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
            f"set -e; mkdir -p {INSTALL_DIR} {DATA_DIR} {LOG_DIR} {RUN_DIR}; rm -rf {INSTALL_DIR}/cluster; "
            f"tar -xzf {TARBALL} -C {INSTALL_DIR}; rm -f {TARBALL}; "
            f"{self.python} -c 'import sys; sys.exit(sys.version_info < (3, 11))' "
            f"|| {{ echo 'cluster needs python3 >= 3.11 on the node' >&2; exit 1; }}",
            timeout=self.command_timeout,
        )

    def setup(self, deployment: Deployment, node: str, remote: Remote) -> None:
        self.install(deployment, node, remote)
        self.start(deployment, node, remote)

    def teardown(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Kill the node (whatever its state) and wipe its data, log, pid file and installation."""
        self.kill(deployment, node, remote)
        faketime = f"{self.faketime.directory} {self.faketime.library}" if self.faketime is not None else ""
        remote.run(
            f"rm -rf {DATA_DIR} {LOG_DIR} {RUN_DIR} {INSTALL_DIR} {TARBALL} {faketime}",
            timeout=self.command_timeout,
        )

    # -- the process ----------------------------------------------------------------------------------

    def command(self, deployment: Deployment, node: str) -> list[str]:
        """The node's argv (without the environment)."""
        peers = ",".join(
            f"{peer}={deployment.peer_hosts[peer]}:{PORT}" for peer in deployment.nodes if peer != node
        )
        argv = [
            self.python, "-m", MODULE,
            "--id", node,
            "--listen", f"0.0.0.0:{PORT}",
            "--peers", peers,
            "--data-dir", DATA_DIR,
            "--mode", self.mode,
            "--pid-file", PID_FILE,
            "--log-file", LOG_FILE,
        ]
        if self.seed is not None:
            argv += ["--seed", str(self.seed * 1000 + deployment.nodes.index(node))]
        for bug in self.bugs:
            argv += ["--bug", bug]
        argv += list(self.node_args)
        return argv

    def environment(self) -> dict[str, str]:
        env = {"PYTHONPATH": INSTALL_DIR, "PYTHONUNBUFFERED": "1"}
        if self.faketime is not None:
            env.update(self.faketime.environment())
        return env

    def start(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """Start the node unless it runs; wait until it listens, or raise with the last lines of its log."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.environment().items())
        argv = " ".join(shlex.quote(a) for a in self.command(deployment, node))
        started = remote.run(
            _NODE_PID
            + f"if node_pid >/dev/null; then echo running; exit 0; fi\n"
            f"mkdir -p {DATA_DIR} {LOG_DIR} {RUN_DIR}\n"
            f"rm -f {PID_FILE}\n"
            f"echo \"=== $(date -u +%FT%TZ) starting {node}\" >> {CONSOLE_FILE}\n"
            f"cd {INSTALL_DIR} && env -u FAKETIME {env} nohup {argv} >> {CONSOLE_FILE} 2>&1 < /dev/null &\n"
            f"echo $! > {PID_FILE}.launch\n"
            f"echo started",
            timeout=self.command_timeout,
        )
        if started.stdout.strip() == "running":
            return
        waited = remote.run(
            f"{self.python} - <<'EOF'\n{_WAIT_FOR_NODE.format(pid_file=PID_FILE, port=PORT, timeout=self.start_timeout)}\nEOF",
            timeout=self.start_timeout + self.command_timeout,
            check=False,
        )
        if waited.exit_code != 0:
            reason = waited.stdout.strip() or waited.stderr.strip() or f"exit code {waited.exit_code}"
            raise NodeStartError(f"{node}: the node did not start ({reason}); {self._log_tail(remote)}")

    def _log_tail(self, remote: Remote) -> str:
        try:
            tail = remote.run(f"tail -n {LOG_TAIL_LINES} {CONSOLE_FILE}", timeout=self.command_timeout, check=False)
        except Exception as exc:  # noqa: BLE001 - the tail is a courtesy; its absence must not hide the cause
            return f"its output {CONSOLE_FILE} could not be read: {exc}"
        return f"last lines of {CONSOLE_FILE}:\n{tail.stdout.rstrip() or '(empty)'}"

    def is_running(self, deployment: Deployment, node: str, remote: Remote) -> bool:
        result = remote.run(_NODE_PID + "node_pid", timeout=self.command_timeout, check=False)
        return result.exit_code == 0

    def _signal(self, remote: Remote, signal: str, *, wait_gone: bool = False, missing_ok: bool) -> str:
        """Send ``signal`` to the node; ``"sent"`` or ``"not running"`` (an error unless ``missing_ok``)."""
        wait = ""
        if wait_gone:
            steps = int(self.stop_timeout * 10)
            wait = f"i=0; while node_pid >/dev/null && [ $i -lt {steps} ]; do sleep 0.1; i=$((i+1)); done\n"
            wait += "if node_pid >/dev/null; then echo 'still running' >&2; exit 3; fi\n"
        script = (
            _NODE_PID
            + "pid=$(node_pid) || { echo 'not running'; exit 0; }\n"
            + f"kill -{signal} \"$pid\"\n"
            + wait
            + "echo sent"
        )
        result = remote.run(script, timeout=self.stop_timeout + self.command_timeout)
        outcome = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
        if outcome == "not running" and not missing_ok:
            raise RuntimeError(f"{remote.name}: the node process is not running, so it cannot take SIG{signal}")
        return outcome

    def kill(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """SIGKILL (a stopped process dies too) and wait until it is gone. A dead node stays dead."""
        self._signal(remote, "KILL", wait_gone=True, missing_ok=True)

    def stop(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """SIGTERM (after SIGCONT, so a paused node can act on it); SIGKILL if it outlives stop_timeout."""
        self._signal(remote, "CONT", missing_ok=True)
        try:
            self._signal(remote, "TERM", wait_gone=True, missing_ok=True)
        except Exception:  # noqa: BLE001 - a node that ignores SIGTERM is killed
            self.kill(deployment, node, remote)

    def pause(self, deployment: Deployment, node: str, remote: Remote) -> None:
        self._signal(remote, "STOP", missing_ok=False)

    def resume(self, deployment: Deployment, node: str, remote: Remote) -> None:
        self._signal(remote, "CONT", missing_ok=False)

    # -- observation ----------------------------------------------------------------------------------

    def client_nodes(self, deployment: Deployment) -> dict[str, tuple[str, int]]:
        """Where the controller's clients reach each node: ``cluster.client.Client``'s ``nodes``."""
        return {node: (deployment.client_hosts[node], PORT) for node in deployment.nodes}

    async def status(self, deployment: Deployment, node: str, timeout: float) -> dict[str, Any]:
        """The node's own view through the client's ``status`` request (a fresh connection each time, so
        a paused node's stuck connection never delays the next poll)."""
        async with Client({node: (deployment.client_hosts[node], PORT)}, timeout=timeout) as client:
            result = await client.status(node, timeout=timeout)
        if result.type == "ok" and isinstance(result.value, Mapping):
            return dict(result.value)
        if result.type == "ok":
            raise StatusError(f"status reply is not an object: {result.value!r}", definite=True)
        reason = result.error if not result.message else f"{result.error}: {result.message}"
        if result.error == CONNECTION_REFUSED:
            reason = "connection refused"
        raise StatusError(reason or "no status", definite=result.type == "fail")

    def log_files(self, deployment: Deployment, node: str) -> dict[str, str]:
        return {JOURNAL_FILE: "journal.jsonl", LOG_FILE: "node.log", CONSOLE_FILE: "console.log"}

    def faketime_control_file(self, deployment: Deployment, node: str) -> str:
        if self.faketime is None:
            raise RuntimeError("this ClusterDB runs its nodes without libfaketime (pass faketime=)")
        return self.faketime.control_file


# Runs on the node: wait until the started process listens on its port; exit 0 when it does, 3 when the
# process died, 4 on timeout. The node writes its own pid file once it runs; the shell's ``$!`` is the
# fallback while it has not yet.
_WAIT_FOR_NODE = """
import os, socket, sys, time
deadline = time.monotonic() + {timeout}
def pid():
    for name in ({pid_file!r}, {pid_file!r} + ".launch"):
        try:
            return int(open(name).read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return None
def alive(p):
    try:
        state = open(f"/proc/{{p}}/stat").read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
while True:
    p = pid()
    if p is None or not alive(p):
        print("the process exited")
        sys.exit(3)
    try:
        socket.create_connection(("127.0.0.1", {port}), 0.5).close()
        listening = True
    except OSError:
        listening = False
    if listening:
        try:
            if os.path.exists({pid_file!r}):
                os.remove({pid_file!r} + ".launch")
            else:
                os.replace({pid_file!r} + ".launch", {pid_file!r})
        except OSError:
            pass
        sys.exit(0)
    if time.monotonic() > deadline:
        print("not listening on port {port} after {timeout} s")
        sys.exit(4)
    time.sleep(0.1)
"""
