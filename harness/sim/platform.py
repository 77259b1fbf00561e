"""The sim platform: one test (clients, status pollers, nemesis, final phase) on a simulated world.

This is the simulator's counterpart of ``harness.interpreter``: it turns the same generated operations
and faults into the same history, with simulated processes instead of asyncio tasks, so that every step
is an event of the world's queue (:mod:`harness.sim.world`) and a seed fixes everything. The rules are the
interpreter's, restated here for processes that are callbacks:

1. **Start.** Every node starts at true time 0; the test begins once some node leads (bounded by
   ``leader_timeout``, not recorded), as ``harness.run`` waits before its interpreter starts. History
   times count from there.
2. **Clients.** ``concurrency`` workers (process ids ``0 .. concurrency-1``) take the next operation of
   their process's stream, wait its ``think``, record the invoke and send it as ``cluster.client`` does:
   to the op's node, else the leader a redirect last named, else a first node (``client_start``: by
   default process ``p`` starts at node ``p mod n``; ``first``: always n1, as ``cluster.client``);
   ``not-leader`` with a known leader is followed (at most 3 redirects) within one deadline of
   ``op_timeout``. Outcomes follow
   ``workloads.client``: a node's definite error is ``fail``, an indefinite one (``leadership-lost``,
   ``connection-lost``, no reply by the deadline: ``timeout``) is ``info``, except that a ``read`` that
   would be ``info`` is ``fail`` (a read has no effect). After ``info`` the process is retired and the
   worker continues as the next unused process id with that process's stream and a new client.
   Producers re-send a ``put`` whose attempt ended indefinite, with the same GUID, until its deadline
   (seed 004: the broker de-duplicates re-sent PUTs by GUID): this is what makes ``no-dedup`` visible.
3. **Status pollers.** One per node (process ids after the workers'), about once a second, recorded as
   ``status`` operations; their observations (a ``harness.interpreter.ClusterView``) resolve faults aimed
   at the leader and decide recovery, exactly as on the container platform.
4. **Nemesis.** The schedule's entries before the time limit, each at its offset, applied to the world
   instantly and recorded as an invoke/completion pair whose completion says what was applied
   (:class:`SimNemesis`, values shaped like ``nemesis.shell``'s). Faults reach the container runs'
   fault targets: the data nodes and, in ``fluvio`` mode, the controller ``sc``; a lease store member
   moves with its host under partitions and is never killed, paused or skewed.
5. **Final phase.** At the time limit the workers stop taking operations (those in flight finish or time
   out); then the schedule's final heal phase and whatever is still in effect are undone; the platform
   waits (bounded by ``recovery_timeout``) for a leader that says it leads and that a majority names, in
   status observations made after the heal (the interpreter also counts fresh ones from before it, and a
   leader only its followers name: both can be a leader that has just stepped down, and then every
   final read fails); then each node receives the
   workload's final operations (marked ``"final": true``) on a new process. The pollers stop last.

``scripts`` replace the workload's streams with fixed operations per worker slot (a shrunk or hand-
written run): slot ``s`` invokes its list in order, whatever process id it has at the time, then idles.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.history import NEMESIS
from cluster.core.errors import ERRORS
from harness.faults_in_effect import FaultsInEffect
from harness.history import HistoryWriter
from harness.interpreter import (
    FINAL_GIVE_UP_AFTER,
    STATUS_F,
    STATUS_FIELDS,
    ClusterView,
    Completion,
    FaultOutcome,
    RunStats,
)
from harness.sim.clock import NS, to_ns
from harness.sim.world import World
from nemesis import grudge as grudges
from nemesis.faults import (
    ClockBump,
    ClockReset,
    ClockStrobe,
    Fault,
    Heal,
    HealLatency,
    HealLoss,
    Kill,
    Latency,
    Loss,
    Partition,
    Pause,
    Resume,
    Start,
    UnresolvableTarget,
    describe,
    resolve_deltas,
    resolve_partition,
    resolve_targets,
)
from nemesis.generator import ScheduledFault
from workloads.ops import Op, Workload

NOTHING_TO_CONFIRM = "nothing-to-confirm"  # workloads.client's error for a confirm with nothing consumed
MAX_REDIRECTS = 3  # cluster.client.DEFAULT_MAX_REDIRECTS
LEADER_POLL = 0.2  # harness.run waits for a first leader polling every 0.2 s
CLIENT_STARTS = ("spread", "first")
STALL_MARGIN = 3600.0  # simulated seconds after which a run that has not finished is reported as stalled


@dataclass(frozen=True)
class PlatformConfig:
    """Timings of one simulated test, in simulated seconds (``harness.interpreter.InterpreterConfig``)."""

    concurrency: int = 10
    time_limit: float = 60.0
    op_timeout: float = 5.0
    status_interval: float = 1.0
    status_timeout: float = 1.0
    recovery_timeout: float = 30.0
    leader_timeout: float = 30.0
    put_attempt_timeout: float = 1.0
    """A ``put`` attempt unanswered this long is re-sent with the same GUID (within ``op_timeout``)."""
    put_retry_backoff: float = 0.05
    client_start: str = "spread"
    """Where a new client sends its first request: ``first`` node (``cluster.client.Client``: every new
    process starts at n1) or ``spread`` (process ``p`` starts at node ``p mod n``, Jepsen's binding of
    client processes to nodes). Redirects are followed either way; see docs/simulation.md."""

    def __post_init__(self) -> None:
        if self.client_start not in CLIENT_STARTS:
            raise ValueError(f"unknown client start {self.client_start!r}; valid: {', '.join(CLIENT_STARTS)}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        for name in ("time_limit", "op_timeout", "status_interval", "status_timeout", "recovery_timeout",
                     "leader_timeout", "put_attempt_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name.replace('_', '-')} must be a positive number of seconds, "
                                 f"not {getattr(self, name)}")


class SimClient:
    """One logical process's client state: the leader hint (``cluster.client.Client``) and the message it
    consumed last per queue (``workloads.client.ClusterWorkloadClient``)."""

    __slots__ = ("leader_hint", "consumed")

    def __init__(self) -> None:
        self.leader_hint: str | None = None
        self.consumed: dict[str, str] = {}


def request_of(op: Op, client: SimClient) -> dict[str, Any] | None:
    """The cluster request for ``op`` (``None``: a confirm with nothing consumed to confirm)."""
    f, key = op.f, op.key
    if f == "read":
        # A local read is served by its node itself, as the container client sends it (workloads.client).
        return {"op": f, "key": key, "local": True} if op.local else {"op": f, "key": key}
    if f == "consume":
        return {"op": f, "key": key}
    if f == "write":
        return {"op": f, "key": key, "value": op.value}
    if f == "cas":
        expected, new = op.value
        return {"op": f, "key": key, "value": [expected, new]}
    if f == "put":
        return {"op": f, "key": key, "value": op.value["value"], "guid": op.value["guid"]}
    if f == "confirm":
        guid = op.value if op.value is not None else client.consumed.get(key)
        return None if guid is None else {"op": f, "key": key, "guid": guid}
    raise ValueError(f"the simulated cluster client cannot run operation {f!r}")


class _Call:
    """One operation in flight: attempts, redirects, put retries, one deadline."""

    __slots__ = ("process", "client", "op", "request", "on_done", "deadline", "target", "redirects", "ref",
                 "finished", "status")

    def __init__(self, process: int, client: SimClient, op: Op, request: dict[str, Any],
                 on_done: Callable[[Completion], None], deadline: int, target: str, status: bool) -> None:
        self.process = process
        self.client = client
        self.op = op
        self.request = request
        self.on_done = on_done
        self.deadline = deadline
        self.target = target
        self.redirects = 0
        self.ref: tuple[int, int] | None = None
        self.finished = False
        self.status = status


@dataclass
class SimNemesis(FaultsInEffect):
    """Applies ``nemesis.faults`` to the world; values shaped like ``nemesis.shell``'s outcomes.

    Leader-aimed targets are resolved from the pollers' observations (``ClusterView``), random specs
    from ``rng``. It remembers what is in effect, so the final phase can undo exactly that.
    """

    world: World
    view: ClusterView
    rng: Any
    partitioned: str | None = None
    loss: str | None = None
    latency: str | None = None
    clock: set[str] = field(default_factory=set)
    killed: set[str] = field(default_factory=set)
    paused: set[str] = field(default_factory=set)

    @property
    def nodes(self) -> tuple[str, ...]:
        """What faults may hit: the world's fault targets (the data nodes, and the fluvio controller),
        the container runs' ``harness.db.fault_targets``. ``leader`` still resolves among the polled data
        nodes only; a grudge names targets, which are their hosts' names."""
        return self.world.fault_targets

    def describe(self, fault: Fault) -> tuple[str, Any]:
        return fault.f, fault.value()

    def apply(self, fault: Fault) -> FaultOutcome:
        try:
            return self._apply(fault)
        except UnresolvableTarget as exc:
            return FaultOutcome(error=str(exc))

    def _targets(self, fault: Any) -> tuple[str, ...]:
        leader, _ = self.view.leader()
        return resolve_targets(fault.targets, self.nodes, leader, self.rng)

    def _apply(self, fault: Fault) -> FaultOutcome:
        world, nodes = self.world, self.nodes
        if isinstance(fault, Partition):
            leader, _ = self.view.leader()
            grudge = grudges.validate(resolve_partition(fault, nodes, leader), nodes)
            world.network.set_grudge(grudge)
            self.partitioned = describe(fault)
            applied = {node: grudge.get(node, frozenset()) for node in nodes}
            return FaultOutcome({"kind": fault.kind, "grudge": grudges.to_json(applied)})
        if isinstance(fault, Heal):
            world.network.set_grudge({})
            self.partitioned = None
            return FaultOutcome({"nodes": list(nodes)})
        if isinstance(fault, Loss):
            targets = self._targets(fault)
            world.network.set_loss(targets, fault.probability)
            self.loss = describe(fault)
            return FaultOutcome({"nodes": list(targets), "probability": fault.probability})
        if isinstance(fault, HealLoss):
            world.network.set_loss((), 0.0)
            self.loss = None
            return FaultOutcome({"nodes": list(nodes)})
        if isinstance(fault, Latency):
            targets = self._targets(fault)
            world.network.set_latency(targets, fault.delay_ms, fault.jitter_ms)
            self.latency = describe(fault)
            return FaultOutcome({"nodes": list(targets), "delay_ms": fault.delay_ms, "jitter_ms": fault.jitter_ms})
        if isinstance(fault, HealLatency):
            world.network.set_latency((), 0.0, 0.0)
            self.latency = None
            return FaultOutcome({"nodes": list(nodes)})
        if isinstance(fault, ClockBump):
            leader, _ = self.view.leader()
            deltas = resolve_deltas(fault.deltas, nodes, leader)
            offsets = {node: world.bump_clock(node, delta) for node, delta in sorted(deltas.items())
                       if node in world.nodes}
            self.clock.update(offsets)
            return FaultOutcome({"offsets": offsets, "probes": dict(offsets)})
        if isinstance(fault, ClockStrobe):
            targets = self._targets(fault)
            bases = {node: world.nodes[node].clock.offset for node in targets}
            for node in targets:
                world.strobe_clock(node, fault.delta, fault.period, fault.duration)
            self.clock.update(targets)
            return FaultOutcome({"nodes": list(targets), "base": bases, "delta": fault.delta,
                                 "period": fault.period, "duration": fault.duration})
        if isinstance(fault, ClockReset):
            targets = self._targets(fault)
            for node in targets:
                world.reset_clock(node)
            self.clock.difference_update(targets)
            return FaultOutcome({"nodes": list(targets), "probes": {node: 0.0 for node in targets}})
        if isinstance(fault, Kill | Start | Pause | Resume):
            return self._process_fault(fault, self._targets(fault))
        raise ValueError(f"the simulator cannot apply {fault!r}")

    def _process_fault(self, fault: Kill | Start | Pause | Resume, targets: tuple[str, ...]) -> FaultOutcome:
        world = self.world
        action = {Kill: world.kill, Start: world.start, Pause: world.pause, Resume: world.resume}[type(fault)]
        done = [node for node in targets if action(node)]
        untouched = [node for node in targets if node not in done]
        # A start or resume that changed nothing found the node running; a kill or pause that changed
        # nothing found it down (or already paused).
        self.settle_process_fault(fault, targets if isinstance(fault, Start | Resume) else done)
        value: dict[str, Any] = {"nodes": done}
        if untouched:
            # Not an error: killing a node that is down, starting one that runs, resuming one that is not
            # paused leave it as the fault wants it.
            value["unchanged"] = untouched
        return FaultOutcome(value)

    def clock_shown(self) -> str | None:
        return "clock " + ",".join(n for n in self.nodes if n in self.clock) if self.clock else None


class SimPlatform:
    """One simulated test; :meth:`run` drives the world until the final phase is over."""

    def __init__(
        self,
        world: World,
        history_path: str | Path,
        workload: Workload,
        config: PlatformConfig,
        *,
        schedule: Sequence[ScheduledFault] = (),
        nemesis_rng: Any = None,
        scripts: Mapping[int, Sequence[Op]] | None = None,
    ) -> None:
        self.world = world
        self.nodes = world.ids
        self.history_path = Path(history_path)
        self.history: HistoryWriter | None = None
        self.workload = workload
        self.config = config
        self.schedule = sorted(schedule, key=lambda entry: entry.at)
        self.scripts = None if scripts is None else {int(s): list(ops) for s, ops in scripts.items()}
        self.stats = RunStats()
        self.view = ClusterView(self.nodes, self.clock, stale_after=3.0)
        self.recovery_view: ClusterView | None = None
        self.nemesis = SimNemesis(world, self.view, nemesis_rng)
        self.start_ns = 0
        self.keys: set[str] = set()
        self.invoked: dict[int, list[Op]] = {}  # worker slot -> ops invoked in the chaos phase, in order
        self.final_ops = 0
        self._next_process = config.concurrency + len(self.nodes)
        self._refs = itertools.count(1)
        self._stopping = False
        self._polling_done = False
        self._workers_active = 0
        self._thinking: dict[int, _Worker] = {}
        self._recovering = False
        self._polls_in_flight = 0
        self._final_done = False
        self.started = False
        for entry in self.schedule:
            self.stats.faults_scheduled[entry.fault.f] += 1

    # -- time -------------------------------------------------------------------------------------------

    def clock(self) -> float:
        """Seconds on the platform's (controller's) clock: the world's true time."""
        return self.world.now / NS

    def at(self, offset: float) -> int:
        """True time (ns) of ``offset`` seconds after the test started."""
        return self.start_ns + to_ns(offset)

    def first_node(self, process: int) -> str:
        """The node a client without a leader hint contacts (``PlatformConfig.client_start``)."""
        if self.config.client_start == "first":
            return self.nodes[0]
        return self.nodes[process % len(self.nodes)]

    def new_process(self) -> int:
        process = self._next_process
        self._next_process += 1
        return process

    # -- the run ----------------------------------------------------------------------------------------

    def run(self) -> RunStats:
        """Start the nodes, wait for a first leader, run the test to its end; returns the counters."""
        world = self.world
        for process in world.process_ids:
            world.start(process)
        world.schedule(0, self._wait_for_leader, to_ns(self.config.leader_timeout))
        config = self.config
        # A bound far beyond any legitimate end (each phase is bounded), so a runaway run is reported.
        world.run(to_ns(config.leader_timeout + config.time_limit + config.op_timeout + config.recovery_timeout
                        + STALL_MARGIN))
        if not self._final_done:
            raise RuntimeError(f"the simulation stalled at {world.seconds:.3f} s in phase {self.stats.phase}")
        if self.history is not None:
            self.history.close()
        return self.stats

    def _wait_for_leader(self, deadline: int) -> None:
        if self.world.leader() is None and self.world.now < deadline:
            self.world.after(LEADER_POLL, self._wait_for_leader, deadline)
            return
        self._begin()

    def _begin(self) -> None:
        world, config = self.world, self.config
        self.started = True
        self.start_ns = world.now
        self.history = HistoryWriter(self.history_path, clock=lambda: self.world.now, start_ns=self.start_ns)
        self.stats.phase = "chaos"
        self.stats.started_at = self.clock()
        for i, node in enumerate(self.nodes):
            world.schedule(world.now, self._poll, (i, node, config.concurrency + i, 0))
        for slot in range(config.concurrency):
            self._workers_active += 1
            world.schedule(world.now, self._worker_start, slot)
        for index, entry in enumerate(self.schedule):
            if entry.at < config.time_limit:
                world.schedule(self.at(entry.at), self._nemesis_step, index)
        world.schedule(self.at(config.time_limit), self._stop, None)

    # -- workers ----------------------------------------------------------------------------------------

    def _stream(self, slot: int, process: int) -> Iterator[Op]:
        if self.scripts is not None:
            return iter(self.scripts.get(slot, ()))
        return self.workload.stream(process)

    def _worker_start(self, slot: int) -> None:
        state = _Worker(slot, slot, SimClient())
        state.stream = self._stream(slot, slot)
        self._worker_next(state)

    def _worker_next(self, state: _Worker) -> None:
        if self._stopping:
            self._worker_done()
            return
        op = next(state.stream, None)
        if op is None:  # a script ran out: the slot idles until the time limit
            self._worker_done()
            return
        if op.think > 0:
            state.thinking = True
            self._thinking[state.slot] = state
            self.world.after(op.think, self._worker_invoke, (state, op))
        else:
            self._worker_invoke((state, op))

    def _worker_invoke(self, argument: tuple[_Worker, Op]) -> None:
        state, op = argument
        if state.thinking:
            state.thinking = False
            del self._thinking[state.slot]
        elif op.think > 0:
            return  # the time limit came during the think time: the slot already stopped
        if op.key is not None:
            self.keys.add(op.key)
        self.invoked.setdefault(state.slot, []).append(op)
        self.execute(state.process, state.client, op, lambda completion: self._worker_completed(state, completion))

    def _worker_completed(self, state: _Worker, completion: Completion) -> None:
        if completion.type == "info":
            state.process = self.new_process()
            state.client = SimClient()
            if self.scripts is None:
                state.stream = self.workload.stream(state.process)
        self._worker_next(state)

    def _worker_done(self) -> None:
        self._workers_active -= 1
        self._maybe_recover()

    def _stop(self, _: Any) -> None:
        """The time limit: workers take no new operation; one waiting out its think time stops now."""
        self._stopping = True
        self.stats.phase = "stopping"
        for slot in sorted(self._thinking):
            self._thinking[slot].thinking = False
            self._workers_active -= 1
        self._thinking.clear()
        self._maybe_recover()

    def _maybe_recover(self) -> None:
        if self._workers_active == 0 and self._stopping and not self._recovering:
            self._recovering = True
            self.world.schedule(self.world.now, self._recover, None)

    # -- executing one operation -------------------------------------------------------------------------

    def execute(self, process: int, client: SimClient, op: Op, on_done: Callable[[Completion], None],
                *, final: bool = False) -> None:
        """Invoke ``op`` as ``process`` (recorded now); ``on_done(completion)`` once it is recorded."""
        assert self.history is not None
        # ``final`` is written only on the final phase's invokes (the writer omits a None field).
        self.history.invoke(process, op.f, op.key, op.value, node=op.node, final=final or None)
        self.stats.invoked += 1
        if self.stats.first_op_at is None:
            self.stats.first_op_at = self.clock()
        request = request_of(op, client)
        if request is None:
            self._record(process, op, Completion("fail", node=op.node, error=NOTHING_TO_CONFIRM), on_done)
            return
        world = self.world
        target = op.node or client.leader_hint or self.first_node(process)
        call = _Call(process, client, op, request, on_done, world.now + to_ns(self.config.op_timeout), target,
                     status=False)
        world.schedule(call.deadline, self._deadline, call)
        self._attempt(call)

    def _attempt(self, call: _Call) -> None:
        call.ref = (call.process, next(self._refs))
        self.world.client_send(call.target, call.ref, call.request, lambda ref, reply: self._on_reply(call, ref, reply))
        if call.op.f == "put":
            attempt_end = min(call.deadline, self.world.now + to_ns(self.config.put_attempt_timeout))
            if attempt_end < call.deadline:
                self.world.schedule(attempt_end, self._put_attempt_expired, (call, call.ref))

    def _on_reply(self, call: _Call, ref: Any, reply: dict[str, Any]) -> None:
        if call.finished or ref != call.ref:
            return  # an answer to an attempt given up on
        client, world = call.client, self.world
        leader = reply.get("leader")
        leader = leader if isinstance(leader, str) and leader in world.nodes else None
        if leader is not None:
            client.leader_hint = leader
        if reply.get("ok") is True:
            kind = "ok"
        else:
            error = str(reply.get("error"))
            definite = reply.get("definite")
            if not isinstance(definite, bool):
                definite = error in ERRORS and ERRORS[error].definite
            kind = "fail" if definite else "info"
            if (error == "not-leader" and leader is not None and leader != call.target
                    and call.redirects < MAX_REDIRECTS and call.deadline > world.now):
                call.target = leader
                call.redirects += 1
                self._attempt(call)
                return
            if kind == "info" and call.op.f == "put" and self._retry_put(call):
                return
        lsn = reply.get("lsn")
        lsn = list(lsn) if isinstance(lsn, list | tuple) and len(lsn) == 2 else None
        error = None if kind == "ok" else str(reply.get("error"))
        self._finish(call, kind, reply.get("value"), lsn, error)

    def _retry_put(self, call: _Call) -> bool:
        """Re-send a put whose attempt ended indefinite, with the same GUID, if its deadline allows."""
        backoff = to_ns(self.config.put_retry_backoff)
        if self.world.now + backoff >= call.deadline:
            return False
        call.ref = None  # late answers to the old attempt are ignored
        call.target = call.client.leader_hint or call.target
        self.world.schedule(self.world.now + backoff, self._resend, call)
        return True

    def _resend(self, call: _Call) -> None:
        if not call.finished:
            self._attempt(call)

    def _put_attempt_expired(self, argument: tuple[_Call, Any]) -> None:
        call, ref = argument
        if not call.finished and call.ref == ref:
            self._retry_put(call)

    def _deadline(self, call: _Call) -> None:
        if not call.finished:
            if call.status:
                self._finish(call, "info", None, None, f"no status within {self.config.status_timeout:g} s")
            else:
                self._finish(call, "info", None, None, "timeout")

    def _finish(self, call: _Call, kind: str, value: Any, lsn: list[int] | None, error: str | None) -> None:
        call.finished = True
        if call.status:
            call.on_done(Completion(kind, value=value, node=call.target, error=error))
            return
        op, client = call.op, call.client
        if op.f == "read" and kind == "info":
            kind = "fail"
        if op.f == "consume" and kind == "ok" and isinstance(value, dict) and "guid" in value:
            client.consumed[op.key] = value["guid"]
        if op.f == "confirm":
            guid = call.request["guid"]
            if kind != "info" and client.consumed.get(op.key) == guid:
                del client.consumed[op.key]
            value = guid
        completion = Completion(kind, value=value, node=call.target, lsn=lsn, error=error)
        self._record(call.process, op, completion, call.on_done)

    def _record(self, process: int, op: Op, completion: Completion, on_done: Callable[[Completion], None]) -> None:
        """The completion line, as ``harness.interpreter.Interpreter._execute`` writes it."""
        assert self.history is not None
        self.history.complete(process, completion.type, op.f, op.key, completion.recorded_value(op),
                              node=completion.node or op.node, lsn=completion.lsn, error=completion.error)
        self.stats.completed[completion.type] += 1
        on_done(completion)

    # -- status pollers ---------------------------------------------------------------------------------

    def _poll(self, argument: tuple[int, str, int, int]) -> None:
        index, node, process, tick = argument
        if self._polling_done:
            return
        assert self.history is not None
        self.history.invoke(process, STATUS_F, None, None, node=node)
        self._polls_in_flight += 1
        world = self.world
        call = _Call(process, SimClient(), Op(STATUS_F), {"op": "status"},
                     lambda completion: self._polled(index, node, process, tick, completion),
                     world.now + to_ns(self.config.status_timeout), node, status=True)
        world.schedule(call.deadline, self._deadline, call)
        call.ref = (process, next(self._refs))
        world.client_send(node, call.ref, call.request, lambda ref, reply: self._on_status(call, ref, reply))

    def _on_status(self, call: _Call, ref: Any, reply: dict[str, Any]) -> None:
        if call.finished or ref != call.ref:
            return
        if reply.get("ok") is True and isinstance(reply.get("value"), dict):
            self._finish(call, "ok", reply["value"], None, None)
        elif reply.get("ok") is True:
            self._finish(call, "fail", None, None, f"status reply is not an object: {reply.get('value')!r}")
        elif reply.get("error") == "connection-refused":
            self._finish(call, "fail", None, None, "connection refused")
        else:
            kind = "fail" if reply.get("definite") is True else "info"
            self._finish(call, kind, None, None, f"{reply.get('error')}: {reply.get('message')}")

    def _polled(self, index: int, node: str, process: int, tick: int, completion: Completion) -> None:
        assert self.history is not None
        self._polls_in_flight -= 1
        value = None
        if completion.type == "ok":
            status = completion.value
            value = {name: status.get(name) for name in STATUS_FIELDS}
            value["node"] = value["node"] or node
            self.view.observe(node, value)
            if self.recovery_view is not None:
                self.recovery_view.observe(node, value)
        else:
            self.view.observe(node, None, completion.error)
            if self.recovery_view is not None:
                self.recovery_view.observe(node, None, completion.error)
        self.history.complete(process, completion.type, STATUS_F, None, value, node=node, error=completion.error)
        self.stats.status_polls[completion.type] += 1
        self.stats.leader, self.stats.term = self.view.leader()
        if completion.type == "info":
            process = self.new_process()
        tick += 1
        if self._polling_done:
            self._maybe_end()
            return
        self.world.schedule(self.at(tick * self.config.status_interval), self._poll, (index, node, process, tick))

    # -- nemesis ----------------------------------------------------------------------------------------

    def _nemesis_step(self, index: int) -> None:
        if self._stopping:
            return
        self._apply_fault(self.schedule[index].fault)

    def _apply_fault(self, fault: Fault) -> None:
        assert self.history is not None
        f, value = self.nemesis.describe(fault)
        self.history.invoke(NEMESIS, f, None, value)
        self.stats.faults_invoked[f] += 1
        try:
            outcome = self.nemesis.apply(fault)
        except ValueError as exc:
            outcome = FaultOutcome(error=f"{type(exc).__name__}: {exc}")
        self.history.complete(NEMESIS, "ok" if outcome.applied else "info", f, None, outcome.value,
                              error=outcome.error)
        if outcome.applied:
            self.stats.faults_applied[f] += 1
        else:
            self.stats.fault_errors.append(f"{f}: {outcome.error}")
        self.stats.active_faults = self.nemesis.active()

    # -- recovery and the final phase -------------------------------------------------------------------

    def _recover(self, _: Any) -> None:
        self.stats.phase = "recovering"
        for entry in self.schedule:
            if entry.at >= self.config.time_limit:
                self._apply_fault(entry.fault)
        for fault in self.nemesis.recovery_faults():
            self._apply_fault(fault)
        # Only what the pollers see from now on counts: an observation from before the heal may name a
        # leader that the heal is about to depose (its quorum timed out while it was cut off).
        self.recovery_view = ClusterView(self.nodes, self.clock, stale_after=3.0)
        self._await_recovery(self.world.now + to_ns(self.config.recovery_timeout))

    def _await_recovery(self, deadline: int) -> None:
        if self.recovery_view is not None and _recovered(self.recovery_view):
            self.stats.recovered = True
        elif self.world.now >= deadline:
            self.stats.recovered = False
        else:
            step = min(to_ns(self.config.status_interval / 4), max(deadline - self.world.now, 0))
            self.world.schedule(self.world.now + max(step, 1), self._await_recovery, deadline)
            return
        self.stats.phase = "final"
        self._final_node(0)

    def _final_node(self, index: int) -> None:
        if index >= len(self.nodes):
            self._end_final_phase()
            return
        node = self.nodes[index]
        ops = self.workload.final_ops(node, sorted(self.keys))
        state = _Final(index, node, ops, self.new_process(), SimClient())
        try:
            op = next(ops)
        except StopIteration:
            self._final_node(index + 1)
            return
        self._final_execute(state, op)

    def _final_execute(self, state: _Final, op: Op) -> None:
        if op.node is None:
            op = dataclasses.replace(op, node=state.node)
        if op.think > 0:
            self.world.after(op.think, self._final_invoke, (state, dataclasses.replace(op, think=0.0)))
            return
        self._final_invoke((state, op))

    def _final_invoke(self, pending: tuple[_Final, Op]) -> None:
        state, op = pending
        self.final_ops += 1
        self.execute(state.process, state.client, op, lambda completion: self._final_completed(state, completion),
                     final=True)

    def _final_completed(self, state: _Final, completion: Completion) -> None:
        self.stats.final_ops[completion.type] += 1
        if completion.type == "info":
            state.unanswered += 1
            state.process = self.new_process()
            state.client = SimClient()
            if state.unanswered >= FINAL_GIVE_UP_AFTER:
                state.ops.close()
                self._final_node(state.index + 1)
                return
        else:
            state.unanswered = 0
        try:
            op = state.ops.send(completion)
        except StopIteration:
            self._final_node(state.index + 1)
            return
        self._final_execute(state, op)

    def _end_final_phase(self) -> None:
        self.stats.phase = "done"
        self._stopping = True
        self._polling_done = True
        self._final_done = True
        self._maybe_end()

    def _maybe_end(self) -> None:
        if self._final_done and self._polls_in_flight == 0:
            self.world.halt = True


def _recovered(view: ClusterView) -> bool:
    """``ClusterView.recovered``, and the leader itself says it leads: followers keep naming a leader for
    a few heartbeats after it stepped down (its quorum timed out while it was cut off), and final reads
    sent then all fail ``not-leader``."""
    if not view.recovered():
        return False
    leader, _ = view.leader()
    status = view.fresh().get(leader) if leader is not None else None
    return status is not None and status.get("role") == "leader"


class _Worker:
    __slots__ = ("slot", "process", "client", "stream", "thinking")

    def __init__(self, slot: int, process: int, client: SimClient) -> None:
        self.slot = slot
        self.process = process
        self.client = client
        self.stream: Iterator[Op] = iter(())
        self.thinking = False


class _Final:
    __slots__ = ("index", "node", "ops", "process", "client", "unanswered")

    def __init__(self, index: int, node: str, ops: Any, process: int, client: SimClient) -> None:
        self.index = index
        self.node = node
        self.ops = ops
        self.process = process
        self.client = client
        self.unanswered = 0
