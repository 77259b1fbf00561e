"""The nats-server binary the NATS adapter's ``docker`` tests upload (the container fixtures are the
suite's, ``tests/conftest.py``)."""

from __future__ import annotations

import pytest

from adapters.nats.install import NatsBinary, NatsInstallError, find_binary


@pytest.fixture(scope="session")
def nats_binary() -> NatsBinary:
    """The cached Debian nats-server (scripts/setup.sh fetches it); a test fails, never skips, without it."""
    try:
        return find_binary()
    except NatsInstallError as exc:
        pytest.fail(str(exc), pytrace=False)
