"""The history writer: appends client and nemesis events to ``history.jsonl`` as they happen.

Contract (FORMATS.md, "History"):

* every event gets ``index`` 0, 1, 2, ... in file order and ``time``, the nanoseconds since the test
  started on the controller's monotonic clock (injected, so tests pass a fake one);
* each line is written and flushed before :meth:`HistoryWriter.append` returns (and ``os.fsync``-ed when
  asked), so a crash of the controller loses nothing already observed; except with ``buffered=True``
  (the simulator's runs, in virtual time): lines are kept in memory and written in large pieces, at the
  latest when the writer closes, since a crash of a simulated run loses nothing its seed cannot replay;
* ``time`` never goes backwards in file order, even if the injected clock does: the index and the time
  are assigned together under one lock;
* a line is written whole or not at all: when the disk is full (or any write fails) the file is cut back
  to its last whole line and :class:`HistoryWriteError` names the file and the cause; the run stops there
  as interrupted, its history judgeable up to that line.

The writer is safe to call from the coroutines of one event loop and from worker threads (the lock is a
``threading.Lock`` held only while a line is formatted and written; nothing awaits under it). It does
not check the invoke/completion pairing: :func:`checkers.history.load_history` does that on what it wrote.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

Process = int | str
MonotonicNs = Callable[[], int]

def _default(value: Any) -> Any:
    """JSON fallback for values that are not JSON (tuples are lists already): sets, bytes, objects."""
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return repr(value)


def line_encoder(default: Callable[[Any], Any] | None = None) -> Callable[[Any], str]:
    """``json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=default).encode``, the same
    bytes for every value, without the Python layers ``encode`` and ``iterencode`` put around the C encoder
    per call (they build a new C encoder every time): a simulated run encodes tens of thousands of history
    and journal lines per seed. Without the C encoder (another Python), the plain ``encode``."""
    encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=default)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    # Arguments as ``JSONEncoder.iterencode`` passes them (markers None: no circular check; a cycle is a
    # RecursionError here, not a ValueError, and no line of ours has one).
    c_encode = make(None, encoder.default, json.encoder.encode_basestring, None, ":", ",", False, False, True)
    join = "".join

    def encode(value: Any) -> str:
        return join(c_encode(value, 0))

    return encode


# One encoder for every line: ``json.dumps`` with options builds a new one per call (a simulated run
# writes about 200 lines per simulated second). Same options, same bytes.
_encode = line_encoder(_default)

BUFFER_BYTES = 1 << 20
"""A buffered writer (``buffered=True``) writes when this much is waiting, and when it closes."""


class HistoryWriteError(OSError):
    """The history could not be written (the disk is full, say); the file ends with its last whole line."""

    def __init__(self, path: Path, cause: OSError) -> None:
        reason = cause.strerror or str(cause)
        super().__init__(cause.errno, f"could not write the history {path}: {reason}; free space on its disk "
                                      "and run the test again")

    def __str__(self) -> str:
        return str(self.strerror)


class HistoryWriter:
    """Appends FORMATS.md events to one ``history.jsonl``; use it as a context manager or :meth:`close`.

    ``clock`` returns monotonic nanoseconds (``time.monotonic_ns`` by default); ``start_ns`` is the
    test's start on that clock (the clock's value at construction by default), so times are relative to
    it. ``fsync`` makes every line durable on disk, not only handed to the OS. ``buffered`` keeps lines in
    memory until :data:`BUFFER_BYTES` wait or the writer closes (module docstring; the simulator's runs).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        clock: MonotonicNs = time.monotonic_ns,
        *,
        start_ns: int | None = None,
        fsync: bool = False,
        buffered: bool = False,
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        self.start_ns = clock() if start_ns is None else start_ns
        self._fsync = fsync
        self._lock = threading.Lock()
        self._index = 0
        self._last_time = 0
        self._buffered = buffered
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._file: BinaryIO | None = self.path.open("ab", buffering=0)
        self._size = self._file.tell()
        if self._size != 0:
            self._file.close()
            self._file = None
            raise ValueError(f"{self.path} already holds a history; a run writes a new file")

    def start(self) -> None:
        """Make now the test's start (time 0), if nothing has been written yet: the interpreter calls it
        when the workload begins, after whatever preparation it does not record."""
        with self._lock:
            if self._index == 0:
                self.start_ns = self._clock()

    @property
    def count(self) -> int:
        """How many events have been written."""
        return self._index

    def elapsed_ns(self) -> int:
        """Nanoseconds since the test started, on the writer's clock."""
        return self._clock() - self.start_ns

    def append(
        self,
        process: Process,
        type: str,
        f: str,
        key: Any = None,
        value: Any = None,
        *,
        node: str | None = None,
        lsn: Any = None,
        error: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """Write one event and return it as written (with its ``index`` and ``time``).

        The optional fields ``node``, ``lsn``, ``error`` (and any ``extra`` field FORMATS.md adds later)
        are written only when they are not ``None``; ``key`` and ``value`` are always written.
        """
        with self._lock:
            if self._file is None:
                raise ValueError(f"history {self.path} is closed")
            now = max(self._clock() - self.start_ns, self._last_time, 0)
            event: dict[str, Any] = {
                "index": self._index,
                "time": now,
                "process": process,
                "type": type,
                "f": f,
                "key": key,
                "value": value,
            }
            for name, field_value in (("node", node), ("lsn", lsn), ("error", error)):
                if field_value is not None:
                    event[name] = list(field_value) if name == "lsn" else field_value
            for name, field_value in extra.items():
                if field_value is not None:
                    event[name] = field_value
            line = (_encode(event) + "\n").encode()
            if self._buffered:
                self._pending.append(line)
                self._pending_size += len(line)
                if self._pending_size >= BUFFER_BYTES:
                    self._flush_pending(uncounted=1)
            else:
                self._write(line)
            self._index += 1
            self._last_time = now
            return event

    def _flush_pending(self, uncounted: int = 0) -> None:
        """Write what a buffered writer holds, whole lines only (see :meth:`_write`): in one piece, or, when
        that fails (a full disk), line by line, so the file keeps every line that fits, as an unbuffered
        writer's would, and the error is raised at the first line that does not. ``uncounted``: how many of
        the last lines held are not in :attr:`count` yet (the one :meth:`append` is writing)."""
        if not self._pending:
            return
        pending = self._pending
        self._pending, self._pending_size = [], 0
        written = 0
        try:
            if len(pending) > 1:
                try:
                    self._write(b"".join(pending))
                    return
                except HistoryWriteError:
                    pass
            for line in pending:
                self._write(line)
                written += 1
        except HistoryWriteError:
            # The lines after the refused one are lost: the next line written (if the disk has room again)
            # takes the index after the file's last, so the file's indexes stay 0, 1, 2, ...
            self._index += uncounted - len(pending) + written
            raise

    def _write(self, data: bytes) -> None:
        """Append ``data`` whole (several writes if the OS takes part of it), or cut the file back to where
        it was and raise :class:`HistoryWriteError`."""
        assert self._file is not None
        fd = self._file.fileno()
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            if self._fsync:
                os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, self._size)
            except OSError:
                pass  # the reader takes a torn last line as the point where the history was cut short
            raise HistoryWriteError(self.path, exc) from None
        self._size += len(data)

    def invoke(
        self,
        process: Process,
        f: str,
        key: Any = None,
        value: Any = None,
        *,
        node: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """Record that ``process`` invokes ``f`` on ``key``. ``extra`` fields (a queue put's ``guid``,
        ``final: True`` on the final phase's operations) are written as given."""
        return self.append(process, "invoke", f, key, value, node=node, **extra)

    def complete(
        self,
        process: Process,
        type: str,
        f: str,
        key: Any = None,
        value: Any = None,
        *,
        node: str | None = None,
        lsn: Any = None,
        error: str | None = None,
        group: str | None = None,
    ) -> dict[str, Any]:
        """Record the completion (``ok``, ``fail`` or ``info``) of ``process``'s outstanding operation.
        ``group`` (FORMATS.md): the group whose leader served it, or that a nemesis operation aimed at;
        ``None`` (not written) for the system's single group."""
        if type not in ("ok", "fail", "info"):
            raise ValueError(f"a completion is ok, fail or info, not {type!r}")
        return self.append(process, type, f, key, value, node=node, lsn=lsn, error=error, group=group)

    def flush(self) -> None:
        """Write what a buffered writer holds (nothing to do for an unbuffered one)."""
        with self._lock:
            if self._file is not None:
                self._flush_pending()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                try:
                    self._flush_pending()
                    if self._fsync:
                        os.fsync(self._file.fileno())
                finally:
                    self._file.close()
                    self._file = None

    @property
    def closed(self) -> bool:
        return self._file is None

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
