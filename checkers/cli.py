"""``python -m checkers``: check history files from the command line.

    python -m checkers check FILE... --model MODEL [--checker NAME]... [--journals DIR] [--json]
                       [--format auto|jsonl|edn|jepsen-json] [--independent auto|yes|no] [--initial JSON]
                       [--timeout S] [--max-states N] [--max-memory BYTES] [--workers N] [--final-after NS]
    python -m checkers list

``FILE`` is a history in FORMATS.md's format (``history.jsonl``), a run directory holding one, or a
Jepsen history (``history.edn``, Knossos' EDN files, JSON exports of Jepsen operations): the format is
chosen by extension (``.edn``) unless ``--format`` says (see :mod:`checkers.jepsen` for the mapping).
Journals come from ``--journals DIR`` (a run directory or its ``nodes/``), else from
``nodes/*/journal.jsonl`` beside the history when present. Without ``--checker``, every checker that
applies to the input runs (see :mod:`checkers.registry`). Each file is judged by
:func:`checkers.judge.judge_files`, the path the harness's post-run check takes too.

Budgets: ``--timeout`` bounds reading and checking each file (wall seconds); ``--max-states`` and
``--max-memory`` (bytes, or with a K/M/G suffix) bound the linearizability search's memo; a key out of
budget is ``unknown`` with its name and the budget, the others are still decided. ``--workers`` is how
many processes the search may use (default: the cores available).

Output: one line per (file, checker): ``FILE: CHECKER: valid|invalid|unknown: summary``; with ``--json``
one JSON object per line, shaped like a checker entry of ``results.json`` plus ``file`` and ``checker``.
Malformed input is one line on stderr naming the file, the line and the reason; warnings about the input
(time going backwards) are lines on stderr starting ``warning:``.

Exit code (ARCHITECTURE.md): 0 every verdict valid, 1 any invalid, 2 any unknown and none invalid (an
empty history is unknown: nothing to judge), 254 bad input or arguments (also when other files were
checked), 255 the checker itself crashed (a traceback on stderr; never 1). This interface is a contract:
keep it stable.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from checkers.history import FORMATS, HistoryError
from checkers.jepsen import INDEPENDENT_CHOICES
from checkers.judge import Budgets, default_workers, judge_files
from checkers.models import ModelError, get_model
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
    path = Path(file)
    return path / "history.jsonl" if path.is_dir() else path


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


def _budgets(args: argparse.Namespace) -> Budgets:
    for option, value in (
        ("--timeout", args.timeout),
        ("--max-states", args.max_states),
        ("--max-memory", args.max_memory),
        ("--workers", args.workers),
    ):
        if value is not None and not value > 0:
            raise UsageError(f"{option} must be positive, not {value}")
    return Budgets(
        timeout_s=args.timeout,
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
        get_model(args.model, initial=initial)
    except ModelError as exc:
        raise UsageError(f"--initial: {exc}") from None
    return initial


def check(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``check``: every file, every selected checker; return the exit code."""
    names = _checker_names(args.checker)
    budgets = _budgets(args)
    initial = _initial(args)
    valids: list[Valid] = []
    bad_input = False
    for file in args.files:
        try:
            judgement = judge_files(
                _history_path(file),
                model=args.model,
                journals=args.journals if args.journals is not None else "auto",
                checkers=names,
                budgets=budgets,
                final_after=args.final_after,
                history_format=args.format,
                independent=args.independent,
                initial=initial,
            )
        except HistoryError as exc:
            err.write(f"bad input: {exc}\n")
            bad_input = True
            continue
        for warning in judgement.warnings:
            err.write(f"warning: {warning}\n")
        for name, verdict in judgement.verdicts.items():
            valids.append(verdict.valid)
            _emit(out, file, name, verdict, args.json)
    if bad_input:
        return BAD_INPUT
    return exit_code(worst(valids))


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The command line; returns the exit code (see the module docstring)."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = _parser().parse_args(argv)
        if args.command == "list":
            for name, checker in CHECKERS.items():
                out.write(f"{name}: {checker.description}\n")
            return 0
        return check(args, out, err)
    except UsageError as exc:
        err.write(f"error: {exc}\n")
        return BAD_INPUT
    except Exception:  # noqa: BLE001 - whatever escaped is a crash, reported as one, not as a verdict
        traceback.print_exc(file=err)
        err.write("error: the checker crashed (exit 255); the traceback is above\n")
        return CRASHED
