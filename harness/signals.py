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

Handlers can be installed only in the main thread; elsewhere (a run started from a worker thread)
:class:`Interrupts` does nothing and the process's own handlers apply.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType, TracebackType
from typing import Any

FORWARDED = (signal.SIGTERM, signal.SIGHUP)
"""Signals handled as Ctrl-C."""
TEARDOWN_NOTICE = "teardown in progress (healing, collecting logs, removing containers); please wait"


_handled = 0


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
