"""``harness clean``: finish what runs whose controller died left behind.

A controller killed with SIGKILL (a CI runner's last resort, the OOM killer, a power cut) cannot tear
down: its containers stay up with DROP rules, SIGSTOPped nodes and skewed clocks, and its run has no
end. ``harness clean`` finds such runs two ways, both from the records of ``harness.lifecycle``:

* **Docker**: every container and network a run creates is labelled with the run id, its controller
  (pid, host, process start time) and its run directory (``harness.platforms.docker.find_runs``).
* **The store** (``--store``, default ``./store``): a run directory whose ``test.json`` names a
  controller but has no ``end``. This is how SSH runs are found: their machines carry no labels.

A run is cleaned when its controller is dead: on this host, no process with its pid that started when
it did. A live controller's run is never touched, even when named; a run of another host (whose
controller cannot be seen from here) or one made before controllers were recorded is cleaned only
when named with ``--run``. Cleaning a run means, where its run directory and deployment are known,
the controller's own teardown steps (``harness.platforms.real.teardown_steps``: heal the network and the clocks,
resume paused processes, collect journals and logs into the run directory, stop and wipe the system
under test), then removing its containers and network (docker), and writing ``end: killed`` with the
last event's time into ``test.json`` so that the analysis says the run stopped rather than blaming a
checker. ``--dry-run`` only says what would be done.

It also removes what a simulation killed outright left in the store: the scratch directory
(``store/.sim-scratch/``) of an exploration, a shrink, its minimal run or a ``--check-determinism``
replay, whose recorded process (``harness.sim.run.owned_scratch``) is dead on this host. One of a live
process, of another host, or with no record is left alone. And the temporary files that writers killed in
the middle of a write left beside a document or page (``harness.store.temporary_name``): one whose writing
process is not running here and that nothing has written for :data:`TEMPORARY_IDLE_S` seconds (the age
keeps a temporary that a writer on another host, sharing the store, is writing).

Exit codes: 0 nothing left to clean (or all cleaned), 1 something could not be cleaned (each named),
254 bad arguments (a named run that does not exist, or whose controller is alive).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import stat
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console

from harness import lifecycle, store
from harness.lifecycle import ALIVE, DEAD, ELSEWHERE, Controller
from harness.subcommand import EXIT_BAD_CONFIG

TEMPORARY_IDLE_S = 600.0
"""A writer's temporary untouched this long, whose process is gone, is abandoned (the module docstring)."""
UNRECORDED = "unrecorded"
"""Made by a harness that did not record its controller: whether it lives cannot be told."""
EXIT_NOT_CLEANED = 1


class CleanError(ValueError):
    """A named run that cannot be cleaned (it does not exist, or its controller is alive): one line."""


@dataclass
class DeadRun:
    """One run that may need cleaning: its docker objects and/or its run directory, and its controller."""

    run_id: str | None = None
    run_dir: Path | None = None
    platform: str = "docker"
    controller: Controller | None = None
    docker: Any = None  # harness.platforms.docker.RunObjects, when the engine has something of it
    notes: list[str] = field(default_factory=list)

    @property
    def state(self) -> str:
        return UNRECORDED if self.controller is None else self.controller.state()

    @property
    def name(self) -> str:
        return self.run_id or str(self.run_dir)

    @property
    def label(self) -> str:
        """How the run is named to the user: its id and its directory, or its directory once when it has no
        id (a simulated or SSH run found in the store)."""
        return f"{self.run_id} (run directory {self.run_dir})" if self.run_id and self.run_dir else self.name

    def matches(self, named: str) -> bool:
        if named == self.run_id:
            return True
        try:
            return self.run_dir is not None and Path(named).resolve() == self.run_dir
        except OSError:
            return False


# -- finding ---------------------------------------------------------------------------------------------


def survey(engine: Any | None, store_dir: Path | None) -> list[DeadRun]:
    """Every run with containers on ``engine`` and every unfinished run of ``store_dir``, merged by run
    directory (a docker run's labels name it), live ones included: the caller decides."""
    runs: list[DeadRun] = []
    by_dir: dict[Path, DeadRun] = {}
    if engine is not None:
        from harness.platforms.docker import find_runs

        for objects in find_runs(engine):
            run_dir = Path(objects.run_dir).resolve() if objects.run_dir else None
            run = DeadRun(run_id=objects.run_id, run_dir=run_dir, controller=objects.controller, docker=objects)
            runs.append(run)
            if run_dir is not None:
                by_dir[run_dir] = run
    if store_dir is not None:
        for run_dir, document in unfinished_runs(store_dir):
            platform = document.get("platform") if isinstance(document.get("platform"), dict) else {}
            known = by_dir.get(run_dir)
            if known is None:
                known = DeadRun(run_id=platform.get("run_id"), run_dir=run_dir,
                                controller=Controller.from_json(document.get("controller")))
                runs.append(known)
            known.platform = str(platform.get("kind") or document.get("spec", {}).get("platform") or "docker")
    return runs


def unfinished_runs(store_dir: Path) -> Iterable[tuple[Path, dict[str, Any]]]:
    """Run directories of ``store_dir`` (``<test>/<timestamp>/``) whose ``test.json`` names a controller
    and no end."""
    for test_json in sorted(Path(store_dir).glob(f"*/*/{store.TEST_JSON}")):
        if test_json.parent.is_symlink() or test_json.parent.parent.is_symlink():
            continue  # store/latest
        try:
            document = store.read_json(test_json)
        except store.StoreError:
            continue
        if isinstance(document, dict) and "controller" in document and "end" not in document:
            yield test_json.parent.resolve(), document


# -- deciding --------------------------------------------------------------------------------------------


def select(runs: Sequence[DeadRun], named: Sequence[str]) -> tuple[list[DeadRun], list[tuple[DeadRun, str]]]:
    """Which runs to clean, and which to keep with the reason. Without names: the dead ones. With names:
    exactly those, unless one's controller is alive (then :class:`CleanError`) or none matches."""
    if named:
        chosen: list[DeadRun] = []
        for name in named:
            matching = [run for run in runs if run.matches(name)]
            if not matching:
                raise CleanError(f"no run {name!r} has containers, a network or an unfinished run directory "
                                 "to clean (harness clean --dry-run lists them)")
            for run in matching:
                if run.state == ALIVE:
                    raise CleanError(
                        f"run {run.name} is still running (controller {run.controller.describe()}): stop it "
                        "with Ctrl-C or SIGTERM, it tears itself down"
                    )
                if run not in chosen:
                    chosen.append(run)
        return chosen, []
    clean: list[DeadRun] = []
    kept: list[tuple[DeadRun, str]] = []
    for run in runs:
        state = run.state
        if state == DEAD:
            clean.append(run)
        elif state == ALIVE:
            kept.append((run, f"its controller ({run.controller.describe()}) is running"))
        elif state == ELSEWHERE:
            kept.append((run, f"its controller ran on host {run.controller.host}, not here; "
                              f"if it is gone, run harness clean --run {run.name}"))
        else:
            kept.append((run, "made by a harness that did not record its controller; "
                              f"if nothing runs it, run harness clean --run {run.name}"))
    return clean, kept


# -- cleaning --------------------------------------------------------------------------------------------


def finish(run: DeadRun, engine: Any | None) -> list[str]:
    """Tear down ``run`` as its controller would have (see the module docstring); returns what could not
    be done, each as one line (empty: all done)."""
    problems: list[str] = []
    if run.run_dir is not None and (run.run_dir / store.TEST_JSON).is_file():
        problems += _teardown(run, engine)
    if run.docker is not None and engine is not None:
        from harness.platforms.docker import PlatformError, remove_run

        try:
            remove_run(engine, run.docker.run_id)
        except PlatformError as exc:
            problems.append(str(exc))
    if run.run_dir is not None and (run.run_dir / store.TEST_JSON).is_file():
        _mark_killed(store.RunDir(run.run_dir))
    return problems


def _teardown(run: DeadRun, engine: Any | None) -> list[str]:
    """The controller's teardown steps on the run's nodes, if its deployment can be rebuilt."""
    from harness.compose import compose
    from harness.db import Deployment, hosts_of
    from harness.platforms.real import teardown_steps
    from harness.spec import ConfigError, TestSpec

    run_dir = store.RunDir(run.run_dir)
    document = store.read_json(run_dir.test_json)
    platform = document.get("platform")
    if not isinstance(platform, dict) or not isinstance(platform.get("addresses"), dict):
        run.notes.append("nothing was deployed (test.json records no addresses)")
        return []
    try:
        comp = compose(TestSpec.from_json(document["spec"]))
    except (ConfigError, KeyError, TypeError) as exc:
        return [f"{run.name}: cannot rebuild its deployment from {run_dir.test_json} ({exc}); "
                "its nodes were not healed, collected or wiped"]
    hosts = hosts_of(comp.db, comp.node_names)
    addresses = {host: str(platform["addresses"].get(host, host)) for host in hosts}
    connection: Any = None
    try:
        if run.platform == "ssh":
            from harness.platforms.ssh import SSHPlatform, SSHPlatformError

            try:
                hosts_file = platform.get("hosts_file") or comp.spec.hosts or ""
                connection = SSHPlatform.from_hosts_file(hosts_file, hosts)
                remotes = connection.start()
            except SSHPlatformError as exc:
                return [f"{run.name}: cannot reach its SSH hosts ({exc}); on each node, as root: "
                        "iptables -F; kill -CONT the node processes; remove the libfaketime control files; "
                        "then stop and wipe the system under test (docs/ssh.md)"]
            peers = {host: connection.peer_host(host) for host in hosts}
        else:
            from harness.remotes.docker import DockerRemote

            if run.docker is None or engine is None or set(hosts) - set(run.docker.nodes):
                run.notes.append("its containers are gone: nothing to collect")
                return []
            from harness.platforms.docker import wake_stopped

            started, unstartable = wake_stopped(engine, {host: run.docker.nodes[host] for host in hosts})
            if started:
                run.notes.append(f"started its stopped containers ({', '.join(started)}) again to collect them "
                                 "(nothing of the run was in effect in them)")
            if unstartable:
                run.notes.append(f"{'; '.join(unstartable)}: nothing was collected from its nodes")
                return []
            remotes = {host: DockerRemote(engine, run.docker.nodes[host], host) for host in hosts}
            peers = addresses
        deployment = Deployment(nodes=comp.node_names, peer_hosts=peers, client_hosts=addresses,
                                extra_hosts=hosts[len(comp.node_names):])
        problems: list[str] = []
        for what, action in teardown_steps(comp, deployment, remotes, run_dir):
            try:
                action()
            except Exception as exc:  # noqa: BLE001 - the next steps must run
                problems.append(f"{run.name}: {what}: {exc}")
        run.notes.append("healed, resumed, journals and logs collected, system under test wiped")
        return problems
    finally:
        if connection is not None:
            connection.close()


def _mark_killed(run_dir: store.RunDir) -> None:
    document = store.read_json(run_dir.test_json)
    if isinstance(document, dict) and "end" not in document:
        document["end"] = lifecycle.end_record("killed", cause="the controller died (found by harness clean)",
                                               history=run_dir.history, detected_by="harness clean")
        store.write_json(run_dir.test_json, document)


# -- the command -----------------------------------------------------------------------------------------


def add_clean_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``harness clean`` on ``subparsers``."""
    parser = subparsers.add_parser(
        "clean",
        help="remove the containers and networks of runs whose controller died, and finish their records",
        description="Find runs whose controller is dead (SIGKILL, power cut): heal and collect their nodes, "
        "remove their containers and network, and mark them killed in test.json. Runs of a live "
        "controller are never touched. Exit 0 done, 1 something could not be cleaned, 254 bad arguments.",
    )
    parser.add_argument("--run", dest="runs", action="append", default=[], metavar="ID",
                        help="clean only this run: a run id (chaos-1a2b3c4d) or run directory (repeatable); "
                             "also a run of another host or an older harness")
    parser.add_argument("--dry-run", action="store_true", help="say what would be cleaned, change nothing")
    parser.add_argument("--store", default="store", metavar="DIR",
                        help="the store whose unfinished runs to look at (default ./store)")
    parser.set_defaults(handler=cmd_clean)
    return parser


def dead_scratch(store_dir: Path) -> list[tuple[Path, Controller]]:
    """The scratch directories of simulations in ``store_dir`` whose recorded process is dead (the module
    docstring), with that process."""
    from harness.sim.run import SCRATCH, SCRATCH_OWNER

    base = store_dir / SCRATCH
    found: list[tuple[Path, Controller]] = []
    for directory in sorted(base.iterdir()) if base.is_dir() else ():
        try:
            owner = Controller.from_json(store.read_json(directory / SCRATCH_OWNER))
        except (store.StoreError, OSError):  # no record (a run's own scratch, an older harness), or not ours
            continue
        if owner is not None and owner.state() == DEAD:
            found.append((directory, owner))
    return found


def _clean_scratch(store_dir: Path, dry_run: bool, console: Console) -> tuple[int, list[str]]:
    """Remove (or with ``dry_run`` name) the dead simulations' scratch directories; returns how many there
    were and the problems."""
    problems = []
    found = dead_scratch(store_dir)
    for directory, owner in found:
        if dry_run:
            console.print(f"would remove {directory}: the scratch of a simulation whose process ({owner.describe()}) "
                          "is dead", markup=False, highlight=False)
            continue
        try:
            shutil.rmtree(directory)
        except OSError as exc:
            problems.append(f"could not remove {directory}: {exc.strerror or exc}")
            continue
        console.print(f"removed {directory}: the scratch of a simulation whose process ({owner.describe()}) is "
                      "dead", markup=False, highlight=False)
        with contextlib.suppress(OSError):
            directory.parent.rmdir()  # .sim-scratch, when nothing else is in it
    return len(found), problems


def abandoned_temporaries(store_dir: Path) -> list[Path]:
    """The temporary files in ``store_dir`` that killed writers left (the module docstring)."""
    now = time.time()
    found = []
    for directory, subdirectories, names in os.walk(store_dir):
        for name in (*names, *subdirectories):  # (a link to a directory, ``latest``'s temporary, is listed there)
            pid = store.writer_of(name)
            if pid is None or psutil.pid_exists(pid):
                continue
            path = Path(directory) / name
            with contextlib.suppress(OSError):  # gone meanwhile: its writer was alive after all
                status = path.lstat()  # the temporary's own time, not its link target's
                if not stat.S_ISDIR(status.st_mode) and now - status.st_mtime >= TEMPORARY_IDLE_S:
                    found.append(path)
    return sorted(found)


def _clean_temporaries(store_dir: Path, dry_run: bool, console: Console) -> tuple[int, list[str]]:
    """Remove (or with ``dry_run`` name) the abandoned temporaries; returns how many there were and the
    problems."""
    problems = []
    found = abandoned_temporaries(store_dir)
    for path in found:
        why = f"{path}: the temporary of a writer (pid {store.writer_of(path.name)}) killed while it wrote"
        if dry_run:
            console.print(f"would remove {why}", markup=False, highlight=False)
            continue
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            problems.append(f"could not remove {path}: {exc.strerror or exc}")
            continue
        console.print(f"removed {why}", markup=False, highlight=False)
    return len(found), problems


def cmd_clean(args: argparse.Namespace, console: Console, err: Console) -> int:
    engine = _engine(err)
    store_dir = Path(args.store)
    try:
        runs = survey(engine, store_dir if store_dir.is_dir() else None)
        chosen, kept = select(runs, args.runs)
        for run, why in kept:
            console.print(f"kept {run.name}: {why}", markup=False, highlight=False)
        # (with --run, only the runs named)
        leftovers, leftover_problems = 0, []  # a killed simulation's scratch, a killed writer's temporaries
        if not args.runs:
            for clean_up in (_clean_scratch, _clean_temporaries):
                found, trouble = clean_up(store_dir, args.dry_run, console) if store_dir.is_dir() else (0, [])
                leftovers, leftover_problems = leftovers + found, leftover_problems + trouble
        for problem in leftover_problems:
            err.print(f"harness clean: {problem}", markup=False, highlight=False)
        if not chosen:
            if not leftovers:
                console.print("nothing to clean", highlight=False)
            return EXIT_NOT_CLEANED if leftover_problems else 0
        failed = bool(leftover_problems)
        for run in chosen:
            what = ", ".join(run.docker.names) if run.docker is not None else "no containers"
            owner = run.controller.describe() if run.controller else "an unrecorded controller"
            if args.dry_run:
                console.print(f"would clean {run.label}: {what}; controller {owner} is {run.state}",
                              markup=False, highlight=False)
                continue
            problems = finish(run, engine)
            failed = failed or bool(problems)
            notes = f"; {'; '.join(run.notes)}" if run.notes else ""
            console.print(f"cleaned {run.label}: removed {what}{notes}", markup=False, highlight=False)
            for problem in problems:
                err.print(f"harness clean: {problem}", markup=False, highlight=False)
        return EXIT_NOT_CLEANED if failed else 0
    except CleanError as exc:
        err.print(f"harness clean: {exc}", markup=False, highlight=False)
        return EXIT_BAD_CONFIG
    finally:
        if engine is not None:
            engine.close()


def _engine(err: Console) -> Any | None:
    from harness.platforms.docker import PlatformError, connect_engine

    try:
        return connect_engine(timeout=30)
    except PlatformError as exc:
        err.print(f"harness clean: docker leftovers not looked for: {exc}", markup=False, highlight=False)
        return None
