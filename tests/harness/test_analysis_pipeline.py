"""The analysis pipeline on Spark, over small synthetic stored runs made in the test: a valid run, an
invalid one (a lost write), a malformed one (a truncated history) and one whose journal is damaged.

Checks: each run's verdict and ``results.json``; the malformed run is unknown with its file and line while
the others are still analysed; linearizability per key in Spark agrees with the checker run directly on
the whole history; the Parquet dataset holds exactly one copy of each run's rows, also after
re-analysis; what the controller wrote into ``results.json`` survives re-analysis.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePath

import pytest

from checkers.history import load_history, load_journals
from checkers.registry import CheckInput, run_checker
from checkers.verdict import UNKNOWN
from harness.analysis import dataset
from harness.analysis.discovery import find_runs
from harness.analysis.pipeline import Analysis, analyze, analyze_run
from tests.harness.synthetic_runs import write_run

pytest_plugins = ("tests.harness.spark_fixtures",)
pytestmark = pytest.mark.spark

VALID, INVALID, MALFORMED, DAMAGED = "20261120T020000", "20261121T020000", "20261122T020000", "20261123T020000"


@pytest.fixture(scope="module")
def batch(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Analysis]:  # noqa: ANN001
    store = tmp_path_factory.mktemp("store")
    write_run(store, "reg", VALID, seed=1, ops=300, keys=4)
    write_run(store, "reg", INVALID, seed=2, ops=300, keys=4, lost_write=True)
    write_run(store, "reg", MALFORMED, seed=3, truncate=True)
    damaged = write_run(store, "other", DAMAGED, seed=4)
    journal = damaged / "nodes" / "n2" / "journal.jsonl"
    lines = journal.read_text(encoding="utf-8").splitlines()
    lines[5] = '{"node": "n2", "seq": 5, "wall": 1.0, "event": "apply"}'  # an apply without lsn, key, op
    journal.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return store, analyze(spark, find_runs([store]))


def outcome(analysis: Analysis, store: Path, test: str, run: str):  # noqa: ANN201
    return analysis.outcome(store / test / run)


def test_each_run_gets_its_verdict(batch: tuple[Path, Analysis]) -> None:
    store, analysis = batch
    assert outcome(analysis, store, "reg", VALID).valid is True
    assert outcome(analysis, store, "reg", INVALID).valid is False
    assert outcome(analysis, store, "reg", MALFORMED).valid == UNKNOWN
    assert outcome(analysis, store, "other", DAMAGED).valid == UNKNOWN
    assert analysis.exit_code == 1


def test_results_json_has_the_formats_shape(batch: tuple[Path, Analysis]) -> None:
    store, _ = batch
    results = json.loads((store / "reg" / VALID / "results.json").read_text(encoding="utf-8"))
    assert results["valid"] is True and results["seed"] == 1 and results["test"] == "reg"
    assert results["ops"] == 300 + 4  # the workload's operations and the final reads
    assert results["duration_s"] > 0
    assert list(results["checkers"]) == ["linearizable", "single-leader-per-term", "lsn-monotonicity", "durability"]
    for entry in results["checkers"].values():
        assert entry["valid"] is True and entry["summary"]
        assert set(entry) == {"valid", "summary", "counterexample", "stats"}
    assert results["checkers"]["linearizable"]["stats"]["keys"] == 4
    assert results["performance"]["ops_per_s"] > 0 and results["performance"]["latency_p99_ms"] > 0


def test_a_lost_write_is_invalid_with_the_checkers_that_saw_it(batch: tuple[Path, Analysis]) -> None:
    store, analysis = batch
    failed = outcome(analysis, store, "reg", INVALID).failed_checkers()
    assert "durability" in failed and "lost" in failed["durability"]
    assert "linearizable" in failed and "k0" in failed["linearizable"]
    results = json.loads((store / "reg" / INVALID / "results.json").read_text(encoding="utf-8"))
    assert results["valid"] is False
    assert results["checkers"]["linearizable"]["counterexample"]["key"] == "k0"


def test_a_truncated_history_is_unknown_with_its_file_and_line(batch: tuple[Path, Analysis]) -> None:
    store, _ = batch
    run = store / "reg" / MALFORMED
    last_line = len((run / "history.jsonl").read_text(encoding="utf-8").splitlines())
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert results["valid"] == "unknown"
    assert results["input_errors"] == [{"file": "history.jsonl", "line": last_line, "reason": results["input_errors"][0]["reason"]}]
    assert "bad JSON" in results["input_errors"][0]["reason"]
    for name, entry in results["checkers"].items():
        assert entry["valid"] == "unknown", name
        assert f"history.jsonl:{last_line}" in entry["summary"], name


def test_a_damaged_journal_makes_the_journal_checkers_unknown_but_not_linearizability(
    batch: tuple[Path, Analysis],
) -> None:
    store, _ = batch
    results = json.loads((store / "other" / DAMAGED / "results.json").read_text(encoding="utf-8"))
    assert results["input_errors"][0]["file"] == "nodes/n2/journal.jsonl"
    assert results["input_errors"][0]["line"] == 6
    assert results["checkers"]["linearizable"]["valid"] is True
    for name in ("single-leader-per-term", "lsn-monotonicity", "durability"):
        assert results["checkers"][name]["valid"] == "unknown", name
        assert "nodes/n2/journal.jsonl:6" in results["checkers"][name]["summary"]


@pytest.mark.parametrize("run", [VALID, INVALID])
def test_linearizability_per_key_in_spark_agrees_with_the_checker_on_the_whole_history(
    batch: tuple[Path, Analysis], run: str
) -> None:
    store, analysis = batch
    run_dir = store / "reg" / run
    direct = run_checker(
        "linearizable", CheckInput(history=load_history(run_dir / "history.jsonl"), model="cas-register")
    )
    spark_verdict = outcome(analysis, store, "reg", run).results["checkers"]["linearizable"]
    assert spark_verdict["valid"] == direct.valid
    assert spark_verdict["stats"]["ops"] == direct.stats["ops"]
    if direct.valid is False:
        assert spark_verdict["counterexample"]["key"] == direct.counterexample["key"]
        assert spark_verdict["counterexample"]["blocked"] == direct.counterexample["blocked"]


def test_run_level_checkers_in_spark_agree_with_the_registry(batch: tuple[Path, Analysis]) -> None:
    store, analysis = batch
    run_dir = store / "reg" / INVALID
    inp = CheckInput(
        history=load_history(run_dir / "history.jsonl"), model="cas-register", journals=load_journals(run_dir)
    )
    results = outcome(analysis, store, "reg", INVALID).results
    for name in ("single-leader-per-term", "lsn-monotonicity", "durability"):
        direct = run_checker(name, inp)
        assert results["checkers"][name]["valid"] == direct.valid, name
        assert results["checkers"][name]["summary"] == direct.summary, name


def table_counts(spark, store: Path, table: str) -> dict[tuple[str, str], int]:  # noqa: ANN001
    frame = dataset.read_table(spark, store, table)
    if frame is None:
        return {}
    return {(r["test"], r["run"]): r["count"] for r in frame.groupBy("test", "run").count().collect()}


def test_the_dataset_holds_each_runs_rows_once_also_after_reanalysis(spark, batch: tuple[Path, Analysis]) -> None:  # noqa: ANN001
    store, _ = batch
    history = load_history(store / "reg" / VALID / "history.jsonl")
    journal_events = sum(len(v) for v in load_journals(store / "reg" / VALID).values())
    before = {t: table_counts(spark, store, t) for t in dataset.TABLES}
    assert before["operations"][("reg", VALID)] == len(history.ops) + len(history.nemesis)
    assert before["journal"][("reg", VALID)] == journal_events
    assert before["runs"] == {key: 1 for key in before["runs"]} and len(before["runs"]) == 4
    assert before["verdicts"][("reg", VALID)] == 4
    assert ("reg", MALFORMED) not in before["operations"]  # nothing readable, nothing stored

    # re-analyse one run, then the whole store: same rows, no duplicates
    analyze(spark, find_runs([store / "reg" / VALID]))
    assert {t: table_counts(spark, store, t) for t in dataset.TABLES} == before
    analyze(spark, find_runs([store]))
    assert {t: table_counts(spark, store, t) for t in dataset.TABLES} == before


def test_the_dataset_rows_carry_the_history(spark, batch: tuple[Path, Analysis]) -> None:  # noqa: ANN001
    store, _ = batch
    frame = dataset.read_table(spark, store, "operations")
    assert frame is not None
    rows = frame.where(f"test = 'reg' and run = '{INVALID}' and process != 'nemesis'").orderBy("id").collect()
    history = load_history(store / "reg" / INVALID / "history.jsonl")
    assert len(rows) == len(history.ops)
    for row, op in zip(rows[:50], history.ops[:50], strict=True):
        assert (row["id"], row["f"], row["key"], row["type"], row["call_ns"], row["ret_ns"]) == (
            op.id, op.f, op.key, op.type, op.call, op.ret,
        )
        assert json.loads(row["value_json"]) == op.value if row["value_json"] else op.value is None
    runs = dataset.read_table(spark, store, "runs")
    assert runs is not None
    by_run = {r["run"]: r for r in runs.collect()}
    assert by_run[INVALID]["valid"] == "false" and by_run[VALID]["valid"] == "true"
    assert by_run[MALFORMED]["valid"] == "unknown"
    assert by_run[VALID]["mode"] == "raft" and by_run[VALID]["nemesis"] == "partition"
    assert by_run[VALID]["bugs"] == "none" and by_run[VALID]["night"] == "2026-11-20"


def test_reanalysis_keeps_what_the_controller_recorded(spark, tmp_path: Path) -> None:  # noqa: ANN001
    run = write_run(tmp_path, "reg", VALID, seed=9)
    (run / "results.json").write_text(
        json.dumps({"valid": "unknown", "error": "interrupted (Ctrl-C)", "stats": {"faults_scheduled": {"kill": 2}}}),
        encoding="utf-8",
    )
    result = analyze_run(run, spark=spark)
    assert result.valid == UNKNOWN  # every checker passes, but the run was cut short
    assert all(entry["valid"] is True for entry in result.results["checkers"].values())
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert results["error"] == "interrupted (Ctrl-C)"
    assert results["stats"] == {"faults_scheduled": {"kill": 2}}


def test_a_removed_history_replaces_the_runs_old_rows(spark, tmp_path: Path) -> None:  # noqa: ANN001
    run = write_run(tmp_path, "reg", VALID, seed=5)
    analyze_run(run, spark=spark)
    assert table_counts(spark, tmp_path, "operations")[("reg", VALID)] > 0
    (run / "history.jsonl").write_text('{"index": 0', encoding="utf-8")
    assert analyze_run(run, spark=spark).valid == UNKNOWN
    assert ("reg", VALID) not in table_counts(spark, tmp_path, "operations")


def test_analysis_writes_each_runs_report_and_the_store_index(batch: tuple[Path, Analysis]) -> None:
    store, _ = batch
    report = (store / "reg" / INVALID / "report.html").read_text(encoding="utf-8")
    assert "INVALID" in report.upper() and "durability" in report
    index = (store / "index.html").read_text(encoding="utf-8")
    assert INVALID in index and VALID in index


def test_big_runs_read_by_two_tasks_give_what_one_task_gives(spark, batch: tuple[Path, Analysis], tmp_path: Path) -> None:  # noqa: ANN001
    """Every history counts as big here (``split_from_bytes=1``): each run's linearizability and operations
    come from the second task, and the verdicts and the dataset are those of the one-task analysis."""
    from harness.analysis.pipeline import AnalysisOptions

    store, analysis = batch
    copy = tmp_path / "store"
    for run in (VALID, INVALID):
        write_run(copy, "reg", run, seed={VALID: 1, INVALID: 2}[run], ops=300, keys=4, lost_write=run == INVALID)
    split = analyze(spark, find_runs([copy]), AnalysisOptions(split_from_bytes=1, write_reports=False))
    for run in (VALID, INVALID):
        mine = outcome(split, copy, "reg", run).results["checkers"]
        theirs = outcome(analysis, store, "reg", run).results["checkers"]
        assert {n: (v["valid"], v["summary"]) for n, v in mine.items()} == {
            n: (v["valid"], v["summary"]) for n, v in theirs.items()
        }
    for table in dataset.TABLES:
        counts = table_counts(spark, copy, table)
        assert counts == {k: v for k, v in table_counts(spark, store, table).items() if k in counts}, table
        assert set(counts) == {("reg", VALID), ("reg", INVALID)}, table


def test_checkers_a_system_cannot_feed_are_not_applicable_on_spark_too(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """A stand-in run (``harness new-db``'s kind: no terms, no LSNs declared) is valid on Spark, as the
    direct judge finds it, with the two checkers listed as not applicable rather than unknown."""
    run = write_run(tmp_path, "standin", VALID, ops=120, keys=3, standin=True)
    outcome = analyze_run(run, spark=spark)
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert outcome.valid is True and results["valid"] is True
    assert set(results["checkers"]) == {"linearizable", "durability"}
    assert set(results["not_applicable"]) == {"single-leader-per-term", "lsn-monotonicity"}


def test_each_pack_is_a_partition_of_its_own_and_the_sessions_settings_come_back(
    spark, batch: tuple[Path, Analysis]  # noqa: ANN001
) -> None:
    """Spark 4.1+ zips a union of one-partition inputs into one partition (the whole analysis then ran as
    one task); under the analysis's settings each pack stays a partition, and the session's own value of
    the setting is back afterwards. Files the tasks read themselves (a local store) and files through
    Spark's ``binaryFile`` reader (any other store) reach them alike. The tasks report their CPU by phase."""
    from harness.analysis.discovery import run_files
    from harness.analysis.ingest import PHASES
    from harness.analysis.pipeline import ANALYSIS_SQL_CONF, _read, _sql_conf
    from harness.analysis.storage import LocalStorage

    class Elsewhere(LocalStorage):  # as HDFS or object storage looks: nothing on this machine's filesystem
        def local(self, path: PurePath) -> None:
            return None

    def each(batches):  # noqa: ANN001, ANN202 - a task that hands its files back as it got them
        yield from batches

    store, analysis = batch
    selection = find_runs([store])
    packs = [[path for path, _size in run_files(selection.storage, run)] for run in selection.runs]
    key = "spark.sql.unionOutputPartitioning"
    spark.conf.set(key, "true")
    try:
        read = {}
        with _sql_conf(spark, ANALYSIS_SQL_CONF):
            for storage in (selection.storage, Elsewhere()):
                frame = _read(spark, storage, packs, each, "path string, content binary")
                assert frame.rdd.getNumPartitions() == len(packs) == 4
                read[type(storage)] = sorted((row.path.removeprefix("file:").lstrip("/"), row.content)
                                             for row in frame.collect())
        assert read[LocalStorage] == read[Elsewhere] and len(read[LocalStorage]) == sum(map(len, packs))
        assert spark.conf.get(key) == "true"
    finally:
        spark.conf.unset(key)
    assert set(analysis.task_cpu_s) == set(PHASES) and analysis.task_cpu_s["parse_s"] > 0
