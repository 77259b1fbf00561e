"""The ssh platform: hosts-file validation (fast), and a real chaos run over SSH against containers' sshd.

The fast tests check that every defect of a hosts file is one line naming the file, the node and what to
do, that an unreachable host or a non-root login is refused before anything is stored, and that the CLI
answers both with exit 254. The `docker` test brings up five node containers, starts nothing but their
sshd, pins their host keys, and runs the same `harness run` as the docker platform does, over SSH.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from checkers.history import load_history, load_journals
from harness.cli import main
from harness.platforms import ssh as ssh_platform
from harness.platforms.docker import LABEL_RUN, DockerPlatform
from harness.platforms.ssh import HostsFileError, SSHHost, SSHPlatform, SSHPlatformError, load_hosts
from harness.remotes.ssh import known_hosts_line
from harness.topology import topology
from nemesis.remote import CommandResult
from tests.harness.node_probes import wait_for_sshd


def _write_key(path: Path, passphrase: bytes | None = None) -> str:
    """Writes a fresh ed25519 private key (OpenSSH format, mode 600); returns its public key line."""
    key = Ed25519PrivateKey.generate()
    encryption = (
        serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
    )
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, encryption))
    path.chmod(0o600)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return public.decode() + f" {path.name}@test\n"


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    """A directory with a client key ``id`` (its public half in ``public``) and a known_hosts pinning the
    key ``host_key.pub`` for 10.0.0.1, .2, .3 and [10.0.0.4]:2222."""
    (tmp_path / "public").write_text(_write_key(tmp_path / "id"))
    host_key = _write_key(tmp_path / "host_key")
    (tmp_path / "host_key.pub").write_text(host_key)
    pins = [known_hosts_line(f"10.0.0.{i}", host_key) for i in (1, 2, 3)]
    pins.append(known_hosts_line("10.0.0.4", host_key, port=2222))
    (tmp_path / "known_hosts").write_text("".join(pins))
    return tmp_path


def _hosts_file(directory: Path, text: str) -> Path:
    path = directory / "hosts.toml"
    path.write_text(text)
    return path


GOOD = """
[defaults]
key = "id"
known_hosts = "known_hosts"

[nodes.n1]
host = "10.0.0.1"

[nodes.n2]
host = "10.0.0.4"
port = 2222
peer_host = "192.168.7.2"

[nodes.n3]
host = "10.0.0.3"
user = "root"
"""


def test_a_hosts_file_applies_defaults_resolves_paths_and_keeps_the_order(keys: Path) -> None:
    hosts = load_hosts(_hosts_file(keys, GOOD))
    assert [host.node for host in hosts] == ["n1", "n2", "n3"]
    assert hosts[1] == SSHHost("n2", "10.0.0.4", 2222, "root", keys / "id", keys / "known_hosts", "192.168.7.2")
    assert (hosts[0].port, hosts[0].peer_host) == (22, "10.0.0.1")  # peer_host defaults to host
    platform = SSHPlatform.from_hosts_file(keys / "hosts.toml", ("n3", "n2"))
    assert platform.nodes == ("n3", "n2")
    assert (platform.address("n2"), platform.peer_host("n2")) == ("10.0.0.4", "192.168.7.2")
    with pytest.raises(KeyError, match="no node 'n1' in the hosts file; its nodes: n3, n2"):
        platform.address("n1")


def _broken(replace: tuple[str, str] | None = None, append: str = "") -> str:
    """GOOD with one text replaced (which must occur in it) and/or lines appended to its last node."""
    assert replace is None or replace[0] in GOOD
    return (GOOD if replace is None else GOOD.replace(*replace)) + append


CASES: dict[str, tuple[str, str]] = {
    "not TOML": ("[nodes.n1\nhost=1", r"hosts\.toml is not valid TOML \(.*line 1.*\); see docs/ssh\.md"),
    "unknown table": (_broken(append="[node.n4]\nhost='x'\n"),
                      r"unknown table\(s\) node; known: defaults, nodes"),
    "no nodes": ("[defaults]\nport = 22\n", r"names no node: add a \[nodes\.n1\] table with a host"),
    "unknown field": (_broken(('user = "root"', 'username = "root"')),
                      r"node n3 has unknown field\(s\) username; known: host, port, user, key, known_hosts, peer_host"),
    "no host": (_broken(('host = "10.0.0.3"', 'peer_host = "10.0.0.3"')),
                r"node n3 has no 'host' \(set it in \[nodes\.n3\] or \[defaults\]\)"),
    "bad port": (_broken(("port = 2222", "port = 70000")),
                 r"node n2: 'port' must be a whole number from 1 to 65535, not 70000"),
    "port as text": (_broken(("port = 2222", 'port = "2222"')),
                     r"node n2: 'port' must be a whole number from 1 to 65535, not '2222'"),
    "empty host": (_broken(('host = "10.0.0.1"', 'host = " "')),
                   r"node n1: 'host' must be a non-empty string, not ' '"),
    "bad name": (_broken(append="[nodes.'n 4']\nhost = '10.0.0.2'\n"),
                 r"node n 4: a node name is 1-63 of"),
    "missing key": (_broken(('key = "id"', 'key = "nope"')),
                    r"node n1: key file .*/nope does not exist: point 'key' at the private key whose public key is "
                    r"in the node's /root/\.ssh/authorized_keys"),
    "public key": (_broken(('key = "id"', 'key = "public"')),
                   r"key file .*/public is not a private key paramiko can load \(that is a public key; point 'key' "
                   r"at the private one\)"),
    "passphrase": (_broken(('key = "id"', 'key = "locked"')),
                   r"key file .*/locked is protected by a passphrase: give the harness a key without one"),
    "no known_hosts": (_broken(('known_hosts = "known_hosts"', 'known_hosts = "nope"')),
                       r"known_hosts file .*/nope does not exist: pin the hosts' keys in it with ssh-keyscan"),
    "not pinned": (_broken(('host = "10.0.0.3"', 'host = "10.0.0.9"')),
                   r"node n3: no host key of 10\.0\.0\.9 is pinned in .*/known_hosts: add it with "
                   r"`ssh-keyscan -t ed25519 10\.0\.0\.9 >> .*/known_hosts` after checking its fingerprint"),
    "pinned on another port": (_broken(("port = 2222", "port = 2223")),
                               r"no host key of \[10\.0\.0\.4\]:2223 is pinned in .*: add it with "
                               r"`ssh-keyscan -p 2223 -t ed25519 10\.0\.0\.4 >> "),
    "same machine twice": (_broken(('host = "10.0.0.3"', 'host = "10.0.0.1"')),
                           r"nodes n1 and n3 have the same machine root@10\.0\.0\.1:22; each node needs its own"),
    "same peer_host twice": (_broken(append="peer_host = '10.0.0.1'\n"),
                             r"nodes n1 and n3 have the same peer_host 10\.0\.0\.1"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_defect_of_a_hosts_file_is_one_line_saying_what_to_do(keys: Path, case: str) -> None:
    if case == "passphrase":  # encrypting costs bcrypt rounds: only where needed
        _write_key(keys / "locked", passphrase=b"secret")
    text, expected = CASES[case]
    path = _hosts_file(keys, text)
    with pytest.raises(HostsFileError, match=expected) as raised:
        load_hosts(path)
    assert "\n" not in str(raised.value) and str(path) in str(raised.value)


def test_a_missing_file_and_missing_nodes_say_what_to_do(keys: Path) -> None:
    with pytest.raises(HostsFileError, match=r"hosts file .*/none\.toml does not exist: write one as docs/ssh\.md shows"):
        load_hosts(keys / "none.toml")
    path = _hosts_file(keys, GOOD)
    with pytest.raises(HostsFileError, match=r"has no node n4, n5 \(it has n1, n2, n3\): add them, or run with --nodes 3"):
        load_hosts(path, ("n1", "n2", "n3", "n4", "n5"))
    # A fluvio run also needs the controller's machine, and the message says what that host is for.
    with pytest.raises(HostsFileError, match=r"has no node sc .*; sc is the machine of a process besides the data "
                                             r"nodes \(sc: the fluvio controller"):
        load_hosts(path, ("n1", "n2", "n3", "sc"))


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A local TCP port that is bound but not listening: connections to it are refused at once."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    yield sock.getsockname()[1]
    sock.close()


def _local_hosts_file(keys: Path, port: int) -> Path:
    (keys / "known_hosts").write_text(known_hosts_line("127.0.0.1", (keys / "host_key.pub").read_text(), port=port))
    return _hosts_file(keys, f'[nodes.n1]\nhost = "127.0.0.1"\nport = {port}\nkey = "id"\nknown_hosts = "known_hosts"\n')


def test_an_unreachable_host_is_one_sentence_and_leaves_no_connection(keys: Path, refusing_port: int) -> None:
    platform = SSHPlatform.from_hosts_file(_local_hosts_file(keys, refusing_port))
    with pytest.raises(SSHPlatformError) as raised:
        platform.start()
    message = str(raised.value)
    assert message.startswith(f"n1: cannot connect to root@127.0.0.1:{refusing_port}: ")
    assert message.endswith(f"check that 127.0.0.1 is up and sshd listens on port {refusing_port}, reachable from here")
    assert "\n" not in message and platform.remotes() == {}


class _FakeRemote:
    """Stands in for `SSHRemote` where the node's answers, not the wire, are under test."""

    answer = "0\nroot\n"
    closed: list[str] = []

    def __init__(self, host: str, *, name: str, **options: object) -> None:
        self.name = name

    def run(self, cmd: str, **options: object) -> CommandResult:
        return CommandResult(0, self.answer, "")

    def close(self) -> None:
        self.closed.append(self.name)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("1000\nalice\n", r"n1: root@10\.0\.0\.1:22 logs in as alice \(uid 1000\) but the harness needs root on the "
                          r"nodes .* sudo is not supported"),
        ("0\nroot\nmissing iptables\nmissing ps\n", r"n1: 10\.0\.0\.1 lacks iptables, ps: install iptables procps there"),
    ],
)
def test_a_node_that_cannot_take_a_test_is_refused_and_disconnected(
    keys: Path, monkeypatch: pytest.MonkeyPatch, answer: str, expected: str
) -> None:
    monkeypatch.setattr(_FakeRemote, "answer", answer)
    monkeypatch.setattr(_FakeRemote, "closed", [])
    monkeypatch.setattr(ssh_platform, "SSHRemote", _FakeRemote)
    platform = SSHPlatform.from_hosts_file(_hosts_file(keys, GOOD), ("n1",))
    with pytest.raises(SSHPlatformError, match=expected):
        platform.start()
    assert _FakeRemote.closed == ["n1"] and platform.remotes() == {}


def test_a_healthy_node_connects_once_and_closes(keys: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_FakeRemote, "closed", [])
    monkeypatch.setattr(ssh_platform, "SSHRemote", _FakeRemote)
    with SSHPlatform.from_hosts_file(_hosts_file(keys, GOOD)) as platform:
        remotes = platform.start()
        assert sorted(remotes) == ["n1", "n2", "n3"] and platform.start() == remotes  # no second connection
    assert sorted(_FakeRemote.closed) == ["n1", "n2", "n3"] and platform.remotes() == {}


def test_harness_run_exits_254_before_storing_anything(
    keys: Path, refusing_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    store = keys / "store"
    base = ["run", "--db", "cluster", "--nodes", "1", "--nemesis", "none", "--store", str(store), "--no-live",
            "--platform", "ssh"]
    assert main([*base, "--hosts", str(keys / "none.toml")]) == 254
    assert "harness run: hosts file" in capsys.readouterr().err
    assert main([*base, "--hosts", str(_local_hosts_file(keys, refusing_port))]) == 254
    err = capsys.readouterr().err
    assert f"n1: cannot connect to root@127.0.0.1:{refusing_port}" in err and "sshd listens" in err
    assert not store.exists()


# -- a real run over SSH ---------------------------------------------------------------------------------

NODES = ("n1", "n2", "n3", "n4", "n5")
HARNESS = str(Path(sys.executable).with_name("harness"))


def _machines(containers: DockerPlatform, directory: Path) -> Path:
    """A hosts file for ``containers`` as SSH machines (key authorised, host keys pinned). The containers
    only stand in for machines: a run reaches them through their sshd alone."""
    public = _write_key(directory / "client_key")
    pins, tables = [], []
    for node, docker_remote in containers.remotes().items():
        wait_for_sshd(docker_remote)
        docker_remote.write_file("/root/.ssh/authorized_keys", public.encode(), mode=0o600)
        address = containers.address(node)
        pins.append(known_hosts_line(address, docker_remote.read_file("/etc/ssh/ssh_host_ed25519_key.pub").decode()))
        # Peers reach each other by name on the nodes' network (Docker's DNS), the controller by address.
        tables.append(f'[nodes.{node}]\nhost = "{address}"\npeer_host = "{node}"\n')
    (directory / "known_hosts").write_text("".join(pins))
    return _hosts_file(directory, '[defaults]\nkey = "client_key"\nknown_hosts = "known_hosts"\n\n' + "\n".join(tables))


def _what_is_left(remote) -> list[str]:
    """What of a run remains on a machine: the node process, partition rules, stopped processes, files."""
    return remote.run(
        "pgrep -f '[c]luster.node' >/dev/null && echo process; iptables -w -S | grep -q CHAOS && echo rules; "
        "ps -eo stat=,args= | grep '[c]luster.node' | grep -q '^T' && echo stopped; "
        "for d in /opt/chaos /var/log/chaos /var/run/chaos; do [ -e $d ] && echo $d; done; "
        "find /var/lib/chaos -mindepth 1 2>/dev/null; "  # the DB adapter leaves the empty parent
        "for i in $(seq 50); do pgrep -f '[s]shd: root' >/dev/null || exit 0; sleep 0.1; done; echo session",
        timeout=30, check=False,
    ).stdout.split()


@pytest.mark.docker
def test_the_same_chaos_run_goes_over_ssh_to_the_containers_sshd(
    start_platform: Callable[..., DockerPlatform], docker_engine, tmp_path: Path
) -> None:
    containers = start_platform(topology(len(NODES)))
    hosts = _machines(containers, tmp_path)

    store = tmp_path / "store"
    code = main([
        "run", "--db", "cluster", "--nodes", "5", "--workload", "register", "--nemesis", "partition,kill",
        "--time-limit", "12",
        "--nemesis-interval", "3", "--concurrency", "5", "--seed", "20240611", "--platform", "ssh",
        "--hosts", str(hosts), "--store", str(store), "--analysis", "direct", "--no-live",
    ])
    run_dir = (store / "latest").resolve()
    results = json.loads((run_dir / "results.json").read_text())
    summaries = {name: verdict["summary"] for name, verdict in results["checkers"].items()}
    assert code == 0 and results["valid"] is True, (results.get("error"), summaries)
    assert "teardown_errors" not in results and "error" not in results

    document = json.loads((run_dir / "test.json").read_text())
    assert document["spec"]["platform"] == "ssh" and document["spec"]["hosts"] == str(hosts)
    assert document["platform"]["kind"] == "ssh"
    assert document["platform"]["addresses"] == {node: containers.address(node) for node in NODES}
    assert "--platform ssh --hosts" in document["command"]

    history = load_history(run_dir / "history.jsonl")
    client_ops = [op for op in history.ops if op.f != "status"]
    assert sum(op.type == "ok" for op in client_ops) > 50
    assert {op.node for op in history.ops if op.f == "status"} == set(NODES)
    applied = {op.f for op in history.nemesis if op.type == "ok"}
    assert {"partition", "kill", "heal", "start"} <= applied, [(op.f, op.type) for op in history.nemesis]
    journals = load_journals(run_dir / "nodes")
    assert sorted(journals) == list(NODES)
    assert all(any(event.event == "apply" for event in events) for events in journals.values())
    # The faults took effect through SSH: isolating and killing leaders made the cluster elect again.
    leader_terms = {e.data["term"] for events in journals.values() for e in events
                    if e.event == "role" and e.data.get("role") == "leader"}
    assert len(leader_terms) >= 2, leader_terms
    assert set(summaries) == {"single-leader-per-term", "lsn-monotonicity", "durability", "linearizable"}

    # Teardown went through SSH: nothing of the run is left on the machines, and no session stays open.
    for node in NODES:
        left = _what_is_left(containers.remote(node))
        assert left == [], f"{node} keeps {left}"
    containers.close()
    label = {"label": f"{LABEL_RUN}={containers.run_id}"}
    assert docker_engine.containers.list(all=True, filters=label) == []


@pytest.mark.docker
def test_harness_clean_heals_collects_and_wipes_the_machines_of_a_sigkilled_ssh_run(
    start_platform: Callable[..., DockerPlatform], tmp_path: Path
) -> None:
    containers = start_platform(topology(3))
    hosts = _machines(containers, tmp_path)
    store = tmp_path / "store"
    run = subprocess.Popen(
        [HARNESS, "run", "--db", "cluster", "--nodes", "3", "--nemesis", "partition,pause",
         "--nemesis-interval", "1", "--time-limit", "60", "--concurrency", "3", "--seed", "14", "--platform", "ssh",
         "--hosts", hosts.name, "--store", str(store), "--analysis", "direct", "--no-live"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=hosts.parent,  # a relative hosts file
    )
    try:
        deadline = time.monotonic() + 120
        history = store / "latest" / "history.jsonl"
        while not (history.exists() and '"f":"partition"' in history.read_text() and '"f":"pause"' in history.read_text()):
            assert time.monotonic() < deadline and run.poll() is None, "no partition and pause within 120 s"
            time.sleep(0.2)
    finally:
        run.kill()
        run.wait()
    run_dir = (store / "latest").resolve()
    left = {node: _what_is_left(remote) for node, remote in containers.remotes().items()}
    assert all("process" in things for things in left.values()), left  # killed mid-run: all still there

    elsewhere = tmp_path / "elsewhere"  # harness clean finds the hosts file from any working directory
    elsewhere.mkdir()
    cleaned = subprocess.run([HARNESS, "clean", "--store", str(store)],
                             capture_output=True, text=True, timeout=300, cwd=elsewhere)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert f"cleaned {run_dir}" in cleaned.stdout and "journals and logs collected" in cleaned.stdout
    assert {node: _what_is_left(remote) for node, remote in containers.remotes().items()} == {
        node: [] for node in ("n1", "n2", "n3")
    }
    assert sorted(load_journals(run_dir / "nodes")) == ["n1", "n2", "n3"]
    assert json.loads((run_dir / "test.json").read_text())["end"]["how"] == "killed"
