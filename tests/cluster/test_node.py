"""The node runtime without processes: command-line validation, and the driver's order of effects
(persist, journal, send, reply) checked against a scripted core with a fake clock."""

import random
import socket

import pytest

from cluster import node as node_module
from cluster.core.member import Ready
from cluster.node import (
    ClientConnection,
    ConfigError,
    NodeRuntime,
    PeerLink,
    main,
    parse_options,
    prepare_environment,
)
from cluster.wire import MalformedMessage

BASE = ["--id", "n1", "--listen", "127.0.0.1:7001", "--peers", "n2=127.0.0.1:7002,n3=127.0.0.1:7003"]


def test_a_full_command_line_becomes_options_and_a_core_config(tmp_path):
    options = parse_options([*BASE, "--data-dir", str(tmp_path), "--mode", "raft", "--bug", "vote-twice",
                             "--bug", "stale-read", "--fsync", "never", "--heartbeat-interval", "0.05",
                             "--missed-heartbeats", "4", "--election-random-wait", "0.2", "--no-scouting",
                             "--core-option", "dedup_window=60", "--seed", "7", "--pid-file", "p.pid"])
    assert options.peers == {"n2": ("127.0.0.1", 7002), "n3": ("127.0.0.1", 7003)}
    assert options.journal == str(tmp_path / "journal.jsonl") and options.log_file == str(tmp_path / "node.log")
    assert options.seed == 7 and options.pid_file.endswith("p.pid")
    config = options.node_config()
    assert (config.node_id, config.peers, config.mode, config.fsync) == ("n1", ("n2", "n3"), "raft", "never")
    assert config.bugs == {"vote-twice", "stale-read"}
    assert (config.heartbeat_interval, config.missed_heartbeats, config.election_random_wait) == (0.05, 4, 0.2)
    assert config.scouting is False and config.dedup_window == 60


@pytest.mark.parametrize(
    "argv, complaint",
    [
        ([*BASE, "--bug", "nope"], "unknown bug 'nope'; valid bugs: ack-before-commit"),
        ([*BASE, "--mode", "paxos"], "unknown mode 'paxos'"),
        ([*BASE, "--mode", "raft", "--bug", "skip-leader-sync"], "applies only to mode blazingmq"),
        (["--id", "n1", "--listen", "127.0.0.1:7001", "--peers", "n2"], "--peers: node list item 'n2' must be id=host:port"),
        (["--id", "n1", "--listen", "127.0.0.1:7001", "--peers", "n2=h:1,n2=h:2"], "'n2' appears twice"),
        (["--id", "n1", "--listen", "127.0.0.1:7001", "--peers", "n1=h:1"], "lists this node (n1) itself"),
        (["--id", "n1", "--listen", "127.0.0.1:7001", "--peers", "n2=h:port"], "port that is not a number"),
        (["--id", "n1", "--listen", "7001"], "--listen: address '7001' must be host:port"),
        (["--listen", "127.0.0.1:7001"], "the following arguments are required: --id"),
        (["--id", "a=b", "--listen", "127.0.0.1:7001"], "--id 'a=b' must be a non-empty name"),
        ([*BASE, "--heartbeat-interval", "0"], "heartbeat_interval must be > 0"),
        ([*BASE, "--core-option", "no_such_field=1"], "--core-option"),
        ([*BASE, "--core-option", "dedup_window"], "must be NAME=VALUE"),
        ([*BASE, "--fsync", "sometimes"], "invalid choice: 'sometimes'"),
    ],
)
def test_bad_command_lines_are_one_line_errors(tmp_path, argv, complaint):
    with pytest.raises(ConfigError) as raised:
        parse_options([*argv, "--data-dir", str(tmp_path)])
    assert complaint in str(raised.value) and "\n" not in str(raised.value)


def test_an_unwritable_data_dir_and_a_busy_port_are_config_errors(tmp_path):
    (tmp_path / "file").write_text("")
    options = parse_options([*BASE, "--data-dir", str(tmp_path / "file" / "d")])
    with pytest.raises(ConfigError, match="is not writable .*; pass a writable --data-dir"):
        prepare_environment(options)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        options = parse_options(["--id", "n1", "--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "ok")])
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
            prepare_environment(options)


def test_main_exits_2_with_one_line_before_writing_anything(tmp_path, capsys):
    assert main([*BASE, "--data-dir", str(tmp_path / "d"), "--bug", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cluster.node: error: unknown bug 'nope'") and err.count("\n") == 1
    assert not (tmp_path / "d").exists()


class Effects:
    """Everything the driver does, in order, as (kind, detail) pairs."""

    def __init__(self):
        self.done = []


class FakeStorage:
    path = "storage.dat"
    records_written = 0
    fsyncs = 0

    def __init__(self, effects):
        self.effects = effects

    def append(self, records, sync=True):
        self.effects.done.append(("persist-synced" if sync else "persist-unsynced", [r["t"] for r in records]))


class FakeJournal:
    def __init__(self, effects):
        self.effects = effects

    def append_events(self, events, wall):
        self.effects.done.append(("journal", [e["event"] for e in events], wall))
        return [{**e, "wall": wall} for e in events]


class FakeWriter:
    class transport:  # noqa: N801 - mimics asyncio.StreamWriter.transport
        @staticmethod
        def get_write_buffer_size():
            return 0

    def __init__(self, effects):
        self.effects = effects

    def write(self, data):
        self.effects.done.append(("reply", data))

    def is_closing(self):
        return False


class ScriptedCore:
    """Answers each call with the next scripted Ready; raises for a request whose op is "boom"."""

    def __init__(self, readies):
        self.readies = list(readies)
        self.calls = []

    def _next(self, call):
        self.calls.append(call)
        return self.readies.pop(0) if self.readies else Ready()

    def tick(self, now, wall):
        return self._next(("tick", now))

    def receive(self, sender, message, now, wall):
        return self._next(("receive", sender, message["type"]))

    def request(self, client, request, now, wall):
        if request.get("op") == "boom":
            raise RuntimeError("core bug")
        return self._next(("request", client, request["op"]))


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def runtime_with(tmp_path, core, effects, clock, *args):
    options = parse_options([*BASE, "--data-dir", str(tmp_path), *args])
    runtime = NodeRuntime(options, core, FakeStorage(effects), FakeJournal(effects), None, random.Random(1),
                          clock=clock, wall=lambda: 5000.0)
    for peer, link in runtime._links.items():
        link.send = lambda message, peer=peer: effects.done.append(("send", peer, message["type"]))
        link.push = lambda peer=peer: effects.done.append(("push", peer))
    return runtime


def test_one_turn_persists_then_journals_then_sends_then_replies(tmp_path):
    effects = Effects()
    first = Ready(persist=[{"t": "entries"}, {"t": "applied"}], journal=[{"event": "apply"}],
                  messages=[("n2", {"type": "AppendEntries"})], replies=[], next_tick=100.5)
    second = Ready(persist=[{"t": "term"}], journal=[{"event": "role"}],
                   messages=[("n3", {"type": "LeaderHeartbeat"})], replies=[], next_tick=100.2)
    clock = FakeClock()
    core = ScriptedCore([first, second])
    runtime = runtime_with(tmp_path, core, effects, clock)
    runtime._next_tick = 100.15
    connection = ClientConnection(1, FakeWriter(effects))
    runtime._on_client_line(connection, {"id": "abc", "op": "write", "key": "k", "value": 1})
    runtime._inbox.append(("peer", "n2", {"type": "LeaderHeartbeatResponse"}))
    [ref] = connection.waiting
    second.replies.append((ref, {"id": None, "ok": True, "lsn": [1, 1]}))
    clock.now = 100.1  # no timer due: inputs only
    runtime._turn()
    # Peer input first (it came second), then the client's.
    assert core.calls == [("receive", "n2", "LeaderHeartbeatResponse"), ("request", ref, "write")]
    assert effects.done == [
        ("persist-synced", ["entries", "term"]),  # every record of the turn in one synced write
        ("journal", ["apply"], 5000.0),
        ("journal", ["role"], 5000.0),
        ("persist-unsynced", ["applied"]),  # "applied and journalled": after the journal lines
        ("send", "n2", "AppendEntries"),
        ("send", "n3", "LeaderHeartbeat"),
        ("reply", b'{"id":"abc","ok":true,"lsn":[1,1]}\n'),  # the client's own id put back
    ]
    assert runtime._next_tick == 100.2 and not connection.waiting


def test_steps_before_the_first_fsync_release_their_output_without_waiting_for_it(tmp_path):
    effects = Effects()
    clock = FakeClock()
    ack = Ready(persist=[{"t": "applied"}], journal=[{"event": "commit"}], messages=[("n3", {"type": "Commit"})])
    write = Ready(persist=[{"t": "entries"}], journal=[{"event": "append"}],
                  messages=[("n2", {"type": "AppendEntries"})])
    runtime = runtime_with(tmp_path, ScriptedCore([ack, write]), effects, clock)
    runtime._next_tick = 1000.0
    connection = ClientConnection(1, FakeWriter(effects))
    runtime._on_client_line(connection, {"id": 1, "op": "write", "key": "k", "value": 2})
    runtime._inbox.append(("peer", "n2", {"type": "AppendEntriesResponse"}))
    [ref] = connection.waiting
    ack.replies.append((ref, {"ok": True, "lsn": [1, 1]}))  # a commit answers an earlier write
    runtime._turn()
    assert effects.done == [
        ("journal", ["commit"], 5000.0),
        ("persist-unsynced", ["applied"]),
        ("send", "n3", "Commit"),
        ("reply", b'{"ok":true,"lsn":[1,1],"id":1}\n'),  # before the new write's fsync
        ("persist-synced", ["entries"]),
        ("journal", ["append"], 5000.0),
        ("send", "n2", "AppendEntries"),
    ]


def test_a_leaders_early_append_entries_leave_before_its_fsync_and_the_rest_after(tmp_path):
    effects = Effects()
    clock = FakeClock()
    append = [("n2", {"type": "AppendEntries"}), ("n3", {"type": "AppendEntries"})]
    write = Ready(persist=[{"t": "entries"}], journal=[{"event": "append"}], messages=list(append), early=2)
    vote = Ready(persist=[{"t": "term"}], messages=[("n3", {"type": "VoteResponse"})])
    late_write = Ready(persist=[{"t": "entries"}], messages=[("n2", {"type": "AppendEntries"})], early=1)
    # Steps in order: the write, a vote (term record), another write (inputs are scripted in that order).
    runtime = runtime_with(tmp_path, ScriptedCore([write, vote, late_write]), effects, clock)
    runtime._next_tick = 1000.0
    connection = ClientConnection(1, FakeWriter(effects))
    for n in range(2):
        runtime._on_client_line(connection, {"id": n, "op": "write", "key": "k", "value": n})
    runtime._inbox.append(("peer", "n3", {"type": "VoteRequest"}))
    runtime._turn()
    assert effects.done == [
        ("send", "n2", "AppendEntries"),  # the write's entries travel while the leader fsyncs them
        ("send", "n3", "AppendEntries"),
        ("push", "n2"),
        ("push", "n3"),
        ("persist-synced", ["entries", "term", "entries"]),
        ("journal", ["append"], 5000.0),
        ("send", "n3", "VoteResponse"),
        ("send", "n2", "AppendEntries"),  # after a step with a term record: waits for the fsync
    ]


def test_without_fsync_nothing_is_sent_early(tmp_path):
    effects = Effects()
    write = Ready(persist=[{"t": "entries"}], messages=[("n2", {"type": "AppendEntries"})], early=1)
    runtime = runtime_with(tmp_path, ScriptedCore([]), effects, FakeClock(), "--fsync", "never")
    runtime._execute([(write, 0.0)])
    assert effects.done == [("persist-synced", ["entries"]), ("send", "n2", "AppendEntries")]


def test_a_peer_link_pushes_its_queue_into_an_open_connection_at_once(tmp_path):
    effects = Effects()
    link = PeerLink("n1", "n2", ("127.0.0.1", 1), random.Random(1))
    link.send({"type": "LeaderHeartbeat", "term": 1})
    link.push()  # not connected: the queue waits for the link's task
    assert len(link._queue) == 1 and effects.done == []
    link._writer = FakeWriter(effects)
    link.send({"type": "AppendEntries", "term": 1})
    link.push()
    assert not link._queue and link._queued_bytes == 0
    [(kind, data)] = effects.done
    assert data.count(b"\n") == 2 and data.index(b"LeaderHeartbeat") < data.index(b"AppendEntries")


def test_a_due_timer_ticks_the_core_before_the_inputs(tmp_path):
    effects = Effects()
    clock = FakeClock()
    core = ScriptedCore([Ready(next_tick=100.3)])
    runtime = runtime_with(tmp_path, core, effects, clock)
    runtime._next_tick = 100.2
    runtime._inbox.append(("peer", "n3", {"type": "AppendEntries"}))
    clock.now = 100.25
    runtime._turn()
    assert core.calls == [("tick", 100.25), ("receive", "n3", "AppendEntries")]
    assert runtime._next_tick == 100.3


def test_a_core_exception_on_a_request_is_an_indefinite_reply_and_the_node_goes_on(tmp_path):
    effects = Effects()
    clock = FakeClock()
    runtime = runtime_with(tmp_path, ScriptedCore([]), effects, clock)
    runtime._next_tick = 1000.0
    connection = ClientConnection(1, FakeWriter(effects))
    runtime._on_client_line(connection, {"id": 9, "op": "boom"})
    runtime._on_client_line(connection, MalformedMessage("not a JSON line"))
    runtime._turn()
    replies = [detail for kind, detail, *_ in effects.done if kind == "reply"]
    assert replies[0].startswith(b'{"id":null,"ok":false,"error":"bad-request","definite":true')
    assert b'"id":9' in replies[1] and b'"error":"internal-error","definite":false' in replies[1]


def test_a_reply_for_a_closed_connection_is_dropped(tmp_path):
    effects = Effects()
    clock = FakeClock()
    core = ScriptedCore([])
    runtime = runtime_with(tmp_path, core, effects, clock)
    connection = ClientConnection(1, FakeWriter(effects))
    runtime._on_client_line(connection, {"id": 1, "op": "read", "key": "k"})
    [ref] = connection.waiting
    for waiting in list(connection.waiting):  # what _accept does when the connection closes
        runtime._waiting.pop(waiting, None)
    runtime._execute([(Ready(replies=[(ref, {"ok": True})]), 0.0)])
    assert effects.done == []


def test_a_peer_queue_drops_its_oldest_messages_past_its_bounds(monkeypatch):
    monkeypatch.setattr(node_module, "PEER_QUEUE_LIMIT", 3)
    link = PeerLink("n1", "n2", ("127.0.0.1", 1), random.Random(1))
    for term in range(5):
        link.send({"type": "LeaderHeartbeat", "term": term})
    assert link.dropped == 2
    assert [b'"term":%d' % t in line for t, line in zip((2, 3, 4), link._queue, strict=True)] == [True] * 3
    monkeypatch.setattr(node_module, "PEER_QUEUE_BYTES", 200)
    link.send({"type": "AppendEntries", "term": 9, "entries": ["x" * 150]})
    assert len(link._queue) == 1 and link.dropped == 5
