"""The ``counter`` workload's checker, an example kept in the tests: what a contributor's
``checkers/counter.py`` holds. ``tests/harness/test_adding_a_workload.py`` puts this directory on the
``checkers`` package's path; the registry discovers the module (its source calls ``register_checker``) and
the checker registers itself. Nothing in the project names it."""

from __future__ import annotations

from checkers.registry import Checker, CheckInput, register_checker
from checkers.verdict import UNKNOWN, Verdict


def check_counter(inp: CheckInput) -> Verdict:
    """Every read is at most what was added (acknowledged or maybe); every final read is at least what was
    acknowledged."""
    adds = [op for op in inp.history.ops if op.f == "add"]
    reads = [op for op in inp.history.ops if op.f == "read" and op.ok]
    finals = [op for op in reads if (op.extra or {}).get("final")]
    for key in sorted({op.key for op in adds + reads}):
        acked = sum(op.value for op in adds if op.key == key and op.ok)
        maybe = acked + sum(op.value for op in adds if op.key == key and op.type == "info")
        for op in reads:
            seen = op.output or 0
            if op.key == key and (seen > maybe or (op in finals and seen < acked)):
                return Verdict(False, f"{key}: read {seen}, but {acked}..{maybe} was added", counterexample=op.id)
    if not finals:
        return Verdict(UNKNOWN, "no final reads")
    return Verdict(True, f"{len(adds)} adds, {len(reads)} reads, {len(finals)} final reads agree")


def applies(inp: CheckInput) -> bool:
    """Whether the history has adds: a counter run's."""
    return any(op.f == "add" for op in inp.history.ops)


register_checker(Checker("counter", "reads see what was added", check_counter, applies))
