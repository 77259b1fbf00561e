"""A store whose disk fills up during a run: the run stops there as interrupted (not at its time limit,
not as a crash), its history ends with its last whole line and is judged up to it."""

from __future__ import annotations

import errno
import json

import pytest

import harness.history as history_module
from harness.history import HistoryWriteError, HistoryWriter
from harness.run import run
from harness.spec import TestSpec

LINES_BEFORE_FULL = 400


def test_a_full_disk_stops_the_run_as_interrupted_with_a_whole_history(tmp_path, monkeypatch) -> None:
    # A simulated run's history is buffered (harness/history.py); written line by line here, as on the
    # other platforms, the run stops at the line the disk refuses.
    monkeypatch.setattr(history_module, "BUFFER_BYTES", 0)
    real_write = HistoryWriter._write

    def fills_up(self: HistoryWriter, data: bytes) -> None:
        if self.count >= LINES_BEFORE_FULL:
            raise HistoryWriteError(self.path, OSError(errno.ENOSPC, "No space left on device"))
        real_write(self, data)

    monkeypatch.setattr(HistoryWriter, "_write", fills_up)
    spec = TestSpec(seed=8, db="cluster", platform="sim", time_limit=30.0, store=str(tmp_path / "store"))
    result = run(spec)
    assert result.interrupted and result.exit_code == 2 and result.stop_requested
    assert "could not write the history" in result.error and "No space left on device" in result.error
    lines = (result.run_dir / "history.jsonl").read_text().splitlines()
    assert len(lines) == LINES_BEFORE_FULL
    end = json.loads((result.run_dir / "test.json").read_text())["end"]
    assert end["how"] == "interrupted" and end["cause"].startswith("could not write the history")
    results = json.loads((result.run_dir / "results.json").read_text())
    assert results["duration_s"] < 10  # the run stopped when the disk filled, not at its 30 s limit
    assert results["valid"] == "unknown" and results["checkers"]["linearizable"]["valid"] is True


def test_a_full_disk_under_a_buffered_simulated_history_keeps_every_line_that_fits(tmp_path, monkeypatch) -> None:
    """The simulator's buffered history (written in large pieces and when the run ends): a disk that fills
    makes the run interrupted, and the history holds every whole line that fitted, judged up to there."""
    monkeypatch.setattr(history_module, "BUFFER_BYTES", 16_384)
    real_write = HistoryWriter._write
    room = 50_000

    def fills_up(self: HistoryWriter, data: bytes) -> None:
        if self._size + len(data) > room:
            raise HistoryWriteError(self.path, OSError(errno.ENOSPC, "No space left on device"))
        real_write(self, data)

    monkeypatch.setattr(HistoryWriter, "_write", fills_up)
    spec = TestSpec(seed=8, db="cluster", platform="sim", time_limit=30.0, store=str(tmp_path / "store"))
    result = run(spec)
    assert result.interrupted and result.exit_code == 2
    assert "could not write the history" in result.error and "No space left on device" in result.error
    data = (result.run_dir / "history.jsonl").read_bytes()
    assert data.endswith(b"\n") and room - 1_000 < len(data) <= room  # every line that fitted, none torn
    lines = data.splitlines()
    assert [json.loads(line)["index"] for line in lines] == list(range(len(lines)))
    results = json.loads((result.run_dir / "results.json").read_text())
    assert results["valid"] == "unknown" and results["checkers"]["linearizable"]["valid"] is True


@pytest.mark.parametrize("where", ["test.json"])
def test_the_cli_says_the_disk_is_full_in_one_line(tmp_path, monkeypatch, capsys, where: str) -> None:
    """A write of the store that fails after the history (the end record, say) is one line and exit 2."""
    from harness import cli, store

    real = store.write_json

    def full(path, data) -> None:  # noqa: ANN001
        if path.name == where and "end" in data:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    monkeypatch.setattr(store, "write_json", full)
    code = cli.main(["run", "--db", "cluster", "--platform", "sim", "--time-limit", "3", "--seed", "2",
                     "--no-live", "--analysis", "direct", "--store", str(tmp_path / "store")])
    err = capsys.readouterr().err
    assert code == 2 and "the store's disk is full (No space left on device)" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
