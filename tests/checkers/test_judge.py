"""``checkers.judge``: judging a run from its files (the path of ``python -m checkers check`` and of the
harness's post-run check): empty histories, budgets that hold, and the search shared by worker
processes that each read their own keys."""

from __future__ import annotations

import io
import itertools
from pathlib import Path

import pytest

from checkers import judge
from checkers.cli import main
from checkers.judge import Budgets, judge_files
from tests.checkers.scenario import HistoryBuilder, JournalBuilder


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("content", ["", "nemesis-only"])
def test_an_empty_history_is_unknown_with_nothing_to_judge(tmp_path: Path, content: str) -> None:
    path = tmp_path / "history.jsonl"
    b = HistoryBuilder()
    if content:
        b.invoke("nemesis", "partition", None, {"n1": ["n2"]})
        b.complete("nemesis", "ok", "partition", None, {"n1": ["n2"]})
    b.write(path)
    code, out, err = _run("check", str(path), "--model", "cas-register")
    assert code == 2 and err == ""
    assert out.startswith(f"{path}: linearizable: unknown: ") and "nothing to judge" in out
    judgement = judge_files(path, model="cas-register")
    assert judgement.verdicts["linearizable"].valid == "unknown" and judgement.ops == 0


def test_timeout_covers_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = HistoryBuilder()
    for i in range(3000):
        b.op(i % 7, "write", f"k{i % 5}", i)
    path = b.write(tmp_path / "history.jsonl")
    monkeypatch.setattr("checkers.history._DEADLINE_EVERY", 100)
    ticks = itertools.count()
    judgement = judge_files(path, model="register", budgets=Budgets(timeout_s=3), clock=lambda: next(ticks))
    verdict = judgement.verdicts["linearizable"]
    assert verdict.valid == "unknown"
    assert "time budget of 3 s ran out while reading" in verdict.summary and "at line 400" in verdict.summary


def test_a_key_out_of_budget_is_named_and_the_others_are_decided(tmp_path: Path) -> None:
    b = HistoryBuilder()
    for writer in range(10):  # key "hard": concurrent writes, then a read nobody wrote
        b.invoke(writer, "write", "hard", writer)
    for writer in range(10):
        b.complete(writer, "ok", "write", "hard", writer)
    b.op(10, "read", "hard", output=-1)
    for i in range(5):
        b.op(11, "write", f"easy{i}", i)
        b.op(11, "read", f"easy{i}", output=i)
    path = b.write(tmp_path / "history.jsonl")
    code, out, _ = _run("check", str(path), "--model", "register", "--max-states", "50")
    assert code == 2
    assert 'memory budget of 50 states reached on 1 of 6 keys, first key "hard"' in out
    assert "the other 5 keys are linearizable" in out
    code, out, _ = _run("check", str(path), "--model", "register", "--max-memory", "2K")
    assert code == 2 and "memory budget of 2,048 bytes reached" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-memory", "lots"], "not a byte count"),
        (["--max-states", "0"], "--max-states must be positive"),
        (["--timeout", "-1"], "--timeout must be positive"),
        (["--workers", "0"], "--workers must be positive"),
        (["--initial", "{"], "--initial must be a JSON value"),
    ],
)
def test_bad_budgets_are_one_line_exit_254(tmp_path: Path, argv: list[str], message: str) -> None:
    path = HistoryBuilder().write(tmp_path / "h.jsonl")
    code, out, err = _run("check", str(path), "--model", "register", *argv)
    assert code == 254 and out == "" and len(err.splitlines()) == 1 and message in err


def _many_keys(path: Path, keys: int, bad_key: str | None) -> Path:
    b = HistoryBuilder()
    for i in range(keys):
        key = f"k{i}"
        b.op(i % 4, "write", key, i)
        b.op(4 + i % 4, "read", key, output=i if key != bad_key else -1)
    return b.write(path)


@pytest.mark.parametrize("bad_key", [None, "k3", "k17"])
def test_workers_share_the_keys_and_agree_with_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad_key: str | None
) -> None:
    monkeypatch.setattr(judge, "PARALLEL_MIN_BYTES", 0)
    path = _many_keys(tmp_path / "history.jsonl", 40, bad_key)
    alone = judge_files(path, model="register", budgets=Budgets(workers=1)).verdicts["linearizable"]
    shared = judge_files(path, model="register", budgets=Budgets(workers=2))
    verdict = shared.verdicts["linearizable"]
    assert verdict.valid is alone.valid is (bad_key is None)
    assert verdict.stats["workers"] == 2 and shared.ops == 80
    if bad_key is None:
        assert verdict.stats["ops"] == 80 and verdict.stats["keys"] == 40 and shared.ops == 80
    else:  # the first violation ends the search: a worker that did not finish is not counted
        assert verdict.counterexample["key"] == bad_key
        assert verdict.counterexample == alone.counterexample  # rows (workers) describe what operations do


def test_workers_report_a_malformed_history_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judge, "PARALLEL_MIN_BYTES", 0)
    path = _many_keys(tmp_path / "history.jsonl", 10, None)
    with path.open("a") as handle:
        handle.write("{not json}\n")
    code, out, err = _run("check", str(path), "--model", "register", "--workers", "2")
    assert code == 254 and out == "" and err.count("\n") == 1 and ":41: bad JSON" in err


def test_judging_a_run_reports_checkers_that_cannot_apply(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.op(0, "write", "k", 1, lsn=(1, 1))
    b.op(1, "read", "k", output=1, lsn=(1, 1))
    path = b.write(tmp_path / "history.jsonl")
    journal = JournalBuilder("n1")
    journal.start()
    journal.role("leader", 1, "n1")
    journal.add("append", lsn=(1, 1))  # not read by any checker: dropped by the compact loader
    journal.apply((1, 1), "k", {"f": "write", "value": 1})
    journal.write(tmp_path / "nodes")
    judgement = judge_files(
        path,
        model="cas-register",
        checkers=["single-leader-per-term", "lsn-monotonicity", "durability", "linearizable", "nope"],
        missing="unknown",
    )
    valid = {name: v.valid for name, v in judgement.verdicts.items()}
    assert valid == {
        "single-leader-per-term": True,
        "lsn-monotonicity": True,
        "durability": "unknown",
        "linearizable": True,
        "nope": "unknown",
    }
    assert "cannot judge this run" in judgement.verdicts["durability"].summary


def test_a_caller_can_skip_checkers_after_seeing_the_input(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.op(0, "write", "k", 1)
    path = b.write(tmp_path / "history.jsonl")
    seen = []

    def skip(history, journals):  # noqa: ANN001, ANN202 - the hook's shape is judge_files' contract
        seen.append((len(history.ops), journals))
        return {"lsn-monotonicity": "the system has no LSNs"}

    judgement = judge_files(path, model="register", checkers=["lsn-monotonicity", "linearizable"], skip=skip)
    assert seen == [(1, None)]
    assert judgement.skipped == {"lsn-monotonicity": "the system has no LSNs"}
    assert list(judgement.verdicts) == ["linearizable"]
