"""The analysis pipeline's parts that need no Spark: the session's configuration and master checks,
finding runs, reading one run into rows, folding per-key verdicts, and the commands' bad-input answers.
"""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.history import NEMESIS, HistoryError, Operation
from checkers.verdict import UNKNOWN, Verdict, combine
from harness.analysis.checks import (
    distrust,
    infer_model,
    merge_linearizability,
    results_document,
    run_params,
    verdict_row,
)
from harness.analysis.cli import main as analysis_main
from harness.analysis.discovery import SUITE_JSON, DiscoveryError, find_runs
from harness.analysis.ingest import read_run
from harness.analysis.spark import (
    SparkUnavailable,
    check_master_reachable,
    driver_memory,
    is_local,
    master_endpoints,
    resolve_master,
    session_conf,
)
from harness.analysis.summary import failing_since
from harness.judge import observed_not_applicable
from tests.harness.synthetic_runs import STANDIN_NO_LSN, write_run

# --- the Spark session ----------------------------------------------------------------------------


def test_master_comes_from_the_option_then_the_environment_then_local() -> None:
    assert resolve_master("local[2]", {"SPARK_MASTER": "spark://h:7077"}) == "local[2]"
    assert resolve_master(None, {"SPARK_MASTER": "spark://h:7077"}) == "spark://h:7077"
    assert resolve_master(None, {}) == "local[*]"


@pytest.mark.parametrize(
    ("master", "endpoints"),
    [
        ("local", []),
        ("local[4]", []),
        ("local[*]", []),
        ("yarn", []),
        ("spark://a:7077", [("a", 7077)]),
        ("spark://a:7077,b:7078", [("a", 7077), ("b", 7078)]),
        ("k8s://https://api.example:6443", [("api.example", 6443)]),
    ],
)
def test_master_endpoints(master: str, endpoints: list[tuple[str, int]]) -> None:
    assert master_endpoints(master) == endpoints


@pytest.mark.parametrize("master", ["spark://nohostport", "mesos-ish://x", "locale[2]", ""])
def test_a_master_spark_would_not_accept_is_one_sentence(master: str) -> None:
    with pytest.raises(SparkUnavailable) as caught:
        master_endpoints(master)
    assert "--spark-master" in str(caught.value) and "\n" not in str(caught.value)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_master_is_reported_at_once() -> None:
    port = closed_port()
    with pytest.raises(SparkUnavailable, match=f"spark://127.0.0.1:{port} is unreachable"):
        check_master_reachable(f"spark://127.0.0.1:{port}", timeout_s=2.0)


def test_a_reachable_master_passes_the_check() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        check_master_reachable(f"spark://127.0.0.1:{server.getsockname()[1]}", timeout_s=2.0)


def test_local_sessions_are_quiet_small_and_run_this_interpreter() -> None:
    import sys

    conf = session_conf("local[2]", {"spark.driver.memory": "3g"})
    assert conf["spark.ui.enabled"] == "false" and conf["spark.ui.showConsoleProgress"] == "false"
    assert conf["spark.sql.shuffle.partitions"] == "4"
    assert conf["spark.pyspark.python"] == sys.executable
    assert conf["spark.driver.memory"] == "3g"  # --spark-conf wins
    assert conf["spark.sql.sources.partitionOverwriteMode"] == "dynamic"
    assert conf["spark.driver.extraJavaOptions"].startswith("-XX:TieredStopAtLevel=1 ")  # local: C1 only
    log4j = conf["spark.driver.extraJavaOptions"].split("file:", 1)[1]
    assert "rootLogger.level = error" in Path(log4j).read_text(encoding="utf-8")
    assert "spark.pyspark.python" not in session_conf("spark://h:7077")  # a cluster keeps its own Python
    assert is_local("local[*]") and not is_local("spark://h:7077")


@pytest.mark.parametrize(("gib", "expected"), [(2, "1g"), (8, "2g"), (24, "4g"), (512, "4g")])
def test_driver_memory_is_a_quarter_of_the_machine_within_bounds(gib: int, expected: str) -> None:
    assert driver_memory(gib << 30) == expected


# --- finding runs ---------------------------------------------------------------------------------


def test_runs_are_found_in_a_store_a_run_and_a_suite(tmp_path: Path) -> None:
    store = tmp_path / "store"
    a = write_run(store, "reg", "20261120T020000", ops=10)
    b = write_run(store, "queue", "20261121T020000", ops=10)
    (store / "latest").symlink_to("queue/20261121T020000")
    (store / "dataset" / "runs").mkdir(parents=True)
    suite = store / "suites" / "nightly" / "20261120T235500"
    suite.mkdir(parents=True)
    (suite / SUITE_JSON).write_text(
        json.dumps({"name": "nightly", "started": "20261120T235500", "runs": [{"path": "reg/20261120T020000"}, {"path": None}]}),
        encoding="utf-8",
    )
    whole = find_runs([store])
    assert [r.path for r in whole.runs] == [b.resolve(), a.resolve()]  # (test, run) order, each once
    assert whole.store == store.resolve()
    by_test = {r.test: r for r in whole.runs}
    assert (by_test["reg"].suite, by_test["reg"].night) == ("nightly", "2026-11-20")  # the suite's night
    assert by_test["queue"].suite is None and by_test["queue"].night_or_date() == "2026-11-21"
    assert [r.path for r in find_runs([store / "latest"]).runs] == [b.resolve()]
    assert [r.path for r in find_runs([suite]).runs] == [a.resolve()]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda root: root / "missing", "no such directory"),
        (lambda root: root, "holds no stored run"),
    ],
)
def test_paths_without_runs_are_one_sentence(tmp_path: Path, make, message: str) -> None:  # noqa: ANN001
    with pytest.raises(DiscoveryError, match=message):
        find_runs([make(tmp_path)])


def test_runs_of_two_stores_need_one_store_named(tmp_path: Path) -> None:
    a = write_run(tmp_path / "one", "reg", "20261120T020000", ops=10)
    b = write_run(tmp_path / "two", "reg", "20261120T020000", ops=10)
    with pytest.raises(DiscoveryError, match="more than one store"):
        find_runs([a, b])
    assert find_runs([a, b], store=tmp_path / "one").store == (tmp_path / "one").resolve()


# --- one run into rows, without Spark ---------------------------------------------------------------


def test_read_run_parses_checks_and_counts_a_run(tmp_path: Path) -> None:
    run = write_run(tmp_path, "reg", "20261120T020000", ops=120, keys=3, seed=4)
    records = read_run(run, "reg", "20261120T020000", night="2026-11-20")
    assert records.input_errors == []
    assert records.checks.pending == []  # a small run: linearizability checked in the same task
    assert set(records.checks.verdicts) == {"linearizable", "single-leader-per-term", "lsn-monotonicity", "durability"}
    assert all(v.valid is True for v in records.checks.verdicts.values())
    row = records.run
    assert (row["ops"], row["nemesis_ops"], row["mode"], row["nemesis"], row["bugs"], row["model"]) == (
        123, 2, "raft", "partition", "none", "cas-register",
    )
    assert row["ok_ops"] == 123 and row["ops_per_s"] > 0 and row["latency_p50_ms"] <= row["latency_p99_ms"]
    assert records.operations.num_rows == 123 + 2
    operations, journal = records.operations.to_pydict(), records.journal.to_pydict()
    assert journal["event"].count("apply") == 3 * operations["f"].count("write")


def test_a_run_with_the_clusters_full_journals_is_valid_and_journals_three_events_a_write(tmp_path: Path) -> None:
    run = write_run(tmp_path, "reg", "20261120T020000", ops=120, keys=3, seed=4, journals="full")
    records = read_run(run, "reg", "20261120T020000")
    assert records.input_errors == []
    assert {name: v.valid for name, v in records.checks.verdicts.items()} == dict.fromkeys(
        ("linearizable", "single-leader-per-term", "lsn-monotonicity", "durability"), True
    )
    writes = records.operations.column("f").to_pylist().count("write")
    journal = records.journal.to_pydict()
    events = journal["event"]
    assert [events.count(kind) for kind in ("append", "commit", "apply")] == [3 * writes] * 3
    # each write's events on a node, in the cluster node's order, at the same log index and LSN
    applied = [i for i, kind in enumerate(events) if kind == "apply"]
    assert all(events[i - 2 : i] == ["append", "commit"] for i in applied)
    lsn = list(zip(journal["lsn_term"], journal["lsn_seq"], strict=True))
    assert all(lsn[i - 1] == lsn[i] for i in applied)
    with pytest.raises(ValueError, match="journals must be one of applies, full"):
        write_run(tmp_path, "reg", "20261120T030000", journals="some")


def test_read_run_names_a_missing_history(tmp_path: Path) -> None:
    run = write_run(tmp_path, "reg", "20261120T020000", ops=10)
    (run / "history.jsonl").unlink()
    records = read_run(run, "reg", "20261120T020000")
    assert [e.describe() for e in records.input_errors] == ["history.jsonl: no such file"]
    assert {v.valid for v in records.checks.verdicts.values()} == {UNKNOWN}
    assert records.operations is None


@pytest.mark.parametrize(
    "variant", [{}, {"lost_write": True}, {"standin": True}, {"standin": True, "lost_write": True}, {"truncate": True}]
)
def test_a_run_is_judged_by_the_direct_judges_rules(tmp_path: Path, variant: dict) -> None:
    """The pipeline's verdicts and ``not_applicable`` agree with ``python -m checkers check``'s judge
    (``checkers.judge.judge_files``) given the same checkers not applicable: a checker the adapter declares
    not applicable, or that the run shows cannot apply (no terms), is listed with its reason and leaves
    the verdict to the others, instead of making it unknown."""
    from checkers.judge import judge_files

    run = write_run(tmp_path / "a", "reg", "20261120T020000", ops=120, keys=3, **variant)
    records = read_run(run, "reg", run.name)
    spark_like = results_document(records.run, records.checks.verdicts, [e.to_json() for e in records.input_errors], {})
    spec = json.loads((run / "test.json").read_text(encoding="utf-8"))
    declared = spec.get("not_applicable", {})
    try:
        judgement = judge_files(
            run / "history.jsonl", model=spec["model"], checkers=spec["checkers"], missing="unknown",
            journals=run / "nodes" if any((run / "nodes").glob("*/journal.jsonl")) else None,
            skip=lambda history, journals: {**observed_not_applicable(history, journals), **declared})
        direct = {"valid": combine(judgement.verdicts) if judgement.verdicts else UNKNOWN,
                  "checkers": {n: v.to_json() for n, v in judgement.verdicts.items()},
                  **({"not_applicable": dict(judgement.skipped)} if judgement.skipped else {})}
    except HistoryError:  # the CLI refuses the file: every checker unknown, as the pipeline says
        direct = {"valid": UNKNOWN, "checkers": {n: {"valid": UNKNOWN} for n in spec["checkers"] if n not in declared}}
    assert spark_like["valid"] == direct["valid"]
    assert {n: c["valid"] for n, c in spark_like["checkers"].items()} == {
        n: c["valid"] for n, c in direct["checkers"].items()
    }
    assert spark_like.get("not_applicable") == direct.get("not_applicable")
    if variant.get("standin"):
        assert spark_like["valid"] is not UNKNOWN and spark_like["valid"] == (not variant.get("lost_write"))
        assert spark_like["not_applicable"]["lsn-monotonicity"] == STANDIN_NO_LSN
        assert "no election terms" in spark_like["not_applicable"]["single-leader-per-term"]


def test_a_big_runs_second_task_does_nothing_when_linearizability_is_declared_not_applicable(tmp_path: Path) -> None:
    from harness.analysis import ingest

    run = write_run(tmp_path, "reg", "20261120T020000", ops=60, keys=2)
    spec = json.loads((run / "test.json").read_text(encoding="utf-8"))
    spec["not_applicable"] = {"linearizable": "the system keeps no registers"}
    (run / "test.json").write_text(json.dumps(spec), encoding="utf-8")
    rows = [r for b in ingest.linearizability_task_of()(iter(_group(run))) for r in b.to_pylist()]
    assert [r["kind"] for r in rows] == ["phases"]  # no verdict, and the operations are the first task's
    assert set(json.loads(rows[-1]["text"])) <= set(ingest.PHASES)
    first = read_run(run, "reg", run.name)
    assert "linearizable" not in first.checks.verdicts and first.checks.pending == []
    assert first.operations.num_rows > 0
    assert first.run["not_applicable"] == {"linearizable": "the system keeps no registers"}


def operation_from_row(row: dict) -> Operation:
    """An ``operations`` row of the dataset back into the :class:`Operation` the checkers take."""
    process = row["process"] if row["process"] == NEMESIS else int(row["process"])
    lsn = (row["lsn_term"], row["lsn_seq"]) if row.get("lsn_term") is not None else None

    def load(text: str | None) -> object:
        return None if text is None else json.loads(text)

    return Operation(
        id=row["id"], process=process, f=row["f"], key=load(row["key_json"]), value=load(row["value_json"]),
        output=load(row["output_json"]), type=row["type"], call=row["call_ns"], ret=row["ret_ns"],
        invoke_index=row["invoke_index"], complete_index=row["complete_index"], node=row["node"], lsn=lsn,
        error=row["error"],
    )


def test_operation_rows_round_trip(tmp_path: Path) -> None:
    from checkers.history import load_history

    run = write_run(tmp_path, "reg", "20261120T020000", ops=40, history_values={"k9": [1, {"a": None}]})
    records = read_run(run, "reg", "20261120T020000")
    history = load_history(run / "history.jsonl")
    rows = records.operations.to_pylist()
    rebuilt = [operation_from_row(r) for r in rows[: len(history.ops)]]
    assert rebuilt == list(history.ops)


def _operations_outcome(make) -> object:  # noqa: ANN001
    try:
        return make()
    except (pa.ArrowException, OverflowError) as exc:  # e.g. a time past a Parquet long's range
        return type(exc).__name__


_VALUES = st.sampled_from([None, 0, 7, -1, 2**63 - 1, 2**70, 1.5, True, "", "v", [1, 2], [None, 3], {"x": 1}])


@st.composite
def valid_histories(draw: st.DrawFn) -> list[str]:
    """Well-formed histories of a few client processes and the nemesis: operations left outstanding,
    info completions (the client goes on under a new process), keys and values of every JSON type, nodes,
    LSNs and errors on some lines, now and then a time that goes backwards or is past 2^63."""
    lines: list[str] = []
    outstanding: dict[int | str, tuple[str, object]] = {}
    processes: list[int | str] = [0, 1, 2, NEMESIS]
    for index in range(draw(st.integers(1, 14))):
        slot = draw(st.integers(0, len(processes) - 1))
        process = processes[slot]
        event: dict[str, object] = {"process": process}
        event["time"] = draw(st.sampled_from([index * 3] * 8 + [max(0, index * 3 - 4), 2**63 + index]))
        if process in outstanding and draw(st.booleans()):
            event["f"], event["key"] = outstanding.pop(process)
            event["type"] = kind = draw(st.sampled_from(["ok", "ok", "fail", "info"]))
            if kind == "info" and process != NEMESIS:
                processes[slot] = max(p for p in processes if p != NEMESIS) + 1  # type: ignore[type-var]
        elif process not in outstanding:
            event["f"] = draw(st.sampled_from(["read", "write", "cas", "status"]))
            event["key"] = draw(st.sampled_from(["k", "k", "j", 1, [1], None]))
            event["type"] = "invoke"
            outstanding[process] = (event["f"], event["key"])
        else:
            continue
        event["value"] = draw(_VALUES)
        if not draw(st.integers(0, 2)):
            event["node"] = draw(st.sampled_from(["n1", "n2"]))
        if event["type"] != "invoke" and not draw(st.integers(0, 2)):
            event["lsn"] = draw(st.sampled_from([[1, 2], [3, 4]]))
        if not draw(st.integers(0, 5)):
            event["error"] = draw(st.sampled_from(["timeout", "refused"]))
        event["index"] = len(lines)
        lines.append(json.dumps(event))
    return lines


@settings(max_examples=300, deadline=None)
@given(valid_histories())
def test_the_operations_rows_from_the_tables_columns_are_those_of_its_operations(lines: list[str]) -> None:
    """``operations_table`` builds the client operations' rows from the history's columns; they are the
    rows the :class:`Operation` objects give, field by field, whatever the history holds (outstanding and
    info operations, times that go backwards or past 2^63, keys and values of any JSON type, nodes, LSNs
    and errors on some lines)."""
    from checkers.history import parse_operations
    from harness.analysis.dataset import OPERATIONS, arrow_table
    from harness.analysis.ingest import _empty, _operation_columns, operations_table

    table = parse_operations(lines, "h.jsonl")
    history = table.history()

    def from_objects() -> pa.Table:
        columns = _empty(OPERATIONS)
        _operation_columns([*history.ops, *history.nemesis], columns)
        return arrow_table("operations", columns)

    expected, made = _operations_outcome(from_objects), _operations_outcome(lambda: operations_table(table, history))
    if isinstance(expected, pa.Table):
        assert isinstance(made, pa.Table) and made.equals(expected)
    else:  # both refuse it alike
        assert made == expected


def test_a_runs_table_files_read_back_as_written_dictionary_encoded_where_declared(tmp_path: Path) -> None:
    import io

    import pyarrow.parquet as pq

    from harness.analysis.dataset import DICTIONARY_COLUMNS, TABLES, parquet_bytes

    run = write_run(tmp_path, "reg", "20261120T020000", ops=40, history_values={"k9": [1, {"a": None}]})
    records = read_run(run, "reg", "20261120T020000")
    for table, columns in (("operations", records.operations), ("journal", records.journal)):
        assert set(DICTIONARY_COLUMNS.get(table, [])) <= set(TABLES[table])
        data = parquet_bytes(table, columns)
        assert pq.read_table(io.BytesIO(data)).equals(columns)
        chunks = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0)
        dictionary = {chunks.column(i).path_in_schema for i in range(chunks.num_columns)
                      if chunks.column(i).has_dictionary_page}  # fmt: skip
        declared = DICTIONARY_COLUMNS.get(table)
        assert dictionary == (set(declared) if declared is not None else set(columns.column_names))


# --- verdicts ---------------------------------------------------------------------------------------


def key_row(first_id: int, verdict: Verdict) -> dict:
    return {**verdict_row("t", "r", "linearizable", verdict), "first_id": first_id, "key_json": json.dumps(first_id)}


def test_per_key_verdicts_fold_into_the_worst_reporting_the_earliest_key() -> None:
    ok = Verdict(True, "linearizable: 5 operations on 1 keys", stats={"ops": 5, "states": 7, "time_s": 0.1})
    bad_late = Verdict(False, "not linearizable: key b", counterexample={"key": "b"}, stats={"ops": 4})
    bad_early = Verdict(False, "not linearizable: key a", counterexample={"key": "a"}, stats={"ops": 3})
    merged = merge_linearizability("cas-register", [key_row(9, bad_late), key_row(0, ok), key_row(2, bad_early)])
    assert merged.valid is False
    assert merged.summary == "not linearizable: key a (2 of 3 keys not linearizable)"
    assert merged.counterexample == {"key": "a"}
    assert merged.stats["ops"] == 12 and merged.stats["keys"] == 3
    undecided = merge_linearizability("cas-register", [key_row(0, ok), key_row(1, Verdict(UNKNOWN, "timed out"))])
    assert undecided.valid == UNKNOWN and undecided.summary == "timed out"
    fine = merge_linearizability("cas-register", [key_row(0, ok), key_row(1, ok)])
    assert fine.valid is True and fine.summary == "linearizable: 10 operations on 2 keys (cas-register model)"


def test_partial_input_never_passes_but_an_anomaly_stands() -> None:
    passed = distrust(Verdict(True, "one leader per term"), ["nodes/n2/journal.jsonl:6: bad JSON"])
    assert passed.valid == UNKNOWN and passed.summary.startswith("cannot decide: nodes/n2/journal.jsonl:6")
    failed = Verdict(False, "term 3 has 2 leaders")
    assert distrust(failed, ["nodes/n2/journal.jsonl:6: bad JSON"]) is failed


def test_run_params_read_the_controllers_test_json() -> None:
    spec = {"mode": "raft", "workload": "queue", "nemesis": ["partition", "kill"], "bugs": ["no-dedup"],
            "model": "queue", "checkers": ["linearizable", "durability"], "command": "harness run --seed 3"}
    params = run_params(spec, None)
    assert (params.mode, params.workload, params.nemesis, params.bugs, params.model) == (
        "raft", "queue", "partition+kill", "no-dedup", "queue",
    )
    assert params.checkers == ("linearizable", "durability") and params.command == "harness run --seed 3"
    assert run_params({"nemesis": []}, None).nemesis == "none"
    assert infer_model(None) is None


# --- summary ----------------------------------------------------------------------------------------


def test_failing_since_is_the_first_night_of_the_current_streak() -> None:
    nights = ["2026-11-18", "2026-11-19", "2026-11-20", "2026-11-21"]
    failed = {
        "durability": {"2026-11-18", "2026-11-20", "2026-11-21"},  # broken streak: since the 20th
        "linearizable": {"2026-11-19"},  # not failing any more
        "lsn-monotonicity": set(nights),
    }
    assert failing_since(nights, failed) == {"durability": "2026-11-20", "lsn-monotonicity": "2026-11-18"}
    assert failing_since([], failed) == {}


# --- the commands' bad input, before any Spark starts --------------------------------------------------


def test_analyze_with_an_unreachable_master_is_one_sentence_and_254(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path, "reg", "20261120T020000", ops=10)
    port = closed_port()
    assert analysis_main(["analyze", str(run), "--spark-master", f"spark://127.0.0.1:{port}", "--quiet"]) == 254
    err = capsys.readouterr().err.strip()
    assert err.startswith("harness analyze: the Spark master") and "\n" not in err


def test_analyze_of_a_store_without_runs_is_one_sentence_and_254(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "store").mkdir()
    assert analysis_main(["analyze", str(tmp_path / "store")]) == 254
    assert "holds no stored run" in capsys.readouterr().err
    assert analysis_main(["analyze"]) == 254
    assert "name what to analyse" in capsys.readouterr().err
    assert analysis_main(["analyze", str(tmp_path), "--spark-conf", "nonsense"]) == 254


def _group(run: Path) -> list[pa.RecordBatch]:
    """A run's files as the ingestion task receives them from Spark's binaryFile reader."""
    rows = [{"path": f"file:{path}", "content": path.read_bytes()} for path in sorted(run.rglob("*.json*"))]
    return [pa.RecordBatch.from_pylist(rows)]


def test_the_ingestion_task_turns_a_crash_into_an_unknown_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.analysis import ingest

    good = write_run(tmp_path, "reg", "20261120T020000", ops=20)
    bad = write_run(tmp_path, "reg", "20261121T020000", ops=20)
    real = ingest.read_run_files

    def flaky(files, test, run, **kwargs):  # noqa: ANN001, ANN003, ANN202
        if run == bad.name:
            raise RecursionError("maximum recursion depth exceeded")
        return real(files, test, run, **kwargs)

    monkeypatch.setattr(ingest, "read_run_files", flaky)
    known = {("reg", p.name): {"path": str(p), "suite": None, "night": None} for p in (good, bad)}
    task = ingest.ingest_task(known)
    rows = [r for b in task(iter(_group(good) + _group(bad))) for r in b.to_pylist()]  # one pack, two runs
    runs = {r["run"]: json.loads(r["text"]) for r in rows if r["kind"] == "run"}
    assert runs[good.name]["pending"] == [] and runs[good.name]["input_errors_json"] is None
    assert runs[good.name]["path"] == str(good)
    assert "the analysis crashed on this run: RecursionError" in runs[bad.name]["input_errors_json"]
    verdicts = [r for r in rows if r["kind"] == "verdict" and r["run"] == bad.name]
    # Unknown for the checkers that judge the run (those test.json names), not for every registered one.
    named = json.loads((bad / "test.json").read_text())["checkers"]
    assert {json.loads(r["text"])["valid"] for r in verdicts} == {"unknown"}
    assert sorted(r["name"] for r in verdicts) == sorted(named)
    tables = {(r["run"], r["name"]): r["payload"] for r in rows if r["kind"] == "table"}
    assert pq.read_table(io.BytesIO(tables[(good.name, "operations")])).num_rows == 20 + 3 + 2
    assert (bad.name, "operations") not in tables


@pytest.mark.parametrize(("fields", "expected"), [
    ({"workload": "log"}, "log"),  # test.json names the workload only: its checkers
    ({}, None),  # neither checkers nor a workload: every registered checker, as before
])
def test_a_crashed_run_is_unknown_for_its_workloads_checkers(
        tmp_path: Path, fields: dict[str, str], expected: str | None) -> None:
    from checkers.registry import CHECKERS
    from harness.analysis import ingest
    from workloads.generator import workload_checkers

    spec = json.dumps({"test": "t", **fields}).encode()
    records = ingest.crashed_run("p", "t", "r", RuntimeError("boom"), spec=spec)
    names = list(records.checks.verdicts)
    assert names == list(workload_checkers(expected) if expected else CHECKERS)
    assert {v.valid for v in records.checks.verdicts.values()} == {"unknown"}
    assert list(ingest.crashed_run("p", "t", "r", RuntimeError("boom"), spec=b"{not json").checks.verdicts) == list(
        CHECKERS)


def _outputs(task, run: Path) -> dict[tuple[str, str], dict]:  # noqa: ANN001 - a task function
    """A task's output rows over ``run``'s files, by (kind, name)."""
    rows = [r for b in task(iter(_group(run))) for r in b.to_pylist()]
    return {(r["kind"], r["name"]): r for r in rows}


def test_a_big_run_is_split_between_two_tasks_that_together_say_what_one_would(tmp_path: Path) -> None:
    from harness.analysis import ingest

    run = write_run(tmp_path, "reg", "20261120T020000", ops=300, keys=4, lost_write=True)
    known = {("reg", run.name): {"path": str(run)}}

    whole = _outputs(ingest.ingest_task(known), run)
    first = _outputs(ingest.ingest_task(known, split_from_bytes=1), run)
    second = _outputs(ingest.linearizability_task_of(), run)
    assert json.loads(first[("run", None)]["text"])["pending"] == ["linearizable"]
    assert ("verdict", "linearizable") not in first and ("table", "operations") not in first
    assert set(second) == {("verdict", "linearizable"), ("table", "operations"), ("phases", None)}
    spent = [json.loads(o[("phases", None)]["text"]) for o in (first, second)]
    assert set(spent[0]) == set(ingest.PHASES)
    assert {"parse_s", "linearizability_s", "tables_s"} <= set(spent[1]) <= set(ingest.PHASES)
    assert all(seconds >= 0 for phases in spent for seconds in phases.values())
    split, alone = (json.loads(o[("verdict", "linearizable")]["text"]) for o in (second, whole))
    for verdict in (split, alone):
        verdict["stats"].pop("time_s")
    assert split == alone and alone["valid"] is False
    assert second[("table", "operations")]["payload"] == whole[("table", "operations")]["payload"]
    for name in ("single-leader-per-term", "lsn-monotonicity", "durability"):
        assert first[("verdict", name)]["text"] == whole[("verdict", name)]["text"]
    assert first[("table", "journal")]["payload"] == whole[("table", "journal")]["payload"]
    # a small run's test.json alone, as the second reader also gets it: nothing
    only_spec = [pa.RecordBatch.from_pylist([{"path": f"file:{run}/test.json", "content": b"{}"}])]
    assert list(ingest.linearizability_task_of()(iter(only_spec))) == []


def test_a_big_run_not_checked_for_linearizability_is_one_task_that_parses_its_history_once(tmp_path: Path) -> None:
    from checkers.registry import CHECKERS
    from harness.analysis import ingest
    from harness.analysis.discovery import run_files
    from harness.analysis.pipeline import big_files

    run = write_run(tmp_path, "reg", "20261120T020000", ops=300, keys=4, lost_write=True)
    known = {("reg", run.name): {"path": str(run)}}

    def second_files() -> list[Path]:
        selection = find_runs([tmp_path])
        return big_files(selection.storage, run_files(selection.storage, selection.runs[0]), 1)

    assert {p.name for p in second_files()} == {"test.json", "history.jsonl"}  # names no checkers: may need it
    spec = json.loads((run / "test.json").read_text())
    run_level = [name for name in CHECKERS if name != "linearizable"]
    (run / "test.json").write_text(json.dumps({**spec, "checkers": run_level}))
    assert ingest.splits(json.loads((run / "test.json").read_text())) is False
    assert second_files() == []
    whole = _outputs(ingest.ingest_task(known), run)
    first = _outputs(ingest.ingest_task(known, split_from_bytes=1), run)
    assert json.loads(first[("run", None)]["text"])["pending"] == []
    assert first[("table", "operations")]["payload"] == whole[("table", "operations")]["payload"]
    assert {name for kind, name in first if kind == "verdict"} == set(run_level)
    # a second task scheduled all the same (its driver could not read test.json) adds nothing
    assert set(_outputs(ingest.linearizability_task_of(), run)) == {("phases", None)}
    (run / "test.json").write_text(json.dumps({**spec, "not_applicable": {"linearizable": "no keys"}}))
    assert second_files() == []


def test_a_task_reading_its_runs_files_itself_says_what_it_says_on_spark_s_reader(tmp_path: Path) -> None:
    from harness.analysis import ingest
    from harness.analysis.pipeline import reading_files

    runs = [write_run(tmp_path, "reg", f"20261120T02000{i}", ops=120, keys=3, seed=i, lost_write=i == 1)
            for i in range(2)]
    known = {("reg", run.name): {"path": str(run)} for run in runs}
    files = [[(f"file:{path}", str(path)) for path in sorted(run.rglob("*")) if path.is_file()] for run in runs]
    (runs[1] / "nodes" / "n1" / "journal.jsonl").unlink()  # listed, then gone: left out, as if never there

    def rows(task, batches) -> list[dict]:  # noqa: ANN001
        return [r for b in task(iter(batches)) for r in b.to_pylist()]

    ids = [pa.RecordBatch.from_pydict({"id": [1, 0]})]  # what spark.range hands a task: pack numbers
    mine = rows(reading_files(files, ingest.ingest_task(known)), ids)
    theirs = [r for run in runs for r in rows(ingest.ingest_task(known), _group(run))]  # by directory
    assert [(r["kind"], r["run"], r["name"]) for r in mine] == [(r["kind"], r["run"], r["name"]) for r in theirs]
    assert [r["payload"] for r in mine] == [r["payload"] for r in theirs]
    verdicts = {(r["run"], r["name"]): json.loads(r["text"])["valid"] for r in mine if r["kind"] == "verdict"}
    assert verdicts[(runs[1].name, "durability")] is False and verdicts[(runs[0].name, "durability")] is True


def test_in_process_a_big_run_is_one_task_its_history_parsed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.analysis import ingest
    from harness.analysis.inprocess import analyze_here
    from harness.analysis.pipeline import AnalysisOptions

    run = write_run(tmp_path, "reg", "20261120T020000", ops=300, keys=4, lost_write=True)
    parsed = []
    real = ingest.parse_operations
    monkeypatch.setattr(ingest, "parse_operations", lambda *a, **k: parsed.append(1) or real(*a, **k))
    analysis = analyze_here(find_runs([tmp_path]), AnalysisOptions(split_from_bytes=1, write_reports=False))
    checkers = analysis.outcome(run).results["checkers"]
    assert len(parsed) == 1 and checkers["linearizable"]["valid"] is False and checkers["durability"]["valid"] is False


def test_runs_are_packed_into_tasks_of_similar_size_a_big_run_alone() -> None:
    from harness.analysis.pipeline import pack_runs

    sizes = {("t", f"r{i}"): 2 for i in range(10)} | {("t", "big"): 100}
    packs = pack_runs(sizes, 4)
    assert [("t", "big")] in packs and len(packs) == 4
    assert sorted(k for pack in packs for k in pack) == sorted(sizes)  # every run once
    small = [sum(sizes[k] for k in pack) for pack in packs if ("t", "big") not in pack]
    assert max(small) - min(small) <= 2
    assert pack_runs({("t", "a"): 1}, 8) == [[("t", "a")]]



def test_tables_come_back_in_chunks_of_runs_within_the_budget_a_bigger_run_alone() -> None:
    from harness.analysis.pipeline import table_chunks

    sizes = {("t", f"r{i}"): 3 for i in range(7)} | {("t", "big"): 50, ("u", "r0"): 4}
    chunks = table_chunks(sizes, budget=10)
    assert [key for chunk in chunks for key in chunk] == sorted(sizes)  # every run once, in order
    assert [("t", "big")] in chunks
    for chunk in chunks:
        assert len(chunk) == 1 or sum(sizes[key] for key in chunk) <= 10
    assert len(chunks) == 4  # big | 3+3+3 | 3+3+3 | 3+4: a chunk ends where the next run would not fit
    assert table_chunks({}) == []

@pytest.mark.parametrize("terminal", [False, True])
def test_running_cases_get_a_line_each_and_names_are_not_markup(terminal: bool) -> None:
    from rich.console import Console

    from harness.analysis.progress import ConsoleProgress

    out = io.StringIO()
    progress = ConsoleProgress(Console(file=out, force_terminal=terminal, width=200))
    progress.step("suite s: 2 runs, 2 at a time", total=2)
    progress.case_started(0, "raft register nemesis=[red]kill bugs=none")
    progress.case_started(1, "aeron register nemesis=none bugs=none")
    progress.case_status(0, "chaos 3 s: 40 ops (ok 38, fail 1, info 1)")
    progress.case_finished(0, "[1] raft register nemesis=[red]kill bugs=none: ran in 31 s")
    progress.update(1, 2)
    progress.close()
    text = out.getvalue()
    assert "[1] raft register nemesis=[red]kill bugs=none: ran in 31 s" in text
    if not terminal:
        assert "[1] raft register nemesis=[red]kill bugs=none: started" in text
        assert "[2] aeron register nemesis=none bugs=none: started" in text


SHUTDOWN_RACE = """\
spark ERROR TaskSchedulerImpl: Exception in statusUpdate
java.util.concurrent.RejectedExecutionException: Task org.apache.spark.scheduler.TaskResultGetter$$anon$3@50f7b0d3 rejected from java.util.concurrent.ThreadPoolExecutor@3878689d[Terminated, pool size = 0, active threads = 0, queued tasks = 0, completed tasks = 639]
\tat java.base/java.util.concurrent.ThreadPoolExecutor$AbortPolicy.rejectedExecution(ThreadPoolExecutor.java:2065)
\tat org.apache.spark.scheduler.TaskResultGetter.enqueueSuccessfulTask(TaskResultGetter.scala:62)
\tat java.base/java.lang.Thread.run(Thread.java:840)
spark ERROR Executor: Executor launch task task 1.0 in stage 106.0 (TID 639) failed, reason: Task org.apache.spark.executor.Executor$TaskRunner@7cde88a3 rejected from java.util.concurrent.ThreadPoolExecutor@16045fc5[Shutting down] RejectedExecutionException
"""
REAL_ERROR = """\
spark ERROR Executor: Exception in task 0.0 in stage 2.0 (TID 5)
org.apache.spark.api.python.PythonException: boom
\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)
"""


def test_the_shutdown_race_is_quiet_and_real_errors_are_not() -> None:
    from harness.analysis.spark import StderrFilter

    def through(text: str, stopping: bool) -> str:
        quiet = StderrFilter(lambda: stopping)
        out = [line for raw in text.splitlines(keepends=True) for line in quiet.feed(raw)]
        return "".join(out + quiet.flush())

    assert through(SHUTDOWN_RACE, stopping=True) == ""
    assert through(SHUTDOWN_RACE, stopping=False) == SHUTDOWN_RACE  # while working, every error shows
    assert through(REAL_ERROR, stopping=True) == REAL_ERROR  # at shutdown, other errors still show
    assert through(SHUTDOWN_RACE + REAL_ERROR, stopping=True) == REAL_ERROR
    assert through("WARNING: Using incubator modules: jdk.incubator.vector\n", stopping=False) == ""


@pytest.mark.parametrize(("content", "reason"), [
    (b'{"spec": {"seed": 1, "wor', "bad JSON"),
    (b"[]", "expected a JSON object, got list"),
    (b'{"spec": "x"}', "its spec is not a JSON object but str"),
])
def test_a_corrupt_test_json_makes_the_run_unknown_and_says_why(content: bytes, reason: str) -> None:
    """A corrupt test.json: the run is unknown and its reason is what a person reads first (the table's
    "what failed" was empty, with every checker valid)."""
    from harness.analysis.ingest import read_spec
    from harness.analysis.pipeline import RunOutcome

    spec, error = read_spec(content)
    assert spec == {} and error is not None and reason in error.reason
    results = {"valid": UNKNOWN, "checkers": {"durability": {"valid": True, "summary": "fine"}},
               "input_errors": [{"file": error.file, "line": error.line, "reason": error.reason}]}
    outcome = RunOutcome(run=None, valid=UNKNOWN, results=results, results_path=Path("results.json"))  # type: ignore[arg-type]
    failed = outcome.failed_checkers()
    assert list(failed) == ["input"] and failed["input"].startswith("test.json") and reason in failed["input"]


@pytest.mark.parametrize("jvm_alive", [False, True])
def test_a_jvm_that_ends_mid_analysis_is_one_sentence_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, jvm_alive: bool
) -> None:
    import subprocess

    import pyspark
    from py4j.protocol import Py4JNetworkError

    from harness.analysis import spark as spark_module

    stopped: list[bool] = []

    class Session:
        def stop(self) -> None:
            if not jvm_alive:
                raise ConnectionRefusedError(111, "Connection refused")  # what stopping a dead JVM raises
            stopped.append(True)

    process = subprocess.Popen(["sleep", "30"] if jvm_alive else ["true"])
    if not jvm_alive:
        process.wait()
    monkeypatch.setattr(pyspark.SparkContext, "_gateway", type("Gateway", (), {"proc": process})(), raising=False)
    monkeypatch.setattr(spark_module, "preflight", lambda master: None)
    monkeypatch.setattr(spark_module, "_active_session", lambda: None)
    monkeypatch.setattr(spark_module, "start_session", lambda master, conf: Session())
    monkeypatch.setattr(spark_module, "_fatal", ["java.lang.OutOfMemoryError: Java heap space"])
    try:
        if jvm_alive:  # an error of the analysis itself goes on as it is, and the session is stopped
            with pytest.raises(ValueError), spark_module.spark_session("local[1]"):
                raise ValueError("a checker's bug")
            assert stopped == [True]
        else:
            with pytest.raises(SparkUnavailable) as caught, spark_module.spark_session("local[1]"):
                raise Py4JNetworkError("Answer from Java side is empty")
            message = str(caught.value)
            assert "ran out of memory" in message and "Java heap space" in message
            assert "spark.driver.memory" in message and "\n" not in message
    finally:
        process.kill()
        process.wait()


def test_py4j_tracebacks_the_harness_says_in_a_line_of_its_own_are_dropped_and_no_others() -> None:
    import logging
    import sys

    from py4j.protocol import Py4JNetworkError

    from harness.analysis.spark import _not_py4j_noise

    def record(message: str, error: BaseException | None) -> logging.LogRecord:
        try:
            if error is not None:
                raise error
        except BaseException:  # noqa: BLE001 - the record carries whatever was raised
            info = sys.exc_info()
        else:
            info = None
        return logging.LogRecord("root", logging.ERROR, __file__, 1, message, None, info)

    assert not _not_py4j_noise(record("Exception while sending command.", Py4JNetworkError("dropped")))
    assert not _not_py4j_noise(record("Exception while sending command.", ConnectionResetError(104, "reset")))
    assert not _not_py4j_noise(record("KeyboardInterrupt while sending command.", KeyboardInterrupt()))
    assert _not_py4j_noise(record("Exception while sending command.", ValueError("a bug of ours")))
    assert _not_py4j_noise(record("something else", Py4JNetworkError("dropped")))
    assert _not_py4j_noise(record("Exception while sending command.", None))


def test_a_task_given_the_store_writes_its_tables_there_and_returns_none(tmp_path: Path) -> None:
    from harness.analysis import dataset, ingest

    runs = [write_run(tmp_path, "reg", f"20261120T02000{i}", ops=120, keys=3, seed=i) for i in range(2)]
    known = {("reg", run.name): {"path": str(run)} for run in runs}
    batches = [batch for run in runs for batch in _group(run)]
    returned = [r for b in ingest.ingest_task(known)(iter(batches)) for r in b.to_pylist()]
    written = [r for b in ingest.ingest_task(known, dataset_store=str(tmp_path))(iter(batches)) for r in b.to_pylist()]
    assert [r for r in written if r["kind"] == "table"] == []
    tables = [r for r in returned if r["kind"] == "table"]
    assert {(r["run"], r["name"]) for r in tables} == {(run.name, t) for run in runs for t in ("operations", "journal")}
    for row in tables:
        path = dataset.partition_dir(tmp_path, row["name"], "reg", row["run"]) / dataset.PART_FILE
        assert Path(path).read_bytes() == row["payload"]

    def said(rows: list[dict]) -> list[tuple]:  # the run rows, and each verdict but its timing
        return [(r["kind"], r["run"], r["name"], r["text"] if r["kind"] == "run" else json.loads(r["text"])["valid"])
                for r in rows if r["kind"] in ("run", "verdict")]

    assert said(written) == said(returned) and len(said(returned)) > 2
