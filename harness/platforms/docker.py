"""The docker platform: a run's nodes as containers of the node image on a private internal network.

Each run gets its own network and containers, named after the run id (``chaos-1a2b3c4d-net``,
``chaos-1a2b3c4d-n1``) and labelled ``chaos-harness.run=<run id>``, so parallel runs do not collide.
Every container and network also carries its controller's labels (pid, host, process start time and,
from ``harness run``, the run directory: ``harness.lifecycle.Controller.labels``), so the leftovers of a
controller that was SIGKILLed are recognisable as such and ``harness clean`` removes them, never a live
run's (`find_runs`, `remove_run`; `leftover_warning` tells ``harness run`` that there are some). The
network is internal and each node's default route is deleted once it starts: nodes have no route out,
reach each other by node name (``n1``) over TCP, and the controller reaches them at
`DockerPlatform.address`. Containers get NET_ADMIN (iptables for
partitions), an init process (so a killed node process is reaped and never lingers as a zombie), and
the topology's memory and process-count limits. The nodes only idle (sshd); installing and starting the
system under test is the DB adapter's job, through the remotes. The topology's hosts are the data nodes
and any extra hosts the DB adapter asks for (the fluvio controller's ``sc``): each is a container like
the others, named and reachable by its host name.

`DockerPlatform.close` removes everything of the run even when bring-up failed half-way, and is
idempotent; use the platform as a context manager or register ``close`` on the run's ExitStack.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import requests.exceptions
from docker.client import DockerClient, from_env
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.models.containers import Container
from docker.types import IPAMConfig, IPAMPool

from harness.lifecycle import DEAD, LABEL_RUN_DIR, Controller
from harness.platforms.threads import finish_through_interrupts
from harness.remotes.docker import DockerRemote
from harness.topology import DEFAULT_TOPOLOGY, Topology

log = logging.getLogger(__name__)

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
    except ValueError as error:  # the Docker SDK's and urllib's word for an address it cannot parse
        raise PlatformError(f"DOCKER_HOST={where!r} is not an address of a Docker engine ({error}): "
                            "unset it, or set it as unix:///var/run/docker.sock or tcp://HOST:PORT") from None
    return client


def new_run_id() -> str:
    """A fresh run id such as ``chaos-1a2b3c4d``."""
    return f"chaos-{secrets.token_hex(4)}"


class DockerPlatform:
    """Brings up the nodes of ``topology`` as containers, hands out their remotes, removes them.

    With ``pin_addresses`` the network uses the topology's subnet and each node its fixed address (as in
    docker-compose.yml; two such runs cannot coexist); by default Docker assigns a free subnet, so runs
    can proceed in parallel. ``client`` is borrowed (not closed) when given; otherwise the platform
    connects to the engine and closes its client in `close`. ``labels`` go on every container and the
    network besides the run's and the controller's (this process's) own.
    """

    def __init__(
        self,
        topology: Topology = DEFAULT_TOPOLOGY,
        *,
        run_id: str | None = None,
        client: DockerClient | None = None,
        pin_addresses: bool = False,
        labels: dict[str, str] | None = None,
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
        self.labels = {**(labels or {}), **Controller.current().labels(), LABEL_RUN: self.run_id}

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
            starts: list[Future[DockerRemote]] = []
            try:
                for node in self.topology.nodes:
                    starts.append(pool.submit(self._start_node, client, node.name,
                                              node.address if self._pin_addresses else None))
            finally:  # no start may still be running when close() below lists what to remove
                finish_through_interrupts(pool, starts)
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
                labels=self.labels,
            )
        except APIError as error:
            raise PlatformError(
                f"cannot create the network {self.network_name} ({error.explanation}): remove what holds "
                "its name or subnet (a killed run's leftovers: run harness clean)"
            ) from error

    def _start_node(self, client: DockerClient, node: str, address: str | None) -> DockerRemote:
        name = self.container_name(node)
        endpoint = client.api.create_endpoint_config(aliases=[node], ipv4_address=address)
        try:
            container = client.containers.create(
                self.topology.image,
                name=name,
                hostname=node,
                labels={**self.labels, LABEL_NODE: node},
                cap_add=["NET_ADMIN"],
                init=True,
                detach=True,
                network=self.network_name,
                networking_config={self.network_name: endpoint},
                mem_limit=self.topology.memory,
                memswap_limit=self.topology.memory,  # no swap beyond the limit: a leak ends the node
                pids_limit=self.topology.pids,
            )
            container.start()
        except APIError as error:
            raise PlatformError(f"cannot start node {node} as container {name}: {error.explanation}") from error
        remote = DockerRemote(client, container.id, node)
        # Docker gives a container on an internal network a default route all the same (to a gateway
        # that forwards nothing); without it, a packet for outside fails at once (ENETUNREACH).
        remote.run(["ip", "route", "del", "default"], check=False, timeout=30)
        return remote

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
                pool = ThreadPoolExecutor(max_workers=_PARALLEL_ENGINE_CALLS)
                removals: list[Future[None]] = []
                try:
                    for container in client.containers.list(all=True, filters=run_filter, ignore_removed=True):
                        removals.append(pool.submit(remove, container))
                finally:  # every container gone before its network is removed
                    finish_through_interrupts(pool, removals)
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
                f"could not remove {'; '.join(failures)}: remove them with `harness clean --run {self.run_id}`"
            )

    def __enter__(self) -> DockerPlatform:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


@dataclass(frozen=True)
class RunObjects:
    """The containers and network of one run found on the engine, and who made them."""

    run_id: str
    controller: Controller | None  # None: made by a harness that did not record its controller
    run_dir: str | None
    containers: tuple[str, ...]
    networks: tuple[str, ...]
    nodes: dict[str, str] = field(default_factory=dict)  # node name -> container id

    @property
    def names(self) -> tuple[str, ...]:
        return self.containers + self.networks


def find_runs(client: DockerClient) -> list[RunObjects]:
    """Every run with a container or network on the engine (labelled `LABEL_RUN`), by run id."""
    found: dict[str, dict[str, Any]] = {}

    def entry(labels: dict[str, str]) -> dict[str, Any]:
        run = found.setdefault(labels[LABEL_RUN], {"labels": {}, "containers": [], "networks": [], "nodes": {}})
        run["labels"] = {**labels, **run["labels"]}
        return run

    for container in client.containers.list(all=True, filters={"label": LABEL_RUN}, ignore_removed=True):
        run = entry(container.labels)
        run["containers"].append(container.name)
        if LABEL_NODE in container.labels:
            run["nodes"][container.labels[LABEL_NODE]] = container.id
    for network in client.networks.list(filters={"label": LABEL_RUN}):
        entry(network.attrs.get("Labels") or {})["networks"].append(network.name)
    return [
        RunObjects(
            run_id=run_id,
            controller=Controller.from_labels(run["labels"]),
            run_dir=run["labels"].get(LABEL_RUN_DIR),
            containers=tuple(sorted(run["containers"])),
            networks=tuple(sorted(run["networks"])),
            nodes=dict(sorted(run["nodes"].items())),
        )
        for run_id, run in sorted(found.items())
    ]


def leftover_warning(engine: DockerClient) -> str | None:
    """One line for ``harness run``'s start when runs whose controller died left containers here
    (``harness clean`` removes them)."""
    try:
        dead = [objects.run_id for objects in find_runs(engine)
                if objects.controller is not None and objects.controller.state() == DEAD]
    except Exception as exc:  # noqa: BLE001 - a warning must never stop a run
        log.debug("could not look for leftovers: %s", exc)
        return None
    if not dead:
        return None
    shown = ", ".join(dead[:5]) + (f" and {len(dead) - 5} more" if len(dead) > 5 else "")
    return (f"{len(dead)} run(s) whose controller died left containers on this Docker engine ({shown}): "
            "run `harness clean` to remove them")


def remove_run(client: DockerClient, run_id: str) -> list[str]:
    """Removes the containers (running, paused or not) and networks of ``run_id``; returns their names.

    Raises `PlatformError` naming what could not be removed, after trying everything.
    """
    run_filter = {"label": f"{LABEL_RUN}={run_id}"}
    removed: list[str] = []
    failures: list[str] = []
    for container in client.containers.list(all=True, filters=run_filter, ignore_removed=True):
        try:
            container.remove(force=True)
            removed.append(container.name)
        except NotFound:
            pass
        except _ENGINE_ERRORS as error:
            failures.append(f"container {container.name} ({error})")
    for network in client.networks.list(filters=run_filter):
        try:
            network.remove()
            removed.append(network.name)
        except NotFound:
            pass
        except _ENGINE_ERRORS as error:
            failures.append(f"network {network.name} ({error})")
    if failures:
        raise PlatformError(f"could not remove {'; '.join(failures)}")
    return removed


def wake_stopped(client: DockerClient, containers: dict[str, str]) -> tuple[list[str], list[str]]:
    """Starts again those of ``containers`` (node name -> container id) that are not running, so that
    commands can run in them; returns the nodes started and one line per node that could not be.

    A run's containers stop when the engine or the machine restarts under it. Nothing of the run is in
    effect in a stopped container (its network namespace, rules and processes are gone) but its files
    are: journals and logs. Started again, it runs only the image's command (sshd), never the node.
    A container paused by the engine is unpaused.
    """
    started: list[str] = []
    failures: list[str] = []
    for node, container_id in containers.items():
        try:
            container = client.containers.get(container_id)
            if container.status == "paused":
                container.unpause()
            elif container.status != "running":
                container.start()
                started.append(node)
        except _ENGINE_ERRORS as error:
            failures.append(f"{node}: cannot start or unpause its container {container_id[:12]} ({error})")
    return started, failures
