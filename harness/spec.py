"""What defines a test: :class:`TestSpec`, the range of every number in it, and its JSON form.

A spec names the DB by the name its plugin is registered under (``harness.db.plugin``) and carries the
adapter's options as given (``db_options``); everything else is the harness's own: the platform, node
count, workload, nemesis packages, timings and seed. ``test.json`` stores it (``spec``), so a run can be
reproduced from its directory; :meth:`TestSpec.from_json` reads it back field by field, with one
sentence for the first field that is wrong, and reads specs written before DB options existed (their
``mode``, ``bugs`` and ``node_args`` become the ``cluster`` adapter's options) and before storms were
paced by the system by default (a spec with no ``storm_pacing`` was paced by the clock, and reads so).

:data:`LIMITS` is the one table of allowed ranges: the command line, suites and ``from_json`` all check
numbers against it before anything is stored.

Seeds: each concern draws from its own ``random.Random`` derived from the run's seed and the concern's
name (:func:`rng_for`), so adding a draw to the workload never changes the nemesis schedule.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from harness.pacing import DEFAULT_STORM_PACING, check_storm_pacing
from harness.topology import MIN_PIDS, NODE_MEMORY, NODE_PIDS, memory_bytes
from nemesis.faults import parse_leader_group
from workloads.generator import check_workload_options
from workloads.ops import CLIENT_BINDINGS

PLATFORMS = ("docker", "ssh", "sim")
DEFAULT_IMAGE = "chaos-node:latest"
DAY = 24 * 3600.0


class ConfigError(ValueError):
    """The test cannot be composed (a bad name, a missing capability, a missing engine): one sentence
    that says what is wrong and what to do. The CLI exits 254 with it."""


@dataclass(frozen=True)
class Limit:
    """The allowed range of one number of the spec, and how a person is told about it."""

    minimum: float
    maximum: float
    unit: str
    integer: bool = False
    none_means: str | None = None
    """What ``None`` (``0`` on the command line) means, if it is allowed: e.g. "no pause"."""

    def check(self, name: str, value: Any) -> None:
        flag = "--" + name.replace("_", "-")
        if value is None and self.none_means is not None:
            return
        kind = int if self.integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kind):
            what = "a whole number" if self.integer else "a number"
            raise ConfigError(f"{flag} must be {what} of {self.unit}, not {value!r}")
        if not math.isfinite(value) or not self.minimum <= value <= self.maximum:
            raise ConfigError(f"{flag} must be between {self.minimum:g} and {self.maximum:g} {self.unit}, not {value!r}")


LIMITS: dict[str, Limit] = {
    "nodes": Limit(1, 99, "nodes", integer=True),
    "concurrency": Limit(1, 1000, "client processes", integer=True),
    "time_limit": Limit(0.1, DAY, "seconds"),
    "rate": Limit(0.001, 10_000, "operations per second per process", none_means="no pause between operations"),
    "op_timeout": Limit(0.01, 3600, "seconds"),
    "nemesis_interval": Limit(0.05, DAY, "seconds"),
    "recovery_timeout": Limit(0.1, 3600, "seconds"),
    "leader_timeout": Limit(0.1, 3600, "seconds"),
    "check_timeout": Limit(0.1, DAY, "seconds"),
    "node_pids": Limit(MIN_PIDS, 100_000, "processes and threads per node container", integer=True),
}
"""Every number of a spec and its range: a time limit is finite and at most a day; faults come at most
20 times a second (a shorter interval only grows the schedule, and once grew it until memory ran out)."""


def rng_for(seed: int, purpose: str) -> random.Random:
    """The run's random generator for one concern (``"nemesis"``, ``"workload"``), derived from the seed."""
    return random.Random(f"{seed}/{purpose}")


@dataclass(frozen=True)
class TestSpec:
    """Everything that defines a test; stored as ``test.json``'s ``spec``. Times are in seconds.

    ``db`` is a DB plugin's name (or ``package.module:factory``); ``db_options`` its options as given
    (the adapter's defaults fill in the rest when the test is composed). ``image``: the node image on
    Docker (``None``: the adapter's own, else :data:`DEFAULT_IMAGE`). ``checkers``: a subset of the
    workload's checkers to run (``None``: all that apply).
    """

    __test__ = False  # not a pytest test class, whatever its name says

    seed: int
    db: str
    workload: str = "register"
    nodes: int = 5
    nemesis: tuple[str, ...] = ()
    time_limit: float = 60.0
    concurrency: int = 10
    db_options: Mapping[str, Any] = field(default_factory=dict)
    platform: str = "docker"
    hosts: str | None = None
    store: str = "store"
    name: str | None = None
    op_timeout: float = 5.0
    nemesis_interval: float = 10.0
    recovery_timeout: float = 30.0
    leader_timeout: float = 30.0
    check_timeout: float = 120.0
    rate: float | None = 10.0
    image: str | None = None
    checkers: tuple[str, ...] | None = None
    node_memory: str = NODE_MEMORY
    """Docker: each node container's memory limit (``harness.topology``)."""
    node_pids: int = NODE_PIDS
    """Docker: each node container's limit of processes and threads."""
    client_binding: str = "leader"
    """Where a worker's operations go first (``workloads.ops.CLIENT_BINDINGS``); a spec stored before the
    binding existed reads as ``leader``, which is what those runs did."""
    leader_group: str = "most"
    """Where the system reports a leader per group: whose leader faults aimed at "the leader" hit
    (``nemesis.faults.LEADER_GROUP_SELECTORS`` or a group's name); a single-group system is unaffected, and a
    spec stored before groups existed reads as ``most``, which is what those runs did."""
    storm_pacing: str = DEFAULT_STORM_PACING
    """Whether election storms wait for the system (``system``) or keep their drawn offsets (``clock``, what
    every run stored before pacing existed did): :mod:`harness.pacing`."""
    min_coverage: float | None = None
    """With a share (0 to 1): a valid run that applied less of its fault schedule is unknown
    (``harness.coverage``); ``None``: under-exercised runs are flagged, their verdict kept."""
    workload_options: Mapping[str, Any] = field(default_factory=dict)
    """The workload's options as given (``--workload-opt``; ``workloads.generator.workload_options`` lists
    each workload's); its constructor's defaults fill in the rest."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "nemesis", tuple(self.nemesis))
        object.__setattr__(self, "db_options", dict(self.db_options))
        object.__setattr__(self, "workload_options", dict(self.workload_options))
        if self.checkers is not None:
            object.__setattr__(self, "checkers", tuple(self.checkers))

    def check(self) -> None:
        """Check every field's type and range (:data:`LIMITS`); :class:`ConfigError` for the first wrong."""
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ConfigError(f"--seed must be a whole number, not {self.seed!r}")
        for name in ("db", "workload", "platform", "store"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ConfigError(f"--{name.replace('_', '-')} must be a non-empty name, not {value!r}")
        if self.platform not in PLATFORMS:
            raise ConfigError(f"unknown platform {self.platform!r}; valid: {', '.join(PLATFORMS)}")
        for name in ("hosts", "name", "image"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(f"--{name} must be a non-empty string, not {value!r}")
        if self.name is not None and ("/" in self.name or self.name in (".", "..")):
            raise ConfigError(f"--name must not contain '/' or be '.' or '..', not {self.name!r}")
        if not all(isinstance(n, str) and n for n in self.nemesis):
            raise ConfigError(f"--nemesis must be package names, not {list(self.nemesis)!r}")
        if self.checkers is not None and not all(isinstance(n, str) and n for n in self.checkers):
            raise ConfigError(f"--checkers must be checker names, not {list(self.checkers)!r}")
        if self.client_binding not in CLIENT_BINDINGS:
            raise ConfigError(f"--client-binding must be one of {', '.join(CLIENT_BINDINGS)}, not {self.client_binding!r}")
        try:
            parse_leader_group(self.leader_group)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        try:
            check_storm_pacing(self.storm_pacing)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if self.min_coverage is not None and not (isinstance(self.min_coverage, int | float)
                                                  and 0 <= self.min_coverage <= 1):
            raise ConfigError(f"--min-coverage must be a share between 0 and 1, not {self.min_coverage!r}")
        if not all(isinstance(k, str) for k in self.workload_options):
            raise ConfigError(f"--workload-opt names must be strings, not {list(self.workload_options)!r}")
        try:
            check_workload_options(self.workload, self.workload_options)
        except ValueError as exc:
            raise ConfigError(f"--workload-opt: {exc}") from None
        for name, limit in LIMITS.items():
            limit.check(name, getattr(self, name))
        try:
            memory_bytes(self.node_memory)
        except ValueError as exc:
            raise ConfigError(f"--node-memory: {exc}") from None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["nemesis"] = list(self.nemesis)
        data["db_options"] = dict(self.db_options)
        data["workload_options"] = dict(self.workload_options)
        data["checkers"] = None if self.checkers is None else list(self.checkers)
        return data

    @classmethod
    def from_json(cls, data: Any, where: str = "test spec") -> TestSpec:
        """A spec from ``test.json``'s ``spec``, checked field by field (:class:`ConfigError` names the
        field); specs written before DB options existed are read too (module docstring)."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where} is not an object: {type(data).__name__}")
        data = _migrate(dict(data))
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError(f"{where} has unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        for required in ("seed", "db"):
            if required not in data:
                raise ConfigError(f"{where} has no {required!r}")
        for name in ("nemesis", "checkers"):
            value = data.get(name)
            if value is not None and not isinstance(value, list | tuple):
                raise ConfigError(f"{where}: {name} must be a list of names, not {value!r}")
        for name in ("db_options", "workload_options"):
            if not isinstance(data.get(name, {}), Mapping):
                raise ConfigError(f"{where}: {name} must be an object, not {data[name]!r}")
        spec = cls(**data)
        try:
            spec.check()
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        return spec


def _migrate(data: dict[str, Any]) -> dict[str, Any]:
    """A spec of an earlier format in today's: one with no ``storm_pacing`` was written when every storm was
    paced by the clock; one of the first format has ``mode``, ``bugs``, ``node_args`` of the bundled cluster."""
    data.setdefault("storm_pacing", "clock")
    old = {k: data.pop(k) for k in ("mode", "bugs", "node_args") if k in data}
    if not old:
        return data
    options = dict(data.get("db_options") or {})
    if "mode" in old:
        options.setdefault("mode", old["mode"])
    if old.get("bugs"):
        options.setdefault("bug", list(old["bugs"]))
    args = list(old.get("node_args") or [])
    core = {}
    for flag, setting in zip(args[::2], args[1::2], strict=False):
        if flag == "--core-option" and isinstance(setting, str) and "=" in setting:
            name, _, raw = setting.partition("=")
            try:
                core[name] = json.loads(raw)
            except ValueError:
                core[name] = raw
    if core:
        options.setdefault("core", core)
    data["db_options"] = options
    return data
