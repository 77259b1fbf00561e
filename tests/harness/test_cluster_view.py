"""The recovery rule before the final operations (``ClusterView.recovered``), on a fake clock.

Final reads are only worth sending once the cluster has a leader that says itself that it leads, seen
after the final heal, and that a majority names: followers keep naming a leader for a few heartbeats
after it stepped down, and final reads sent then all fail ``not-leader``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from harness.interpreter import ClusterView, InterpreterConfig
from tests.harness.test_interpreter import SECOND, FakeCluster, _run

NODES = ("n1", "n2", "n3")


def _view() -> tuple[ClusterView, list[float]]:
    now = [0.0]
    return ClusterView(NODES, lambda: now[0], stale_after=3.0), now


def test_followers_naming_a_leader_that_stepped_down_is_not_recovery() -> None:
    view, _ = _view()
    view.observe("n1", {"role": "follower", "term": 2, "leader": None})  # its quorum timed out
    view.observe("n2", {"role": "follower", "term": 2, "leader": "n1"})
    view.observe("n3", {"role": "follower", "term": 2, "leader": "n1"})
    assert view.leader() == ("n1", 2)
    assert not view.recovered()
    view.observe("n1", {"role": "leader", "term": 2, "leader": "n1"})
    assert view.recovered()


def test_a_leader_not_heard_from_is_not_recovery() -> None:
    view, _ = _view()
    view.observe("n1", None, "no status within 1 s")
    view.observe("n2", {"role": "follower", "term": 2, "leader": "n1"})
    view.observe("n3", {"role": "follower", "term": 2, "leader": "n1"})
    assert not view.recovered()


def test_only_observations_after_the_heal_count() -> None:
    view, now = _view()
    for node in NODES:
        view.observe(node, {"role": "leader" if node == "n1" else "follower", "term": 2, "leader": "n1"})
    now[0] = 1.0  # the heal
    assert view.recovered()  # without a cut-off the pre-heal picture would do
    assert not view.recovered(since=1.0)
    now[0] = 1.5
    view.observe("n1", {"role": "leader", "term": 2, "leader": "n1"})
    view.observe("n2", {"role": "follower", "term": 2, "leader": "n1"})
    assert view.recovered(since=1.0)
    assert view.fresh(since=1.0).keys() == {"n1", "n2"}


def test_a_minority_naming_the_leader_is_not_recovery() -> None:
    view, _ = _view()
    view.observe("n1", {"role": "leader", "term": 3, "leader": "n1"})
    view.observe("n2", {"role": "follower", "term": 2, "leader": "n3"})  # an older term
    view.observe("n3", {"role": "candidate", "term": 3, "leader": None})
    assert not view.recovered()


def test_final_reads_wait_until_the_leader_itself_leads_again(tmp_path) -> None:
    """At the time limit n1 has stepped down while the followers still name it; it leads again 4 s later.
    The final reads must start only then (virtual time, no sleeping)."""
    config = InterpreterConfig(concurrency=1, time_limit=3.0, recovery_timeout=20.0, status_timeout=0.5)
    start = 1000.0
    back_at = start + 7.0

    def prepare(cluster: FakeCluster) -> None:
        async def status(node: str, timeout: float) -> Mapping[str, Any]:
            await asyncio.sleep(0)
            stepped_down = start + 2.5 <= cluster.loop.now < back_at
            role = "leader" if node == "n1" and not stepped_down else "follower"
            return {"node": node, "role": role, "term": 1, "leader": "n1"}

        cluster.status = status  # type: ignore[method-assign]

    history, stats, _, _ = _run(tmp_path, config=config, prepare=prepare, with_nemesis=False)
    assert stats.recovered is True
    final = [op for op in history.ops if op.f == "read" and op.node is not None and op.call >= 3 * SECOND]
    assert final
    assert min(op.call for op in final) >= (back_at - start) * SECOND


# -- groups: a leader per shard, partition or queue --------------------------------------------------


def _grouped(role: str, term: int | None, leader: str | None, **groups: tuple[str, int, str | None]) -> dict:
    """A status with ``groups``: each keyword is a group -> (role, term, leader)."""
    return {"role": role, "term": term, "leader": leader,
            "groups": [{"group": g, "role": r, "term": t, "leader": lead} for g, (r, t, lead) in groups.items()]}


def test_a_single_group_system_is_seen_exactly_as_before() -> None:
    view, _ = _view()
    view.observe("n1", {"role": "leader", "term": 2, "leader": "n1"})
    view.observe("n2", {"role": "follower", "term": 2, "leader": "n1"})
    assert not view.grouped and view.leaders() == {}
    for selector in ("most", "random", "cluster"):
        assert view.target(selector) == ("n1", None, None)
    node, group, reason = view.target("shard-0")
    assert (node, group) == (None, "shard-0") and "no status has reported group 'shard-0'" in reason
    view.observe("n1", None, "no status within 1 s")
    view.observe("n2", None, "no status within 1 s")
    assert view.target() == (None, None, None)  # no last-known fallback: the driver says why, as before


def test_group_leaders_and_the_node_that_leads_the_most() -> None:
    view, _ = _view()
    view.observe("n1", _grouped("leader", 4, "n1", a=("follower", 2, "n2"), b=("follower", 7, "n2")))
    view.observe("n2", _grouped("follower", 4, "n1", a=("leader", 2, "n2"), b=("leader", 7, "n2")))
    view.observe("n3", _grouped("follower", 4, "n1", c=("leader", 1, "n3")))
    assert view.grouped and view.cluster_level
    assert view.group_leader("a") == ("n2", 2) and view.group_leader("c") == ("n3", 1)
    assert view.leaders() == {None: "n1", "a": "n2", "b": "n2", "c": "n3"}
    assert view.target() == ("n2", None, None)
    assert view.target("cluster") == ("n1", None, None)
    assert view.target("c") == ("n3", "c", None)
    assert view.members == {"a": {"n1", "n2"}, "b": {"n1", "n2"}, "c": {"n3"}}


def test_a_group_whose_leader_went_quiet_is_aimed_at_through_the_last_node_known_to_lead_it() -> None:
    view, now = _view()
    # RabbitMQ-like: no cluster-level leader, a leader per queue.
    view.observe("n1", _grouped("follower", None, None, q1=("leader", 3, "n1"), q2=("follower", 5, "n2")))
    view.observe("n2", _grouped("follower", None, None, q1=("follower", 3, "n1"), q2=("leader", 5, "n2")))
    assert not view.cluster_level and view.leaders() == {"q1": "n1", "q2": "n2"}
    now[0] = 10.0  # n1 paused: its status stops; n2's goes on and no longer names a leader of q1
    view.observe("n2", _grouped("follower", None, None, q1=("candidate", 4, None), q2=("leader", 5, "n2")))
    assert view.group_leader("q1") == (None, 4)
    assert view.target("q1") == ("n1", "q1", None)  # the last node known to lead q1
    assert view.leaders() == {"q1": "n1", "q2": "n2"}
    # A newer leader, even only named by a follower, replaces it.
    view.observe("n3", _grouped("follower", None, None, q1=("follower", 4, "n3")))
    now[0] = 20.0
    assert view.target("q1") == ("n3", "q1", None)


def test_recovery_waits_for_a_leader_in_every_group() -> None:
    view, now = _view()
    view.observe("n1", _grouped("leader", 2, "n1", a=("leader", 1, "n1"), b=("follower", 1, "n2")))
    view.observe("n2", _grouped("follower", 2, "n1", a=("follower", 1, "n1"), b=("leader", 1, "n2")))
    view.observe("n3", _grouped("follower", 2, "n1", a=("follower", 1, "n1"), b=("follower", 1, "n2")))
    assert view.recovered() and view.unrecovered() == []
    now[0] = 1.0  # the heal; b's primary is being reassigned
    view.observe("n1", _grouped("leader", 2, "n1", a=("leader", 1, "n1"), b=("follower", 2, None)))
    view.observe("n2", _grouped("follower", 2, "n1", a=("follower", 1, "n1"), b=("follower", 2, None)))
    assert not view.recovered(since=1.0) and view.unrecovered(since=1.0) == ["b"]
    now[0] = 2.0
    view.observe("n3", _grouped("follower", 2, "n1", a=("follower", 1, "n1"), b=("leader", 2, "n3")))
    assert not view.recovered(since=1.0)  # n3 alone names itself: not a majority of b's 3 members
    view.observe("n1", _grouped("leader", 2, "n1", a=("leader", 1, "n1"), b=("follower", 2, "n3")))
    assert view.recovered(since=1.0)


def test_a_grouped_system_without_a_cluster_level_leader_recovers_on_its_groups() -> None:
    view, _ = _view()
    view.observe("n1", _grouped("follower", None, None, q1=("leader", 3, "n1")))
    view.observe("n2", _grouped("follower", None, None, q1=("follower", 3, "n1")))
    assert view.recovered() and view.unrecovered() == []
    view.observe("n3", _grouped("follower", None, None, q2=("follower", 1, "n2")))
    assert view.unrecovered() == ["q2"]  # q2's leader n2 has not said it leads q2
