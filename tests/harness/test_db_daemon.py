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
time.sleep(float(os.environ.get("LISTEN_AFTER", "0")))
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


def wait_listening(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on port {port}"
            time.sleep(0.05)


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


def start_time_of(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def record(daemon: Daemon, pid: int, start: str, exe: str = "-") -> None:
    """Write the daemon's record of its process as :meth:`Daemon.start` does, and its pid file."""
    Path(daemon.pid_file).parent.mkdir(parents=True, exist_ok=True)
    Path(daemon.pid_file).write_text(f"{pid}\n")
    Path(daemon.record_file).write_text(f"{pid} {start} {boot_id()} {exe}\n")


def test_a_recycled_pid_whose_command_line_is_the_daemons_is_never_signalled(make, remote) -> None:
    """The pid recorded for the daemon now belongs to another process with the very same command line (a
    container restart began its pid namespace again): the start time tells them apart."""
    daemon = make("n2")
    daemon.start(remote, port=port_of(daemon), timeout=20)
    old = pid_of(daemon)
    old_start = start_time_of(old)
    daemon.kill(remote)
    twin = subprocess.Popen(list(daemon.argv), cwd=str(Path(daemon.pid_file).parents[1]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port_of(daemon))
        assert Path(f"/proc/{twin.pid}/cmdline").read_bytes().split(b"\0")[:-1] == [
            a.encode() for a in daemon.argv]
        record(daemon, twin.pid, old_start, os.path.realpath(sys.executable))
        assert not daemon.running(remote)
        daemon.kill(remote)
        with pytest.raises(DaemonError, match="not running"):
            daemon.pause(remote)
        assert twin.poll() is None and state_of(twin.pid) != "T"
        assert not Path(daemon.record_file).exists()  # stale: removed
    finally:
        twin.send_signal(signal.SIGKILL)
        twin.wait()


def test_a_record_naming_the_checking_shell_itself_is_not_the_daemon(make, remote) -> None:
    """The self-match: the recorded pid is the pid of the very shell that checks it, with that shell's own
    start time and executable. The shell must not take itself for the daemon and SIGKILL itself."""
    daemon = make("n3")
    Path(daemon.pid_file).parent.mkdir(parents=True, exist_ok=True)
    record_self = (
        'set -- $(cat /proc/$$/stat | sed "s/.*) //")\n'
        f'echo "$$ ${{20}} $(cat /proc/sys/kernel/random/boot_id) $(readlink /proc/$$/exe)" '
        f'> {daemon.record_file}\n'
        f"echo $$ > {daemon.pid_file}\n"
    )
    for script in (daemon.signal_script("KILL", wait=1), daemon.signal_script("STOP", wait=1),
                   daemon.start_script(port=port_of(daemon), timeout=20)):
        result = remote.run(record_self + script)
        assert result.exit_code == 0, result
        assert result.stdout.split()[-1] in ("running", "started", "sent", "running") or "not running" in result.stdout
        assert "not running" in result.stdout or "started" in result.stdout, result.stdout
    assert daemon.running(remote)  # the last script started the real one


def test_a_process_that_rewrites_its_title_is_still_found(tmp_path, remote) -> None:
    """A server that changes its command line once up (setproctitle: Redis, Postgres, nginx) is still
    the daemon: it is known by its pid, start time and executable."""
    port = free_port()
    server = ("use Socket; socket(S, PF_INET, SOCK_STREAM, 0) or die; setsockopt(S, SOL_SOCKET, SO_REUSEADDR, 1);"
              f" bind(S, sockaddr_in({port}, inet_aton('127.0.0.1'))) or die; listen(S, 5) or die;"
              " $0 = 'renamed-server: accepting'; sleep 60 while 1;")
    daemon = Daemon(argv=("perl", "-e", server), pid_file=str(tmp_path / "p.pid"),
                    output_file=str(tmp_path / "out"), name="the renamed server")
    try:
        daemon.start(remote, port=port, timeout=20)
        pid = pid_of(daemon)
        deadline = time.monotonic() + 10
        while b"renamed-server" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline, "the server did not rename itself"
            time.sleep(0.05)
        assert daemon.running(remote)
        daemon.pause(remote)
        assert state_of(pid) == "T"
        daemon.kill(remote)
        assert not daemon.running(remote)
    finally:
        daemon.kill(remote)


def test_a_start_whose_command_times_out_leaves_the_started_system_running(make, remote, tmp_path) -> None:
    """The remote command that starts the system runs under ``timeout -k``, which signals the command's
    whole process group when it expires; the system was started in a session of its own and lives on."""
    daemon = make("n4", env={"LISTEN_AFTER": "3"})
    script = daemon.start_script(port=port_of(daemon), timeout=20)
    done = subprocess.run(["timeout", "-k", "1", "1", "sh", "-c", script], capture_output=True, text=True)
    assert done.returncode in (124, 137), done
    pid = pid_of(daemon)
    time.sleep(3.5)
    assert daemon.running(remote), "the timeout of the starting command took the system with it"
    socket.create_connection(("127.0.0.1", port_of(daemon)), timeout=5).close()
    assert Path(f"/proc/{pid}").exists()


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
        Daemon(argv=(), pid_file="/p", output_file="/o")
    with pytest.raises(ValueError, match="environment variable name"):
        Daemon(argv=("x",), pid_file="/p", output_file="/o", env={"A B": "1"})
    with pytest.raises(ValueError, match="signal name"):
        Daemon(argv=("x",), pid_file="/p", output_file="/o").signal_script("KILL; rm -rf /", wait=1)
