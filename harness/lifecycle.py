"""Who runs a run, and how it ended: the records that let a dead controller's run be recognised.

A controller that is SIGKILLed (or loses power) can neither tear down nor say that it stopped. So every
run records, before it creates anything:

* its **controller** (:class:`Controller`): pid, host name and the process's start time, in
  ``test.json`` (``"controller"``) and as labels on every container and network it creates
  (:meth:`Controller.labels`, with the run directory). The start time tells a recycled pid from the
  controller: a pid is the controller only if the process with that pid started when the controller
  did. ``harness clean`` removes the leftovers of runs whose controller is :data:`DEAD`, never those of
  a live one, and leaves runs of other hosts alone unless named.
* its **end** (:func:`end_record`), written into ``test.json`` (``"end"``) once teardown is over:
  ``completed``, ``interrupted`` (a signal), ``crashed`` (the harness failed), or ``killed`` (written
  afterwards by ``harness clean`` for a controller that died without one). A run with a controller
  record and no end is *unfinished*.

:func:`stop_of` reads these for the checking side: a run that did not complete, and whose final phase
never started, has no final reads, and the verdicts must say the controller stopped (with the time of
the last recorded event) rather than blame a checker for missing final reads.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from checkers.verdict import UNKNOWN, Verdict

ALIVE = "alive"
DEAD = "dead"
ELSEWHERE = "elsewhere"
"""A controller on another host: whether it lives cannot be told from here."""

LABEL_PID = "chaos-harness.controller.pid"
LABEL_HOST = "chaos-harness.controller.host"
LABEL_STARTED = "chaos-harness.controller.started"
LABEL_RUN_DIR = "chaos-harness.run-dir"

START_TOLERANCE_S = 1.0
"""Start times closer than this are the same process (both are read from the kernel's process table)."""

ENDS = ("completed", "interrupted", "crashed", "killed")
NEEDS_FINAL_PHASE = ("durability",)
"""Checkers that judge only what the final phase reads (checkers/durability.py, "Final reads")."""

_FINAL_MARK = b'"final":true'


@dataclass(frozen=True)
class Controller:
    """The process that runs a test: its pid, its host's name and its start time (epoch seconds)."""

    pid: int
    host: str
    started: float

    @classmethod
    def current(cls) -> Controller:
        pid = os.getpid()
        return cls(pid=pid, host=this_host(), started=psutil.Process(pid).create_time())

    def state(self) -> str:
        """:data:`ALIVE`, :data:`DEAD`, or :data:`ELSEWHERE` (another host)."""
        if self.host != this_host():
            return ELSEWHERE
        try:
            started = psutil.Process(self.pid).create_time()
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return DEAD
        except psutil.AccessDenied:  # it exists and is not ours to inspect: assume it is the controller
            return ALIVE
        return ALIVE if abs(started - self.started) < START_TOLERANCE_S else DEAD

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "host": self.host, "started": self.started}

    @classmethod
    def from_json(cls, data: Any) -> Controller | None:
        """The controller of a ``test.json`` ``"controller"`` entry; ``None`` if absent or malformed."""
        if not isinstance(data, Mapping):
            return None
        pid, host, started = data.get("pid"), data.get("host"), data.get("started")
        if not (isinstance(pid, int) and isinstance(host, str) and isinstance(started, int | float)):
            return None
        return cls(pid=pid, host=host, started=float(started))

    def labels(self, run_dir: Path | None = None) -> dict[str, str]:
        """Docker labels naming this controller (and the run directory, when known)."""
        labels = {LABEL_PID: str(self.pid), LABEL_HOST: self.host, LABEL_STARTED: repr(self.started)}
        if run_dir is not None:
            labels[LABEL_RUN_DIR] = str(Path(run_dir).resolve())
        return labels

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Controller | None:
        """The controller named by Docker labels; ``None`` if they name none (an older harness made it)."""
        try:
            return cls(pid=int(labels[LABEL_PID]), host=labels[LABEL_HOST], started=float(labels[LABEL_STARTED]))
        except (KeyError, ValueError):
            return None

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


PR_SET_PDEATHSIG = 1
"""prctl(2): the signal a process gets when the thread that started it ends."""


def libc():  # noqa: ANN201 - a ctypes library handle, or None where there is no prctl
    """The C library, for prctl(2); ``None`` off Linux or where it cannot be loaded."""
    import ctypes
    import ctypes.util

    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


def die_with_parent(parent: int, library: Any = None) -> None:
    """In a process the harness forked (a worker; a JVM between fork and exec): ask the kernel to SIGKILL it
    when the thread that forked it ends, however the harness ends (a SIGKILL too), and end now if ``parent``
    (the harness's pid) is gone already. ``library``: :func:`libc`, loaded before the fork by a caller that
    must not load it after (a ``preexec_fn``). Off Linux, nothing: a worker then ends when its pipe to the
    harness closes."""
    library = libc() if library is None else library
    if library is None:
        return
    library.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the harness ended before the request took effect
        os._exit(1)


def this_host() -> str:
    return socket.gethostname() or "localhost"


def end_record(how: str, *, cause: str | None, history: Path, detected_by: str | None = None) -> dict[str, Any]:
    """``test.json``'s ``"end"``: how the run ended, why, when, and how far its history got."""
    if how not in ENDS:
        raise ValueError(f"a run ends {', '.join(ENDS)}, not {how!r}")
    last, final = history_extent(history)
    record: dict[str, Any] = {
        "how": how,
        "cause": cause,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "last_event_s": None if last is None else round(last, 3),
        "final_phase_started": final,
    }
    if detected_by is not None:
        record["detected_by"] = detected_by
    return record


def history_extent(history: Path) -> tuple[float | None, bool]:
    """The time (s) of the history's last complete event, and whether its final phase began (an invoke
    marked ``final``). Reads the file as bytes, in blocks; a torn last line (a killed writer) is skipped."""
    try:
        final = False
        with history.open("rb") as handle:
            carry = b""
            for block in iter(lambda: handle.read(1 << 20), b""):
                if _FINAL_MARK in carry + block:
                    final = True
                    break
                carry = block[-len(_FINAL_MARK):]
        return _last_time(history), final
    except OSError:
        return None, False


def _last_time(history: Path) -> float | None:
    """The ``time`` (s) of the last complete, readable line, reading backwards from the end."""
    with history.open("rb") as handle:
        position = handle.seek(0, os.SEEK_END)
        pending = b""  # the start of a line whose beginning lies in an earlier block
        torn = True  # the first line seen from the end is complete only if the file ends with a newline
        while position > 0:
            step = min(1 << 16, position)
            position -= step
            handle.seek(position)
            lines = (handle.read(step) + pending).split(b"\n")
            pending = lines.pop(0) if position > 0 else b""
            for line in reversed(lines):
                if torn:
                    torn = False
                    if line:  # no newline at the end: the writer was killed mid-line
                        continue
                time = _event_time(line)
                if time is not None:
                    return time
        return None


def _event_time(line: bytes) -> float | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if isinstance(event, dict) and isinstance(event.get("time"), int):
        return event["time"] / 1e9
    return None


@dataclass(frozen=True)
class Stop:
    """A run that did not complete: how, why, the time of its last event, and whether its final phase
    began. :attr:`sentence` is what verdicts and the console say about it."""

    how: str
    cause: str | None
    last_event_s: float | None
    final_phase_started: bool

    @property
    def sentence(self) -> str:
        at = "" if self.last_event_s is None else f" at {self.last_event_s:.1f} s"
        who = {
            "interrupted": f"the run was interrupted ({self.cause or 'a signal'})",
            "crashed": "the harness crashed",
        }.get(self.how, "the controller stopped")
        return f"{who}{at}: {'its final phase was cut short' if self.final_phase_started else 'no final phase'}"

    def to_json(self) -> dict[str, Any]:
        return {
            "how": self.how,
            "cause": self.cause,
            "last_event_s": self.last_event_s,
            "final_phase_started": self.final_phase_started,
            "summary": self.sentence,
        }


def stop_of(test_doc: Mapping[str, Any], history: Path | bytes) -> Stop | None:
    """How a stored run stopped short, or ``None`` if it completed, is still running, or predates the
    controller record (an older harness, the simulator: nothing says it did not complete). ``history``
    is the file, or its content already read (the analysis reads runs through Spark's readers)."""
    end = test_doc.get("end")
    if isinstance(end, Mapping):
        if end.get("how") == "completed":
            return None
        last = end.get("last_event_s")
        return Stop(
            how=str(end.get("how")),
            cause=end.get("cause") if isinstance(end.get("cause"), str) else None,
            last_event_s=float(last) if isinstance(last, int | float) else None,
            final_phase_started=end.get("final_phase_started") is True,
        )
    controller = Controller.from_json(test_doc.get("controller"))
    if controller is None or controller.state() == ALIVE:
        return None
    last, final = history_extent(history) if isinstance(history, Path) else _extent_of(history)
    return Stop(how="killed", cause=None, last_event_s=last, final_phase_started=final)


def _extent_of(content: bytes) -> tuple[float | None, bool]:
    """:func:`history_extent` of a history's content (a torn last line skipped likewise)."""
    lines = content.split(b"\n")
    if lines[-1]:  # no newline at the end: the writer was killed mid-line
        lines.pop()
    last = next((t for t in map(_event_time, reversed(lines)) if t is not None), None)
    return last, _FINAL_MARK in content


def final_after_for(stop: Stop | None) -> int | None:
    """For a run that stopped before its final phase: a ``final_after`` (ns) past its last event, so
    that the durability checker takes no chaos-phase read for a final one; else ``None``."""
    if stop is None or stop.final_phase_started:
        return None
    return int((stop.last_event_s or 0.0) * 1e9) + 1


def blame_the_stop(verdicts: Mapping[str, Verdict], stop: Stop | None) -> dict[str, Verdict]:
    """``verdicts`` with the undecided verdict of each checker that needs a final phase saying why: the
    run stopped before it (:attr:`Stop.sentence`), not a fault of the checker. Decided verdicts stand."""
    if stop is None or stop.final_phase_started:
        return dict(verdicts)
    return {
        name: Verdict(UNKNOWN, stop.sentence, counterexample=verdict.counterexample, stats=verdict.stats)
        if name in NEEDS_FINAL_PHASE and verdict.valid == UNKNOWN
        else verdict
        for name, verdict in verdicts.items()
    }
