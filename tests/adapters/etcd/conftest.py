"""The container fixtures of ``tests/harness/`` (engine, node image, platforms, leftover check, the run ids
of runs started through ``harness.run``) for the etcd adapter's ``docker`` tests, and the etcd binary
they upload."""

from __future__ import annotations

import pytest

from adapters.etcd.install import EtcdBinary, EtcdInstallError, find_binary
from tests.harness.conftest import docker_engine, one_node, start_platform  # noqa: F401 - fixtures
from tests.harness.test_run_docker import run_ids  # noqa: F401 - fixture


@pytest.fixture(scope="session")
def etcd_binary() -> EtcdBinary:
    """The cached Debian etcd (scripts/setup.sh fetches it); a test fails, never skips, without it."""
    try:
        return find_binary()
    except EtcdInstallError as exc:
        pytest.fail(str(exc), pytrace=False)
