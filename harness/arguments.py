"""The command-line arguments that define a test, declared once for ``harness run`` and ``harness simulate``.

Both commands build the same :class:`~harness.spec.TestSpec` from the same flags (:func:`add_test_arguments`,
:func:`spec_from_args`); ``harness run`` adds where the nodes run (``--platform``, ``--hosts``,
``--image``), ``harness simulate`` what to explore (``--seeds``, ``--replay``, ...). The chosen DB's
options become flags too (:func:`add_db_arguments`: ``--db-opt NAME=VALUE``, and the shortcut flags an
option declares, e.g. ``--mode``), which is why the command line is parsed in two steps: the DB named by
``--db`` is loaded first (:func:`db_argument`), then the full parser is built with its options.
"""

from __future__ import annotations

import argparse
import secrets
from collections.abc import Sequence
from typing import Any

from checkers.registry import CHECKERS
from harness.db.plugin import DBPlugin, PluginError, installed
from harness.pacing import DEFAULT_STORM_PACING, STORM_PACINGS
from harness.spec import LIMITS, ConfigError, TestSpec
from harness.subcommand import count, fault_packages, rate, seconds
from nemesis.faults import LEADER_GROUP_SELECTORS
from nemesis.generator import STORMS, nemesis_names
from workloads.generator import parse_workload_options, workload_names, workload_options
from workloads.ops import CLIENT_BINDINGS

DEFAULT_NEMESIS = "partition,kill,pause,clock"


def default_nemesis_of(plugin: DBPlugin | None) -> str:
    """What ``--nemesis`` is when not given: the DB plugin's ``default_nemesis`` if it declares one, else
    :data:`DEFAULT_NEMESIS`."""
    if plugin is None or plugin.default_nemesis is None:
        return DEFAULT_NEMESIS
    return ",".join(plugin.default_nemesis) or "none"


def add_test_arguments(parser: argparse.ArgumentParser, plugin: DBPlugin | None, *, db_required: bool) -> None:
    """The flags of a test (DB, workload, nemesis, timings, seed, store), and the DB's options."""
    dbs = ", ".join(installed()) or "none installed"
    parser.add_argument("--db", required=db_required, default=None, metavar="NAME",
                        help=f"the system under test: an installed DB plugin ({dbs}) or package.module:factory")
    parser.add_argument("--nodes", type=count, default=5, help="number of nodes (default 5)")
    parser.add_argument("--workload", default=None,
                        help=f"workload ({', '.join(workload_names())}; default register)")
    default_nemesis = default_nemesis_of(plugin)
    whose = "" if default_nemesis == DEFAULT_NEMESIS else f", the {plugin.name} DB's"  # type: ignore[union-attr]
    parser.add_argument("--workload-opt", dest="workload_opts", action="append", default=[], metavar="NAME=VALUE",
                        help="an option of the workload (repeatable): "
                             + "; ".join(f"{name}: " + ", ".join(o.name for o in workload_options(name))
                                         for name in workload_names())
                             + " (docs/workloads.md)")
    parser.add_argument("--nemesis", default=None,
                        help=f"comma-separated fault packages, or none (default {default_nemesis}{whose}); "
                             f"packages: {', '.join(nemesis_names())}")
    parser.add_argument("--time-limit", type=seconds, default=60.0,
                        help=f"seconds of chaos (default 60, at most {LIMITS['time_limit'].maximum:g})")
    parser.add_argument("--concurrency", type=count, default=10, help="client processes (default 10)")
    parser.add_argument("--rate", type=rate, default=10.0,
                        help="operations per second per client process (0: as fast as possible; default 10)")
    parser.add_argument("--nemesis-interval", type=seconds, default=10.0,
                        help=f"mean seconds between nemesis operations (default 10, at least "
                             f"{LIMITS['nemesis_interval'].minimum:g})")
    parser.add_argument("--op-timeout", type=seconds, default=5.0, help="seconds per operation (default 5)")
    parser.add_argument("--client-binding", choices=CLIENT_BINDINGS, default="leader",
                        help="where each client's operations go first: leader (follow the leader, default) or "
                             "node (worker s stays at node s mod n, Jepsen's binding; docs/workloads.md)")
    parser.add_argument("--leader-group", default="most", metavar="SELECTOR",
                        help=f"where the system has a leader per group (shard, partition, queue): whose leader "
                             f"faults aimed at the leader hit: {', '.join(LEADER_GROUP_SELECTORS)} (the node "
                             "leading the most groups, default; a random group's leader; the cluster-level "
                             "leader) or a group's name (group:NAME); docs/nemesis.md")
    parser.add_argument("--storm-pacing", default=DEFAULT_STORM_PACING, metavar="HOW",
                        help=f"election storms ({', '.join(STORMS)}): {' or '.join(STORM_PACINGS)}: each step at "
                             "its drawn offset, or waiting for the system: a heal for a leader in a newer term "
                             "(the successor of the leader it took away, or a ring's), the next fault for "
                             f"operations served again (bounded; docs/nemesis.md); default {DEFAULT_STORM_PACING}")
    parser.add_argument("--min-coverage", type=float, default=None, metavar="SHARE",
                        help="make a valid run unknown (exit 2) when it applied less than this share (0-1) of "
                             "its scheduled faults; without it such a run is only flagged under-exercised "
                             "(below 0.5, or a fault kind never applied)")
    parser.add_argument("--recovery-timeout", type=seconds, default=30.0,
                        help="seconds the final phase waits for a recovered leader, and for each node to catch up "
                             "(default 30)")
    parser.add_argument("--leader-timeout", type=seconds, default=30.0,
                        help="seconds to wait for a first leader before the workload starts (default 30)")
    parser.add_argument("--checkers", default=None, metavar="NAMES",
                        help=f"comma-separated subset of the workload's checkers ({', '.join(CHECKERS)})")
    parser.add_argument("--store", default="store", help="store directory (default ./store)")
    parser.add_argument("--name", default=None, help="test name in the store (default from the options)")
    add_db_arguments(parser, plugin)


def add_db_arguments(parser: argparse.ArgumentParser, plugin: DBPlugin | None) -> None:
    """``--db-opt``, and the chosen plugin's options in ``--help`` with the shortcut flags they declare."""
    parser.add_argument("--db-opt", dest="db_opts", action="append", default=[], metavar="NAME=VALUE",
                        help="an option of the DB adapter (repeatable); harness dbs lists each DB's options")
    parser.set_defaults(plugin=plugin)
    if plugin is None:
        return
    group = parser.add_argument_group(
        f"options of the {plugin.name} DB (--db-opt NAME=VALUE, or the flag shown)",
        "\n".join(option.describe() for option in plugin.options) or "none",
    )
    for option in plugin.options:
        if option.flag:
            group.add_argument(option.flag, dest=f"db_flag_{option.name}", action="append", default=[],
                               metavar="VALUE", help=option.help)


def db_options_from_args(args: argparse.Namespace, plugin: DBPlugin) -> dict[str, Any]:
    """The DB options given on the command line: ``--db-opt`` pairs and the plugin's shortcut flags."""
    raw = plugin.parse_args(args.db_opts)
    for option in plugin.options:
        for text in getattr(args, f"db_flag_{option.name}", []) or []:
            plugin.add_text(raw, option.name, text)
    return raw


def spec_from_args(
    args: argparse.Namespace, plugin: DBPlugin | None = None, *, seed: int | None = None, **fields: Any
) -> TestSpec:
    """The spec the arguments describe; ``fields`` set what the command decides itself (the platform)."""
    plugin = plugin if plugin is not None else args.plugin
    try:
        db_options = db_options_from_args(args, plugin) if plugin is not None else {}
    except PluginError as exc:
        raise ConfigError(str(exc)) from None
    checkers = None if args.checkers is None else tuple(n.strip() for n in args.checkers.split(",") if n.strip())
    if args.checkers is not None and not checkers:
        raise ConfigError(f"--checkers {args.checkers!r} names no checker: name some of {', '.join(CHECKERS)}, "
                          "or leave it out for all of the workload's")
    if args.nemesis is not None and not args.nemesis.replace(",", "").strip():
        raise ConfigError(f"--nemesis {args.nemesis!r} names no fault package: name some, or none for a run "
                          "without faults")
    workload = args.workload or "register"
    try:
        workload_opts = parse_workload_options(workload, getattr(args, "workload_opts", None) or [])
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if seed is None:
        seed = args.seed if getattr(args, "seed", None) is not None else secrets.randbelow(2**31)
    values: dict[str, Any] = dict(
        seed=seed,
        db=args.db,
        nodes=args.nodes,
        workload=workload,
        workload_options=workload_opts,
        nemesis=fault_packages(args.nemesis if args.nemesis is not None else default_nemesis_of(plugin)),
        time_limit=args.time_limit,
        concurrency=args.concurrency,
        db_options=db_options,
        store=args.store,
        name=args.name,
        op_timeout=args.op_timeout,
        recovery_timeout=args.recovery_timeout,
        leader_timeout=args.leader_timeout,
        nemesis_interval=args.nemesis_interval,
        rate=args.rate,
        checkers=checkers,
        client_binding=args.client_binding,
        leader_group=args.leader_group,
        storm_pacing=args.storm_pacing,
        min_coverage=args.min_coverage,
    )
    for name in ("platform", "hosts", "image", "node_memory", "node_pids"):
        if hasattr(args, name):
            values[name] = getattr(args, name)
    values.update(fields)
    return TestSpec(**values)


def db_argument(argv: Sequence[str], commands: Sequence[str]) -> tuple[str | None, bool]:
    """The value of ``--db`` in ``argv`` for one of ``commands`` (read before parsing, so that the plugin's
    options can be part of the parser), and whether ``argv`` is one of those commands at all."""
    if not argv or argv[0] not in commands:
        return None, False
    for i, word in enumerate(argv):
        if word == "--":
            break
        if word == "--db" and i + 1 < len(argv):
            return argv[i + 1], True
        if word.startswith("--db="):
            return word.partition("=")[2], True
    return None, True
