"""A node's files: the storage file that makes the core's state durable, and the journal.

**Storage file** (``DATA_DIR/storage.dat``). The core hands the runtime JSON records to persist (term,
vote, log entries: ``cluster.core.storage`` owns their meaning); this module only makes them durable and
gives them back, in order, on the next start. One record per line::

    <length: 8 hex digits> <CRC32: 8 hex digits> <JSON record>\\n

``length`` counts the JSON bytes and the CRC32 covers them. A node killed in the middle of a write leaves
a torn tail; on open the file is read up to the first record that fails any check (header, length,
newline, CRC, JSON object), truncated there, and the cut is returned as a ``Truncation`` for the node to
log. Records after a bad one are dropped too: the log is only trusted as a prefix.

The fsync policy (``always``, the default, or ``never`` as BlazingMQ runs) decides whether ``append``
waits for the disk. With ``never`` a record survives a process kill (the OS has it) but not a machine
crash. One ``append`` call is one write and at most one fsync, however many records it carries, so a
driver that batches the records of several core steps gets group commit for free.

**Journal** (``journal.jsonl``, FORMATS.md "Node journal"). Each event the core emits is written as one
JSON line with ``node``, ``seq`` and ``wall`` added, handed to the OS before ``append_events`` returns
(no buffering in the process). ``seq`` continues from the last journalled value after a restart; a
last line cut off by a crash is removed first.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

FsyncPolicy = Literal["always", "never"]
FSYNC_POLICIES: tuple[str, ...] = ("always", "never")

STORAGE_FILE = "storage.dat"
JOURNAL_FILE = "journal.jsonl"

_HEADER = re.compile(rb"([0-9a-f]{8}) ([0-9a-f]{8}) ")
_HEADER_LEN = 18
_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Truncation:
    """Where a file was cut on open, and why (for the node's log)."""

    path: str
    offset: int
    dropped_bytes: int
    records_kept: int
    reason: str

    def describe(self) -> str:
        return (f"{self.path}: truncated a corrupt tail of {self.dropped_bytes} bytes at offset {self.offset} "
                f"({self.reason}); {self.records_kept} valid records kept")


def frame_record(record: dict[str, Any]) -> bytes:
    """One storage record as its line on disk."""
    body = _encoder.encode(record).encode("utf-8")
    return b"%08x %08x " % (len(body), zlib.crc32(body)) + body + b"\n"


def parse_records(data: bytes) -> tuple[list[dict[str, Any]], int, str | None]:
    """The valid prefix of a storage file's bytes: ``(records, valid_length, reason the rest is bad)``.

    ``reason`` is None when the whole input is valid.
    """
    records: list[dict[str, Any]] = []
    pos, size = 0, len(data)
    while pos < size:
        header = _HEADER.match(data, pos)
        if header is None:
            if size - pos < _HEADER_LEN:
                return records, pos, "incomplete record header"
            return records, pos, "bad record header"
        length, crc = int(header.group(1), 16), int(header.group(2), 16)
        start = pos + _HEADER_LEN
        end = start + length
        if end >= size:
            return records, pos, "incomplete record"
        if data[end] != 0x0A:
            return records, pos, "record length does not end at a newline"
        body = data[start:end]
        if zlib.crc32(body) != crc:
            return records, pos, "CRC mismatch"
        try:
            record = json.loads(body)
        except (ValueError, RecursionError):
            return records, pos, "record is not JSON"
        if not isinstance(record, dict):
            return records, pos, "record is not a JSON object"
        records.append(record)
        pos = end + 1
    return records, pos, None


class StorageFile:
    """The append-only storage file of one node. Open it with ``open_storage``."""

    def __init__(self, path: str, fd: int, fsync: FsyncPolicy, fsync_fn: Callable[[int], None]) -> None:
        self.path = path
        self.fsync_policy = fsync
        self._fd = fd
        self._fsync = fsync_fn
        self.records_written = 0
        self.fsyncs = 0

    def append(self, records: Iterable[dict[str, Any]], sync: bool = True) -> None:
        """Make ``records`` durable in order (per the fsync policy) before returning. ``sync=False``
        only hands them to the OS (they survive a process kill; the next synced append covers them)."""
        frames = [frame_record(r) for r in records]
        if not frames:
            return
        view = memoryview(b"".join(frames))
        while view:
            view = view[os.write(self._fd, view):]
        self.records_written += len(frames)
        if sync and self.fsync_policy == "always":
            self._fsync(self._fd)
            self.fsyncs += 1

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def open_storage(
    path: str, fsync: FsyncPolicy = "always", fsync_fn: Callable[[int], None] = os.fsync
) -> tuple[StorageFile, list[dict[str, Any]], Truncation | None]:
    """Open (creating if absent) a storage file for appending.

    Returns the file, every valid record in order, and the ``Truncation`` made if the tail was corrupt.
    ``fsync_fn`` is the fsync used by the ``always`` policy (a test passes a counter).
    """
    if fsync not in FSYNC_POLICIES:
        raise ValueError(f"fsync policy must be one of {', '.join(FSYNC_POLICIES)}, not {fsync!r}")
    created = not os.path.exists(path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        data = _read_all(fd)
        records, valid, reason = parse_records(data)
        truncation = None
        if reason is not None:
            os.ftruncate(fd, valid)
            fsync_fn(fd)
            truncation = Truncation(path, valid, len(data) - valid, len(records), reason)
        if created and fsync == "always":
            _fsync_directory(os.path.dirname(os.path.abspath(path)), fsync_fn)
    except BaseException:
        os.close(fd)
        raise
    return StorageFile(path, fd, fsync, fsync_fn), records, truncation


class JournalWriter:
    """Appends a node's journal events, one flushed JSON line each. Open it with ``open_journal``."""

    def __init__(self, path: str, fd: int, node_id: str, next_seq: int) -> None:
        self.path = path
        self.node_id = node_id
        self.next_seq = next_seq
        self._fd = fd

    def append_events(self, events: Iterable[dict[str, Any]], wall: float) -> list[dict[str, Any]]:
        """Write each event with ``node``, ``seq``, ``wall`` added (those three always win over the
        event's own keys) and return the lines as written."""
        lines: list[dict[str, Any]] = []
        for event in events:
            line: dict[str, Any] = {"node": self.node_id, "seq": self.next_seq, "wall": wall}
            for key, value in event.items():
                line.setdefault(key, value)
            self.next_seq += 1
            lines.append(line)
        if lines:
            data = "".join(_encoder.encode(line) + "\n" for line in lines).encode("utf-8")
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
        return lines

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def open_journal(path: str, node_id: str) -> tuple[JournalWriter, Truncation | None]:
    """Open a journal for appending; ``seq`` continues after the last complete line's ``seq``.

    A last line without its newline (a crash mid-write) is cut off and reported.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        next_seq, truncation = _recover_journal(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return JournalWriter(path, fd, node_id, next_seq), truncation


_CHUNK = 1 << 16


def _recover_journal(fd: int, path: str) -> tuple[int, Truncation | None]:
    size = os.fstat(fd).st_size
    truncation = None
    if size and os.pread(fd, 1, size - 1) != b"\n":
        new_size = 0
        for start, chunk in _chunks_backwards(fd, size):
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                new_size = start + nl + 1
                break
        os.ftruncate(fd, new_size)
        truncation = Truncation(path, new_size, size - new_size, -1, "last line cut off")
        size = new_size
    return _last_seq(fd, size) + 1, truncation


def _last_seq(fd: int, size: int) -> int:
    """The ``seq`` of the last line that has one, scanning backwards; -1 if none."""
    carry = b""
    for start, chunk in _chunks_backwards(fd, size):
        pieces = (chunk + carry).split(b"\n")
        carry = pieces[0] if start > 0 else b""
        for raw in reversed(pieces if start == 0 else pieces[1:]):
            seq = _seq_of(raw)
            if seq is not None:
                return seq
    return -1


def _seq_of(raw: bytes) -> int | None:
    if not raw.strip():
        return None
    try:
        seq = json.loads(raw).get("seq")
    except (ValueError, AttributeError, RecursionError):
        return None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def _chunks_backwards(fd: int, size: int) -> Iterable[tuple[int, bytes]]:
    end = size
    while end > 0:
        start = max(0, end - _CHUNK)
        yield start, os.pread(fd, end - start, start)
        end = start


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0) if size else b""


def _fsync_directory(directory: str, fsync_fn: Callable[[int], None]) -> None:
    dfd = os.open(directory, os.O_RDONLY)
    try:
        fsync_fn(dfd)
    finally:
        os.close(dfd)


def check_writable_directory(directory: str) -> None:
    """Create ``directory`` if needed and prove a file can be written in it; ``OSError`` otherwise."""
    os.makedirs(directory, exist_ok=True)
    probe = os.path.join(directory, f".write-probe-{os.getpid()}")
    with open(probe, "wb") as handle:
        handle.write(b"ok")
    os.unlink(probe)
