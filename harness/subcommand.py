"""What every ``harness`` subcommand shares: the exit-code convention, one-sentence usage errors, the
argument types of the command line, the verdict words, and ``run_command``, the guard around a command.

Each CLI module (``harness/cli.py``, ``harness/sim/cli.py``, ``harness/analysis/cli.py``,
``harness/report/cli.py``) keeps its own commands and registers them with ``set_defaults(handler=...)``,
a ``handler(args, console, err) -> int``; ``run_command`` parses, dispatches and turns what escapes into
an exit code.

Exit codes (ARCHITECTURE.md, Jepsen's convention): 0 valid, 1 invalid, 2 unknown (or interrupted),
254 bad arguments or configuration, 255 the harness itself crashed.
"""

from __future__ import annotations

import argparse
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn, TypeVar

from rich.console import Console
from rich.text import Text

from checkers.verdict import UNKNOWN, Valid
from harness.signals import Interrupts

EXIT_INTERRUPTED = 2
EXIT_BAD_CONFIG = 254
EXIT_CRASH = 255

VERDICT_WORDS = {True: "valid", False: "INVALID", UNKNOWN: "unknown"}
VERDICT_STYLES = {True: "bold green", False: "bold red", UNKNOWN: "bold yellow"}

_N = TypeVar("_N", int, float)


class UsageError(Exception):
    """Bad command-line arguments, found while parsing or after: one sentence, exit 254."""


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are a ``UsageError`` ("PROG: what is wrong") instead of exit 2,
    which is the exit code of an unknown verdict."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


# -- argument types: each rejects bad text with one sentence naming it ----------------------------------------
# (``not v < 0`` where a bound is "not negative": NaN has always passed those, and still does.)


def seconds(text: str) -> float:
    """A positive number of seconds."""
    return _number(text, float, "a number of seconds", lambda v: v > 0, "must be positive")


def seconds_or_no_limit(text: str) -> float:
    """A number of seconds, 0 meaning no limit."""
    return _number(text, float, "a number of seconds", lambda v: not v < 0, "must not be negative (0: no limit)")


def count(text: str) -> int:
    """A whole number of at least 1."""
    return _number(text, int, "a whole number", lambda v: v >= 1, "must be at least 1")


def count_or_zero(text: str) -> int:
    """A whole number of at least 0."""
    return _number(text, int, "a whole number", lambda v: v >= 0, "must not be negative")


def rate(text: str) -> float | None:
    """Operations per second per client process; 0 means no pause between operations (``None``)."""
    value = _number(text, float, "a number of operations per second", lambda v: not v < 0,
                    "must not be negative (0: no pause between operations)")
    return None if value == 0 else value


def port(text: str) -> int:
    """A TCP port, 0 meaning any free port."""
    return _number(text, int, "a port number", lambda v: 0 <= v <= 65535,
                   "is not a port number (0 to 65535; 0: any free port)")


def _number(text: str, kind: type[_N], what: str, acceptable: Callable[[_N], bool], complaint: str) -> _N:
    """``text`` read as ``kind``; else "'TEXT' is not WHAT", and "'TEXT' COMPLAINT" if not ``acceptable``."""
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if not acceptable(value):
        raise argparse.ArgumentTypeError(f"{text!r} {complaint}")
    return value


def memory_size(text: str) -> str:
    """A memory size in Docker's notation (``512m``, ``2g``), at least a node's minimum."""
    from harness.topology import memory_bytes

    try:
        memory_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text.strip().lower()


def fault_packages(text: str) -> tuple[str, ...]:
    """``--nemesis``: comma-separated fault packages; ``none`` (or nothing) means no faults."""
    return tuple(n.strip() for n in text.split(",") if n.strip() and n.strip() != "none")


# -- verdicts on the console ----------------------------------------------------------------------------------


def plain_console(*, stderr: bool = False) -> Console:
    """A console that prints text as it is: no Rich markup (``[/]`` in a user's argument, a path or an
    error), no emoji codes (``module:factory`` is not ``:factory:``). Styling is given with ``Text``."""
    return Console(stderr=stderr, soft_wrap=True, markup=False, emoji=False)


def print_checker_verdicts(console: Console, results: dict) -> None:
    """One line per checker of a ``results.json`` document: its verdict, its name, its summary."""
    for name, verdict in results.get("checkers", {}).items():
        valid: Valid = verdict.get("valid")
        console.print(Text.assemble((f"  {VERDICT_WORDS.get(valid, valid):8} ", VERDICT_STYLES.get(valid, "")),
                                    (f"{name}: ", "bold"), verdict.get("summary", "")))
    for name, reason in (results.get("not_applicable") or {}).items():
        console.print(Text.assemble(("  n/a      ", "dim"), (f"{name}: ", "bold"), str(reason)))


def verdict_line(valid: Valid, details: str) -> Text:
    """``verdict WORD   details``, the last line a person reads about a run."""
    word = VERDICT_WORDS.get(valid, str(valid))
    return Text.assemble(("verdict ", "bold"), (word, VERDICT_STYLES.get(valid, "bold")), details)


# -- the guard around a command -------------------------------------------------------------------------------


def run_command(
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    bad_input: tuple[type[Exception], ...] = (),
) -> int:
    """Parse ``argv`` and call the chosen command's ``handler(args, console, err)``; return its exit code.

    A usage error is its one sentence on stderr and 254; ``--help`` exits 0; an exception of a
    ``bad_input`` type is "harness COMMAND: sentence" and 254; Ctrl-C, SIGTERM and SIGHUP are
    "interrupted" and 2 (``harness.signals``); anything else is the harness crashing: the traceback, a
    sentence saying so, and 255.
    """
    console, err = plain_console(), plain_console(stderr=True)
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        err.print(str(exc), markup=False, highlight=False)
        return EXIT_BAD_CONFIG
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    try:
        with Interrupts():
            return args.handler(args, console, err)
    except bad_input as exc:
        err.print(f"harness {args.command}: {exc}", markup=False, highlight=False)
        return EXIT_BAD_CONFIG
    except KeyboardInterrupt:
        err.print("interrupted")
        return EXIT_INTERRUPTED
    except Exception:  # noqa: BLE001 - the harness itself crashed: say so, with the traceback
        err.print(traceback.format_exc(), markup=False, highlight=False)
        err.print("the harness crashed (exit 255); the traceback is above", markup=False)
        return EXIT_CRASH
