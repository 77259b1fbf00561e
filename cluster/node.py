"""The asyncio runtime of one ``cluster`` node: ``python3 -m cluster.node --id n1 --listen ... --peers ...``.

It drives the sans-IO core (``cluster.core.member.Node``, contract in ``docs/node-core.md``) with the real
world: a TCP server on one port for clients and peers (``cluster.wire`` says how the first line tells them
apart), an outbound connection to each peer with reconnect and backoff, the monotonic and wall clocks, an
RNG seeded from ``--seed`` or ``os.urandom``, the storage file and the journal (``cluster.disk``).

The driver loop (``NodeRuntime._drive``) owns the core. Each turn it ticks the core if its ``next_tick`` is
due, feeds it every peer message and client request that arrived meanwhile, and hands all the resulting
``Ready`` values to ``_execute``, the one place where the core's output leaves the process, in this order:

1. persist every record of the turn (one write, one fsync under ``--fsync always``: group commit);
2. journal every event;
3. send the peer messages;
4. send the client replies.

So nothing a peer or client can observe ever precedes the state it depends on being durable ("persist
before you send", STYLE.md 1). A failure to persist ends the process: sending without it is unsafe.
(Refinements that keep that rule: ``applied`` records go after the journal lines; the steps of a turn
before its first fsync-needing record release their output without waiting for that fsync; and the one
exception the core allows, a leader's AppendEntries of new entries (``Ready.early``, Raft thesis 10.2.1),
is written to the peers' sockets before the fsync, so followers persist a write while the leader does:
one fsync on the write's critical path, not two. ``_send_early`` says when.)

Bad configuration (unknown ``--bug``, bad peer list, unwritable data directory, a port already in use) is
reported in one line on stderr with exit code 2 before the node writes anything. Bad input on a
connection never stops the node: a malformed or oversized client line gets an error reply and the
connection stays usable; a bad peer line is logged and dropped. SIGTERM (or SIGINT) stops the node
gracefully: it journals a ``stop`` event, closes its files and removes its pid file.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import os
import random
import signal
import socket
import sys
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cluster.core.bugs import KNOWN_BUGS
from cluster.core.config import NodeConfig, check_settings
from cluster.core.election import ELECTIONS
from cluster.core.election.fluvio import CONTROLLER_ID
from cluster.core.errors import error_reply as core_error_reply
from cluster.core.fluvio_controller import Controller, ControllerConfig, recover_controller
from cluster.core.member import Node, Ready
from cluster.core.shards import node_class
from cluster.core.storage import StorageError, recover
from cluster.disk import (
    FSYNC_POLICIES,
    JOURNAL_FILE,
    STORAGE_FILE,
    JournalWriter,
    StorageFile,
    check_writable_directory,
    open_journal,
    open_storage,
)
from cluster.store_link import StoreLinks
from cluster.wire import (
    MAX_LINE_BYTES,
    LineDecoder,
    MessageTooLarge,
    WireError,
    encode,
    error_reply,
    hello_peer_id,
    open_envelope,
    parse_address,
    parse_node_addresses,
    peer_envelope,
    peer_hello,
)

EXIT_BAD_CONFIG = 2

PEER_LINE_LIMIT = 64 << 20
"""Peers are trusted members of the cluster: their lines (log batches) may exceed the client limit."""

MAX_IDLE_TICK = 0.1
"""The driver ticks the core at least this often (seconds), whatever ``next_tick`` says."""

MAX_TURN_EVENTS = 512
"""At most this many inputs per driver turn, so the sockets are read between turns."""

INBOX_LIMIT = 10_000
"""Past this many inputs waiting for the core, connections stop being read until the driver catches up."""

PEER_QUEUE_LIMIT = 10_000
PEER_QUEUE_BYTES = 32 << 20
"""Messages (and bytes) waiting for one peer; past either the oldest are dropped (loss is normal)."""

HALF_CLOSED_GRACE = 10.0
"""Seconds a client connection that sent end-of-stream stays open for the replies it still waits for."""

CLIENT_BUFFER_LIMIT = 16 << 20
"""A client that does not read its replies is disconnected once this many bytes wait for it."""

READ_CHUNK = 1 << 16

APPLIED_RECORD = "applied"
"""The storage record type (``cluster.core.storage``) that says entries were applied and journalled."""

log = logging.getLogger("cluster.node")


class ConfigError(Exception):
    """Bad command line or environment; the message is the one line printed before exit code 2."""


@dataclass(frozen=True)
class NodeOptions:
    """The parsed command line."""

    node_id: str
    listen: tuple[str, int]
    peers: dict[str, tuple[str, int]]
    data_dir: str
    mode: str = "blazingmq"
    bugs: tuple[str, ...] = ()
    fsync: str = "always"
    seed: int | None = None
    journal: str = ""
    log_file: str = ""
    pid_file: str | None = None
    log_level: str = "INFO"
    core: dict[str, Any] = field(default_factory=dict)
    controller: bool = False
    store: dict[str, tuple[str, int]] = field(default_factory=dict)  # lease mode: the store's members

    def node_config(self) -> NodeConfig:
        """The core's configuration; ``ValueError`` from NodeConfig names what is wrong. A fluvio SPU links
        to the controller (an entry of ``--peers``) but does not count it as a replica."""
        peers = tuple(p for p in self.peers if not (self.mode == "fluvio" and p == CONTROLLER_ID))
        store = {"store": tuple(self.store)} if self.store else {}
        return NodeConfig(node_id=self.node_id, peers=peers, mode=self.mode,
                          bugs=frozenset(self.bugs), fsync=self.fsync, **store, **self.core)

    def controller_config(self) -> ControllerConfig:
        """``--controller``: the fluvio SC's configuration (its ``--peers`` are the SPUs)."""
        if self.mode != "fluvio" or self.node_id != CONTROLLER_ID:
            raise ValueError(f"--controller runs the fluvio SC: it needs --mode fluvio and --id {CONTROLLER_ID}")
        timing = {k: v for k, v in self.core.items() if k in ("heartbeat_interval", "missed_heartbeats",
                                                                "startup_wait", "wait_for_response")}
        return ControllerConfig(spus=tuple(self.peers), bugs=frozenset(self.bugs), **timing)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(message)


# Command-line options that set a NodeConfig field directly: (flag, field, type, help).
_CORE_FLAGS: tuple[tuple[str, str, type, str], ...] = (
    ("--heartbeat-interval", "heartbeat_interval", float, "seconds between leader heartbeats"),
    ("--missed-heartbeats", "missed_heartbeats", int,
     "heartbeats a follower misses before it declares the leader gone (the election timeout is this "
     "times the heartbeat interval)"),
    ("--election-random-wait", "election_random_wait", float,
     "upper bound (seconds) of the random wait before proposing, after the leader is declared gone"),
    ("--startup-wait", "startup_wait", float, "seconds a starting node listens for an existing leader"),
    ("--proposal-timeout", "proposal_timeout", float,
     "seconds a candidate (or a scouting round) waits for a majority"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python3 -m cluster.node",
                     description="Run one node of the replicated cluster (the system under test).")
    parser.add_argument("--id", dest="node_id", required=True, help="this node's id, e.g. n1")
    parser.add_argument("--listen", required=True, help="host:port for clients and peers, e.g. 0.0.0.0:7000")
    parser.add_argument("--peers", default="",
                        help="the other members: n2=host:port,n3=host:port (empty: a one-node cluster)")
    parser.add_argument("--store", default="",
                        help="lease mode: the external store's members (a raft cluster): s1=host:port,...")
    parser.add_argument("--data-dir", required=True, help="directory for the storage file, journal and log")
    parser.add_argument("--mode", default="blazingmq",
                        help=f"election mode: {', '.join(ELECTIONS)}")
    parser.add_argument("--bug", dest="bugs", action="append", default=[], metavar="NAME",
                        help=f"switch on a known bug (repeatable): {', '.join(sorted(KNOWN_BUGS))}")
    parser.add_argument("--fsync", default="always", choices=FSYNC_POLICIES,
                        help="fsync the storage file on every write (always, default) or leave it to the OS")
    for flag, name, kind, text in _CORE_FLAGS:
        parser.add_argument(flag, dest=name, type=kind, default=None, help=text)
    parser.add_argument("--controller", action="store_true",
                        help=f"run the fluvio controller (SC) instead of a replica: --mode fluvio --id {CONTROLLER_ID}, "
                             "--peers the SPUs")
    parser.add_argument("--no-scouting", action="store_true",
                        help="disable ElectionScouting (blazingmq) / PreVote (raft)")
    parser.add_argument("--core-option", action="append", default=[], metavar="NAME=VALUE",
                        help="set any other NodeConfig field (VALUE is JSON, else a string); repeatable")
    parser.add_argument("--seed", type=int, default=None, help="seed of the node's RNG (default: os.urandom)")
    parser.add_argument("--journal", default=None, help=f"journal path (default DATA_DIR/{JOURNAL_FILE})")
    parser.add_argument("--log-file", default=None, help="log path (default DATA_DIR/node.log); also stderr")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    parser.add_argument("--pid-file", default=None, help="write the process id here while running")
    return parser


def parse_options(argv: Sequence[str]) -> NodeOptions:
    """The command line as ``NodeOptions``, validated (the core's config included); ``ConfigError``
    with one line otherwise. Touches no file."""
    args = build_parser().parse_args(list(argv))
    node_id = args.node_id.strip()
    if not node_id or any(c in node_id for c in "=,: /"):
        raise ConfigError(f"--id {args.node_id!r} must be a non-empty name without '=', ',', ':', '/' or spaces")
    try:
        listen = parse_address(args.listen)
    except ValueError as exc:
        raise ConfigError(f"--listen: {exc}") from None
    try:
        peers = parse_node_addresses(args.peers)
    except ValueError as exc:
        raise ConfigError(f"--peers: {exc}") from None
    try:
        store = parse_node_addresses(args.store)
    except ValueError as exc:
        raise ConfigError(f"--store: {exc}") from None
    if node_id in peers:
        raise ConfigError(f"--peers lists this node ({node_id}) itself; list only the other members")
    core: dict[str, Any] = {}
    for _, name, _, _ in _CORE_FLAGS:
        if getattr(args, name) is not None:
            core[name] = getattr(args, name)
    if args.no_scouting:
        core["scouting"] = False
    for item in args.core_option:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--core-option {item!r} must be NAME=VALUE")
        try:
            core[name.strip()] = json.loads(text)
        except ValueError:
            core[name.strip()] = text
    # fsync is a setting like the others; --fsync is its older spelling (a setting given both ways wins).
    fsync = core.pop("fsync", args.fsync)
    if not args.controller:
        try:
            check_settings(core, args.mode)
        except ValueError as exc:
            raise ConfigError(f"--core-option: {exc}") from None
    data_dir = os.path.abspath(args.data_dir)
    options = NodeOptions(
        node_id=node_id, listen=listen, peers=peers, data_dir=data_dir, mode=args.mode,
        bugs=tuple(args.bugs), fsync=fsync, seed=args.seed,
        journal=os.path.abspath(args.journal) if args.journal else os.path.join(data_dir, JOURNAL_FILE),
        log_file=os.path.abspath(args.log_file) if args.log_file else os.path.join(data_dir, "node.log"),
        pid_file=os.path.abspath(args.pid_file) if args.pid_file else None,
        log_level=args.log_level, core=core, controller=args.controller, store=store,
    )
    try:
        options.controller_config() if options.controller else options.node_config()
    except TypeError as exc:  # an unknown --core-option name
        raise ConfigError(f"--core-option: {exc}") from None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return options


def prepare_environment(options: NodeOptions) -> socket.socket:
    """Check every path is writable and bind the listen socket; ``ConfigError`` otherwise.

    Done before anything starts, so a bad environment never leaves a half-started node behind.
    """
    paths = {options.data_dir: "--data-dir"}
    paths.setdefault(os.path.dirname(options.journal), "--journal")
    paths.setdefault(os.path.dirname(options.log_file), "--log-file")
    if options.pid_file:
        paths.setdefault(os.path.dirname(options.pid_file), "--pid-file")
    for directory, option in paths.items():
        try:
            check_writable_directory(directory)
        except OSError as exc:
            raise ConfigError(f"directory {directory} is not writable ({exc.strerror or exc}); "
                              f"pass a writable {option}") from None
    host, port = options.listen
    try:
        return socket.create_server((host, port), family=_family(host), reuse_port=False)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); pick another --listen") \
            from None


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


class PeerLink:
    """The outbound connection to one peer: a bounded queue of encoded lines and a task that keeps
    (re)connecting with exponential backoff and writes the queue out."""

    def __init__(self, self_id: str, peer_id: str, address: tuple[str, int], rng: random.Random) -> None:
        self.self_id = self_id
        self.peer_id = peer_id
        self.address = address
        self._rng = rng
        self._queue: deque[bytes] = deque()
        self._queued_bytes = 0
        self._wake = asyncio.Event()
        self._writer: asyncio.StreamWriter | None = None
        self.connected = False
        self.dropped = 0

    def send(self, message: dict[str, Any]) -> None:
        try:
            line = encode(peer_envelope(self.self_id, message), limit=PEER_LINE_LIMIT)
        except MessageTooLarge as exc:
            log.error("dropping a message to %s: %s", self.peer_id, exc)
            return
        self._queue.append(line)
        self._queued_bytes += len(line)
        while len(self._queue) > 1 and (len(self._queue) > PEER_QUEUE_LIMIT or self._queued_bytes > PEER_QUEUE_BYTES):
            self._queued_bytes -= len(self._queue.popleft())
            self.dropped += 1
        self._wake.set()

    def push(self) -> None:
        """Write what is queued to the connection now instead of when the link's task next runs (the
        driver calls this before an fsync that blocks the event loop). Order is kept: the task writes
        only from the same queue. Above the transport's buffer limit it leaves the queue to the task."""
        writer = self._writer
        if not self._queue or writer is None or writer.is_closing():
            return
        if writer.transport.get_write_buffer_size() > PEER_QUEUE_BYTES:
            return
        data = b"".join(self._queue)
        self._queue.clear()
        self._queued_bytes = 0
        writer.write(data)

    async def run(self) -> None:
        backoff = 0.05
        while True:
            try:
                reader, writer = await asyncio.open_connection(*self.address)
            except OSError as exc:
                if backoff >= 1.0:
                    log.debug("peer %s at %s:%s unreachable: %s", self.peer_id, *self.address, exc)
                # Jitter from the node's RNG, so that reconnect storms spread out.
                await asyncio.sleep(backoff * (0.5 + self._rng.random()))
                backoff = min(backoff * 2, 1.0)
                continue
            backoff = 0.05
            self.connected = True
            log.info("connected to peer %s at %s:%s", self.peer_id, *self.address)
            watcher = asyncio.create_task(self._watch_close(reader))
            try:
                writer.write(encode(peer_hello(self.self_id)))
                self._writer = writer
                while not watcher.done():
                    if not self._queue:
                        self._wake.clear()
                        await self._wake.wait()
                        continue
                    data = b"".join(self._queue)
                    self._queue.clear()
                    self._queued_bytes = 0
                    writer.write(data)
                    await writer.drain()
            except (OSError, ConnectionError) as exc:
                log.info("lost peer %s: %s", self.peer_id, exc)
            else:
                log.info("peer %s closed the connection", self.peer_id)
            finally:
                self.connected = False
                self._writer = None
                watcher.cancel()
                writer.close()

    async def _watch_close(self, reader: asyncio.StreamReader) -> None:
        """The peer never writes on this connection: end of stream (or an error) means it is gone."""
        try:
            while await reader.read(READ_CHUNK):
                pass
        except (OSError, ConnectionError):
            pass
        self._wake.set()


class ClientConnection:
    """One accepted client connection and the requests it has waiting in the core."""

    def __init__(self, number: int, writer: asyncio.StreamWriter) -> None:
        self.number = number
        self.writer = writer
        self.waiting: set[Hashable] = set()
        self.answered = asyncio.Event()  # set whenever nothing is waiting
        self.answered.set()
        self._requests = itertools.count()
        self._outbox: list[bytes] = []

    def next_ref(self) -> tuple[int, int]:
        return (self.number, next(self._requests))

    def send(self, reply: dict[str, Any]) -> None:
        """Queue a reply; ``flush`` writes everything queued in one system call."""
        try:
            line = encode(reply)
        except MessageTooLarge as exc:
            line = encode(error_reply(exc, reply.get("id")))
        self._outbox.append(line)

    def flush(self) -> None:
        outbox, self._outbox = self._outbox, []
        if not outbox or self.writer.is_closing():
            return
        self.writer.write(b"".join(outbox))
        if self.writer.transport.get_write_buffer_size() > CLIENT_BUFFER_LIMIT:
            log.warning("client connection %d does not read its replies; closing it", self.number)
            self.writer.close()


class NodeRuntime:
    """One running node: the core, its files, its connections and the driver loop."""

    def __init__(self, options: NodeOptions, core: Node, storage: StorageFile, journal: JournalWriter,
                 listen_socket: socket.socket, rng: random.Random,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.options = options
        self.core = core
        self.storage = storage
        self.journal = journal
        self.clock = clock
        self.wall = wall
        self._socket = listen_socket
        self._rng = rng
        self._inbox: deque[tuple[str, Hashable, dict[str, Any]]] = deque()
        self._wake: asyncio.Event | None = None
        self._room = asyncio.Event()  # set while the inbox is below INBOX_LIMIT
        self._room.set()
        self._next_tick: float | None = None
        self._stopping = False
        self._links = {peer: PeerLink(options.node_id, peer, address, rng)
                       for peer, address in options.peers.items()}
        self._waiting: dict[Hashable, tuple[ClientConnection, Any]] = {}
        self._store = StoreLinks(options.store, self._on_store_reply, timeout=5.0)
        self._runtime_replies: list[tuple[Hashable, dict[str, Any]]] = []
        self._to_flush: set[ClientConnection] = set()
        self._connection_numbers = itertools.count(1)
        self.turns = 0
        self.inputs = 0
        self.persist_seconds = 0.0
        self.early_sent = 0  # peer messages sent before their turn's fsync (Ready.early)

    async def run(self) -> None:
        """Serve until SIGTERM/SIGINT (or ``stop()``); then journal ``stop``."""
        loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stop, signum)
        server = await asyncio.start_server(self._accept, sock=self._socket, limit=READ_CHUNK)
        tasks = [asyncio.create_task(link.run(), name=f"peer-{link.peer_id}") for link in self._links.values()]
        graceful = False
        try:
            await self._drive()
            graceful = True
        finally:
            server.close()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._store.close()
            if graceful:
                self.journal.append_events([{"event": "stop"}], self.wall())
            log.info("driver turns %d, core steps %d, storage records %d, fsyncs %d, %.1f s persisting, "
                     "peer messages sent before an fsync %d, dropped %d", self.turns, self.inputs,
                     self.storage.records_written, self.storage.fsyncs, self.persist_seconds, self.early_sent,
                     sum(link.dropped for link in self._links.values()))
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)

    def stop(self, signum: int | None = None) -> None:
        if signum is not None:
            log.info("received %s, stopping", signal.Signals(signum).name)
        self._stopping = True
        if self._wake is not None:
            self._wake.set()

    async def _drive(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._wake is not None
        wall = self.wall()
        self._execute([(self.core.start(self.clock(), wall), wall)])
        while not self._stopping:
            if not self._inbox:
                now = self.clock()
                due = now + MAX_IDLE_TICK if self._next_tick is None else min(self._next_tick, now + MAX_IDLE_TICK)
                if due > now:
                    self._wake.clear()
                    timer = loop.call_later(due - now, self._wake.set)
                    await self._wake.wait()
                    timer.cancel()
                    if self._stopping:
                        break
            else:
                await asyncio.sleep(0)  # let the sockets fill the inbox: a bigger turn, one fsync
            self._turn()

    def _turn(self) -> None:
        steps: list[tuple[Ready, float]] = []
        now, wall = self.clock(), self.wall()
        if self._next_tick is None or now >= self._next_tick or not self._inbox:
            steps.append((self.core.tick(now, wall), wall))
            self._note_tick(steps[-1][0])
        inbox = self._inbox
        batch = [inbox.popleft() for _ in range(min(len(inbox), MAX_TURN_EVENTS))]
        # Peer messages before client requests (inputs from different connections have no order to keep):
        # a leader's acknowledgements then commit, and their replies leave, before the new writes of the
        # same turn need their fsync (see _execute_turn).
        batch.sort(key=lambda item: item[0] != "peer")
        for kind, source, message in batch:
            now, wall = self.clock(), self.wall()
            ready = self._step(kind, source, message, now, wall)
            if ready is not None:
                steps.append((ready, wall))
                self._note_tick(ready)
        if len(inbox) <= INBOX_LIMIT:
            self._room.set()
        self.turns += 1
        self.inputs += len(steps)
        self._execute_turn(steps)

    def _note_tick(self, ready: Ready) -> None:
        if ready.next_tick is not None:
            self._next_tick = ready.next_tick

    def _step(self, kind: str, source: Hashable, message: dict[str, Any], now: float, wall: float) -> Ready | None:
        """Feed one input to the core. An exception there is a core bug: it is logged with the input and
        the input dropped (a client gets an indefinite error), so bad input cannot stop the node."""
        try:
            if kind == "peer":
                return self.core.receive(str(source), message, now, wall)
            if kind == "store":
                return self.core.store_reply(str(source), message, now, wall)
            return self.core.request(source, message, now, wall)
        except Exception:
            log.exception("core failed on %s input from %r: %.500s", kind, source, json.dumps(message))
            if kind == "client":
                self._runtime_replies.append((source, core_error_reply(
                    None, "internal-error", "the node failed handling this request; it may or may not take effect")))
            return None

    def _execute_turn(self, steps: list[tuple[Ready, float]]) -> None:
        """The output of a step may leave once the records of that step and of every step before it are
        durable. So the steps before the first one with records to fsync release their output at once, and
        the rest after one fsync for all of them."""
        split = next((i for i, (ready, _) in enumerate(steps) if _needs_sync(ready)), len(steps))
        if 0 < split < len(steps):
            self._execute(steps[:split])
            self._execute(steps[split:])
        else:
            self._execute(steps)

    def _execute(self, steps: list[tuple[Ready, float]]) -> None:
        """Carry out the core's output for consecutive steps. The only place output leaves the process."""
        records = [record for ready, _ in steps for record in ready.persist]
        # An `applied` record claims "applied and journalled" (cluster.core.storage): it is written after
        # the journal lines, so a kill between the two writes cannot hide apply events from the journal.
        applied = [record for record in records if record.get("t") == APPLIED_RECORD]
        if applied:
            records = [record for record in records if record.get("t") != APPLIED_RECORD]
        # Without fsync there is nothing to overlap, and the link tasks batch better than early pushes.
        early = self._send_early(steps) if records and self.options.fsync == "always" else [0] * len(steps)
        self._persist(records, sync=True)
        for ready, wall in steps:
            if ready.journal:
                for line in self.journal.append_events(ready.journal, wall):
                    _log_event(line)
        self._persist(applied, sync=False)
        for (ready, _), sent in zip(steps, early, strict=True):
            for peer, message in ready.messages[sent:]:
                link = self._links.get(peer)
                if link is not None:
                    link.send(message)
                else:
                    log.error("core addressed a message to unknown peer %r", peer)
        for ready, _ in steps:
            for member, request in ready.requests:
                self._store.send(member, request)
        for ready, _ in steps:
            for ref, reply in ready.replies:
                self._reply(ref, reply)
        runtime_replies, self._runtime_replies = self._runtime_replies, []
        for ref, reply in runtime_replies:
            self._reply(ref, reply)
        if self._to_flush:
            for connection in self._to_flush:
                connection.flush()
            self._to_flush.clear()

    def _send_early(self, steps: list[tuple[Ready, float]]) -> list[int]:
        """Before the fsync: send each step's ``Ready.early`` messages (a leader's AppendEntries of new
        entries, Raft thesis 10.2.1), so they travel and followers persist them while this node fsyncs,
        one fsync on a write's path instead of two. Returns how many messages of each step left.

        They do not depend on this step's records being durable (docs/node-core.md), nor on earlier steps'
        new entries (the leader counts its own copy only when a follower answers, in a later turn, after
        this fsync). A step with other records to persist (a term, a vote, a follower's append) ends the
        early sending for the steps after it in the group: their messages wait for the fsync."""
        sent: list[int] = []
        pushed: dict[str, PeerLink] = {}
        clean = True
        for ready, _ in steps:
            count = min(ready.early, len(ready.messages)) if clean else 0
            for peer, message in ready.messages[:count]:
                link = self._links.get(peer)
                if link is not None:
                    link.send(message)
                    pushed[peer] = link
                else:
                    log.error("core addressed a message to unknown peer %r", peer)
            sent.append(count)
            self.early_sent += count
            if count == 0 and _needs_sync(ready):
                clean = False
        for link in pushed.values():
            link.push()  # into the socket now: the fsync below blocks the event loop
        return sent

    def _persist(self, records: list[dict[str, Any]], sync: bool) -> None:
        if not records:
            return
        started = time.perf_counter()
        try:
            self.storage.append(records, sync=sync)
        except OSError as exc:
            log.critical("cannot persist to %s (%s); stopping without sending anything", self.storage.path, exc)
            raise SystemExit(1) from exc
        self.persist_seconds += time.perf_counter() - started

    def _reply(self, ref: Hashable, reply: dict[str, Any]) -> None:
        waiting = self._waiting.pop(ref, None)
        if waiting is None:
            return  # the client went away, or the core answered twice
        connection, request_id = waiting
        connection.waiting.discard(ref)
        if not connection.waiting:
            connection.answered.set()
        connection.send({**reply, "id": request_id})
        self._to_flush.add(connection)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        decoder = LineDecoder(MAX_LINE_BYTES)
        peer_id: str | None = None
        client: ClientConnection | None = None
        assert self._wake is not None
        try:
            while True:
                data = await reader.read(READ_CHUNK)
                if not data:
                    items: list[Any] = decoder.close()
                    if not items:
                        break
                else:
                    items = decoder.feed(data)
                for item in items:
                    if peer_id is None and client is None:
                        peer_id = self._first_line(item, writer, peername)
                        if peer_id is not None:
                            decoder.limit = PEER_LINE_LIMIT
                            continue
                        client = ClientConnection(next(self._connection_numbers), writer)
                    if peer_id is not None:
                        self._on_peer_line(peer_id, item)
                    else:
                        assert client is not None
                        self._on_client_line(client, item)
                if items:
                    self._wake.set()
                    if len(self._inbox) > INBOX_LIMIT:
                        self._room.clear()
                        await self._room.wait()  # backpressure: stop reading until the driver catches up
                if not data:
                    break
            if client is not None and client.waiting:
                # The client closed its sending side (`nc -q1` does): answer what it asked first.
                await asyncio.wait_for(client.answered.wait(), HALF_CLOSED_GRACE)
        except (OSError, ConnectionError, _Refused, TimeoutError):
            pass
        except asyncio.CancelledError:
            pass  # the node is stopping; returning normally keeps asyncio from logging the cancellation
        finally:
            if client is not None:
                for ref in client.waiting:
                    self._waiting.pop(ref, None)
            writer.close()

    def _first_line(self, item: Any, writer: asyncio.StreamWriter, peername: Any) -> str | None:
        if not isinstance(item, dict):
            return None
        try:
            peer_id = hello_peer_id(item)
        except WireError as exc:
            writer.write(encode(error_reply(exc)))
            raise _Refused from None
        if peer_id is None:
            return None
        if peer_id not in self._links:
            log.warning("refusing a peer connection from %s claiming unknown id %r", peername, peer_id)
            raise _Refused
        log.info("peer %s connected from %s", peer_id, peername)
        return peer_id

    def _on_peer_line(self, peer_id: str, item: Any) -> None:
        if isinstance(item, WireError):
            log.warning("dropping a bad line from peer %s: %s", peer_id, item)
            return
        try:
            sender, message = open_envelope(item)
        except WireError as exc:
            log.warning("dropping a bad line from peer %s: %s", peer_id, exc)
            return
        if sender != peer_id:
            log.warning("dropping a message from peer %s that claims to come from %r", peer_id, sender)
            return
        self._inbox.append(("peer", peer_id, message))

    def _on_store_reply(self, member: str, reply: dict[str, Any]) -> None:
        self._inbox.append(("store", member, reply))
        if self._wake is not None:
            self._wake.set()

    def _on_client_line(self, client: ClientConnection, item: Any) -> None:
        if isinstance(item, WireError):
            log.info("bad line from client connection %d: %s", client.number, item)
            client.send(error_reply(item))
            client.flush()
            return
        ref = client.next_ref()
        self._waiting[ref] = (client, item.get("id"))
        client.waiting.add(ref)
        client.answered.clear()
        self._inbox.append(("client", ref, item))


def _needs_sync(ready: Ready) -> bool:
    return any(record.get("t") != APPLIED_RECORD for record in ready.persist)


class _Refused(Exception):
    """The first line of a connection was refused; close it."""


def _log_event(line: dict[str, Any]) -> None:
    if line.get("event") == "role":
        group = f" in {line['group']}" if "group" in line else ""  # a storage shard's (docs/shards.md)
        log.info("role %s term %s leader %s%s", line.get("role"), line.get("term"), line.get("leader"), group)
    elif log.isEnabledFor(logging.DEBUG):
        log.debug("journal %s", json.dumps(line))


def configure_logging(options: NodeOptions) -> None:
    formatter = logging.Formatter(f"%(asctime)s.%(msecs)03d {options.node_id} %(levelname)s %(message)s",
                                  datefmt="%Y-%m-%dT%H:%M:%S")
    root = logging.getLogger()
    root.setLevel(options.log_level)
    for handler in (logging.StreamHandler(sys.stderr), logging.FileHandler(options.log_file)):
        handler.setFormatter(formatter)
        root.addHandler(handler)


def main(argv: Sequence[str] | None = None) -> int:
    """Run a node until it is stopped; the exit code (0 after SIGTERM, 2 for bad config)."""
    try:
        options = parse_options(sys.argv[1:] if argv is None else argv)
        listen_socket = prepare_environment(options)
    except ConfigError as exc:
        print(f"cluster.node: error: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    configure_logging(options)
    seed = options.seed if options.seed is not None else int.from_bytes(os.urandom(8), "big")
    rng = random.Random(seed)
    log.info("starting node %s: listen %s:%s, peers %s, mode %s, bugs %s, fsync %s, seed %d, pid %d",
             options.node_id, *options.listen,
             ",".join(f"{p}={h}:{port}" for p, (h, port) in options.peers.items()) or "none",
             options.mode, ",".join(options.bugs) or "none", options.fsync, seed, os.getpid())
    if options.pid_file:
        with open(options.pid_file, "w") as handle:
            handle.write(f"{os.getpid()}\n")
    storage_path = os.path.join(options.data_dir, STORAGE_FILE)
    storage, records, truncation = open_storage(storage_path, options.fsync)  # type: ignore[arg-type]
    if truncation is not None:
        log.warning("%s", truncation.describe())
    journal, journal_truncation = open_journal(options.journal, options.node_id)
    if journal_truncation is not None:
        log.warning("%s", journal_truncation.describe())
    try:
        try:
            recovered = (recover_controller(records, options.peers) if options.controller
                         else recover(records))
        except (StorageError, ValueError) as exc:
            log.critical("%s: %s; move the data directory away to start this node empty", storage_path, exc)
            return 1
        log.info("recovered %d storage records from %s", len(records), storage_path)
        if options.controller:
            core: Node | Controller = Controller(options.controller_config(), recovered,  # type: ignore[arg-type]
                                                 now=time.monotonic(), wall=time.time(), rng=rng)
        else:
            config = options.node_config()
            core = node_class(config)(config, recovered, now=time.monotonic(), wall=time.time(), rng=rng)
        runtime = NodeRuntime(options, core, storage, journal, listen_socket, rng)  # type: ignore[arg-type]
        asyncio.run(runtime.run())
        log.info("stopped")
        return 0
    finally:
        storage.close()
        journal.close()
        if options.pid_file:
            try:
                os.unlink(options.pid_file)
            except OSError:
                pass


if __name__ == "__main__":
    sys.exit(main())
