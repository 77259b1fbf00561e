"""`SSHRemote` against the sshd of a real node container, with keys this test generates.

The client key is installed into the node's authorized_keys; the node's ed25519 host key is pinned into a
known_hosts file. Unknown and changed host keys and refused client keys must be errors, never accepted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness.platforms.docker import DockerPlatform
from harness.remotes.ssh import SSHRemote, known_hosts_line
from nemesis.remote import Remote, RemoteError, RemoteTimeout
from tests.harness.node_probes import wait_for_sshd

pytestmark = pytest.mark.docker


def _new_key(directory: Path, name: str) -> tuple[Path, str]:
    """A fresh ed25519 private key file (OpenSSH format, mode 600) and its public key line."""
    key = Ed25519PrivateKey.generate()
    path = directory / name
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
    )
    path.chmod(0o600)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return path, public.decode() + f" {name}@test\n"


class SshNode:
    """The node n1 prepared for SSH: its address, an authorized key, its host key pinned."""

    def __init__(self, platform: DockerPlatform, directory: Path) -> None:
        docker_remote = platform.remote("n1")
        wait_for_sshd(docker_remote)
        self.docker_remote = docker_remote
        self.address = platform.address("n1")
        self.key, public = _new_key(directory, "client_key")
        docker_remote.write_file("/root/.ssh/authorized_keys", public.encode(), mode=0o600)
        self.host_key = docker_remote.read_file("/etc/ssh/ssh_host_ed25519_key.pub").decode()
        self.known_hosts = directory / "known_hosts"
        self.known_hosts.write_text(known_hosts_line(self.address, self.host_key))

    def connect(self, **overrides: object) -> SSHRemote:
        options: dict[str, object] = {"known_hosts": self.known_hosts, "key_filename": self.key, "name": "n1"}
        options.update(overrides)
        return SSHRemote(self.address, **options)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def ssh_node(one_node: DockerPlatform, tmp_path_factory: pytest.TempPathFactory) -> SshNode:
    return SshNode(one_node, tmp_path_factory.mktemp("ssh"))


@pytest.fixture
def remote(ssh_node: SshNode) -> Iterator[SSHRemote]:
    connection = ssh_node.connect()
    yield connection
    connection.close()


def test_key_auth_with_a_pinned_host_key_runs_commands(remote: SSHRemote) -> None:
    assert isinstance(remote, Remote)
    assert remote.run("hostname; id -un").stdout == "n1\nroot\n"
    result = remote.run(["python3", "-c", "import sys; print(sys.argv[1:])", "a b;$HOME", "'"])
    assert result.stdout == "['a b;$HOME', \"'\"]\n"


def test_errors_timeouts_and_users_behave_as_on_docker(remote: SSHRemote) -> None:
    with pytest.raises(RemoteError, match=r"^n1: `ls /no/such/dir` exited 2: .*No such file"):
        remote.run("ls /no/such/dir")
    assert remote.run("echo err >&2; exit 3", check=False).stderr == "err\n"
    with pytest.raises(RemoteTimeout, match="n1: `sleep 4321` was still running after 0.5 s"):
        remote.run("sleep 4321", timeout=0.5)
    assert remote.run(["pgrep", "-f", "sleep 4321"], check=False).exit_code == 1
    assert remote.run("id -un", user="nobody").stdout == "nobody\n"


def test_large_output_on_both_streams_does_not_stall(remote: SSHRemote) -> None:
    result = remote.run("head -c 3000000 /dev/zero >&2; head -c 3000000 /dev/zero", timeout=60)
    assert (len(result.stdout), len(result.stderr)) == (3_000_000, 3_000_000)


def test_sftp_file_and_tree_round_trip(remote: SSHRemote, ssh_node: SshNode, tmp_path: Path) -> None:
    tree = tmp_path / "pkg"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "data.bin").write_bytes(bytes(range(256)) * 300)
    (tree / "run.sh").write_text("#!/bin/sh\necho ran over ssh\n")
    (tree / "run.sh").chmod(0o755)
    remote.upload(tree, "/opt/ssh-upload/pkg")
    assert remote.run("/opt/ssh-upload/pkg/run.sh").stdout == "ran over ssh\n"
    assert ssh_node.docker_remote.read_file("/opt/ssh-upload/pkg/sub/data.bin") == bytes(range(256)) * 300
    remote.download("/opt/ssh-upload/pkg", tmp_path / "back")
    assert (tmp_path / "back" / "sub" / "data.bin").read_bytes() == bytes(range(256)) * 300
    assert (tmp_path / "back" / "run.sh").stat().st_mode & 0o111
    with pytest.raises(RemoteError, match="n1: cannot read /no/such/file: no such file or directory"):
        remote.read_file("/no/such/file")


def test_write_file_is_atomic_with_mode_and_no_temporary_left(remote: SSHRemote) -> None:
    remote.write_file("/tmp/ssh-fresh/dir/control", b"-30 x1\n", mode=0o600)
    remote.write_file("/tmp/ssh-fresh/dir/control", b"+5 x1\n", mode=0o600)
    assert remote.read_file("/tmp/ssh-fresh/dir/control") == b"+5 x1\n"
    assert remote.run("stat -c %a /tmp/ssh-fresh/dir/control; ls -A /tmp/ssh-fresh/dir").stdout == "600\ncontrol\n"


def test_an_unknown_host_key_is_rejected(ssh_node: SshNode, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(RemoteError, match=f"n1: host key of {ssh_node.address}:22 is not in {empty}"):
        ssh_node.connect(known_hosts=empty)
    assert empty.read_text() == ""  # nothing was added


def test_a_changed_host_key_is_rejected(ssh_node: SshNode, tmp_path: Path) -> None:
    _, impostor = _new_key(tmp_path, "impostor")
    pinned = tmp_path / "known_hosts"
    pinned.write_text(known_hosts_line(ssh_node.address, impostor))
    with pytest.raises(RemoteError, match="differs from the one pinned"):
        ssh_node.connect(known_hosts=pinned)


def test_a_key_not_in_authorized_keys_is_refused(ssh_node: SshNode, tmp_path: Path) -> None:
    stranger, _ = _new_key(tmp_path, "stranger")
    with pytest.raises(RemoteError, match=r"root@.*:22 refused the key .*stranger"):
        ssh_node.connect(key_filename=stranger)


def test_a_missing_known_hosts_file_is_an_error(ssh_node: SshNode, tmp_path: Path) -> None:
    with pytest.raises(RemoteError, match="known_hosts file .* does not exist"):
        ssh_node.connect(known_hosts=tmp_path / "absent")


def test_an_unreachable_host_is_one_line(ssh_node: SshNode) -> None:
    with pytest.raises(RemoteError, match="cannot connect to root@") as raised:
        ssh_node.connect(port=2, connect_timeout=2)
    assert "\n" not in str(raised.value)
