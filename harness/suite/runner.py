"""Running a suite's cases: one case through the controller (or the simulator), and several at once in
forked children (``--jobs``) whose live status comes back through pipes.

:func:`run_case` is the one place that calls the controller for a suite; :func:`run_parallel` runs cases
in child processes, forwards Ctrl-C/SIGTERM/SIGHUP to them and says which finished and how.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.suite.file import Case, case_command, test_spec

# The counters of the run under way in this process (None between runs).
_live_stats: Any = None




@dataclass
class CaseRun:
    """What running one case left behind: its run directory (if the store made one) and any crash."""

    run_dir: Path | None
    command: str
    error: str | None = None
    seconds: float = 0.0
    interrupted: bool = False  # Ctrl-C, SIGTERM or SIGHUP came during it (if only in its teardown): the suite stops








def run_case(case: Case, store: str) -> CaseRun:
    """Run one case through the controller: the only place a suite calls ``harness.run``.

    A crash of the controller, or a test it refuses, is recorded on the case (``error``), never raised:
    the suite goes on with the next case. While the run is under way its live counters are
    :data:`_live_stats` (what the parallel view shows).
    """
    from harness.interpreter import RunStats
    from harness.run import run

    global _live_stats
    started = time.monotonic()
    spec = test_spec(case, store)
    command = case_command(case, store)
    try:
        _live_stats = RunStats()
        result = run(spec, stats=_live_stats)
    except Exception as exc:  # noqa: BLE001 - one broken run must not end the night
        return CaseRun(
            run_dir=None,
            command=command,
            error=f"{type(exc).__name__}: {exc}",
            seconds=time.monotonic() - started,
        )
    finally:
        _live_stats = None
    return CaseRun(
        run_dir=result.run_dir,
        command=command,
        error=result.error or (result.results or {}).get("error"),
        seconds=time.monotonic() - started,
        interrupted=getattr(result, "stop_requested", False),
    )


def live_line(stats: Any, clock: Callable[[], float] = time.monotonic) -> str:
    """One line of a running case's counters (``harness.interpreter.RunStats``) for the parallel view."""
    if stats is None:
        return "starting"
    elapsed = 0.0 if stats.started_at is None else max(clock() - stats.started_at, 0.0)
    done = stats.completed
    leader = f"leader {stats.leader} term {stats.term}" if stats.leader else "no leader known"
    faults = ", ".join(stats.active_faults) or "none"
    return (
        f"{stats.phase} {elapsed:.0f} s: {stats.invoked} ops (ok {done['ok']}, fail {done['fail']}, "
        f"info {done['info']}), {leader}, faults {faults}"
    )


STATUS_INTERVAL_S = 1.0


def _child(run: Callable[[Case, str], CaseRun], case: Case, store: str, pipe: Any) -> None:
    import threading

    lock = threading.Lock()  # the reporter thread and this one write to the one pipe

    def send(kind: str, data: Any) -> None:
        with lock:
            try:
                pipe.send((kind, data))
            except OSError:  # the suite is gone: nobody to tell
                pass

    send("started", None)
    stop = threading.Event()

    def report() -> None:
        while not stop.wait(STATUS_INTERVAL_S):
            send("status", live_line(_live_stats))

    reporter = threading.Thread(target=report, name="suite-status", daemon=True)
    reporter.start()
    try:
        outcome = run(case, store)
    except BaseException as exc:  # noqa: BLE001 - Ctrl-C or a crash of an injected runner: still report
        outcome = CaseRun(None, _command_or_why(case, store), error=f"{type(exc).__name__}: {exc}")
    finally:
        stop.set()
    send("done", outcome)
    pipe.close()


def _command_or_why(case: Case, store: str) -> str:
    """:func:`case_command`, or why there is none (for a case that never ran or whose process died)."""
    try:
        return case_command(case, store)
    except Exception as exc:  # noqa: BLE001
        return f"(no command: {type(exc).__name__}: {exc})"


@dataclass
class _Running:
    """A case under way in its process, and the end of its pipe the suite reads."""

    process: Any
    case: Case
    pipe: Any
    started: float


def run_parallel(
    cases: Sequence[Case],
    store: str,
    jobs: int,
    *,
    run: Callable[[Case, str], CaseRun] = run_case,
    progress: Any,
    on_done: Callable[[Case, CaseRun], None],
) -> bool:
    """Run ``cases`` in up to ``jobs`` processes at once, in case order; ``on_done`` gets each result as
    it comes (the order of completion). True if a signal stopped it.

    Ctrl-C (the whole process group gets it: each running case tears down as ``harness run`` does),
    SIGTERM or SIGHUP (passed on to the running cases) or a case a signal interrupted stops starting new
    cases and waits for the running ones; the cases never started are reported as not run.
    """
    import multiprocessing
    import signal
    import threading
    from multiprocessing.connection import wait

    from harness.signals import FORWARDED

    context = multiprocessing.get_context("spawn")
    waiting = list(cases)
    running: dict[int, _Running] = {}
    stopping = threading.Event()

    def forward(signum: int, frame: Any) -> None:
        """SIGTERM or SIGHUP: stop starting cases, and pass it on to the running ones, whose runs take it
        as Ctrl-C (harness.signals) and tear down."""
        stopping.set()
        for child in running.values():
            if child.process.is_alive() and child.process.pid is not None:
                os.kill(child.process.pid, signum)

    def start_more() -> None:
        while waiting and len(running) < jobs and not stopping.is_set():
            case = waiting.pop(0)
            ours, theirs = context.Pipe(duplex=False)
            process = context.Process(target=_child, args=(run, case, store, theirs), name=f"suite-case-{case.index}")
            process.start()
            theirs.close()  # the child holds the only writing end: its exit ends the pipe
            running[case.index] = _Running(process, case, ours, time.monotonic())
        if stopping.is_set() and waiting:
            for case in waiting:
                on_done(case, CaseRun(None, _command_or_why(case, store), error="not run: the suite was stopped"))
            waiting.clear()

    def finish(index: int, outcome: CaseRun) -> None:
        child = running.pop(index)
        child.pipe.close()
        child.process.join()
        if outcome.interrupted:  # a signal stopped that run: the suite stops too (as one at a time)
            stopping.set()
        on_done(child.case, outcome)
        progress.case_finished(index, _finished_line(child.case, outcome))

    def receive() -> None:
        by_pipe = {child.pipe: index for index, child in running.items()}
        for pipe in wait(list(by_pipe), timeout=0.5):
            index = by_pipe[pipe]
            try:
                kind, data = pipe.recv()
            except (EOFError, OSError):  # the pipe ended before the CaseRun came: the process died
                child = running[index]
                child.process.join()
                died = f"the process running this case died (exit code {child.process.exitcode})"
                finish(index, CaseRun(None, _command_or_why(child.case, store), error=died,
                                      seconds=time.monotonic() - child.started))  # fmt: skip
                continue
            if kind == "started":
                progress.case_started(index, running[index].case.name)
            elif kind == "status":
                progress.case_status(index, data)
            elif kind == "done":
                finish(index, data)

    restore: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        restore = {signum: signal.signal(signum, forward) for signum in FORWARDED}
    try:
        while waiting or running:
            try:
                start_more()
                receive()
            except KeyboardInterrupt:
                # The running cases got the Ctrl-C too (one process group) and tear down on their own.
                stopping.set()
                progress.note("interrupted: no new case starts; waiting for the running ones to tear down")
    finally:
        for signum, previous in restore.items():
            signal.signal(signum, previous)
    return stopping.is_set()


def _finished_line(case: Case, outcome: CaseRun) -> str:
    if outcome.error and outcome.run_dir is None:
        return f"[{case.index + 1}] {case.name}: crashed after {outcome.seconds:.0f} s: {outcome.error}"
    where = f" ({outcome.run_dir})" if outcome.run_dir else ""
    error = f", {outcome.error}" if outcome.error else ""
    return f"[{case.index + 1}] {case.name}: ran in {outcome.seconds:.0f} s{error}{where}"
