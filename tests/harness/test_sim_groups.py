"""Leader-targeted faults aimed at a group's leader, in the simulator: the demo system wrapped in a test
double whose status also reports two groups (CONTRACTS: a ``groups`` list besides the top-level fields),
one that follows the cluster leader and one pinned on n4. Nothing of ``cluster/`` changes: the double
adds the entries to what the simulated nodes answer."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from adapters.cluster.db import ClusterDB
from harness.sim.run import simulate
from harness.spec import TestSpec

PINNED = "n4"
SPEC = TestSpec(seed=4, db="cluster", platform="sim", time_limit=12.0, nemesis=("leader-churn",))


@pytest.fixture
def grouped(monkeypatch: pytest.MonkeyPatch) -> None:
    original = ClusterDB.simulate

    def simulate_grouped(self: ClusterDB, nodes: tuple[str, ...], seed: int) -> Any:
        system = original(self, nodes, seed)
        status = system.status

        async def status_with_groups(node: str, timeout: float) -> dict[str, Any]:
            out = dict(await status(node, timeout))
            out["groups"] = [
                {"group": "mirror", "role": out["role"], "term": out["term"], "leader": out["leader"]},
                {"group": "pinned", "role": "leader" if node == PINNED else "follower", "term": 1,
                 "leader": PINNED},
            ]
            return out

        system.status = status_with_groups
        return system

    monkeypatch.setattr(ClusterDB, "simulate", simulate_grouped)


def _nemesis(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in (path / "history.jsonl").read_text().splitlines()]
    return [e for e in lines if e["process"] == "nemesis" and e["type"] != "invoke"]


def _hit(completion: dict[str, Any]) -> set[str]:
    """The nodes a leader-churn fault hit: killed or paused, or cut off by an isolate grudge."""
    value = completion["value"] or {}
    if "grudge" in value:
        return {node for node, dropped in value["grudge"].items() if len(dropped) > 1}
    return set(value.get("nodes", ()))


def test_leader_faults_aim_at_the_named_groups_leader(tmp_path: Path, grouped: None) -> None:
    result = simulate(replace(SPEC, leader_group="pinned"), tmp_path / "pinned",
                      checkers=("single-leader-per-term",))
    aimed = [c for c in _nemesis(tmp_path / "pinned") if c.get("group") == "pinned"]
    assert len(aimed) >= 3
    assert all(_hit(c) == {PINNED} for c in aimed if c["type"] == "ok"), aimed
    assert any(c["type"] == "ok" for c in aimed)
    # The status observations carry both groups, and single-leader-per-term judged each of them.
    verdict = result.results["checkers"]["single-leader-per-term"]
    assert verdict["valid"] is True and verdict["stats"]["groups"] == 3, verdict
    # Deterministic with groups too.
    again = simulate(replace(SPEC, leader_group="pinned"), tmp_path / "again", checkers=())
    assert again.digest == result.digest


def test_the_cluster_selector_and_the_default_aim_at_the_cluster_leader(tmp_path: Path, grouped: None) -> None:
    simulate(replace(SPEC, leader_group="cluster"), tmp_path / "cluster", checkers=())
    simulate(SPEC, tmp_path / "most", checkers=())
    for name in ("cluster", "most"):
        completions = [c for c in _nemesis(tmp_path / name) if c["type"] == "ok" and c["f"] != "heal"
                       and c["f"] not in ("start", "resume")]
        assert completions and all("group" not in c for c in completions)
    # Under "most" the cluster leader leads "mirror" too: two groups against n4's one, so n4 is hit only
    # when it leads the cluster; with "pinned" it is hit every time (the test above).
    hits = [_hit(c) for c in _nemesis(tmp_path / "most") if c["type"] == "ok" and c["f"] in ("kill", "pause")]
    assert hits and any(PINNED not in hit for hit in hits)
