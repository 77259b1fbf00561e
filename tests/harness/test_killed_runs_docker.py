"""A ``harness run`` process stopped from outside, as a CI runner stops a job that ran out of time.

SIGTERM (then SIGHUP during teardown) leaves nothing of the run on the engine and a stored run whose
``results.json`` says it was interrupted. SIGKILL leaves its faulted containers; ``harness clean``
then removes exactly those (collecting the journals first, also from a container the engine stopped)
while a second, live run goes on untouched and ends valid. The runs are real subprocesses of the installed command; their run ids are theirs, so
each test removes what it finds of them at the end, whatever happened.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker.client import DockerClient

from harness.platforms.docker import LABEL_RUN, remove_run

pytestmark = pytest.mark.docker

HARNESS = str(Path(sys.executable).with_name("harness"))
"""The installed command, as a CI job runs it."""
SHORT_RUN = ("--db", "cluster", "--nodes", "3", "--concurrency", "3", "--no-live", "--analysis", "direct")


def _harness(store: Path, *argv: str, log: Path) -> subprocess.Popen:
    with log.open("w") as output:
        return subprocess.Popen([HARNESS, *argv, "--store", str(store)],
                                stdout=output, stderr=subprocess.STDOUT)


def _wait_for(what: str, condition, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s:.0f} s for {what}")
        time.sleep(0.2)


def _run_dir(store: Path, process: subprocess.Popen) -> Path:
    """The run directory of the only run in ``store`` once its platform is up (test.json names it)."""

    def platform_up() -> bool:
        assert process.poll() is None, f"harness run ended early with {process.returncode}"
        return any("platform" in json.loads(p.read_text()) for p in store.glob("*/*/test.json"))

    _wait_for("the run's platform", platform_up)
    return next(p.parent for p in store.glob("*/*/test.json"))


def _history_shows(run_dir: Path, *needles: str) -> bool:
    history = run_dir / "history.jsonl"
    text = history.read_text() if history.exists() else ""
    return all(needle in text for needle in needles)


def _objects(engine: DockerClient, run_id: str) -> list[str]:
    label = {"label": f"{LABEL_RUN}={run_id}"}
    return sorted([c.name for c in engine.containers.list(all=True, filters=label)]
                  + [n.name for n in engine.networks.list(filters=label)])


@pytest.fixture
def processes(docker_engine: DockerClient) -> Iterator[list[tuple[subprocess.Popen, Path]]]:
    """(process, store) of every ``harness run`` a test starts: killed and cleaned up afterwards."""
    started: list[tuple[subprocess.Popen, Path]] = []
    yield started
    for process, store in started:
        if process.poll() is None:
            process.kill()
            process.wait()
        for test_json in store.glob("*/*/test.json"):
            run_id = (json.loads(test_json.read_text()).get("platform") or {}).get("run_id")
            if run_id:
                remove_run(docker_engine, run_id)


def test_sigterm_tears_the_run_down_and_stores_it_as_interrupted(docker_engine, processes, tmp_path) -> None:
    store, log = tmp_path / "store", tmp_path / "run.log"
    run = _harness(store, "run", *SHORT_RUN, "--time-limit", "60", "--nemesis", "partition,pause",
                   "--nemesis-interval", "1", "--seed", "11", log=log)
    processes.append((run, store))
    run_dir = _run_dir(store, run)
    run_id = json.loads((run_dir / "test.json").read_text())["platform"]["run_id"]
    # Stop it while faults are in effect: a partition and a pause have been applied.
    _wait_for("a partition and a pause", lambda: _history_shows(run_dir, '"f":"partition"', '"f":"pause"'))
    assert len(_objects(docker_engine, run_id)) == 4

    run.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    if run.poll() is None:
        run.send_signal(signal.SIGHUP)  # a second signal, during teardown: it must not abandon it
    assert run.wait(timeout=120) == 2, log.read_text()

    output = log.read_text()
    assert "Traceback" not in output
    assert _objects(docker_engine, run_id) == []
    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] == "unknown" and results["error"] == "interrupted (SIGTERM)"
    assert results["interrupted"]["summary"].startswith("the run was interrupted (SIGTERM) at ")
    assert results["checkers"]["durability"]["summary"] == results["interrupted"]["summary"]
    end = json.loads((run_dir / "test.json").read_text())["end"]
    assert (end["how"], end["cause"]) == ("interrupted", "SIGTERM") and end["last_event_s"] > 0
    assert all((run_dir / "nodes" / node / "journal.jsonl").stat().st_size > 0 for node in ("n1", "n2", "n3"))


def test_harness_clean_removes_a_sigkilled_run_and_leaves_a_live_one_running(
    docker_engine, processes, tmp_path
) -> None:
    store = tmp_path / "store"
    killed = _harness(store / "a", "run", *SHORT_RUN, "--time-limit", "60", "--nemesis", "partition,pause",
                      "--nemesis-interval", "1", "--seed", "12", log=tmp_path / "a.log")
    processes.append((killed, store / "a"))
    killed_dir = _run_dir(store / "a", killed)
    killed_id = json.loads((killed_dir / "test.json").read_text())["platform"]["run_id"]
    _wait_for("a partition and a pause", lambda: _history_shows(killed_dir, '"f":"partition"', '"f":"pause"'))
    killed.kill()
    killed.wait()
    assert len(_objects(docker_engine, killed_id)) == 4  # SIGKILL: everything is left, faults in effect
    # An engine or machine restart stops containers: n1's stops here (its files remain, nothing runs).
    docker_engine.containers.get(f"{killed_id}-n1").stop(timeout=1)

    # Long enough to outlast `harness clean` on a loaded machine (10 s did not: its containers were gone
    # by the time clean had started n1 again, collected and removed the killed run, 2 of 11 at load 8-10).
    live = _harness(store / "b", "run", *SHORT_RUN, "--time-limit", "40", "--nemesis", "none", "--seed", "13",
                    log=tmp_path / "b.log")
    processes.append((live, store / "b"))
    live_dir = _run_dir(store / "b", live)
    live_id = json.loads((live_dir / "test.json").read_text())["platform"]["run_id"]
    _wait_for("the live run's first operations", lambda: _history_shows(live_dir, '"type":"ok"'))

    cleaned = subprocess.run([HARNESS, "clean", "--store", str(store / "a")],
                             capture_output=True, text=True, timeout=300)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert f"cleaned {killed_id} (run directory {killed_dir.resolve()})" in cleaned.stdout
    assert f"kept {live_id}: its controller (pid {live.pid} on " in cleaned.stdout
    assert "started its stopped containers (n1) again to collect them" in cleaned.stdout
    assert _objects(docker_engine, killed_id) == []
    assert len(_objects(docker_engine, live_id)) == 4 and live.poll() is None
    # The killed run's journals were collected before its containers went, and it is marked killed.
    assert all((killed_dir / "nodes" / node / "journal.jsonl").stat().st_size > 0 for node in ("n1", "n2", "n3"))
    end = json.loads((killed_dir / "test.json").read_text())["end"]
    assert end["how"] == "killed" and end["detected_by"] == "harness clean" and end["last_event_s"] > 0

    assert live.wait(timeout=180) == 0, (tmp_path / "b.log").read_text()
    live_output = (tmp_path / "b.log").read_text()
    assert "warning: " in live_output and killed_id in live_output and "run `harness clean`" in live_output
    assert json.loads((live_dir / "results.json").read_text())["valid"] is True
    assert _objects(docker_engine, live_id) == []
