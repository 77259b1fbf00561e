"""Signals during a run: SIGTERM and SIGHUP stop a run the way Ctrl-C does, and teardown is shielded.

CI runners end a job that ran out of time with SIGTERM (then SIGKILL after a grace period); a closed
terminal sends SIGHUP. Both must leave what Ctrl-C leaves: a healed, resumed, collected and removed
cluster, and a stored run whose ``results.json`` says it was interrupted. :class:`Interrupts` does it by
*forwarding*: a SIGTERM or SIGHUP calls whatever handles SIGINT at that moment, so every place that
already reacts well to Ctrl-C reacts the same way to them (``asyncio.run`` cancels its main task;
elsewhere ``KeyboardInterrupt`` is raised; during teardown the shield only prints a line).

Contract of :meth:`Interrupts.shield`: from the moment teardown starts until the run's record is
written, no SIGINT, SIGTERM or SIGHUP interrupts anything; each prints one line saying teardown is
under way. A second signal therefore never abandons a teardown half-way (containers left behind, a
node left SIGSTOPped). Only SIGKILL can; ``harness clean`` removes what that leaves.

A signal the process was started with ignored (``nohup`` ignores SIGHUP; a shell's background job may
ignore SIGINT) stays ignored throughout: a nohup'd night is not stopped by a closed terminal.

While an event loop runs a run's coroutines (:func:`run_cancelling`), an interrupt cancels the main
coroutine at its next ``await``, as ``asyncio.Runner`` does with Ctrl-C, and is not raised as
``KeyboardInterrupt`` inside the loop (only a second one while the main coroutine still runs is): raised
there it can land between a future's completion and the scheduling of its waiter's wake-up, and that
task then waits for ever (``harness.sim.loop``).

Handlers can be installed only in the main thread; elsewhere (a run started from a worker thread)
:class:`Interrupts` does nothing and the process's own handlers apply.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from types import FrameType, TracebackType
from typing import Any, TypeVar

T = TypeVar("T")

FORWARDED = (signal.SIGTERM, signal.SIGHUP)
"""Signals handled as Ctrl-C."""
TEARDOWN_NOTICE = "teardown in progress (healing, collecting logs, removing containers); please wait"


_handled = 0
_cancellers: list[Callable[[], None]] = []  # the innermost run_cancelling's, what a forwarded signal calls


def handled() -> int:
    """How many signals every :class:`Interrupts` of this process has handled so far (forwarded or, under
    the shield, announced): a caller compares two readings to learn whether one came in between, even
    when what it called ended in some other exception than the interrupt."""
    return _handled


def signal_name(signum: int) -> str:
    """``SIGTERM``, ``SIGHUP``; Ctrl-C for SIGINT (what a person pressed)."""
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


class Interrupts:
    """While entered: SIGTERM and SIGHUP act as Ctrl-C; :meth:`shield` then makes all three harmless.

    :attr:`received` lists the signals that arrived, by name, in order (SIGINT appears only once the
    shield is up: before that it is not ours to see, see :meth:`cause`). Re-entrant use is not supported; one run, one ``Interrupts``.
    """

    def __init__(self, notice: str = TEARDOWN_NOTICE) -> None:
        self.notice = notice
        self.received: list[str] = []
        self.first: str | None = None
        self._previous: dict[int, Any] = {}
        self._ignored: set[int] = set()
        self._shielded = False
        self._active = False

    def __enter__(self) -> Interrupts:
        return self.install()

    def install(self) -> Interrupts:
        """Handle SIGTERM and SIGHUP as Ctrl-C from now until :meth:`restore`; returns itself."""
        if threading.current_thread() is not threading.main_thread() or self._active:
            return self
        self._active = True
        self._ignored = {signum for signum in (signal.SIGINT, *FORWARDED)
                         if signal.getsignal(signum) is signal.SIG_IGN}
        for signum in FORWARDED:
            if signum not in self._ignored:
                self._previous[signum] = signal.signal(signum, self._forward)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.restore()

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        global _handled
        _handled += 1
        self.received.append(signal_name(signum))
        if self.first is None:
            self.first = signal_name(signum)
        if _cancellers:  # a loop runs the run's coroutines: cancel its main one (even if SIGINT is ignored)
            _cancellers[-1]()
            return
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:  # SIGINT ignored (a job a shell started in the background) or default: stop all the same
            raise KeyboardInterrupt

    def _announce(self, signum: int, frame: FrameType | None) -> None:
        global _handled
        _handled += 1
        self.received.append(signal_name(signum))
        print(f"\n{self.notice}", file=sys.stderr, flush=True)

    def shield(self) -> None:
        """From now until :meth:`restore`, SIGINT, SIGTERM and SIGHUP only print the notice. Idempotent."""
        if not self._active or self._shielded:
            return
        self._shielded = True
        for signum in (signal.SIGINT, *FORWARDED):
            if signum not in self._ignored:
                self._previous.setdefault(signum, signal.getsignal(signum))
                signal.signal(signum, self._announce)

    def restore(self) -> None:
        """Put back the handlers found on entry. Idempotent."""
        if not self._active:
            return
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
        self._active = self._shielded = False

    def cause(self) -> str:
        """What interrupted the run: the first forwarded signal received before the shield, else Ctrl-C."""
        return self.first or "Ctrl-C"


def run_cancelling(runner: asyncio.Runner, main: Coroutine[Any, Any, T],
                   close: Callable[[bool], None] | None = None) -> T:
    """``runner.run(main)``, then ``close(raised)`` (default: ``runner.close()``; ``raised``: whether the run
    raised), every interrupt meanwhile cancelling ``main`` where it awaits instead of raising
    ``KeyboardInterrupt`` wherever it lands: Ctrl-C (unless the process ignores SIGINT) and what an
    :class:`Interrupts` forwards (SIGTERM and SIGHUP, even with SIGINT ignored, as in a script's background
    job). ``asyncio.Runner`` installs its handler only over Python's default one: with SIGINT ignored a
    forwarded signal was raised inside the loop, and with another handler (a SparkContext started earlier
    in the process installs one that raises) Ctrl-C was too. That handler is set aside while the loop runs
    and put back after.

    As ``asyncio.Runner.run``: ``main`` ended by the cancellation raises ``KeyboardInterrupt``; ``main``
    that catches it and returns has its result returned; a second signal while ``main`` runs, or once it
    was cancelled, raises ``KeyboardInterrupt`` at once (the way out of a run that does not end when asked).
    A first signal that comes once ``main`` has ended, while the loop finishes or closes, raises it once
    the loop is closed. Outside the main thread: ``runner.run(main)`` and ``close``, nothing else."""
    ending = close or (lambda raised: runner.close())
    if threading.current_thread() is not threading.main_thread():
        raised = True
        try:
            result = runner.run(main)
            raised = False
            return result
        finally:
            ending(raised)
    state: dict[str, Any] = {"task": None, "signals": 0, "cancelled": False, "active": True}

    def interrupt() -> None:
        state["signals"] += 1
        task = state["task"]
        running = task is not None and not task.done()
        if state["signals"] == 1:
            if running:
                state["cancelled"] = True
                task.cancel()
            return  # (not started yet: ``watched`` cancels it; ended: raised once the loop is closed)
        if running or state["cancelled"]:
            raise KeyboardInterrupt

    previous = signal.getsignal(signal.SIGINT)

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if not state["active"]:  # put back later by an Interrupts restoring what it found: the one before
            previous(signum, frame)
            return
        interrupt()

    async def watched() -> T:
        state["task"] = asyncio.current_task()
        if state["signals"]:  # one came before the loop ran main
            main.close()
            state["cancelled"] = True
            raise asyncio.CancelledError
        return await main

    ours = callable(previous)  # (not when ignored, nor at the system's default: the process would end)
    if ours:
        signal.signal(signal.SIGINT, on_sigint)  # (asyncio.Runner then installs none of its own)
    _cancellers.append(interrupt)
    raised = True
    try:
        try:
            result = runner.run(watched())
            raised = False
        except asyncio.CancelledError:
            task = state["task"]
            if state["cancelled"] and (task is None or task.uncancel() == 0):
                raise KeyboardInterrupt from None
            raise
        finally:
            ending(raised)
    finally:
        state["active"] = False
        _cancellers.remove(interrupt)
        if ours and signal.getsignal(signal.SIGINT) is on_sigint:
            signal.signal(signal.SIGINT, previous)
    if state["signals"] and not state["cancelled"]:
        raise KeyboardInterrupt  # it came once main had ended: raised here, out of the loop
    return result
