"""Settings and fixtures for the whole test suite.

Hypothesis runs without its per-example deadline: speed is measured by the benchmarks, never by a test,
and on a loaded 2-core machine a 200 ms deadline fails correct code at random.

The container tests (``@pytest.mark.docker``) of every package share the fixtures below: the engine, the
node image, platforms. A missing engine or image fails the test with what to run (scripts/setup.sh installs
both); it never skips. Every platform a test starts carries a run id of this test session
(``chaos-test-<pid>-<n>``); at the end of the session any container or network left with such an id is
removed and reported as a failure, so a teardown bug cannot hide.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator

import pytest
from docker.client import DockerClient
from docker.errors import ImageNotFound
from hypothesis import settings

from harness.platforms import docker as docker_platform
from harness.platforms.docker import LABEL_RUN, DockerPlatform, PlatformError, connect_engine
from harness.topology import IMAGE, Topology, topology

settings.register_profile("harness", deadline=None)
settings.load_profile("harness")

SESSION_RUN_PREFIX = f"chaos-test-{os.getpid()}-"
_run_numbers = itertools.count(1)


def session_run_id() -> str:
    """A run id belonging to this test session (its leftovers are checked when the session ends)."""
    return f"{SESSION_RUN_PREFIX}{next(_run_numbers)}"


def session_leftovers(client: DockerClient) -> list[str]:
    """Names of the containers and networks still labelled with a run id of this session."""
    names = [
        container.name
        for container in client.containers.list(all=True, filters={"label": LABEL_RUN}, ignore_removed=True)
        if container.labels.get(LABEL_RUN, "").startswith(SESSION_RUN_PREFIX)
    ]
    names += [
        network.name
        for network in client.networks.list(filters={"label": LABEL_RUN})
        if (network.attrs.get("Labels") or {}).get(LABEL_RUN, "").startswith(SESSION_RUN_PREFIX)
    ]
    return names


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[DockerClient]:
    """A client of a running engine on which the node image exists."""
    try:
        client = connect_engine()
    except PlatformError as error:
        pytest.fail(f"{error} (scripts/setup.sh installs the engine and builds the node image)", pytrace=False)
    try:
        client.images.get(IMAGE)
    except ImageNotFound:
        client.close()
        pytest.fail(f"the node image {IMAGE} does not exist: run scripts/build-image.sh", pytrace=False)
    yield client
    leftovers = session_leftovers(client)
    for container in client.containers.list(all=True, filters={"label": LABEL_RUN}, ignore_removed=True):
        if container.name in leftovers:
            container.remove(force=True)
    for network in client.networks.list(filters={"label": LABEL_RUN}):
        if network.name in leftovers:
            network.remove()
    client.close()
    assert not leftovers, f"docker tests left containers or networks behind: {leftovers}"


@pytest.fixture
def start_platform(docker_engine: DockerClient) -> Iterator[Callable[..., DockerPlatform]]:
    """Starts a `DockerPlatform` for ``topology`` (closed after the test); extra keywords go to it."""
    started: list[DockerPlatform] = []

    def start(topology: Topology, **options: object) -> DockerPlatform:
        platform = DockerPlatform(topology, run_id=session_run_id(), client=docker_engine, **options)
        started.append(platform)
        platform.start()
        return platform

    yield start
    for platform in started:
        platform.close()


@pytest.fixture(scope="module")
def one_node(docker_engine: DockerClient) -> Iterator[DockerPlatform]:
    """A started platform of one node, n1, shared by the tests of a module."""
    platform = DockerPlatform(topology(1), run_id=session_run_id(), client=docker_engine)
    platform.start()
    yield platform
    platform.close()


@pytest.fixture
def run_ids(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Platforms started by ``harness.run.run`` get run ids of this test session (checked for leftovers at
    its end)."""
    ids: list[str] = []

    def new_run_id() -> str:
        ids.append(session_run_id())
        return ids[-1]

    monkeypatch.setattr(docker_platform, "new_run_id", new_run_id)
    return ids
