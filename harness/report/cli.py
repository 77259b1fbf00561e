"""``harness report`` and ``harness serve``: the command-line faces of the reports.

    harness report [PATH...] [--store DIR] [--index-only] [--max-bars N]
    harness serve [--store DIR] [--port N] [--bind ADDR]

``harness report`` rebuilds pages from stored data only (``test.json``, ``history.jsonl``, the journals,
``results.json``; it runs no checker): each named run's ``report.html``, every run of a named suite and
its ``suite.html``, or, with no PATH, every run and suite of the store; then the store's ``index.html``.
``harness serve`` refreshes the index and serves the store on http://127.0.0.1:PORT/ (what it serves and
refuses: :mod:`harness.report.serve`); ``--bind ADDR`` serves on another address, which exposes the store
to everyone who can reach that address.

Exit codes: 0 done; 254 bad arguments (no such path, nothing stored there, a port in use, an address
that is not this machine's); 255 when a
page could not be rendered (the others are still written, and the error is printed).

``harness/cli.py`` registers these with :func:`add_report_parser` and :func:`add_serve_parser`; each
parser's ``handler`` default is the function that runs it (``handler(args, console, err) -> int``), as
for ``harness analyze``. ``python -m harness.report`` offers the two commands on their own.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.report.index import (
    SUITE_JSON,
    find_run_dirs,
    find_suite_dirs,
    write_index,
    write_suite_page,
)
from harness.report.render import write_report
from harness.report.serve import DEFAULT_PORT, HOST, serve
from harness.report.timeline import MAX_BARS
from harness.store import LATEST, TEST_JSON, is_store
from harness.subcommand import (
    EXIT_BAD_CONFIG,
    EXIT_CRASH,
    CommandParser,
    UsageError,
    count,
    port,
    run_command,
)


def add_report_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``harness report`` on ``subparsers`` (from ``ArgumentParser.add_subparsers``)."""
    parser = subparsers.add_parser(
        "report",
        help="rebuild report.html of stored runs, suite pages and the store's index.html",
        description="Rebuild the HTML pages from stored data (no checker runs): report.html of each named "
        "run (or of every run of a named suite or store), suite.html of suites, and the store's "
        "index.html. With no PATH: everything in the store. Exit 0 done, 254 bad input, 255 a page "
        "could not be rendered.",
    )
    parser.add_argument("paths", nargs="*", metavar="PATH", help="run directories, suite directories or stores")
    parser.add_argument("--store", default=None, metavar="DIR",
                        help="the store whose index.html to rebuild (default: the paths' own, else ./store)")
    parser.add_argument("--index-only", action="store_true", help="rebuild only the store's index.html")
    parser.add_argument("--max-bars", type=count, default=MAX_BARS, metavar="N",
                        help=f"operations drawn as bars before the report shows a window (default {MAX_BARS})")
    parser.set_defaults(handler=cmd_report)
    return parser


def add_serve_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``harness serve`` on ``subparsers``."""
    parser = subparsers.add_parser(
        "serve",
        help="serve the store's reports over HTTP on 127.0.0.1 for browsing",
        description="Refresh the store's index.html and serve the store (index, reports, run files) over "
        "HTTP, on 127.0.0.1 (this machine only) unless --bind says otherwise, until Ctrl-C. Only files "
        "inside the store are served (a symbolic link that leads out of it is refused), there are no "
        "directory listings (the index links every run), and on 127.0.0.1 a request naming another host "
        "is refused.",
    )
    parser.add_argument("--store", default="store", metavar="DIR", help="store directory (default ./store)")
    parser.add_argument("--port", type=port, default=DEFAULT_PORT,
                        help=f"TCP port (default {DEFAULT_PORT}; 0: any free port)")
    parser.add_argument("--bind", type=address, default=HOST, metavar="ADDR",
                        help=f"IP address to listen on (default {HOST}: this machine only). Any other address, "
                        "e.g. 0.0.0.0, EXPOSES THE WHOLE STORE to everyone who can reach it: no password, "
                        "no encryption")
    parser.add_argument("--quiet", action="store_true", help="do not log requests")
    parser.set_defaults(handler=cmd_serve)
    return parser


def address(text: str) -> str:
    """``--bind``: an IPv4 or IPv6 address."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an IP address (e.g. 127.0.0.1: this machine only; 0.0.0.0: every interface)"
        ) from None


def _store_of(path: Path) -> Path:
    """The store a run (``store/<test>/<run>``) or suite (``store/suites/<name>/<run>``) belongs to."""
    if (path / TEST_JSON).is_file():
        return path.parent.parent
    if (path / SUITE_JSON).is_file():
        return path.parent.parent.parent
    return path


def _suite_runs(suite_dir: Path, store: Path) -> list[Path]:
    try:
        data = json.loads((suite_dir / SUITE_JSON).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{suite_dir / SUITE_JSON} cannot be read: {exc}") from None
    runs = []
    for entry in data.get("runs") or [] if isinstance(data, dict) else []:
        path = entry.get("path") if isinstance(entry, dict) else entry
        if isinstance(path, str) and (store / path / TEST_JSON).is_file():
            runs.append(store / path)
    return runs


def select(paths: Sequence[str], store: str | None) -> tuple[Path, list[Path], list[Path]]:
    """(store, run directories, suite directories) named by ``paths`` (module docstring)."""
    if not paths:
        root = Path(store or "store")
        if not root.is_dir():
            raise UsageError(f"{root}: no such store directory; run harness run first, or pass --store DIR")
        runs, suites = find_run_dirs(root), [p.parent for p in find_suite_dirs(root)]
        if not runs and not suites:
            raise UsageError(f"{root} holds no runs and no suites (no <test>/<run>/{TEST_JSON}); run harness run first")
        return root, runs, suites
    runs: list[Path] = []
    suites: list[Path] = []
    stores: set[Path] = set()
    for text in paths:
        path = Path(text)
        if not path.is_dir():
            raise UsageError(f"{path}: no such directory; give a run directory (store/latest), a suite directory or a store")
        if (path / TEST_JSON).is_file():
            real = path.resolve() if path.name == LATEST or path.is_symlink() else path
            runs.append(real)
            stores.add(_store_of(real))
        elif (path / SUITE_JSON).is_file():
            suites.append(path)
            stores.add(_store_of(path))
            runs.extend(_suite_runs(path, _store_of(path)))
        else:
            found, found_suites = find_run_dirs(path), [p.parent for p in find_suite_dirs(path)]
            if not found and not found_suites:
                raise UsageError(f"{path} holds no stored run (no directory with {TEST_JSON}); give a run "
                                 "directory such as store/latest, a suite directory, or a store with runs")
            runs.extend(found)
            suites.extend(found_suites)
            stores.add(path)
    if store is not None:
        root = Path(store)
    else:
        resolved = {s.resolve() for s in stores}
        if len(resolved) > 1:
            raise UsageError("the paths come from more than one store; rebuild one store at a time or pass --store")
        root = next(iter(stores))
    return root, list(dict.fromkeys(runs)), list(dict.fromkeys(suites))


def cmd_report(args: argparse.Namespace, console: Console, err: Console) -> int:
    try:
        store, runs, suites = select(args.paths, args.store)
    except UsageError as exc:
        err.print(f"harness report: {exc}", markup=False, highlight=False)
        return EXIT_BAD_CONFIG
    failures = 0
    if not args.index_only:
        for run in runs:
            try:
                path = write_report(run, max_bars=args.max_bars)
            except Exception as exc:  # noqa: BLE001 - one broken run must not stop the others' pages
                failures += 1
                err.print(f"harness report: {run}: could not render: {type(exc).__name__}: {exc}", markup=False)
                err.print(traceback.format_exc(), markup=False, highlight=False)
            else:
                console.print(f"report  {path}", markup=False, highlight=False)
        for suite in suites:
            try:
                path = write_suite_page(suite)
            except Exception as exc:  # noqa: BLE001 - as above
                failures += 1
                err.print(f"harness report: {suite}: could not render: {type(exc).__name__}: {exc}", markup=False)
            else:
                console.print(f"suite   {path}", markup=False, highlight=False)
    if is_store(store):
        console.print(f"index   {write_index(store)}", markup=False, highlight=False)
    if failures:
        err.print(f"harness report: {failures} page(s) could not be rendered (exit 255); the rest were written",
                  markup=False)
        return EXIT_CRASH
    return 0


def cmd_serve(args: argparse.Namespace, console: Console, err: Console) -> int:
    store = Path(args.store)
    if not store.is_dir():
        err.print(f"harness serve: {store}: no such store directory; run harness run first, or pass --store DIR",
                  markup=False)
        return EXIT_BAD_CONFIG
    if not is_store(store):
        err.print(f"harness serve: {store} is not a store (no run, suite or dataset in it); pass the --store "
                  "directory your runs are in", markup=False)
        return EXIT_BAD_CONFIG
    write_index(store)
    log = None if args.quiet else (lambda line: console.print(line, markup=False, highlight=False))
    try:
        serve(store, args.port, announce=lambda line: console.print(line, markup=False, highlight=False), log=log,
              bind=args.bind)
    except OSError as exc:
        err.print(f"harness serve: cannot listen on {args.bind} port {args.port}: {exc.strerror or exc}; "
                  "pick another --port (or --bind an address of this machine)", markup=False)
        return EXIT_BAD_CONFIG
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness.report report|serve ...`` (the same commands as ``harness``)."""
    parser = CommandParser(prog="python -m harness.report", description="Reports of the chaos harness.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser, metavar="COMMAND")
    add_report_parser(commands)
    add_serve_parser(commands)
    return run_command(parser, argv)
