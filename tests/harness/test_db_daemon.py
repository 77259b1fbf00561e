"""harness.db.daemon: a DB adapter's process started, found, signalled and stopped through its pid file, for
real, on this machine's shell (the same scripts run in a container or on an SSH host)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.db import NodeStartError
from harness.db.daemon import Daemon, DaemonError
from tests.local_remote import LocalRemote

pytestmark = pytest.mark.slow

# A server that records its environment and working directory, then listens; the port comes last.
SERVER = """
import json, os, socket, sys, time
port = int(sys.argv[-1])
json.dump({"env": dict(os.environ), "cwd": os.getcwd()}, open("seen.json", "w"))
if os.environ.get("EXIT_AT_ONCE"):
    print("refusing to start: bad flag", flush=True)
    sys.exit(2)
if os.environ.get("NEVER_LISTEN"):
    time.sleep(60)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen()
print("listening", flush=True)
while True:
    time.sleep(1)
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture()
def remote() -> LocalRemote:
    return LocalRemote()


@pytest.fixture()
def make(tmp_path: Path) -> Iterator:
    """Daemons of the test server in ``tmp_path``, each killed afterwards whatever the test did."""
    made: list[Daemon] = []
    (tmp_path / "server.py").write_text(SERVER)

    def daemon(name: str = "n1", env: dict[str, str] | None = None, port: int | None = None) -> Daemon:
        port = port or free_port()
        d = Daemon(
            argv=(sys.executable, str(tmp_path / "server.py"), "--id", name, str(port)),
            identity=f"{tmp_path}/server.py --id {name}",
            pid_file=str(tmp_path / "run" / f"{name}.pid"),
            output_file=str(tmp_path / "log" / f"{name}.out"),
            cwd=str(tmp_path / "work"),
            env=env or {},
            directories=(str(tmp_path / "data"),),
            name=f"server {name}",
        )
        made.append(d)
        return d

    yield daemon
    for d in made:
        d.kill(LocalRemote())


def port_of(daemon: Daemon) -> int:
    return int(daemon.argv[-1])


def pid_of(daemon: Daemon) -> int:
    return int(Path(daemon.pid_file).read_text())


def state_of(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_start_waits_until_it_listens_and_a_second_start_leaves_it_alone(make, remote, tmp_path) -> None:
    daemon = make()
    assert daemon.start(remote, port=port_of(daemon), timeout=20) is True
    socket.create_connection(("127.0.0.1", port_of(daemon)), timeout=2).close()
    assert daemon.running(remote)
    pid = pid_of(daemon)
    assert daemon.start(remote, port=port_of(daemon), timeout=20) is False
    assert pid_of(daemon) == pid
    assert (tmp_path / "data").is_dir()
    output = Path(daemon.output_file).read_text()
    assert "starting" in output.splitlines()[0] and "listening" in output


def test_the_environment_is_added_faketime_is_not_inherited_and_the_cwd_is_kept(make, remote, tmp_path) -> None:
    daemon = make(env={"PYTHONUNBUFFERED": "1", "ODD": "a b 'c' $HOME"})
    before = os.environ.get("FAKETIME")
    os.environ["FAKETIME"] = "+1d"
    try:
        daemon.start(remote, port=port_of(daemon), timeout=20)
    finally:
        if before is None:
            del os.environ["FAKETIME"]
        else:
            os.environ["FAKETIME"] = before
    seen = __import__("json").loads((tmp_path / "work" / "seen.json").read_text())
    assert seen["env"]["ODD"] == "a b 'c' $HOME"
    assert "FAKETIME" not in seen["env"]
    assert seen["cwd"] == str(tmp_path / "work")


def test_a_process_that_exits_while_starting_is_an_error_with_its_output(make, remote) -> None:
    daemon = make(env={"EXIT_AT_ONCE": "1"})
    with pytest.raises(NodeStartError) as error:
        daemon.start(remote, port=port_of(daemon), timeout=20)
    message = str(error.value)
    assert "server n1 did not start (the process exited)" in message
    assert "refusing to start: bad flag" in message
    assert not daemon.running(remote)


def test_a_process_that_never_listens_is_an_error_after_the_timeout(make, remote) -> None:
    daemon = make(env={"NEVER_LISTEN": "1"})
    began = time.monotonic()
    with pytest.raises(NodeStartError, match=f"not listening on port {port_of(daemon)} after 1 s"):
        daemon.start(remote, port=port_of(daemon), timeout=1)
    assert time.monotonic() - began < 15
    assert daemon.running(remote)  # the caller decides: it kills it (the fixture does)


def test_pause_waits_for_the_stopped_state_resume_and_kill_wait_too(make, remote) -> None:
    daemon = make()
    daemon.start(remote, port=port_of(daemon), timeout=20)
    pid = pid_of(daemon)
    daemon.pause(remote)
    assert state_of(pid) == "T"
    daemon.resume(remote)
    assert state_of(pid) != "T"
    daemon.pause(remote)
    daemon.kill(remote)  # a paused process dies too
    assert not daemon.running(remote)
    assert not Path(f"/proc/{pid}").exists() or state_of(pid) in ("Z", "X")
    daemon.kill(remote)  # a dead one stays dead, without error
    with pytest.raises(DaemonError, match="server n1 is not running, so it cannot take SIGSTOP"):
        daemon.pause(remote)
    assert daemon.start(remote, port=port_of(daemon), timeout=20) is True


def test_stop_ends_a_paused_process(make, remote) -> None:
    daemon = make()
    daemon.start(remote, port=port_of(daemon), timeout=20)
    daemon.pause(remote)
    daemon.stop(remote)
    assert not daemon.running(remote)


def test_a_stale_or_recycled_pid_is_never_signalled(make, remote) -> None:
    daemon = make("n2")
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        Path(daemon.pid_file).parent.mkdir(parents=True, exist_ok=True)
        Path(daemon.pid_file).write_text(f"{bystander.pid}\n")
        assert not daemon.running(remote)
        daemon.kill(remote)
        with pytest.raises(DaemonError):
            daemon.pause(remote)
        assert bystander.poll() is None and state_of(bystander.pid) != "T"
    finally:
        bystander.send_signal(signal.SIGKILL)
        bystander.wait()


def test_one_daemon_per_identity_on_a_shared_host(make, remote) -> None:
    one, other = make("n1"), make("n11")
    one.start(remote, port=port_of(one), timeout=20)
    assert not other.running(remote)  # whole arguments: "n1" is not "n11"
    other.start(remote, port=port_of(other), timeout=20)
    one.kill(remote)
    assert other.running(remote) and not one.running(remote)


def test_without_a_port_start_returns_once_it_runs(make, remote) -> None:
    daemon = make()
    assert daemon.start(remote, timeout=20) is True
    assert daemon.running(remote)


def test_bad_descriptions_are_refused() -> None:
    with pytest.raises(ValueError, match="command line"):
        Daemon(argv=(), identity="x", pid_file="/p", output_file="/o")
    with pytest.raises(ValueError, match="identity"):
        Daemon(argv=("x",), identity=" ", pid_file="/p", output_file="/o")
    with pytest.raises(ValueError, match="environment variable name"):
        Daemon(argv=("x",), identity="x", pid_file="/p", output_file="/o", env={"A B": "1"})
    with pytest.raises(ValueError, match="signal name"):
        Daemon(argv=("x",), identity="x", pid_file="/p", output_file="/o").signal_script("KILL; rm -rf /", wait=1)
