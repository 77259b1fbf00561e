"""The interpreter: the only place where generated operations and faults become concurrent tasks.

One asyncio event loop runs, for the chaos phase of a test:

* ``concurrency`` client *workers*. A worker takes the next operation of its process's stream, waits
  the operation's think time, records its invoke, runs it through its client with a per-operation
  timeout, and records the completion. A call that hangs past the timeout, or fails in a way that
  does not say whether it happened, completes ``info``; the logical process is then retired and the worker goes on as a new process id with a new
  client and that process's stream (FORMATS.md: after ``info`` a process never invokes again). With
  ``client_binding = "node"`` every operation of worker slot ``s`` goes to node ``s mod n`` first, in
  every process the slot runs (``workloads.ops.CLIENT_BINDINGS``); the invoke records that node.
* the *nemesis*, process ``"nemesis"``, which walks the fault schedule (offsets in seconds from the
  start), resolves run-time targets such as "the current leader" against the latest status observations,
  applies each fault and records it as an invoke/completion pair whose completion carries what was
  actually applied, or the error that prevented it.
* one *status poller* per node, each on its own process id, which asks its node for its status about
  once a second and records the observation as a client-like ``status`` operation (``ok`` value:
  ``node``, ``role``, ``term``, ``leader``, ``commit_lsn``, ``last_lsn``, and ``groups`` where the system
  reports a leader per group). These feed the leader timeline, single-leader-per-term on systems without
  journals, and leader targeting.

When the time limit is reached the workers stop taking new operations (those in flight finish or time
out), the nemesis stops after its current fault, and the *final phase* runs: the nemesis applies the
schedule's final heal phase (its entries at the time limit) and then whatever its driver still sees in
effect (heal partitions, reset clocks, resume paused processes, restart killed ones), the interpreter
waits for recovery (after the heal, a leader that says it leads and that a majority acknowledges), then
each node receives the workload's final operations (register: a read of every key; queue: a drain),
recorded like any other.

Process ids: workers start as ``0 .. concurrency-1``, pollers take the next ``len(nodes)`` ids, and
every replacement process takes the next unused id after those.

Before the first operation, with a status probe, the interpreter waits (bounded by ``leader_timeout``)
until some node says it leads (the cluster, or one of its groups); that wait is not recorded, and the
history's time 0 is when the workload starts (:meth:`HistoryWriter.start`).

Groups (a storage shard, a partition, a queue with a leader of its own: docs/db-adapter.md, "The status
contract"). Where statuses report ``groups``, :class:`ClusterView` keeps each group's leader, and the last
node known to lead it; a fault aimed at "the leader" hits the node the run's leader-group selector picks
(``InterpreterConfig.leader_group``, ``nemesis.faults.choose_leader``: by default the node that leads the
most groups), a group whose leader is not freshly known through the last node known to lead it, and its
completion names the group it aimed at; recovery waits for a leader in every group. A system that reports
no groups is treated exactly as before groups existed.

Time: the interpreter reads only ``clock()`` (monotonic seconds, default: the event loop's clock) and
waits only through the event loop. That is what makes it the simulator's interpreter too: there it runs
on a virtual-time loop (``harness.sim.loop``), so every rule here holds in container and simulated runs
alike, written once. Faults are applied through ``nemesis.driver.FaultDriver`` by ``run_fault`` (a worker
thread on real hosts, whose shells block; a direct call in the simulator, which must not use threads).

``scripts`` replace the workload's streams with fixed operations per worker slot (a shrunk or hand-written
run): slot ``s`` invokes its list in order, whatever process id it has at the time, then idles.
:attr:`Interpreter.invoked` records what each slot invoked in the chaos phase.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import math
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.db import GROUP_FIELDS, GROUPS, STATUS_FIELDS, StatusError
from harness.history import HistoryWriteError, HistoryWriter
from harness.pacing import Pacing, PacingRules, PackagePacing, Step, split_schedule
from nemesis.faults import Outcome, aims_at_leader, choose_leader, parse_leader_group, selected_group
from workloads.ops import FinalOps, Op, bind, home_node

log = logging.getLogger(__name__)

NEMESIS_PROCESS = "nemesis"
STATUS_F = "status"
READ_LIKE = frozenset({"read", "consume", "status", "poll"})
FINAL_GIVE_UP_AFTER = 3  # consecutive info completions after which a node's final operations stop


@dataclass(frozen=True)
class Completion:
    """How an operation ended, in FORMATS.md's terms (``ok``, ``fail`` or ``info``)."""

    type: str
    value: Any = None
    node: str | None = None
    lsn: Any = None
    error: str | None = None
    group: str | None = None

    def __post_init__(self) -> None:
        if self.type not in ("ok", "fail", "info"):
            raise ValueError(f"a completion is ok, fail or info, not {self.type!r}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | Completion) -> Completion:
        if isinstance(data, Completion):
            return data
        return cls(
            type=data["type"],
            value=data.get("value"),
            node=data.get("node"),
            lsn=data.get("lsn"),
            error=data.get("error"),
            group=data.get("group"),
        )

    def recorded_value(self, op: Op) -> Any:
        """The ``value`` of ``op``'s completion line (FORMATS.md): a read-like operation carries what it
        observed when ok (possibly null), else null; any other operation repeats what was asked, unless it
        ended ok with a value of its own from the node."""
        if op.f in READ_LIKE:
            return self.value if self.type == "ok" else None
        if self.type == "ok" and self.value is not None:
            return self.value
        return op.value


def served_where_asked(op: Op, completion: Completion) -> Completion:
    """``completion``, unless a local operation (``op.local``: a final read or poll that checks one node's
    own state) was answered ``ok`` by another node than the one it names: then ``fail``, saying which
    node answered. Such an answer says nothing about the named node, and a read or a poll has no effect,
    so nothing is lost by calling it failed (docs/db-adapter.md, "Final local reads")."""
    if not op.local or completion.type != "ok" or completion.node in (None, op.node):
        return completion
    return Completion("fail", node=completion.node, group=completion.group,
                      error=f"served by {completion.node}, not {op.node}: a local {op.f} must be answered by "
                            "the node it names")


class Workload(Protocol):
    """The operations of a test (``workloads.ops.Workload``): an endless seeded stream per logical
    process, and the final phase's operations at one node over the keys the run used."""

    def stream(self, process: int) -> Iterator[Op]: ...

    def final_ops(self, node: str, keys: Sequence[str]) -> FinalOps: ...


class WorkloadClient(Protocol):
    """One logical process's connection to the system under test."""

    async def invoke(self, op: Op) -> Completion | Mapping[str, Any]: ...

    async def close(self) -> None: ...

    # Optional: ``prepare(op) -> Op``, called before the invoke is recorded, without I/O, to fill in what
    # only the client knows (``workloads.log``: the offset a poll reads from). ``Interpreter._execute``.


ClientFactory = Callable[[int], Awaitable[WorkloadClient]]
StatusProbe = Callable[[str, float], Awaitable[Mapping[str, Any]]]
"""``await probe(node, timeout)``: that node's status, or raises (``StatusError``, ``TimeoutError``, ...)."""
CatchUpProbe = Callable[[str, float], Awaitable[bool]]
"""``await caught_up(node, timeout)``: whether the node holds everything committed (``harness.db.CatchUp``)."""


class ScheduledFault(Protocol):
    """A fault of the nemesis schedule (``nemesis.generator.ScheduledFault``): apply ``fault`` ``at``
    seconds after the test started."""

    @property
    def at(self) -> float: ...

    @property
    def fault(self) -> Any: ...


FaultOutcome = Outcome
"""What applying a fault did (``nemesis.faults.Outcome``): ``value`` applied, ``error`` why not."""


class NemesisDriver(Protocol):
    """Applies faults (pure data from the nemesis generator): ``nemesis.driver.FaultDriver``."""

    def describe(self, fault: Any) -> tuple[str, Any]:
        """The ``f`` and ``value`` recorded on the fault's invoke."""
        ...

    def apply(self, fault: Any, leader: str | None) -> Outcome:
        """Apply ``fault`` now, resolving leader-aimed targets to ``leader``."""
        ...

    def recovery_faults(self) -> list[Any]:
        """Faults that undo everything still in effect: heal, clock reset, resume, restart."""
        ...

    def active(self) -> list[str]:
        """Short descriptions of the faults in effect now (for the live view)."""
        ...


FaultRunner = Callable[[Callable[[], Outcome]], Awaitable[Outcome]]
"""How a fault's (possibly blocking) application is awaited: ``asyncio.to_thread`` on real hosts."""


async def run_in_thread(apply: Callable[[], Outcome]) -> Outcome:
    """A ``FaultRunner`` for platforms whose faults block (shell commands over remotes)."""
    return await asyncio.to_thread(apply)


@dataclass
class NodeObservation:
    """The latest status a poller got from a node, and when (interpreter clock, seconds)."""

    at: float
    status: Mapping[str, Any] | None
    error: str | None = None


class ClusterView:
    """What the status pollers last saw: who leads, in which term, per group where the system reports
    groups. Observations go stale; the last node known to lead each group is remembered."""

    def __init__(self, nodes: Sequence[str], clock: Callable[[], float], stale_after: float = 3.0) -> None:
        self.nodes = tuple(nodes)
        self._clock = clock
        self.stale_after = stale_after
        self.observations: dict[str, NodeObservation] = {}
        self.members: dict[str, set[str]] = {}
        """Group -> the nodes that have reported it (empty: the system reports no groups)."""
        self.cluster_level = False
        """Whether a grouped system has a cluster-level leader: some status claimed or named one."""
        self._last: dict[str | None, tuple[int, int, str]] = {}  # group -> (term, claimed, node), grouped only

    @property
    def grouped(self) -> bool:
        """Whether some status has reported ``groups``."""
        return bool(self.members)

    def observe(self, node: str, status: Mapping[str, Any] | None, error: str | None = None) -> None:
        self.observations[node] = NodeObservation(self._clock(), status, error)
        if status is None or not (self.members or status.get(GROUPS)):
            return
        if status.get("role") == "leader" or status.get("leader"):
            self.cluster_level = True
            self._remember(None, node, status)
        for entry in group_entries(status):
            self.members.setdefault(entry["group"], set()).add(node)
            self._remember(entry["group"], node, entry)

    def _remember(self, group: str | None, node: str, view: Mapping[str, Any]) -> None:
        """Keep the last node known to lead ``group``: a claim, else a leader named, in the highest term."""
        claimed = view.get("role") == "leader"
        leader = node if claimed else view.get("leader")
        if not isinstance(leader, str) or not leader:
            return
        seen = (_term(view), int(claimed), leader)
        known = self._last.get(group)
        if known is None or seen[:2] >= known[:2]:
            self._last[group] = seen

    def fresh(self, since: float | None = None) -> dict[str, Mapping[str, Any]]:
        """Status of every node that answered within ``stale_after`` seconds (and at or after ``since``)."""
        now = self._clock()
        return {
            node: obs.status
            for node, obs in self.observations.items()
            if obs.status is not None
            and now - obs.at <= self.stale_after
            and (since is None or obs.at >= since)
        }

    def leader(self, since: float | None = None) -> tuple[str | None, int | None]:
        """The node that claims leadership in the highest term among fresh observations, and that term.

        If no node claims it, the leader most fresh followers name in their highest term.
        ``since``: only observations made at or after that time count.
        """
        return _leader_of(self.fresh(since))

    def group_statuses(self, group: str, since: float | None = None) -> dict[str, Mapping[str, Any]]:
        """Each freshly observed node's entry for ``group`` (what :meth:`leader` reads for the
        cluster-level group)."""
        return {
            node: entry
            for node, status in self.fresh(since).items()
            for entry in group_entries(status)
            if entry["group"] == group
        }

    def group_leader(self, group: str, since: float | None = None) -> tuple[str | None, int | None]:
        """:meth:`leader`'s rule within one group."""
        return _leader_of(self.group_statuses(group, since))

    def leaders(self) -> dict[str | None, str | None]:
        """Each known group's leader to aim at (the key ``None``: the cluster-level group, where there is
        one): the fresh one by :meth:`leader`'s rule, else the last node known to lead it."""
        out: dict[str | None, str | None] = {}
        if self.cluster_level:
            out[None] = self.leader()[0] or self._last_leader(None)
        for group in sorted(self.members):
            out[group] = self.group_leader(group)[0] or self._last_leader(group)
        return out

    def _last_leader(self, group: str | None) -> str | None:
        known = self._last.get(group)
        return known[2] if known else None

    def target(
        self, selector: str = "most", rng: random.Random | None = None
    ) -> tuple[str | None, str | None, str | None]:
        """The node a fault aimed at "the leader" hits now, the group it is aimed at, and why there is
        none (``nemesis.faults.choose_leader``). A system that reports no groups has one: its leader by
        :meth:`leader`, whatever the selector (unless it names a group), with no reason of its own when
        none is known (the fault driver says it)."""
        if not self.grouped:
            named = selected_group(selector)
            if named is not None:
                return None, named, f"no status has reported group {named!r}, so it has no leader to target"
            return self.leader()[0], None, None
        return choose_leader(selector, self.leaders(), self.nodes, rng)

    def recovered(self, since: float | None = None) -> bool:
        """The cluster can serve the final operations: a leader that, freshly observed, says itself that it
        leads, and a majority of nodes (the leader included), freshly observed, name it in its term.

        The leader's own word is required because followers keep naming a leader for a few heartbeats
        after it stepped down (its quorum timed out while it was cut off): final reads sent then all fail
        ``not-leader``, and a durability check over failed final reads cannot tell a lost write from an
        unreachable one. ``since`` (the time of the final heal): only what was observed afterwards counts,
        because an observation from before the heal may name a leader the heal is about to depose. The
        simulator applies the same rule (docs/simulation.md).

        Where statuses report groups, the rule must hold in every group known (and in the cluster-level
        group where there is one), a majority being of the nodes that have reported the group.
        """
        return not self.unrecovered(since)

    def unrecovered(self, since: float | None = None) -> list[str]:
        """The groups without a recovered leader (:meth:`recovered`), ``"cluster"`` naming the
        cluster-level group; empty when the cluster has recovered."""
        waiting = []
        if (not self.grouped or self.cluster_level) and not _recovered_in(self.fresh(since), len(self.nodes)):
            waiting.append("cluster")
            if not self.grouped:
                return waiting
        for group, members in sorted(self.members.items()):
            if not _recovered_in(self.group_statuses(group, since), len(members)):
                waiting.append(group)
        return waiting


def group_entries(status: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The well-formed entries of a status's ``groups`` (objects with a string ``group``)."""
    groups = status.get(GROUPS)
    if not isinstance(groups, list):
        return
    for entry in groups:
        if isinstance(entry, Mapping) and isinstance(entry.get("group"), str):
            yield entry


def leads_something(status: Mapping[str, Any]) -> bool:
    """Whether a status says its node leads the cluster or one of its groups."""
    return status.get("role") == "leader" or any(e.get("role") == "leader" for e in group_entries(status))


def _term(view: Mapping[str, Any]) -> int:
    term = view.get("term")
    return term if isinstance(term, int) and not isinstance(term, bool) else 0


def _leader_of(statuses: Mapping[str, Mapping[str, Any]]) -> tuple[str | None, int | None]:
    """:meth:`ClusterView.leader`'s rule over one group's views (node -> its status, or its group entry)."""
    claims = [
        (int(s.get("term") or 0), node) for node, s in statuses.items() if s.get("role") == "leader"
    ]
    if claims:
        term, node = max(claims)
        return node, term
    named = [(int(s.get("term") or 0), s.get("leader")) for s in statuses.values() if s.get("leader")]
    if named:
        top = max(term for term, _ in named)
        votes = Counter(leader for term, leader in named if term == top)
        return votes.most_common(1)[0][0], top
    return None, max((int(s.get("term") or 0) for s in statuses.values()), default=None)


def _recovered_in(statuses: Mapping[str, Mapping[str, Any]], size: int) -> bool:
    """:meth:`ClusterView.recovered`'s rule over one group's views, a majority being of ``size`` nodes."""
    leader, term = _leader_of(statuses)
    if leader is None or (statuses.get(leader) or {}).get("role") != "leader":
        return False
    agreeing = sum(
        1
        for node, s in statuses.items()
        if (s.get("leader") == leader or (node == leader and s.get("role") == "leader"))
        and int(s.get("term") or 0) == term
    )
    return agreeing > size // 2


@dataclass(frozen=True)
class InterpreterConfig:
    """Timings of one run, in seconds."""

    concurrency: int
    time_limit: float
    op_timeout: float = 5.0
    status_interval: float = 1.0
    status_timeout: float = 1.0
    recovery_timeout: float = 30.0
    final_op_timeout: float = 10.0
    leader_timeout: float = 30.0
    """Before the first operation: how long to wait for some node to say it leads (then start anyway)."""
    leader_poll: float = 0.2
    client_binding: str = "leader"
    """Where a worker's operations go first (``workloads.ops.CLIENT_BINDINGS``)."""
    leader_group: str = "most"
    """Whose leader faults aimed at "the leader" hit where the system has several groups
    (``nemesis.faults.LEADER_GROUP_SELECTORS``, or a group's name)."""
    pacing: PacingRules | None = None
    """With rules: election storms are paced by the system, waits bounded by them (:mod:`harness.pacing`);
    ``None`` (the default): every step at its scheduled offset."""

    def __post_init__(self) -> None:
        home_node(self.client_binding, 0, ())  # a bad name fails here, with the valid ones
        parse_leader_group(self.leader_group)
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        if self.time_limit <= 0:
            raise ValueError(f"the time limit must be positive, not {self.time_limit}")


@dataclass
class RunStats:
    """Live counters for the CLI's view and the run's summary. Updated by the interpreter only."""

    phase: str = "starting"
    started_at: float | None = None
    first_op_at: float | None = None
    invoked: int = 0
    completed: Counter[str] = field(default_factory=Counter)
    status_polls: Counter[str] = field(default_factory=Counter)
    faults_scheduled: Counter[str] = field(default_factory=Counter)
    faults_invoked: Counter[str] = field(default_factory=Counter)
    faults_applied: Counter[str] = field(default_factory=Counter)
    fault_errors: list[str] = field(default_factory=list)
    active_faults: list[str] = field(default_factory=list)
    leader: str | None = None
    term: int | None = None
    recovered: bool | None = None
    final_ops: Counter[str] = field(default_factory=Counter)
    final_skipped: list[str] = field(default_factory=list)
    """Nodes that got no final operations because they never caught up (``harness.db.CatchUp``)."""
    pacing: Pacing = field(default_factory=Pacing)
    """What the election storms waited for (:mod:`harness.pacing`); nothing for a run without one."""

    def to_json(self) -> dict[str, Any]:
        return {
            "invoked": self.invoked,
            "completed": dict(self.completed),
            "status_polls": dict(self.status_polls),
            "faults_scheduled": dict(self.faults_scheduled),
            "faults_invoked": dict(self.faults_invoked),
            "faults_applied": dict(self.faults_applied),
            "fault_errors": list(self.fault_errors),
            "recovered": self.recovered,
            "final_ops": dict(self.final_ops),
            "final_skipped": list(self.final_skipped),
            **({"pacing": self.pacing.to_json()} if self.pacing.packages else {}),
        }


class Signal:
    """A one-way flag tasks wait on, as ``asyncio.Event`` (``set``, ``is_set``, ``wait``), with a bounded
    wait that needs no cancellation: :meth:`wait_at_most`.

    Waiting for an ``asyncio.Event`` under ``asyncio.timeout`` ends by cancelling the task when the time
    is up (a ``CancelledError`` through every frame, turned into ``TimeoutError``), and workers wait so
    between all their operations. Here the timer and :meth:`set` both just complete the waiter's future,
    in the same turns of the loop as the cancellation did: one timer at the same time, one wake-up, and
    waiters woken by ``set`` in the order they began to wait, bounded waits or not. So a run on the
    virtual-time loop interleaves exactly as before (the simulator's histories did not change)."""

    def __init__(self) -> None:
        self._value = False
        self._waiters: collections.deque[asyncio.Future[bool]] = collections.deque()

    def is_set(self) -> bool:
        return self._value

    def set(self) -> None:
        """Set the flag and wake every waiter, in the order they began to wait."""
        if not self._value:
            self._value = True
            for future in self._waiters:
                if not future.done():
                    future.set_result(True)

    async def wait(self) -> bool:
        """Wait until the flag is set (at once if it is)."""
        if self._value:
            return True
        future = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            return await future
        finally:
            self._waiters.remove(future)

    async def wait_at_most(self, seconds: float) -> bool:
        """Wait until the flag is set or ``seconds`` have passed: ``True`` if it was set. The timer is the
        one ``asyncio.timeout(seconds)`` arms (at the loop's time + ``seconds``; a deadline not after the
        loop's time is due at once)."""
        if self._value:
            return True
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        expired: list[bool] = []
        when = loop.time() + seconds
        timer = (loop.call_soon(_time_up, future, expired) if when <= loop.time()
                 else loop.call_at(when, _time_up, future, expired))
        self._waiters.append(future)
        try:
            # A timer that fires after ``set`` but before this task resumed still wins, as the timeout's
            # cancellation did.
            return await future and not expired
        finally:
            timer.cancel()
            self._waiters.remove(future)


def _time_up(future: asyncio.Future[bool], expired: list[bool]) -> None:
    expired.append(True)
    if not future.done():
        future.set_result(False)


class Interpreter:
    """Runs one test's chaos phase and final phase, writing every event to ``history``."""

    def __init__(
        self,
        history: HistoryWriter,
        *,
        nodes: Sequence[str],
        workload: Workload,
        open_client: ClientFactory,
        config: InterpreterConfig,
        nemesis: NemesisDriver | None = None,
        schedule: Iterable[ScheduledFault] = (),
        status: StatusProbe | None = None,
        caught_up: CatchUpProbe | None = None,
        clock: Callable[[], float] | None = None,
        stats: RunStats | None = None,
        run_fault: FaultRunner = run_in_thread,
        scripts: Mapping[int, Sequence[Op]] | None = None,
        on_start: Callable[[], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.history = history
        self.nodes = tuple(nodes)
        self.workload = workload
        self.open_client = open_client
        self.config = config
        self.nemesis = nemesis
        self.schedule = sorted(schedule, key=lambda entry: entry.at)
        if self.schedule and nemesis is None:
            raise ValueError("a fault schedule needs a nemesis driver to apply it")
        self.status = status
        self.caught_up = caught_up
        self.run_fault = run_fault
        self.scripts = None if scripts is None else {int(slot): list(ops) for slot, ops in scripts.items()}
        self.on_start = on_start
        self.rng = rng if rng is not None else random.Random(0)
        """Draws the group a ``random`` leader-group selector aims at (the run's: ``rng_for(seed, ...)``)."""
        self.invoked: dict[int, list[Op]] = {}
        """Worker slot -> the operations it invoked in the chaos phase, in order."""
        self._clock = clock
        self.stats = stats if stats is not None else RunStats()
        self.view = ClusterView(self.nodes, self.clock)
        self._next_process = config.concurrency + len(self.nodes)
        self.keys: set[str] = set()  # every key the chaos phase used: the final phase reads them all
        self._stopping: Signal | None = None
        self._polling_done: Signal | None = None
        self._start = 0.0
        self._last_ok = -math.inf
        """When a chaos-phase operation last completed ``ok`` (interpreter clock): a paced storm's
        "serving again" (:mod:`harness.pacing`)."""
        self._fault_lock: asyncio.Lock | None = None
        for entry in self.schedule:
            f, _ = nemesis.describe(entry.fault) if nemesis else ("?", None)
            self.stats.faults_scheduled[f] += 1

    def clock(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    def elapsed(self) -> float:
        return self.clock() - self._start

    def new_process(self) -> int:
        process = self._next_process
        self._next_process += 1
        return process

    async def run(self) -> RunStats:
        """Wait for a first leader, then the chaos phase for ``time_limit`` seconds, then the final phase.
        Returns the counters."""
        self._stopping = Signal()
        self._polling_done = Signal()
        if self.status is not None:
            await self._wait_for_leader()
        self.history.start()
        if self.on_start is not None:
            self.on_start()
        self._start = self.clock()
        self.stats.started_at = self._start
        self.stats.phase = "chaos"
        pollers = [
            asyncio.create_task(self._poll_status(node, self.config.concurrency + i), name=f"status-{node}")
            for i, node in enumerate(self.nodes)
            if self.status is not None
        ]
        workers = [
            asyncio.create_task(self._worker(slot), name=f"worker-{slot}")
            for slot in range(self.config.concurrency)
        ]
        nemesis = asyncio.create_task(self._nemesis(), name="nemesis")
        for task in (*pollers, *workers, nemesis):
            task.add_done_callback(self._stop_if_history_failed)
        try:
            await self._sleep_until(self.config.time_limit, self._stopping)
            self._stopping.set()
            self.stats.phase = "stopping"
            await asyncio.gather(*workers)
            await nemesis
            self.stats.phase = "recovering"
            await self._recover()
            self.stats.phase = "final"
            await self._final_phase()
            self.stats.phase = "done"
        finally:
            self._stopping.set()
            self._polling_done.set()
            for task in (*workers, nemesis):
                task.cancel()
            await asyncio.gather(*workers, nemesis, return_exceptions=True)
            if pollers:
                await asyncio.gather(*pollers, return_exceptions=True)
        return self.stats

    def _stop_if_history_failed(self, task: asyncio.Task) -> None:
        """A task that could not write the history (a full disk) stops the run now, not at its time limit:
        ``run`` then raises the error, and the run ends as interrupted."""
        if not task.cancelled() and isinstance(task.exception(), HistoryWriteError):
            self._stopping.set()

    async def _wait_for_leader(self) -> None:
        """Before the first operation, wait (bounded) until some node says it leads. Not recorded."""
        assert self.status is not None
        deadline = self.clock() + self.config.leader_timeout
        while self.clock() < deadline:
            for node in self.nodes:
                try:
                    status = await asyncio.wait_for(self.status(node, self.config.status_timeout),
                                                    self.config.status_timeout + 0.5)
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 - not up yet
                    continue
                if leads_something(status):
                    log.info("first leader %s in term %s", node, status.get("term"))
                    return
            await asyncio.sleep(self.config.leader_poll)
        log.warning("no leader within %.0f s of starting the nodes; starting the workload anyway",
                    self.config.leader_timeout)

    # -- waiting --------------------------------------------------------------------------------------

    async def _sleep_until(self, offset: float, interrupt: Signal | None = None) -> bool:
        """Wait until ``offset`` seconds after the start; ``False`` if ``interrupt`` was set first."""
        delay = offset - self.elapsed()
        if interrupt is None:
            if delay > 0:
                await asyncio.sleep(delay)
            return True
        if interrupt.is_set():
            return False
        if delay <= 0:
            return True
        return not await interrupt.wait_at_most(delay)  # no task nor cancellation per wait

    # -- clients --------------------------------------------------------------------------------------

    async def _worker(self, slot: int) -> None:
        """One client slot: its process's stream, each op after its think time, until the time limit."""
        assert self._stopping is not None
        process = slot
        home = home_node(self.config.client_binding, slot, self.nodes)
        stream = self._stream(slot, process)
        client = await self.open_client(process)
        try:
            while not self._stopping.is_set():
                op = next(stream, None)
                if op is None:  # a script ran out: the slot idles until the time limit
                    break
                op = bind(op, home)
                if op.think > 0 and not await self._pause(op.think):
                    break
                if op.key is not None:
                    self.keys.add(op.key)
                self.invoked.setdefault(slot, []).append(op)
                completion = await self._execute(process, client, op, self.config.op_timeout)
                if completion.type == "info":
                    await _close_quietly(client)
                    process = self.new_process()
                    if self.scripts is None:
                        stream = self.workload.stream(process)
                    client = await self.open_client(process)
        finally:
            await _close_quietly(client)

    def _stream(self, slot: int, process: int) -> Iterator[Op]:
        if self.scripts is not None:
            return iter(self.scripts.get(slot, ()))
        return self.workload.stream(process)

    async def _pause(self, seconds: float) -> bool:
        """Wait ``seconds``; ``False`` if the time limit came first."""
        assert self._stopping is not None
        return not await self._stopping.wait_at_most(seconds)

    async def _execute(
        self, process: int, client: WorkloadClient, op: Op, timeout: float, *, final: bool = False
    ) -> Completion:
        """Invoke ``op`` as ``process``, wait at most ``timeout`` seconds, record the completion.

        Final-phase invokes carry ``"final": true``, which the durability checker reads. A client with a
        ``prepare(op) -> Op`` method (:class:`WorkloadClient`) is given the op first, and the invoke records
        what it returns: the log workload's client fills in the offset a poll reads from there.
        """
        prepare = getattr(client, "prepare", None)
        if prepare is not None:
            op = prepare(op)  # fills in what only the client knows, e.g. where a poll reads from
        # ``final`` is written only on the final phase's invokes (the writer omits a None field).
        self.history.invoke(process, op.f, op.key, op.value, node=op.node, final=final or None)
        self.stats.invoked += 1
        if self.stats.first_op_at is None:
            self.stats.first_op_at = self.clock()
            log.info("first operation invoked: process %s %s %s", process, op.f, op.key)
        try:
            async with asyncio.timeout(timeout):
                reply = await client.invoke(op)
            completion = Completion.from_mapping(reply)
        except TimeoutError:
            completion = Completion("info", node=op.node, error=f"timeout after {timeout:g} s")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - an unexpected client failure is indeterminate
            completion = Completion("info", node=op.node, error=f"client raised {type(exc).__name__}: {exc}")
        completion = served_where_asked(op, completion)
        self.history.complete(
            process,
            completion.type,
            op.f,
            op.key,
            completion.recorded_value(op),
            node=completion.node or op.node,
            lsn=completion.lsn,
            error=completion.error,
            group=completion.group,
        )
        self.stats.completed[completion.type] += 1
        if completion.type == "ok" and not final:
            self._last_ok = self.clock()
        return completion

    # -- status ---------------------------------------------------------------------------------------

    async def _poll_status(self, node: str, process: int) -> None:
        assert self.status is not None and self._polling_done is not None
        tick = 0
        while not self._polling_done.is_set():
            self.history.invoke(process, STATUS_F, None, None, node=node)
            kind, value, error = "ok", None, None
            try:
                async with asyncio.timeout(self.config.status_timeout):
                    status = await self.status(node, self.config.status_timeout)
                value = {name: status.get(name) for name in STATUS_FIELDS}
                value["node"] = value["node"] or node
                groups = status.get(GROUPS)
                if groups is not None:  # a single-group system's observation stays as it was
                    value[GROUPS] = [
                        {name: entry.get(name) for name in GROUP_FIELDS} if isinstance(entry, Mapping) else entry
                        for entry in groups
                    ] if isinstance(groups, list | tuple) else groups
                self.view.observe(node, value)
            except TimeoutError:
                kind, error = "info", f"no status within {self.config.status_timeout:g} s"
            except StatusError as exc:
                kind, error = ("fail" if exc.definite else "info"), str(exc)
            except ConnectionRefusedError as exc:
                kind, error = "fail", f"connection refused: {exc}"
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a status read has no effect; record why it failed
                kind, error = "info", f"{type(exc).__name__}: {exc}"
            if kind != "ok":
                self.view.observe(node, None, error)
            self.history.complete(process, kind, STATUS_F, None, value, node=node, error=error)
            self.stats.status_polls[kind] += 1
            self.stats.leader, self.stats.term = self.view.leader()
            if kind == "info":
                process = self.new_process()
            tick += 1
            await self._wait_polling(tick * self.config.status_interval)

    async def _wait_polling(self, offset: float) -> None:
        assert self._polling_done is not None
        await self._sleep_until(offset, self._polling_done)

    # -- nemesis --------------------------------------------------------------------------------------

    async def _nemesis(self) -> None:
        """The chaos phase's faults, in schedule order, each no earlier than its offset.

        Faults the nemesis has not reached when the time limit comes (it runs late when faults take
        long) are not applied; the schedule's entries at or after the time limit are its final heal
        phase, applied by :meth:`_recover`.
        """
        assert self._stopping is not None
        fixed, paced = split_schedule(self.schedule, self.config.time_limit)
        if not paced or self.config.pacing is None:  # every entry at its offset, one after another
            await self._play_fixed([entry for entry in self.schedule if entry.at < self.config.time_limit])
            return
        self._fault_lock = asyncio.Lock()  # one fault at a time, whichever package plays it
        await asyncio.gather(self._play_fixed(fixed),
                             *(self._play_paced(package, steps) for package, steps in paced.items()))

    async def _play_fixed(self, entries: Sequence[ScheduledFault]) -> None:
        assert self._stopping is not None
        for entry in entries:
            if not await self._sleep_until(entry.at, self._stopping):
                break
            await self._apply_fault_in_turn(entry.fault)

    async def _play_paced(self, package: str, steps: Sequence[Step]) -> None:
        """One storm's steps in order, each waiting for the effect it wants (:mod:`harness.pacing`); a step
        delayed moves every later one of the package by as much."""
        assert self._stopping is not None
        rules, pacing = self.config.pacing, self.stats.pacing.of(package)
        assert rules is not None
        shift = 0.0
        previous: Step | None = None
        previous_at = 0.0  # when the previous step was applied (interpreter clock)
        term_before: int | None = None  # the leader's term when a fault that wants a successor was applied
        awaiting = False  # whether the previous step wants a successor (applied, not skipped)
        for number, step in enumerate(steps):
            due = step.at + shift
            if due >= self.config.time_limit:
                return self._left_unplayed(pacing, steps[number:])
            if previous is not None and not step.heal and previous.heal:
                # From the heal on: the first operation served, then the drawn gap from that moment.
                served_at = await self._served_at(previous_at, due + rules.serve_wait, rules.poll)
                if self._stopping.is_set():
                    return self._left_unplayed(pacing, steps[number:])
                pacing.served += served_at is not None
                pacing.unserved += served_at is None
                due = max(due, served_at + (step.at - previous.at)) if served_at is not None else due
                if due >= self.config.time_limit:
                    return self._left_unplayed(pacing, steps[number:])
            if not await self._sleep_until(due, self._stopping):
                return self._left_unplayed(pacing, steps[number:])
            if step.heal and awaiting:
                seen = await self._wait_for(lambda since=previous_at, term=term_before: self._succeeded(since, term),
                                            rules.successor_wait, rules.poll)
                if self._stopping.is_set():
                    return self._left_unplayed(pacing, steps[number:])
                pacing.successors += seen
                pacing.no_successor += not seen
            late = self.elapsed() - step.at
            if late > shift:
                pacing.delayed_s += late - shift
                shift = late
            leader_before: str | None = None
            if step.wants_successor:
                leader_before, term_before = self.view.leader()
            previous, previous_at = step, self.clock()
            pacing.steps += 1
            outcomes = [await self._apply_fault_in_turn(fault) for fault in step.faults]
            awaiting = step.wants_successor and any(outcome.applied for outcome in outcomes)
            if awaiting and step.spares(leader_before):  # a bridge through the leader: nobody is elected
                awaiting = False
                pacing.leader_spared += 1
            # The next hold or gap counts from when this step took effect, not from when it began: on a
            # loaded machine applying a step (a docker exec per node) can take seconds of its hold.
            applied_late = self.elapsed() - step.at
            if applied_late > shift:
                pacing.delayed_s += applied_late - shift
                shift = applied_late

    def _left_unplayed(self, pacing: PackagePacing, steps: Sequence[Step]) -> None:
        """Steps the storm's waits moved past the end of the chaos phase: not faults the nemesis failed to
        apply but chances the system did not take, so they leave the scheduled counts fault coverage
        compares with the applied ones (``harness.coverage``) and are counted in the storm's pacing."""
        for step in steps:
            for fault in step.faults:
                f, _ = self.nemesis.describe(fault) if self.nemesis else ("?", None)
                self.stats.faults_scheduled[f] -= 1
                pacing.past_limit += 1

    def _succeeded(self, since: float, term: int | None) -> bool:
        """Whether the pollers have seen, since ``since``, a leader in a newer term than ``term``."""
        leader, now = self.view.leader(since=since)
        return leader is not None and now is not None and (term is None or now > term)

    async def _served_at(self, since: float, until: float, poll: float) -> float | None:
        """The run's offset at which a chaos-phase operation was first seen completing ``ok`` since
        ``since`` (interpreter clock), looking until offset ``until``; ``None`` if none did."""
        served = await self._poll(lambda: self._last_ok >= since, until, poll, self._stopping)
        return self.elapsed() if served else None

    async def _wait_for(self, seen: Callable[[], bool], bound: float, poll: float) -> bool:
        """Wait until ``seen()``, at most ``bound`` seconds (or until the time limit): whether it was."""
        return await self._poll(seen, self.elapsed() + bound, poll, self._stopping)

    async def _poll(self, seen: Callable[[], bool], until: float, poll: float,
                    interrupt: Signal | None = None) -> bool:
        """Look at ``seen()`` every ``poll`` seconds until it holds (``True``), the run's offset ``until``
        or ``interrupt`` (``False``). The last wait is the rest up to ``until``, and then the answer is
        final: asking the clock again could leave a rest a rounding error above zero, a wait that ends at
        once, and in virtual time, where the clock moves only when every task waits, a loop that never
        ends (a simulated storm's successor wait once did)."""
        while not seen():
            rest = until - self.elapsed()
            if rest <= 0 or (interrupt is not None and interrupt.is_set()):
                return False
            last = rest <= poll
            if interrupt is None:
                await asyncio.sleep(rest if last else poll)
            else:
                await interrupt.wait_at_most(rest if last else poll)
            if last:
                return seen()
        return True

    async def _apply_fault_in_turn(self, fault: Any) -> Outcome:
        """:meth:`_apply_fault`, after any other package's fault being applied (storms play beside the
        fixed schedule, but the driver applies one fault at a time)."""
        if self._fault_lock is None:
            return await self._apply_fault(fault)
        async with self._fault_lock:
            return await self._apply_fault(fault)

    async def _apply_fault(self, fault: Any) -> Outcome:
        assert self.nemesis is not None
        nemesis = self.nemesis
        f, value = nemesis.describe(fault)
        self.history.invoke(NEMESIS_PROCESS, f, None, value)
        self.stats.faults_invoked[f] += 1
        group = reason = None
        if aims_at_leader(fault):
            leader, group, reason = self.view.target(self.config.leader_group, self.rng)
        else:
            leader, _ = self.view.leader()
        try:
            if leader is None and reason is not None:
                outcome = Outcome(error=reason)  # the group aimed at has no leader known: recorded as skipped
            else:
                outcome = await self.run_fault(lambda: nemesis.apply(fault, leader))
        except asyncio.CancelledError:
            self.history.complete(NEMESIS_PROCESS, "info", f, None, None, error="cancelled: the run stopped")
            raise
        except Exception as exc:  # noqa: BLE001 - a fault that could not be applied is recorded as such
            log.warning("nemesis %s could not be applied: %s: %s", f, type(exc).__name__, exc)
            log.debug("nemesis %s traceback", f, exc_info=True)
            outcome = Outcome(error=f"{type(exc).__name__}: {exc}")
        self.history.complete(
            NEMESIS_PROCESS, "ok" if outcome.applied else "info", f, None, outcome.value, error=outcome.error,
            group=group,
        )
        if outcome.applied:
            self.stats.faults_applied[f] += 1
        else:
            self.stats.fault_errors.append(f"{f}: {outcome.error}")
        self.stats.active_faults = nemesis.active()
        return outcome

    # -- final phase ----------------------------------------------------------------------------------

    async def _recover(self) -> None:
        """The schedule's final heal phase, then whatever the driver still sees in effect (a heal that
        failed, a fault the schedule does not heal); then wait, bounded, until the pollers see, after the
        heal, a leader that says it leads and that a majority names (:meth:`ClusterView.recovered`), in every
        group the statuses have reported."""
        if self.nemesis is not None:
            for entry in self.schedule:
                if entry.at >= self.config.time_limit:
                    await self._apply_fault(entry.fault)
            for fault in self.nemesis.recovery_faults():
                await self._apply_fault(fault)
        if self.status is None:
            self.stats.recovered = None
            return
        healed_at = self.clock()
        deadline = self.elapsed() + self.config.recovery_timeout
        if not await self._poll(lambda: self.view.recovered(since=healed_at), deadline,
                                self.config.status_interval / 4):
            log.warning("no leader confirmed by itself and a majority after the heal within %.0f s (%s)",
                        self.config.recovery_timeout, ", ".join(self.view.unrecovered(since=healed_at)))
            self.stats.recovered = False
            return
        self.stats.recovered = True

    async def _final_phase(self) -> None:
        """Every node gets the workload's final operations, one node after another, each on a new process;
        with a catch-up probe, only once the node says it has caught up (a node that does not within the
        recovery timeout, counted from the start of this phase, is skipped and listed in the stats)."""
        deadline = self.elapsed() + self.config.recovery_timeout
        for node in self.nodes:
            if self.caught_up is not None and not await self._wait_caught_up(node, deadline):
                log.warning("%s did not catch up within the recovery timeout; no final operations there", node)
                self.stats.final_skipped.append(node)
                continue
            process = self.new_process()
            client = await self.open_client(process)
            try:
                ops = self.workload.final_ops(node, sorted(self.keys))
                unanswered = 0
                try:
                    op = next(ops)
                    while True:
                        if op.node is None:
                            op = dataclasses.replace(op, node=node)
                        if op.think > 0:
                            await asyncio.sleep(op.think)
                        completion = await self._execute(
                            process, client, op, self.config.final_op_timeout, final=True
                        )
                        self.stats.final_ops[completion.type] += 1
                        if completion.type == "info":
                            unanswered += 1
                            await _close_quietly(client)
                            process = self.new_process()
                            client = await self.open_client(process)
                            if unanswered >= FINAL_GIVE_UP_AFTER:
                                log.warning("%s left %d final operations unanswered; giving up on it",
                                            node, unanswered)
                                ops.close()
                                break
                        else:
                            unanswered = 0
                        op = ops.send(completion)
                except StopIteration:
                    pass
            finally:
                await _close_quietly(client)


    async def _wait_caught_up(self, node: str, deadline: float) -> bool:
        """Ask ``node`` whether it has caught up until it says so or ``deadline`` (elapsed seconds) passes."""
        assert self.caught_up is not None
        while True:
            try:
                if await asyncio.wait_for(self.caught_up(node, self.config.status_timeout),
                                          self.config.status_timeout + 1.0):
                    return True
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - not answering is not caught up
                log.debug("catch-up probe of %s failed: %s", node, exc)
            if self.elapsed() >= deadline:
                return False
            await asyncio.sleep(min(self.config.status_interval / 4, max(deadline - self.elapsed(), 0.0)))


async def _close_quietly(client: WorkloadClient, timeout: float = 1.0) -> None:
    """Close a client without letting a hung connection or its error stop the run."""
    try:
        await asyncio.wait_for(client.close(), timeout)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - closing is best effort
        log.debug("closing a client failed: %s", exc)
