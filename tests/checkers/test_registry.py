"""The checker registry: a checker registers itself where it is declared, the registry discovers the
package's modules that do, and its order (the order ``results.json`` lists verdicts in) does not depend on
import order."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from checkers.registry import CHECKERS, Checker, CheckInput, discover_checkers, register_checker
from checkers.verdict import Verdict

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def registry() -> Iterator[None]:
    """Undo what a test registers."""
    saved = dict(CHECKERS)
    yield
    CHECKERS.clear()
    CHECKERS.update(saved)


def run(inp: CheckInput) -> Verdict:
    return Verdict(True, "fine")


def other_run(inp: CheckInput) -> Verdict:
    return Verdict(True, "fine")


def checker(name: str, runs=run) -> Checker:
    return Checker(name, "a test's", runs, lambda inp: False)


def test_discovery_finds_every_checker_and_loads_none_of_the_package_machinery() -> None:
    code = ("import sys, checkers.registry as r; print(list(r.CHECKERS)); "
            "print(sorted(m for m in sys.modules if m in ('checkers.cli', 'checkers.judge', 'checkers.edn')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    assert out.splitlines() == [repr(list(CHECKERS)), "[]"]
    assert discover_checkers() == tuple(CHECKERS)


def test_unnumbered_checkers_come_after_the_numbered_ones_by_name_and_names_are_unique(registry: None) -> None:
    bundled = list(CHECKERS)
    for name in ("zeta", "alpha"):
        register_checker(checker(name))
    register_checker(checker("first"), order=0)
    assert list(CHECKERS) == ["first", *bundled, "alpha", "zeta"]
    register_checker(checker("alpha"))  # the same checker again (its module imported anew): no change
    assert list(CHECKERS) == ["first", *bundled, "alpha", "zeta"]
    with pytest.raises(ValueError, match="checker 'alpha' is registered already"):
        register_checker(checker("alpha", other_run))
