"""``--workload-opt NAME=VALUE`` through the controller: the option reaches the workload, test.json and the
replay command keep it (the replay reproduces the run byte for byte), a suite sets it with
``workload_options``, and a bad option is one line and exit 254 before anything runs."""

from __future__ import annotations

import json
import random
import shlex
from pathlib import Path

import pytest

from harness import suite as suites
from harness.cli import main
from harness.spec import ConfigError, TestSpec
from harness.suite import controller_vocabulary, parse_suite


def _history_keys(run: Path) -> set[str]:
    lines = (json.loads(line) for line in (run / "history.jsonl").read_text().splitlines())
    return {e["key"] for e in lines if e.get("f") in ("put", "consume") and e.get("key")}


def test_an_option_reaches_the_workload_and_the_replay_command(tmp_path: Path) -> None:
    store = tmp_path / "store"
    argv = ["simulate", "--db", "cluster", "--workload", "queue", "--workload-opt", "queues=3", "--seed", "4",
            "--time-limit", "3", "--nemesis", "none", "--store", str(store)]
    assert main(argv) == 0
    run = (store / "latest").resolve()
    test = json.loads((run / "test.json").read_text())
    assert test["spec"]["workload_options"] == {"queues": 3}
    assert _history_keys(run) == {"q0", "q1", "q2"}
    command = shlex.split(test["command"])
    assert command[command.index("--workload-opt") + 1] == "queues=3"
    first = json.loads((run / "results.json").read_text())["sim"]["history_sha256"]
    assert main(["simulate", "--replay", str(run), "--store", str(store)]) == 0
    assert TestSpec.from_json(test["spec"]).workload_options == {"queues": 3}
    assert first == json.loads((run / "results.json").read_text())["sim"]["history_sha256"]


@pytest.mark.parametrize(("option", "message"), [
    ("queues=0", "queue needs at least one queue, not 0"),
    ("queus=2", "workload queue has no option 'queus'"),
    ("queues", "write NAME=VALUE"),
])
def test_a_bad_option_is_one_line_and_254(tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str,
                                          message: str) -> None:
    code = main(["simulate", "--db", "cluster", "--workload", "queue", "--workload-opt", option, "--seed", "1",
                 "--store", str(tmp_path / "store")])
    err = capsys.readouterr().err
    assert code == 254 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "store" / "latest").exists()


def test_a_stored_spec_with_an_undeclared_option_is_refused() -> None:
    with pytest.raises(ConfigError, match="test spec: --workload-opt: workload log has no option 'queues'"):
        TestSpec.from_json({"seed": 1, "db": "cluster", "workload": "log", "workload_options": {"queues": 2}})
    with pytest.raises(ConfigError, match="workload_options must be an object"):
        TestSpec.from_json({"seed": 1, "db": "cluster", "workload_options": ["keys=2"]})


def test_a_suite_sets_workload_options_per_entry() -> None:
    text = """[suite]
db = "cluster"
time_limit = 5
workload_options = {keys = 2}
[[matrix]]
workloads = ["log"]
[[matrix]]
workloads = ["queue"]
workload_options = {queues = 4}
"""
    parsed = parse_suite(text, Path("s.toml"), controller_vocabulary(), random.Random(0))
    log, queue = parsed.cases
    assert suites.test_spec(log, "store").workload_options == {"keys": 2}
    assert suites.test_spec(queue, "store").workload_options == {"queues": 4}
