"""The ``harness`` command line: bad arguments exit 254 naming the valid choices; specs round-trip."""

from __future__ import annotations

import shlex
from collections import Counter

import pytest
from rich.console import Console

from harness import cli
from harness.interpreter import RunStats
from harness.run import TestSpec, core_node_args


def _run(capsys, *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.err + captured.out


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--workload", "bank"], "unknown workload 'bank'; valid: register, queue"),
        (["--nemesis", "partition,flood"], "unknown nemesis flood; valid: partition, kill, pause, clock, loss, latency"),
        (["--nemesis", "leader-clock", "--nodes", "2"], "nemesis leader-clock needs at least 3 nodes, got 2"),
        (["--bug", "off-by-one"], "unknown bug 'off-by-one'; valid bugs: ack-before-commit,"),
        (["--mode", "paxos"], "unknown mode 'paxos'; valid: blazingmq, raft"),
        (["--db", "etcd"], "unknown db 'etcd'; valid: cluster"),
        (["--platform", "k8s"], "unknown platform 'k8s'; valid: docker, ssh"),
        (["--platform", "ssh"], "the ssh platform needs --hosts FILE"),
        (["--nodes", "0"], "argument --nodes: '0' must be at least 1"),
        (["--time-limit", "soon"], "argument --time-limit: 'soon' is not a number of seconds"),
        (["--concurrency", "-3"], "argument --concurrency: '-3' must be at least 1"),
        (["--rate", "-1"], "argument --rate: '-1' must not be negative"),
        (["--seed", "x"], "argument --seed: invalid int value: 'x'"),
        (["--core", "scouting"], "argument --core: 'scouting' is not NAME=VALUE (e.g. scouting=false)"),
        (["--core", "bogus=1"], "unknown node setting 'bogus' (--core); valid: "),
    ],
)
def test_bad_run_arguments_exit_254_and_say_what_is_valid(capsys, tmp_path, argv, expected) -> None:
    code, output = _run(capsys, "run", "--store", str(tmp_path / "store"), *argv)
    assert code == 254
    assert expected in output
    assert not (tmp_path / "store").exists()  # nothing is stored for a test that could not be composed


def test_an_unknown_command_lists_the_commands(capsys) -> None:
    code, output = _run(capsys, "frobnicate")
    assert code == 254
    assert "invalid choice: 'frobnicate' (choose from " in output
    listed = output.split("choose from ", 1)[1]
    for command in ("run", "reproduce", "analyze", "suite", "report", "serve"):
        assert f"'{command}'" in listed
    code, output = _run(capsys)
    assert code == 254 and "required" in output


def test_a_missing_docker_engine_is_one_sentence_pointing_at_the_install_script(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    code, output = _run(capsys, "run", "--store", str(tmp_path / "store"), "--nemesis", "partition", "--seed", "7")
    assert code == 254
    lines = [line for line in output.splitlines() if line.startswith("harness run:") and "seed" not in line]
    assert len(lines) == 1
    assert "no Docker engine answers" in lines[0] and "scripts/install-docker.sh" in lines[0]
    assert not (tmp_path / "store").exists()


def test_reproduce_says_what_is_wrong_with_its_argument(capsys, tmp_path) -> None:
    code, output = _run(capsys, "reproduce", str(tmp_path / "missing"))
    assert code == 254 and "no such directory" in output
    code, output = _run(capsys, "reproduce", str(tmp_path))
    assert code == 254 and "is not a stored run" in output
    code, output = _run(capsys, "reproduce", str(tmp_path), "--times", "0")
    assert code == 254 and "'0' must be at least 1" in output


def test_help_exits_zero(capsys) -> None:
    code, output = _run(capsys, "run", "--help")
    assert code == 0 and "--nemesis" in output


def test_the_stored_command_parses_back_to_the_same_spec() -> None:
    spec = TestSpec(
        seed=42, mode="raft", nodes=3, workload="queue", nemesis=("partition", "clock"), time_limit=15.5,
        concurrency=4, bugs=("ack-before-commit", "no-dedup"), store="/tmp/s", rate=None,
        nemesis_interval=2.5, op_timeout=1.0,
        node_args=core_node_args({"scouting": False, "leader_quorum_timeout": 0}),
    )
    # Every setting that changes the run is on the command line, node settings included.
    assert spec.command().endswith(
        " --nemesis-interval 2.5 --op-timeout 1 --core leader_quorum_timeout=0 --core scouting=false"
    )
    argv = shlex.split(spec.command())
    assert argv[:2] == ["harness", "run"]
    again = cli.spec_from_args(cli._parser().parse_args(argv[1:]))
    assert again == spec
    assert TestSpec.from_json(spec.to_json()) == spec
    assert spec.test_name == "cluster-raft-queue-partition+clock-bug-ack-before-commit+no-dedup"


def test_the_live_view_shows_counts_leader_and_faults() -> None:
    stats = RunStats(phase="chaos", started_at=100.0, completed=Counter(ok=90, fail=8, info=2))
    stats.leader, stats.term = "n3", 4
    stats.active_faults = ["partition halves (6 links cut)", "paused n2"]
    stats.faults_scheduled.update(kill=2, start=1)
    stats.faults_invoked.update(kill=1)
    stats.faults_applied.update(kill=1)
    spec = TestSpec(seed=1, time_limit=60)
    console = Console(record=True, width=120)
    view = cli.LiveView(spec, stats, console, clock=lambda: 110.0)
    console.print(view.render())
    text = console.export_text()
    assert "elapsed  10.0 s of 60 s" in text
    assert "100 completed, 10.0/s" in text
    assert "ok 90" in text and "fail 8" in text and "info 2" in text
    assert "n3 (term 4)" in text
    assert "partition halves (6 links cut), paused n2" in text
    assert "1 invoked, 1 applied, 0 not applied (of 3 scheduled)" in text
    assert "leader n3 term 4" in view.line()


def test_a_stored_run_gives_back_its_spec_schedule_and_failed_checkers(tmp_path) -> None:
    from datetime import UTC, datetime

    from harness import store
    from harness.run import Reproduction, RunResult, load_stored
    from nemesis.faults import Kill, Start
    from nemesis.generator import ScheduledFault

    spec = TestSpec(seed=11, nemesis=("kill",), bugs=("ack-before-commit",), store=str(tmp_path))
    run_dir = store.create_run(tmp_path, spec.test_name, datetime(2026, 1, 1, tzinfo=UTC))
    store.write_json(run_dir.test_json, {"seed": 11, "spec": spec.to_json()})
    schedule = (ScheduledFault(3.5, "kill", Kill("leader")), ScheduledFault(60.0, "kill", Start("all")))
    store.write_jsonl(run_dir.schedule, [entry.to_json() for entry in schedule])
    store.write_json(run_dir.results, {"valid": False, "checkers": {
        "durability": {"valid": False}, "linearizable": {"valid": True}}})

    found_dir, found_spec, found_schedule, failing = load_stored(tmp_path / "latest")
    assert found_dir.path == run_dir.path.resolve()
    assert found_spec == spec
    assert found_schedule == schedule
    assert failing == ["durability"]

    def replay(valid, failed: list[str]) -> RunResult:
        checks = {name: {"valid": False} for name in failed}
        return RunResult(spec=spec, run_dir=None, valid=valid, exit_code=0, results={"checkers": checks})

    outcome = Reproduction(run_dir.path, failing, [replay(False, ["durability"]), replay(False, ["linearizable"]),
                                                    replay(True, [])])
    assert outcome.reproduced == 1


def test_a_stored_spec_with_unknown_fields_is_refused(tmp_path) -> None:
    from harness.run import ConfigError

    with pytest.raises(ConfigError, match="unknown field"):
        TestSpec.from_json({"seed": 1, "warp": 9})
    with pytest.raises(ConfigError, match="no seed"):
        TestSpec.from_json({"mode": "raft"})
