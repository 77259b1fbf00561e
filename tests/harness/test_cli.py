"""The ``harness`` command line: bad arguments exit 254 naming the valid choices; specs round-trip."""

from __future__ import annotations

import re
import shlex
from collections import Counter

import pytest
from rich.console import Console

from harness import cli
from harness.compose import compose
from harness.db.plugin import load_plugin
from harness.interpreter import RunStats
from harness.spec import ConfigError, TestSpec
from nemesis.generator import nemesis_names


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
        (["--bug", "off-by-one"], "option bug: unknown value 'off-by-one'; valid: ack-before-commit,"),
        (["--mode", "paxos"], "option mode: unknown value 'paxos'; valid: blazingmq, raft"),
        (["--db-opt", "mode=paxos"], "option mode: unknown value 'paxos'; valid: blazingmq, raft"),
        (["--db-opt", "colour=blue"], "the cluster DB has no option 'colour'; its options: mode, bug, core"),
        (["--db-opt", "mode"], "--db-opt 'mode' is not NAME=VALUE"),
        (["--platform", "k8s"], "unknown platform 'k8s'; valid: docker, ssh, sim"),
        (["--platform", "ssh"], "the ssh platform needs --hosts FILE"),
        (["--nodes", "0"], "argument --nodes: '0' must be at least 1"),
        (["--nodes", "100"], "--nodes must be between 1 and 99 nodes, not 100"),
        (["--time-limit", "soon"], "argument --time-limit: 'soon' is not a number of seconds"),
        (["--time-limit", "inf"], "--time-limit must be between 0.1 and 86400 seconds, not inf"),
        (["--nemesis-interval", "0.00001"], "--nemesis-interval must be between 0.05 and 86400 seconds"),
        (["--concurrency", "-3"], "argument --concurrency: '-3' must be at least 1"),
        (["--rate", "-1"], "argument --rate: '-1' must not be negative"),
        (["--rate", "1e9"], "--rate must be between 0.001 and 10000 operations per second per process"),
        (["--op-timeout", "1e9"], "--op-timeout must be between 0.01 and 3600 seconds"),
        (["--seed", "x"], "argument --seed: invalid int value: 'x'"),
        (["--core", "scouting"], "option core: 'scouting' is not KEY=VALUE"),
        (["--core", "bogus=1"], "unknown node setting 'bogus'; valid: "),
        (["--core", "mode=raft"], "node setting 'mode' is set from --mode, not as a setting"),
        (["--core", "heartbeat_interval=-1"], "heartbeat_interval must be > 0, got -1"),
        (["--core", "scouting=maybe"], "node setting 'scouting' must be of type bool, not 'maybe'"),
        (["--checkers", "linearizable,psychic"], "checker 'psychic' does not judge the register workload"),
        (["--node-memory", "10m"], "argument --node-memory: a node's memory limit of '10m' is below the 64m"),
        (["--node-memory", "lots"], "argument --node-memory: 'lots' is not a memory size like 512m or 2g"),
        (["--node-pids", "8"], "--node-pids must be between 32 and 100000 processes and threads per node container"),
        (["--client-binding", "sticky"], "argument --client-binding: invalid choice: 'sticky'"),
        (["--checkers", ""], "--checkers '' names no checker"),
        (["--checkers", " , "], "--checkers ' , ' names no checker"),
        (["--nemesis", ""], "--nemesis '' names no fault package: name some, or none for a run without faults"),
    ],
)
def test_bad_run_arguments_exit_254_and_say_what_is_valid(capsys, tmp_path, argv, expected) -> None:
    code, output = _run(capsys, "run", "--db", "cluster", "--store", str(tmp_path / "store"), *argv)
    assert code == 254
    assert expected in output
    assert len([line for line in output.splitlines() if line.strip()]) == 1, output  # one line, no traceback
    assert not (tmp_path / "store").exists()  # nothing is stored for a test that could not be composed


@pytest.mark.parametrize(
    ("db", "expected"),
    [
        ("nosuchdb", "unknown db 'nosuchdb'; installed: cluster"),
        ("no_such_module:factory", "module 'no_such_module' does not import: ModuleNotFoundError"),
        ("json:no_such_factory", "module 'json' has no attribute 'no_such_factory'"),
        ("json:__doc__", "is a str, not a DBPlugin or a factory of a DB adapter"),
        ("json:JSONDecoder", "create() returned JSONDecoder, which is not a DB adapter"),
    ],
)
def test_a_db_that_cannot_be_loaded_is_one_line_and_exit_254(capsys, tmp_path, db, expected) -> None:
    code, output = _run(capsys, "run", "--db", db, "--store", str(tmp_path / "store"), "--nemesis", "none")
    assert code == 254
    assert expected in output
    assert len([line for line in output.splitlines() if line.strip()]) == 1, output
    assert not (tmp_path / "store").exists()


def test_run_needs_a_db_and_dbs_lists_the_installed_ones(capsys) -> None:
    code, output = _run(capsys, "run", "--nemesis", "none")
    assert code == 254 and "the following arguments are required: --db" in output
    code, output = _run(capsys, "dbs")
    assert code == 0
    assert "cluster" in output and "--db-opt mode (str; default blazingmq;" in output and "(flag --mode)" in output
    code, output = _run(capsys, "dbs", "nosuchdb")
    assert code == 254 and "unknown db 'nosuchdb'" in output


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
    code, output = _run(capsys, "run", "--db", "cluster", "--store", str(tmp_path / "store"), "--nemesis", "partition",
                        "--seed", "7")
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


def test_help_exits_zero_and_shows_the_chosen_dbs_options(capsys) -> None:
    code, output = _run(capsys, "run", "--help")
    assert code == 0 and "--nemesis" in output and "--db-opt" in output
    code, output = _run(capsys, "run", "--db", "cluster", "--help")
    assert code == 0 and "options of the cluster DB" in output and "--mode" in output
    assert "mode (str; default blazingmq; one of blazingmq, raft" in output
    flat = " ".join(re.sub(r"-\n\s+", "-", output).split())  # argparse wraps lines after a hyphen
    assert all(name in flat for name in nemesis_names()) and "--client-binding {leader,node}" in flat


def test_the_stored_command_parses_back_to_the_same_spec() -> None:
    spec = TestSpec(
        seed=42, db="cluster", nodes=3, workload="queue", nemesis=("partition", "clock"), time_limit=15.5,
        concurrency=4, store="/tmp/s", rate=None, nemesis_interval=2.5, op_timeout=1.0, image="mine:1",
        db_options={"mode": "raft", "bug": ["ack-before-commit", "no-dedup"],
                    "core": {"scouting": False, "leader_quorum_timeout": 0}},
        node_memory="2g", node_pids=256, client_binding="node",
    )
    comp = compose(spec)
    command = comp.command()
    # Every setting that changes the run is on the command line, the adapter's options included, with
    # the shortcut flags the adapter declares.
    assert " --mode raft --bug ack-before-commit --bug no-dedup --core leader_quorum_timeout=0 --core scouting=false" in command
    assert command.endswith(" --rate 0 --nemesis-interval 2.5 --op-timeout 1 --store /tmp/s --image mine:1"
                            " --client-binding node --node-memory 2g --node-pids 256")
    argv = shlex.split(command)
    assert argv[:2] == ["harness", "run"]
    plugin = load_plugin("cluster")
    again = cli.spec_from_args(cli._parser(plugin).parse_args(argv[1:]), plugin)
    assert again == spec
    assert TestSpec.from_json(spec.to_json()) == spec
    assert comp.test_name == "cluster-raft-bug-ack-before-commit+no-dedup-queue-partition+clock"
    assert compose(TestSpec(seed=1, db="cluster", workload="register")).test_name == "cluster-blazingmq-register-none"


def test_the_live_view_shows_counts_leader_and_faults() -> None:
    stats = RunStats(phase="chaos", started_at=100.0, completed=Counter(ok=90, fail=8, info=2))
    stats.leader, stats.term = "n3", 4
    stats.active_faults = ["partition halves (6 links cut)", "paused n2"]
    stats.faults_scheduled.update(kill=2, start=1)
    stats.faults_invoked.update(kill=1)
    stats.faults_applied.update(kill=1)
    spec = TestSpec(seed=1, db="cluster", time_limit=60)
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
    from harness.reproduce import Reproduction, load_stored
    from harness.run import RunResult
    from nemesis.faults import Kill, Start
    from nemesis.generator import ScheduledFault

    spec = TestSpec(seed=11, db="cluster", nemesis=("kill",), db_options={"bug": ["ack-before-commit"]},
                    store=str(tmp_path))
    run_dir = store.create_run(tmp_path, "some-test", datetime(2026, 1, 1, tzinfo=UTC))
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
    both = Reproduction(run_dir.path, ["durability", "linearizable"],
                        [replay(False, ["durability", "linearizable"]), replay(False, ["linearizable"])])
    # The second replay failed linearizable only: the summary must not say both failed both.
    assert both.summary() == ("2 of 2 replays failed a checker the original failed "
                              "(durability 1 of 2, linearizable 2 of 2)")


def test_a_stored_spec_with_unknown_fields_is_refused(tmp_path) -> None:
    with pytest.raises(ConfigError, match="unknown field"):
        TestSpec.from_json({"seed": 1, "db": "cluster", "warp": 9})
    with pytest.raises(ConfigError, match="has no 'seed'"):
        TestSpec.from_json({"db": "cluster"})


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ([1, 2], "test spec is not an object: list"),
        ({"seed": "x", "db": "cluster"}, "--seed must be a whole number, not 'x'"),
        ({"seed": 1, "db": "cluster", "nodes": "5"}, "--nodes must be a whole number of nodes, not '5'"),
        ({"seed": 1, "db": "cluster", "time_limit": None}, "--time-limit must be a number of seconds, not None"),
        ({"seed": 1, "db": "cluster", "nemesis": "kill"}, "nemesis must be a list of names, not 'kill'"),
        ({"seed": 1, "db": "cluster", "db_options": [1]}, "db_options must be an object, not [1]"),
        ({"seed": 1, "db": "cluster", "platform": 3}, "--platform must be a non-empty name, not 3"),
        ({"seed": 1, "db": "cluster", "client_binding": "sticky"},
         "--client-binding must be one of leader, node, not 'sticky'"),
    ],
)
def test_a_stored_spec_is_checked_field_by_field(spec, expected) -> None:
    with pytest.raises(ConfigError) as caught:
        TestSpec.from_json(spec)
    assert expected in str(caught.value)


def test_reproduce_of_a_damaged_test_json_is_one_line_and_exit_254(capsys, tmp_path) -> None:
    from harness import store

    run_dir = store.create_run(tmp_path, "some-test", __import__("datetime").datetime(2026, 1, 1))
    store.write_json(run_dir.test_json, {"seed": 1, "spec": {"seed": 1, "db": "cluster", "concurrency": "ten"}})
    code, output = _run(capsys, "reproduce", str(run_dir.path))
    assert code == 254
    assert "spec: --concurrency must be a whole number of client processes, not 'ten'" in output
    assert len([line for line in output.splitlines() if line.strip()]) == 1, output


def test_a_spec_of_the_first_format_reads_as_the_cluster_dbs_options() -> None:
    old = {"seed": 5, "db": "cluster", "mode": "raft", "bugs": ["vote-twice"], "nemesis": ["partition"],
           "node_args": ["--core-option", "scouting=false", "--core-option", "leader_quorum_timeout=0"]}
    spec = TestSpec.from_json(old)
    assert spec.db == "cluster"
    assert spec.db_options == {"mode": "raft", "bug": ["vote-twice"],
                               "core": {"scouting": False, "leader_quorum_timeout": 0}}
    assert compose(spec).test_name == "cluster-raft-bug-vote-twice-register-partition"
    assert spec.client_binding == "leader"  # stored before the binding existed: what those runs did


def test_a_run_that_crashed_before_its_workload_prints_its_end_without_a_traceback(tmp_path) -> None:
    # results.json holds null duration and operations when the run crashed in setup (a node's clock probe).
    from types import SimpleNamespace

    from rich.console import Console

    result = SimpleNamespace(results={"valid": "unknown", "ops": None, "duration_s": None}, stats=None,
                             error="RuntimeError: n4: libfaketime does not work there", interrupted=False, judged=True,
                             teardown_errors=[], valid="unknown", spec=SimpleNamespace(seed=5), run_dir=tmp_path)
    console = Console(record=True, width=200)
    cli._print_result(console, result)  # type: ignore[arg-type]
    text = console.export_text()
    assert "0 operations, 0 s, seed 5" in text and "the harness crashed: RuntimeError" in text


def test_the_leader_group_selector_is_a_flag_a_spec_field_and_part_of_the_command(capsys) -> None:
    spec = TestSpec(seed=3, db="cluster", nemesis=("kill",), leader_group="group:random")
    command = compose(spec).command()
    assert command.endswith(" --leader-group group:random")
    plugin = load_plugin("cluster")
    again = cli.spec_from_args(cli._parser(plugin).parse_args(shlex.split(command)[1:]), plugin)
    assert again == spec and TestSpec.from_json(spec.to_json()) == spec
    assert " --leader-group" not in compose(TestSpec(seed=3, db="cluster")).command()  # the default: not said
    assert TestSpec.from_json({"seed": 1, "db": "cluster"}).leader_group == "most"  # stored before groups
    code, output = _run(capsys, "run", "--db", "cluster", "--leader-group", "group:", "--nemesis", "kill")
    assert code == 254 and "--leader-group must be most, random, cluster, a group's name or group:NAME" in output
    assert len([line for line in output.splitlines() if line.strip()]) == 1, output
