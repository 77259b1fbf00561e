"""`DockerRemote` against a real container of the node image: exec, files, atomic writes, errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from docker.client import DockerClient

from harness.platforms.docker import DockerPlatform
from harness.remotes.docker import DockerRemote
from nemesis.remote import Remote, RemoteError, RemoteTimeout

pytestmark = pytest.mark.docker


@pytest.fixture
def node(one_node: DockerPlatform) -> DockerRemote:
    return one_node.remote("n1")


def test_it_is_a_remote_named_after_the_node(node: DockerRemote) -> None:
    assert isinstance(node, Remote)
    assert node.name == "n1"
    assert node.run("hostname").stdout == "n1\n"


def test_a_list_reaches_the_program_as_separate_arguments_without_a_shell(node: DockerRemote) -> None:
    result = node.run(["python3", "-c", "import sys; print(sys.argv[1:])", "a b;$HOME", "'"])
    assert result.stdout == "['a b;$HOME', \"'\"]\n"


def test_a_string_is_a_shell_line_with_both_streams_kept_apart(node: DockerRemote) -> None:
    result = node.run("echo out; echo err >&2; echo $((6 * 7))")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "out\n42\n", "err\n")


def test_a_failing_command_raises_one_line_naming_node_and_reason(node: DockerRemote) -> None:
    with pytest.raises(RemoteError) as raised:
        node.run("ls /no/such/dir")
    message = str(raised.value)
    assert message.startswith("n1: `ls /no/such/dir` exited 2: ") and "No such file" in message
    assert "\n" not in message
    assert node.run("exit 7", check=False).exit_code == 7


def test_a_command_past_its_timeout_is_killed_on_the_node(node: DockerRemote) -> None:
    with pytest.raises(RemoteTimeout, match="n1: `sleep 1234` was still running after 0.5 s"):
        node.run("sleep 1234", timeout=0.5)
    assert node.run(["pgrep", "-f", "sleep 1234"], check=False).exit_code == 1  # nothing left running


def test_exit_124_within_the_timeout_is_not_a_timeout(node: DockerRemote) -> None:
    assert node.run("exit 124", timeout=30, check=False).exit_code == 124


def test_commands_run_as_another_user(node: DockerRemote) -> None:
    assert node.run("id -un", user="nobody").stdout == "nobody\n"


def test_file_and_tree_round_trip_with_modes(node: DockerRemote, tmp_path: Path) -> None:
    tree = tmp_path / "pkg"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "data.bin").write_bytes(bytes(range(256)) * 100)
    (tree / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (tree / "run.sh").chmod(0o755)
    node.upload(tree, "/opt/test-upload/pkg")
    assert node.run("/opt/test-upload/pkg/run.sh").stdout == "ran\n"
    assert node.read_file("/opt/test-upload/pkg/sub/data.bin") == bytes(range(256)) * 100

    node.download("/opt/test-upload/pkg", tmp_path / "back")
    assert (tmp_path / "back" / "sub" / "data.bin").read_bytes() == bytes(range(256)) * 100
    assert os.access(tmp_path / "back" / "run.sh", os.X_OK)

    single = tmp_path / "one.txt"
    single.write_text("one\n")
    node.upload(single, "/opt/test-upload/renamed.txt")
    node.download("/opt/test-upload/renamed.txt", tmp_path / "deep" / "copy.txt")
    assert (tmp_path / "deep" / "copy.txt").read_text() == "one\n"


def test_missing_files_are_remote_errors_naming_the_path(node: DockerRemote, tmp_path: Path) -> None:
    with pytest.raises(RemoteError, match="n1: no such file or directory: /no/such/file"):
        node.read_file("/no/such/file")
    with pytest.raises(RemoteError, match="no such file or directory: /no/such/dir"):
        node.download("/no/such/dir", tmp_path / "x")
    with pytest.raises(RemoteError, match="is a directory"):
        node.read_file("/etc")
    with pytest.raises(FileNotFoundError, match="no such local file"):
        node.upload(tmp_path / "absent", "/tmp/absent")


def test_read_file_follows_symbolic_links(node: DockerRemote) -> None:
    node.run("mkdir -p /tmp/links && echo target > /tmp/links/real && ln -sfn real /tmp/links/alias")
    assert node.read_file("/tmp/links/alias") == b"target\n"


def test_write_file_creates_parents_sets_mode_and_leaves_no_temporary(node: DockerRemote) -> None:
    node.write_file("/tmp/fresh/dir/control", b"-30 x1\n", mode=0o600)
    assert node.read_file("/tmp/fresh/dir/control") == b"-30 x1\n"
    assert node.run("stat -c '%a %U' /tmp/fresh/dir/control").stdout == "600 root\n"
    node.write_file("/tmp/fresh/dir/control", b"+0 x1\n")
    assert node.run("ls -A /tmp/fresh/dir").stdout == "control\n"


def test_write_file_is_atomic_for_a_reader_polling_the_file(node: DockerRemote) -> None:
    # A reader on the node polls the file while the controller replaces it repeatedly; an in-place
    # rewrite would expose an empty or partial file now and then.
    small, large = b"-30 x1\n", b"+120 x1\n" + b"#" * 200_000 + b"\n"
    node.write_file("/tmp/atomic/control", small)
    reader = (
        "import time\n"
        "seen = set()\n"
        "end = time.monotonic() + 60\n"
        "while time.monotonic() < end:\n"
        "    with open('/tmp/atomic/control', 'rb') as f: seen.add(len(f.read()))\n"
        "    try: open('/tmp/atomic/stop').close(); break\n"
        "    except FileNotFoundError: pass\n"
        "print(sorted(seen))\n"
    )
    node.write_file("/tmp/atomic/reader.py", reader.encode())
    node.run("nohup python3 /tmp/atomic/reader.py >/tmp/atomic/seen 2>&1 &")
    for round_ in range(20):
        node.write_file("/tmp/atomic/control", large if round_ % 2 else small)
    node.write_file("/tmp/atomic/stop", b"")
    seen = node.run("for i in $(seq 100); do [ -s /tmp/atomic/seen ] && break; sleep 0.1; done; cat /tmp/atomic/seen")
    assert seen.stdout == f"[{len(small)}, {len(large)}]\n"


def test_a_missing_container_is_a_remote_error_not_a_crash(docker_engine: DockerClient) -> None:
    ghost = DockerRemote(docker_engine, "no-such-container-for-this-test", "n9")
    with pytest.raises(RemoteError, match="n9: cannot run `true`: container no-such-container-for-this-test"):
        ghost.run("true")
    with pytest.raises(RemoteError, match="n9: "):
        ghost.write_file("/tmp/x", b"x")
