"""``harness clean`` chooses only dead controllers' runs (a named live run is refused), finds SSH-style
unfinished runs in the store, and marks what it cleaned as killed. No Docker engine needed here:
tests/harness/test_killed_runs_docker.py cleans real leftovers."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness import cli, store
from harness.clean import CleanError, DeadRun, select, unfinished_runs
from harness.lifecycle import Controller


def _dead() -> Controller:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return replace(Controller.current(), pid=child.pid)


def _runs() -> dict[str, DeadRun]:
    me = Controller.current()
    return {
        "dead": DeadRun(run_id="chaos-dead", controller=_dead()),
        "alive": DeadRun(run_id="chaos-alive", controller=me),
        "elsewhere": DeadRun(run_id="chaos-away", controller=replace(me, host="other.example")),
        "unrecorded": DeadRun(run_id="chaos-old", controller=None),
    }


def test_without_names_only_runs_whose_controller_died_here_are_cleaned() -> None:
    runs = _runs()
    chosen, kept = select(list(runs.values()), [])
    assert chosen == [runs["dead"]]
    reasons = {run.run_id: why for run, why in kept}
    assert reasons["chaos-alive"].startswith("its controller (pid ") and reasons["chaos-alive"].endswith("is running")
    assert "ran on host other.example" in reasons["chaos-away"]
    assert "harness clean --run chaos-away" in reasons["chaos-away"]
    assert "harness clean --run chaos-old" in reasons["chaos-old"]


def test_a_named_run_of_another_host_or_an_older_harness_is_cleaned() -> None:
    runs = _runs()
    chosen, kept = select(list(runs.values()), ["chaos-away", "chaos-old"])
    assert chosen == [runs["elsewhere"], runs["unrecorded"]] and kept == []


def test_a_live_run_is_refused_even_when_named_and_an_unknown_name_is_one_sentence() -> None:
    runs = list(_runs().values())
    with pytest.raises(CleanError, match="run chaos-alive is still running .*stop it with Ctrl-C or SIGTERM"):
        select(runs, ["chaos-alive"])
    with pytest.raises(CleanError, match="no run 'chaos-nope' has containers"):
        select(runs, ["chaos-nope"])


def _stored_run(store_dir: Path, name: str, document: dict) -> Path:
    run_dir = store_dir / "test" / name
    run_dir.mkdir(parents=True)
    (run_dir / "test.json").write_text(json.dumps(document))
    (run_dir / "history.jsonl").write_text('{"index":0,"time":16000000000}\n')
    return run_dir


def test_the_store_scan_finds_runs_with_a_controller_and_no_end(tmp_path: Path) -> None:
    dead = _dead().to_json()
    unfinished = _stored_run(tmp_path, "r1", {"controller": dead})
    _stored_run(tmp_path, "r2", {"controller": dead, "end": {"how": "completed"}})
    _stored_run(tmp_path, "r3", {"spec": {}})  # an older harness: no controller recorded
    store.update_latest(tmp_path, store.RunDir(unfinished))
    assert [path for path, _ in unfinished_runs(tmp_path)] == [unfinished.resolve()]


def _clean(capsys, *argv: str) -> tuple[int, str]:
    code = cli.main(["clean", *argv])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_clean_marks_a_dead_unfinished_run_killed_and_dry_run_changes_nothing(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # only the store is looked at
    run_dir = _stored_run(tmp_path, "r1", {"controller": _dead().to_json(), "spec": {"platform": "ssh"}})
    _stored_run(tmp_path, "r2", {"controller": Controller.current().to_json()})

    code, output = _clean(capsys, "--store", str(tmp_path), "--dry-run")
    assert code == 0
    assert f"would clean {run_dir.resolve()}" in output
    assert "docker leftovers not looked for: no Docker engine answers" in output
    assert "end" not in json.loads((run_dir / "test.json").read_text())

    code, output = _clean(capsys, "--store", str(tmp_path))
    assert code == 0, output
    assert f"cleaned {run_dir.resolve()}" in output and "nothing was deployed" in output
    assert "kept " in output and "is running" in output
    end = json.loads((run_dir / "test.json").read_text())["end"]
    assert end["how"] == "killed" and end["last_event_s"] == 16.0 and end["detected_by"] == "harness clean"

    code, output = _clean(capsys, "--store", str(tmp_path), "--run", str(tmp_path / "test" / "r2"))
    assert code == 254
    note, refusal = output.strip().splitlines()  # the engine note and the one-line refusal
    assert note.startswith("harness clean: docker leftovers not looked for")
    assert refusal.startswith(f"harness clean: run {(tmp_path / 'test' / 'r2').resolve()} is still running")
