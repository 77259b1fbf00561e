"""`harness.run.run` on real containers: a short chaos run is stored and judged; a crash leaves nothing.

Needs the Docker engine and the node image (scripts/setup.sh installs both; the conftest fails, never
skips, when they are missing).
"""

from __future__ import annotations

import json

import pytest
from docker.client import DockerClient

from checkers.history import load_history, load_journals
from harness import run as run_module
from harness.interpreter import Interpreter
from harness.platforms import docker as docker_platform
from harness.platforms.docker import LABEL_RUN, DockerPlatform
from harness.run import TestSpec, run
from nemesis import grudge
from nemesis.faults import Partition, Pause
from nemesis.generator import ScheduledFault
from tests.harness.conftest import session_run_id

pytestmark = pytest.mark.docker

NODES = ("n1", "n2", "n3", "n4", "n5")


@pytest.fixture
def run_ids(monkeypatch) -> list[str]:
    """Platforms started by `run` get run ids of this test session (checked for leftovers at its end)."""
    ids: list[str] = []

    def new_run_id() -> str:
        ids.append(session_run_id())
        return ids[-1]

    monkeypatch.setattr(docker_platform, "new_run_id", new_run_id)
    return ids


def _leftovers(client: DockerClient, run_id: str) -> list[str]:
    label = {"label": f"{LABEL_RUN}={run_id}"}
    return [c.name for c in client.containers.list(all=True, filters=label)] + [
        n.name for n in client.networks.list(filters=label)
    ]


def test_a_short_chaos_run_is_stored_with_history_journals_and_a_verdict(docker_engine, run_ids, tmp_path) -> None:
    spec = TestSpec(
        seed=20240607,
        nodes=5,
        workload="register",
        nemesis=("partition", "kill", "pause", "clock"),
        time_limit=16.0,
        nemesis_interval=3.0,
        concurrency=5,
        store=str(tmp_path / "store"),
    )
    result = run(spec)
    assert result.error is None, result.error
    assert result.teardown_errors == []
    run_dir = result.run_dir
    assert run_dir is not None and (tmp_path / "store" / "latest").resolve() == run_dir

    document = json.loads((run_dir / "test.json").read_text())
    assert document["seed"] == spec.seed and document["spec"]["seed"] == spec.seed
    assert document["nodes"] == list(NODES)
    assert document["command"].startswith("harness run --db cluster --mode blazingmq --nodes 5")
    assert document["versions"]["db"]["sha256"]
    schedule = [json.loads(line) for line in (run_dir / "schedule.jsonl").read_text().splitlines()]
    assert schedule and all(line["process"] == "nemesis" for line in schedule)

    history = load_history(run_dir / "history.jsonl")
    client_ops = [op for op in history.ops if op.f != "status"]
    assert sum(op.type == "ok" for op in client_ops) > 50
    assert {op.node for op in history.ops if op.f == "status"} == set(NODES)
    invoked = [op.f for op in history.nemesis]
    final_heals = [line["f"] for line in schedule if line["at"] >= spec.time_limit]
    assert final_heals == ["heal", "resume", "start", "clock"]
    chaos_count = len(invoked) - len(final_heals)
    assert invoked[chaos_count:chaos_count + len(final_heals)] == final_heals  # the final heal phase ran
    assert chaos_count >= 3
    assert all(op.type in ("ok", "info") for op in history.nemesis)
    final = [op for op in client_ops if history.events[op.invoke_index].raw.get("final")]
    assert {history.events[op.invoke_index].node for op in final} == set(NODES)  # sent to every node

    journals = load_journals(run_dir / "nodes")
    assert sorted(journals) == list(NODES)
    assert all(any(e.event == "apply" for e in events) for events in journals.values())
    for node in NODES:
        assert (run_dir / "nodes" / node / "node.log").stat().st_size > 0

    results = json.loads((run_dir / "results.json").read_text())
    assert set(results["checkers"]) == {"single-leader-per-term", "lsn-monotonicity", "durability", "linearizable"}
    summaries = {name: verdict["summary"] for name, verdict in results["checkers"].items()}
    assert results["valid"] is True, summaries
    assert result.exit_code == 0
    assert results["ops"] == len(client_ops)
    # Every judged run ends in its report, and the store's index lists it.
    report = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "VALID" in report.upper() and str(results["seed"]) in report
    assert (run_dir.parent.parent / "index.html").is_file()
    assert (run_dir / "harness.log").read_text().count("teardown:") == 5
    assert run_ids and _leftovers(docker_engine, run_ids[0]) == []


def test_a_crash_mid_run_leaves_no_container_network_rule_or_paused_process(
    docker_engine, run_ids, tmp_path, monkeypatch
) -> None:
    # The crash comes right after the chaos phase, while n1 is isolated and n2 is paused.
    async def crash(self) -> None:
        raise RuntimeError("injected crash")

    monkeypatch.setattr(Interpreter, "_recover", crash)
    seen: dict[str, str] = {}
    close = DockerPlatform.close

    def inspect_then_close(self: DockerPlatform) -> None:
        # Teardown has healed and resumed by now; look before the containers go.
        for node, remote in self.remotes().items():
            rules = remote.run("iptables -w -S | grep -c CHAOS || true").stdout.strip()
            stopped = remote.run("ps -eo stat=,args= | grep '[c]luster.node' | grep -c '^T' || true").stdout.strip()
            seen[node] = f"rules={rules} stopped={stopped}"
        close(self)

    monkeypatch.setattr(DockerPlatform, "close", inspect_then_close)
    schedule = [
        ScheduledFault(1.0, "partition", Partition("isolate", grudge=grudge.isolate(NODES, "n1"))),
        ScheduledFault(2.0, "pause", Pause(("n2",))),
    ]
    spec = TestSpec(seed=5, nodes=5, nemesis=("partition", "pause"), time_limit=4.0, concurrency=3,
                    store=str(tmp_path / "store"))
    result = run(spec, schedule=schedule)

    assert result.exit_code == 255 and result.error == "RuntimeError: injected crash"
    assert result.teardown_errors == []
    assert seen == {node: "rules=0 stopped=0" for node in NODES}
    assert run_ids and _leftovers(docker_engine, run_ids[0]) == []
    # The partial run is stored and analysable.
    run_dir = result.run_dir
    history = load_history(run_dir / "history.jsonl")
    assert [op.f for op in history.nemesis] == ["partition", "pause"]
    assert sorted(load_journals(run_dir / "nodes")) == list(NODES)
    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] == "unknown" and results["error"] == "RuntimeError: injected crash"
    assert json.loads((run_dir / "test.json").read_text())["timings"]["finished_s"] > 0
    assert run_module.store.find_run(tmp_path / "store").path == run_dir
