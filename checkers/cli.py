"""``python -m checkers``: check history files from the command line.

    python -m checkers check FILE... --model MODEL [--checker NAME]... [--journals DIR] [--json]
                       [--format auto|jsonl|edn|jepsen-json] [--independent auto|yes|no] [--initial JSON]
                       [--semantics strict|knossos]
                       [--timeout S] [--max-states N] [--max-memory BYTES] [--workers N] [--final-after NS]
    python -m checkers list

``FILE`` is a history in FORMATS.md's format (``history.jsonl``), a run directory holding one, a
directory holding a Jepsen ``history.edn`` (Jepsen's store layout), or a Jepsen history (``history.edn``, Knossos' EDN files, JSON exports of Jepsen operations): the format is
chosen by extension (``.edn``) unless ``--format`` says (see :mod:`checkers.jepsen` for the mapping).
Journals come from ``--journals DIR`` (a run directory or its ``nodes/``), else from
``nodes/*/journal.jsonl`` beside the history when present. Without ``--checker``, every checker that
applies to the input runs (see :mod:`checkers.registry`). Each file is judged by
:func:`checkers.judge.judge_files`, the path the harness's post-run check takes too.

Budgets: ``--timeout`` bounds the whole command in wall seconds, counted from the process's start
(interpreter start-up and imports included): reading and checking stop at it, a file not reached is
``unknown``; ``--max-states`` and ``--max-memory`` (bytes, or with a K/M/G suffix) bound the
linearizability search's memo; a key out of budget is ``unknown`` with its name and the budget, the
others are still decided. ``--workers`` is how many processes the search may use (default: the cores
available). ``python -m checkers`` runs the command in a child process that its parent watches
(:func:`run`): past the timeout plus a grace (5%, at least 0.5 s), or past ``--max-memory`` plus a
margin (a quarter, at least 32 MiB; without ``--max-memory``, 90% of the machine's memory) of growth
whatever the input (a file without newlines, a pipe that never ends), the command is stopped with one
line on stderr and exit 2.

``--semantics knossos`` reads the history as Knossos' models do (``checkers.models``): an ``ok`` read of
nil says nothing (FORMATS.md's default, ``strict``, reads it as "unset"), and every ``:fail`` is dropped,
a cas that returned false included; registers start at nil unless ``--initial`` says otherwise. A Jepsen
user gets Knossos' verdicts on Knossos' histories without knowing the differences. A history with an
operation its ``--model`` does not have is bad input (254), named with the models that have it.

Output: one line per (file, checker): ``FILE: CHECKER: valid|invalid|unknown: summary``; with ``--json``
one JSON object per line, shaped like a checker entry of ``results.json`` plus ``file`` and ``checker``.
Malformed input is one line on stderr naming the file, the line and the reason; warnings about the input
(time going backwards) are lines on stderr starting ``warning:``.

Exit code (ARCHITECTURE.md): 0 every verdict valid, 1 any invalid, 2 any unknown and none invalid (an
empty history is unknown: nothing to judge; valid with ``--semantics knossos``, as Knossos says), 254 bad input or arguments (also when other files were
checked), 255 the checker itself crashed (one line on stderr; the traceback too with
``CHECKERS_TRACEBACK=1``; never 1). This interface is a contract: keep it stable.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn, TextIO

from checkers.history import FORMATS, HistoryError
from checkers.jepsen import INDEPENDENT_CHOICES
from checkers.judge import Budgets, default_workers, judge_files
from checkers.models import SEMANTICS, ModelError, get_model
from checkers.registry import CHECKERS, MODEL_NAMES
from checkers.verdict import UNKNOWN, Valid, Verdict, exit_code, worst

BAD_INPUT = 254
CRASHED = 255
"""The checker itself failed: never 1, which says the history is invalid."""
WORDS = {True: "valid", False: "invalid", UNKNOWN: "unknown"}


class UsageError(Exception):
    """Bad arguments: reported as one line, exit 254."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's own exit code 2 would mean "unknown"
        raise UsageError(f"{message} (see python -m checkers {self.prog.split()[-1]} --help)")


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _bytes(text: str) -> int:
    """A byte count: a number with an optional K, M or G (powers of 1024)."""
    number, unit = text.strip().upper().removesuffix("B"), ""
    if number and number[-1] in _UNITS:
        number, unit = number[:-1], number[-1]
    try:
        return int(float(number) * _UNITS[unit])
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a byte count: {text!r} (e.g. 1073741824, 512M, 2G)") from None


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m checkers", description="Check histories for safety anomalies.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    check = commands.add_parser(
        "check",
        help="check one or more history files",
        description="Check history files; exit 0 valid, 1 invalid, 2 unknown, 254 bad input.",
    )
    check.add_argument(
        "files", nargs="+", metavar="FILE", help="history files (history.jsonl, history.edn) or run directories"
    )
    check.add_argument("--model", required=True, choices=MODEL_NAMES, help="what the operations mean")
    check.add_argument(
        "--checker",
        action="append",
        metavar="NAME",
        help=f"run only this checker (repeatable, or comma-separated): {', '.join(CHECKERS)}",
    )
    check.add_argument("--journals", metavar="DIR", help="node journals: DIR/<node>/journal.jsonl")
    check.add_argument("--json", action="store_true", help="print one JSON object per verdict")
    check.add_argument(
        "--format", default="auto", choices=FORMATS, help="history format (default: .edn by extension, else jsonl)"
    )
    check.add_argument(
        "--independent",
        default="auto",
        choices=INDEPENDENT_CHOICES,
        help="Jepsen histories: values are [key value] tuples of independent keys (default: detect)",
    )
    check.add_argument(
        "--initial", metavar="JSON", help="register models: the value before any write; multi-register: an object"
    )
    check.add_argument(
        "--semantics", default="strict", choices=SEMANTICS,
        help="how the models read the history: strict (FORMATS.md: a read of null means unset; default) or "
             "knossos (Knossos' models: a read of nil is unknown, every fail dropped)",
    )
    check.add_argument("--timeout", type=float, metavar="S", help="time budget for reading and checking a file")
    check.add_argument("--max-states", type=int, metavar="N", help="linearizability memo budget in states")
    check.add_argument(
        "--max-memory", type=_bytes, metavar="BYTES", help="linearizability memo budget in bytes (e.g. 512M, 2G)"
    )
    check.add_argument("--workers", type=int, metavar="N", help="processes for the linearizability search")
    check.add_argument(
        "--final-after",
        type=int,
        metavar="NS",
        help="durability: operations invoked after this time (ns) are the final reads",
    )
    commands.add_parser("list", help="list the checkers")
    return parser


def _checker_names(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in CHECKERS]
    if unknown:
        raise UsageError(f"unknown checker {unknown[0]!r}; choose from {', '.join(CHECKERS)}")
    return list(dict.fromkeys(names))


def _history_path(file: str) -> Path:
    """A history file, or in a directory ``history.jsonl`` (a run's) or else ``history.edn`` (Jepsen's
    store layout: ``store/<test>/<time>/history.edn``)."""
    path = Path(file)
    if not path.is_dir():
        return path
    ours = path / "history.jsonl"
    if ours.exists():
        return ours
    jepsen = path / "history.edn"
    return jepsen if jepsen.exists() else ours


def _emit(out: TextIO, file: str, name: str, verdict: Verdict, as_json: bool) -> None:
    if as_json:
        entry: dict[str, Any] = {"file": file, "checker": name, **verdict.to_json()}
        out.write(json.dumps(entry, default=_json_default, sort_keys=False) + "\n")
    else:
        summary = " ".join(verdict.summary.split())  # one line per verdict, whatever the checker wrote
        out.write(f"{file}: {name}: {WORDS[verdict.valid]}: {summary}\n")
    out.flush()


def _json_default(value: Any) -> Any:
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    return repr(value)


def _budgets(args: argparse.Namespace, remaining_s: float | None = None) -> Budgets:
    for option, value in (
        ("--timeout", args.timeout),
        ("--max-states", args.max_states),
        ("--max-memory", args.max_memory),
        ("--workers", args.workers),
    ):
        if value is not None and not value > 0:
            raise UsageError(f"{option} must be positive, not {value}")
    return Budgets(
        timeout_s=args.timeout if remaining_s is None else remaining_s,
        max_states=args.max_states,
        max_memory_bytes=args.max_memory,
        workers=args.workers or default_workers(),
    )


def _initial(args: argparse.Namespace) -> Any:
    if args.initial is None:
        return None
    try:
        initial = json.loads(args.initial)
    except json.JSONDecodeError:
        raise UsageError(f"--initial must be a JSON value, not {args.initial!r}") from None
    try:
        get_model(args.model, initial=initial, semantics=args.semantics)
    except ModelError as exc:
        raise UsageError(f"--initial: {exc}") from None
    return initial


def check(args: argparse.Namespace, out: TextIO, err: TextIO, started: float | None = None) -> int:
    """Run ``check``: every file, every selected checker; return the exit code. ``--timeout`` counts
    from ``started`` (on ``time.monotonic``; default: now) for the whole command."""
    started = time.monotonic() if started is None else started
    names = _checker_names(args.checker)
    _budgets(args)
    initial = _initial(args)
    valids: list[Valid] = []
    bad_input = False
    for file in args.files:
        remaining = None if args.timeout is None else started + args.timeout - time.monotonic()
        if remaining is not None and remaining <= 0:
            spent = time.monotonic() - started
            for name in names or ["linearizable"]:
                verdict = Verdict(
                    UNKNOWN, f"{name} cannot decide: the time budget of {args.timeout:g} s ran out "
                    f"({spent:.1f} s since the command started) before this file was read",
                )
                valids.append(verdict.valid)
                _emit(out, file, name, verdict, args.json)
            continue
        try:
            judgement = judge_files(
                _history_path(file),
                model=args.model,
                journals=args.journals if args.journals is not None else "auto",
                checkers=names,
                budgets=_budgets(args, remaining),
                final_after=args.final_after,
                history_format=args.format,
                independent=args.independent,
                initial=initial,
                semantics=args.semantics,
            )
        except HistoryError as exc:
            err.write(f"bad input: {' '.join(str(exc).split())}\n")
            bad_input = True
            continue
        for warning in judgement.warnings:
            err.write(f"warning: {warning}\n")
        for name, verdict in judgement.verdicts.items():
            if (verdict.stats or {}).get("error_type") == ModelError.__name__:
                err.write(f"bad input: {file}: {verdict.stats['error'].removeprefix('ModelError: ')}\n")
                bad_input = True
                continue
            if remaining is not None:  # the budget judge_files was given is what was left of --timeout
                verdict = replace(
                    verdict,
                    summary=verdict.summary.replace(
                        f"time budget of {remaining:g} s", f"time budget of {args.timeout:g} s"
                    ),
                )
            valids.append(verdict.valid)
            _emit(out, file, name, verdict, args.json)
    if bad_input:
        return BAD_INPUT
    return exit_code(worst(valids))


def crash_line(exc: BaseException) -> str:
    """One line for a crash: the exception and where it was raised (the traceback with
    ``CHECKERS_TRACEBACK=1``)."""
    where = ""
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        where = f" (at {Path(last.filename).name}:{last.lineno} in {last.name})"
    message = " ".join(str(exc).split())[:300]
    return f"error: the checker crashed (exit 255): {type(exc).__name__}: {message}{where}\n"


def main(
    argv: Sequence[str] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    started: float | None = None,
) -> int:
    """The command line; returns the exit code (see the module docstring). ``started``: when the
    command began, on ``time.monotonic`` (``--timeout`` counts from it; default: now)."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = _parser().parse_args(argv)
        if args.command == "list":
            for name, checker in CHECKERS.items():
                out.write(f"{name}: {checker.description}\n")
            return 0
        return check(args, out, err, started)
    except UsageError as exc:
        err.write(f"error: {exc}\n")
        return BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - whatever escaped is a crash, reported as one, not as a verdict
        if os.environ.get("CHECKERS_TRACEBACK"):
            traceback.print_exc(file=err)
        err.write(crash_line(exc))
        return CRASHED


# -- the command as a process: budgets that hold whatever the input -----------------------------------

POLL_S = 0.02
"""How often the supervising process looks at the command's time and memory in its first second."""
POLL_LATER_S = 0.05
"""How often after that: each look costs CPU time (looking every 0.02 s cost a minute's run more than a
CPU second)."""
FAMILY_EVERY_S = 0.25
"""How often the supervising process looks for new worker processes (it reads their memory every poll)."""


def process_start() -> float:
    """When this process started, on ``time.monotonic`` (from ``/proc/self/stat``; now, elsewhere)."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        elapsed = time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / ticks
    except (OSError, ValueError, IndexError, AttributeError):
        return now
    return now - elapsed if 0 <= elapsed < 3600 else now


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (``/proc/PID/task/*/children``)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children", encoding="ascii") as children:
                    todo.extend(int(child) for child in children.read().split())
        except (OSError, ValueError):
            continue
    return found


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _memory_cap(max_memory: int | None) -> int:
    """Bytes the command may grow by: ``--max-memory`` plus a margin (a quarter, at least 32 MiB: the
    search's memo is held to ``--max-memory`` itself), else 90% of the machine's memory."""
    if max_memory is not None:
        return max_memory + max(max_memory // 4, 32 << 20)
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * _PAGE * 0.9)
    except (OSError, ValueError):
        return 1 << 62


def run(argv: Sequence[str] | None = None, started: float | None = None) -> int:
    """``python -m checkers``: :func:`main` in a child process, which this one watches: past the
    ``--timeout`` (from ``started``, plus a grace of 5% or 0.5 s) or the memory budget
    (:func:`_memory_cap`) the child and its workers are ended, with one line on stderr and exit 2;
    a child that dies of a signal is a crash, exit 255 with one line."""
    argv = list(sys.argv[1:] if argv is None else argv)
    started = process_start() if started is None else started
    try:
        args = _parser().parse_args(argv)
    except UsageError:
        args = None  # main says what is wrong
    except SystemExit as exc:  # --help: printed already
        return exc.code if isinstance(exc.code, int) else 0
    if args is None or args.command != "check" or not hasattr(os, "fork"):
        return main(argv, started=started)
    timeout = args.timeout if args.timeout is not None and args.timeout > 0 else None
    cap = _memory_cap(args.max_memory)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        code = CRASHED
        try:
            _die_with_parent()
            code = main(argv, started=started)
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException as exc:  # noqa: BLE001 - a child must leave through os._exit
            try:
                sys.stderr.write(crash_line(exc))
                sys.stderr.flush()
            except BaseException:  # noqa: BLE001, S110 - nothing left to report with
                pass
        finally:
            os._exit(code)
    return _watch(pid, started, timeout, cap, args.max_memory)


def _die_with_parent() -> None:
    """Linux: this process is killed when its parent dies (a supervisor killed by SIGTERM)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _watch(pid: int, started: float, timeout: float | None, cap: int, max_memory: int | None) -> int:
    hard_stop = None if timeout is None else started + timeout + max(0.5, 0.05 * timeout)
    baseline = _rss(pid)
    watching = time.monotonic()
    family: list[int] = []
    found = watching - FAMILY_EVERY_S
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                if os.WIFEXITED(status):
                    return os.WEXITSTATUS(status)
                signum = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
                sys.stderr.write(f"error: the checker crashed (exit 255): killed by signal {signum}\n")
                return CRASHED
            now = time.monotonic()
            if hard_stop is not None and now > hard_stop:
                _end(pid)
                sys.stderr.write(
                    f"error: the time budget of {timeout:g} s ran out: the command was stopped after "
                    f"{now - started:.1f} s (exit 2)\n"
                )
                return 2
            if now - found >= FAMILY_EVERY_S:
                family, found = _descendants(pid), now
            grown = sum(max(0, _rss(p) - baseline) for p in family)
            if grown > cap:
                _end(pid)
                budget = f"--max-memory {max_memory:,} bytes" if max_memory is not None else "90% of the memory"
                sys.stderr.write(
                    f"error: the memory budget ({budget}) ran out: the command had grown by "
                    f"{grown / 2**20:,.0f} MiB and was stopped (exit 2)\n"
                )
                return 2
            time.sleep(POLL_S if now - watching < 1 else POLL_LATER_S)
    except KeyboardInterrupt:
        _end(pid)
        return 130


def _end(pid: int) -> None:
    """Kill ``pid`` and every process below it, and reap ``pid``."""
    for process in reversed(_descendants(pid)):
        try:
            os.kill(process, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
