"""Entry point of ``python -m checkers`` (see :mod:`checkers.cli`): runs the command under a supervising
process that holds its time and memory budgets, and turns any failure into exit 255 with one line."""

import time

_ENTERED = time.monotonic()  # before any import of the checkers: --timeout counts from the process start

import os  # noqa: E402
import sys  # noqa: E402


def _run() -> int:
    try:
        from checkers.cli import process_start, run
    except BaseException as exc:  # noqa: BLE001 - a broken install is a crash, never "invalid" (1)
        sys.stderr.write(f"error: the checker crashed (exit 255): {type(exc).__name__}: {exc}\n")
        return 255
    started = min(process_start(), _ENTERED)
    try:
        return run(started=started)
    except BaseException as exc:  # noqa: BLE001 - never exit 1, which says the history is invalid
        if isinstance(exc, SystemExit) and exc.code in (0, None):
            return 0
        if isinstance(exc, KeyboardInterrupt):
            return 130
        sys.stderr.write(f"error: the checker crashed (exit 255): {type(exc).__name__}: {exc}\n")
        return 255


if __name__ == "__main__":
    code = _run()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - a closed pipe: the code still stands
        code = code or 255
    os._exit(code)
