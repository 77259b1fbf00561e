"""The ``harness`` command's entry point, which imports nothing before it can answer a signal.

Importing the harness takes a second or two (more on a loaded machine). A Ctrl-C in that time printed a
40-line ``KeyboardInterrupt`` traceback and exited 130, a SIGTERM ended it silently with 143. Here SIGTERM
and SIGHUP act as Ctrl-C from the first moment (``harness.signals`` takes over once a command runs), and a
Ctrl-C that lands before the command has its own handling is "interrupted" and exit 2, as at any later
moment. A signal the process was started with ignored (``nohup``) stays ignored.
"""

from __future__ import annotations

import logging
import signal
import sys
from types import FrameType

INTERRUPTED = 2


def _as_ctrl_c(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> int:
    """Run the ``harness`` command line (``harness.cli.main``); returns its exit code."""
    # A log file that cannot take a line (its disk is full) must not print a traceback per line: the
    # harness says what failed once, where it matters (harness.history, harness.cli).
    logging.raiseExceptions = False
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _as_ctrl_c)
    try:
        from harness.cli import main as command

        return command()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr, flush=True)
        return INTERRUPTED
