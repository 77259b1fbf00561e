"""The controller record tells a live controller from a dead one (and from a recycled pid); a history's
extent survives a torn last line; a run that stopped short is named as such, never blamed on a checker."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from checkers.verdict import UNKNOWN, Verdict
from harness.lifecycle import (
    ALIVE,
    DEAD,
    ELSEWHERE,
    Controller,
    Stop,
    blame_the_stop,
    end_record,
    final_after_for,
    history_extent,
    stop_of,
)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_this_process_is_alive_and_a_reaped_child_is_dead() -> None:
    me = Controller.current()
    assert me.state() == ALIVE
    assert replace(me, pid=_dead_pid()).state() == DEAD


def test_a_recycled_pid_is_not_the_controller() -> None:
    # Same pid, same host, but the process with that pid started later: the controller is gone.
    me = Controller.current()
    assert replace(me, started=me.started - 60).state() == DEAD


def test_a_controller_of_another_host_cannot_be_judged_from_here() -> None:
    assert replace(Controller.current(), host="elsewhere.example").state() == ELSEWHERE


def test_the_controller_round_trips_through_labels_and_json(tmp_path: Path) -> None:
    me = Controller.current()
    labels = me.labels(tmp_path)
    assert all(isinstance(v, str) for v in labels.values())
    assert labels["chaos-harness.run-dir"] == str(tmp_path.resolve())
    assert Controller.from_labels(labels) == me
    assert Controller.from_json(json.loads(json.dumps(me.to_json()))) == me
    assert Controller.from_labels({"chaos-harness.run": "chaos-1"}) is None
    assert Controller.from_json({"pid": "12", "host": "h", "started": 1.0}) is None
    assert Controller.from_json(None) is None


def _history(path: Path, lines: list[str], tail: str = "") -> Path:
    path.write_text("".join(line + "\n" for line in lines) + tail)
    return path


def test_history_extent_skips_a_torn_last_line(tmp_path: Path) -> None:
    path = _history(tmp_path / "h.jsonl", ['{"time":1000000000}', '{"time":16000000000}'], '{"time":17')
    assert history_extent(path) == (16.0, False)


def test_history_extent_finds_the_final_mark_across_a_block_boundary(tmp_path: Path) -> None:
    # The 1 MiB read blocks split the mark in two; it is found all the same.
    second = '{"time":2000000000,'
    first = '{"time":1,"pad":"' + "x" * ((1 << 20) - 5 - len(second) - 20) + '"}\n'
    path = tmp_path / "h.jsonl"
    path.write_text(first + second + '"final":true}\n')
    assert path.read_bytes().index(b'"final":true') == (1 << 20) - 5
    assert history_extent(path) == (2.0, True)


def test_history_extent_reads_backwards_across_blocks(tmp_path: Path) -> None:
    lines = [json.dumps({"time": i * 10**9, "value": "v" * 5000}) for i in range(60)]
    assert history_extent(_history(tmp_path / "h.jsonl", lines)) == (59.0, False)


def test_an_empty_or_missing_history_has_no_extent(tmp_path: Path) -> None:
    assert history_extent(_history(tmp_path / "empty.jsonl", [])) == (None, False)
    assert history_extent(tmp_path / "missing.jsonl") == (None, False)


def test_a_killed_run_is_one_whose_controller_is_dead_and_that_has_no_end(tmp_path: Path) -> None:
    history = _history(tmp_path / "history.jsonl", ['{"time":1000000000}', '{"time":16000000000}'])
    dead = {"controller": replace(Controller.current(), pid=_dead_pid()).to_json()}
    stop = stop_of(dead, history)
    assert stop == Stop(how="killed", cause=None, last_event_s=16.0, final_phase_started=False)
    assert stop.sentence == "the controller stopped at 16.0 s: no final phase"
    assert stop_of({"controller": Controller.current().to_json()}, history) is None  # still running
    assert stop_of({}, history) is None  # an older harness or the simulator: nothing says it stopped


def test_a_history_already_read_tells_the_same_stop(tmp_path: Path) -> None:
    """The analysis reads runs through Spark and hands stop_of the history's bytes."""
    dead = {"controller": replace(Controller.current(), pid=_dead_pid()).to_json()}
    for lines, torn in ((['{"time":1000000000}', '{"time":16000000000,"final":true}'], ""), (['{"time":3000000000}'], '{"ti')):
        history = _history(tmp_path / "history.jsonl", lines)
        with history.open("a") as handle:
            handle.write(torn)  # a writer killed mid-line
        assert stop_of(dead, history.read_bytes()) == stop_of(dead, history)
        assert stop_of(dead, history.read_bytes()) is not None
    assert stop_of(dead, b"") == Stop(how="killed", cause=None, last_event_s=None, final_phase_started=False)


def test_the_end_record_says_how_a_run_ended(tmp_path: Path) -> None:
    history = _history(tmp_path / "history.jsonl", ['{"time":2500000000}'])
    assert stop_of({"end": end_record("completed", cause=None, history=history)}, history) is None
    interrupted = stop_of({"end": end_record("interrupted", cause="SIGTERM", history=history)}, history)
    assert interrupted.sentence == "the run was interrupted (SIGTERM) at 2.5 s: no final phase"
    with pytest.raises(ValueError):
        end_record("vanished", cause=None, history=history)


def test_only_an_undecided_final_phase_verdict_is_blamed_on_the_stop() -> None:
    stop = Stop(how="killed", cause=None, last_event_s=16.0, final_phase_started=False)
    verdicts = {
        "durability": Verdict(UNKNOWN, "durability cannot judge this run (nothing it needs was recorded)"),
        "linearizable": Verdict(UNKNOWN, "timed out"),
        "lsn-monotonicity": Verdict(True, "fine"),
    }
    blamed = blame_the_stop(verdicts, stop)
    assert blamed["durability"].summary == "the controller stopped at 16.0 s: no final phase"
    assert blamed["linearizable"] == verdicts["linearizable"]
    assert blamed["lsn-monotonicity"] == verdicts["lsn-monotonicity"]
    lost = {"durability": Verdict(False, "1 acknowledged write lost")}
    assert blame_the_stop(lost, stop) == lost
    cut_short = replace(stop, final_phase_started=True)
    assert blame_the_stop(verdicts, cut_short) == verdicts


def test_no_read_of_a_run_without_final_phase_counts_as_final() -> None:
    stop = Stop(how="killed", cause=None, last_event_s=16.0, final_phase_started=False)
    assert final_after_for(stop) == 16_000_000_001
    assert final_after_for(replace(stop, final_phase_started=True)) is None
    assert final_after_for(None) is None


def _chaos_phase_only(run_dir: Path, document: dict) -> None:
    """A write acknowledged, a partition left in place, then a stale read: the history of a controller
    killed mid-chaos. Taken for a final read, that read would "lose" the write."""
    run_dir.mkdir(parents=True)
    (run_dir / "test.json").write_text(json.dumps({"model": "cas-register", "checkers": ["durability"], **document}))
    events = [
        (0, "invoke", "write", "k", 1), (0, "ok", "write", "k", 1),
        ("nemesis", "invoke", "partition", None, None), ("nemesis", "info", "partition", None, None),
        (1, "invoke", "read", "k", None), (1, "ok", "read", "k", None),
    ]
    (run_dir / "history.jsonl").write_text("".join(
        json.dumps({"index": i, "time": (i + 1) * 10**9, "process": p, "type": t, "f": f, "key": k, "value": v,
                    "node": "n1"}) + "\n"
        for i, (p, t, f, k, v) in enumerate(events)
    ))


def test_the_analysis_of_a_killed_run_names_the_stop_and_takes_no_chaos_read_for_a_final_one(tmp_path: Path) -> None:
    from harness.analysis.checks import results_document
    from harness.analysis.ingest import read_run

    killed, running = tmp_path / "t" / "killed", tmp_path / "t" / "running"
    _chaos_phase_only(killed, {"controller": replace(Controller.current(), pid=_dead_pid()).to_json()})
    _chaos_phase_only(running, {"controller": Controller.current().to_json()})

    # A live controller's run is judged as it stands: the read after the partition counts as final.
    assert read_run(running, "t", "running").checks.verdicts["durability"].valid is False
    records = read_run(killed, "t", "killed")
    durability = records.checks.verdicts["durability"]
    assert (durability.valid, durability.summary) == (UNKNOWN, "the controller stopped at 6.0 s: no final phase")
    document = results_document(records.run, records.checks.verdicts, [], {})
    assert document["valid"] == UNKNOWN
    assert document["interrupted"]["summary"] == "the controller stopped at 6.0 s: no final phase"
