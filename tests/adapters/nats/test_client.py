"""The NATS log client without a server: the requests it sends for appends and polls, how it classifies
every answer (ok / fail / info), where a poll reads from, final polls served only by the stream's leader,
and moving on from a server that cannot be reached."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from typing import Any

import pytest

from adapters.nats.client import (
    BATCH,
    FIRST_OFFSET,
    LEADER_QUESTION_TIMEOUT,
    NatsLogClient,
    NoResponders,
    ack_completion,
    stream_config,
)
from harness.db.client import home_node
from workloads.ops import Op

URLS = {"n1": "nats://10.0.0.1:4222", "n2": "nats://10.0.0.2:4222", "n3": "nats://10.0.0.3:4222"}


class Reply:
    def __init__(self, data: bytes) -> None:
        self.data = data


def _msg(seq: int, value: Any) -> bytes:
    data = base64.b64encode(json.dumps(value).encode()).decode()
    return json.dumps({"type": "io.nats.jetstream.api.v1.stream_msg_get_response",
                       "message": {"subject": "chaos.l0", "seq": seq, "data": data}}).encode()


NO_MESSAGE = json.dumps({"error": {"code": 404, "err_code": 10037, "description": "no message found"}}).encode()


class FakeServer:
    """Stands for a NATS cluster: answers requests through ``answer(node, subject, payload, headers)``
    (return bytes, or raise), records them, refuses connections to the nodes in ``down``."""

    def __init__(self, answer: Callable[[str, str, bytes, dict | None], bytes], down: tuple[str, ...] = ()) -> None:
        self.answer = answer
        self.down = set(down)
        self.requests: list[tuple[str, str, Any, dict | None]] = []
        self.timeouts: list[float] = []
        self.connects: list[str] = []

    async def connect(self, url: str, timeout: float) -> Any:
        node = next(n for n, u in URLS.items() if u == url)
        self.connects.append(node)
        if node in self.down:
            raise ConnectionRefusedError(f"connect to {url} refused")
        server = self

        class Conn:
            is_closed = False

            async def request(self, subject: str, payload: bytes = b"", timeout: float = 1.0,
                              headers: dict | None = None) -> Reply:
                body = json.loads(payload) if payload and subject.startswith("$JS.") else payload
                server.requests.append((node, subject, body, headers))
                server.timeouts.append(timeout)
                return Reply(server.answer(node, subject, payload, headers))

            async def close(self) -> None:
                self.is_closed = True

        return Conn()


def _client(server: FakeServer, home: str = "n1", **options: Any) -> NatsLogClient:
    return NatsLogClient(URLS, home, connect=server.connect, timeout=2.0, **options)


def _run(client: NatsLogClient, op: Op) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        try:
            return await client.invoke(client.prepare(op))
        finally:
            await client.close()

    return asyncio.run(go())


def _created(subject: str) -> bytes | None:
    if subject.startswith("$JS.API.STREAM.CREATE."):
        return json.dumps({"type": "io.nats.jetstream.api.v1.stream_create_response", "config": {}}).encode()
    return None


def test_streams_are_one_per_log_with_one_subject_and_the_replicas_asked_for() -> None:
    assert stream_config("l3", replicas=3, storage="file") == {
        "name": "l3", "subjects": ["chaos.l3"], "retention": "limits", "discard": "old", "max_msgs": -1,
        "max_bytes": -1, "max_age": 0, "storage": "file", "num_replicas": 3}


def test_an_append_creates_the_stream_once_then_publishes_and_the_acks_sequence_is_the_offset() -> None:
    server = FakeServer(lambda n, s, p, h: _created(s) or b'{"stream":"l0", "seq":7}')
    client = _client(server, replicas=1, storage="memory")

    async def go() -> list[dict[str, Any]]:
        out = [await client.invoke(Op("append", "l0", 1000001)), await client.invoke(Op("append", "l0", 1000002))]
        await client.close()
        return out

    first, second = asyncio.run(go())
    assert first == {"type": "ok", "value": [7, 1000001], "node": "n1", "group": "l0", "lsn": [0, 7]}
    assert second["value"] == [7, 1000002]
    subjects = [r[1] for r in server.requests]
    assert subjects == ["$JS.API.STREAM.CREATE.l0", "chaos.l0", "chaos.l0"]
    created = server.requests[0][2]
    assert created["num_replicas"] == 1 and created["storage"] == "memory"
    assert server.requests[1][2] == b"1000001" and server.requests[1][3] == {"Nats-Expected-Stream": "l0"}
    assert client.known_streams == {"l0"}


def test_an_append_nobody_received_fails_and_one_that_timed_out_is_unknown() -> None:
    def no_responders(n: str, s: str, p: bytes, h: dict | None) -> bytes:
        raise NoResponders("no responders available for request")

    def timed_out(n: str, s: str, p: bytes, h: dict | None) -> bytes:
        raise TimeoutError

    known = {"l0"}
    failed = _run(_client(FakeServer(no_responders), known_streams=known), Op("append", "l0", 5))
    assert failed["type"] == "fail" and failed["error"].startswith("no-responders")
    unknown = _run(_client(FakeServer(timed_out), known_streams=known), Op("append", "l0", 5))
    assert unknown["type"] == "info" and unknown["error"].startswith("timeout")


def test_an_ack_carrying_an_error_is_unknown_since_a_successor_may_have_stored_it() -> None:
    op = Op("append", "l0", 9)
    rejected = ack_completion(op, "n2", {"error": {"code": 503, "err_code": 10008, "description":
                                                   "JetStream cluster not active"}, "stream": "l0", "seq": 0})
    assert rejected["type"] == "info" and rejected["error"] == "JetStream cluster not active"
    assert ack_completion(op, "n2", {"stream": "l0"})["type"] == "info"
    assert ack_completion(op, "n2", {"stream": "l0", "seq": 3})["value"] == [3, 9]


def test_an_append_whose_stream_cannot_be_created_fails_before_anything_is_published() -> None:
    refused = json.dumps({"error": {"code": 500, "err_code": 10049, "description": "insufficient resources"}})
    server = FakeServer(lambda n, s, p, h: refused.encode())
    done = _run(_client(server), Op("append", "l0", 5))
    assert done["type"] == "fail" and "could not be created: insufficient resources" in done["error"]
    assert [r[1] for r in server.requests] == ["$JS.API.STREAM.CREATE.l0"]


def test_a_poll_reads_by_sequence_until_the_end_of_the_stream_and_the_next_poll_goes_on_from_there() -> None:
    stored = {1: 11, 2: 12, 4: 14}  # 3 was never stored: next_by_subj goes on to 4

    def answer(n: str, s: str, p: bytes, h: dict | None) -> bytes:
        body = json.loads(p)
        following = [q for q in sorted(stored) if q >= body["seq"]]
        assert body["next_by_subj"] == "chaos.l0"
        return _msg(following[0], stored[following[0]]) if following else NO_MESSAGE

    server = FakeServer(answer)
    client = _client(server, known_streams={"l0"})

    async def go() -> list[tuple[Op, dict[str, Any]]]:
        out = []
        for _ in range(2):
            op = client.prepare(Op("poll", "l0"))
            out.append((op, await client.invoke(op)))
        await client.close()
        return out

    (first_op, first), (second_op, second) = asyncio.run(go())
    assert first_op.value == FIRST_OFFSET
    assert first == {"type": "ok", "value": [[1, 11], [2, 12], [4, 14]], "node": "n1", "group": "l0"}
    assert second_op.value == 5 and second["value"] == []
    assert [r[2]["seq"] for r in server.requests] == [1, 2, 3, 5, 5]


def test_a_poll_returns_at_most_a_batch_and_from_0_reads_from_the_first_sequence() -> None:
    server = FakeServer(lambda n, s, p, h: _msg(json.loads(p)["seq"], json.loads(p)["seq"] * 10))
    done = _run(_client(server, known_streams={"l0"}), Op("poll", "l0", 0))
    assert [r[0] for r in done["value"]] == list(range(1, BATCH + 1))


def test_a_poll_cut_short_keeps_what_it_read_and_one_that_read_nothing_fails() -> None:
    def answer(n: str, s: str, p: bytes, h: dict | None) -> bytes:
        if json.loads(p)["seq"] == 1:
            return _msg(1, 11)
        raise TimeoutError

    partial = _run(_client(FakeServer(answer), known_streams={"l0"}), Op("poll", "l0", 1))
    assert partial["type"] == "ok" and partial["value"] == [[1, 11]]
    nothing = _run(_client(FakeServer(answer), known_streams={"l0"}), Op("poll", "l0", 2))
    assert nothing["type"] == "fail" and nothing["error"].startswith("timeout")


def _leader_is(leaders: list[str]) -> Callable[[str, str, bytes, dict | None], bytes]:
    """STREAM.INFO answers naming the given leaders in turn; gets answer one record then the end."""
    def answer(n: str, s: str, p: bytes, h: dict | None) -> bytes:
        if s.startswith("$JS.API.STREAM.INFO."):
            return json.dumps({"config": {}, "cluster": {"name": "chaos", "leader": leaders.pop(0)}}).encode()
        return _msg(1, 11) if json.loads(p)["seq"] == 1 else NO_MESSAGE

    return answer


def test_a_final_poll_is_served_only_by_the_streams_leader_before_and_after_the_reads() -> None:
    op = Op("poll", "l0", 0, node="n2", local=True)
    server = FakeServer(_leader_is(["n2", "n2"]))
    served = _run(_client(server, known_streams={"l0"}), op)
    assert served == {"type": "ok", "value": [[1, 11]], "node": "n2", "group": "l0"}
    assert {r[0] for r in server.requests} == {"n2"}  # through n2's connection only
    follower = _run(_client(FakeServer(_leader_is(["n3"])), known_streams={"l0"}), op)
    assert follower["type"] == "fail" and follower["error"] == "not-stream-leader: stream l0 is led by n3"
    moved = _run(_client(FakeServer(_leader_is(["n2", "n1"])), known_streams={"l0"}), op)
    assert moved["type"] == "fail" and "led by n1 after the reads" in moved["error"]
    leaderless = _run(_client(FakeServer(_leader_is([""])), known_streams={"l0"}), op)
    assert leaderless["type"] == "fail" and leaderless["error"].endswith("led by no server")


def test_a_final_poll_waits_for_the_streams_leader_to_answer_a_second_not_the_whole_timeout() -> None:
    """Only a stream's leader answers ``STREAM.INFO``: a stream that no server leads leaves it unanswered."""

    def unanswered(n: str, s: str, p: bytes, h: dict | None) -> bytes:
        raise TimeoutError("nats: timeout")

    server = FakeServer(unanswered)
    client = NatsLogClient(URLS, "n1", connect=server.connect, timeout=5.0, known_streams={"l0"})
    done = _run(client, Op("poll", "l0", 0, node="n2", local=True))
    assert done["type"] == "fail" and done["error"].endswith("led by no server")
    assert [r[1] for r in server.requests] == ["$JS.API.STREAM.INFO.l0"]
    assert 0 < server.timeouts[0] <= LEADER_QUESTION_TIMEOUT < 5.0


def test_an_unreachable_home_passes_the_operation_on_and_the_home_moves() -> None:
    server = FakeServer(lambda n, s, p, h: _created(s) or b'{"stream":"l0","seq":1}', down=("n2",))
    client = _client(server, home="n2")
    done = _run(client, Op("append", "l0", 5))
    assert done["type"] == "ok" and done["node"] == "n3" and client.home == "n3"
    assert server.connects == ["n2", "n3"]


def test_an_operation_pinned_to_an_unreachable_server_fails_there() -> None:
    server = FakeServer(lambda n, s, p, h: NO_MESSAGE, down=("n2",))
    done = _run(_client(server), Op("poll", "l0", 0, node="n2", local=True))
    assert done["type"] == "fail" and done["node"] == "n2" and done["error"].startswith("connection-refused")
    assert server.connects == ["n2"]


def test_what_the_client_cannot_run_fails_without_a_request() -> None:
    server = FakeServer(lambda n, s, p, h: b"{}")
    assert _run(_client(server), Op("read", "l0"))["type"] == "fail"
    assert _run(_client(server), Op("append", "l.0", 1))["error"] == "not a stream name: 'l.0'"
    assert _run(_client(server), Op("poll", "l0", 0, node="n9", local=True))["error"] == "no server called 'n9'"
    assert server.requests == []


def test_prepare_fills_in_only_a_poll_without_an_offset() -> None:
    client = _client(FakeServer(lambda n, s, p, h: b"{}"))
    client.next_offsets["l1"] = 8
    assert client.prepare(Op("poll", "l1", think=0.5)) == Op("poll", "l1", 8, think=0.5)
    assert client.prepare(Op("poll", "l2")).value == FIRST_OFFSET
    assert client.prepare(Op("poll", "l1", 0, node="n1", local=True)).value == 0
    assert client.prepare(Op("append", "l1", 3)) == Op("append", "l1", 3)


def test_bad_construction_and_homes_by_process() -> None:
    with pytest.raises(ValueError, match="home server 'n9'"):
        NatsLogClient(URLS, "n9")
    with pytest.raises(ValueError, match="storage must be one of file, memory"):
        NatsLogClient(URLS, "n1", storage="disk")
    assert [home_node(("n1", "n2", "n3"), p) for p in (0, 1, 2, 3)] == ["n1", "n2", "n3", "n1"]
