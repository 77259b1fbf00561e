"""Queue redelivery in every election mode: a consumed message nobody confirms is delivered again after
the visibility timeout, also by a later leader, and the `no-redelivery` bug loses it.

Each scenario runs in the mode's deterministic test network, in virtual time (`CoreNetwork` for blazingmq,
raft and aeron; `FluvioNetwork`, SPUs plus the SC; `LeaseNetwork`, data nodes plus the store group), so the
visibility timeout is measured on the time the network hands the cores, never on a real clock.
"""

from __future__ import annotations

from typing import Any

import pytest

from cluster.core.bugs import ALL_MODES
from tests.cluster.core_network import FAST, CoreNetwork
from tests.cluster.fluvio_network import FluvioNetwork
from tests.cluster.lease_network import LeaseNetwork

VISIBILITY = 2.0
TIMING: dict[str, dict[str, Any]] = {
    "blazingmq": FAST,
    "raft": FAST,
    "aeron": FAST,
    "fluvio": {"heartbeat_interval": 0.1, "missed_heartbeats": 3},
    "lease": {"heartbeat_interval": 0.05, "lease_ttl": 0.6, "leader_quorum_timeout": 2.0},
}


def network(mode: str, bugs: tuple[str, ...] = ()) -> CoreNetwork:
    """A started 3-node network of `mode` whose queues redeliver after VISIBILITY seconds."""
    settings = {**TIMING[mode], "visibility_timeout": VISIBILITY}
    if mode == "fluvio":
        return FluvioNetwork(3, bugs=bugs, **settings).start()
    if mode == "lease":
        return LeaseNetwork(seed=2, bugs=bugs, **settings).start()
    return CoreNetwork(3, mode=mode, bugs=bugs, **settings).start()


def put(net: CoreNetwork, node: str, guid: str) -> None:
    reply = net.call(node, {"op": "put", "key": "q", "value": guid.upper(), "guid": guid})
    assert reply is not None and reply["ok"], reply


def consume(net: CoreNetwork, node: str) -> dict:
    reply = net.call(node, {"op": "consume", "key": "q"})
    assert reply is not None, net.describe()
    return reply


def confirm(net: CoreNetwork, node: str, guid: str) -> dict | None:
    return net.call(node, {"op": "confirm", "key": "q", "guid": guid})


@pytest.mark.parametrize("mode", ALL_MODES)
def test_an_unconfirmed_message_is_delivered_again_after_the_visibility_timeout(mode: str) -> None:
    net = network(mode)
    leader = net.wait_for_leader()
    put(net, leader, "a")
    put(net, leader, "b")
    assert consume(net, leader)["value"] == {"guid": "a", "value": "A"}  # its consumer dies: no confirm
    assert consume(net, leader)["value"] == {"guid": "b", "value": "B"}
    assert confirm(net, leader, "b")["ok"]
    waiting = consume(net, leader)
    assert waiting["ok"] is False and waiting["error"] == "in-flight" and waiting["definite"] is True
    assert waiting["value"]["in_flight"] == 1 and 0 < waiting["value"]["visible_in"] <= VISIBILITY
    net.run(waiting["value"]["visible_in"] + 0.1)
    again = consume(net, leader)
    assert again["ok"] and again["value"] == {"guid": "a", "value": "A", "redelivered": True}
    assert confirm(net, leader, "a")["ok"]
    empty = consume(net, leader)
    assert empty["ok"] is True and empty["value"] is None
    assert not net.violations
    net.run(0.5)  # the followers learn the last commit
    # Every node applied the same consumes with the same outcomes (the decision is in the entries).
    consumes = {node: [e["op"] for e in net.applied(node) if e["op"]["f"] == "consume"]
                for node in net.ids if node != "sc" and net.up(node)}
    assert len({repr(ops) for ops in consumes.values()}) == 1, consumes


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_new_leader_delivers_again_what_the_old_one_delivered_unconfirmed(mode: str) -> None:
    """The consume is a log entry with its leader time: the next leader knows the message is pending and
    since when, and delivers it again once the timeout has passed in its own (continued) leader time."""
    net = network(mode)
    old = net.wait_for_leader()
    put(net, old, "a")
    assert consume(net, old)["value"] == {"guid": "a", "value": "A"}
    net.run(0.5)  # the followers learn the commit
    net.crash(old)
    new = net.wait_for_leader(among=[n for n in net.ids if n not in (old, "sc")])
    assert new != old
    # Leader time continues from the last entry: the time without a leader does not count.
    waiting = consume(net, new)
    assert waiting["error"] == "in-flight" and waiting["value"]["in_flight"] == 1
    assert waiting["value"]["visible_in"] > VISIBILITY - 0.1
    net.run(waiting["value"]["visible_in"] + 0.1)
    again = consume(net, new)
    assert again["ok"] and again["value"] == {"guid": "a", "value": "A", "redelivered": True}
    assert confirm(net, new, "a")["ok"]
    assert consume(net, new)["value"] is None
    assert not net.violations


@pytest.mark.parametrize("mode", ALL_MODES)
def test_no_redelivery_keeps_an_unconfirmed_message_pending_forever(mode: str) -> None:
    net = network(mode, ("no-redelivery",))
    leader = net.wait_for_leader()
    put(net, leader, "a")
    assert consume(net, leader)["value"] == {"guid": "a", "value": "A"}
    for _ in range(3):
        net.run(VISIBILITY)
        empty = consume(net, leader)
        assert empty["ok"] is True and empty["value"] is None  # the message is gone, never confirmed
    assert not net.violations
