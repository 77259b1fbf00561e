"""Simulation seeds as Spark tasks (``harness.sim.spark``), where an exploration's seeds run
(``harness.sim.explore`` executors), and the ``sim_seeds`` table (``harness.sim.dataset``).

The batching, the executor plumbing and the table are unit tests; one ``spark`` test runs the same 20
seeds through ``--spark-master local[2]`` and ``--jobs 2`` and compares the verdicts seed by seed.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from checkers.verdict import UNKNOWN
from harness.cli import main
from harness.sim import dataset
from harness.sim.explore import Exploration, ProcessPool, SeedOutcome, SeedTask, explore, using
from harness.sim.spark import MAX_BATCH, batch_size, batches, shippable, task_error
from harness.spec import ConfigError, TestSpec

pytest_plugins = ("tests.harness.spark_fixtures",)


def spec(store: Path, **fields: object) -> TestSpec:
    return TestSpec(seed=0, db="cluster", platform="sim", store=str(store), **fields)  # type: ignore[arg-type]


# -- batching ------------------------------------------------------------------------------------------------


def test_batches_keep_every_seed_once_in_order() -> None:
    seeds = list(range(1, 104))
    for size in (1, 2, 7, 25, 103, 500):
        cut = batches(seeds, size)
        assert [s for batch in cut for s in batch] == seeds
        assert all(len(batch) == size for batch in cut[:-1])
        assert 1 <= len(cut[-1]) <= size
    assert batches([], 3) == []
    with pytest.raises(ValueError, match="at least one seed"):
        batches(seeds, 0)


def test_batch_size_gives_each_worker_several_tasks_and_is_capped() -> None:
    assert batch_size(2000, 2) == MAX_BATCH  # 250 a task would starve the progress and the balance
    assert batch_size(80, 2) == 10  # four batches per worker
    assert batch_size(5, 2) == 1
    assert batch_size(7, 64) == 1
    assert batch_size(0, 2) == 1
    for seeds in range(1, 300, 7):
        for workers in (1, 2, 3, 8):
            size = batch_size(seeds, workers)
            assert 1 <= size <= MAX_BATCH
            if size < MAX_BATCH:  # not capped: at least about four tasks per worker, never fewer than asked
                assert len(batches(list(range(seeds)), size)) <= max(1, 4 * workers)


def test_a_task_shipped_to_a_worker_names_absolute_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    task: SeedTask = (spec(Path("store"), time_limit=1.0), "store/.sim-scratch/x", False, None)
    shipped_spec, scratch, check, checkers = shippable(task)
    assert shipped_spec.store == str(tmp_path / "store")
    assert scratch == str(tmp_path / "store" / ".sim-scratch" / "x")
    assert (check, checkers) == (False, None)
    assert replace(shipped_spec, store="store") == task[0]  # nothing else changed


def test_a_failed_spark_job_is_told_by_its_python_error_in_one_line() -> None:
    trace = ("An error occurred while calling o42.collectAndServe.\n: org.apache.spark.SparkException: Job aborted\n"
             "Traceback (most recent call last):\n  File \"worker.py\", line 1, in main\n"
             "ModuleNotFoundError: No module named 'harness'\n\tat org.apache.spark.api.python...")
    assert task_error(RuntimeError(trace)) == "ModuleNotFoundError: No module named 'harness'"
    assert task_error(RuntimeError("the context was shut down\nmore")) == "the context was shut down"
    assert task_error(RuntimeError("")) == "RuntimeError"


# -- executors -----------------------------------------------------------------------------------------------


class Recording:
    """An executor that runs nothing: each seed is valid except those listed invalid."""

    def __init__(self, invalid: Sequence[int] = ()) -> None:
        self.invalid = set(invalid)
        self.seeds: list[int] = []
        self.closed = False

    @property
    def workers(self) -> int:
        return 3

    def outcomes(self, tasks: Sequence[SeedTask]) -> Iterator[SeedOutcome]:
        try:
            for task in tasks:
                seed = task[0].seed
                self.seeds.append(seed)
                yield SeedOutcome(seed, seed not in self.invalid, failed=("durability",) if seed in self.invalid else ())
        finally:
            self.closed = True


def test_explore_takes_the_installed_executor_and_stops_at_the_first_failure(tmp_path: Path) -> None:
    recording = Recording(invalid=(4, 6))
    with using(recording):
        found = explore(spec(tmp_path / "store"), range(1, 10))
    assert [o.seed for o in found.outcomes] == [1, 2, 3, 4]
    assert found.stopped_early and found.jobs == 3 and recording.closed
    assert [o.seed for o in found.invalid] == [4]
    assert found.exit_code == 1
    # The exploration's seeds, as far as it went, are a partition of the sim_seeds table.
    assert found.recorded is not None and found.recorded.exists()
    rows = dataset.read(tmp_path / "store", found.recorded.parent.name.split("=", 1)[1])
    assert [(r["seed"], r["verdict"], r["checker"]) for r in rows] == [
        (1, "true", None), (2, "true", None), (3, "true", None), (4, "false", "durability")]
    assert {r["executor"] for r in rows} == {"processes 3"} and {r["mode"] for r in rows} == {"blazingmq"}


def test_explore_keeps_going_and_an_explicit_jobs_count_wins_over_the_installed_executor(tmp_path: Path) -> None:
    recording = Recording(invalid=(2,))
    found = explore(spec(tmp_path / "store"), range(1, 6), keep_going=True, executor=recording)
    assert [o.seed for o in found.outcomes] == [1, 2, 3, 4, 5] and not found.stopped_early
    with using(Recording()) as unused:
        simulated = explore(spec(tmp_path / "store", time_limit=0.5), [1], jobs=1)
    assert unused.seeds == []  # jobs=1 ran the seed here, in a process pool of one
    assert simulated.outcomes[0].seed == 1 and simulated.outcomes[0].sim_seconds > 0


def test_a_process_pool_stops_at_the_first_failure_and_leaves_no_worker_behind(tmp_path: Path) -> None:
    # A seed's run turns SIGTERM into an interrupt (harness.signals): a pool that stopped its workers
    # with SIGTERM while one simulated waited for it for ever. Seeds 1 and 2 both fail in 5 s.
    bugged = spec(tmp_path / "store", time_limit=5.0, db_options={"bug": ["ack-before-commit"]})
    found = explore(bugged, range(1, 9), jobs=2)
    assert found.stopped_early and found.outcomes[-1].valid is False
    assert [o.seed for o in found.outcomes] == list(range(1, found.outcomes[-1].seed + 1))
    assert multiprocessing.active_children() == []
    everything = explore(spec(tmp_path / "store", time_limit=1.0), range(1, 4), jobs=2, keep_going=True)
    assert [o.seed for o in everything.outcomes] == [1, 2, 3] and all(o.sim_seconds > 0 for o in everything.outcomes)
    assert multiprocessing.active_children() == []


def test_a_process_pool_needs_a_worker() -> None:
    with pytest.raises(ConfigError, match="--jobs must be at least 1"):
        ProcessPool(0)


# -- the sim_seeds table ----------------------------------------------------------------------------------


def test_sim_seeds_rows_round_trip_through_parquet(tmp_path: Path) -> None:
    exploration = Exploration(spec(tmp_path, nemesis=("partition", "kill")), [1, 2, 3])
    exploration.outcomes = [
        SeedOutcome(1, True, sim_seconds=61.5, wall_seconds=0.4),
        SeedOutcome(2, False, failed=("durability", "linearizable"), sim_seconds=60.0, wall_seconds=0.5,
                    run_dir="/s/run", replay_command="harness run --seed 2"),
        SeedOutcome(3, UNKNOWN, unknown=("durability",), error="boom"),
    ]
    rows = dataset.rows(exploration, test="t", options={"mode": "raft", "bug": ["vote-twice", "lsn-reuse"]},
                        executor="spark local[2]")
    path = dataset.write(tmp_path, "20260101T000000-abc", rows)
    assert path == tmp_path / "dataset" / "sim_seeds" / "exploration=20260101T000000-abc" / "part-00000.parquet"
    back = dataset.read(tmp_path)
    assert [r["seed"] for r in back] == [1, 2, 3]
    assert [r["verdict"] for r in back] == ["true", "false", "unknown"]
    assert [r["checker"] for r in back] == [None, "durability,linearizable", "durability"]
    first = back[1]
    assert first["exploration"] == "20260101T000000-abc" and first["mode"] == "raft"
    assert first["bug"] == "lsn-reuse+vote-twice" and first["nemesis"] == "partition,kill"
    assert first["run"] == "/s/run" and first["sim_seconds"] == 60.0 and first["executor"] == "spark local[2]"
    bare = dataset.rows(exploration, test="t", options={}, executor="x")[0]
    assert (bare["bug"], bare["mode"]) == ("none", None)
    assert set(back[0]) == set(dataset.SIM_SEEDS)


# -- the command line --------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, says", [
    (["--seeds", "1..3", "--jobs", "2", "--spark-master", "local[2]"], "give one of them"),
    (["--seeds", "1..3", "--spark-batch", "2"], "with --spark-master"),
    (["--seed", "3", "--spark-master", "local[2]"], "runs many seeds"),
    (["--seeds", "1..3", "--spark-master", "nonsense://x"], "master"),
])
def test_bad_spark_arguments_are_one_line_and_254(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   argv: list[str], says: str) -> None:
    assert main(["simulate", *argv, "--store", str(tmp_path)]) == 254
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.spark
def test_seeds_on_spark_get_the_verdicts_they_get_in_processes(tmp_path: Path, spark: object,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # stale-read makes about half the seeds invalid in 10 s (6 of 1..12): both kinds are compared.
    common = ["simulate", "--seeds", "1..20", "--time-limit", "10", "--bug", "stale-read",
              "--keep-going", "--store"]
    on_spark = main([*common, str(tmp_path / "spark"), "--spark-master", "local[2]"])
    in_processes = main([*common, str(tmp_path / "processes"), "--jobs", "2"])
    out = capsys.readouterr().out
    assert "on spark local[2]" in out and "on processes 2" in out
    spark_rows = dataset.read(tmp_path / "spark")
    process_rows = dataset.read(tmp_path / "processes")
    assert [r["seed"] for r in spark_rows] == list(range(1, 21)) == [r["seed"] for r in process_rows]
    verdicts = [(r["seed"], r["verdict"], r["checker"]) for r in spark_rows]
    assert verdicts == [(r["seed"], r["verdict"], r["checker"]) for r in process_rows]
    assert {"true", "false"} <= {verdict for _, verdict, _ in verdicts}
    assert on_spark == in_processes == 1
    assert all(r["executor"] == "spark local[2]" for r in spark_rows)
    # Every invalid seed is stored by the Spark task that ran it, where the driver reads it.
    for row in spark_rows:
        if row["verdict"] == "false":
            assert (Path(row["run"]) / "history.jsonl").exists()
    assert not list((tmp_path / "spark").glob(".sim-scratch/*"))


@pytest.mark.spark
def test_the_detection_matrix_runs_its_explorations_on_spark(tmp_path: Path, spark: object,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    # lsn-reuse in raft is caught in the first seed or two (docs/simulation.md); the plugin's matrix calls
    # explore() without an executor and gets the Spark one (harness.sim.explore.using).
    code = main(["simulate", "--matrix", "--mode", "raft", "--bug", "lsn-reuse", "--rounds", "1", "--seeds", "1..4",
                 "--clean-seeds", "0", "--time-limit", "20", "--store", str(tmp_path), "--spark-master", "local[2]"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "lsn-reuse / raft round 0: lsn-monotonicity seed" in out
    rows = dataset.read(tmp_path)
    assert rows and {r["executor"] for r in rows} == {"spark local[2]"}
    assert {r["bug"] for r in rows} == {"lsn-reuse"} and {r["mode"] for r in rows} == {"raft"}
