"""``harness clean`` chooses only dead controllers' runs (a named live run is refused), finds SSH-style
unfinished runs in the store, and marks what it cleaned as killed; it removes what killed simulations and
killed writers left in the store. No Docker engine needed here:
tests/harness/test_killed_runs_docker.py cleans real leftovers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness import cli, store
from harness.clean import TEMPORARY_IDLE_S, CleanError, DeadRun, select, unfinished_runs
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


def _said_once(output: str, *names: str) -> None:
    """Each line of ``output`` appears once, and each of ``names`` (a run directory, a scratch directory) in
    one line, once: a run named by its directory is not named twice."""
    lines = output.splitlines()
    assert len(lines) == len(set(lines)), output
    for name in names:
        assert output.count(name) == 1, f"{name} said {output.count(name)} times:\n{output}"


def test_clean_marks_a_dead_unfinished_run_killed_and_dry_run_changes_nothing(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # only the store is looked at
    run_dir = _stored_run(tmp_path, "r1", {"controller": _dead().to_json(), "spec": {"platform": "ssh"}})
    _stored_run(tmp_path, "r2", {"controller": Controller.current().to_json()})

    code, output = _clean(capsys, "--store", str(tmp_path), "--dry-run")
    assert code == 0
    _said_once(output, str(run_dir.resolve()))
    assert f"would clean {run_dir.resolve()}: no containers; controller pid " in output, output
    assert "docker leftovers not looked for: no Docker engine answers" in output
    assert "end" not in json.loads((run_dir / "test.json").read_text())

    code, output = _clean(capsys, "--store", str(tmp_path))
    assert code == 0, output
    assert f"cleaned {run_dir.resolve()}: removed no containers" in output, output
    assert "nothing was deployed" in output
    assert "kept " in output and "is running" in output
    _said_once(output, str(run_dir.resolve()), str((tmp_path / "test" / "r2").resolve()))
    end = json.loads((run_dir / "test.json").read_text())["end"]
    assert end["how"] == "killed" and end["last_event_s"] == 16.0 and end["detected_by"] == "harness clean"

    code, output = _clean(capsys, "--store", str(tmp_path), "--run", str(tmp_path / "test" / "r2"))
    assert code == 254
    note, refusal = output.strip().splitlines()  # the engine note and the one-line refusal
    assert note.startswith("harness clean: docker leftovers not looked for")
    assert refusal.startswith(f"harness clean: run {(tmp_path / 'test' / 'r2').resolve()} is still running")


def test_clean_removes_the_scratch_a_killed_simulation_left_and_nothing_else_there(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.sim.run import SCRATCH, SCRATCH_OWNER, owned_scratch

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # only the store is looked at
    with owned_scratch(tmp_path, "explore") as mine:  # this process's: alive
        (mine / "seed-3").mkdir()
        dead, away, unrecorded = (tmp_path / SCRATCH / name for name in ("explore-1-1", "shrink-2-2", "4-run"))
        for directory, owner in ((dead, _dead()), (away, replace(Controller.current(), host="other.example"))):
            (directory / "seed-7").mkdir(parents=True)
            store.write_json(directory / SCRATCH_OWNER, owner.to_json())
        unrecorded.mkdir()  # an older harness's scratch run (its --check-determinism replay): no record

        code, output = _clean(capsys, "--store", str(tmp_path), "--dry-run")
        assert code == 0 and f"would remove {dead}: the scratch of a simulation whose process" in output, output
        _said_once(output, str(dead))
        assert dead.is_dir()

        code, output = _clean(capsys, "--store", str(tmp_path))
        assert code == 0 and f"removed {dead}: the scratch of a simulation whose process" in output, output
        _said_once(output, str(dead))
        assert "nothing to clean" not in output
        assert not dead.exists() and mine.is_dir() and away.is_dir() and unrecorded.is_dir()

        code, output = _clean(capsys, "--store", str(tmp_path))
        assert code == 0 and "nothing to clean" in output, output
    assert not mine.exists()  # its maker removes it at the block's end


def test_clean_removes_the_temporaries_of_writers_killed_while_they_wrote_and_no_other(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # only the store is looked at
    run_dir = tmp_path / "test" / "20260101T000000"
    run_dir.mkdir(parents=True)
    store.write_json(run_dir / store.RESULTS, {"valid": True})
    dead = _dead().pid
    killed = tmp_path / f".index.html.{dead}-{dead}.tmp"
    writing = store.temporary_name(run_dir / store.RESULTS)  # this process's: alive
    just_killed = run_dir / f".report.html.{dead}-{dead}.tmp"  # written a moment ago (another host's writer?)
    other = run_dir / ".notes.tmp"  # not a writer's temporary
    link = tmp_path / f".latest.{dead}-{dead}.tmp"  # update_latest's: a link to a run directory
    idle = TEMPORARY_IDLE_S + 60
    for path in (killed, writing, just_killed, other):
        path.write_text("half")
    link.symlink_to(run_dir.relative_to(tmp_path))
    for path in (killed, writing, other, link):
        os.utime(path, (path.lstat().st_mtime - idle,) * 2, follow_symlinks=False)
    assert store.writer_of(killed.name) == dead and store.writer_of(other.name) is None

    code, output = _clean(capsys, "--store", str(tmp_path), "--dry-run")
    assert code == 0 and output.count("would remove") == 2, output
    assert f"would remove {killed}: the temporary of a writer (pid {dead}) killed while it wrote" in output
    assert f"would remove {link}: the temporary of a writer (pid {dead}) killed while it wrote" in output
    assert killed.exists() and link.is_symlink()
    code, output = _clean(capsys, "--store", str(tmp_path))
    assert code == 0 and output.count("removed") == 2 and f"removed {killed}:" in output, output
    assert not killed.exists() and not link.is_symlink() and run_dir.is_dir()
    assert writing.exists() and just_killed.exists() and other.exists()
    code, output = _clean(capsys, "--store", str(tmp_path))
    assert code == 0 and "nothing to clean" in output, output


def test_an_exploration_records_its_process_in_its_scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from harness.sim import explore as explore_module
    from harness.sim.run import SCRATCH, SCRATCH_OWNER
    from harness.spec import TestSpec

    owners = []

    def simulate(spec, work, checkers=None):  # noqa: ANN001, ANN202 - what explore's seeds run, standing in
        owners.extend(Controller.from_json(store.read_json(p)) for p in (tmp_path / SCRATCH).glob(f"*/{SCRATCH_OWNER}"))
        work.mkdir(parents=True, exist_ok=True)
        return SimpleNamespace(spec=spec, run_dir=work, valid=True, interrupted=False, stop_requested=False,
                               failed_checkers=[], unknown_checkers=[], sim_seconds=1.0, replay_command=None,
                               digest={}, results={})

    monkeypatch.setattr(explore_module, "simulate", simulate)
    spec = TestSpec(seed=1, db="cluster", platform="sim", store=str(tmp_path))
    explore_module.explore(spec, [1], executor=explore_module.ProcessPool(1))
    assert owners == [Controller.current()]
    assert not (tmp_path / SCRATCH).exists()  # removed at the end, record and all


def _owner_of(run_dir: Path, store_dir: Path) -> Controller | None:
    """The process recorded for the scratch directory ``run_dir`` is simulated in (``None``: not in one
    directly under ``store_dir/.sim-scratch``, or no record)."""
    from harness.sim.run import SCRATCH, SCRATCH_OWNER

    if run_dir.parent.parent != store_dir / SCRATCH or not (run_dir.parent / SCRATCH_OWNER).is_file():
        return None
    return Controller.from_json(store.read_json(run_dir.parent / SCRATCH_OWNER))


def test_the_replay_of_check_determinism_records_its_process_and_clean_removes_it_once_dead(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from harness.sim import cli as sim_cli
    from harness.sim.run import SCRATCH, SCRATCH_OWNER

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # only the store is looked at
    store_dir, killed = tmp_path / "store", tmp_path / "killed"
    owners, left = [], []
    real = sim_cli.simulate

    def simulate(spec, run_dir=None, **kwargs):  # noqa: ANN001, ANN003, ANN202 - the real one, watched
        result = real(spec, run_dir, **kwargs)
        if run_dir is not None:  # the replay: what a SIGKILL now would leave, copied into another store
            owners.append(_owner_of(Path(run_dir), store_dir))
            scratch = Path(run_dir).parent
            if scratch.parent == store_dir / SCRATCH:
                left.append(killed / SCRATCH / scratch.name)
                shutil.copytree(scratch, left[-1])
                store.write_json(left[-1] / SCRATCH_OWNER, _dead().to_json())
        return result

    monkeypatch.setattr(sim_cli, "simulate", simulate)
    argv = ["simulate", "--seed", "3", "--time-limit", "2", "--store", str(store_dir), "--check-determinism"]
    assert cli.main(argv) == 0
    assert "deterministic" in capsys.readouterr().out
    assert owners == [Controller.current()]
    assert not (store_dir / SCRATCH).exists()  # removed after the replay, record and all

    code, output = _clean(capsys, "--store", str(killed))
    assert code == 0 and f"removed {left[0]}: the scratch of a simulation whose process" in output, output
    _said_once(output, str(left[0]))
    assert "cleaned" not in output and not (killed / SCRATCH).exists()  # not taken for a run to finish


def test_a_shrinks_minimal_run_is_simulated_in_a_recorded_scratch_and_kept_without_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.sim import shrink as shrink_module
    from harness.sim.run import SCRATCH, SCRATCH_OWNER, simulate
    from harness.spec import TestSpec

    spec = TestSpec(seed=3, db="cluster", platform="sim", time_limit=2.0, store=str(tmp_path))
    first = simulate(spec)
    candidate = shrink_module.Candidate(first.spec, tuple(first.schedule), first.scripts)
    owners = []

    def watched(spec, run_dir=None, **kwargs):  # noqa: ANN001, ANN003, ANN202 - the real one, watched
        owners.append(None if run_dir is None else _owner_of(Path(run_dir), tmp_path))
        return simulate(spec, run_dir, **kwargs)

    monkeypatch.setattr(shrink_module, "simulate", watched)
    kept = shrink_module.store_minimal(candidate, original_dir=first.run_dir, checker="linearizable")
    assert owners == [Controller.current()]
    assert kept.run_dir.parent.parent == tmp_path and (kept.run_dir / "test.json").is_file()
    assert not (kept.run_dir / SCRATCH_OWNER).exists()  # the record stays with the scratch, which is gone
    assert not (tmp_path / SCRATCH).exists()
