"""The docker platform: a run's nodes as containers of the node image on a private internal network.

Each run gets its own network and containers, named after the run id (``chaos-1a2b3c4d-net``,
``chaos-1a2b3c4d-n1``) and labelled ``chaos-harness.run=<run id>``, so parallel runs do not collide and
leftovers of a crashed controller are recognisable and removable (`cleanup_leftovers`). The network is
internal: nodes have no route out, reach each other by node name (``n1``) over TCP, and the controller
reaches them at `DockerPlatform.address`. Containers get NET_ADMIN (iptables for partitions) and an
init process (so a killed node process is reaped and never lingers as a zombie). The nodes only idle
(sshd); installing and starting the system under test is the DB adapter's job, through the remotes.
The topology's hosts are the data nodes and any extra hosts the DB adapter asks for (the fluvio
controller's ``sc``): each is a container like the others, named and reachable by its host name.

`DockerPlatform.close` removes everything of the run even when bring-up failed half-way, and is
idempotent; use the platform as a context manager or register ``close`` on the run's ExitStack.
"""

from __future__ import annotations

import os
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

import requests.exceptions
from docker.client import DockerClient, from_env
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.models.containers import Container
from docker.types import IPAMConfig, IPAMPool

from harness.remotes.docker import DockerRemote
from harness.topology import DEFAULT_TOPOLOGY, Topology

LABEL_RUN = "chaos-harness.run"
"""Label on every container and network of a run; its value is the run id."""
LABEL_NODE = "chaos-harness.node"
ENGINE_TIMEOUT_S = 120.0
"""The longest the controller waits for one answer of the engine (bounds a `run` without timeout)."""
MAX_ENGINE_CONNECTIONS = 64
"""Concurrent engine connections kept (clients, nemesis and status polls all exec at once)."""

_PARALLEL_ENGINE_CALLS = 8
_RUN_ID = re.compile(r"[a-z0-9][a-z0-9_.-]{0,40}")
_ENGINE_ERRORS = (DockerException, requests.exceptions.RequestException)


class PlatformError(Exception):
    """The platform cannot do what was asked; the message is one sentence that says what to do."""

    exit_code = 254  # bad configuration or environment (ARCHITECTURE.md, exit codes)


def connect_engine(timeout: float = ENGINE_TIMEOUT_S) -> DockerClient:
    """A client of the Docker engine DOCKER_HOST (or the local socket) names, after checking it answers."""
    where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        client = from_env(timeout=int(timeout), max_pool_size=MAX_ENGINE_CONNECTIONS)
        client.ping()
    except _ENGINE_ERRORS as error:
        raise PlatformError(
            f"no Docker engine answers at {where}: run scripts/install-docker.sh as root "
            "(or start your Docker engine), then retry"
        ) from error
    return client


def new_run_id() -> str:
    """A fresh run id such as ``chaos-1a2b3c4d``."""
    return f"chaos-{secrets.token_hex(4)}"


class DockerPlatform:
    """Brings up the nodes of ``topology`` as containers, hands out their remotes, removes them.

    With ``pin_addresses`` the network uses the topology's subnet and each node its fixed address (as in
    docker-compose.yml; two such runs cannot coexist); by default Docker assigns a free subnet, so runs
    can proceed in parallel. ``client`` is borrowed (not closed) when given; otherwise the platform
    connects to the engine and closes its client in `close`.
    """

    def __init__(
        self,
        topology: Topology = DEFAULT_TOPOLOGY,
        *,
        run_id: str | None = None,
        client: DockerClient | None = None,
        pin_addresses: bool = False,
    ) -> None:
        self.run_id = run_id or new_run_id()
        if not _RUN_ID.fullmatch(self.run_id):
            raise ValueError(f"run id {self.run_id!r} must be 1-41 of a-z 0-9 _ . - (starting alphanumeric)")
        self.topology = topology
        self.network_name = f"{self.run_id}-net"
        self._pin_addresses = pin_addresses
        self._client = client
        self._owns_client = client is None
        self._remotes: dict[str, DockerRemote] = {}
        self._closed = False

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.topology.names

    def container_name(self, node: str) -> str:
        return f"{self.run_id}-{node}"

    def _engine(self) -> DockerClient:
        if self._closed:
            raise PlatformError(f"the platform of run {self.run_id} is closed; start a new one")
        if self._client is None:
            self._client = connect_engine()
        return self._client

    def start(self) -> dict[str, DockerRemote]:
        """Creates the network and starts one container per node; returns the remotes by node name.

        On any failure everything already created is removed before the error propagates.
        """
        client = self._engine()
        try:
            self._check_image(client)
            self._create_network(client)
            pool = ThreadPoolExecutor(max_workers=_PARALLEL_ENGINE_CALLS)
            try:
                starts = [
                    pool.submit(self._start_node, client, node.name, node.address if self._pin_addresses else None)
                    for node in self.topology.nodes
                ]
            finally:  # no start may still be running when close() below lists what to remove
                pool.shutdown(wait=True, cancel_futures=True)
            for node, started in zip(self.topology.names, starts, strict=True):
                self._remotes[node] = started.result()  # raises the first failure, once all have ended
            self._check_running(client)
        except BaseException:
            self.close()
            raise
        return dict(self._remotes)

    def _check_image(self, client: DockerClient) -> None:
        try:
            client.images.get(self.topology.image)
        except ImageNotFound:
            raise PlatformError(
                f"the node image {self.topology.image} does not exist: build it with scripts/build-image.sh"
            ) from None

    def _create_network(self, client: DockerClient) -> None:
        ipam = None
        if self._pin_addresses:
            ipam = IPAMConfig(pool_configs=[IPAMPool(subnet=self.topology.subnet)])
        try:
            client.networks.create(
                self.network_name, driver="bridge", internal=True, ipam=ipam,
                labels={LABEL_RUN: self.run_id},
            )
        except APIError as error:
            raise PlatformError(
                f"cannot create the network {self.network_name} ({error.explanation}): remove what holds "
                "its name or subnet (leftovers: harness.platforms.docker.cleanup_leftovers())"
            ) from error

    def _start_node(self, client: DockerClient, node: str, address: str | None) -> DockerRemote:
        name = self.container_name(node)
        endpoint = client.api.create_endpoint_config(aliases=[node], ipv4_address=address)
        try:
            container = client.containers.create(
                self.topology.image,
                name=name,
                hostname=node,
                labels={LABEL_RUN: self.run_id, LABEL_NODE: node},
                cap_add=["NET_ADMIN"],
                init=True,
                detach=True,
                network=self.network_name,
                networking_config={self.network_name: endpoint},
            )
            container.start()
        except APIError as error:
            raise PlatformError(f"cannot start node {node} as container {name}: {error.explanation}") from error
        return DockerRemote(client, container.id, node)

    def _check_running(self, client: DockerClient) -> None:
        for node, remote in self._remotes.items():
            container = client.containers.get(remote.container)
            if container.status != "running":
                tail = container.logs(tail=5).decode(errors="replace").strip().replace("\n", " | ")
                raise PlatformError(
                    f"node {node} ({container.name}) is {container.status} right after starting; its log "
                    f"ends: {tail or '(empty)'}"
                )

    def remote(self, node: str) -> DockerRemote:
        try:
            return self._remotes[node]
        except KeyError:
            raise KeyError(f"no started node {node!r}; started nodes: {', '.join(self._remotes) or 'none'}") from None

    def remotes(self) -> dict[str, DockerRemote]:
        return dict(self._remotes)

    def address(self, node: str) -> str:
        """The node's address on the run's network, reachable from the controller over TCP."""
        container = self._engine().containers.get(self.remote(node).container)
        return container.attrs["NetworkSettings"]["Networks"][self.network_name]["IPAddress"]

    def close(self) -> None:
        """Removes the run's containers (killing them, paused or not) and its network; idempotent.

        Everything carrying the run's label is removed, including what a failed `start` created before
        it could record it. Raises `PlatformError` naming what could not be removed.
        """
        if self._closed:
            return
        failures: list[str] = []
        client = self._client
        if client is not None:
            run_filter = {"label": f"{LABEL_RUN}={self.run_id}"}
            def remove(container: Container) -> None:
                try:
                    container.remove(force=True)
                except NotFound:
                    pass
                except _ENGINE_ERRORS as error:
                    failures.append(f"container {container.name} ({error})")

            try:
                with ThreadPoolExecutor(max_workers=_PARALLEL_ENGINE_CALLS) as pool:
                    pool.map(remove, client.containers.list(all=True, filters=run_filter))
                for network in client.networks.list(filters=run_filter):
                    try:
                        network.remove()
                    except NotFound:
                        pass
                    except _ENGINE_ERRORS as error:
                        failures.append(f"network {network.name} ({error})")
            except _ENGINE_ERRORS as error:
                failures.append(f"the run's containers and network (listing them failed: {error})")
        self._closed = True
        self._remotes.clear()
        if self._owns_client and client is not None:
            client.close()
        if failures:
            raise PlatformError(
                f"could not remove {'; '.join(failures)}: remove them with harness.platforms.docker.cleanup_leftovers()"
            )

    def __enter__(self) -> DockerPlatform:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


def cleanup_leftovers(client: DockerClient | None = None, run_id: str | None = None) -> list[str]:
    """Removes every container and network labelled by a run (only ``run_id``'s, if given).

    Meant for after a crashed controller: without ``run_id`` it also removes the nodes of runs still in
    progress. Returns the names of what it removed.
    """
    owned = client is None
    client = client or connect_engine()
    label = LABEL_RUN if run_id is None else f"{LABEL_RUN}={run_id}"
    removed: list[str] = []
    try:
        for container in client.containers.list(all=True, filters={"label": label}):
            container.remove(force=True)
            removed.append(container.name)
        for network in client.networks.list(filters={"label": label}):
            network.remove()
            removed.append(network.name)
    finally:
        if owned:
            client.close()
    return removed
