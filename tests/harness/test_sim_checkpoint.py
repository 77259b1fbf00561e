"""A long exploration (``harness simulate --seeds``) keeps what it finished even when it is killed outright,
leaving no worker behind, and says how far it got where no progress bar shows: its ``sim_seeds`` partition is written while it runs
(``harness.sim.explore.CHECKPOINT_S``), and a log gets a line of progress now and then
(``harness.sim.cli.PROGRESS_LINE_S``)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from harness.sim import cli as sim_cli
from harness.sim import dataset
from harness.sim import explore as explore_module
from harness.sim.explore import ProcessPool, explore
from harness.spec import TestSpec

ROOT = Path(__file__).resolve().parents[2]


def _valid_simulate(spec: TestSpec, work: Path, checkers=None) -> SimpleNamespace:  # noqa: ANN001
    """``simulate`` standing in for the real one: every seed valid at once."""
    work.mkdir(parents=True, exist_ok=True)
    return SimpleNamespace(spec=spec, run_dir=work, valid=True, interrupted=False, stop_requested=False,
                           failed_checkers=[], unknown_checkers=[], sim_seconds=1.0, replay_command=None,
                           digest={}, results={})


def _spec(tmp_path: Path) -> TestSpec:
    return TestSpec(seed=1, db="cluster", platform="sim", store=str(tmp_path / "store"))


@pytest.mark.parametrize(("interval", "seen_before_the_end"), [(0.0, [[1], [1, 2], [1, 2, 3], [1, 2, 3, 4]]),
                                                               (3600.0, [[], [], [], []])])
def test_the_seeds_finished_so_far_are_in_the_table_while_the_exploration_runs(
    tmp_path, monkeypatch, interval, seen_before_the_end
) -> None:
    monkeypatch.setattr(explore_module, "simulate", _valid_simulate)
    monkeypatch.setattr(explore_module, "CHECKPOINT_S", interval)
    store = tmp_path / "store"
    seen = []
    exploration = explore(_spec(tmp_path), range(1, 5), keep_going=True, executor=ProcessPool(1),
                          on_outcome=lambda outcome: seen.append([row["seed"] for row in dataset.read(store)]))
    assert seen == seen_before_the_end
    # one partition, rewritten in place, holding every seed at the end
    rows = dataset.read(store)
    assert [row["seed"] for row in rows] == [1, 2, 3, 4] and len({row["exploration"] for row in rows}) == 1
    assert exploration.recorded is not None and exploration.recorded.parent.name == f"exploration={rows[0]['exploration']}"


def _checkpoint_forever(store: str, stop) -> None:  # noqa: ANN001 - a multiprocessing Event
    """Replace one exploration's partition with tables of changing sizes, as checkpoints do, until ``stop``."""
    size = 0
    while not stop.is_set():
        size = size % 40 + 1
        dataset.write(store, "x", [{"seed": seed, "verdict": "true" * (size % 5 + 1)} for seed in range(size)])


def test_the_table_reads_whole_files_while_checkpoints_replace_them(tmp_path) -> None:
    """A reader of ``sim_seeds`` (the test below, a person watching an exploration) sees each partition as
    one checkpoint wrote it, never one file's footer with another's pages: read by path, a quarter to a
    third of reads failed so ("Page was smaller than expected")."""
    import multiprocessing

    store = str(tmp_path / "store")
    dataset.write(store, "x", [{"seed": 0, "verdict": "true"}])
    stop = multiprocessing.get_context("spawn").Event()
    writer = multiprocessing.get_context("spawn").Process(target=_checkpoint_forever, args=(store, stop))
    writer.start()
    try:
        reads = 0
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            rows = dataset.read(store)
            assert [row["seed"] for row in rows] == list(range(len(rows)))
            reads += 1
    finally:
        stop.set()
        writer.join(timeout=30)
    assert reads > 100 and writer.exitcode == 0


def test_a_checkpoint_cut_short_leaves_a_temporary_harness_clean_knows(tmp_path, monkeypatch) -> None:
    from harness import store as harness_store

    def killed(*_args: object) -> None:
        raise KeyboardInterrupt  # the exploration stopped between writing its temporary and renaming it

    dataset.write(tmp_path, "20261201T000000-abcdef", [{"seed": 1}])
    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        dataset.write(tmp_path, "20261201T000000-abcdef", [{"seed": 1}, {"seed": 2}])
    monkeypatch.undo()
    left = sorted(path.name for path in tmp_path.rglob("*") if path.is_file())
    # the killed write's temporary, and the last checkpoint whole
    assert [harness_store.writer_of(name) for name in left] == [os.getpid(), None], left
    assert [row["seed"] for row in dataset.read(tmp_path)] == [1]


def test_a_checkpoint_that_cannot_be_written_does_not_stop_the_seeds(tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.setattr(explore_module, "simulate", _valid_simulate)
    monkeypatch.setattr(explore_module, "CHECKPOINT_S", 0.0)
    real_write, calls = dataset.write, []

    def full_disk_then_room(store, key, rows):  # noqa: ANN001, ANN202
        calls.append(len(rows))
        if len(calls) < 3:
            raise OSError(28, "No space left on device")
        return real_write(store, key, rows)

    monkeypatch.setattr(dataset, "write", full_disk_then_room)
    exploration = explore(_spec(tmp_path), range(1, 5), keep_going=True, executor=ProcessPool(1))
    assert [o.seed for o in exploration.outcomes] == [1, 2, 3, 4]
    assert calls == [1, 2, 3, 4, 4]  # a checkpoint after each seed, then the end's
    assert [row["seed"] for row in dataset.read(tmp_path / "store")] == [1, 2, 3, 4]
    assert "could not write the seeds finished so far" in caplog.text


def test_a_log_gets_a_line_of_progress_where_a_terminal_has_the_bar(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(explore_module, "simulate", _valid_simulate)
    monkeypatch.setattr(sim_cli, "PROGRESS_LINE_S", 0.0)
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    args = SimpleNamespace(keep_going=True, check_determinism=False)
    sim_cli._run_exploration(args, console, _spec(tmp_path), [5, 6, 7], ProcessPool(1))
    lines = [line for line in out.getvalue().splitlines() if line.startswith("seeds: ")]
    assert [line.split(", invalid")[0] for line in lines] == [
        "seeds: 1 of 3 done (up to seed 5)", "seeds: 2 of 3 done (up to seed 6)", "seeds: 3 of 3 done (up to seed 7)",
    ]
    assert all(line.endswith(" s") and "invalid 0, unknown 0" in line for line in lines)


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_harness_simulate_killed_outright_keeps_its_last_checkpoint_and_leaves_no_worker(tmp_path) -> None:
    store = tmp_path / "store"
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; from harness.sim import explore; explore.CHECKPOINT_S = 0.0; "
         "from harness.cli import main; sys.exit(main())", "simulate", "--seeds", "1..500", "--keep-going",
         "--jobs", "2", "--time-limit", "2", "--store", str(store)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(dataset.read(store)) < 3:
            time.sleep(0.5)
        process.kill()  # the harness only, no handler runs: only what was written before stays
        output, _ = process.communicate(timeout=60)
        # its two workers, in its process group, go with it (each was running a seed)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _group_alive(process.pid):
            time.sleep(0.2)
        assert not _group_alive(process.pid), "a worker outlived the harness"
    finally:
        if _group_alive(process.pid):
            os.killpg(process.pid, signal.SIGKILL)
        if process.poll() is None:
            process.communicate()
    assert process.returncode == -signal.SIGKILL, output
    seeds = [row["seed"] for row in dataset.read(store)]
    assert len(seeds) >= 3 and seeds == list(range(1, len(seeds) + 1)), (seeds, output)
    assert {row["verdict"] for row in dataset.read(store)} == {"true"}
