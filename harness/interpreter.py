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
  ``node``, ``role``, ``term``, ``leader``, ``commit_lsn``, ``last_lsn``). These feed the leader timeline,
  single-leader-per-term on systems without journals, and leader targeting.

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
until some node says it leads; that wait is not recorded, and the history's time 0 is when the workload
starts (:meth:`HistoryWriter.start`).

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
import contextlib
import dataclasses
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.db import STATUS_FIELDS, StatusError
from harness.history import HistoryWriter
from nemesis.faults import Outcome
from workloads.ops import FinalOps, Op, bind, home_node

log = logging.getLogger(__name__)

NEMESIS_PROCESS = "nemesis"
STATUS_F = "status"
READ_LIKE = frozenset({"read", "consume", "status"})
FINAL_GIVE_UP_AFTER = 3  # consecutive info completions after which a node's final operations stop


@dataclass(frozen=True)
class Completion:
    """How an operation ended, in FORMATS.md's terms (``ok``, ``fail`` or ``info``)."""

    type: str
    value: Any = None
    node: str | None = None
    lsn: Any = None
    error: str | None = None

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


class Workload(Protocol):
    """The operations of a test (``workloads.ops.Workload``): an endless seeded stream per logical
    process, and the final phase's operations at one node over the keys the run used."""

    def stream(self, process: int) -> Iterator[Op]: ...

    def final_ops(self, node: str, keys: Sequence[str]) -> FinalOps: ...


class WorkloadClient(Protocol):
    """One logical process's connection to the system under test."""

    async def invoke(self, op: Op) -> Completion | Mapping[str, Any]: ...

    async def close(self) -> None: ...


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
    """What the status pollers last saw: who leads, in which term. Observations go stale."""

    def __init__(self, nodes: Sequence[str], clock: Callable[[], float], stale_after: float = 3.0) -> None:
        self.nodes = tuple(nodes)
        self._clock = clock
        self.stale_after = stale_after
        self.observations: dict[str, NodeObservation] = {}

    def observe(self, node: str, status: Mapping[str, Any] | None, error: str | None = None) -> None:
        self.observations[node] = NodeObservation(self._clock(), status, error)

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
        fresh = self.fresh(since)
        claims = [
            (int(s.get("term") or 0), node) for node, s in fresh.items() if s.get("role") == "leader"
        ]
        if claims:
            term, node = max(claims)
            return node, term
        named = [(int(s.get("term") or 0), s.get("leader")) for s in fresh.values() if s.get("leader")]
        if named:
            top = max(term for term, _ in named)
            votes = Counter(leader for term, leader in named if term == top)
            return votes.most_common(1)[0][0], top
        return None, max((int(s.get("term") or 0) for s in fresh.values()), default=None)

    def recovered(self, since: float | None = None) -> bool:
        """The cluster can serve the final operations: a leader that, freshly observed, says itself that it
        leads, and a majority of nodes (the leader included), freshly observed, name it in its term.

        The leader's own word is required because followers keep naming a leader for a few heartbeats
        after it stepped down (its quorum timed out while it was cut off): final reads sent then all fail
        ``not-leader``, and a durability check over failed final reads cannot tell a lost write from an
        unreachable one. ``since`` (the time of the final heal): only what was observed afterwards counts,
        because an observation from before the heal may name a leader the heal is about to depose. The
        simulator applies the same rule (docs/simulation.md).
        """
        leader, term = self.leader(since)
        fresh = self.fresh(since)
        if leader is None or (fresh.get(leader) or {}).get("role") != "leader":
            return False
        agreeing = sum(
            1
            for node, s in fresh.items()
            if (s.get("leader") == leader or (node == leader and s.get("role") == "leader"))
            and int(s.get("term") or 0) == term
        )
        return agreeing > len(self.nodes) // 2


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

    def __post_init__(self) -> None:
        home_node(self.client_binding, 0, ())  # a bad name fails here, with the valid ones
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
        }


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
        self.invoked: dict[int, list[Op]] = {}
        """Worker slot -> the operations it invoked in the chaos phase, in order."""
        self._clock = clock
        self.stats = stats if stats is not None else RunStats()
        self.view = ClusterView(self.nodes, self.clock)
        self._next_process = config.concurrency + len(self.nodes)
        self.keys: set[str] = set()  # every key the chaos phase used: the final phase reads them all
        self._stopping: asyncio.Event | None = None
        self._polling_done: asyncio.Event | None = None
        self._start = 0.0
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
        self._stopping = asyncio.Event()
        self._polling_done = asyncio.Event()
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
                if status.get("role") == "leader":
                    log.info("first leader %s in term %s", node, status.get("term"))
                    return
            await asyncio.sleep(self.config.leader_poll)
        log.warning("no leader within %.0f s of starting the nodes; starting the workload anyway",
                    self.config.leader_timeout)

    # -- waiting --------------------------------------------------------------------------------------

    async def _sleep_until(self, offset: float, interrupt: asyncio.Event | None = None) -> bool:
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
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):  # no task per wait, unlike wait_for (many per second)
                await interrupt.wait()
            return False
        return True

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
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stopping.wait()
            return False
        return True

    async def _execute(
        self, process: int, client: WorkloadClient, op: Op, timeout: float, *, final: bool = False
    ) -> Completion:
        """Invoke ``op`` as ``process``, wait at most ``timeout`` seconds, record the completion.

        Final-phase invokes carry ``"final": true``, which the durability checker reads.
        """
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
        self.history.complete(
            process,
            completion.type,
            op.f,
            op.key,
            completion.recorded_value(op),
            node=completion.node or op.node,
            lsn=completion.lsn,
            error=completion.error,
        )
        self.stats.completed[completion.type] += 1
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
        for entry in self.schedule:
            if entry.at >= self.config.time_limit:
                break
            if not await self._sleep_until(entry.at, self._stopping):
                break
            await self._apply_fault(entry.fault)

    async def _apply_fault(self, fault: Any) -> Outcome:
        assert self.nemesis is not None
        nemesis = self.nemesis
        f, value = nemesis.describe(fault)
        self.history.invoke(NEMESIS_PROCESS, f, None, value)
        self.stats.faults_invoked[f] += 1
        leader, _ = self.view.leader()
        try:
            outcome = await self.run_fault(lambda: nemesis.apply(fault, leader))
        except asyncio.CancelledError:
            self.history.complete(NEMESIS_PROCESS, "info", f, None, None, error="cancelled: the run stopped")
            raise
        except Exception as exc:  # noqa: BLE001 - a fault that could not be applied is recorded as such
            log.warning("nemesis %s could not be applied: %s: %s", f, type(exc).__name__, exc)
            log.debug("nemesis %s traceback", f, exc_info=True)
            outcome = Outcome(error=f"{type(exc).__name__}: {exc}")
        self.history.complete(
            NEMESIS_PROCESS, "ok" if outcome.applied else "info", f, None, outcome.value, error=outcome.error
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
        heal, a leader that says it leads and that a majority names (:meth:`ClusterView.recovered`)."""
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
        while not self.view.recovered(since=healed_at):
            if self.elapsed() >= deadline:
                log.warning("no leader confirmed by itself and a majority after the heal within %.0f s",
                            self.config.recovery_timeout)
                self.stats.recovered = False
                return
            await asyncio.sleep(min(self.config.status_interval / 4, max(deadline - self.elapsed(), 0.0)))
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
