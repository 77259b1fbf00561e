"""``python -m checkers``: check history files from the command line.

    python -m checkers check FILE... --model register|cas-register|kv|queue
                       [--checker NAME]... [--journals DIR] [--json] [--timeout S] [--final-after NS]
    python -m checkers list

``FILE`` is a ``history.jsonl`` in FORMATS.md's format (ours, or converted from Jepsen/Knossos or
Porcupine) or a run directory holding one. Journals come from ``--journals DIR`` (a run directory or its
``nodes/``), else from ``nodes/*/journal.jsonl`` beside the history when present. Without ``--checker``,
every checker that applies to the input runs (see :mod:`checkers.registry`).

Output: one line per (file, checker): ``FILE: CHECKER: valid|invalid|unknown: summary``; with ``--json``
one JSON object per line, shaped like a checker entry of ``results.json`` plus ``file`` and ``checker``.
Malformed input is one line on stderr naming the file, the line and the reason.

Exit code (ARCHITECTURE.md): 0 every verdict valid, 1 any invalid, 2 any unknown and none invalid, 254
bad input or arguments (also when other files were checked). This interface is a contract: keep it stable.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from checkers.history import HistoryError, JournalEvent, load_history, load_journals
from checkers.registry import CHECKERS, MODEL_NAMES, CheckInput, applicable, run_checker
from checkers.verdict import UNKNOWN, Valid, Verdict, exit_code, worst

BAD_INPUT = 254
WORDS = {True: "valid", False: "invalid", UNKNOWN: "unknown"}


class UsageError(Exception):
    """Bad arguments: reported as one line, exit 254."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's own exit code 2 would mean "unknown"
        raise UsageError(f"{message} (see python -m checkers {self.prog.split()[-1]} --help)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m checkers", description="Check histories for safety anomalies.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    check = commands.add_parser(
        "check",
        help="check one or more history files",
        description="Check history files; exit 0 valid, 1 invalid, 2 unknown, 254 bad input.",
    )
    check.add_argument("files", nargs="+", metavar="FILE", help="history.jsonl files or run directories")
    check.add_argument("--model", required=True, choices=MODEL_NAMES, help="what the operations mean")
    check.add_argument(
        "--checker",
        action="append",
        metavar="NAME",
        help=f"run only this checker (repeatable, or comma-separated): {', '.join(CHECKERS)}",
    )
    check.add_argument("--journals", metavar="DIR", help="node journals: DIR/<node>/journal.jsonl")
    check.add_argument("--json", action="store_true", help="print one JSON object per verdict")
    check.add_argument("--timeout", type=float, metavar="S", help="time budget of the linearizability check")
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


def _journals_for(history_path: Path, journals_dir: str | None) -> dict[str, list[JournalEvent]] | None:
    if journals_dir is not None:
        return load_journals(journals_dir)
    beside = history_path.parent / "nodes"
    if any(beside.glob("*/journal.jsonl")):
        return load_journals(beside)
    return None


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


def check(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``check``: every file, every selected checker; return the exit code."""
    names = _checker_names(args.checker)
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, not {args.timeout}")
    valids: list[Valid] = []
    bad_input = False
    for file in args.files:
        path = _history_path(file)
        try:
            history = load_history(path)
            journals = _journals_for(path, args.journals)
        except HistoryError as exc:
            err.write(f"bad input: {exc}\n")
            bad_input = True
            continue
        inp = CheckInput(
            history=history,
            model=args.model,
            journals=journals,
            timeout_s=args.timeout,
            final_after=args.final_after,
        )
        for name in names if names is not None else applicable(inp):
            verdict = run_checker(name, inp)
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
