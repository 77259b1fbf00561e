"""A real Spark standalone cluster on this machine, for the ``spark`` tests that run against one.

:func:`start_standalone` starts a master and workers from the installed PySpark's own ``spark-class``
(``org.apache.spark.deploy.master.Master`` and ``...worker.Worker``), all on 127.0.0.1 with ports the
kernel picks (``--port 0``: two test sessions never collide), logs and work directories in a temporary
directory, and waits until every worker has registered. :meth:`StandaloneCluster.stop` stops them all
(SIGTERM to each process group, SIGKILL after a grace period) and is safe to call twice; the fixture
calls it on every exit path.

These are the commands docs/analysis.md ("Running on your Spark cluster") gives a user, with the
ephemeral ports a test needs.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# Seconds to wait for the master to listen and for each worker to register (JVM start-up on a loaded
# 2-core machine takes tens of seconds).
START_TIMEOUT_S = 180.0
STOP_GRACE_S = 20.0
_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_REGISTERED = "Successfully registered with master"


def spark_home() -> Path:
    """The installed PySpark's directory: it carries ``bin/spark-class`` and the jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class StandaloneCluster:
    """A running master and its workers; ``master_url`` is what ``--spark-master`` takes."""

    directory: Path
    master_url: str = ""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def worker_dirs(self) -> list[Path]:
        return sorted(self.directory.glob("worker-*/work"))

    def log_text(self) -> str:
        """Every process's log, for a failing test's message."""
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in self.logs)

    def stop(self) -> None:
        """Stop every process this cluster started; idempotent."""
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def alive(self) -> list[int]:
        return [p.pid for p in self.processes if p.poll() is None]


def _environment(directory: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_DIRS=str(directory / "local"),
        # No REST submission server (it would take the fixed port 6066) and no web UI on the workers.
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        SPARK_WORKER_OPTS="-Dspark.worker.ui.enabled=false",
        PYSPARK_PYTHON=sys.executable,
    )
    return env


def _start(directory: Path, name: str, arguments: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
    log = directory / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *arguments],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_environment(directory),
            cwd=directory,
            start_new_session=True,  # its own process group: stop() signals the JVM and its launcher
        )
    return process, log


def _wait_for(cluster: StandaloneCluster, log: Path, process: subprocess.Popen[bytes], pattern: re.Pattern[str] | str) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        found = pattern.search(text) if isinstance(pattern, re.Pattern) else (pattern if pattern in text else None)
        if found:
            return found.group(1) if isinstance(found, re.Match) else found
        if process.poll() is not None:
            break
        time.sleep(0.5)
    raise RuntimeError(f"{log.name}: no {pattern!r} within {START_TIMEOUT_S:.0f} s\n{cluster.log_text()}")


def start_standalone(directory: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> StandaloneCluster:
    """Start a master and ``workers`` workers (``cores`` and ``memory`` each) under ``directory``.

    On any failure the processes already started are stopped before the error propagates.
    """
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "local").mkdir(exist_ok=True)
    cluster = StandaloneCluster(directory=directory)
    try:
        master, log = _start(
            directory, "master", [MASTER_CLASS, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0"]
        )
        cluster.processes.append(master)
        cluster.logs.append(log)
        cluster.master_url = _wait_for(cluster, log, master, _MASTER_URL)
        started = []
        for number in range(1, workers + 1):
            work = directory / f"worker-{number}" / "work"
            work.mkdir(parents=True)
            worker, log = _start(
                directory,
                f"worker-{number}",
                [
                    WORKER_CLASS,
                    "--host", "127.0.0.1",
                    "--port", "0",
                    "--webui-port", "0",
                    "--cores", str(cores),
                    "--memory", memory,
                    "--work-dir", str(work),
                    cluster.master_url,
                ],
            )
            cluster.processes.append(worker)
            cluster.logs.append(log)
            started.append((worker, log))
        for worker, log in started:
            _wait_for(cluster, log, worker, _REGISTERED)
    except BaseException:
        cluster.stop()
        raise
    return cluster
