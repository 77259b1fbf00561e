"""The cluster adapter's processes besides the data nodes (issue 7): the fluvio controller on a host of its
own and the lease mode's store group beside the data nodes; what argv, hosts, fault targets and collected
files the adapter builds for them, and that the checkers read a run with the controller's journal in it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from adapters.cluster.db import (
    CONSOLE_FILE,
    DATA_DIR,
    JOURNAL_FILE,
    PID_FILE,
    PORT,
    STORE_PORT,
    ClusterDB,
)
from checkers.history import load_history, load_journals
from checkers.registry import CheckInput, run_checker
from harness.compose import compose
from harness.db import Deployment, collected_files, fault_targets, hosts_of
from harness.fault_driver import real_fault_driver
from harness.spec import TestSpec
from harness.topology import COMPOSE_TOPOLOGY, FIRST_HOST, compose_file, topology
from nemesis.faults import Kill, Partition, Start
from nemesis.shell import FakeTime
from tests.harness.synthetic_runs import write_run

NODES = ("n1", "n2", "n3", "n4", "n5")
CHECKERS = ("single-leader-per-term", "lsn-monotonicity", "durability", "linearizable")


def _deployment(db: ClusterDB, nodes: tuple[str, ...] = NODES) -> Deployment:
    hosts = hosts_of(db, nodes)
    return Deployment(
        nodes=nodes,
        peer_hosts={h: f"peer-{h}" for h in hosts},
        client_hosts={h: f"10.1.0.{i + 2}" for i, h in enumerate(hosts)},
        extra_hosts=hosts[len(nodes):],
    )


def _options(argv: list[str]) -> dict[str, str]:
    """``--flag value`` pairs of an argv after ``python3 -m cluster.node`` (flags without a value: "")."""
    options: dict[str, str] = {}
    rest = argv[3:]
    i = 0
    while i < len(rest):
        has_value = i + 1 < len(rest) and not rest[i + 1].startswith("--")
        options[rest[i]] = rest[i + 1] if has_value else ""
        i += 2 if has_value else 1
    return options


# -- fluvio: the controller (SC) -----------------------------------------------------------------------


def test_fluvio_runs_its_controller_on_a_host_of_its_own_that_every_spu_lists_as_a_peer() -> None:
    db = ClusterDB("fluvio", ["promote-outside-lrs"], node_args=["--heartbeat-interval", "0.1"], seed=4)
    assert hosts_of(db, NODES) == (*NODES, "sc")
    assert fault_targets(db, NODES) == (*NODES, "sc")
    deployment = _deployment(db)

    spu = _options(db.command(deployment, "n2"))
    assert spu["--peers"] == "n1=peer-n1:7000,n3=peer-n3:7000,n4=peer-n4:7000,n5=peer-n5:7000,sc=peer-sc:7000"
    assert spu["--mode"] == "fluvio" and "--controller" not in spu and "--store" not in spu

    argv = db.command(deployment, "sc")
    sc = _options(argv)
    assert "--controller" in sc
    assert sc["--id"] == "sc" and sc["--mode"] == "fluvio"
    assert sc["--peers"] == ",".join(f"{n}=peer-{n}:{PORT}" for n in NODES)
    assert (sc["--data-dir"], sc["--pid-file"]) == (DATA_DIR, PID_FILE)  # laid out like a node on its host
    assert sc["--bug"] == "promote-outside-lrs"  # the SC's own bug reaches it
    assert sc["--heartbeat-interval"] == "0.1"  # timed like its SPUs
    assert sc["--seed"] == "4005"  # after n1..n5's 4000..4004
    assert db.client_nodes(deployment) == {n: (deployment.client_hosts[n], PORT) for n in NODES}


def test_the_controller_journal_is_collected_with_the_nodes_journals() -> None:
    db = ClusterDB("fluvio")
    deployment = _deployment(db)
    assert collected_files(db, deployment, "sc") == {
        JOURNAL_FILE: "nodes/sc/journal.jsonl",
        "/var/log/chaos/node.log": "nodes/sc/node.log",
        CONSOLE_FILE: "nodes/sc/console.log",
    }
    assert [p.name for p in db.processes_on(deployment, "sc")] == ["sc"]


def test_other_modes_run_nothing_but_their_data_nodes() -> None:
    for mode in ("blazingmq", "raft", "aeron"):
        db = ClusterDB(mode)
        assert hosts_of(db, NODES) == NODES and fault_targets(db, NODES) == NODES
        deployment = _deployment(db)
        assert [p.name for p in db.processes(deployment)] == list(NODES)
        assert "sc=" not in _options(db.command(deployment, "n1"))["--peers"]


# -- lease: the store group ------------------------------------------------------------------------------


def test_lease_store_member_sk_runs_beside_node_nk_as_a_raft_group_of_its_own() -> None:
    db = ClusterDB("lease", ["no-fencing-token"], node_args=["--fsync", "never"], seed=2)
    assert hosts_of(db, NODES) == NODES  # no extra host
    assert fault_targets(db, NODES) == NODES  # store members are never process-fault targets
    deployment = _deployment(db)
    store = {p.name: p for p in db.processes(deployment) if p.kind == "store"}
    assert [(p.name, p.host, p.port) for p in store.values()] == [
        ("s1", "n1", STORE_PORT), ("s2", "n2", STORE_PORT + 1), ("s3", "n3", STORE_PORT + 2)
    ]

    s2 = _options(db.command(deployment, "s2"))
    assert s2["--mode"] == "raft"
    assert s2["--listen"] == f"0.0.0.0:{STORE_PORT + 1}"
    assert s2["--peers"] == f"s1=peer-n1:{STORE_PORT},s3=peer-n3:{STORE_PORT + 2}"
    assert "--bug" not in s2 and "--fsync" not in s2 and "--store" not in s2  # a correct raft group
    assert len({store[m].data_dir for m in store} | {DATA_DIR}) == 4
    assert len({store[m].pid_file for m in store} | {PID_FILE}) == 4

    n4 = _options(db.command(deployment, "n4"))
    assert n4["--mode"] == "lease"
    assert n4["--store"] == f"s1=peer-n1:{STORE_PORT},s2=peer-n2:{STORE_PORT + 1},s3=peer-n3:{STORE_PORT + 2}"
    assert "s1=" not in n4["--peers"]
    assert n4["--bug"] == "no-fencing-token" and n4["--fsync"] == "never"


def test_a_lease_host_starts_its_store_member_first_and_collects_its_files_outside_nodes() -> None:
    db = ClusterDB("lease")
    deployment = _deployment(db)
    assert [p.name for p in db.processes_on(deployment, "n2")] == ["s2", "n2"]
    assert [p.name for p in db.processes_on(deployment, "n5")] == ["n5"]
    files = collected_files(db, deployment, "n2")
    assert files["/var/lib/chaos/store/s2/journal.jsonl"] == "external-store/s2/journal.jsonl"
    assert files["/var/log/chaos/s2.log"] == "external-store/s2/node.log"
    assert files[JOURNAL_FILE] == "nodes/n2/journal.jsonl"
    assert not any(path.startswith("nodes/s") for path in files.values())


def test_with_fewer_than_three_nodes_the_store_members_share_hosts_on_distinct_ports() -> None:
    db = ClusterDB("lease")
    deployment = _deployment(db, ("n1",))
    assert [(p.name, p.host) for p in db.processes_on(deployment, "n1")] == [
        ("s1", "n1"), ("s2", "n1"), ("s3", "n1"), ("n1", "n1")
    ]
    assert _options(db.command(deployment, "n1"))["--store"] == (
        f"s1=peer-n1:{STORE_PORT},s2=peer-n1:{STORE_PORT + 1},s3=peer-n1:{STORE_PORT + 2}"
    )


def test_libfaketime_reaches_nodes_and_the_controller_but_not_store_members() -> None:
    assert "LD_PRELOAD" in ClusterDB("fluvio", faketime=FakeTime()).environment("sc")
    lease = ClusterDB("lease", faketime=FakeTime())
    assert "LD_PRELOAD" in lease.environment("n1")
    assert "LD_PRELOAD" not in lease.environment("s1")


def test_an_unknown_process_is_refused_naming_the_processes_there_are() -> None:
    db = ClusterDB("blazingmq")
    with pytest.raises(KeyError, match="no process 'sc' in this blazingmq deployment; its processes: n1, n2"):
        db.command(_deployment(db), "sc")


def test_a_deployment_needs_an_address_for_every_extra_host_and_distinct_names() -> None:
    with pytest.raises(ValueError, match="no address for node"):
        Deployment(nodes=("n1",), peer_hosts={"n1": "a"}, client_hosts={"n1": "a"}, extra_hosts=("sc",))
    with pytest.raises(ValueError, match="both as a data node and as an extra host"):
        Deployment(nodes=("n1",), peer_hosts={"n1": "a"}, client_hosts={"n1": "a"}, extra_hosts=("n1",))


# -- topology and compose -----------------------------------------------------------------------------------


def test_extra_hosts_get_fixed_addresses_below_the_nodes_and_compose_declares_sc() -> None:
    top = topology(3, extra_hosts=("sc",))
    assert top.names == ("n1", "n2", "n3", "sc")
    assert top.address("sc") == f"10.55.0.{FIRST_HOST - 1}"
    assert topology(7, extra_hosts=("sc",)).address("sc") == top.address("sc")  # not moved by the count
    assert COMPOSE_TOPOLOGY.names == (*NODES, "sc")
    text = compose_file()
    assert "  sc:\n    image: chaos-node:latest\n    container_name: chaos-sc\n" in text
    assert "n1..n5 and the host sc" in text
    with pytest.raises(ValueError, match="repeat a node"):
        topology(3, extra_hosts=("n2",))


# -- the nemesis picks from the fault targets ----------------------------------------------------------------


def _targets(fault: object) -> set[str]:
    if isinstance(fault, Partition):
        return set(fault.grudge or {}) | {n for dropped in (fault.grudge or {}).values() for n in dropped}
    targets = getattr(fault, "targets", ())
    return set(targets) if not isinstance(targets, str) else set()


def test_the_fluvio_schedule_aims_kills_and_partitions_at_the_controller_too() -> None:
    comp = compose(TestSpec(seed=3, db="cluster", db_options={"mode": "fluvio"}, nemesis=("partition", "kill"),
                            time_limit=600.0))
    schedule = comp.schedule()
    kills = set().union(*(_targets(e.fault) for e in schedule if isinstance(e.fault, Kill)))
    cuts = set().union(*(_targets(e.fault) for e in schedule if isinstance(e.fault, Partition)))
    assert "sc" in kills and "sc" in cuts
    lease = compose(TestSpec(seed=3, db="cluster", db_options={"mode": "lease"}, nemesis=("partition", "kill"),
                             time_limit=600.0))
    named = set().union(*(_targets(e.fault) for e in lease.schedule()))
    assert named <= set(NODES) and named  # store members are reached only through their hosts


class _Processes:
    """A DB whose processes live or die; it declares the fluvio controller as a fault target."""

    name = "processes"

    def __init__(self) -> None:
        self.started: list[str] = []

    def fault_targets(self, nodes: tuple[str, ...]) -> tuple[str, ...]:
        return (*nodes, "sc")

    def extra_hosts(self, nodes: tuple[str, ...]) -> tuple[str, ...]:
        return ("sc",)

    def run_files(self, deployment: Deployment, host: str) -> dict[str, str]:
        return {}

    def kill(self, deployment: Deployment, node: str, remote: object) -> None: ...

    def start(self, deployment: Deployment, node: str, remote: object) -> None:
        self.started.append(node)

    def is_running(self, deployment: Deployment, node: str, remote: object) -> bool:
        return True


def test_the_driver_restarts_a_killed_controller_and_never_takes_it_for_the_leader() -> None:
    db = _Processes()
    nodes = ("n1", "n2", "n3")
    deployment = Deployment(nodes, {n: n for n in (*nodes, "sc")}, {n: n for n in (*nodes, "sc")},
                            extra_hosts=("sc",))
    driver = real_fault_driver(db, deployment, {n: object() for n in (*nodes, "sc")}, None, None)  # type: ignore[arg-type]
    assert driver.nodes == (*nodes, "sc")
    killed = driver.apply(Kill(("sc",)), "n2")
    assert killed.value == {"nodes": ["sc"]} and driver.killed == {"sc"}
    assert driver.recovery_faults() == [Start(("sc",))]
    driver.apply(Start("all"), "n2")
    assert sorted(db.started) == ["n1", "n2", "n3", "sc"]
    leader_kill = driver.apply(Kill("leader"), "n2")
    assert leader_kill.value == {"nodes": ["n2"]}


# -- checkers with the controller's journal present ----------------------------------------------------------


def _controller_journal(path: Path, spus: tuple[str, ...]) -> None:
    """The SC's journal as `cluster.core.fluvio_controller` writes it: start and decisions, no role or apply."""
    rng = random.Random(7)
    lines = [{"node": "sc", "seq": 0, "wall": 1000.0, "event": "start", "mode": "fluvio", "role": "controller",
              "term": 0, "status": "Offline", "leader": None, "lrs": list(spus), "bugs": []}]
    for epoch in range(1, 4):
        leader = rng.choice(spus)
        lines.append({"node": "sc", "seq": len(lines), "wall": 1000.0 + epoch, "event": "decision",
                      "status": "Online", "epoch": epoch, "leader": leader, "candidate": None,
                      "lrs": list(spus), "reason": f"{leader} promoted"})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


@pytest.mark.parametrize("lost_write", [False, True])
def test_the_checkers_give_the_same_verdicts_with_the_controller_journal_present(tmp_path, lost_write) -> None:
    run = write_run(tmp_path, "t", "s", ops=120, lost_write=lost_write, mode="fluvio")
    history = load_history(run / "history.jsonl")
    without = {name: run_checker(name, CheckInput(history, "cas-register", load_journals(run / "nodes")))
               for name in CHECKERS}
    _controller_journal(run / "nodes" / "sc" / "journal.jsonl", ("n1", "n2", "n3"))
    journals = load_journals(run / "nodes")
    assert "sc" in journals
    with_sc = {name: run_checker(name, CheckInput(history, "cas-register", journals)) for name in CHECKERS}
    assert {n: v.valid for n, v in with_sc.items()} == {n: v.valid for n, v in without.items()}
    assert with_sc["durability"].valid is (not lost_write)  # a lost write is still found
    if not lost_write:
        assert all(v.valid is True for v in with_sc.values())
