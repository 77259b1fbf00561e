"""Composing a test: from a :class:`~harness.spec.TestSpec` to everything a run needs, checked before
anything is deployed or stored.

:func:`compose` is done once per run. It checks every number and name, loads the DB plugin
(``harness.db.plugin``) and resolves its options, builds the adapter, checks that the adapter has the
capabilities the workload and the nemesis need, binds the seeded workload, and decides which checkers
run and which cannot apply to this system. Every failure is a :class:`~harness.spec.ConfigError`: one
sentence naming what is wrong and the valid choices (exit 254), and nothing has been stored.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from harness.db import DB, MissingCapability, check_capabilities, fault_targets, not_applicable
from harness.db.plugin import DBContext, DBPlugin, PluginError, load_plugin, plugin_for
from harness.spec import DEFAULT_IMAGE, ConfigError, TestSpec, rng_for
from harness.store import StoreError, test_directory
from nemesis.generator import (
    NemesisOptions,
    ScheduledFault,
    check_cluster_size,
    clock_packages,
    generate_schedule,
    parse_nemesis,
)
from nemesis.shell import FakeTime, vendored_libfaketime
from workloads.generator import declared_contract, make_workload, workload_names
from workloads.ops import Workload


@dataclass
class Composition:
    """A test composed and validated, before anything is deployed."""

    spec: TestSpec
    plugin: DBPlugin
    options: dict[str, Any]
    """Every option of the adapter: what the spec gave, the adapter's defaults for the rest."""
    db: DB
    packages: tuple[str, ...]
    node_names: tuple[str, ...]
    workload: Workload
    faketime: FakeTime | None
    checkers: tuple[str, ...]
    """The checkers to run: the workload's, or the subset the spec asks for."""
    not_applicable: dict[str, str]
    """Checkers that cannot judge this system, with the reason (never counted as unknown)."""
    image: str
    contract: Any = None
    """What the DB declares for the workload (the queue's ``Delivery``), or ``None``
    (``workloads.generator.declared_contract``)."""

    def contract_json(self) -> dict[str, Any]:
        """``test.json``'s record of the contract: ``{"delivery": {...}}``, or nothing."""
        if self.contract is None:
            return {}
        return {type(self.contract).attribute: self.contract.to_json()}

    @property
    def test_name(self) -> str:
        """``cluster-raft-register-partition+kill``: the DB, its naming options, workload and nemesis
        (or the spec's ``name``)."""
        if self.spec.name:
            return self.spec.name
        parts = [self.plugin.name, *self.plugin.test_name_parts(self.options), self.spec.workload,
                 "+".join(self.packages) or "none"]
        return "-".join(parts)

    def command(self) -> str:
        """The ``harness run`` command line that runs this test again."""
        spec = self.spec
        argv = ["harness", "run", "--db", spec.db, *self.plugin.command_args(self.options),
                "--nodes", str(spec.nodes), "--workload", spec.workload,
                *(arg for name in sorted(spec.workload_options)
                  for arg in ("--workload-opt", f"{name}={spec.workload_options[name]}")),
                "--nemesis", ",".join(self.packages) or "none", "--time-limit", f"{spec.time_limit:g}",
                "--concurrency", str(spec.concurrency), "--seed", str(spec.seed)]
        defaults = TestSpec(seed=0, db="")
        if spec.rate != defaults.rate:
            argv += ["--rate", "0" if spec.rate is None else f"{spec.rate:g}"]
        for name in ("nemesis_interval", "op_timeout", "recovery_timeout", "leader_timeout"):
            if getattr(spec, name) != getattr(defaults, name):
                argv += ["--" + name.replace("_", "-"), f"{getattr(spec, name):g}"]
        for name in ("platform", "hosts", "store", "image", "name"):
            if getattr(spec, name) != getattr(defaults, name):
                argv += ["--" + name, str(getattr(spec, name))]
        if spec.checkers is not None:
            argv += ["--checkers", ",".join(spec.checkers)]
        if spec.client_binding != defaults.client_binding:
            argv += ["--client-binding", spec.client_binding]
        if spec.leader_group != defaults.leader_group:
            argv += ["--leader-group", spec.leader_group]
        if spec.storm_pacing != defaults.storm_pacing:
            argv += ["--storm-pacing", spec.storm_pacing]
        if spec.min_coverage is not None:
            argv += ["--min-coverage", f"{spec.min_coverage:g}"]
        for name in ("node_memory", "node_pids"):
            if getattr(spec, name) != getattr(defaults, name):
                argv += ["--" + name.replace("_", "-"), str(getattr(spec, name))]
        return shlex.join(argv)

    def fault_targets(self) -> tuple[str, ...]:
        return fault_targets(self.db, self.node_names)

    def schedule(self) -> tuple[ScheduledFault, ...]:
        """The nemesis schedule the seed produces for this test (drawn from the DB's fault targets)."""
        if not self.packages:
            return ()
        options = NemesisOptions(interval=self.spec.nemesis_interval)
        return generate_schedule(self.packages, self.fault_targets(), rng_for(self.spec.seed, "nemesis"),
                                 self.spec.time_limit, options)


def load(spec: TestSpec) -> DBPlugin:
    """The spec's DB plugin; :class:`ConfigError` with the installed names if it cannot be loaded."""
    try:
        return load_plugin(spec.db)
    except PluginError as exc:
        raise ConfigError(str(exc)) from None


def compose(spec: TestSpec, db: DB | None = None) -> Composition:
    """Check every name and number of ``spec`` and build the DB adapter (or take ``db``, an adapter the
    caller built: ``harness.run.run(spec, db=MyDB())``); deploys nothing. Raises :class:`ConfigError`."""
    spec.check()
    plugin = plugin_for(db) if db is not None else load(spec)
    try:
        options = plugin.resolve(spec.db_options)
    except PluginError as exc:
        raise ConfigError(str(exc)) from None
    if spec.workload not in workload_names():
        raise ConfigError(f"unknown workload {spec.workload!r}; valid: {', '.join(workload_names())}")
    try:
        packages = parse_nemesis(spec.nemesis)
        check_cluster_size(packages, spec.nodes)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if spec.platform == "ssh" and not spec.hosts:
        raise ConfigError("the ssh platform needs --hosts FILE, a TOML file naming each node's machine (docs/ssh.md)")
    faketime = None
    clocks = [name for name in packages if name in clock_packages()]
    if clocks and spec.platform != "sim":
        try:
            vendored_libfaketime()
        except FileNotFoundError as exc:
            raise ConfigError(f"the {clocks[0]} nemesis needs libfaketime: {exc}") from None
        faketime = FakeTime()
    node_names = tuple(f"n{i}" for i in range(1, spec.nodes + 1))
    if db is None:
        context = DBContext(seed=spec.seed, nodes=node_names, workload=spec.workload, platform=spec.platform,
                            faketime=faketime)
        try:
            db = plugin.build(options, context)
        except PluginError as exc:
            raise ConfigError(str(exc)) from None
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"the {plugin.name} DB refused its options: {exc}") from None
    try:
        check_capabilities(db, packages, workload=spec.workload)
    except MissingCapability as exc:
        raise ConfigError(str(exc)) from None
    preflight = getattr(db, "preflight", None)
    if callable(preflight) and spec.platform != "sim":
        try:
            preflight()
        except ValueError as exc:
            raise ConfigError(f"the {plugin.name} DB: {exc}") from None
    try:
        contract = declared_contract(spec.workload, db)
        workload = make_workload(spec.workload, rng_for(spec.seed, "workload"), **spec.workload_options,
                                 rate=spec.rate, contract=contract)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    checkers = _checkers(spec, workload)
    image = spec.image or getattr(db, "image", None) or DEFAULT_IMAGE
    composition = Composition(spec, plugin, options, db, packages, node_names, workload, faketime, checkers,
                              not_applicable(db), image, contract)
    try:
        test_directory(composition.test_name)
    except StoreError as exc:
        raise ConfigError(str(exc)) from None
    return composition


def _checkers(spec: TestSpec, workload: Workload) -> tuple[str, ...]:
    if spec.checkers is None:
        return tuple(workload.checkers)
    unknown = [name for name in spec.checkers if name not in workload.checkers]
    if unknown:
        raise ConfigError(f"checker {unknown[0]!r} does not judge the {spec.workload} workload; "
                          f"its checkers: {', '.join(workload.checkers)}")
    return tuple(name for name in workload.checkers if name in spec.checkers)
