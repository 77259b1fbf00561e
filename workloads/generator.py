"""Choosing a workload by name, and planning its operations as pure data.

* :func:`workload_names` / :func:`make_workload`: the registry (``register``, ``queue``, ``log``); an unknown
  name raises ``ValueError`` listing the valid ones. Nothing here lists the workloads: each module of the
  package registers its own (``workloads.ops.register_workload``), and :func:`discover_workloads`, run when
  this module is imported, imports every module of the package so they have.
* :func:`workload_checkers` / :func:`workload_model`: what a workload declares on its class (its checkers,
  its model), asked by name: how the judges, the direct one and the analysis, learn which checkers judge a
  stored run of it. :func:`workloads_for`: the workloads a client that runs given operations serves.
* :func:`workload_options` / :func:`parse_workload_options` / :func:`check_workload_options`: the options a
  user may set on each workload (its class's ``options``), from ``NAME=VALUE`` text or a suite's table.
* :func:`workload_contract` / :func:`declared_contract`: what a workload lets the system under test
  declare about itself (the queue's :class:`~workloads.queue.Delivery`), read from the DB adapter.
* :func:`plan`: the operations each process would be handed within a time limit if every operation
  took no time (an upper bound), as pure data for ``schedule.jsonl`` and the simulator.

The interpreter (``harness.interpreter``) drives a workload directly: it takes each process's
``stream(process)``, waits each op's ``think`` on its own clock, and calls ``final_ops(node, keys)`` with
the keys the run used. Nothing here reads a clock or draws randomness on its own: the RNG is an argument.
"""

from __future__ import annotations

import importlib
import pkgutil
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import workloads
from workloads.ops import WORKLOADS, Op, Workload, WorkloadOption


def discover_workloads() -> tuple[str, ...]:
    """Import every module of the ``workloads`` package (pkgutil, in name order; a module imported already
    is not run again), so that each workload module has registered its class; the workload names, in
    registry order. Run when this module is imported; call it again after a directory joins the package's
    ``__path__`` (what tests/harness/test_adding_a_workload.py does)."""
    for module in pkgutil.iter_modules(workloads.__path__, f"{workloads.__name__}."):
        importlib.import_module(module.name)
    return workload_names()


def workload_names() -> tuple[str, ...]:
    """The valid workload names."""
    return tuple(WORKLOADS)


def workload_checkers(name: str | None) -> tuple[str, ...] | None:
    """The checkers the workload called ``name`` declares (its class's ``checkers``); ``None`` for no name
    or an unknown one."""
    checkers = getattr(WORKLOADS.get(name or ""), "checkers", None)
    return None if checkers is None else tuple(checkers)


def workload_model(name: str | None) -> str | None:
    """The model the workload called ``name`` declares (its class's ``model``); ``None`` for no name or an
    unknown one."""
    model = getattr(WORKLOADS.get(name or ""), "model", None)
    return model if isinstance(model, str) else None


def workloads_for(operations: Iterable[str]) -> tuple[str, ...]:
    """The registered workloads a client that runs ``operations`` can serve: those whose declared
    ``operations`` (what their client must implement) it runs all of, in registry order."""
    runs = set(operations)
    return tuple(name for name, factory in WORKLOADS.items() if set(getattr(factory, "operations", ())) <= runs)


def workload_options(name: str) -> tuple[WorkloadOption, ...]:
    """The options the workload called ``name`` lets a user set (none for an unknown name)."""
    return tuple(getattr(WORKLOADS.get(name), "options", ()))


def workload_contract(name: str) -> type | None:
    """The contract an adapter may declare for the workload called ``name`` (its class's ``contract``: a
    frozen dataclass with an ``attribute`` naming the DB's class attribute that declares it), or ``None``."""
    return getattr(WORKLOADS.get(name), "contract", None)


def declared_contract(name: str, db: object) -> Any:
    """What ``db`` declares for the workload called ``name``: its attribute named by the contract, else the
    contract's default; ``None`` for a workload without a contract. ValueError naming a declaration of the
    wrong type."""
    contract = workload_contract(name)
    if contract is None:
        return None
    declared = getattr(db, contract.attribute, None)
    if declared is None:
        return contract()
    if not isinstance(declared, contract):
        raise ValueError(f"the DB adapter's {contract.attribute} must be a {contract.__module__}.{contract.__name__}, "
                         f"not {type(declared).__name__}")
    return declared


def check_workload_options(name: str, options: Mapping[str, Any]) -> None:
    """ValueError naming the first option ``name``'s workload does not declare, or whose value has the wrong
    type (the constructor judges ranges); nothing to check for an unknown workload (its name is refused when
    it is made)."""
    if name not in WORKLOADS:
        return
    declared = {option.name: option for option in workload_options(name)}
    for key, value in options.items():
        if key not in declared:
            known = ", ".join(declared) or "none"
            raise ValueError(f"workload {name} has no option {key!r}; its options: {known}")
        declared[key].check(value)


def parse_workload_options(name: str, pairs: Sequence[str]) -> dict[str, Any]:
    """The options ``NAME=VALUE`` pairs (``--workload-opt``) give the workload called ``name``; a later
    pair overrides an earlier one of the same name."""
    declared = {option.name: option for option in workload_options(name)}
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--workload-opt {pair!r}: write NAME=VALUE, e.g. keys=3")
        if name in WORKLOADS and key not in declared:
            known = ", ".join(declared) or "none"
            raise ValueError(f"--workload-opt {pair!r}: workload {name} has no option {key!r}; its options: {known}")
        try:
            options[key] = declared[key].parse(text) if key in declared else text
        except ValueError as exc:
            raise ValueError(f"--workload-opt {pair!r}: {exc}") from None
    return options


def make_workload(name: str, rng: random.Random, *, contract: Any = None, **options: Any) -> Workload:
    """The workload called ``name``, seeded from ``rng``; ``options`` go to its constructor, and so does
    ``contract`` (what the system declares, :func:`declared_contract`) when given."""
    try:
        factory = WORKLOADS[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r}; valid: {', '.join(workload_names())}") from None
    if contract is not None:
        options = {**options, "contract": contract}
    try:
        return factory(rng, **options)
    except TypeError as exc:
        raise ValueError(f"workload {name}: {exc}") from None


def plan(
    workload: Workload, processes: Iterable[int], time_limit: float, max_ops: int = 100_000
) -> dict[int, list[Op]]:
    """Each process's operations whose cumulative think time stays below ``time_limit`` (at most
    ``max_ops`` each): everything the process could invoke in the chaos phase if operations took no time."""
    if time_limit < 0:
        raise ValueError(f"time limit must be non-negative, not {time_limit!r}")
    planned: dict[int, list[Op]] = {}
    for process in processes:
        ops: list[Op] = []
        elapsed = 0.0
        for op in workload.stream(process):
            elapsed += op.think
            if elapsed >= time_limit or len(ops) >= max_ops:
                break
            ops.append(op)
        planned[process] = ops
    return planned


def script_lines(scripts: Mapping[int, Sequence[Op]]) -> list[dict[str, Any]]:
    """Each worker slot's operations as ``schedule.jsonl`` lines, in slot and then invocation order:
    ``{"process": "client", "slot", "index", ...Op.to_json()}`` (what a simulated run replays)."""
    return [{"process": "client", "slot": slot, "index": index, **op.to_json()}
            for slot in sorted(scripts) for index, op in enumerate(scripts[slot])]


def scripts_from_jsonl(lines: Iterable[Mapping[str, Any]]) -> dict[int, list[Op]]:
    """The client lines of a stored ``schedule.jsonl``, per worker slot, in order."""
    scripts: dict[int, list[tuple[int, Op]]] = {}
    for line in lines:
        if line.get("process") != "client":
            continue
        slot, index = line.get("slot"), line.get("index")
        if not isinstance(slot, int) or not isinstance(index, int):
            raise ValueError(f"a client schedule line needs integer 'slot' and 'index': {dict(line)!r}")
        scripts.setdefault(slot, []).append((index, Op.from_json(line)))
    return {slot: [op for _, op in sorted(ops, key=lambda pair: pair[0])] for slot, ops in sorted(scripts.items())}


discover_workloads()
