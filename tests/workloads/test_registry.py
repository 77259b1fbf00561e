"""The workload registry: each workload module registers its class where it declares it, the registry
discovers the package's modules, and its order (``--workload``'s choices) does not depend on import order."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import workloads
from workloads.generator import WORKLOADS, discover_workloads, workload_names
from workloads.ops import register_workload

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def registry() -> Iterator[None]:
    """Undo what a test registers."""
    saved = dict(WORKLOADS)
    yield
    WORKLOADS.clear()
    WORKLOADS.update(saved)


def workload_class(name: str) -> type:
    return type(f"W_{name}", (), {"name": name, "__module__": __name__})


def test_every_workload_is_registered_by_the_module_of_the_package_that_declares_it() -> None:
    for name, cls in WORKLOADS.items():
        assert cls.__module__.rpartition(".")[0] == workloads.__name__, name
        assert getattr(cls, "name", None) == name
    assert discover_workloads() == workload_names() == tuple(WORKLOADS)


def test_a_fresh_interpreter_discovers_the_same_workloads_in_the_same_order_whatever_it_imports_first() -> None:
    code = "import workloads.log, workloads.queue; from workloads.generator import workload_names; print(workload_names())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    assert out.strip() == repr(workload_names())


def test_unnumbered_workloads_come_after_the_numbered_ones_by_name_and_names_are_unique(registry: None) -> None:
    bundled = list(WORKLOADS)
    for name in ("zeta", "alpha"):
        register_workload()(workload_class(name))
    first = register_workload(order=0)(workload_class("first"))
    assert list(WORKLOADS) == ["first", *bundled, "alpha", "zeta"]
    assert register_workload(order=0)(first) is first  # the same class again: no change
    assert list(WORKLOADS) == ["first", *bundled, "alpha", "zeta"]
    with pytest.raises(ValueError, match="workload 'alpha' is registered already"):
        register_workload()(type("Other", (), {"name": "alpha"}))
    with pytest.raises(ValueError, match="declares its name"):
        register_workload()(type("Nameless", (), {}))
