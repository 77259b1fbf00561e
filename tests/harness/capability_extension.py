"""A capability the harness does not ship, for the tests that prove an adapter survives the harness
growing one: ``DataFile`` (``data_file(deployment, node)``: the path of a node's data file) and the
nemesis ``truncate-tail`` that needs it with ``Process`` (kill a node, cut the tail of its data file,
restart it).

A test adds both to the registries with :func:`add` and ``monkeypatch.setitem`` (undone after the test).
Loaded as a pytest plugin (``-p capability_extension`` with this directory on ``PYTHONPATH``) the module
adds them for the whole session before any test module is imported: how a scaffolded package's own
tests run against a harness with one capability more.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import harness.db as harness_db

NEMESIS = "truncate-tail"
"""The nemesis that needs :class:`DataFile`."""


@runtime_checkable
class DataFile(Protocol):
    """Where a node keeps its data: the file ``truncate-tail`` cuts."""

    def data_file(self, deployment: harness_db.Deployment, node: str) -> str: ...


def add(setitem: Callable[[Any, Any, Any], None] = operator.setitem) -> None:
    """Register :class:`DataFile` and :data:`NEMESIS` in ``harness.db``'s registries through ``setitem``
    (``monkeypatch.setitem`` in a test)."""
    setitem(harness_db.CAPABILITY_METHODS, DataFile, harness_db.describe_capability(DataFile))
    setitem(harness_db.NEMESIS_CAPABILITIES, NEMESIS, (DataFile, harness_db.Process))


def pytest_configure(config: Any) -> None:
    """As a plugin: extend the harness for the session."""
    add()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """As a plugin: say in the output (``-q`` too) that the harness was extended, and still is."""
    if harness_db.NEMESIS_CAPABILITIES.get(NEMESIS) == (DataFile, harness_db.Process):
        terminalreporter.write_line(f"harness extended: capability DataFile, nemesis {NEMESIS}")
