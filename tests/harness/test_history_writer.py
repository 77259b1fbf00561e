"""The history writer: FORMATS.md events, index and time from an injected clock, one flushed line each."""

from __future__ import annotations

import json
import threading

import pytest

from checkers.history import load_history
from harness.history import HistoryWriter


class FakeClock:
    """Monotonic nanoseconds that move only when the test says so."""

    def __init__(self, start: int = 5_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ns: int) -> None:
        self.now += ns


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_events_get_index_and_time_since_start(tmp_path) -> None:
    clock = FakeClock()
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, clock) as history:
        clock.advance(1_000)
        history.invoke(0, "write", "k1", 3, node="n2")
        clock.advance(2_500)
        history.complete(0, "ok", "write", "k1", 3, node="n2", lsn=(1, 4))
        clock.advance(10)
        history.invoke("nemesis", "kill", None, {"target": "leader"})
        history.complete("nemesis", "info", "kill", None, None, error="no leader known")
    events = _lines(path)
    assert [e["index"] for e in events] == [0, 1, 2, 3]
    assert [e["time"] for e in events] == [1_000, 3_500, 3_510, 3_510]
    assert events[1] == {
        "index": 1, "time": 3_500, "process": 0, "type": "ok", "f": "write", "key": "k1", "value": 3,
        "node": "n2", "lsn": [1, 4],
    }
    assert "node" not in events[2] and "lsn" not in events[2] and "error" not in events[2]
    assert events[3]["error"] == "no leader known"
    history = load_history(path)
    assert [op.type for op in history.ops] == ["ok"]
    assert [op.f for op in history.nemesis] == ["kill"]


def test_each_line_is_on_disk_before_append_returns(tmp_path) -> None:
    path = tmp_path / "history.jsonl"
    history = HistoryWriter(path, FakeClock(), fsync=True)
    history.invoke(1, "read", "k", None)
    # A crash now (the writer never closed) must leave the line readable by another reader.
    assert _lines(path) == [
        {"index": 0, "time": 0, "process": 1, "type": "invoke", "f": "read", "key": "k", "value": None}
    ]
    assert history.count == 1
    history.close()
    assert history.closed


def test_time_never_goes_backwards_even_if_the_clock_does(tmp_path) -> None:
    clock = FakeClock()
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, clock) as history:
        clock.advance(100)
        history.invoke(0, "read", "k")
        clock.advance(-50)
        history.complete(0, "ok", "read", "k", None)
    assert [e["time"] for e in _lines(path)] == [100, 100]


def test_start_can_be_given(tmp_path) -> None:
    clock = FakeClock(start=1_000)
    with HistoryWriter(tmp_path / "h.jsonl", clock, start_ns=400) as history:
        event = history.invoke(0, "read", "k")
        assert event["time"] == 600
        assert history.elapsed_ns() == 600


def test_bad_completion_type_and_closed_writer_are_rejected(tmp_path) -> None:
    history = HistoryWriter(tmp_path / "h.jsonl", FakeClock())
    with pytest.raises(ValueError, match="ok, fail or info"):
        history.complete(0, "invoke", "read", "k")
    history.close()
    with pytest.raises(ValueError, match="closed"):
        history.invoke(0, "read", "k")


def test_refuses_to_append_to_an_existing_history(tmp_path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"index": 0}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="already holds a history"):
        HistoryWriter(path, FakeClock())


def test_non_json_values_are_written_readably(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path, FakeClock()) as history:
        history.invoke(0, "write", "k", {"set": {3, 1, 2}, "raw": b"ab"})
    assert _lines(path)[0]["value"] == {"set": [1, 2, 3], "raw": "ab"}


def test_concurrent_writers_never_duplicate_or_skip_an_index(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    clock = FakeClock()
    with HistoryWriter(path, clock) as history:

        def client(process: int) -> None:
            for _ in range(200):
                history.invoke(process, "read", "k")
                history.complete(process, "ok", "read", "k", None)

        threads = [threading.Thread(target=client, args=(p,)) for p in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    events = _lines(path)
    assert [e["index"] for e in events] == list(range(1600))
    assert len(load_history(path).ops) == 800


def test_a_write_that_fails_half_way_leaves_the_file_at_its_last_whole_line(tmp_path, monkeypatch) -> None:
    """A full disk mid-line: the line is taken back, the error names the file, nothing torn is left."""
    import errno
    import os

    from harness.history import HistoryWriteError

    path = tmp_path / "history.jsonl"
    writer = HistoryWriter(path, clock=lambda: 0)
    writer.invoke(0, "read", "k")
    real_write = os.write
    calls = []

    def full_disk(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, data[:10])  # the OS took part of the line
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(HistoryWriteError, match=f"could not write the history {path}: No space left on device"):
        writer.complete(0, "ok", "read", "k", 1)
    monkeypatch.undo()
    writer.close()
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 2 and json.loads(lines[0])["type"] == "invoke"


def _write_some(history: HistoryWriter, clock: FakeClock) -> None:
    for i in range(300):
        clock.advance(1_000)
        history.invoke(i % 4, "write", f"k{i % 7}", {"v": i, "s": {i, 1}, "b": b"x", "f": i / 7, "u": "é\n"})
        history.complete(i % 4, "ok", "write", f"k{i % 7}", i, node="n1", lsn=(1, i), group="shard-1")


def test_a_buffered_writer_writes_the_same_bytes_when_it_closes(tmp_path) -> None:
    """The simulator's writer (``buffered``): nothing on disk until it closes (or enough waits), then the
    very bytes the unbuffered writer writes line by line."""
    plain, buffered = tmp_path / "plain.jsonl", tmp_path / "buffered.jsonl"
    clock = FakeClock()
    with HistoryWriter(plain, clock, start_ns=0) as history:
        _write_some(history, clock)
    clock = FakeClock()
    history = HistoryWriter(buffered, clock, start_ns=0, buffered=True)
    _write_some(history, clock)
    assert buffered.read_bytes() == b"" and history.count == 600
    history.close()
    assert buffered.read_bytes() == plain.read_bytes()


def test_a_buffered_writer_writes_when_enough_waits(tmp_path, monkeypatch) -> None:
    import harness.history

    monkeypatch.setattr(harness.history, "BUFFER_BYTES", 1000)
    path = tmp_path / "h.jsonl"
    history = HistoryWriter(path, FakeClock(), buffered=True)
    for _ in range(50):
        history.invoke(0, "read", "k")
    on_disk = path.read_bytes()
    assert 1000 <= len(on_disk) and on_disk.endswith(b"\n")
    history.flush()
    assert len(path.read_bytes().splitlines()) == 50
    history.close()


def test_a_buffered_write_that_fails_leaves_whole_lines(tmp_path, monkeypatch) -> None:
    """A full disk when the buffer is written (at close): the file is cut back to the lines written before."""
    import errno
    import os

    from harness.history import HistoryWriteError

    path = tmp_path / "history.jsonl"
    writer = HistoryWriter(path, clock=lambda: 0, buffered=True)
    writer.invoke(0, "read", "k")
    writer.flush()
    writer.complete(0, "ok", "read", "k", 1)
    real_write = os.write

    def full_disk(fd: int, data: bytes) -> int:
        if len(data) > 5:
            real_write(fd, data[:5])
            return 5
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(HistoryWriteError, match="No space left on device"):
        writer.close()
    monkeypatch.undo()
    assert writer.closed
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 2 and json.loads(lines[0])["type"] == "invoke"


def test_the_line_encoder_is_json_dumps() -> None:
    from harness.history import line_encoder

    encode = line_encoder()
    for value in ({"a": [1, 2.5, None, True, "é\u2028\x00\""], "b": {"1": -0.0}}, [1e16, 1e-7, 2**70], "s", 3,
                  {1: 2, 2.5: 3, None: 4, False: 5}):
        assert encode(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    with pytest.raises(TypeError):
        encode({"x": {1}})


def test_after_a_refused_buffered_line_the_indexes_go_on_from_the_file(tmp_path, monkeypatch) -> None:
    """A full disk that refuses part of a buffered piece: the file keeps the lines that fitted, and a line
    written later (the disk has room again) takes the next index, so the file's indexes have no gap."""
    import errno

    from harness.history import HistoryWriteError

    path = tmp_path / "h.jsonl"
    writer = HistoryWriter(path, clock=lambda: 0, buffered=True)
    for _ in range(5):
        writer.invoke(0, "read", "k")
    real_write = HistoryWriter._write
    room = [2]  # the disk takes the next two writes of one line each, then is full

    def full_disk(self: HistoryWriter, data: bytes) -> None:
        if data.count(b"\n") > 1 or room[0] == 0:
            raise HistoryWriteError(self.path, OSError(errno.ENOSPC, "No space left on device"))
        room[0] -= 1
        real_write(self, data)

    monkeypatch.setattr(HistoryWriter, "_write", full_disk)
    with pytest.raises(HistoryWriteError):
        writer.flush()
    monkeypatch.undo()
    assert writer.count == 2
    writer.invoke(1, "read", "k")
    writer.close()
    assert [e["index"] for e in _lines(path)] == [0, 1, 2]
