"""The storage file (framing, torn-tail truncation, fsync policy) and the journal writer (seq continuity)."""

import json
import os
import zlib

import pytest

from cluster.disk import (
    check_writable_directory,
    frame_record,
    open_journal,
    open_storage,
    parse_records,
)


class CountingFsync:
    def __init__(self):
        self.calls = 0

    def __call__(self, fd):
        self.calls += 1


RECORDS = [{"kind": "term", "term": 1, "vote": "n1"}, {"kind": "entry", "lsn": [1, 1], "op": {"key": "é"}},
           {"kind": "entry", "lsn": [1, 2], "op": {"key": "b", "value": [1, 2]}}]


def test_records_come_back_in_order_after_reopen(tmp_path):
    path = str(tmp_path / "storage.dat")
    storage, records, truncation = open_storage(path)
    assert records == [] and truncation is None
    storage.append(RECORDS[:1])
    storage.append(RECORDS[1:])
    storage.close()
    _, records, truncation = open_storage(path)
    assert records == RECORDS and truncation is None


def test_frame_is_length_crc_and_json_on_one_line():
    line = frame_record({"a": 1})
    length, crc, body = line.split(b" ", 2)
    assert body == b'{"a":1}\n' and int(length, 16) == 7 and len(crc) == 8


@pytest.mark.parametrize("cut", [1, 5, 17, 18, 25])
def test_a_torn_last_record_is_truncated_and_reported(tmp_path, cut):
    path = str(tmp_path / "storage.dat")
    storage, _, _ = open_storage(path)
    storage.append(RECORDS)
    storage.close()
    good_size = os.path.getsize(path)
    torn = frame_record({"kind": "entry", "lsn": [1, 3], "op": {"key": "torn"}})[:cut]
    with open(path, "ab") as handle:
        handle.write(torn)
    storage, records, truncation = open_storage(path)
    assert records == RECORDS
    assert truncation is not None
    assert (truncation.offset, truncation.dropped_bytes, truncation.records_kept) == (good_size, cut, 3)
    assert "truncated a corrupt tail of" in truncation.describe()
    assert os.path.getsize(path) == good_size
    storage.append([{"kind": "entry", "lsn": [1, 3]}])  # appends continue after the cut
    storage.close()
    assert open_storage(path)[1] == RECORDS + [{"kind": "entry", "lsn": [1, 3]}]


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda line: line[:-1] + b"X", "record length does not end at a newline"),
        (lambda line: line[:20] + bytes([line[20] ^ 1]) + line[21:], "CRC mismatch"),
        (lambda line: b"zz" + line[2:], "bad record header"),
        (lambda line: b"%08x %08x " % (3, zlib.crc32(b"[1]")) + b"[1]\n", "record is not a JSON object"),
    ],
)
def test_a_corrupt_record_cuts_the_log_there_and_drops_what_follows(tmp_path, damage, reason):
    lines = [frame_record(r) for r in RECORDS]
    data = lines[0] + damage(lines[1]) + lines[2]
    records, valid, why = parse_records(data)
    assert records == RECORDS[:1] and valid == len(lines[0]) and why == reason


def test_fsync_always_syncs_once_per_append_and_never_does_not(tmp_path):
    fsync = CountingFsync()
    storage, _, _ = open_storage(str(tmp_path / "a.dat"), "always", fsync_fn=fsync)
    at_open = fsync.calls  # the new file's directory entry
    storage.append(RECORDS)
    storage.append(RECORDS[:1])
    storage.append([])
    storage.append(RECORDS[:1], sync=False)
    assert fsync.calls - at_open == 2 and storage.records_written == 5
    fsync = CountingFsync()
    storage, _, _ = open_storage(str(tmp_path / "b.dat"), "never", fsync_fn=fsync)
    storage.append(RECORDS)
    assert fsync.calls == 0
    storage.close()
    assert open_storage(str(tmp_path / "b.dat"), "never")[1] == RECORDS  # written through to the OS


def test_an_unknown_fsync_policy_is_refused(tmp_path):
    with pytest.raises(ValueError, match="fsync policy must be one of always, never"):
        open_storage(str(tmp_path / "c.dat"), "sometimes")


def read_journal(path):
    with open(path) as handle:
        return [json.loads(line) for line in handle]


def test_journal_lines_carry_node_seq_wall_then_the_event(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    journal, truncation = open_journal(path, "n1")
    assert truncation is None
    written = journal.append_events([{"event": "start"}, {"event": "role", "role": "follower", "term": 0,
                                                          "leader": None, "seq": 99}], wall=12.5)
    journal.close()
    lines = read_journal(path)
    assert lines == written
    assert lines[0] == {"node": "n1", "seq": 0, "wall": 12.5, "event": "start"}
    assert lines[1]["seq"] == 1 and lines[1]["role"] == "follower"  # the driver's seq wins
    assert list(lines[1])[:4] == ["node", "seq", "wall", "event"]


def test_journal_seq_continues_across_restarts(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    for _ in range(3):
        journal, _ = open_journal(path, "n2")
        journal.append_events([{"event": "start"}, {"event": "stop"}], wall=1.0)
        journal.close()
    assert [line["seq"] for line in read_journal(path)] == list(range(6))


def test_journal_seq_continues_past_a_long_tail(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    journal, _ = open_journal(path, "n1")
    journal.append_events([{"event": "apply", "pad": "x" * 50_000} for _ in range(5)], wall=0.0)
    journal.close()
    journal, _ = open_journal(path, "n1")
    assert journal.next_seq == 5


def test_a_cut_off_last_journal_line_is_removed_and_seq_continues(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    journal, _ = open_journal(path, "n1")
    journal.append_events([{"event": "start"}, {"event": "apply", "lsn": [1, 1]}], wall=3.0)
    journal.close()
    with open(path, "ab") as handle:
        handle.write(b'{"node": "n1", "seq": 2, "wa')
    journal, truncation = open_journal(path, "n1")
    assert truncation is not None and truncation.dropped_bytes == len(b'{"node": "n1", "seq": 2, "wa')
    journal.append_events([{"event": "start"}], wall=4.0)
    journal.close()
    assert [line["seq"] for line in read_journal(path)] == [0, 1, 2]


def test_check_writable_directory_creates_it_and_refuses_a_file_path(tmp_path):
    check_writable_directory(str(tmp_path / "new" / "dir"))
    assert (tmp_path / "new" / "dir").is_dir() and list((tmp_path / "new" / "dir").iterdir()) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError):
        check_writable_directory(str(tmp_path / "file" / "sub"))
