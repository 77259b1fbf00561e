"""The docker platform: nodes on an internal network, partitions with iptables, and teardown that leaves
nothing behind, also after an exception in the run or a failure half-way through bring-up."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest
from docker.client import DockerClient

from harness.lifecycle import Controller
from harness.platforms.docker import (
    LABEL_RUN,
    DockerPlatform,
    PlatformError,
    connect_engine,
    find_runs,
    remove_run,
)
from harness.topology import topology
from tests.conftest import session_run_id
from tests.harness.node_probes import tcp_reachable, wait_for_sshd

StartPlatform = Callable[..., DockerPlatform]


def _run_objects(client: DockerClient, run_id: str) -> list[str]:
    label = {"label": f"{LABEL_RUN}={run_id}"}
    containers = [container.name for container in client.containers.list(all=True, filters=label)]
    return containers + [network.name for network in client.networks.list(filters=label)]


def test_a_missing_engine_is_one_sentence_saying_what_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(PlatformError) as raised:
        connect_engine(timeout=2)
    assert str(raised.value) == (
        "no Docker engine answers at unix:///nonexistent/docker.sock: run scripts/install-docker.sh as root "
        "(or start your Docker engine), then retry"
    )
    assert raised.value.exit_code == 254


@pytest.mark.parametrize("address", ["::::", "tcp://host:port"])
def test_a_docker_host_that_is_no_address_is_one_sentence(monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    monkeypatch.setenv("DOCKER_HOST", address)
    with pytest.raises(PlatformError, match=f"DOCKER_HOST='{address}' is not an address of a Docker engine"):
        connect_engine(timeout=2)


@pytest.mark.docker
def test_three_nodes_reach_each_other_by_name_until_iptables_drops_a_link(start_platform: StartPlatform) -> None:
    platform = start_platform(topology(3))
    remotes = platform.remotes()
    assert sorted(remotes) == ["n1", "n2", "n3"]
    assert {node: remote.run("hostname").stdout.strip() for node, remote in remotes.items()} == {
        "n1": "n1", "n2": "n2", "n3": "n3"
    }
    for remote in remotes.values():
        wait_for_sshd(remote)
    assert all(tcp_reachable(remotes[a], b) for a in remotes for b in remotes if a != b)

    n1, n2, n3 = remotes["n1"], remotes["n2"], remotes["n3"]
    n1.run(["iptables", "-A", "INPUT", "-s", platform.address("n2"), "-j", "DROP"])
    assert not tcp_reachable(n2, "n1")
    assert tcp_reachable(n3, "n1")
    assert tcp_reachable(n1, "n3")
    n1.run(["iptables", "-D", "INPUT", "-s", platform.address("n2"), "-j", "DROP"])
    assert tcp_reachable(n2, "n1")


@pytest.mark.docker
def test_the_network_is_internal_and_the_controller_reaches_nodes_over_tcp(
    start_platform: StartPlatform, docker_engine: DockerClient
) -> None:
    platform = start_platform(topology(1))
    n1 = platform.remote("n1")
    assert docker_engine.networks.get(platform.network_name).attrs["Internal"] is True
    # The Debian mirror is reachable from these machines (ENVIRONMENT.md), but not from a node.
    mirror = socket.gethostbyname("deb.debian.org")
    with socket.create_connection((mirror, 80), timeout=5):
        pass
    assert not tcp_reachable(n1, mirror, 80, timeout_s=2)
    # No route out at all: a packet for outside is refused at once, it never leaves the node.
    assert "default" not in n1.run(["ip", "route"]).stdout
    refused = n1.run(["python3", "-c", f"import socket; socket.create_connection(('{mirror}', 80), timeout=5)"],
                     check=False)
    assert refused.exit_code != 0 and "Network is unreachable" in refused.stderr
    wait_for_sshd(n1)
    with socket.create_connection((platform.address("n1"), 22), timeout=5) as connection:
        assert connection.recv(8) == b"SSH-2.0-"


@pytest.mark.docker
def test_each_node_has_the_topology_s_memory_and_process_limits(
    start_platform: StartPlatform, docker_engine: DockerClient
) -> None:
    platform = start_platform(topology(1, memory="256m", pids=64))
    config = docker_engine.containers.get(platform.container_name("n1")).attrs["HostConfig"]
    assert (config["Memory"], config["MemorySwap"], config["PidsLimit"]) == (256 * 1024**2, 256 * 1024**2, 64)
    n1 = platform.remote("n1")
    # The kernel enforces the process limit: a process that forks without end is stopped short of 64.
    spawn = ("import subprocess\nchildren = []\ntry:\n    for _ in range(200):\n"
             "        children.append(subprocess.Popen(['sleep', '30']))\nexcept OSError:\n    pass\n"
             "print(len(children))\nfor child in children:\n    child.kill()\n")
    spawned = int(n1.run(["python3", "-c", spawn], timeout=60).stdout)
    assert 0 < spawned < 64
    assert n1.run(["true"]).exit_code == 0


@pytest.mark.docker
def test_pinned_addresses_are_the_topology_s(start_platform: StartPlatform) -> None:
    pinned = topology(2, subnet="10.55.201.0/24")
    platform = start_platform(pinned, pin_addresses=True)
    assert [platform.address(node) for node in pinned.names] == ["10.55.201.11", "10.55.201.12"]
    wait_for_sshd(platform.remote("n1"))
    assert tcp_reachable(platform.remote("n2"), "10.55.201.11", 22)


@pytest.mark.docker
def test_close_removes_containers_paused_or_not_and_the_network(docker_engine: DockerClient) -> None:
    platform = DockerPlatform(topology(3), run_id=session_run_id(), client=docker_engine)
    platform.start()
    assert len(_run_objects(docker_engine, platform.run_id)) == 4
    docker_engine.containers.get(platform.container_name("n2")).pause()
    platform.close()
    assert _run_objects(docker_engine, platform.run_id) == []
    platform.close()  # idempotent


@pytest.mark.docker
def test_an_exception_in_the_run_still_tears_everything_down(docker_engine: DockerClient) -> None:
    platform = DockerPlatform(topology(2), run_id=session_run_id(), client=docker_engine)
    with pytest.raises(RuntimeError, match="mid-run"), platform:
        platform.remote("n1").run(["iptables", "-A", "INPUT", "-s", platform.address("n2"), "-j", "DROP"])
        assert len(_run_objects(docker_engine, platform.run_id)) == 3
        raise RuntimeError("mid-run")
    assert _run_objects(docker_engine, platform.run_id) == []


@pytest.mark.docker
def test_a_failure_half_way_through_start_removes_what_was_created(
    docker_engine: DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform = DockerPlatform(topology(3), run_id=session_run_id(), client=docker_engine)
    start_node = DockerPlatform._start_node
    started: list[str] = []

    def n3_fails_once_started(self: DockerPlatform, client: DockerClient, node: str, address: str | None):
        remote = start_node(self, client, node, address)
        started.append(node)
        if node == "n3":
            raise PlatformError("injected failure after starting n3")
        return remote

    monkeypatch.setattr(DockerPlatform, "_start_node", n3_fails_once_started)
    with pytest.raises(PlatformError, match="injected failure"):
        platform.start()
    assert sorted(started) == ["n1", "n2", "n3"]  # every container existed when start gave up
    assert _run_objects(docker_engine, platform.run_id) == []


@pytest.mark.docker
def test_a_missing_image_is_one_sentence_and_creates_nothing(docker_engine: DockerClient) -> None:
    platform = DockerPlatform(topology(1, image="chaos-node:no-such-tag"), run_id=session_run_id(), client=docker_engine)
    with pytest.raises(PlatformError, match="chaos-node:no-such-tag does not exist: build it with scripts/build-image.sh"):
        platform.start()
    assert _run_objects(docker_engine, platform.run_id) == []


@pytest.mark.docker
def test_an_abandoned_run_is_found_with_its_controller_and_removed_alone(docker_engine: DockerClient, tmp_path) -> None:
    abandoned = DockerPlatform(topology(2), run_id=session_run_id(), client=docker_engine,
                               labels=Controller.current().labels(tmp_path))
    other = DockerPlatform(topology(1), run_id=session_run_id(), client=docker_engine)
    abandoned.start()  # and never closed, as after a controller crash
    other.start()
    try:
        found = {run.run_id: run for run in find_runs(docker_engine)}
        objects = found[abandoned.run_id]
        assert objects.controller == Controller.current()
        assert objects.run_dir == str(tmp_path.resolve())
        assert objects.names == (abandoned.container_name("n1"), abandoned.container_name("n2"),
                                 abandoned.network_name)
        assert sorted(objects.nodes) == ["n1", "n2"]
        removed = remove_run(docker_engine, abandoned.run_id)
        assert sorted(removed) == sorted(objects.names)
        assert _run_objects(docker_engine, abandoned.run_id) == []
        assert len(_run_objects(docker_engine, other.run_id)) == 2  # another run's: untouched
    finally:
        other.close()


@pytest.mark.docker
def test_a_container_removed_while_runs_are_listed_is_passed_over(
    docker_engine: DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On an engine where other runs come and go, a container can vanish between the engine's list and
    the inspection of each listed container: finding and removing runs pass over it (``harness clean``
    crashed with NotFound on it)."""
    platform = DockerPlatform(topology(1), run_id=session_run_id(), client=docker_engine)
    platform.start()
    try:
        listed = docker_engine.api.containers
        gone = "0" * 64  # no such container: it was removed after the list

        def list_with_a_vanished_one(*args, **kwargs):
            return [*listed(*args, **kwargs), {"Id": gone}]

        monkeypatch.setattr(docker_engine.api, "containers", list_with_a_vanished_one)
        found = {run.run_id: run for run in find_runs(docker_engine)}
        assert found[platform.run_id].containers == (platform.container_name("n1"),)
        assert sorted(remove_run(docker_engine, platform.run_id)) == sorted(found[platform.run_id].names)
    finally:
        monkeypatch.undo()
        platform.close()


def test_run_ids_must_be_usable_as_docker_names() -> None:
    with pytest.raises(ValueError, match="run id 'Bad Id!' must be"):
        DockerPlatform(topology(1), run_id="Bad Id!")
