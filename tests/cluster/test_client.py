"""The client against scripted fake nodes on 127.0.0.1: pipelining, redirects, failover, ok/fail/info."""

import asyncio
import json
import threading

import pytest

from cluster.client import CLIENT_ERRORS, Client, Result, SyncClient
from cluster.core.errors import ERRORS
from cluster.wire import MAX_LINE_BYTES

CLOSE = object()  # a handler returns this to drop the connection instead of replying


class FakeNode:
    """A TCP server that answers each request line with ``handler(request)``: a dict reply (its ``id``
    filled in), None for no reply, or CLOSE. ``hold`` lists request ids whose replies wait until the
    next request arrives, to make replies come back out of order."""

    def __init__(self, handler, hold=()):
        self.handler = handler
        self.hold = set(hold)
        self.requests = []
        self.connections = 0
        self.server = None
        self._held = []

    async def start(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[:2]

    async def _serve(self, reader, writer):
        self.connections += 1
        while line := await reader.readline():
            request = json.loads(line)
            self.requests.append(request)
            reply = self.handler(request)
            if reply is CLOSE:
                writer.close()
                return
            if reply is None:
                continue
            data = json.dumps({**reply, "id": request["id"]}).encode() + b"\n"
            if request["id"] in self.hold:
                self._held.append(data)
                continue
            writer.write(data)
            for held in self._held:
                writer.write(held)
            self._held.clear()
        writer.close()

    async def stop(self):
        self.server.close()
        await self.server.wait_closed()


def run(coro):
    return asyncio.run(coro)


def ok(value=None, lsn=(1, 1)):
    return lambda request: {"ok": True, "value": value if value is not None else request.get("value"),
                            "lsn": list(lsn)}


def not_leader(leader):
    return lambda request: {"ok": False, "error": "not-leader", "definite": True, "leader": leader}


async def cluster_of(**handlers):
    nodes, fakes = {}, {}
    for name, handler in handlers.items():
        fake = FakeNode(handler)
        nodes[name] = await fake.start()
        fakes[name] = fake
    return nodes, fakes


def test_concurrent_requests_share_one_connection_and_replies_match_by_id():
    async def scenario():
        fake = FakeNode(lambda r: {"ok": True, "value": r["key"], "lsn": [2, r["id"]]}, hold={1})
        address = await fake.start()
        async with Client({"n1": address}) as client:
            first, second = await asyncio.gather(client.read("a"), client.read("b"))
        await fake.stop()
        return fake, first, second

    fake, first, second = run(scenario())
    assert fake.connections == 1
    assert [r["op"] for r in fake.requests] == ["read", "read"]
    assert (first.type, first.value, first.lsn, first.node) == ("ok", "a", (2, 1), "n1")
    assert (second.value, second.lsn) == ("b", (2, 2))


def test_operations_send_the_documented_request_shapes():
    async def scenario():
        nodes, fakes = await cluster_of(n1=ok("v"))
        async with Client(nodes) as client:
            await client.write("k", 1)
            await client.cas("k", 1, 2)
            await client.put("q", "m", "g-1")
            await client.consume("q")
            await client.confirm("q", "g-1")
        return [{k: v for k, v in r.items() if k != "id"} for r in fakes["n1"].requests]

    assert run(scenario()) == [
        {"op": "write", "key": "k", "value": 1},
        {"op": "cas", "key": "k", "value": [1, 2]},
        {"op": "put", "key": "q", "value": "m", "guid": "g-1"},
        {"op": "consume", "key": "q"},
        {"op": "confirm", "key": "q", "guid": "g-1"},
    ]


def test_not_leader_is_followed_to_the_named_leader_which_is_remembered():
    async def scenario():
        nodes, fakes = await cluster_of(n1=not_leader("n2"), n2=ok(lsn=(3, 7)), n3=not_leader("n2"))
        async with Client(nodes) as client:
            first = await client.write("k", "v", node="n1")
            second = await client.write("k", "w")
        return first, second, client.leader_hint, fakes

    first, second, hint, fakes = run(scenario())
    assert (first.type, first.node, first.redirects, first.lsn) == ("ok", "n2", 1, (3, 7))
    assert (second.node, second.redirects) == ("n2", 0)  # went straight to the remembered leader
    assert hint == "n2"
    assert len(fakes["n1"].requests) == 1 and len(fakes["n2"].requests) == 2


def test_redirects_are_bounded():
    async def scenario():
        nodes, fakes = await cluster_of(n1=not_leader("n2"), n2=not_leader("n1"))
        async with Client(nodes, max_redirects=3) as client:
            return await client.write("k", "v", node="n1"), fakes

    result, fakes = run(scenario())
    assert (result.type, result.error, result.redirects) == ("fail", "not-leader", 3)
    assert len(fakes["n1"].requests) + len(fakes["n2"].requests) == 4


def test_not_leader_without_a_known_leader_is_a_definite_fail():
    async def scenario():
        nodes, _ = await cluster_of(n1=not_leader(None))
        async with Client(nodes) as client:
            return await client.read("k")

    result = run(scenario())
    assert (result.type, result.definite, result.error, result.redirects) == ("fail", True, "not-leader", 0)


@pytest.mark.parametrize(
    "reply, expected",
    [
        ({"ok": False, "error": "cas-mismatch", "definite": True}, "fail"),
        ({"ok": False, "error": "leadership-lost", "definite": False}, "info"),
        ({"ok": False, "error": "mystery"}, "info"),  # unknown and not said to be definite: the safe reading
        ({"ok": False, "error": "not-leader"}, "fail"),  # not said: the error table decides
    ],
)
def test_node_errors_are_fail_when_definite_and_info_otherwise(reply, expected):
    async def scenario():
        nodes, _ = await cluster_of(n1=lambda request: reply)
        async with Client(nodes) as client:
            return await client.cas("k", 1, 2)

    result = run(scenario())
    assert result.type == expected and result.error == reply["error"]


def test_no_reply_in_time_is_info_timeout_and_the_connection_stays_usable():
    async def scenario():
        answers = iter([None, {"ok": True, "value": 5, "lsn": [1, 2]}])
        nodes, _ = await cluster_of(n1=lambda request: next(answers))
        async with Client(nodes) as client:
            late = await client.read("k", timeout=0.05)
            then = await client.read("k")
        return late, then

    late, then = run(scenario())
    assert (late.type, late.error, late.definite) == ("info", "timeout", False)
    assert (then.type, then.value) == ("ok", 5)


def test_closing_a_connection_passes_on_its_closers_cancellation():
    # The reader's cancellation is the closing's business; the closer's own must reach the closer, or a
    # run's teardown that cancels it waits for a task that goes on as if nothing had happened.
    from cluster.client import NodeConnection

    async def scenario():
        connection = NodeConnection("n1", "127.0.0.1", 1)
        release = asyncio.Event()

        async def reader():  # a reader that takes a moment to end once cancelled
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                await release.wait()
                raise

        connection._reader_task = asyncio.create_task(reader())
        await asyncio.sleep(0)
        closer = asyncio.create_task(connection.close())
        await asyncio.sleep(0)  # the closer now waits for the reader
        closer.cancel()
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(closer, return_exceptions=True)
        return closer.cancelled()

    assert run(scenario())


def test_connection_dropped_after_sending_is_info_and_the_client_reconnects():
    async def scenario():
        answers = iter([CLOSE, {"ok": True, "value": 1, "lsn": [1, 1]}])
        nodes, fakes = await cluster_of(n1=lambda request: next(answers))
        async with Client(nodes) as client:
            lost = await client.write("k", 1)
            again = await client.write("k", 1)
        return lost, again, fakes["n1"].connections

    lost, again, connections = run(scenario())
    assert (lost.type, lost.error) == ("info", "connection-lost")
    assert again.ok and connections == 2


def test_connection_refused_is_a_definite_fail():
    async def scenario():
        fake = FakeNode(ok())
        address = await fake.start()
        await fake.stop()  # nothing listens there any more
        async with Client({"n1": address}) as client:
            return await client.write("k", 1)

    result = run(scenario())
    assert (result.type, result.error, result.node) == ("fail", "connection-refused", "n1")


async def dead_address():
    """An address where nothing listens any more: connecting is refused at once."""
    fake = FakeNode(ok())
    address = await fake.start()
    await fake.stop()
    return address


def test_a_refused_connection_fails_over_to_the_next_node_which_is_then_remembered():
    async def scenario():
        nodes, fakes = await cluster_of(n2=ok(lsn=(2, 5)), n3=ok())
        nodes = {"n1": await dead_address(), **nodes}
        async with Client(nodes) as client:
            first = await client.write("k", 1)
            second = await client.write("k", 2)
        return first, second, client.leader_hint, fakes

    first, second, hint, fakes = run(scenario())
    assert (first.type, first.node, first.redirects, first.lsn) == ("ok", "n2", 1, (2, 5))
    assert (second.node, second.redirects) == ("n2", 0)  # straight to the node that answered
    assert hint == "n2" and fakes["n3"].requests == []


def test_not_leader_without_a_leader_tries_every_node_once_then_fails_definitely():
    async def scenario():
        nodes, fakes = await cluster_of(n1=not_leader(None), n2=not_leader(None), n3=not_leader(None))
        async with Client(nodes) as client:
            return await client.write("k", 1, node="n2"), fakes

    result, fakes = run(scenario())
    assert (result.type, result.error, result.node, result.redirects) == ("fail", "not-leader", "n1", 2)
    assert [len(fakes[n].requests) for n in ("n1", "n2", "n3")] == [1, 1, 1]  # n2, then n3, then n1


def test_every_node_refusing_is_one_definite_fail_after_trying_each_once():
    async def scenario():
        nodes = {name: await dead_address() for name in ("n1", "n2", "n3")}
        async with Client(nodes) as client:
            return await client.write("k", 1)

    result = run(scenario())
    assert (result.type, result.error, result.node, result.redirects) == ("fail", "connection-refused", "n3", 2)


def test_failover_skips_a_redirect_to_a_node_that_already_refused():
    async def scenario():
        nodes, fakes = await cluster_of(n2=not_leader("n1"), n3=ok())
        nodes = {"n1": await dead_address(), **nodes}
        async with Client(nodes) as client:
            client.leader_hint = "n1"  # remembered from before n1 died
            return await client.write("k", 1), client.leader_hint, fakes

    result, hint, fakes = run(scenario())
    assert (result.type, result.node, result.redirects) == ("ok", "n3", 2)
    assert hint == "n3" and len(fakes["n2"].requests) == 1


def test_a_timeout_is_info_and_never_tried_elsewhere():
    async def scenario():
        nodes, fakes = await cluster_of(n1=lambda request: None, n2=ok())
        async with Client(nodes) as client:
            return await client.write("k", 1, timeout=0.05), fakes

    result, fakes = run(scenario())
    assert (result.type, result.error, result.node) == ("info", "timeout", "n1")
    assert fakes["n2"].requests == []


def test_a_connection_lost_after_sending_is_info_and_forgets_that_node_as_leader():
    async def scenario():
        nodes, fakes = await cluster_of(n1=lambda request: CLOSE, n2=ok())
        async with Client(nodes) as client:
            client.leader_hint = "n1"
            lost = await client.write("k", 1)
            return lost, client.leader_hint, fakes

    lost, hint, fakes = run(scenario())
    assert (lost.type, lost.error, lost.node) == ("info", "connection-lost", "n1")
    assert hint is None and fakes["n2"].requests == []  # the possibly applied write is not sent again


def test_a_connection_attempt_is_bounded_by_connect_timeout_and_then_fails_over(monkeypatch):
    import cluster.client as client_module

    real_open = asyncio.open_connection

    async def black_hole_or_real(host, port, **kwargs):
        if port == 9:  # a host that drops the SYN: connecting hangs
            await asyncio.get_running_loop().create_future()
        return await real_open(host, port, **kwargs)

    monkeypatch.setattr(client_module.asyncio, "open_connection", black_hole_or_real)

    async def scenario():
        nodes, fakes = await cluster_of(n2=ok())
        async with Client({"n1": ("127.0.0.1", 9), **nodes}, timeout=5.0, connect_timeout=0.05) as client:
            started = asyncio.get_running_loop().time()
            result = await client.write("k", 1)
            return result, asyncio.get_running_loop().time() - started

    result, took = run(scenario())
    assert (result.type, result.node, result.redirects) == ("ok", "n2", 1)
    assert took < 2.0  # the connect attempt gave up long before the operation's 5 s


def test_a_local_read_is_sent_marked_and_never_redirected_nor_failed_over():
    async def scenario():
        nodes, fakes = await cluster_of(n1=not_leader("n2"), n2=ok("v"))
        nodes["n3"] = await dead_address()
        async with Client(nodes) as client:
            at_n1 = await client.read("k", node="n1", local=True)
            at_n3 = await client.read("k", node="n3", local=True)
        return at_n1, at_n3, fakes

    at_n1, at_n3, fakes = run(scenario())
    assert (at_n1.type, at_n1.error, at_n1.node, at_n1.redirects) == ("fail", "not-leader", "n1", 0)
    assert fakes["n1"].requests[0]["local"] is True and fakes["n2"].requests == []
    assert (at_n3.type, at_n3.error, at_n3.node) == ("fail", "connection-refused", "n3")


def test_a_request_over_the_line_limit_is_never_sent():
    async def scenario():
        nodes, fakes = await cluster_of(n1=ok())
        async with Client(nodes) as client:
            return await client.write("k", "x" * MAX_LINE_BYTES), fakes["n1"].requests

    result, received = run(scenario())
    assert (result.type, result.error) == ("fail", "too-large") and received == []


def test_status_is_not_redirected_and_an_unknown_node_is_refused():
    async def scenario():
        nodes, _ = await cluster_of(n1=not_leader("n2"), n2=ok())
        async with Client(nodes) as client:
            status = await client.status("n1")
            with pytest.raises(ValueError, match="'n9' is not one of this client's nodes: n1, n2"):
                await client.read("k", node="n9")
        return status

    status = run(scenario())
    assert (status.type, status.node, status.redirects) == ("fail", "n1", 0)


def test_every_code_the_client_makes_is_in_the_error_table_with_the_same_certainty():
    for code, definite in CLIENT_ERRORS.items():
        assert code in ERRORS, f"{code} missing from cluster.core.errors"
        assert ERRORS[code].definite is definite


def test_sync_client_blocks_until_the_reply():
    loop = asyncio.new_event_loop()
    fake = FakeNode(lambda request: {"ok": True, "value": {"role": "leader"}})
    address = loop.run_until_complete(fake.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        with SyncClient({"n1": address}, timeout=2.0) as client:
            result = client.status("n1")
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.run_until_complete(fake.stop())
        loop.close()
    assert result == Result("ok", value={"role": "leader"}, node="n1")
