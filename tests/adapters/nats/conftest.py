"""The nats-server binary the NATS adapter's ``docker`` tests upload (the container fixtures are the suite's,
``tests/conftest.py``; how a download is found is the shipped adapters', ``tests/adapters/conftest.py``)."""

from __future__ import annotations

import pytest

from adapters.nats.install import NatsBinary
from tests.adapters.conftest import fetched


@pytest.fixture(scope="session")
def nats_binary() -> NatsBinary:
    """The cached Debian nats-server (scripts/setup.sh fetches it)."""
    return fetched("nats")
