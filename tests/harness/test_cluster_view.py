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
