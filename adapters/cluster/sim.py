"""The cluster in the deterministic simulator: N real node cores of ``cluster`` in one process, in virtual
time, and :class:`SimulatedCluster`, what the sim platform of ``harness run`` drives
(``harness.sim.system.SimulatedSystem``; ``ClusterDB.simulate`` makes one).

The world is the simulator's driver of ``cluster.core.member.Node`` (docs/node-core.md): it carries out
every ``Ready`` in the contract's order (persist, journal, send, reply, arm the next tick), with a
simulated disk per node (:mod:`harness.sim.disk`), a seeded network (:mod:`harness.sim.network`) and
per-node clocks (:mod:`harness.sim.clock`). The harness's interpreter runs on a virtual-time event loop
over this world (``harness.sim.loop``), and its clients are ``cluster.client.Client`` itself over
:class:`SimConnection`: the simulated client is the real one, rule for rule.

**One event queue.** Everything that happens (a message arriving, a timer firing, a client request or
reply arriving, a nemesis or client step) is an event in one heap ordered by ``(time_ns, sequence)``,
the sequence being the order in which events were scheduled. Nothing else decides order: no threads, no
wall clock, no iteration over unordered sets, no global ``random`` (each concern draws from its own
``random.Random`` derived from the seed). The same seed and the same calls give the same events, byte for
byte, under any ``PYTHONHASHSEED``.

**Processes.** A node is *up* (its core runs), *paused* (SIGSTOP: its core keeps its state, timers do
not fire, and what arrives waits in its socket buffers, here ``inbox``, until it is resumed) or *down*
(SIGKILL: the core is gone, its disk loses what was not synced, clients with requests outstanding see
their connection close). :meth:`World.start` builds a new core from ``recover(durable records)`` with
a fresh RNG for the new incarnation.

**Other processes.** A ``fluvio`` cluster has its controller (``cluster.core.fluvio_controller``, id ``sc``), a
process of its own host driven like a node; a ``lease`` cluster elects through an external store, a
``raft`` group ``s1..s3`` whose member ``sK`` shares node ``nK``'s host, so partitions between hosts cut
store traffic too. A data node's ``Ready.requests`` travel to store members over the peer network and
the replies come back through ``Node.store_reply``. Which processes exist, on which host, and which the
nemesis may target are the container runs' answers, taken from their DB adapter's process layout
(``adapters.cluster.processes.ClusterProcesses``, which ``ClusterDB`` is, and ``harness.db.fault_targets``;
:class:`WorldConfig`): the data nodes and the fluvio controller are fault targets, the store members are not
(they stand for the seed's external linearizable service) but move with their host under partitions.

**Clients** are not nodes: :meth:`World.client_send` hands a request to a node over a client link and
calls back with the reply, or with ``connection-refused`` (the node was down: definite) or
``connection-lost`` (it died with the request outstanding: indefinite); :class:`SimConnection` turns
those into what a TCP connection gives ``cluster.client.Client``.

**Manual network** (``manual=True``): messages are kept in :attr:`World.inflight` instead of being
scheduled, and a caller (the Hypothesis state machine) delivers, drops or reorders them by hand.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import math
import random
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from adapters.cluster.client import ClusterWorkloadClient, status_of
from adapters.cluster.processes import (
    CONTROLLER,
    EXTERNAL_STORE,
    NODE,
    NODES_DIR,
    PORT,
    STORE,
    ClusterProcess,
    ClusterProcesses,
)
from cluster.client import CONNECTION_REFUSED, Client, Lost, NeverSent
from cluster.core.config import NodeConfig
from cluster.core.fluvio_controller import Controller, ControllerConfig, recover_controller
from cluster.core.member import Node, Ready
from cluster.core.shards import node_class
from cluster.core.storage import recover
from harness.db import Deployment, fault_targets, hosts_of
from harness.history import line_encoder
from harness.sim.clock import NS, WALL_EPOCH, NodeClock, to_ns
from harness.sim.disk import SimDisk
from harness.sim.network import NetworkOptions, SimNet, SimNetwork
from nemesis.driver import Action, ProcessActions
from nemesis.faults import Outcome

# Event kinds (small ints: the queue's hot path compares them).
DELIVER = 0  # (dst, src, message)
TICK = 1  # (node, due_ns, incarnation)
REQUEST = 2  # (node, (incarnation, ref), request)
REPLY = 3  # (callback, ref, reply)
CALL = 4  # (function, argument, None)
STORE_REQUEST = 5  # (store member, (data node, ref), request)
STORE_REPLY = 6  # inbox only: (member, reply) waiting for a paused data node
RETRANSMIT = 7  # (dst, src, (message, attempt, dst incarnation, src incarnation))

REFUSED = {"ok": False, "error": "connection-refused", "definite": True, "transport": True,
           "message": "the node is down: connection refused"}
"""What a client sees when it sends to a node that is down: definite, the request never left."""
LOST = {"ok": False, "error": "connection-lost", "definite": False, "transport": True,
        "message": "the node died with the request outstanding: connection lost"}
"""What a client sees when its node dies with the request outstanding: indefinite."""

_encode_line = line_encoder()
"""``json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode``: the same bytes, less overhead."""
ReplyCallback = Callable[[Hashable, dict[str, Any]], None]
JournalObserver = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class WorldConfig:
    """The simulated cluster: its nodes' core configuration and the world's physical behaviour."""

    nodes: int = 5
    mode: str = "blazingmq"
    bugs: tuple[str, ...] = ()
    fsync: str = "always"
    core: Mapping[str, Any] = field(default_factory=dict)
    """``NodeConfig`` overrides for every node (e.g. ``{"scouting": False}``)."""
    network: NetworkOptions = field(default_factory=NetworkOptions)
    max_drift: float = 0.001
    """Each node's clock rate is 1 + drift, drift uniform in [-max_drift, max_drift] (1000 ppm)."""
    max_initial_offset: float = 0.05
    """Each node's wall clock starts this many seconds off at most (NTP-like), before any clock fault."""
    writeback_interval: float = 5.0
    """``fsync == "never"``: how often the simulated OS writes the page cache back."""
    copy_messages: bool = False
    """JSON round-trip every message, request, reply and record, as a real wire and disk would. The
    default hands the same objects over (the core never mutates what it sends or receives); a test runs
    both ways and compares the histories and journals byte for byte."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "bugs", tuple(self.bugs))
        object.__setattr__(self, "core", dict(self.core))
        if not 1 <= self.nodes <= 99:
            raise ValueError(f"a simulated cluster has 1 to 99 nodes, not {self.nodes}")
        if not 0 <= self.max_drift < 0.5:
            raise ValueError(f"max_drift must be in [0, 0.5), not {self.max_drift}")
        if not self.writeback_interval > 0:
            raise ValueError(f"writeback_interval must be positive, not {self.writeback_interval}")

    @property
    def node_ids(self) -> tuple[str, ...]:
        """The data nodes: the cluster's members, the ones clients address (``harness run``'s names)."""
        return tuple(f"n{i}" for i in range(1, self.nodes + 1))

    @cached_property
    def layout(self) -> ClusterProcesses:
        """The container runs' process layout for this cluster (``ClusterDB``'s own): the one source of
        which processes a deployment has, where each runs, and which ones the nemesis may target."""
        return ClusterProcesses(self.mode)

    @cached_property
    def processes(self) -> tuple[ClusterProcess, ...]:
        """Every process of the world as a container run deploys it (``ClusterDB.processes``): the data
        nodes, the fluvio controller on a host of its own, the lease store members on the data nodes' hosts.
        A simulated host's address is its name."""
        hosts = hosts_of(self.layout, self.node_ids)
        addresses = {host: host for host in hosts}
        deployment = Deployment(nodes=self.node_ids, peer_hosts=addresses, client_hosts=addresses,
                                extra_hosts=hosts[len(self.node_ids):])
        return self.layout.processes(deployment)

    @property
    def store_ids(self) -> tuple[str, ...]:
        """``lease`` mode: the external store's members, ``s1..s3`` (none otherwise)."""
        return tuple(p.name for p in self.processes if p.kind == STORE)

    @property
    def process_ids(self) -> tuple[str, ...]:
        """Every process of the world: the data nodes, the fluvio controller, the store's members."""
        return tuple(p.name for p in self.processes)

    @property
    def fault_targets(self) -> tuple[str, ...]:
        """The processes the nemesis picks its targets from, as in container runs
        (``harness.db.fault_targets``): the data nodes and, in ``fluvio`` mode, the controller ``sc``
        (killed, restarted, paused, clock-skewed and partitioned like a node). Store members are never
        targets; partitions reach them through their hosts. Every target's host has the target's name, so
        a grudge over targets is a grudge over hosts."""
        return fault_targets(self.layout, self.node_ids)

    def host_of(self, process: str) -> str:
        """The host a process runs on: store member ``sK`` shares node ``nK``'s host (with fewer than
        three nodes, ``n((K-1) mod N + 1)``'s), so a partition of the data nodes cuts the store the same
        way; the controller has a host of its own."""
        return self._process(process).host

    def _process(self, name: str) -> ClusterProcess:
        for process in self.processes:
            if process.name == name:
                return process
        raise KeyError(f"no process {name!r} in this {self.mode} world; its processes: {', '.join(self.process_ids)}")

    def node_config(self, node_id: str) -> NodeConfig:
        """The core configuration of one data node or store member (``ValueError`` with one line if bad)."""
        if node_id in self.store_ids:
            return NodeConfig(node_id=node_id, peers=tuple(p for p in self.store_ids if p != node_id), mode="raft",
                              fsync=self.fsync)
        ids = self.node_ids
        extra: dict[str, Any] = {"store": self.store_ids} if self.mode == "lease" else {}
        return NodeConfig(node_id=node_id, peers=tuple(p for p in ids if p != node_id), mode=self.mode,
                          bugs=frozenset(self.bugs), fsync=self.fsync, **{**extra, **self.core})

    def controller_config(self) -> ControllerConfig:
        """``fluvio`` mode: the SC's configuration, timed like its SPUs."""
        spu = self.node_config(self.node_ids[0])
        return ControllerConfig(spus=self.node_ids, bugs=frozenset(self.bugs),
                                heartbeat_interval=spu.heartbeat_interval, missed_heartbeats=spu.missed_heartbeats)


class SimNode:
    """One process as the world sees it (a data node, the fluvio controller or a store member): its core
    (when up), disk, clock, journal and connections."""

    __slots__ = ("id", "kind", "host", "config", "clock", "disk", "core", "up", "paused", "incarnation", "tick_at",
                 "inbox", "journal", "outstanding", "core_calls", "starts", "strobe_generation", "store_calls")

    def __init__(self, node_id: str, kind: str, host: str, config: NodeConfig | ControllerConfig, clock: NodeClock,
                 disk: SimDisk) -> None:
        self.id = node_id
        self.kind = kind  # NODE, CONTROLLER or STORE (``adapters.cluster.processes``' kinds)
        self.host = host
        self.config = config
        self.clock = clock
        self.disk = disk
        self.core: Any = None  # a Node, or the fluvio Controller
        self.up = False
        self.paused = False
        self.incarnation = 0
        self.tick_at: int | None = None
        self.inbox: list[tuple[int, Any, Any]] = []  # (kind, a, b) that arrived while paused
        self.journal: list[str] = []  # encoded journal lines, in order
        self.outstanding: dict[Hashable, ReplyCallback] = {}  # client requests this incarnation owes
        self.core_calls = 0
        self.starts = 0
        self.strobe_generation = 0
        self.store_calls = 0


class World:
    """N cores, their disks and clocks, the network, and the event queue. See the module docstring."""

    def __init__(self, config: WorldConfig, seed: int, *, manual: bool = False) -> None:
        self.config = config
        self.seed = seed
        self.manual = manual
        self.ids = config.node_ids
        self.process_ids = config.process_ids
        self.fault_targets = config.fault_targets
        self.now = 0  # true time, ns
        self._queue: list[tuple[int, int, int, Any, Any, Any]] = []
        self._seq = 0
        self.halt = False
        self.copy = config.copy_messages
        self.network = SimNetwork(self.ids, random.Random(f"{seed}/sim-network"), config.network,
                                  client_rng=random.Random(f"{seed}/sim-clients"))
        clocks = random.Random(f"{seed}/sim-clocks")
        self.nodes: dict[str, SimNode] = {}
        for process in config.processes:
            drift = clocks.uniform(-config.max_drift, config.max_drift)
            offset = round(clocks.uniform(-config.max_initial_offset, config.max_initial_offset), 6)
            node_config = (config.controller_config() if process.kind == CONTROLLER
                           else config.node_config(process.name))
            self.nodes[process.name] = SimNode(process.name, process.kind, process.host, node_config,
                                               NodeClock(drift, offset), SimDisk(config.fsync))
        if config.fsync == "never":
            for node_id in self.process_ids:
                phase = to_ns(clocks.uniform(0, config.writeback_interval))
                self.schedule(phase, self._write_back, node_id)
        self.inflight: list[tuple[str, str, dict[str, Any]]] = []  # manual mode only
        self.observers: list[JournalObserver] = []
        self.events = 0
        self.core_calls = 0
        self.stale_ticks = 0

    # -- the queue --------------------------------------------------------------------------------------

    def _push(self, at: int, kind: int, a: Any, b: Any, c: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, kind, a, b, c))

    def schedule(self, at_ns: int, function: Callable[[Any], Any], argument: Any = None) -> None:
        """Call ``function(argument)`` at true time ``at_ns`` (now, if that is past)."""
        self._push(max(at_ns, self.now), CALL, function, argument, None)

    def after(self, seconds: float, function: Callable[[Any], Any], argument: Any = None) -> None:
        self.schedule(self.now + to_ns(seconds), function, argument)

    def run(self, until_ns: int | None = None) -> None:
        """Process events in order until the queue is empty, ``halt`` is set, or the next event is later
        than ``until_ns`` (then the clock stands at ``until_ns``). Tests and benchmarks drive the world
        this way; a run drives it through the virtual-time loop (:meth:`next_event_ns`, :meth:`run_next`)."""
        queue = self._queue
        while queue and not self.halt:
            if until_ns is not None and queue[0][0] > until_ns:
                break
            self.run_next()
        if until_ns is not None and self.now < until_ns and not self.halt:
            self.now = until_ns

    def next_event_ns(self) -> int | None:
        """When the next event is due (``harness.sim.loop.EventSource``)."""
        return self._queue[0][0] if self._queue else None

    def run_next(self) -> None:
        """Carry out the next event (``harness.sim.loop.EventSource``)."""
        nodes = self.nodes
        at, _, kind, a, b, c = heapq.heappop(self._queue)
        self.now = at
        self.events += 1
        if kind == DELIVER:
            node = nodes[a]
            if node.up:
                # SimNetwork.cut, then SimNetwork.admits, written out (the most frequent event).
                network = self.network
                src_host, dst_host = nodes[b].host, node.host
                grudge = network.grudge
                cut = grudge.get(dst_host) if grudge else None
                if cut is not None and src_host in cut:
                    source = nodes[b]
                    self._retransmit(node, source, c, 0, node.incarnation, source.incarnation)
                    return
                loss = network.loss
                if loss:
                    p = loss.get(dst_host)
                    if p is not None and network.rng.random() < p:
                        network.dropped += 1
                        return
                if node.paused:
                    node.inbox.append((DELIVER, b, c))
                else:
                    self._receive(node, b, c)
        elif kind == RETRANSMIT:
            node, source = nodes[a], nodes[b]
            message, attempt, incarnation, source_incarnation = c
            # A restart on either side reset the connection: what it carried is gone.
            if node.up and node.incarnation == incarnation and source.incarnation == source_incarnation:
                if self.network.cut(source.host, node.host):
                    self._retransmit(node, source, message, attempt, incarnation, source_incarnation)
                elif self.network.admits(source.host, node.host):
                    if node.paused:
                        node.inbox.append((DELIVER, b, message))
                    else:
                        self._receive(node, b, message)
        elif kind == TICK:
            node = nodes[a]
            if node.tick_at == b and node.incarnation == c and node.up and not node.paused:
                node.tick_at = None
                self._tick(node)
        elif kind == REQUEST:
            node = nodes[a]
            if node.up and node.incarnation == b[0]:
                if node.paused:
                    node.inbox.append((REQUEST, b[1], c))
                else:
                    self._request(node, b[1], c)
        elif kind == REPLY:
            a(b, c)
        elif kind == STORE_REQUEST:
            self._store_request(nodes[a], b[0], b[1], c)
        else:
            a(b)

    def run_for(self, seconds: float) -> None:
        self.run(self.now + to_ns(seconds))

    @property
    def seconds(self) -> float:
        """True time in seconds."""
        return self.now / NS

    # -- driving the cores ------------------------------------------------------------------------------

    def _retransmit(self, node: SimNode, source: SimNode, message: dict[str, Any], attempt: int,
                    incarnation: int, source_incarnation: int) -> None:
        delay = self.network.retransmit_ns(attempt)
        if delay is not None:
            self.network.retransmitted += 1
            self._push(self.now + delay, RETRANSMIT, node.id, source.id,
                       (message, attempt + 1, incarnation, source_incarnation))
        else:
            self.network.dropped += 1

    def _receive(self, node: SimNode, sender: str, message: dict[str, Any]) -> None:
        if self.copy:
            message = json.loads(json.dumps(message))
        # NodeClock.mono and NodeClock.wall written out: the same arithmetic, in the same order.
        clock = node.clock
        elapsed = self.now / NS * clock.rate
        wall = WALL_EPOCH + elapsed + (clock.offset + (clock.strobe_delta if clock.strobe_on else 0.0))
        node.core_calls += 1
        self.core_calls += 1
        self._carry_out(node, node.core.receive(sender, message, elapsed, wall))

    def _tick(self, node: SimNode) -> None:
        clock, now = node.clock, self.now
        node.core_calls += 1
        self.core_calls += 1
        self._carry_out(node, node.core.tick(clock.mono(now), clock.wall(now)))

    def _request(self, node: SimNode, ref: Hashable, request: dict[str, Any]) -> None:
        if self.copy:
            request = json.loads(json.dumps(request))
        clock, now = node.clock, self.now
        node.core_calls += 1
        self.core_calls += 1
        self._carry_out(node, node.core.request(ref, request, clock.mono(now), clock.wall(now)))

    def _carry_out(self, node: SimNode, ready: Ready) -> None:
        """The driver's half of the contract, in order: persist, journal, send, reply, next tick."""
        now = self.now
        if ready.persist:
            node.disk.append(json.loads(json.dumps(ready.persist)) if self.copy else ready.persist)
        if ready.journal:
            self._journal(node, ready.journal, node.clock.wall(now))
        messages = ready.messages
        if messages:
            if self.manual:
                for peer, message in messages:
                    self.inflight.append((node.id, peer, message))
            else:
                send, nodes, queue, push = self.network.send, self.nodes, self._queue, heapq.heappush
                host, source, seq = node.host, node.id, self._seq
                for peer, message in messages:
                    for at in send(host, nodes[peer].host, now):
                        seq += 1
                        push(queue, (at, seq, DELIVER, peer, source, message))
                self._seq = seq
        if ready.replies:
            outstanding = node.outstanding
            for ref, reply in ready.replies:
                callback = outstanding.pop(ref, None)
                if callback is None:
                    continue  # the client went away (or was answered already)
                if self.copy:
                    reply = json.loads(json.dumps(reply))
                at = now + self.network.client_delay_ns(node.id, reply=True)
                self._push(at, REPLY, callback, ref, reply)
        if ready.requests:
            for member, request in ready.requests:
                self._store_send(node, member, request)
        due = ready.next_tick
        if due is None:
            node.tick_at = None
            return
        at = math.ceil(due / node.clock.rate * NS) + 1  # NodeClock.true_ns, written out
        if at <= now:
            # The core asks for a tick it should already have had: tick again shortly, never in a loop.
            self.stale_ticks += 1
            at = now + 1000
        if at != node.tick_at:
            node.tick_at = at
            self._push(at, TICK, node.id, at, node.incarnation)

    def _journal(self, node: SimNode, events: list[dict[str, Any]], wall: float) -> None:
        """FORMATS.md journal lines: ``node``, ``seq``, ``wall`` first (they win over the event's own keys),
        encoded as ``cluster.disk.JournalWriter`` encodes them."""
        lines = node.journal
        observers = self.observers
        for event in events:
            line: dict[str, Any] = {"node": node.id, "seq": len(lines), "wall": wall, **event}
            if len(line) != 3 + len(event):  # the event has a key of its own among the three: ours win, first
                line = {"node": node.id, "seq": len(lines), "wall": wall}
                for key, value in event.items():
                    line.setdefault(key, value)
            lines.append(_encode_line(line))
            for observer in observers:
                observer(node.id, line)

    # -- processes --------------------------------------------------------------------------------------

    def start(self, node_id: str) -> bool:
        """Start a node that is down from its durable records; ``False`` if it was already running."""
        node = self.nodes[node_id]
        if node.up:
            return False
        node.incarnation += 1
        node.starts += 1
        node.up, node.paused, node.tick_at = True, False, None
        clock, now = node.clock, self.now
        rng = random.Random(f"{self.seed}/{node_id}/{node.incarnation}")
        if node.kind == CONTROLLER:
            state = recover_controller(node.disk.durable_records(copy=True), self.ids)
            node.core = Controller(node.config, state, clock.mono(now), clock.wall(now), rng)
        else:
            recovered = recover(node.disk.durable_records(copy=True))
            node.core = node_class(node.config)(node.config, recovered, clock.mono(now), clock.wall(now), rng)
        node.core_calls += 1
        self.core_calls += 1
        self._carry_out(node, node.core.start(clock.mono(now), clock.wall(now)))
        return True

    def kill(self, node_id: str) -> bool:
        """SIGKILL: the core and everything it had not synced are gone; ``False`` if it was down."""
        node = self.nodes[node_id]
        if not node.up:
            return False
        node.up, node.paused, node.core, node.tick_at = False, False, None, None
        node.inbox.clear()
        node.disk.crash()
        outstanding, node.outstanding = node.outstanding, {}
        for ref, callback in outstanding.items():
            self._push(self.now + self.network.client_delay_ns(), REPLY, callback, ref, dict(LOST))
        return True

    def pause(self, node_id: str) -> bool:
        """SIGSTOP; ``False`` if the node is down or already paused."""
        node = self.nodes[node_id]
        if not node.up or node.paused:
            return False
        node.paused = True
        return True

    def resume(self, node_id: str) -> bool:
        """SIGCONT: the timers catch up, then what waited in the socket buffers is handled in arrival
        order; ``False`` if the node was not paused."""
        node = self.nodes[node_id]
        if not node.up or not node.paused:
            return False
        node.paused = False
        node.tick_at = None
        self._tick(node)  # the runtime's turn ticks first, then handles what arrived
        waiting, node.inbox = node.inbox, []
        for kind, a, b in waiting:
            if kind == DELIVER:
                self._receive(node, a, b)
            elif kind == STORE_REPLY:
                self._store_answer(node, a, b)
            else:
                self._request(node, a, b)
        return True

    def _write_back(self, node_id: str) -> None:
        self.nodes[node_id].disk.write_back()
        self.after(self.config.writeback_interval, self._write_back, node_id)

    # -- the external store (lease mode) ----------------------------------------------------------------

    def _store_send(self, node: SimNode, member: str, request: dict[str, Any]) -> None:
        """A data node's request to a store member travels the peer network between their hosts."""
        target = self.nodes.get(member)
        if target is None:
            return  # a member this world does not have: the request is lost, as to an unknown address
        node.store_calls += 1
        ref = ("store", node.id, node.incarnation, member, node.store_calls)
        for at in self.network.send(node.host, target.host, self.now)[:1]:
            self._push(at, STORE_REQUEST, member, (node.id, ref), request)

    def _store_request(self, member: SimNode, data_node: str, ref: Hashable, request: dict[str, Any]) -> None:
        if not member.up or not self.network.admits(self.nodes[data_node].host, member.host):
            return
        member.outstanding[ref] = self._store_reply
        if member.paused:
            member.inbox.append((REQUEST, ref, request))
        else:
            self._request(member, ref, request)

    def _store_reply(self, ref: Any, reply: dict[str, Any]) -> None:
        _, data_node, incarnation, member, _ = ref
        node = self.nodes[data_node]
        if not node.up or node.incarnation != incarnation:
            return
        if not self.network.admits(self.nodes[member].host, node.host):
            return
        if node.paused:
            node.inbox.append((STORE_REPLY, member, reply))
        else:
            self._store_answer(node, member, reply)

    def _store_answer(self, node: SimNode, member: str, reply: dict[str, Any]) -> None:
        clock, now = node.clock, self.now
        node.core_calls += 1
        self.core_calls += 1
        self._carry_out(node, node.core.store_reply(member, reply, clock.mono(now), clock.wall(now)))

    # -- clients ----------------------------------------------------------------------------------------

    def client_send(self, node_id: str, ref: Hashable, request: dict[str, Any], on_reply: ReplyCallback) -> int | None:
        """Send a client request; ``on_reply(ref, reply)`` is called with the node's reply, ``REFUSED``
        or ``LOST``. A reply that comes after the client gave up is the caller's to ignore. Returns when
        the refusal arrives if the node is down (known at once), else ``None``."""
        node = self.nodes[node_id]
        delay = self.network.client_delay_ns()
        if not node.up:
            at = self.now + 2 * delay
            self._push(at, REPLY, on_reply, ref, REFUSED)  # the callbacks only read it
            return at
        node.outstanding[ref] = on_reply
        self._push(self.now + delay, REQUEST, node_id, (node.incarnation, ref), request)
        return None

    # -- clocks -----------------------------------------------------------------------------------------

    def bump_clock(self, node_id: str, delta: float) -> float:
        clock = self.nodes[node_id].clock
        clock.offset = round(clock.offset + delta, 6)
        return clock.offset

    def reset_clock(self, node_id: str) -> None:
        node = self.nodes[node_id]
        node.strobe_generation += 1
        node.clock.offset, node.clock.strobe_delta, node.clock.strobe_on = 0.0, 0.0, False

    def strobe_clock(self, node_id: str, delta: float, period: float, duration: float) -> None:
        """Flip the wall clock between its offset and offset + ``delta`` every ``period`` seconds for
        ``duration`` seconds, then leave it at its offset (``nemesis.shell.strobe_commands``)."""
        node = self.nodes[node_id]
        node.strobe_generation += 1
        generation = node.strobe_generation
        node.clock.strobe_delta = delta
        flips = max(1, int(duration / (2 * period)))
        for i in range(2 * flips):
            on = i % 2 == 0
            self.schedule(self.now + to_ns(i * period), self._strobe_flip, (node_id, generation, on))
        self.schedule(self.now + to_ns(2 * flips * period), self._strobe_flip, (node_id, generation, False))

    def _strobe_flip(self, argument: tuple[str, int, bool]) -> None:
        node_id, generation, on = argument
        node = self.nodes[node_id]
        if node.strobe_generation == generation:
            node.clock.strobe_on = on

    # -- manual network (the Hypothesis state machine) ---------------------------------------------------

    def deliver(self, index: int) -> bool:
        """Manual mode: deliver the in-flight message at ``index`` now; ``False`` if it was not accepted
        (receiver down, or the partition in effect drops it). A paused receiver buffers it."""
        src, dst, message = self.inflight.pop(index)
        node = self.nodes[dst]
        if not node.up or not self.network.admits(self.nodes[src].host, node.host):
            return False
        if node.paused:
            node.inbox.append((DELIVER, src, message))
        else:
            self._receive(node, src, message)
        return True

    def drop(self, index: int) -> None:
        self.inflight.pop(index)

    # -- inspection -------------------------------------------------------------------------------------

    def core(self, node_id: str) -> Node | None:
        node = self.nodes[node_id]
        return node.core if node.up else None

    def leader(self) -> str | None:
        """The running data node that leads the highest term, if any (omniscient: tests and benchmarks)."""
        found = [(n.core.term, n.id) for n in self.nodes.values()
                 if n.kind == NODE and n.up and n.core.role == "leader"]
        return max(found)[1] if found else None

    def journal_lines(self, node_id: str) -> list[str]:
        return self.nodes[node_id].journal


# -- the sim platform's view of the cluster ----------------------------------------------------------------


class SimConnection:
    """``cluster.client.Connection`` over the world's client links: what a TCP connection to one node gives
    the client, in virtual time. A node that is down refuses (:class:`~cluster.client.NeverSent`: the
    client fails over); one that dies with the request outstanding loses it (:class:`~cluster.client.Lost`);
    no reply by the deadline is ``TimeoutError``."""

    def __init__(self, world: World, node: str, refs: Iterator[int]) -> None:
        self.world = world
        self.node = node
        self.refs = refs

    async def call(self, request: dict[str, Any], timeout: float,
                   connect_timeout: float | None = None) -> dict[str, Any]:
        world = self.world
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

        def on_reply(ref: Hashable, reply: dict[str, Any]) -> None:
            if not future.done():
                future.set_result(reply)

        refused_at = world.client_send(self.node, next(self.refs), request, on_reply)
        # The deadline is a world event that finds the future done when the reply came first: no timer
        # to cancel (a call is answered far more often than it times out). A refusal's arrival is known
        # at once: no deadline is needed when it comes first.
        deadline = world.now + math.ceil(timeout * NS)
        if refused_at is None or refused_at > deadline:
            world.schedule(deadline, _expire, future)
        reply = await future
        if reply.get("transport") is True:
            if reply["error"] == REFUSED["error"]:
                raise NeverSent(CONNECTION_REFUSED, f"{self.node}: {reply['message']}")
            raise Lost(f"{self.node}: {reply['message']}")
        return reply

    async def close(self) -> None:
        return None


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())


class SimClocks:
    """``nemesis.driver.Clocks`` over the world's clocks; values shaped like ``nemesis.shell``'s."""

    def __init__(self, world: World) -> None:
        self.world = world

    def bump(self, deltas: Mapping[str, float]) -> Outcome:
        world = self.world
        offsets = {node: world.bump_clock(node, delta) for node, delta in sorted(deltas.items()) if node in world.nodes}
        return Outcome({"offsets": offsets, "probes": dict(offsets)})

    def strobe(self, targets: Sequence[str], delta: float, period: float, duration: float) -> Outcome:
        world = self.world
        bases = {node: world.nodes[node].clock.offset for node in targets}
        for node in targets:
            world.strobe_clock(node, delta, period, duration)
        return Outcome({"nodes": list(targets), "base": bases, "delta": delta, "period": period,
                        "duration": duration})

    def reset(self, targets: Sequence[str]) -> Outcome:
        for node in targets:
            self.world.reset_clock(node)
        return Outcome({"nodes": list(targets), "probes": {node: 0.0 for node in targets}})


class SimProcesses(ProcessActions):
    """``nemesis.driver.Processes`` over the world's processes (kill, start, pause, resume)."""

    def __init__(self, world: World) -> None:
        self.world = world

    def act(self, action: Action, targets: Sequence[str]) -> Outcome:
        if action.verb not in ("kill", "start", "pause", "resume"):
            return Outcome(error=f"the simulated cluster cannot {action.verb}")
        return self._each(targets, getattr(self.world, action.verb))

    @staticmethod
    def _each(targets: Sequence[str], action: Callable[[str], bool]) -> Outcome:
        done = [node for node in targets if action(node)]
        untouched = [node for node in targets if node not in done]
        value: dict[str, Any] = {"nodes": done}
        if untouched:
            # Not an error: killing a node that is down, starting one that runs, resuming one that is not
            # paused leave it as the fault wants it.
            value["unchanged"] = untouched
        return Outcome(value)


class SimulatedCluster:
    """The cluster as the sim platform drives it (``harness.sim.system.SimulatedSystem``): the world, its
    fault protocols, clients and status over simulated connections, and its journals."""

    def __init__(self, config: WorldConfig, seed: int) -> None:
        self.config = config
        self.world = World(config, seed)
        self.nodes = config.node_ids
        self.fault_targets = config.fault_targets
        self.net = SimNet(self.world.network, self.fault_targets)
        self.clocks = SimClocks(self.world)
        self.processes = SimProcesses(self.world)
        self.wall_epoch = WALL_EPOCH
        self._refs = itertools.count(1)

    def start(self) -> None:
        """Start every process at true time 0."""
        for process in self.world.process_ids:
            self.world.start(process)

    def _client(self, nodes: Sequence[str], timeout: float) -> Client:
        return Client({node: (node, PORT) for node in nodes}, timeout=timeout,
                      connect=lambda node, host, port: SimConnection(self.world, node, self._refs))

    async def open_client(self, process: int, timeout: float) -> ClusterWorkloadClient:
        """The workload client of one logical process, exactly as on containers (``ClusterDB.open_client``)."""
        return ClusterWorkloadClient(self._client(self.nodes, timeout), timeout=timeout)

    async def status(self, node: str, timeout: float) -> dict[str, Any]:
        """``ClusterDB.status``, over a simulated connection."""
        client = self._client((node,), timeout)
        return status_of(await client.status(node, timeout=timeout))

    def files(self) -> dict[str, str]:
        """Each process's journal, where a container run collects it: data nodes and the controller under
        ``nodes/``, the store's members under ``external-store/`` (their terms are another group's)."""
        found = {}
        for process in self.world.process_ids:
            where = EXTERNAL_STORE if self.world.nodes[process].kind == STORE else NODES_DIR
            lines = self.world.journal_lines(process)
            found[f"{where}/{process}/journal.jsonl"] = "".join(line + "\n" for line in lines)
        return found

    def describe(self) -> dict[str, Any]:
        """The simulated world's settings, for ``test.json``'s ``sim``."""
        config = self.config
        return {"network": asdict(config.network), "max_drift": config.max_drift,
                "max_initial_offset": config.max_initial_offset, "fsync": config.fsync,
                "wall_epoch": WALL_EPOCH}

    def stats(self) -> dict[str, Any]:
        """What the world did, for ``results.json``'s ``sim``."""
        world = self.world
        return {
            "world_seconds": round(world.now / NS, 6),
            "events": world.events,
            "core_calls": world.core_calls,
            "messages": world.network.sent,
            "dropped": world.network.dropped,
            "duplicated": world.network.duplicated,
            "retransmitted": world.network.retransmitted,
            "restarts": sum(max(0, n.starts - 1) for n in world.nodes.values()),
            "records_lost": sum(n.disk.lost for n in world.nodes.values()),
            "stale_ticks": world.stale_ticks,
        }
