"""Deploying on real hosts (Docker containers or SSH machines) and tearing down on every exit path.

:class:`RealPlatform` does steps 1 (the preflight), 3 and 4 of ``harness.run.run`` for the ``docker`` and
``ssh`` platforms, and registers step 6, the teardown, on the run's ``ExitStack``, in this order of
execution (:func:`teardown_steps`, which ``harness clean`` runs too for a run whose controller was
killed): heal every network fault, resume every paused process (if the DB can pause), collect each
host's journals and logs (where the adapter says: ``nodes/<node>/`` by default), stop and wipe the DB
on every host, remove the containers and the network. Each teardown step logs and records its failure
and never stops the next one. Containers and networks carry the controller's labels (``harness.lifecycle``)
so that ``harness clean`` can tell a dead run's leftovers from a live run's.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import lifecycle, store
from harness.compose import Composition
from harness.db import CatchUp, Deployment, Pause, Process, Status, collected_files, has_capability, hosts_of
from harness.fault_driver import heal_everything, real_fault_driver
from harness.interpreter import run_in_thread
from harness.platforms import Launch, Session
from harness.platforms.threads import run_in_threads
from harness.signals import run_cancelling
from harness.spec import ConfigError, rng_for
from nemesis.shell import FakeTime, install_faketime

log = logging.getLogger(__name__)


class RealPlatform:
    """The ``docker`` and ``ssh`` platforms of one composed test."""

    def __init__(self, comp: Composition) -> None:
        self.comp = comp
        self.engine: Any = None

    def preflight(self) -> None:
        """Docker: an engine that answers and the node image. SSH: the hosts file, and a connection to
        every node's machine (reachable, host key pinned, root). :class:`ConfigError` otherwise."""
        comp = self.comp
        nodes = hosts_of(comp.db, comp.node_names)
        if comp.spec.platform == "ssh":
            from harness.platforms.ssh import SSHPlatform, SSHPlatformError

            try:
                platform = SSHPlatform.from_hosts_file(comp.spec.hosts or "", nodes)
                platform.start()
            except SSHPlatformError as exc:
                raise ConfigError(str(exc)) from None
            self.engine = platform
            return
        from docker.errors import ImageNotFound

        from harness.platforms.docker import PlatformError, connect_engine

        try:
            engine = connect_engine()
        except PlatformError as exc:
            raise ConfigError(str(exc)) from None
        try:
            engine.images.get(comp.image)
        except ImageNotFound:
            engine.close()
            how = getattr(comp.db, "image_hint", None) or "build it with scripts/build-image.sh"
            raise ConfigError(f"the node image {comp.image} does not exist: {how}") from None
        self.engine = engine
        _warn_about_leftovers(engine)

    def deploy(self, launch: Launch) -> Session:
        """Bring up the hosts, install and start the DB on each (in parallel), register the teardown."""
        comp, spec = self.comp, self.comp.spec
        stack, run_dir, teardown_errors, timings = launch.stack, launch.run_dir, launch.teardown_errors, launch.timings
        test_doc, started = launch.test_doc, launch.started
        stack.callback(_close_engine, self.engine)
        platform = self._platform(run_dir)
        stack.callback(teardown_step, teardown_errors, "remove containers and network (ssh: disconnect)",
                       platform.close)
        stack.callback(launch.shield)  # from here, teardown runs to its end whatever arrives
        remotes = platform.start()
        timings["platform_s"] = round(time.monotonic() - started, 3)
        log.info("platform %s up with %d nodes in %.1f s", spec.platform, len(remotes), timings["platform_s"])
        # Where nodes reach each other may differ from where the controller reaches them (ssh).
        peer_host = getattr(platform, "peer_host", platform.address)
        # Hosts: one per data node, plus the DB's extra hosts (the fluvio controller's sc).
        hosts = hosts_of(comp.db, comp.node_names)
        deployment = Deployment(
            nodes=comp.node_names,
            peer_hosts={n: peer_host(n) for n in hosts},
            client_hosts={n: platform.address(n) for n in hosts},
            extra_hosts=hosts[len(comp.node_names):],
        )
        test_doc["platform"] = {"kind": spec.platform, "run_id": getattr(platform, "run_id", None),
                                "addresses": dict(deployment.client_hosts)}
        if spec.hosts:  # where harness clean finds the machines again, whatever its working directory
            test_doc["platform"]["hosts_file"] = str(Path(spec.hosts).resolve())
        store.write_json(run_dir.test_json, test_doc)
        db = comp.db
        # Teardown steps run in the reverse order of registration.
        for what, action in reversed(teardown_steps(comp, deployment, remotes, run_dir)):
            stack.callback(teardown_step, teardown_errors, what, action)
        stack.callback(launch.shield)

        def deploy(node: str) -> None:
            if comp.faketime is not None:
                _install_faketime(remotes[node], comp.faketime)
            db.setup(deployment, node, remotes[node])

        on_nodes(deployment.hosts, deploy)
        timings["deployed_s"] = round(time.monotonic() - started, 3)
        log.info("deployed %d nodes on %d hosts in %.1f s", len(comp.node_names), len(deployment.hosts),
                 timings["deployed_s"])
        return self._session(deployment, remotes)

    def _session(self, deployment: Deployment, remotes: Mapping[str, Any]) -> Session:
        comp, db = self.comp, self.comp.db

        async def open_client(process: int) -> Any:
            # The client's own deadline comes first, so its more precise verdict (a read that timed out is
            # a fail, a write an info) is what the history records; the interpreter's is the backstop.
            return await db.open_client(deployment, process, comp.spec.op_timeout)

        status = None
        if has_capability(db, Status):
            async def status(node: str, timeout: float) -> Mapping[str, Any]:
                return await db.status(deployment, node, timeout)

        caught_up = None
        if has_capability(db, CatchUp):
            async def caught_up(node: str, timeout: float) -> bool:
                return await db.caught_up(deployment, node, timeout)

        nemesis = None
        if comp.packages:
            nemesis = real_fault_driver(db, deployment, remotes, comp.faketime,
                                        rng_for(comp.spec.seed, "nemesis-runtime"))
        # Epoch seconds and monotonic nanoseconds read together: the history's time 0 on the wall clock.
        mono0, wall0 = time.monotonic_ns(), time.time()
        return Session(
            open_client=open_client,
            status=status,
            caught_up=caught_up,
            nemesis=nemesis,
            run_fault=run_in_thread,
            execute=lambda main: run_cancelling(asyncio.Runner(), main),
            clock_ns=time.monotonic_ns,
            wall_at=lambda ns: wall0 + (ns - mono0) / 1e9,
        )

    def _platform(self, run_dir: store.RunDir) -> Any:
        comp = self.comp
        if comp.spec.platform == "docker":
            from harness.platforms.docker import DockerPlatform
            from harness.topology import topology

            extra = hosts_of(comp.db, comp.node_names)[len(comp.node_names):]
            nodes = topology(comp.spec.nodes, image=comp.image, extra_hosts=extra, memory=comp.spec.node_memory,
                             pids=comp.spec.node_pids)
            return DockerPlatform(nodes, client=self.engine, labels=lifecycle.Controller.current().labels(run_dir.path))
        return self.engine  # ssh: the platform the preflight connected


def teardown_steps(
    comp: Composition, deployment: Deployment, remotes: Mapping[str, Any], run_dir: store.RunDir
) -> list[tuple[str, Callable[[], Any]]]:
    """Step 6 of ``harness.run.run`` before the platform closes, in order: heal every fault (network,
    clocks), resume what is paused (if the DB can pause), collect journals and logs, stop and wipe the DB.
    ``harness clean`` runs the same steps for a run whose controller was killed."""
    db = comp.db
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("heal the network", lambda: heal_everything(remotes, comp.faketime))]
    if has_capability(db, Pause):
        steps.append(("resume paused processes",
                      lambda: on_nodes(comp.fault_targets(), lambda n: _resume_quietly(comp, deployment, n, remotes[n]))))
    steps += [
        ("collect journals and logs", lambda: _collect(comp, deployment, remotes, run_dir)),
        ("stop and wipe the DB", lambda: on_nodes(deployment.hosts, lambda n: db.teardown(deployment, n, remotes[n]))),
    ]
    return steps


_warned_about_leftovers = False


def _warn_about_leftovers(engine: Any) -> None:
    """Once per process: say on stderr when runs whose controller died left containers behind."""
    global _warned_about_leftovers
    if _warned_about_leftovers:
        return
    _warned_about_leftovers = True
    from harness.platforms.docker import leftover_warning

    warning = leftover_warning(engine)
    if warning:
        log.warning("%s", warning)
        print(f"warning: {warning}", file=sys.stderr, flush=True)


def _close_engine(engine: Any) -> None:
    if engine is not None:
        engine.close()


def on_nodes(nodes: Sequence[str], action: Callable[[str], Any]) -> dict[str, Any]:
    """Run ``action`` on every node in parallel; raise the first failure (naming the node) after all ran."""
    futures = run_in_threads({node: functools.partial(action, node) for node in nodes}, name="node")
    results: dict[str, Any] = {}
    errors: list[str] = []
    for node, future in futures.items():
        exc = future.exception()
        if exc is not None:
            message = str(exc)
            errors.append(message if message.startswith(f"{node}:") else f"{node}: {message}")
        else:
            results[node] = future.result()
    if errors:
        raise RuntimeError("; ".join(errors))
    return results


def teardown_step(errors: list[str], what: str, action: Callable[[], Any]) -> None:
    """One teardown step: never raises (the next steps must run), logs and records its failure."""
    try:
        action()
        log.info("teardown: %s: done", what)
    except BaseException as exc:  # noqa: BLE001 - even Ctrl-C must not skip the remaining steps
        log.error("teardown: %s failed: %s", what, exc)
        errors.append(f"{what}: {exc}")


def _resume_quietly(comp: Composition, deployment: Deployment, node: str, remote: Any) -> None:
    """SIGCONT a paused process: only a live one when the DB can tell (``Process``), else try and let a
    dead one's error be logged."""
    if has_capability(comp.db, Process) and not comp.db.is_running(deployment, node, remote):
        return
    try:
        comp.db.resume(deployment, node, remote)
    except Exception as exc:  # noqa: BLE001 - nothing paused there, most likely
        if has_capability(comp.db, Process):
            raise
        log.info("resume %s: %s", node, exc)


def _install_faketime(remote: Any, faketime: FakeTime) -> None:
    outcome = install_faketime(remote, faketime)
    if outcome.error:
        raise RuntimeError(f"{remote.name}: libfaketime does not work there: {outcome.error}")


def _collect(comp: Composition, deployment: Deployment, remotes: Mapping[str, Any], run_dir: store.RunDir) -> None:
    """Copy every host's journals and logs where the DB says (``nodes/<node>/``; a lease store's under
    ``external-store/<member>/``); a missing file is logged, not fatal."""

    def collect(host: str) -> None:
        for remote_path, relative in collected_files(comp.db, deployment, host).items():
            target = run_dir.path / relative
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                remotes[host].download(remote_path, target)
            except Exception as exc:  # noqa: BLE001 - collect what exists
                log.warning("could not collect %s from %s: %s", remote_path, host, exc)

    on_nodes(deployment.hosts, collect)
