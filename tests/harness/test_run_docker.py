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
from harness.analysis import dataset
from harness.analysis.inprocess import ENGINE
from harness.interpreter import Interpreter
from harness.platforms.docker import LABEL_RUN, DockerPlatform
from harness.run import run
from harness.spec import TestSpec
from nemesis import grudge
from nemesis.faults import Kill, Partition, Pause, Start
from nemesis.generator import ScheduledFault

pytestmark = pytest.mark.docker

NODES = ("n1", "n2", "n3", "n4", "n5")


def _leftovers(client: DockerClient, run_id: str) -> list[str]:
    label = {"label": f"{LABEL_RUN}={run_id}"}
    return [c.name for c in client.containers.list(all=True, filters=label)] + [
        n.name for n in client.networks.list(filters=label)
    ]


def test_a_short_chaos_run_is_stored_with_history_journals_and_a_verdict(docker_engine, run_ids, tmp_path) -> None:
    spec = TestSpec(
        seed=20240607,
        db="cluster",
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
    assert document["command"].startswith("harness run --db cluster --nodes 5")
    assert document["db"] == "cluster" and document["db_options"]["mode"] == "blazingmq"
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
    # Judged once, in this process, by the pipeline's tasks: its rows are in the store's dataset.
    assert results["analysis"]["engine"] == ENGINE
    partition = f"test={run_dir.parent.name}/run={run_dir.name}/part-00000.parquet"
    assert all((tmp_path / "store" / "dataset" / table / partition).is_file() for table in dataset.TABLES)
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


def test_leader_clock_isolates_the_leader_and_steps_back_that_same_node_clock(docker_engine, run_ids, tmp_path) -> None:
    spec = TestSpec(seed=8, db="cluster", db_options={"mode": "raft"}, nodes=3, nemesis=("leader-clock",), time_limit=12.0, nemesis_interval=3.0,
                    concurrency=3, store=str(tmp_path / "store"))
    result = run(spec)
    assert result.error is None and result.teardown_errors == [], (result.error, result.teardown_errors)
    lines = [json.loads(line) for line in (result.run_dir / "history.jsonl").read_text().splitlines()]
    completions = [(e["f"], e["value"]) for e in lines if e["process"] == "nemesis" and e["type"] == "ok"]
    isolated = [
        next(node for node, dropped in value["grudge"].items() if len(dropped) == 2)
        for f, value in completions if f == "partition"
    ]
    bumps = [value for f, value in completions if f == "clock" and "offsets" in value]
    assert isolated and [list(bump["offsets"]) for bump in bumps] == [[node] for node in isolated], completions
    # Each step hit one node, the leader it cut off, and that node's clock did step back (libfaketime probe).
    assert all(bump["probes"][node] <= -0.99 for bump, node in zip(bumps, isolated, strict=True))
    assert result.results["valid"] is True and result.exit_code == 0
    assert run_ids and _leftovers(docker_engine, run_ids[0]) == []


# The teardown of every deployment shape: data nodes only, plus the fluvio controller on its own host
# (paused when the crash comes), plus the lease store members beside n1..n3.
CRASH_SHAPES = {"blazingmq": (NODES, ("n2",)), "fluvio": ((*NODES, "sc"), ("n2", "sc")), "lease": (NODES, ("n2",))}


@pytest.mark.parametrize("mode", sorted(CRASH_SHAPES))
def test_a_crash_mid_run_leaves_no_container_network_rule_or_paused_process(
    docker_engine, run_ids, tmp_path, monkeypatch, mode
) -> None:
    # The crash comes right after the chaos phase, while n1 is isolated and n2 (and the SC) are paused.
    hosts, paused = CRASH_SHAPES[mode]

    async def crash(self) -> None:
        raise RuntimeError("injected crash")

    monkeypatch.setattr(Interpreter, "_recover", crash)
    seen: dict[str, str] = {}
    close = DockerPlatform.close

    def inspect_then_close(self: DockerPlatform) -> None:
        # Teardown has healed, resumed, collected and wiped by now; look before the containers go.
        for node, remote in self.remotes().items():
            rules = remote.run("iptables -w -S | grep -c CHAOS || true").stdout.strip()
            stopped = remote.run("ps -eo stat=,args= | grep '[c]luster.node' | grep -c '^T' || true").stdout.strip()
            running = remote.run("pgrep -fc '[c]luster[.]node' || true").stdout.strip()
            left = remote.run("ls -d /var/lib/chaos/data /var/lib/chaos/store /var/log/chaos /var/run/chaos "
                              "/opt/chaos 2>/dev/null | wc -l").stdout.strip()
            seen[node] = f"rules={rules} stopped={stopped} running={running} files={left}"
        close(self)

    monkeypatch.setattr(DockerPlatform, "close", inspect_then_close)
    schedule = [
        ScheduledFault(1.0, "partition", Partition("isolate", grudge=grudge.isolate(hosts, "n1"))),
        ScheduledFault(2.0, "pause", Pause(paused)),
    ]
    spec = TestSpec(seed=5, db="cluster", db_options={"mode": mode}, nodes=5, nemesis=("partition", "pause"), time_limit=4.0, concurrency=3,
                    store=str(tmp_path / "store"))
    result = run(spec, schedule=schedule)

    assert result.exit_code == 255 and result.error == "RuntimeError: injected crash"
    assert result.teardown_errors == []
    assert seen == {node: "rules=0 stopped=0 running=0 files=0" for node in hosts}
    assert run_ids and _leftovers(docker_engine, run_ids[0]) == []
    # The partial run is stored and analysable.
    run_dir = result.run_dir
    history = load_history(run_dir / "history.jsonl")
    assert [op.f for op in history.nemesis] == ["partition", "pause"]
    assert history.nemesis[-1].output == {"nodes": list(paused)}
    assert sorted(load_journals(run_dir / "nodes")) == sorted(hosts)
    store_members = sorted(p.name for p in (run_dir / "external-store").glob("*")) if mode == "lease" else []
    assert store_members == (["s1", "s2", "s3"] if mode == "lease" else [])
    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] == "unknown" and results["error"] == "RuntimeError: injected crash"
    assert json.loads((run_dir / "test.json").read_text())["timings"]["finished_s"] > 0
    assert run_module.store.find_run(tmp_path / "store").path == run_dir


def _leader_claims(history) -> list[tuple[int, str, int]]:
    """(history time, node, term) of every status observation in which a node said it leads."""
    return [(op.ret, op.node, int(op.output["term"])) for op in history.ops
            if op.f == "status" and op.type == "ok" and (op.output or {}).get("role") == "leader"]


def _check_mode_run(result, nodes: tuple[str, ...]) -> tuple[object, dict]:
    """What a short run of any mode must show: elected, replicated, the leader's kill survived, valid."""
    assert result.error is None, result.error
    assert result.teardown_errors == []
    run_dir = result.run_dir
    results = json.loads((run_dir / "results.json").read_text())
    summaries = {name: verdict["summary"] for name, verdict in results["checkers"].items()}
    assert results["valid"] is True, summaries
    history = load_history(run_dir / "history.jsonl")
    writes = [op for op in history.ops if op.f in ("write", "cas") and op.type == "ok"]
    assert len(writes) > 20
    journals = load_journals(run_dir / "nodes")
    for node in nodes:  # every data node applied what was written: replicated
        assert sum(e.event == "apply" and e.data["key"] is not None for e in journals[node]) > 20, node
    kill = next(op for op in history.nemesis if op.f == "kill")
    killed = kill.output["nodes"]
    before = [(t, n, term) for t, n, term in _leader_claims(history) if t < kill.call]
    after = [(t, n, term) for t, n, term in _leader_claims(history) if t > kill.ret]
    assert before and killed == [before[-1][1]]  # the kill hit the leader
    assert any(term > before[-1][2] for _, _, term in after)  # and a later term got a leader
    return history, journals


def test_a_fluvio_run_deploys_the_controller_and_survives_killing_the_leader_and_the_controller(
    docker_engine, run_ids, tmp_path
) -> None:
    nodes = ("n1", "n2", "n3")
    schedule = [
        ScheduledFault(3.0, "kill", Kill("leader")),
        ScheduledFault(6.0, "kill", Start("all")),
        ScheduledFault(9.0, "kill", Kill(("sc",))),
        ScheduledFault(12.0, "kill", Start("all")),
        ScheduledFault(16.0, "kill", Start("all")),
    ]
    spec = TestSpec(seed=71, db="cluster", db_options={"mode": "fluvio"}, nodes=3, nemesis=("kill",), time_limit=16.0, concurrency=4,
                    store=str(tmp_path / "store"))
    result = run(spec, schedule=schedule)
    history, journals = _check_mode_run(result, nodes)
    assert [op.output for op in history.nemesis if op.f == "kill"][1] == {"nodes": ["sc"]}
    assert sorted(journals) == [*nodes, "sc"]
    assert sum(e.event == "start" for e in journals["sc"]) == 2  # the SC came back after its kill
    assert any(e.event == "decision" for e in journals["sc"])
    assert {op.node for op in history.ops if op.f == "status"} == set(nodes)  # the SC is never polled
    assert run_ids and _leftovers(docker_engine, run_ids[0]) == []


def test_a_lease_run_deploys_the_store_beside_the_nodes_and_survives_killing_the_leader(
    docker_engine, run_ids, tmp_path
) -> None:
    nodes = ("n1", "n2", "n3")
    schedule = [
        ScheduledFault(3.0, "kill", Kill("leader")),
        ScheduledFault(7.0, "kill", Start("all")),
        ScheduledFault(14.0, "kill", Start("all")),
    ]
    spec = TestSpec(seed=72, db="cluster", db_options={"mode": "lease"}, nodes=3, nemesis=("kill",), time_limit=14.0, concurrency=4,
                    store=str(tmp_path / "store"))
    result = run(spec, schedule=schedule)
    _, journals = _check_mode_run(result, nodes)
    assert sorted(journals) == list(nodes)  # the store's journals stay out of nodes/
    store = load_journals(result.run_dir / "external-store")
    assert sorted(store) == ["s1", "s2", "s3"]
    assert any(e.event == "role" and e.data["role"] == "leader" for events in store.values() for e in events)
    assert run_ids and _leftovers(docker_engine, run_ids[0]) == []
